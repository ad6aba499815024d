"""Other tools' result files made into a recipe's reference: each point matched with a matrix cell of the recipe.

A point goes to the cell that agrees with every setting both state (input and output length, concurrency,
request rate) and shares the most of them; the request count only breaks ties (a poster's 64 requests and the
recipe's 100 prompts are the same workload). A point that states neither concurrency nor rate goes nowhere
unless `cell` names its cell. Published rows (InferenceX) are first narrowed to one setup: `entry` (a suite
entry key, `dsr1-fp8-h200-sglang`), `where` (`hardware=h200`) and the recipe's own split (tp, ep, DP attention
from its server flags, where rows give theirs). Two points for one cell are refused, naming what tells them
apart. The reference keeps each file's tool, how its metrics were mapped, and for rows the run each cell came
from (run URL, date, image), so a comparison names what it compares with.

Example:
    >>> from hgxkit.recipe.matrix import MatrixCell
    >>> from hgxkit.results.reference_points import Point
    >>> cells = (MatrixCell(id="1024x4", input_len=1024, concurrency=4), MatrixCell(id="1024x8", input_len=1024,
    ...          concurrency=8))
    >>> [c.id for c in matching_cells(Point("p", "p:1", {}, input_len=1024, concurrency=8), cells)]
    ['1024x8']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hgxkit.errors import InputError
from hgxkit.importing.reference_rows import select_rows
from hgxkit.recipe.matrix import METRICS, MatrixCell, Reference, ReferenceCell
from hgxkit.recipe.spec import Recipe
from hgxkit.results.reference_points import Point, ResultFile

_HARD = ("input_len", "output_len", "concurrency", "request_rate")
_INTEGER = {m.key for m in METRICS if m.integer}


@dataclass(frozen=True)
class Placed:
    """A point and the cell it became."""

    point: Point
    cell: MatrixCell
    file: ResultFile


@dataclass
class Outcome:
    """The reference built (None when a file gave no cell), and one line per file saying which cells it became
    or why none."""

    reference: Reference | None
    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def matching_cells(point: Point, cells: Sequence[MatrixCell]) -> list[MatrixCell]:
    """The cells `point` may be: none of the settings both state differ, and the most of them agree."""
    if point.concurrency is None and point.request_rate is None:
        return []
    scored = []
    for cell in cells:
        pairs = [(getattr(point, key), getattr(cell, key)) for key in _HARD]
        stated = [(mine, theirs) for mine, theirs in pairs if mine is not None and theirs is not None]
        if any(mine != theirs for mine, theirs in stated) or not stated:
            continue
        ties = point.num_prompts is not None and point.num_prompts == cell.num_prompts
        scored.append((len(stated) + 0.5 * ties, cell))
    if not scored:
        return []
    best = max(score for score, _ in scored)
    return [cell for score, cell in scored if score == best]


def build_reference(
    recipe: Recipe,
    files: Sequence[ResultFile],
    *,
    cell: str | None = None,
    entry: str | None = None,
    where: Sequence[str] = (),
) -> Outcome:
    """The reference of `files` for `recipe`'s matrix, and one line per file (`failed` holds the files that
    gave no cell); InputError when two points give one cell or the options do not fit the files."""
    if recipe.matrix is None or not recipe.matrix.cells():
        raise InputError(f"{recipe.path or recipe.name}: the recipe has no matrix cells to put reference numbers on")
    cells = recipe.matrix.cells()
    _check_options(files, cell, entry, where)
    outcome = Outcome(None)
    placed: list[Placed] = []
    for result in files:
        points, prefix = list(result.points), ""
        if result.format == "InferenceX rows":
            points, prefix = select_rows(result, recipe, entry=entry, where=where)
        taken = _place(result, points, cells, cell) if points else []
        line = _file_line(result, points, taken, cells, prefix)
        outcome.lines.append(line)
        if not taken:
            outcome.failed.append(line)
        placed += taken
        outcome.notes += result.notes
    if not outcome.failed:
        _refuse_doubles(placed)
        outcome.reference = _reference(files, placed, cells)
    return outcome


def _check_options(files: Sequence[ResultFile], cell: str | None, entry: str | None, where: Sequence[str]) -> None:
    rows = [f for f in files if f.format == "InferenceX rows"]
    if (entry or where) and not rows:
        raise InputError("--entry and --where pick InferenceX rows; none of the files is InferenceX rows")
    if cell is not None and (len(files) != 1 or len(files[0].points) != 1 or rows):
        raise InputError("--cell names the cell of one file with one result; give one such file with it")


def _place(
    result: ResultFile, points: Sequence[Point], cells: Sequence[MatrixCell], forced: str | None
) -> list[Placed]:
    if forced is not None:
        found = [c for c in cells if c.id == forced]
        if not found:
            raise InputError(f"--cell {forced}: the recipe has no such cell (cells: {_ids(cells)})")
        return [Placed(points[0], found[0], result)]
    out = []
    for point in points:
        candidates = matching_cells(point, cells)
        if len(candidates) > 1:
            raise InputError(
                f"{point.where}: {point.settings()} fits cells {_ids(candidates)} alike; "
                "give --cell ID (with that one file)"
            )
        if candidates:
            out.append(Placed(point, candidates[0], result))
    return out


def _file_line(
    result: ResultFile, points: Sequence[Point], taken: list[Placed], cells: Sequence[MatrixCell], prefix: str
) -> str:
    head = f"{result.name}: {result.tool}"
    if not points:
        return f"{head}: {prefix}"
    if prefix:
        head += f", {prefix}"
    if not taken:
        said = points[0].settings() if len(points) == 1 else f"{len(points)} results"
        if result.format == "InferenceX rows":
            shapes = sorted({(p.input_len or 0, p.output_len or 0, p.concurrency or 0) for p in points})
            said = "rows " + ", ".join(f"{i}/{o}/c{c}" for i, o, c in shapes[:8]) + (" …" if len(shapes) > 8 else "")
            hint = f"the recipe's cells: {_ids(cells)}; add cells with these isl/osl/conc or pick other rows"
        elif len(points) == 1 and points[0].concurrency is None and points[0].request_rate is None:
            hint = "the file does not say its concurrency or rate; give --cell ID"
        else:
            hint = f"cells: {_ids(cells)}; add the cell to the recipe's matrix or give --cell ID"
        return f"{head} ({said}) became no cell ({hint})"
    if len(points) == 1:
        point, cell = taken[0].point, taken[0].cell
        extra = ""
        if point.num_prompts is not None and cell.num_prompts not in (None, point.num_prompts):
            extra = f" (the file sent {point.num_prompts} requests, the cell {cell.num_prompts})"
        return f"{head} ({point.settings()}) became cell {cell.id}{extra}"
    left = len(points) - len(taken)
    tail = f"; {left} matched no cell" if left else ""
    return f"{head}: {len(taken)} became cells {', '.join(p.cell.id for p in taken)}{tail}"


def _refuse_doubles(placed: list[Placed]) -> None:
    by_cell: dict[str, list[Placed]] = {}
    for item in placed:
        by_cell.setdefault(item.cell.id, []).append(item)
    for cell_id, items in by_cell.items():
        if len(items) < 2:
            continue
        first, second = items[0].point, items[1].point
        differ = [
            f"{key} {first.identity.get(key)}/{second.identity.get(key)}"
            for key in sorted(set(first.identity) | set(second.identity))
            if key != "run_url" and first.identity.get(key) != second.identity.get(key)
        ]
        how = (
            f" (they differ in {', '.join(differ[:4])}); choose with --entry KEY or --where FIELD=VALUE"
            if differ
            else "; import one of them"
        )
        raise InputError(f"{first.where} and {second.where} both give cell {cell_id}{how}")


def _reference(files: Sequence[ResultFile], placed: list[Placed], cells: Sequence[MatrixCell]) -> Reference:
    order = {cell.id: index for index, cell in enumerate(cells)}  # the matrix's order, as a post reads
    used = [f for f in files if any(p.file is f for p in placed)]
    tools = list(dict.fromkeys(f.tool for f in used))
    notes = list(dict.fromkeys(f.definitions for f in used))
    runs: dict[str, list[str]] = {}
    for item in placed:
        if item.point.identity.get("run_url"):
            runs.setdefault(_run_note(item.point.identity), []).append(item.cell.id)
    if runs:
        notes.append("Runs: " + "; ".join(f"{run}: {', '.join(ids)}" for run, ids in runs.items()))
    reference_cells = [
        ReferenceCell(
            cell=item.cell,
            sources=(item.point.source,),
            **{key: int(v) if key in _INTEGER else _tidy(v) for key, v in item.point.metrics.items()},
        )
        for item in sorted(placed, key=lambda p: order[p.cell.id])
    ]
    return Reference(
        tool=" + ".join(tools), label=_label(placed), notes=". ".join(notes) + ".", cells=tuple(reference_cells)
    )


def _tidy(value: float) -> float:
    """The value without the float noise of a unit conversion (0.0191 s is 19.1 ms, not 19.099999999999998)."""
    return float(f"{value:.12g}")


def _run_note(identity: dict[str, str]) -> str:
    said = ", ".join(identity[key] for key in ("date", "image") if identity.get(key))
    return identity["run_url"] + (f" ({said})" if said else "")


def _label(placed: list[Placed]) -> str | None:
    """`InferenceX h200 sglang fp8` when every row came from one setup, else None."""
    identities = {
        tuple(p.point.identity.get(key, "") for key in ("hardware", "framework", "precision")) for p in placed
    }
    if len(identities) != 1 or not any(next(iter(identities))):
        return None
    return " ".join(["InferenceX", *(part for part in next(iter(identities)) if part)])


def _ids(cells: Sequence[MatrixCell]) -> str:
    shown = ", ".join(c.id for c in cells[:12])
    return shown + (f" and {len(cells) - 12} more" if len(cells) > 12 else "")
