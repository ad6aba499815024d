"""The verify role's detached benchmark script: one client process per container runs all of its cells.

The host script is run for real by `sh`, with a `docker` stand-in on PATH that runs `docker exec` commands
on this machine and `docker cp` as `cp`; the "client" is a fake `sglang.benchmark.serving` that counts how
often its heavy imports happen. The last test runs SGLang's real client through the same driver.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.kinds.sglang import SGLANG
from hgxkit.verify.plan import Cell, client_argv
from hgxkit.verify.script import CELL_DRIVER, bench_script

FAKE_DOCKER = """#!/bin/sh
# docker stand-in: `exec [-e NAME]... CONTAINER CMD...` runs CMD here; `cp [C:]SRC [C:]DST` copies.
case "$1" in
  exec)
    # Docker 20.10 prints a failed exec's own error on stdout, not stderr
    [ -n "$EXEC_FAILS" ] && { echo "$EXEC_FAILS"; exit 126; }
    shift
    while [ "$1" = "-e" ]; do shift 2; done
    shift
    exec "$@" ;;
  cp)
    [ "$3" = "-" ] && exec tar -C "${2#*:}" -cf - .  # `docker cp C:DIR/. -`: the directory as a tar stream
    exec cp -r "${2#*:}" "${3#*:}" ;;
esac
echo "fake docker: $*" >&2
exit 1
"""

FAKE_CLIENT = """
import json, os, sys, time
import heavy  # torch and transformers stand-in: counts its imports


def main():
    args = sys.argv[1:]
    output = args[args.index("--output-file") + 1]
    if os.environ.get("PLANT"):  # a hostile image: links planted beside its output, named like the host's files
        out_dir = os.path.dirname(output)
        for name in ("progress", "status", "failed", "run.sh"):
            if not os.path.lexists(os.path.join(out_dir, name)):
                os.symlink(os.environ["PLANT"], os.path.join(out_dir, name))
        if os.environ.get("PLANT_OUTPUT") and not os.path.lexists(output):  # its "result" a link too
            os.symlink(os.environ["PLANT"], output)
            return
    if os.environ.get("HOSTILE_LINES"):  # a hostile image prints the driver's protocol on the real stdout
        os.write(1, os.environ["HOSTILE_LINES"].encode())
    concurrency = int(args[args.index("--max-concurrency") + 1])
    key = "set" if os.environ.get("OPENAI_API_KEY") else "unset"
    print("benchmarking at concurrency", concurrency, "key", key)
    time.sleep(float(os.environ.get("FAKE_CLIENT_SECONDS", "0")))
    if concurrency == 5:
        sys.exit(2)  # a cell whose client fails
    with open(args[args.index("--output-file") + 1], "a") as out:  # the real client appends
        warmups = int(args[args.index("--warmup-requests") + 1])
        out.write(json.dumps({"max_concurrency": concurrency, "argv0": sys.argv[0], "warmups": warmups}) + "\\n")


if __name__ == "__main__":
    main()
"""

CELLS = [
    Cell(0, "g0", 30000, 5000, 1, 3, 16),
    Cell(0, "g0", 30000, 5000, 5, 10, 16),
    Cell(1, "g1", 30000, 5000, 1, 3, 16),
]


@pytest.fixture()
def host(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], str]]:
    """A work directory, the environment the unit would give the script (fake docker, fake client), a run tag."""
    bin_dir, lib = tmp_path / "bin", tmp_path / "lib"
    (lib / "sglang" / "benchmark").mkdir(parents=True)
    (lib / "sglang" / "__init__.py").write_text("")
    (lib / "sglang" / "benchmark" / "__init__.py").write_text("")
    (lib / "sglang" / "benchmark" / "serving.py").write_text(FAKE_CLIENT)
    (lib / "heavy.py").write_text(
        "import os\nwith open(os.environ['HEAVY_LOG'], 'a') as f:\n    f.write('imported\\n')\n"
    )
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": str(lib),
        "HEAVY_LOG": str(tmp_path / "heavy.log"),
        "OPENAI_API_KEY": "sk-test-not-real",
    }
    run_tag = f"test-{uuid.uuid4().hex[:8]}"
    yield workdir, env, run_tag
    shutil.rmtree(f"/tmp/hgxkit-verify/{run_tag}", ignore_errors=True)


def run_script(workdir: Path, env: dict[str, str], run_tag: str, client_process: str) -> int:
    script = bench_script(
        CELLS, workdir=str(workdir), api_key_file=None, run_tag=run_tag, client_process=client_process
    )  # type: ignore[arg-type]
    (workdir / "run.sh").write_text(script)
    return subprocess.run(["sh", str(workdir / "run.sh")], env=env, capture_output=True, timeout=120).returncode


def test_one_client_process_per_container_runs_every_cell_and_reports_the_failed_one(host) -> None:
    workdir, env, run_tag = host
    rc = run_script(workdir, env, run_tag, "per_container")

    assert rc == 1 and (workdir / "status").read_text().strip() == "1"  # the concurrency-5 cell failed
    assert (workdir / "progress").read_text().strip() == "done"
    assert (workdir / "failed").read_text().split() == ["hgxkit-done", "g0_5000_5.jsonl", "2"]
    for cell in (CELLS[0], CELLS[2]):
        record = json.loads((workdir / cell.file).read_text())
        assert record["max_concurrency"] == cell.concurrency
        assert record["argv0"].endswith("/sglang/benchmark/serving.py")  # argv[0] as `python -m` sets it
    assert not (workdir / CELLS[1].file).exists()
    for cell in CELLS:  # each cell's own output, with the API key taken from the environment
        assert (workdir / f"{cell.file}.log").read_text() == (
            f"benchmarking at concurrency {cell.concurrency} key set\n"
        )
    # The heavy imports happened once per container (2), not once per cell (3).
    assert Path(env["HEAVY_LOG"]).read_text().count("imported") == 2


def test_a_result_the_image_made_a_link_is_refused_not_followed(host, tmp_path) -> None:
    workdir, env, run_tag = host
    target = tmp_path / "host-file"
    target.write_text("untouched\n")
    rc = run_script(workdir, {**env, "PLANT": str(target), "PLANT_OUTPUT": "1"}, run_tag, "per_container")

    assert rc == 1 and (workdir / "status").read_text().strip() == "1"  # the cells have no result
    assert target.read_text() == "untouched\n"
    assert not any(p.is_symlink() for p in workdir.iterdir())
    assert not (workdir / CELLS[0].file).exists() and not (workdir / CELLS[2].file).exists()


def test_files_a_hostile_image_plants_beside_its_output_never_reach_the_host_workdir(host, tmp_path) -> None:
    workdir, env, run_tag = host
    target = tmp_path / "host-file"
    target.write_text("untouched\n")
    rc = run_script(workdir, {**env, "PLANT": str(target)}, run_tag, "per_container")

    assert rc == 1 and target.read_text() == "untouched\n"  # the script wrote progress and status, not through links
    assert not any((workdir / name).is_symlink() for name in ("progress", "status", "failed", "run.sh"))
    assert (workdir / "progress").read_text().strip() == "done"
    assert json.loads((workdir / CELLS[0].file).read_text())["max_concurrency"] == 1
    assert not list(workdir.glob("out-*"))  # the copy's own directory is gone


FAKE_CURL = """#!/bin/sh
echo 'sglang:num_running_reqs{model_name="m"} 1'
"""
FAKE_SMI = """#!/bin/sh
while :; do echo "2026/12/01 10:00:00.000, 0, 400.00, 1980, 2619, 125000, 40, 60, 0x0000000000000000"; sleep 0.2; done
"""


@pytest.mark.parametrize("client_process", ["per_container", "per_cell"])
def test_repeats_append_to_one_file_and_telemetry_is_recorded_while_a_cell_runs(host, client_process) -> None:
    workdir, env, run_tag = host
    bin_dir = Path(env["PATH"].split(":")[0])
    for name, body in (("curl", FAKE_CURL), ("nvidia-smi", FAKE_SMI)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    cells = [replace(CELLS[0], repeats=2, metrics_url="http://127.0.0.1:5000/metrics", gpus=(0, 1))]
    env = {**env, "FAKE_CLIENT_SECONDS": "1.2"}  # long enough for a scrape and a GPU sample
    script = bench_script(
        cells, workdir=str(workdir), api_key_file=None, run_tag=run_tag, client_process=client_process
    )  # type: ignore[arg-type]
    (workdir / "run.sh").write_text(script)
    assert subprocess.run(["sh", str(workdir / "run.sh")], env=env, capture_output=True, timeout=120).returncode == 0
    lines = (workdir / cells[0].file).read_text().splitlines()
    assert len(lines) == 2  # both repeats, in one file
    # warm-up requests before the first run only: the repeat finds the server warm at the same shape
    assert [json.loads(line)["warmups"] for line in lines] == [1, 0]
    metrics, gpu, window = (workdir / name for name in cells[0].telemetry_files)
    assert metrics.read_text().startswith("# hgxkit-scrape ") and "sglang:num_running_reqs" in metrics.read_text()
    assert "400.00, 1980" in gpu.read_text()
    start, end = (float(t) for t in window.read_text().split())
    assert 0 < end - start < 60


def test_per_cell_mode_starts_a_client_for_each_cell(host) -> None:
    workdir, env, run_tag = host
    rc = run_script(workdir, env, run_tag, "per_cell")

    assert rc == 1 and (workdir / "status").read_text().strip() == "1"
    assert json.loads((workdir / CELLS[2].file).read_text())["max_concurrency"] == 1
    # One import per container to find the client module, then one per cell.
    assert Path(env["HEAVY_LOG"]).read_text().count("imported") == 2 + 3


def test_a_container_without_the_client_fails_every_cell_with_a_clear_log(host) -> None:
    workdir, env, run_tag = host
    rc = run_script(workdir, {**env, "PYTHONPATH": "/nonexistent"}, run_tag, "per_container")

    assert rc == 1 and (workdir / "status").read_text().strip() == "1"
    assert "no SGLang benchmark client in g0" in (workdir / f"{CELLS[0].file}.log").read_text()
    assert "no SGLang benchmark client in g1" in (workdir / f"{CELLS[2].file}.log").read_text()
    assert not any((workdir / cell.file).exists() for cell in CELLS)


OCI_ERROR = (
    "OCI runtime exec failed: exec failed: unable to start container process: error setting rlimits for process: "
    "error setting rlimit type 8: operation not permitted: unknown"
)


def test_an_exec_that_never_started_the_client_fails_with_dockers_own_words_in_the_log(host) -> None:
    """`docker exec` refused before the driver ran (a `--ulimit memlock=-1` container on a node that cannot give
    it): no cell line ever came, and Docker's error came on stdout, so the run once ended with status 0 and an
    empty log, and verify could only say "the client wrote no result"."""
    workdir, env, run_tag = host
    rc = run_script(workdir, {**env, "EXEC_FAILS": OCI_ERROR}, run_tag, "per_container")

    assert rc == 1 and (workdir / "status").read_text().strip() == "1"
    assert (workdir / "failed").read_text().splitlines() == ["hgxkit-exit 126", "hgxkit-exit 126"]
    for cell, container in ((CELLS[0], "g0"), (CELLS[1], "g0"), (CELLS[2], "g1")):
        assert (workdir / f"{cell.file}.log").read_text() == f"{OCI_ERROR}\ndocker exec {container} exited 126\n"
    assert not any((workdir / cell.file).exists() for cell in CELLS)


def test_a_client_that_ran_exits_zero_and_adds_nothing_to_its_log(host) -> None:
    workdir, env, run_tag = host
    cells = [CELLS[0]]
    script = bench_script(cells, workdir=str(workdir), api_key_file=None, run_tag=run_tag)
    (workdir / "run.sh").write_text(script)
    assert subprocess.run(["sh", str(workdir / "run.sh")], env=env, capture_output=True, timeout=120).returncode == 0
    assert not (workdir / "failed").exists() and (workdir / "client-g0.log").read_text() == ""


def test_the_api_key_reaches_the_client_by_name_from_the_root_only_file(host) -> None:
    workdir, _, run_tag = host
    script = bench_script(CELLS, workdir=str(workdir), api_key_file="/etc/hgxkit/serve/api-key", run_tag=run_tag)
    assert 'export OPENAI_API_KEY="$(cat /etc/hgxkit/serve/api-key)"' in script
    execs = [line.removeprefix("{ ") for line in script.splitlines() if " python3 " in line]
    assert len(execs) == 2 and all(
        line.startswith("docker exec -e OPENAI_API_KEY -e HF_HUB_OFFLINE ") for line in execs
    )
    assert "OPENAI_API_KEY=" not in script.replace('export OPENAI_API_KEY="$(cat', "")  # never a value
    assert "--api-key" not in script


def test_sglangs_real_client_runs_two_cells_in_one_process(tmp_path: Path, start_stub, client_venv: Path) -> None:
    url, _ = start_stub("--tp-size", "1")
    port = int(url.rsplit(":", 1)[1])
    cells = [Cell(0, "g0", port, 200, 1, 2, 4), Cell(0, "g0", port, 300, 2, 4, 4)]
    plan = [
        [c.file, str(tmp_path / f"{c.file}.log"), f"cell {k}", client_argv(c, str(tmp_path))]
        for k, c in enumerate(cells, start=1)
    ]
    (tmp_path / "driver.py").write_text(CELL_DRIVER)
    proc = subprocess.run(
        [
            str(client_venv / "bin" / "python"),
            str(tmp_path / "driver.py"),
            json.dumps([module for module, _ in SGLANG.bench.modules]),
            json.dumps(plan),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    logs = "\n".join((tmp_path / f"{c.file}.log").read_text() for c in cells if (tmp_path / f"{c.file}.log").exists())
    assert proc.returncode == 0, proc.stderr[-2000:] + logs[-3000:]
    ready, *lines = proc.stdout.splitlines()
    started, imported = (float(t) for t in ready.removeprefix("hgxkit-client-ready ").split())
    assert 0 < imported - started < 600  # the client's imports, before the first cell's window
    assert lines == [
        "hgxkit-progress cell 1",
        f"hgxkit-start {cells[0].file}",
        f"hgxkit-done {cells[0].file} 0",
        "hgxkit-progress cell 2",
        f"hgxkit-start {cells[1].file}",
        f"hgxkit-done {cells[1].file} 0",
    ]
    for cell in cells:
        record = json.loads((tmp_path / cell.file).read_text().splitlines()[-1])
        assert (record["max_concurrency"], record["completed"]) == (cell.concurrency, cell.num_prompts)
        assert record["random_input_len"] == cell.input_len


def test_the_role_sums_each_clients_start_up_and_skips_damaged_lines() -> None:
    from roles.verify import _client_startup_s

    texts = {"client-start.txt": "100.0 112.5\n200.0 209.0\ngarbage\n300.0 299.0\n"}
    assert _client_startup_s(texts) == 21.5  # a clock that went backwards counts 0
    assert _client_startup_s({}) == 0.0


def test_lines_a_hostile_client_prints_choose_no_path_and_reach_no_terminal(host, tmp_path: Path) -> None:
    """Telemetry file names, progress text and the failure list come from the cell table: a container printing
    `hgxkit-start <path>` or escape sequences chooses nothing (a logrotate stanza once landed in a
    directory the container chose)."""
    workdir, env, run_tag = host
    outside = tmp_path / "outside"
    outside.mkdir()
    evil = outside / "cron"
    env = {
        **env,
        "HOSTILE_LINES": (
            f"hgxkit-start {evil}.jsonl\nhgxkit-done {evil}.jsonl 0\nhgxkit-start ../../outside/cron.jsonl\n"
            "hgxkit-progress \x1b]0;owned\x07\x1b[2J\nhgxkit-client-ready $(touch /tmp/x) \x1b[31m1.5\n"
            f"hgxkit-done {evil}\x1b[2J 9\n"
        ),
    }
    run_script(workdir, env, run_tag, "per_container")
    assert sorted(p.name for p in outside.iterdir()) == []
    assert not list(tmp_path.glob("**/cron*"))
    for path in workdir.iterdir():
        if path.is_file():
            assert "\x1b" not in path.read_text(errors="replace"), path.name
    assert all(
        line.split()[1] in {c.file for c in CELLS} | {"unknown"}
        for line in (workdir / "failed").read_text().splitlines()
    )
    stems = {c.file.rsplit(".", 1)[0] for c in CELLS}
    windows = {p.name.removesuffix(".window") for p in workdir.glob("*.window")}
    assert windows <= stems and windows
