"""The results archive on the controller: `results/<host>/<UTC time>_<recipe>/`.

Each run directory holds `fingerprint.json`, the raw client JSONL per cell (`raw/`), `summary.json` and
`report.md`. Every file is scrubbed of secrets before it is written.

Example:
    >>> runs = list_runs("results")          # oldest first
    >>> run = load_run(runs[-1].run_id, "results") if runs else None
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from hgxkit.errors import InputError
from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.summary import RunSummary
from hgxkit.secrets import redact

RUN_DIR_RE = re.compile(r"^(\d{8}T\d{6}Z)_(.+)$")


@dataclass(frozen=True)
class Run:
    """One archived run: where it is, and what it holds."""

    run_id: str
    path: Path
    summary: RunSummary
    fingerprint: Fingerprint

    def ls_json(self) -> dict[str, object]:
        return {
            "id": self.run_id,
            "path": str(self.path),
            "host": self.summary.host,
            "recipe": self.summary.recipe,
            "time": self.summary.time,
            "simulated": self.summary.simulated,
        }


def run_id_for(host: str, time: str, recipe: str) -> str:
    """`<host>/<UTC time>_<recipe>`: the id `results show/compare` accept (also the directory under the root)."""
    return f"{host}/{time}_{recipe}"


def scrub(text: str, secrets: list[str]) -> str:
    """Remove secrets from archived text: known values, `api_key` fields of /server_info, HF/OpenAI keys."""
    return redact(text, secrets)


def write_run(
    root: Path,
    summary: RunSummary,
    fingerprint: Fingerprint,
    raw: dict[str, str],
    report: str,
    secrets: list[str],
) -> Path:
    """Write a run directory atomically-ish (into a temp name, then renamed) and return its path."""
    target = root / summary.run_id
    if target.exists():
        raise InputError(f"{target}: a run with this id exists already; nothing was overwritten")
    tmp = target.with_name(target.name + ".partial")
    (tmp / "raw").mkdir(parents=True, exist_ok=True)
    for name, text in raw.items():
        (tmp / "raw" / name).write_text(scrub(text, secrets))
    (tmp / "summary.json").write_text(scrub(json.dumps(summary.to_json(), indent=2), secrets) + "\n")
    (tmp / "fingerprint.json").write_text(scrub(json.dumps(fingerprint.to_json(), indent=2), secrets) + "\n")
    (tmp / "report.md").write_text(scrub(report, secrets))
    tmp.rename(target)
    return target


def _load(path: Path, root: Path) -> Run:
    try:
        summary = RunSummary.from_json(json.loads((path / "summary.json").read_text()))
        fingerprint = Fingerprint.from_json(json.loads((path / "fingerprint.json").read_text()))
    except FileNotFoundError as err:
        raise InputError(f"{path}: not a run directory ({Path(err.filename).name} is missing)") from None
    except (json.JSONDecodeError, TypeError) as err:
        raise InputError(f"{path}: damaged run ({err}); archive it elsewhere or delete it") from None
    try:
        run_id = str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        run_id = summary.run_id
    return Run(run_id, path, summary, fingerprint)


def list_runs(root: str | Path) -> list[Run]:
    """Every run under `root`, oldest first (by the UTC time in its directory name)."""
    base = Path(root)
    runs = [
        _load(path, base)
        for path in base.glob("*/*")
        if path.is_dir() and RUN_DIR_RE.match(path.name) and (path / "summary.json").exists()
    ]
    return sorted(runs, key=lambda run: (RUN_DIR_RE.match(run.path.name).group(1), run.run_id))  # type: ignore[union-attr]


def load_run(ref: str, root: str | Path) -> Run:
    """A run by directory path or by id (`<host>/<time>_<recipe>`, or any unique part of one)."""
    base = Path(root)
    direct = Path(ref)
    if (direct / "summary.json").exists():
        return _load(direct, base)
    if (base / ref / "summary.json").exists():
        return _load(base / ref, base)
    matches = [run for run in list_runs(base) if ref in run.run_id]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InputError(f"{ref}: no such run under {base}; list runs with `hgxkit results ls`")
    ids = ", ".join(run.run_id for run in matches[:5])
    raise InputError(f"{ref}: matches {len(matches)} runs ({ids}); give more of the id")
