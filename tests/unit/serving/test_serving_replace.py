"""The group-replace script the serving role runs in a systemd unit on the node, run for real by `sh` with a
`docker` stand-in (containers kept in a JSON file) and a `curl` stand-in (the health answer in a file):
keep the new container when it becomes healthy, put the old one back when it does not, finish a replace that
was cut off, never touch a container hgxkit did not make, and never start one on a host path a container swapped for a link."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hgxkit.serving import replace as replace_module
from hgxkit.serving.replace import (
    CHECK_SCRIPT,
    mounts_check_script,
    recovery_script,
    replace_script,
    start_preamble,
    unit_name,
)

FAKE_DOCKER = r"""#!PYTHON
BIND_SOURCES = BIND_FORMAT
import json, os, sys
path = os.environ["FAKE_STATE"]
state = json.load(open(path))
cs = state["containers"]
args = sys.argv[1:]
def save(): json.dump(state, open(path, "w"))
def find(ref):
    for name, c in cs.items():
        if ref in (name, c["id"]):
            return name
    return None
cmd = args[0]
if cmd == "inspect":
    fmt = args[args.index("-f") + 1] if "-f" in args else None
    name = find(args[-1])
    if name is None:
        sys.exit(1)
    c = cs[name]
    if fmt is None: print("[{}]")
    elif "Labels" in fmt: print(c["labels"].get("hgxkit.serve", ""))
    elif fmt == "{{.State.Running}} {{.RestartCount}}": print(("true" if c["running"] else "false") + " " + str(c["restarts"]))
    elif fmt == BIND_SOURCES: print("".join(b + "\n" for b in c.get("binds", [])), end="")
    else: sys.exit("template: can't evaluate field in " + fmt)  # docker's field names are case-sensitive
elif cmd == "rm":
    name = find(args[-1]); cs.pop(name, None); save()
elif cmd == "stop":
    name = find(args[-1]); cs[name]["running"] = False; save()
    swap = os.environ.get("FAKE_SWAP_ON_STOP")  # the stopping container leaves a link where a directory was
    if swap:
        os.rename(swap, swap + ".moved"); os.symlink("/", swap)
elif cmd == "start":
    name = find(args[-1]); cs[name]["running"] = True; save()
elif cmd == "rename":
    old, new = find(args[1]), args[2]
    if new in cs: sys.exit("Conflict. The container name is already in use")
    cs[new] = cs.pop(old); save()
elif cmd == "logs":
    print(cs[find(args[-1])].get("log", ""))
elif cmd == "run":
    name = args[args.index("--name") + 1]
    labels = dict(a.split("=", 1) for i, a in enumerate(args) if i and args[i - 1] == "--label")
    behaviour = os.environ.get("FAKE_NEW", "healthy")
    cs[name] = {"id": "new-" + name, "labels": labels, "running": behaviour != "exits", "restarts": 0,
                "log": "unrecognized arguments: --no-such-flag" if behaviour == "exits" else "serving"}
    save()
"""
FAKE_CURL = """#!/bin/sh
echo poll >> "$FAKE_HEALTH.polls"
cat "$FAKE_HEALTH" 2>/dev/null || echo 000
"""
FAKE_SLEEP = """#!/bin/sh
echo "$1" >> "$FAKE_HEALTH.sleeps"
exec /bin/sleep "$1"
"""


@pytest.fixture()
def node(tmp_path: Path):
    """(workdir, env, state file) of a node with one serving container `m-0` (ours) and `other` (not ours)."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    (bin_dir / "docker").write_text(
        FAKE_DOCKER.replace("PYTHON", sys.executable).replace("BIND_FORMAT", repr(replace_module._BIND_SOURCES))
    )
    (bin_dir / "curl").write_text(FAKE_CURL)
    (bin_dir / "sleep").write_text(FAKE_SLEEP)
    for tool in ("docker", "curl", "sleep"):
        (bin_dir / tool).chmod(0o755)
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps(
            {
                "containers": {
                    "m-0": {"id": "old-m-0", "labels": {"hgxkit.serve": "1"}, "running": True, "restarts": 0},
                    "other": {"id": "o", "labels": {}, "running": True, "restarts": 0},
                }
            }
        )
    )
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_STATE": str(state), "FAKE_HEALTH": str(tmp_path / "health")}
    (work / "docker-run.sh").write_text(
        start_preamble(str(work)) + "docker run -d --name m-0 --label hgxkit.serve=1 img:new\n"
    )
    (work / CHECK_SCRIPT).write_text(mounts_check_script([]))
    return work, env, state


def containers(state: Path) -> dict[str, dict]:
    return json.loads(state.read_text())["containers"]


def replace(work: Path, env: dict[str, str], old_id: str = "old-m-0", **env_extra: str) -> str:
    text = replace_script(
        name="m-0",
        old_id=old_id,
        health_url="http://127.0.0.1:5000/health",
        timeout_s=3,
        interval_s=1,
        workdir=str(work),
    )
    (work / "replace.sh").write_text(text)
    subprocess.run(["sh", str(work / "replace.sh")], env={**env, **env_extra}, check=True, timeout=60)
    return (work / "status").read_text().strip()


def test_a_healthy_new_container_is_kept_and_the_old_one_removed(node) -> None:
    work, env, state = node
    Path(env["FAKE_HEALTH"]).write_text("200")
    assert replace(work, env) == "ok"
    after = containers(state)
    assert after["m-0"]["id"] == "new-m-0" and after["m-0"]["running"]
    assert "m-0-hgxkit-previous" not in after and "other" in after
    assert not (work / "docker-run.sh").exists()  # it may hold secrets: deleted once run


def test_a_new_container_that_exits_is_replaced_by_the_old_one(node) -> None:
    work, env, state = node
    status = replace(work, env, FAKE_NEW="exits")
    assert status == "failed: exited before it became healthy; the previous container was restarted"
    after = containers(state)
    assert after["m-0"]["id"] == "old-m-0" and after["m-0"]["running"]
    assert "unrecognized arguments: --no-such-flag" in (work / "failed.log").read_text()


def test_a_new_container_that_never_becomes_healthy_times_out_and_rolls_back(node) -> None:
    work, env, state = node
    Path(env["FAKE_HEALTH"]).write_text("503")
    status = replace(work, env)
    assert status.startswith("failed: did not answer its health check within 3 s")
    assert containers(state)["m-0"]["id"] == "old-m-0"


@pytest.mark.parametrize(("health", "kept"), [("200", "new-m-0"), ("503", "old-m-0")])
def test_recovery_finishes_a_replace_that_was_cut_off(node, health: str, kept: str) -> None:
    _, env, state = node
    cut = containers(state)
    cut["m-0-hgxkit-previous"] = cut.pop("m-0") | {"running": False}
    cut["m-0"] = {"id": "new-m-0", "labels": {"hgxkit.serve": "1"}, "running": True, "restarts": 0}
    state.write_text(json.dumps({"containers": cut}))
    Path(env["FAKE_HEALTH"]).write_text(health)
    script = recovery_script(name="m-0", health_url="http://127.0.0.1:5000/health")
    done = subprocess.run(["sh", "-s"], input=script, text=True, env=env, check=True, timeout=60, capture_output=True)
    said = {
        "new-m-0": "kept the new m-0 (healthy); removed the copy kept aside",
        "old-m-0": "put the previous m-0 back (the interrupted replace had not become healthy)",
    }
    assert done.stdout.splitlines()[-1] == said[kept]  # what the node's journal shows of the recovery
    after = containers(state)
    assert after["m-0"]["id"] == kept and after["m-0"]["running"]  # serving on one spec or the other
    assert "m-0-hgxkit-previous" not in after


def test_a_container_hgxkit_did_not_make_is_never_removed_by_name(node) -> None:
    work, env, state = node
    cs = containers(state)
    cs["m-0-hgxkit-previous"] = {"id": "x", "labels": {}, "running": True, "restarts": 0}  # someone else's
    state.write_text(json.dumps({"containers": cs}))
    Path(env["FAKE_HEALTH"]).write_text("200")
    assert replace(work, env) == "failed: could not set the old container aside; it serves on"
    after = containers(state)
    assert after["m-0-hgxkit-previous"]["id"] == "x" and after["m-0"]["id"] == "old-m-0" and after["m-0"]["running"]


def test_hostile_names_stay_words_in_the_script() -> None:
    text = replace_script(
        name="m-0;touch /tmp/p", old_id="", health_url="http://127.0.0.1:1/h", timeout_s=1, interval_s=1, workdir="/w"
    )
    assert "name='m-0;touch /tmp/p'" in text and unit_name("m-0;touch /tmp/p") == "hgxkit-serve-m-0_touch__tmp_p"


def polls(env: dict[str, str]) -> int:
    """How many times the script asked for the health answer."""
    path = Path(env["FAKE_HEALTH"] + ".polls")
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_healthy_start_reports_starting_and_polls_once(node) -> None:
    work, env, _ = node
    Path(env["FAKE_HEALTH"]).write_text("200")
    assert replace(work, env) == "ok"
    assert (work / "progress").read_text() == "starting\n"  # healthy at the first poll: no waiting line
    assert polls(env) == 1


def test_waiting_for_health_reports_the_last_log_and_sleeps_between_polls(node) -> None:
    work, env, _ = node
    Path(env["FAKE_HEALTH"]).write_text("503")
    status = replace(work, env)
    assert status == "failed: did not answer its health check within 3 s; the previous container was restarted"
    progress = (work / "progress").read_text()
    assert progress.startswith("waiting for health, ") and progress.endswith(" s; last log: serving\n")
    sleeps = Path(env["FAKE_HEALTH"] + ".sleeps").read_text().split()
    assert polls(env) >= 2 and sleeps == ["1"] * (polls(env) - 1)  # a 1 s sleep after each poll but the last


def test_a_new_group_that_fails_has_no_previous_container_to_restart(node) -> None:
    work, env, state = node
    del_m0 = containers(state)
    del del_m0["m-0"]
    state.write_text(json.dumps({"containers": del_m0}))
    assert replace(work, env, old_id="", FAKE_NEW="exits") == "failed: exited before it became healthy"
    assert "m-0" not in containers(state)


def test_the_poll_interval_is_whole_seconds_and_at_least_one() -> None:
    text = replace_script(name="m-0", old_id="", health_url="http://h/", timeout_s=7.9, interval_s=0.5, workdir="/w")
    assert "\ntimeout=7; interval=1\n" in text
    assert text.endswith('\nfinish "failed: $why"\n')


@pytest.fixture()
def swapped(node, tmp_path: Path):
    """The node, with a model directory whose sub-directory a container can replace (a real one for now)."""
    work, env, state = node
    source = tmp_path / "models" / "m" / "sub"
    source.mkdir(parents=True)
    (work / CHECK_SCRIPT).write_text(mounts_check_script([str(source)]))
    Path(env["FAKE_HEALTH"]).write_text("200")
    return work, env, state, source


def _swap(source: Path) -> None:
    source.rename(source.with_name("sub.moved"))
    source.symlink_to("/")


def test_a_source_swapped_for_a_link_before_the_replace_leaves_the_old_container_serving(swapped) -> None:
    work, env, state, source = swapped
    _swap(source)
    status = replace(work, env)
    assert status.startswith(f"failed: refused: the host path {source} cannot be used: {source} is a symbolic link")
    assert status.endswith("; the old container serves on")
    after = containers(state)
    assert after["m-0"]["id"] == "old-m-0" and after["m-0"]["running"]  # never stopped, no new container
    assert not (work / "docker-run.sh").exists()  # it may hold secrets: deleted though not run


@pytest.mark.parametrize(("old_binds", "restarted"), [([], True), (["SOURCE"], False)])
def test_a_link_planted_while_the_old_container_stops_is_refused_at_docker_run(
    swapped, old_binds: list[str], restarted: bool
) -> None:
    work, env, state, source = swapped
    cs = containers(state)
    cs["m-0"]["binds"] = [str(source) if b == "SOURCE" else b for b in old_binds]
    state.write_text(json.dumps({"containers": cs}))
    status = replace(work, env, FAKE_SWAP_ON_STOP=str(source))
    after = containers(state)
    assert after["m-0"]["id"] == "old-m-0"  # `docker run` never ran
    assert status.startswith(f"failed: refused: the host path {source} cannot be used")
    assert after["m-0"]["running"] is restarted  # the old one starts again only on sources that pass the walk
    if not restarted:
        assert "; the previous container was not restarted: refused: the host path" in status


def test_recovery_never_starts_the_previous_container_on_a_swapped_source(node, tmp_path: Path) -> None:
    _, env, state = node
    source = tmp_path / "models" / "m"
    source.mkdir(parents=True)
    _swap(source)
    cut = containers(state)
    cut["m-0-hgxkit-previous"] = cut.pop("m-0") | {"running": False, "binds": [str(source)]}
    cut["m-0"] = {"id": "new-m-0", "labels": {"hgxkit.serve": "1"}, "running": True, "restarts": 0}
    state.write_text(json.dumps({"containers": cut}))
    Path(env["FAKE_HEALTH"]).write_text("503")
    script = recovery_script(name="m-0", health_url="http://127.0.0.1:5000/health")
    done = subprocess.run(["sh", "-s"], input=script, text=True, env=env, capture_output=True, timeout=60)
    assert done.returncode == 1 and f"{source} is a symbolic link" in done.stdout
    assert containers(state)["m-0"]["running"] is False


def test_the_check_script_walks_every_path_and_refuses_with_one_line_each(tmp_path: Path) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    script = tmp_path / CHECK_SCRIPT
    script.write_text(mounts_check_script([str(real), str(link / "x"), "/no/such/dir"]))
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == replace_module.CHECK_REFUSED
    assert done.stdout.splitlines() == [
        f"refused: the host path {link}/x cannot be used: {link} is a symbolic link (a container that mounts a "
        "directory above it may have put it there); not started: remove the link, see what that container did, "
        "run again"
    ]
