"""Recipe schema migrations: version 1 data becomes version 2 data, in memory, before it is built.

v1 had a grid matrix (`input_lens` x `concurrencies`, prompts per concurrency, one output length) and
reference cells that named their own input length and concurrency. v2 lists cells with every setting and
ties each reference cell to a matrix cell by id. The grid becomes one cell per (input length, concurrency),
id `INPUTxCONCURRENCY`, in v1's order (input lengths outer); the grid-wide settings become `matrix.defaults`.

Example:
    >>> v1 = {"schema_version": 1, "matrix": {"input_lens": [10], "concurrencies": [1, 2], "num_prompts": [3, 4],
    ...       "output_len": 5}, "reference": {"tool": "t", "cells": [{"input_len": 10, "concurrency": 2,
    ...       "ttft_mean_ms": 1.5}]}}
    >>> v2 = migrate(v1, fail=lambda path, why: ValueError(why))
    >>> [c["id"] for c in v2["matrix"]["cells"]], v2["reference"]["cells"]
    (['10x1', '10x2'], [{'cell': '10x2', 'ttft_mean_ms': 1.5}])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

KeyPath = tuple[str | int, ...]
Fail = Callable[[KeyPath, str], Exception]

# What v1 left to hgxkit when a matrix did not say.
_V1_DATASET = "random-ids"
_V1_RANGE_RATIO = 1.0


def migrate(data: dict[str, Any], *, fail: Fail) -> dict[str, Any]:
    """Version 1 recipe data as version 2 data (other versions are returned unchanged)."""
    if data.get("schema_version") != 1:
        return data
    out = {**data, "schema_version": 2}
    matrix = data.get("matrix")
    reference = data.get("reference")
    cells = _grid_cells(matrix, fail) if matrix else []
    ids = {(c["input_len"], c["concurrency"]): c for c in cells}
    ref_cells = []
    for ref in (reference or {}).get("cells", []):
        key = (ref["input_len"], ref["concurrency"])
        cell = ids.get(key)
        prompts = ref.get("num_prompts")
        if cell is None or (prompts is not None and prompts != cell["num_prompts"]):
            cell = {"id": _new_id(key, prompts, cells), "input_len": key[0], "concurrency": key[1]}
            if prompts is not None:
                cell["num_prompts"] = prompts
            cells.append(cell)
        metrics = {k: v for k, v in ref.items() if k not in ("input_len", "concurrency", "num_prompts")}
        ref_cells.append({"cell": cell["id"], **metrics})
    if matrix is not None or cells:
        out["matrix"] = _matrix_v2(matrix or {}, cells)
    if reference is not None:
        out["reference"] = {**reference, "cells": ref_cells}
    return out


def _grid_cells(matrix: dict[str, Any], fail: Fail) -> list[dict[str, Any]]:
    prompts, concurrencies = matrix["num_prompts"], matrix["concurrencies"]
    if len(prompts) != len(concurrencies):
        raise fail(
            ("matrix", "num_prompts"),
            f"{len(prompts)} entries for {len(concurrencies)} concurrencies; give one prompt count per concurrency",
        )
    return [
        {"id": f"{i}x{c}", "input_len": i, "concurrency": c, "num_prompts": n}
        for i in matrix["input_lens"]
        for c, n in zip(concurrencies, prompts, strict=True)
    ]


def _new_id(key: tuple[int, int], prompts: int | None, cells: list[dict[str, Any]]) -> str:
    base = f"{key[0]}x{key[1]}" + (f"n{prompts}" if prompts is not None else "")
    taken = {c["id"] for c in cells}
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def _matrix_v2(matrix: dict[str, Any], cells: list[dict[str, Any]]) -> dict[str, Any]:
    defaults = {
        "dataset": matrix.get("dataset", _V1_DATASET),
        "output_len": matrix.get("output_len"),
        "range_ratio": matrix.get("random_range_ratio", _V1_RANGE_RATIO),
    }
    out: dict[str, Any] = {"defaults": {k: v for k, v in defaults.items() if v is not None}, "cells": cells}
    for key in ("smoke", "notes"):
        if matrix.get(key) is not None:
            out[key] = matrix[key]
    return out
