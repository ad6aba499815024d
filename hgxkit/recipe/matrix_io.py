"""Matrix and reference sections of a recipe file: built from validated YAML data, and written back.

`matrix.defaults` holds settings every cell shares, so a file lists only what differs per cell; a cell that
writes a setting (even `null`) overrides the default. A reference cell names its matrix cell by id.

Example:
    >>> data = {"defaults": {"output_len": 512}, "cells": [{"id": "a", "input_len": 10, "num_prompts": 3}]}
    >>> matrix = build_matrix(data, words=lambda item, path: item.split(), fail=lambda p, w: ValueError(w))
    >>> matrix.cells()[0].output_len, matrix_to_dict(matrix)["cells"]
    (512, [{'id': 'a', 'input_len': 10, 'output_len': 512, 'num_prompts': 3}])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from hgxkit.recipe.matrix import (
    CELL_SETTINGS,
    METRIC_KEYS,
    BenchmarkMatrix,
    MatrixCell,
    Reference,
    ReferenceCell,
    SmokeCell,
    WarmupRun,
)
from hgxkit.recipe.server_args import group_args
from hgxkit.recipe.shellwords import join_words

KeyPath = tuple[str | int, ...]
Fail = Callable[[KeyPath, str], Exception]
Words = Callable[[str, KeyPath], list[str]]


def build_matrix(data: dict[str, Any] | None, *, words: Words, fail: Fail) -> BenchmarkMatrix | None:
    """The matrix of validated YAML data; `words` lexes one shell-quoted item, `fail` makes the error."""
    if data is None:
        return None
    defaults = data.get("defaults") or {}
    cells: list[MatrixCell] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(data["cells"]):
        path: KeyPath = ("matrix", "cells", index)
        if item["id"] in seen:
            raise fail(
                (*path, "id"), f"cell id {item['id']!r} is also cell {seen[item['id']]}; give each cell its own id"
            )
        seen[item["id"]] = index
        settings = {key: item[key] if key in item else defaults.get(key) for key in CELL_SETTINGS}
        extra: list[str] = []
        for position, arg in enumerate(item.get("extra_args", ())):
            extra.extend(words(arg, (*path, "extra_args", position)))
        cells.append(MatrixCell(id=item["id"], **settings, extra_args=tuple(extra), source=item.get("source")))
    smoke = data.get("smoke")
    return BenchmarkMatrix(
        entries=tuple(cells),
        warmup_runs=tuple(WarmupRun(**run) for run in data.get("warmup_runs", ())),
        smoke=SmokeCell(**smoke) if smoke else None,
        notes=data.get("notes"),
    )


def build_reference(data: dict[str, Any] | None, matrix: BenchmarkMatrix | None, *, fail: Fail) -> Reference | None:
    """The reference of validated YAML data, each cell tied to the matrix cell it names."""
    if data is None:
        return None
    cells = []
    for index, item in enumerate(data.get("cells", ())):
        try:
            cell = matrix.cell(item["cell"]) if matrix is not None else None
        except KeyError:
            cell = None
        if cell is None:
            known = ", ".join(c.id for c in matrix.cells()[:8]) if matrix else "none: the recipe has no matrix"
            raise fail(
                ("reference", "cells", index, "cell"),
                f"no matrix cell {item['cell']!r} (cells: {known}); name a cell of matrix.cells",
            )
        metrics = {key: item[key] for key in METRIC_KEYS if item.get(key) is not None}
        cells.append(ReferenceCell(cell=cell, sources=tuple(item.get("sources", ())), **metrics))
    return Reference(
        tool=data["tool"],
        label=data.get("label"),
        notes=data.get("notes"),
        slo_ttft_p99_ms=data.get("slo_ttft_p99_ms"),
        cells=tuple(cells),
    )


def matrix_to_dict(matrix: BenchmarkMatrix) -> dict[str, Any]:
    """The matrix as file data: shared settings under `defaults`, each cell with what differs."""
    cells = matrix.cells()
    defaults = _shared_settings(cells)
    out: dict[str, Any] = {"defaults": defaults} if defaults else {}
    out["cells"] = [_cell_dict(cell, defaults) for cell in cells]
    if matrix.warmup_runs:
        out["warmup_runs"] = [_drop_none(run.__dict__) for run in matrix.warmup_runs]
    if matrix.smoke is not None:
        out["smoke"] = dict(matrix.smoke.__dict__)
    if matrix.notes is not None:
        out["notes"] = matrix.notes
    return out


def _shared_settings(cells: Sequence[MatrixCell]) -> dict[str, Any]:
    if len(cells) < 2:
        return {}
    shared = {}
    for key in CELL_SETTINGS:
        values = {repr(getattr(cell, key)) for cell in cells}
        value = getattr(cells[0], key)
        if len(values) == 1 and value is not None:
            shared[key] = value
    return shared


def _cell_dict(cell: MatrixCell, defaults: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": cell.id}
    for key in CELL_SETTINGS:
        value = getattr(cell, key)
        if key in defaults:
            if value != defaults[key]:
                out[key] = value
        elif value is not None:
            out[key] = value
    if cell.extra_args:
        out["extra_args"] = [join_words(list(entry)) for entry in group_args(cell.extra_args)]
    if cell.source is not None:
        out["source"] = cell.source
    return out


def reference_to_dict(reference: Reference) -> dict[str, Any]:
    """The reference as file data, each cell naming its matrix cell by id."""
    out = _drop_none(
        {
            "tool": reference.tool,
            "label": reference.label,
            "notes": reference.notes,
            "slo_ttft_p99_ms": reference.slo_ttft_p99_ms,
        }
    )
    out["cells"] = []
    for cell in reference.cells:
        item: dict[str, Any] = {"cell": cell.cell.id}
        if cell.sources:
            item["sources"] = list(cell.sources)
        item.update(cell.metrics())
        out["cells"].append(item)
    return out


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def cell_id(cell: MatrixCell, taken: set[str]) -> str:
    """A readable id for a cell not yet named: `5000x1` (input x concurrency), `2048@10rps` (input at a rate),
    `sharegpt@inf`; `-out1024` and then `-2`, `-3` are added until it is not in `taken`.

    Example:
        >>> cell_id(MatrixCell(id="", input_len=2048, request_rate=10.0), {"2048@10rps"})
        '2048@10rps-2'
    """
    head = str(cell.input_len) if cell.input_len is not None else re.sub(r"[^A-Za-z0-9_.-]", "", cell.dataset or "cell")
    if cell.concurrency is not None:
        base = f"{head}x{cell.concurrency}"
    elif cell.request_rate is not None:
        base = f"{head}@{cell.request_rate:g}rps"
    else:
        base = f"{head}@inf"
    candidates = [base, f"{base}-out{cell.output_len}"] if cell.output_len is not None else [base]
    for candidate in candidates:
        if candidate not in taken:
            return candidate
    n = 2
    while f"{candidates[-1]}-{n}" in taken:
        n += 1
    return f"{candidates[-1]}-{n}"
