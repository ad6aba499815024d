"""End-to-end: `pyinfra -y inventories/sim.py deploys/dspark.py` on a simulated node — the forum post's setup
served, benchmarked with SGLang's real client, archived, idempotent, rolled group by group, and refused where
it must be (issues "Serving role" and "Verify and reproduce")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sim_steps import (
    ServiceProbe,
    cluster_name,
    node_sh,
    out,
    paused_deploy,
    run_deploy,
    service_problems,
    session_suffix,
)

from hgxkit.cli import main as hgxkit_main

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("serve")
MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
FLASHINFER = "recipes/deepseek-v4-flash-dspark-flashinfer.yaml"
FAKE_HF_TOKEN = "hf_e2eTokenThatMustNeverBeWrittenAnywhere01"
ROUNDS_ENV = "HGXKIT_KILLED_REPLACE_ROUNDS"
QUICK = (
    "verify=false",
    "serve_health_interval=1",
)  # no benchmark; the unit and its follower poll every second  # make soak-killed: the killed-replace test, N rounds in a row


def containers() -> dict[str, dict[str, str]]:
    """name -> {id, started, spec, gpus} of the serving containers on the node."""
    raw = node_sh(CLUSTER, "docker inspect $(docker ps -aq --filter label=hgxkit.serve)", answer=True, check=True)
    result = {}
    for item in json.loads(raw):
        requests = item["HostConfig"].get("DeviceRequests") or [{}]
        result[item["Name"].lstrip("/")] = {
            "id": item["Id"],
            "started": item["State"]["StartedAt"],
            "running": str(item["State"]["Running"]),
            "spec": item["Config"]["Labels"].get("hgxkit.spec", ""),
            "recipe": item["Config"]["Labels"].get("hgxkit.recipe", ""),
            "gpus": ",".join(requests[0].get("DeviceIDs") or []),
            "args": " ".join(item.get("Args") or []),
        }
    return result


def grand_total(result: subprocess.CompletedProcess[str]) -> tuple[int, int, int, int]:
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(result))
    assert match, out(result)[-3000:]
    return tuple(0 if v == "-" else int(v) for v in match.groups())  # type: ignore[return-value]


def recipe_variant(tmp_path: Path, source: str, old: str, new: str, name: str) -> str:
    text = (ROOT / source).read_text()
    assert old in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(old, new).replace("name: deepseek-v4-flash-dspark-", f"name: {name}-", 1))
    return str(path)


@pytest.fixture(scope="module")
def served(sim_nodes, tmp_path_factory):
    """A node with 3 TiB of RAM (the post's HiCache ratio 4 on two TP4 groups needs ~2.5 TB) serving marlin."""
    sim_nodes(1, cluster=CLUSTER, memory_gib=3072)
    results = tmp_path_factory.mktemp("results")
    first = run_deploy(CLUSTER, "deploys/dspark.py", f"results_dir={results}", env={"HF_TOKEN": FAKE_HF_TOKEN})
    return first, results


def test_fresh_node_serves_the_post_and_archives_a_run(served) -> None:
    first, results = served
    assert first.returncode == 0, out(first)[-5000:]
    running = containers()
    # Docker's GPU driver puts NVIDIA_VISIBLE_DEVICES into the server process's environment (not Config.Env).
    visible = node_sh(CLUSTER, "docker exec deepseek-v4-flash-1 cat /proc/1/environ | tr '\\0' '\\n'", answer=True)
    assert "NVIDIA_VISIBLE_DEVICES=4,5,6,7" in visible.splitlines()
    assert {n: (c["gpus"], c["running"]) for n, c in running.items()} == {
        "deepseek-v4-flash-0": ("0,1,2,3", "True"),
        "deepseek-v4-flash-1": ("4,5,6,7", "True"),
    }
    for port in (5000, 5001):
        answer = node_sh(
            CLUSTER,
            f"curl -sS -m 60 http://127.0.0.1:{port}/v1/chat/completions -H 'Content-Type: application/json' "
            '-d \'{"model": "deepseek-v4-flash", "max_tokens": 8, "messages": [{"role": "user", '
            '"content": "hi"}]}\'',
            answer=True,
        )
        assert json.loads(answer)["choices"][0]["message"]["content"]
    (run_dir,) = [p for p in results.glob("node1/*") if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["simulated"] is True and summary["bench"] == "smoke" and summary["gates"] == []
    assert [(c["group"], c["input_len"], c["concurrency"], c["failed"]) for c in summary["cells"]] == [
        (0, 5000, 1, 0),
        (1, 5000, 1, 0),
    ]
    assert all(4.5 < c["accept_length"] < 6.0 for c in summary["cells"])
    fingerprint = json.loads((run_dir / "fingerprint.json").read_text())
    assert fingerprint["simulated"] is True and fingerprint["accelerators_per_node"] == 8
    assert fingerprint["serving"]["image_digest"].startswith("sha256:")
    assert fingerprint["serving"]["sglang_version"] == "0.5.23"
    assert re.fullmatch(r"[0-9a-f]{40}", fingerprint["model"]["commit"])
    # The engine's own report, made in the container by a unit on the host while the controller worked.
    assert "the engine's environment report (making; waited for)" in out(first)
    report = fingerprint["server_env_report"]  # check_env ran in group 0's container: its four GPUs, simulated
    assert "NVIDIA Topology" in report and "\nGPU3\t" in report and "GPU4" not in report, report[-2000:]
    assert "Traceback" not in report and "CUDA available: False" in report  # no real GPU: torch says so
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert FAKE_HF_TOKEN not in path.read_text(errors="replace")
    assert FAKE_HF_TOKEN not in out(first)


def test_second_run_changes_nothing(served) -> None:
    before = containers()
    again = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false")
    assert again.returncode == 0, out(again)[-4000:]
    ops, changed, errors, unchanged = grand_total(again)
    assert (changed, errors) == (0, 0) and unchanged == ops
    assert containers() == before  # same IDs, same start times


# What --dry must leave as it is: containers (not their uptime), images, and hgxkit's and Docker's files.
NODE_STATE = (
    "docker ps -a --no-trunc --format '{{.ID}} {{.Image}} {{.Names}} {{.CreatedAt}} {{.State}}' | sort; "
    "docker images --digests --no-trunc --format '{{.Repository}}:{{.Tag}} {{.Digest}} {{.ID}}' | sort; "
    "find /var/lib/hgxkit /etc/docker -printf '%p %y %s %m %T@\\n' | sort; "
    "find /var/lib/hgxkit /etc/docker -type f -exec sha256sum {} + | sort"
)


def test_full_bench_archives_repeats_intervals_telemetry_and_report(served, tmp_path) -> None:
    """`bench=full` on the post's matrix, cut to its first two cells (the run's length, not its kind): every
    cell of both groups measured 5 times (the full default, FULL_REPEATS), with intervals, per-cell telemetry and the HTML
    report in the archive."""
    import yaml

    data = yaml.safe_load((ROOT / MARLIN).read_text())
    data["matrix"]["cells"] = data["matrix"]["cells"][:2]
    kept = {cell["id"] for cell in data["matrix"]["cells"]}
    data["reference"]["cells"] = [cell for cell in data["reference"]["cells"] if cell["cell"] in kept]
    recipe = tmp_path / "marlin-two-cells.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    results = tmp_path / "results"
    run = run_deploy(
        CLUSTER, "deploys/verify.py", f"recipe={recipe}", "bench=full", "bench_output_len=16", f"results_dir={results}"
    )
    assert run.returncode == 0, out(run)[-4000:]
    (run_dir,) = [p for p in results.glob("node1/*") if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["bench"] == "full" and summary["simulated"] is True and summary["gates"] == []
    shapes = sorted((c["group"], c["input_len"], c["concurrency"]) for c in summary["cells"])
    assert shapes == [(0, 5000, 1), (0, 5000, 5), (1, 5000, 1), (1, 5000, 5)]
    for cell in summary["cells"]:
        assert len(cell["repeats"]) == 5 and cell["failed"] == 0
        assert len(cell["ttfts_ms"]) == 5 * cell["num_prompts"]  # pooled per-request samples of the 5 runs
        ttft = cell["intervals"]["ttft_mean_ms"]
        assert ttft["low"] is not None and ttft["low"] <= cell["ttft_mean_ms"] <= ttft["high"], ttft
        telemetry = cell["telemetry"]
        assert telemetry["simulated"] is True and len(telemetry["gpus"]) == 4  # the group's four GPUs
        assert telemetry["server"] is not None  # /metrics scraped while the cell ran (--enable-metrics)
        for name in telemetry["files"]:
            assert (run_dir / "telemetry" / name).stat().st_size > 0, name
    html = (run_dir / "report.html").read_text()
    assert "SIMULATED" in html and "<script src=" not in html and "95%" in html
    # The same containers as the first verify's: their environment report is read back, not made again.
    assert "the engine's environment report (kept; waited for)" in out(run)
    (first_dir,) = [p for p in served[1].glob("node1/*") if p.is_dir()]
    made = json.loads((first_dir / "fingerprint.json").read_text())["server_env_report"]
    assert json.loads((run_dir / "fingerprint.json").read_text())["server_env_report"] == made
    assert "hgxkit results show" in out(run)


def test_dry_run_on_a_converged_node_changes_nothing(served) -> None:
    before = node_sh(CLUSTER, NODE_STATE, answer=True, check=True)
    assert "deepseek-v4-flash-0" in before and "/var/lib/hgxkit/serve/image.json" in before
    dry = subprocess.run(
        [str(Path(sys.executable).parent / "pyinfra"), "--dry", "inventories/sim.py", "deploys/dspark.py"],
        cwd=ROOT,
        env={**os.environ, "HGXKIT_SIM_CLUSTER": CLUSTER, "PYINFRA_PROGRESS": "off"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert dry.returncode == 0, out(dry)[-4000:]
    assert node_sh(CLUSTER, NODE_STATE, answer=True, check=True) == before


def test_dry_run_of_another_recipe_names_each_replace_and_the_flag_that_differs(served) -> None:
    """`--dry` shows what a real run would do, per group, decided from facts at plan time: on a node
    serving marlin, the flashinfer recipe replaces both groups because of one flag; nothing changes."""
    before = node_sh(CLUSTER, NODE_STATE, answer=True, check=True)
    assert "deepseek-v4-flash-0" in before
    dry = subprocess.run(
        [
            str(Path(sys.executable).parent / "pyinfra"),
            "--dry",
            "inventories/sim.py",
            "deploys/dspark.py",
            "--data",
            f"recipe={FLASHINFER}",
        ],
        cwd=ROOT,
        env={**os.environ, "HGXKIT_SIM_CLUSTER": CLUSTER, "PYINFRA_PROGRESS": "off"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert dry.returncode == 0, out(dry)[-4000:]
    text = out(dry)
    for group in (0, 1):
        line = f"group {group}: replace container deepseek-v4-flash-{group} (--moe-runner-backend marlin -> flashinfer_mxfp4)"
        assert line in text, text[-4000:]
    assert "decided after pulling" not in text and "start container" not in text
    assert node_sh(CLUSTER, NODE_STATE, answer=True, check=True) == before


def test_hostile_recipes_are_refused_before_any_change(served, tmp_path) -> None:
    before = node_sh(CLUSTER, NODE_STATE, answer=True, check=True)
    marker = tmp_path / "pwned"
    injected = recipe_variant(
        tmp_path,
        MARLIN,
        "name_template: deepseek-v4-flash-{{group}}",
        f"name_template: 'x-{{{{group}}}};touch {marker};#'",
        "injected",
    )
    first = run_deploy(CLUSTER, "deploys/reproduce.py", "verify=false", f"recipe={injected}")
    assert first.returncode != 0 and "groups.name_template" in out(first), out(first)[-3000:]
    escape = recipe_variant(
        tmp_path, MARLIN, "  - --ipc=host\n", "  - --ipc=host\n  - --privileged\n  - -v /:/host\n", "escape"
    )
    second = run_deploy(CLUSTER, "deploys/reproduce.py", "verify=false", f"recipe={escape}")
    assert second.returncode != 0
    assert 'allow_docker_options: ["--privileged"]' in out(second) and "host-system-mount" in out(second)
    assert not marker.exists() and node_sh(CLUSTER, f"ls {marker} 2>&1").strip().endswith("No such file or directory")
    assert node_sh(CLUSTER, NODE_STATE, answer=True, check=True) == before


def test_a_killed_replace_finishes_and_a_second_run_is_refused(served, tmp_path) -> None:
    """Stop the controller the moment group 0's replace unit runs (it can go no further, yet holds the node's
    lock), run a second controller (refused, naming the first), then kill the first (SIGKILL of its process
    group); the replace finishes on the node without it. Group 1 is never touched (same container, same start)
    and answers every health check and inference request from before the first run starts until the replace
    is over; a re-run converges: one container per group, the new spec, nothing set aside.

    The controller is paused by the test-tree hook (tests/faults/hook), not by reading its output and then
    running the second controller: under load that second run took longer than group 0's replace, the
    first controller went on to replace group 1 (a correct rollout step), and its restart was read as
    group 1 failing."""
    rounds = int(os.environ.get(ROUNDS_ENV, "1"))
    for done in range(rounds):
        killed_replace_round(tmp_path, ("info", "debug")[done % 2])
        if rounds > 1:  # the soak's count (make soak-killed), past pytest's capture on the terminal's stderr
            os.write(2, f"\nkilled replace: {done + 1} of {rounds} rounds passed in a row\n".encode())


def killed_replace_round(tmp_path: Path, level: str) -> None:
    """One round: the recipe with `--log-level LEVEL` added (another level than the node serves)."""
    variant = recipe_variant(
        tmp_path, MARLIN, "  - --enable-metrics\n", f"  - --enable-metrics\n  - --log-level {level}\n", "relogged"
    )
    untouched = containers()["deepseek-v4-flash-1"]
    with ServiceProbe(CLUSTER, [5001]) as probe:
        opened = time.time_ns()
        first = paused_deploy(
            CLUSTER, "deploys/dspark.py", *QUICK, f"recipe={variant}", at="roles.serve:_follow:group 0 ("
        )
        seen = first.wait_paused()
        second = run_deploy(CLUSTER, "deploys/dspark.py", *QUICK, f"recipe={variant}")
        first.kill()
        assert "group 0 (deepseek-v4-flash-0, GPUs [0, 1, 2, 3], port 5000): starting new spec" in seen, seen[-3000:]
        assert second.returncode != 0
        assert re.search(r"another hgxkit run holds /var/lib/hgxkit/run.lock \(pid, start, command: \d+ ", out(second))
        # The replace goes on without the controller: its unit ends with group 0 on the new spec.
        node_sh(
            CLUSTER,
            "for i in $(seq 1 180); do systemctl is-active --quiet hgxkit-serve-deepseek-v4-flash-0 "
            "|| exit 0; sleep 1; done; exit 1",
            timeout=240,
            check=True,
        )
        closed = time.time_ns()
    problems = service_problems(probe.samples, 5001, (opened, closed))
    assert not problems, problems
    assert containers()["deepseek-v4-flash-1"] == untouched  # never restarted, nor replaced
    status = node_sh(CLUSTER, "cat /var/lib/hgxkit/serve/replace/deepseek-v4-flash-0/status", check=True)
    assert status.strip() == "ok"
    again = run_deploy(CLUSTER, "deploys/dspark.py", *QUICK, f"recipe={variant}")
    assert again.returncode == 0, out(again)[-4000:]
    after = containers()
    assert sorted(after) == ["deepseek-v4-flash-0", "deepseek-v4-flash-1"]  # nothing set aside is left
    assert all(c["running"] == "True" and c["recipe"] == "relogged-marlin" for c in after.values())
    assert all(f"--log-level {level}" in c["args"] for c in after.values())


def test_refusals_before_any_container_changes(served, tmp_path) -> None:
    before = containers()
    open_bind = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", "bind_address=0.0.0.0")
    assert open_bind.returncode != 0
    assert "bind_address 0.0.0.0 publishes the API beyond this host without an API key" in out(open_bind)
    huge = recipe_variant(tmp_path, MARLIN, "--hicache-ratio 4", "--hicache-ratio 8", "huge-hicache")
    ram = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={huge}")
    assert ram.returncode != 0
    assert re.search(
        r"HiCache host pools need \d+ GB \(\d+ GB x 4 ranks x 2 groups\) but the host has 3072 GiB", out(ram)
    )
    assert containers() == before


def test_switching_recipe_rolls_one_group_at_a_time(served) -> None:
    """Each group is replaced in turn; while one is down the other answers every health check and every
    inference request (one always in flight), and the samples cover that whole replace."""
    with ServiceProbe(CLUSTER, [5000, 5001]) as probe:
        switched = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={FLASHINFER}")
    samples = probe.samples
    assert switched.returncode == 0, out(switched)[-4000:]
    after = containers()
    assert {c["recipe"] for c in after.values()} == {"deepseek-v4-flash-dspark-flashinfer"}
    order = [m.group(1) for m in re.finditer(r"group (\d) \(deepseek-v4-flash-\d\) is serving", out(switched))]
    assert order == ["0", "1"]
    down = {port: [s for s in samples if s.port == port and s.code != "200"] for port in (5000, 5001)}
    assert down[5000] and down[5001], "each group was replaced, so each was briefly down"
    assert max(s.end for s in down[5000]) < min(s.start for s in down[5001]), "group 0 was back before group 1 went"
    for port, other in ((5000, 5001), (5001, 5000)):
        window = (min(s.start for s in down[port]), max(s.end for s in down[port]))
        during = [s for s in samples if s.port == other]
        assert not service_problems(during, other, window), service_problems(during, other, window)


def test_bad_server_flag_is_rolled_back_with_the_log(served, tmp_path) -> None:
    before = containers()
    bad = recipe_variant(
        tmp_path, FLASHINFER, "  - --enable-metrics\n", "  - --enable-metrics\n  - --no-such-flag\n", "bad"
    )
    result = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={bad}", "serve_health_timeout=120")
    assert result.returncode != 0
    text = out(result)
    Path("/tmp/bad_flag_run.log").write_text(text)
    assert "group 0 (deepseek-v4-flash-0) exited before it became healthy; the previous container was restarted" in text
    assert "unrecognized arguments: --no-such-flag" in text
    # An answer, not a crash: one block (what, cause, remedy) at the end, no traceback (hgxkit/runfailure.py).
    assert "Traceback" not in text and "Unexpected error in Python callback" not in text
    summary = result.stderr[result.stderr.index("hgxkit: the run failed on 1 host(s):") :]
    assert summary.splitlines()[1] == (
        "node1: group 0 (deepseek-v4-flash-0) exited before it became healthy; the previous container was restarted"
    )
    assert summary.splitlines()[2] == "  cause:"
    assert "unrecognized arguments: --no-such-flag" in summary
    assert summary.rstrip().splitlines()[-1].startswith("  remedy: fix what the cause says")
    after = containers()
    assert after["deepseek-v4-flash-0"]["spec"] == before["deepseek-v4-flash-0"]["spec"]
    assert after["deepseek-v4-flash-0"]["running"] == "True"
    assert after["deepseek-v4-flash-1"] == before["deepseek-v4-flash-1"]  # never touched


def test_two_recipes_compare_in_the_posts_layout(served, capsys) -> None:
    _, results = served
    verified = run_deploy(CLUSTER, "deploys/verify.py", f"results_dir={results}", f"recipe={FLASHINFER}")
    assert verified.returncode == 0, out(verified)[-4000:]
    runs = sorted(p for p in results.glob("node1/*") if p.is_dir())
    assert len(runs) == 2
    assert hgxkit_main(["results", "--root", str(results), "compare", runs[0].name, runs[1].name, "--md"]) == 0
    table = capsys.readouterr().out
    assert "simulated: both runs ran on simulated nodes" in table
    head = "| Input | Conc | deepseek-v4-flash-dspark-marlin [95% CI] | deepseek-v4-flash-dspark-flashinfer [95% CI] |"
    assert f"{head} Verdict | p |\n" in table
    assert f"{head} Verdict | p | Under 5s? |\n" in table
    # one smoke repeat per run: no interval, and no verdict a test could reach (p can be no smaller than 1)
    assert re.search(r"\| 5K \| 1 \| \d+ \| \d+ \| too small to judge: 1 vs 1 repeats[^|]* \| - \|", table)
    assert hgxkit_main(["results", "--root", str(results), "compare", runs[1].name, "--reference", "--md"]) == 0
    reference = capsys.readouterr().out
    assert "| TTFT mean | 5K | 1 | 257.42 |" in reference  # the post's flashinfer number


def test_api_key_auto_never_reaches_output_or_archive(served, tmp_path) -> None:
    run = run_deploy(
        CLUSTER,
        "deploys/dspark.py",
        "bind_address=0.0.0.0",
        "api_key=auto",
        f"results_dir={tmp_path}",
        f"recipe={FLASHINFER}",
        flags=("-y", "-vvv"),
        env={"HF_TOKEN": FAKE_HF_TOKEN},
    )
    assert run.returncode == 0, out(run)[-4000:]
    key = (ROOT / ".hgxkit" / "secrets" / "node1.api-key").read_text().strip()
    assert len(key) >= 32
    assert node_sh(CLUSTER, "stat -c '%a %U' /etc/hgxkit/serve/api-key", check=True).strip() == "600 root"
    assert key not in out(run) and FAKE_HF_TOKEN not in out(run)  # -vvv prints every command and fact output
    # On the node: no process shows the key on its command line, and no file others may read holds it.
    assert key not in node_sh(CLUSTER, "ps -eo args", answer=True, check=True)
    readable = node_sh(
        CLUSTER,
        "find /var/lib/hgxkit /etc/hgxkit /tmp /data/models -type f -perm -o=r "
        "-size -50M -exec cat {} + 2>/dev/null | tr -c '[:print:]' '\\n'",
    )
    assert readable and key not in readable and FAKE_HF_TOKEN not in readable
    raw = node_sh(CLUSTER, "cat /var/lib/hgxkit/verify/*/*.jsonl 2>/dev/null")  # root-only, and scrubbed too
    assert raw and key not in raw
    unauthenticated = node_sh(
        CLUSTER, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:5000/v1/models", answer=True
    )
    assert unauthenticated == "401"
    archived = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert archived and all(key not in p.read_text(errors="replace") for p in archived)
    # Back to loopback without a key for the tests after this one.
    back = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={FLASHINFER}")
    assert back.returncode == 0, out(back)[-4000:]


def test_moved_tag_is_refused_with_pin_image(served, tmp_path) -> None:
    # A tag of this session's own: the nodes' registry is shared with other test sessions, which publish the
    # usual tags whenever they build, and would move a shared tag back under this test.
    tag = f"lmsysorg/sglang:pin-test-{session_suffix()}"
    build = [sys.executable, "-m", "hgxkit", "sim", "image", "build", "--tag", tag]
    subprocess.run(build, cwd=ROOT, capture_output=True, check=True)
    status = subprocess.run(
        [sys.executable, "-m", "hgxkit", "sim", "image", "status"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    digest = next(line.split()[1] for line in status.splitlines() if line.startswith(tag + "\t"))
    pinned = recipe_variant(
        tmp_path,
        FLASHINFER,
        "  reference: lmsysorg/sglang:dev-dspark\n",
        f"  reference: {tag}\n  digest: {digest}\n",
        "pinned",
    )
    same = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={pinned}", "pin_image=true")
    assert same.returncode == 0, out(same)[-4000:]
    subprocess.run([*build, "--variant", "moved-tag-test"], cwd=ROOT, capture_output=True, check=True)
    moved = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={pinned}", "pin_image=true")
    assert moved.returncode != 0, out(moved)[-4000:]
    match = re.search(
        rf"{re.escape(tag)} now resolves to (sha256:[0-9a-f]{{64}}), not the pinned (sha256:[0-9a-f]{{64}})", out(moved)
    )
    assert match and match.group(2) == digest and match.group(1) != digest, out(moved)[-4000:]
