"""An InferenceX entry as recipes: one per server command its cells run, each imported like a post.

A recipe is one serving command, so an entry whose cells launch different commands (a TP8 search space and a
DP-attention one; a flag set from the concurrency) gives one recipe per command, holding the cells that run on it.
Each configuration's launch text (`hgxkit.importing.inferencex`) goes through the post importer as any posted
script would: its image and model placed, its flags judged by the engine's option table, every change a note.
Configurations whose recipes come out the same (they differed only in a variable the server never reads) are
one. The recipe is named after the entry (and its configuration), its source names the suite, the commit, the
entry and the script; its matrix holds the entry's cells with the suite's client settings.

Example:
    >>> from pathlib import Path
    >>> made = entry_recipes(Path("tests/fixtures/inferencex"), "dsv4-fp8-h200-vllm")
    >>> [(m.recipe.name, len(m.recipe.matrix.cells())) for m in made]
    [('dsv4-fp8-h200-vllm-tp8', 9), ('dsv4-fp8-h200-vllm-tp8-ep8-dpa', 9)]
    >>> made[1].recipe.server.flag("--data-parallel-size"), made[1].recipe.matrix.cells()[0].id
    ('8', '8192x1024-c1')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.inferencex import (
    CLIENT,
    RANDOM_RANGE_RATIO,
    SUITE,
    Configuration,
    Entry,
    Point,
    client_notes,
    configuration_labels,
    matrix_cells,
    read_entry,
)
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.kinds import ServerKind, posted_lengths
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.matrix import BenchmarkMatrix, MatrixCell
from hgxkit.recipe.spec import Recipe, Source


@dataclass(frozen=True)
class EntryRecipe:
    """One configuration of an entry: its label ("" for an entry of one), the import's outcome (the recipe with
    its name, source and matrix), and its cells as the suite expands them."""

    label: str
    outcome: ImportOutcome
    points: tuple[Point, ...]

    @property
    def recipe(self) -> Recipe:
        return self.outcome.recipe


def entry_recipes(checkout: Path, key: str, options: ImportOptions | None = None) -> list[EntryRecipe]:
    """The recipes of entry `key` of the checkout, in the order of their first cells; InputError (one line) when
    the entry or a configuration cannot be imported. `options` as for a post (`name` is the recipe names' base,
    `image` replaces the entry's); `pick` and `fill` are not an entry's."""
    options = options or ImportOptions()
    entry = read_entry(checkout, key)
    merged: dict[str, tuple[ImportOutcome, Configuration, list[Point]]] = {}
    for configuration in entry.configurations:
        outcome = import_post(
            [(configuration.script, configuration.text)],
            ImportOptions(
                image=options.image or entry.image,
                model_repo=options.model_repo,
                revision=options.revision,
                models_dir=options.models_dir,
            ),
        )
        if outcome.recipe.server.kind != entry.framework:
            raise InputError(
                f"{configuration.script}: the entry {key} says framework {entry.framework}, but the script launches "
                f"{outcome.recipe.server.server_kind.title}; check the entry"
            )
        setup = _setup(outcome.recipe)
        if setup in merged:
            merged[setup][2].extend(configuration.points)
        else:
            merged[setup] = (outcome, configuration, list(configuration.points))
    groups = list(merged.values())
    labels = configuration_labels([points for _, _, points in groups])
    base = options.name or re.sub(r"[^a-z0-9._-]+", "-", key.lower()).strip("-._") or "inferencex"
    return [
        EntryRecipe(label, _finish(entry, outcome, configuration, points, base, label), tuple(points))
        for (outcome, configuration, points), label in zip(groups, labels, strict=True)
    ]


def _setup(recipe: Recipe) -> str:
    """What a recipe runs, without its name, description, source or matrix: the same text is the same setup."""
    return dump_recipe(replace(recipe, name="setup", description=None, source=Source(), matrix=None, reference=None))


def _finish(
    entry: Entry, outcome: ImportOutcome, configuration: Configuration, points: list[Point], base: str, label: str
) -> ImportOutcome:
    recipe = outcome.recipe
    kind = recipe.server.server_kind
    cells, dropped = _for_client(matrix_cells(points), kind.bench.extra_flags)
    if kind.bench.ignores_eos:  # nothing is lost
        dropped = [flag for flag in dropped if flag != "--ignore-eos"]
    name = f"{base}-{label}" if label else base
    checkout = f"at commit {entry.commit[:12]}" if entry.commit else "(not a git checkout)"
    shape = f", configuration {label}" if label else ""
    description = (
        f"{entry.model} on {kind.title} as {SUITE} runs entry {entry.key} ({entry.runner}{shape}): the server "
        f"command {configuration.script} launches for these {len(cells)} cells."
    )
    source = Source(
        author=SUITE,
        notes=f"{SUITE} checkout {checkout}; entry {entry.key} ({entry.file}:{entry.line}); launch script "
        f"{configuration.script}, its branches resolved for each cell without running it (line 1 of the text "
        "imported holds the variables the suite's runner sets); image and model as the entry names them.",
    )
    matrix = BenchmarkMatrix(entries=tuple(cells), notes=_matrix_notes(kind, points, dropped))
    notes = [*outcome.notes, *entry.notes, *client_notes(points)]
    recipe = replace(recipe, name=name, description=description, source=source, matrix=matrix)
    return replace(outcome, recipe=recipe, notes=tuple(dict.fromkeys(notes)))


def _for_client(cells: list[MatrixCell], allowed: frozenset[str]) -> tuple[list[MatrixCell], list[str]]:
    """The cells with only the extra flags the recipe's kind's client takes; the flags left out."""
    dropped: list[str] = []
    out = []
    for cell in cells:
        kept: list[str] = []
        for index, word in enumerate(cell.extra_args):
            if not word.startswith("-"):
                continue
            value = cell.extra_args[index + 1 : index + 2]
            has_value = bool(value) and not value[0].startswith("-")
            if word in allowed:
                kept += [word, *(value if has_value else [])]
            elif word not in dropped:
                dropped.append(word)
        out.append(replace(cell, extra_args=tuple(kept)))
    return out, dropped


def _matrix_notes(kind: ServerKind, points: list[Point], dropped: list[str]) -> str:
    notes = [
        f"The cells of the suite's sweep, with its client ({CLIENT}, as benchmarks/benchmark_lib.sh runs it): "
        f"random token ids, --random-range-ratio {RANDOM_RANGE_RATIO} drawing each length from "
        f"[{RANDOM_RANGE_RATIO}×L, L], every request sent at once (--request-rate inf) under --max-concurrency, "
        "--ignore-eos, 10×concurrency prompts after 2×concurrency warmups."
    ]
    if kind.bench.lengths == posted_lengths(CLIENT):
        notes.append(f"{kind.title}'s client draws lengths the same way.")
    else:
        notes.append(
            f"{kind.title}'s `{kind.client}` reads --random-range-ratio otherwise: hgxkit verify gives it the "
            "lengths and ratio that draw from the same intervals (hgxkit/kinds/lengths.py)."
        )
    if kind.bench.ignores_eos:
        notes.append("It ignores EOS unless told not to, so these cells need no flag of their own for it.")
    if dropped:
        notes.append(f"The suite's {', '.join(dropped)} has no counterpart in hgxkit's {kind.name} client: left out.")
    notes += [note[0].upper() + note[1:] + "." for note in client_notes(points)]
    return " ".join(notes)
