"""`hgxkit recipe show`: what a loaded recipe holds, as tables for people or JSON for scripts.

The JSON is the recipe file's data (`recipe_to_dict`) with every matrix cell written out in full (defaults
applied) and the server kind's defaults that decide how it is reached (port, host).

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> data = recipe_json(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"))
    >>> data["server"]["kind"], data["matrix"]["cells"][0]["output_len"], data["reference"]["cells"][0]["cell"]
    ('sglang', 512, '5000x1')
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hgxkit.recipe.dump import recipe_to_dict
from hgxkit.recipe.matrix import CELL_SETTINGS, METRICS
from hgxkit.recipe.shellwords import join_words
from hgxkit.recipe.spec import Recipe


def recipe_json(recipe: Recipe) -> dict[str, Any]:
    """The recipe as JSON-able data, matrix cells in full: a recipe document itself, valid under the recipe
    schema (`hgxkit recipe schema`); the kind's defaults are `hgxkit.kinds.KINDS[server.kind]`'s."""
    data = recipe_to_dict(recipe)
    if recipe.groups is not None:
        data["groups"]["nodes"] = recipe.node_count()
    if recipe.matrix is not None:
        cells = []
        for cell in recipe.matrix.cells():
            item = asdict(cell)
            item["extra_args"] = list(cell.extra_args)
            cells.append(item)
        data["matrix"]["cells"] = cells
        data["matrix"].pop("defaults", None)
    return data


def show_recipe(recipe: Recipe, console: Console) -> None:
    """Print the recipe as a few small tables."""
    kind = recipe.server.server_kind
    head = Table(show_header=False, box=None)
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    model = recipe.model
    rows = [
        ("recipe", f"{recipe.name} (schema v{recipe.schema_version}){' ' + recipe.path if recipe.path else ''}"),
        ("server", f"{kind.title} ({kind.name}): {join_words(list(recipe.server.program)) or '(image entrypoint)'}"),
        ("image", recipe.image.pinned()),
        ("model", f"{model.repo_id or '(no Hub repo)'} @ {model.revision}"),
        ("placed", f"{model.local_dir or '-'} -> {model.mount_point or '-'}"),
        ("groups", _groups_line(recipe)),
        ("docker", " ".join(join_words(list(e.words)) for e in recipe.docker.entries)),
        ("args", " ".join(join_words(list(e)) for e in recipe.server.args)),
    ]
    for key, value in rows:
        head.add_row(key, escape(value))
    console.print(head)
    if recipe.matrix is not None:
        _show_matrix(recipe, console)
    if recipe.reference is not None:
        _show_reference(recipe, console)


def _groups_line(recipe: Recipe) -> str:
    groups = recipe.groups
    nodes = recipe.node_count()
    if groups is None:
        return "one container as written" + (f", spanning {nodes} nodes" if nodes > 1 else "")
    size = f"groups of {groups.size} GPUs" if groups.size else f"explicit {[list(g) for g in groups.explicit or ()]}"
    parts = [size]
    if groups.gpus_per_node:
        parts.append(f"{groups.gpus_per_node} GPUs per node")
    if groups.port_base is not None:
        parts.append(f"ports from {groups.port_base}")
    if nodes > 1:
        parts.append(f"each group spans {nodes} nodes (rendezvous port {groups.dist_port or '-'})")
    if groups.host_count > 1:
        parts.append(f"laid over {groups.host_count} hosts in turn (each runs its share of the groups)")
    return ", ".join(parts)


def _show_matrix(recipe: Recipe, console: Console) -> None:
    assert recipe.matrix is not None
    cells = recipe.matrix.cells()
    used = [key for key in CELL_SETTINGS if any(getattr(c, key) is not None for c in cells)]
    table = Table(title="matrix cells", show_header=True, header_style="bold", box=None)
    for column in ("id", *used, "extra args", "source"):
        table.add_column(column, overflow="fold")
    for cell in cells:
        values = [_text(getattr(cell, key)) for key in used]
        table.add_row(cell.id, *values, escape(" ".join(cell.extra_args)), escape(cell.source or ""))
    console.print(table)
    for run in recipe.matrix.warmup_runs:
        console.print(f"warmup run: input {run.input_len}, concurrency {run.concurrency}, {run.num_prompts} prompts")
    smoke = recipe.matrix.smoke
    if smoke is not None:
        console.print(
            f"smoke cell: input {smoke.input_len}, concurrency {smoke.concurrency}, {smoke.num_prompts} prompts"
        )


def _show_reference(recipe: Recipe, console: Console) -> None:
    reference = recipe.reference
    assert reference is not None
    keys = [m.key for m in METRICS if any(getattr(c, m.key) is not None for c in reference.cells)]
    title = f"reference: {reference.tool}" + (f" [{reference.label}]" if reference.label else "")
    table = Table(title=escape(title), show_header=True, header_style="bold", box=None)
    for column in ("cell", *keys, "sources"):
        table.add_column(column, overflow="fold")
    for cell in reference.cells:
        table.add_row(cell.cell.id, *(_text(getattr(cell, key)) for key in keys), escape(", ".join(cell.sources)))
    console.print(table)
    if reference.slo_ttft_p99_ms is not None:
        console.print(f"SLO: TTFT P99 under {reference.slo_ttft_p99_ms:g} ms")


def _text(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else escape(str(value))
