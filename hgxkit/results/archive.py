"""The results archive on the controller: `results/<host>/<UTC time>_<recipe>/`.

Each run directory holds `fingerprint.json` (a multi-node run: rank 0's host; every other rank's host in
`members/<host>.json`, the topology in `node_group`), the raw client output per cell (`raw/`), raw telemetry per cell
(`telemetry/`, when collected), `summary.json`, `report.md` and, when asked for, `report.html`. Every file is
scrubbed of secrets before it is written. A damaged run (bad JSON, a missing file, a `.partial` directory left by
an interrupted write, a schema_version this hgxkit cannot read) is skipped with a one-line warning.

Example:
    >>> runs, skipped = scan_runs("results")     # oldest first; skipped: [(path, reason), …]
    >>> run = load_run(runs[-1].run_id, "results") if runs else None
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from hgxkit.errors import InputError
from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.run import Run
from hgxkit.results.schemas import schema_errors
from hgxkit.results.summary import RunSummary
from hgxkit.secrets import redact, redact_json, redact_json_text

RUN_DIR_RE = re.compile(r"^(\d{8}T\d{6}Z)_(.+)$")
PARTIAL_SUFFIX = ".partial"
REMEDY = "move it out of the archive or delete it"
RECIPE_FILE = "recipe.yaml"  # the recipe as it ran (optional: runs archived before it existed have none)


def run_id_for(host: str, time: str, recipe: str) -> str:
    """`<host>/<UTC time>_<recipe>`: the id `results show/compare` accept (also the directory under the root)."""
    return f"{host}/{time}_{recipe}"


def scrub(text: str, secrets: list[str]) -> str:
    """Remove secrets from archived text: known values, `api_key` fields of /server_info, HF/OpenAI keys."""
    return redact(text, secrets)


def scrub_json(data: Any, secrets: list[str]) -> str:
    """An archived JSON document, secrets masked value by value (it stays valid JSON)."""
    return json.dumps(redact_json(data, secrets), indent=2) + "\n"


def write_run(
    root: Path,
    summary: RunSummary,
    fingerprint: Fingerprint,
    raw: dict[str, str],
    report: str,
    secrets: list[str],
    *,
    telemetry: dict[str, str] | None = None,
    html: bool = False,
    reference: Any = None,
    recipe_yaml: str | None = None,
    members: dict[str, Fingerprint] | None = None,
) -> Path:
    """Write a run directory atomically-ish (into a temp name, then renamed) and return its path.

    `raw`: client output per cell (file name -> text) under `raw/`; `telemetry`: raw telemetry per cell (file
    name -> text, e.g. `g0_5000x5.metrics.prom`, `g0_5000x5.gpu.csv`) under `telemetry/`; `html`: also write the
    self-contained `report.html` (with `reference`, a recipe's Reference, compared against it); `recipe_yaml`: the
    recipe that ran, as `recipe.yaml` (so `compare` can say which settings differ, and `--reference` needs no
    recipe file); `members`: the fingerprints of a multi-node group's other hosts (host name -> fingerprint)
    under `members/`.
    """
    target = root / summary.run_id
    if target.exists():
        raise InputError(f"{target}: a run with this id exists already; nothing was overwritten")
    tmp = target.with_name(target.name + PARTIAL_SUFFIX)
    if tmp.is_dir() and not tmp.is_symlink():  # an interrupted write of this id: none of its files are this run's
        shutil.rmtree(tmp)
    (tmp / "raw").mkdir(parents=True)
    for name, text in raw.items():
        (tmp / "raw" / name).write_text(redact_json_text(text, secrets))  # client JSONL stays parseable
    if telemetry:
        (tmp / "telemetry").mkdir()
        for name, text in telemetry.items():
            (tmp / "telemetry" / name).write_text(scrub(text, secrets))
    (tmp / "summary.json").write_text(scrub_json(summary.to_json(), secrets))
    (tmp / "fingerprint.json").write_text(scrub_json(fingerprint.to_json(), secrets))
    if members:
        (tmp / "members").mkdir()
        for name, member in members.items():
            (tmp / "members" / f"{_safe_name(name)}.json").write_text(scrub_json(member.to_json(), secrets))
    (tmp / "report.md").write_text(scrub(report, secrets))
    if recipe_yaml is not None:
        (tmp / RECIPE_FILE).write_text(scrub(recipe_yaml, secrets))
    if html:
        from hgxkit.results.html_report import run_html

        run = Run(summary.run_id, target, summary, fingerprint)
        (tmp / "report.html").write_text(scrub(run_html([run], reference=reference), secrets))
    tmp.rename(target)
    return target


def _safe_name(name: str) -> str:
    """A host name as a file name (an inventory name may hold `/` or `@`)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "host"


def _load_members(path: Path) -> dict[str, Fingerprint]:
    """`members/<host>.json` of a multi-node run, by the host name each records."""
    members = {}
    for file in sorted((path / "members").glob("*.json")):
        try:
            data = _read_json(file)
            member = Fingerprint.from_json(data, source=str(file))
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError, ValueError, AttributeError) as err:
            raise InputError(f"{path}: damaged run (members/{file.name}: {err}); {REMEDY}") from None
        problems = schema_errors(member.to_json(), "fingerprint")
        if problems:
            raise InputError(f"{path}: damaged run (members/{file.name}: {problems[0]}); {REMEDY}")
        members[member.system_name] = member
    return members


def write_report_html(run_dir: str | Path, *, reference: Any = None, secrets: list[str] | None = None) -> Path:
    """Write (or rewrite) `report.html` into an archived run directory and return its path.

    Example: `write_report_html("results/node1/20261130T120000Z_dspark", reference=recipe.reference)`.
    """
    from hgxkit.results.html_report import run_html

    path = Path(run_dir)
    run = _load(path, path.parent.parent)
    out = path / "report.html"
    out.write_text(scrub(run_html([run], reference=reference), secrets or []))
    return out


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def _load(path: Path, root: Path) -> Run:
    """One run directory; InputError (one line naming the directory and what to do) when it is damaged."""
    if path.name.endswith(PARTIAL_SUFFIX):
        raise InputError(f"{path}: an interrupted write (.partial); delete it, or rename it when it is complete")
    files = {}
    for name in ("summary.json", "fingerprint.json"):
        try:
            files[name] = _read_json(path / name)
        except FileNotFoundError:
            raise InputError(f"{path}: not a complete run ({name} is missing); {REMEDY}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: damaged run ({name} is not JSON: {err}); {REMEDY}") from None
    try:
        summary = RunSummary.from_json(files["summary.json"], source=str(path / "summary.json"))
        fingerprint = Fingerprint.from_json(files["fingerprint.json"], source=str(path / "fingerprint.json"))
    except (TypeError, KeyError, ValueError, AttributeError) as err:
        raise InputError(f"{path}: damaged run ({type(err).__name__}: {err}); {REMEDY}") from None
    problems = schema_errors(summary.to_json(), "summary") + schema_errors(fingerprint.to_json(), "fingerprint")
    if problems:
        raise InputError(f"{path}: damaged run ({problems[0]}); {REMEDY}")
    try:
        run_id = str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        run_id = summary.run_id
    return Run(run_id, path, summary, fingerprint, _load_members(path))


def scan_runs(root: str | Path) -> tuple[list[Run], list[tuple[str, str]]]:
    """Every readable run under `root`, oldest first, and every damaged one as (path, one-line reason)."""
    base = Path(root)
    runs, skipped = [], []
    for path in sorted(base.glob("*/*")):
        if not path.is_dir() or not RUN_DIR_RE.match(path.name):
            continue
        try:
            runs.append(_load(path, base))
        except InputError as err:
            skipped.append((str(path), err.message))
    runs.sort(key=lambda run: (RUN_DIR_RE.match(run.path.name).group(1), run.run_id))  # type: ignore[union-attr]
    return runs, skipped


def list_runs(root: str | Path, *, warn: bool = True) -> list[Run]:
    """Every readable run under `root`, oldest first; each damaged run is one warning line on stderr."""
    runs, skipped = scan_runs(root)
    if warn:
        for _, reason in skipped:
            print(f"warning: skipped {reason}", file=sys.stderr)
    return runs


def load_run(ref: str, root: str | Path) -> Run:
    """A run by directory path or by id (`<host>/<time>_<recipe>`, or any unique part of one)."""
    base = Path(root)
    direct = Path(ref)
    if (direct / "summary.json").exists():
        return _load(direct, base)
    if (base / ref / "summary.json").exists():
        return _load(base / ref, base)
    runs, skipped = scan_runs(base)
    matches = [run for run in runs if ref in run.run_id]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        damaged = [reason for path, reason in skipped if ref in path]
        if damaged:
            raise InputError(damaged[0])
        raise InputError(f"{ref}: no such run under {base}; list runs with `hgxkit results ls`")
    ids = ", ".join(run.run_id for run in matches[:5])
    raise InputError(f"{ref}: matches {len(matches)} runs ({ids}); give more of the id")
