"""A sample of `make mutation` in every CI run (tests/run_all.sh, session B): the tenth of each fast module's
mutants whose number ends in this commit's digit (its hash modulo 10), so successive commits sample different
mutants. Every one must be killed or listed as equivalent with a reason (tests/mutation/equivalent.txt); the
whole run is `make mutation`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Modules whose tests take seconds: a tenth of their mutants takes CI about three minutes.
SAMPLED = ("hostcmd", "hostlock", "hostfiles", "alert-rules")


def _digit() -> int:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    return int(head.stdout.strip(), 16) % 10


def test_a_sample_of_the_promise_modules_mutants_is_killed(tmp_path: Path) -> None:
    digit = _digit()
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools/mutation.py"), "--sample", str(digit), "--work", str(tmp_path), *SAMPLED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(f"mutants ending in {digit}:\n{done.stdout}")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.count("mutation score") == len(SAMPLED)
