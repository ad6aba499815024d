"""The fault matrix soak's figures, added up over its parts (each part one pytest session, `make soak-part`).

Each test module of the matrix appends one JSON line per session to `$HGXKIT_FAULT_FIGURES` (when set): cases
passed, faults injected, requests to the untouched groups and how many failed, and the host's 1-minute load
average sampled after each case. `make soak-figures` (this file as a script) prints the sum in one line:

    python tests/faults/soak_figures.py FILE [--stress "STRESS-NG ARGS"]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

KEYS = ("cases", "faults", "requests", "failed")


def new_counts() -> dict:
    """A session's counts, all zero, and the load averages it saw (one per case)."""
    return {**dict.fromkeys(KEYS, 0), "load": []}


def sample_load(counts: dict) -> None:
    """Note the host's 1-minute load average now (after a case)."""
    counts["load"].append(round(os.getloadavg()[0], 2))


def record(counts: dict, module: str, selected: int) -> None:
    """Append this session's counts to $HGXKIT_FAULT_FIGURES (nothing when unset)."""
    path = os.environ.get("HGXKIT_FAULT_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"module": module, "selected": selected, **counts}) + "\n")


def line(counts: dict, prefix: str = "fault matrix") -> str:
    """The figures as the issue asks for them (`requests failed` last of the four)."""
    return (
        f"{prefix}: cases {counts['cases']}, faults injected {counts['faults']}, requests to the untouched "
        f"groups {counts['requests']}, requests failed: {counts['failed']}"
    )


def summary(rows: list[dict], stress: str = "") -> str:
    """One line over every part: the four figures, cases selected, parts, the stress and the load average seen."""
    total = new_counts()
    for row in rows:
        for key in KEYS:
            total[key] += row[key]
        total["load"] += row["load"]
    loads = total["load"]
    seen = (
        f"load average (1 min, after each case) min {min(loads)} mean {sum(loads) / len(loads):.2f} max {max(loads)}"
        if loads
        else "no load sampled"
    )
    selected = sum(r["selected"] for r in rows)
    return (
        f"{line(total, 'fault matrix soak')}; {total['cases']} of {selected} selected cases passed, in "
        f"{len(rows)} sessions; stress-ng {stress or '(none)'}; {seen}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--stress", default="", help="the stress-ng arguments the parts ran under")
    args = parser.parse_args(argv)
    if not args.file.is_file():
        print(f"soak figures: {args.file}: no such file; run `make soak-part PART=1` first", file=sys.stderr)
        return 1
    rows = []
    for n, text in enumerate(args.file.read_text().splitlines(), 1):
        try:
            rows.append(json.loads(text))
        except json.JSONDecodeError:
            print(f"soak figures: {args.file} line {n}: not JSON; remove the line or the file", file=sys.stderr)
            return 1
    print(summary(rows, args.stress))
    return 0 if rows and all(r["cases"] == r["selected"] and r["failed"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
