"""The seed forum post, imported whole, gives the shipped marlin recipe: setup, matrix and reference.

Field by field the import equals recipes/deepseek-v4-flash-dspark-marlin.yaml, but for what the post does not
say and the shipped recipe adds as hgxkit's choice (each listed in EXCEPTIONS with why, and each said by the
import's notes or the shipped recipe's own notes).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.read import load_recipe

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "tests" / "fixtures" / "forum-dspark-h200.txt"
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
# What the shipped recipe says that the post does not (the path, `key.field` or `cells.field`, and why).
EXCEPTIONS = {
    "description": "the shipped recipe describes the setup in words",
    "source.author": "the post's author, as the shipped recipe records it",
    "source.notes": "how the post was written (flattened, X placeholders), from the shipped recipe",
    "model.allow_patterns": "the files the deploy downloads: hgxkit's choice (the post names a local directory)",
    "matrix.smoke": "the smoke cell verify runs by default: hgxkit's choice",
    "matrix.notes": "the shipped recipe explains its choices",
    "matrix.cells.output_len": "not in the post (the import notes it); 512 is hgxkit's choice",
    "matrix.cells.dataset": "not in the post (the import notes it); random-ids needs no download",
    "matrix.cells.range_ratio": "not in the post (the import notes it); 1.0 keeps lengths fixed in SGLang's client",
    "reference.tool": "the shipped recipe names the poster's script",
    "reference.notes": "the shipped recipe explains where the numbers come from",
    "reference.slo_ttft_p99_ms": "the post's `Under 5s?` column, read by a person",
}


def differences(a: object, b: object, path: str = "") -> set[str]:
    """Dotted paths of the dataclass fields that differ (a tuple of cells compares field by field)."""
    if type(a) is not type(b) or not hasattr(a, "__dataclass_fields__"):
        if (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and a
            and hasattr(a[0], "__dataclass_fields__")
        ):
            return set().union(*(differences(x, y, path) for x, y in zip(a, b, strict=True)))
        return set() if a == b else {path}
    out: set[str] = set()
    for f in fields(a):  # type: ignore[arg-type]
        if f.name == "path":
            continue
        name = f"{path}.{f.name}" if path else f.name
        out |= differences(getattr(a, f.name), getattr(b, f.name), name)
    return out


def seed_import():
    options = ImportOptions(name="deepseek-v4-flash-dspark-marlin", model_repo="deepseek-ai/DeepSeek-V4-Flash-DSpark")
    return import_post([(str(SEED), SEED.read_text())], options)


def test_the_seed_post_imports_the_shipped_marlin_recipe_but_for_the_documented_exceptions() -> None:
    imported = seed_import().recipe
    shipped = load_recipe(MARLIN)
    found = differences(imported, shipped)
    # A matrix cell's and a reference cell's fields are named by their place in the recipe.
    normal = {
        p.replace("matrix.entries.", "matrix.cells.").replace("reference.cells.cell.", "matrix.cells.") for p in found
    }
    assert normal == set(EXCEPTIONS)


def test_the_setup_is_the_posts_exactly() -> None:
    imported, shipped = seed_import().recipe, load_recipe(MARLIN)
    assert (imported.image, imported.docker, imported.server, imported.groups) == (
        shipped.image,
        shipped.docker,
        shipped.server,
        shipped.groups,
    )
    assert (imported.model.repo_id, imported.model.local_dir, imported.model.mount_point) == (
        "deepseek-ai/DeepSeek-V4-Flash-DSpark",
        "/data/models/deepseek-v4-flash-dspark",
        "/model",
    )


def test_the_matrix_and_reference_are_the_posts_marlin_log() -> None:
    result = seed_import()
    recipe = result.recipe
    assert [(c.input_len, c.concurrency, c.num_prompts) for c in recipe.matrix.cells()] == [
        (i, c, n) for i in (5000, 10000, 20000) for c, n in ((1, 10), (5, 15), (10, 30), (20, 60))
    ]
    assert [(w.input_len, w.concurrency, w.num_prompts) for w in recipe.matrix.warmup_runs] == [
        (5000, 1, 2),
        (10000, 1, 2),
        (20000, 1, 2),
        (5000, 20, 24),
        (20000, 20, 24),
    ]
    assert recipe.reference.label == "marlin"
    first = recipe.reference.cells[0]
    assert (first.peak_concurrency, first.accept_length, first.ttft_mean_ms, first.ttft_p90_ms, first.ttft_p99_ms) == (
        2,
        5.52,
        260.38,
        271.65,
        274.51,
    )
    assert first.sources == ("forum-dspark-h200.txt:31",)
    notes = " ".join(result.notes)
    assert "output length, dataset and range ratio are not stated" in notes
    assert "marlin is the imported server's setting" in notes
    # The summary tables (rounded) agree with the log: read, and reported as checked.
    assert [r.what for r in result.report if r.action == "checked"] == [
        "table of 12 number(s): 12 agree with more precise ones read",
        "table of 12 number(s): 12 agree with more precise ones read",
        "table of 6 number(s): 6 agree with more precise ones read",
    ]
