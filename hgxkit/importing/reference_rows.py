"""Which published rows are a recipe's setup: by suite entry key, by `--where FIELD=VALUE`, and by the server split.

A file of InferenceX rows holds every hardware, framework, precision and split the suite ran for a model.
`entry` keeps the rows of one suite entry: its key is `MODEL-PRECISION-HARDWARE-FRAMEWORK` with optional suffixes
(`dsr1-fp8-h200-sglang`, `dsr1-fp8-h200-sglang-mtp`), so a row belongs to it when the key is the row's own
`model-precision-hardware-framework` or starts with it and a `-`; a key ending in `-mtp` also keeps only rows
with speculative decoding. `where` terms compare a row's identity field with a value (case does not matter).
Then a row whose split (tp, ep, DP attention) differs from the recipe's server flags is set aside: tp is the
server's GPUs over its pipeline stages (`ServerCommand.parallel_size`, as the suite's TP counts a vLLM
`--data-parallel-size` too), ep SGLang's `--ep-size` or, for vLLM's `--enable-expert-parallel`, every GPU, DP
attention SGLang's `--enable-dp-attention` or vLLM's data parallelism.

Example:
    >>> parse_where(["hardware=H200", "spec_method=mtp"])
    {'hardware': 'h200', 'spec_method': 'mtp'}
"""

from __future__ import annotations

from collections.abc import Sequence

from hgxkit.errors import InputError
from hgxkit.recipe.spec import Recipe
from hgxkit.results.reference_inferencex import IDENTITY_FIELDS
from hgxkit.results.reference_points import Point, ResultFile


def parse_where(terms: Sequence[str]) -> dict[str, str]:
    """`FIELD=VALUE` terms by field, values lower-cased; InputError naming a term that is not one."""
    out = {}
    for term in terms:
        key, equals, value = term.partition("=")
        key = key.strip()
        if not equals or not value.strip():
            raise InputError(f"--where {term!r}: give FIELD=VALUE (e.g. hardware=h200)")
        if key not in IDENTITY_FIELDS:
            raise InputError(f"--where {term!r}: {key!r} is not a row field; fields: {', '.join(IDENTITY_FIELDS)}")
        out[key] = value.strip().lower()
    return out


def entry_key(point: Point) -> str:
    """The row's `model-precision-hardware-framework`, the head of its suite entry's key."""
    return "-".join(point.identity.get(key, "?") for key in ("model", "precision", "hardware", "framework")).lower()


def recipe_split(recipe: Recipe) -> dict[str, int | bool]:
    """The recipe server's tp, ep and DP attention as the suite's rows count them (see the module docstring)."""
    server = recipe.server
    kind = server.server_kind
    try:
        gpus = server.parallel_size()
    except ValueError:
        return {}
    stages = server.flag(kind.pp_flag)
    tp = gpus // int(stages) if stages and stages.isdigit() and int(stages) > 0 else gpus
    dp = server.flag(kind.dp_flag)
    data_parallel = dp is not None and dp.isdigit() and int(dp) > 1
    size = (server.flag(kind.ep_size_flag) if kind.ep_size_flag else None) or "1"
    ep = tp if kind.ep_switch and server.has(kind.ep_switch) else int(size) if size.isdigit() else 1
    return {"tp": tp, "ep": ep, "dp_attention": server.has(kind.dp_in_tp_flag) if kind.dp_in_tp_flag else data_parallel}


def select_rows(
    result: ResultFile, recipe: Recipe, *, entry: str | None, where: Sequence[str]
) -> tuple[list[Point], str]:
    """The rows of `result` that are the recipe's setup, and a phrase saying how many were kept and by what
    (or, when none is, why and what the rows have)."""
    rows = list(result.points)
    said = []
    if entry:
        rows, said = _by_entry(rows, entry.lower()), [f"entry {entry}"]
        if not rows:
            keys = sorted({entry_key(p) for p in result.points})
            return [], f"no row of entry {entry} (rows are of {_few(keys)}); check the key, or pick with --where"
    wanted = parse_where(where)
    for key, value in wanted.items():
        kept = [p for p in rows if p.identity.get(key, "").lower() == value]
        if not kept:
            values = sorted({p.identity.get(key, "(none)") for p in rows})
            return [], f"no row with {key}={value} (rows have {key} {_few(values)})"
        rows, said = kept, [*said, f"{key}={value}"]
    split = recipe_split(recipe)
    kept = [p for p in rows if all(p.parallel.get(k, v) == v for k, v in split.items())]
    if not kept:
        splits = sorted({_split_text(p.parallel) for p in rows})
        return [], (
            f"no row with the recipe's split ({_split_text(split)}); rows have {_few(splits)}: check the recipe's "
            "server flags (--tp, --ep-size, --enable-dp-attention, --data-parallel-size)"
        )
    if len(kept) < len(rows):
        said.append(_split_text(split))
    return kept, f"{len(kept)} of {len(result.points)} rows kept" + (f" ({', '.join(said)})" if said else "")


def _by_entry(rows: list[Point], key: str) -> list[Point]:
    kept = [p for p in rows if key == entry_key(p) or key.startswith(entry_key(p) + "-")]
    # The suite names its speculative-decoding entries `…-mtp`; an entry without it runs none.
    speculative = key.endswith("-mtp")
    kept = [p for p in kept if (p.identity.get("spec_method", "none").lower() == "mtp") == speculative]
    # A longer row key is the more specific entry (`…-sglang-disagg` against `…-sglang`).
    longest = max((len(entry_key(p)) for p in kept), default=0)
    return [p for p in kept if len(entry_key(p)) == longest]


def _split_text(split: dict[str, int | bool]) -> str:
    parts = [f"{key} {split[key]}" for key in ("tp", "ep") if key in split]
    if "dp_attention" in split:
        parts.append("dp-attention " + ("on" if split["dp_attention"] else "off"))
    return " ".join(parts) or "no split"


def _few(values: Sequence[str]) -> str:
    return ", ".join(values[:6]) + (f" and {len(values) - 6} more" if len(values) > 6 else "")
