"""The Slurm export's smoke cell: the client module chosen as verify chooses it (the first the image has), and a
cell that fails, or an image without a client, is reported while the job, and the servers it started, go on.
The script's own lines run under bash with a stand-in `docker` that plays each case."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_export import _export

# A stand-in docker: `python3 -c "import M"` succeeds for the modules in $HAS; the client's run fails when $FAIL.
DOCKER = """
docker() {
  case "$*" in
    *"-c import "*) for m in $HAS; do case "$*" in *"import $m") return 0 ;; esac; done; return 1 ;;
    *"-e HF_HUB_OFFLINE=1"*) echo "ran $*" >> "$RAN"; [ -z "$FAIL" ] ;;
  esac
}
"""


def _smoke(script: str) -> str:
    """Group 0's smoke lines: the module pick through its `fi`."""
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("module=$("))
    end = next(i for i in range(start, len(lines)) if lines[i] == "fi")
    return "\n".join(lines[start : end + 1])


@pytest.mark.parametrize(
    ("has", "fail", "ran", "said"),
    [
        ("sglang.benchmark.serving sglang.bench_serving", "", "-m sglang.benchmark.serving", ""),
        ("sglang.bench_serving", "", "-m sglang.bench_serving", ""),  # an older image: verify's fallback
        ("sglang.benchmark.serving", "1", "-m sglang.benchmark.serving", "the smoke cell failed"),
        ("", "", None, "no benchmark client of SGLang in deepseek-v4-flash-0"),
    ],
    ids=["current", "older-image", "cell-fails", "no-client"],
)
def test_the_smoke_cell_picks_the_client_and_never_ends_the_job(
    has: str, fail: str, ran: str | None, said: str, tmp_path: Path
) -> None:
    (script,) = _export("marlin", "slurm", tmp_path / "out").glob("*.sbatch")
    record = tmp_path / "ran"
    program = f"set -euo pipefail\n{DOCKER}\n{_smoke(script.read_text())}\necho the job goes on\n"
    done = subprocess.run(
        ["bash", "-c", program],
        env={"PATH": "/usr/bin:/bin", "HAS": has, "FAIL": fail, "RAN": str(record)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip() == "the job goes on", done.stderr
    assert (said in done.stderr) if said else done.stderr == ""
    if ran is None:
        assert not record.exists()
    else:
        assert ran in record.read_text()


def test_the_job_asks_for_the_time_it_is_given(tmp_path: Path) -> None:
    (script,) = _export("marlin", "slurm", tmp_path, time_limit="2-12:00:00").glob("*.sbatch")
    assert "#SBATCH --time=2-12:00:00" in script.read_text().splitlines()
