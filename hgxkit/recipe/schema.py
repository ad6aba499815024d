"""JSON Schema of recipe files (`schema_version: 2`), published as `recipes/schema.json`; version 1 files are
checked against `RECIPE_SCHEMA_V1`, then migrated (`hgxkit.recipe.migrate`).

`hgxkit recipe schema` prints it; a test keeps the published copy equal to this one. Every field that
reaches a command line, a path or a container name has its real grammar here, as a regex hgxkit.recipe.validate
applies to whole values (`re.fullmatch`, so a trailing newline cannot slip past `$`); the `description` of
each pattern is the "what was expected" of its problem.

Example:
    >>> import re
    >>> bool(re.fullmatch(IMAGE_REFERENCE, "lmsysorg/sglang:dev-dspark")), bool(re.fullmatch(IMAGE_REFERENCE, "x;id"))
    (True, False)
"""

from __future__ import annotations

from typing import Any

from hgxkit.kinds import KIND_NAMES
from hgxkit.recipe.matrix import METRICS

# Docker's reference grammar (github.com/distribution/reference), digests restricted to sha256:
# [registry[:port]/]path[:tag][@sha256:<64 hex>], path components lowercase with . _ __ - separators.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
DIGEST = r"sha256:[0-9a-f]{64}"
IMAGE_REFERENCE = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{DIGEST})?"
# Docker's container names.
CONTAINER_NAME = r"[a-zA-Z0-9][a-zA-Z0-9_.-]*"
# A container name with `{{group}}` where the group index goes.
NAME_TEMPLATE = r"(?:[a-zA-Z0-9]|\{\{group\}\})(?:[a-zA-Z0-9_.-]|\{\{group\}\})*"
# What SGLang and the benchmark clients accept as a model name without quoting: no spaces, quotes or controls.
SERVED_MODEL_NAME = r"[A-Za-z0-9_/][A-Za-z0-9_.:/@+-]{0,255}"
# Hugging Face repo ids: `name` or `namespace/name`, no `..` or `--` (the Hub refuses both), 96 characters each.
REPO_ID = r"(?!.*(?:\.\.|--))[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(?:/[A-Za-z0-9_][A-Za-z0-9_.-]{0,95})?"
# A git branch, tag or commit (what the Hub takes as `revision`): no `..`, `//`, spaces, `~^:?*[\`, no leading
# `-` (it would read as an option), no trailing `/` or `.lock`.
REVISION = r"(?!.*(?:\.\.|//|@\{|\.lock$|/$))[A-Za-z0-9_][A-Za-z0-9_./+-]{0,254}"
# An absolute, normalised path: no empty, `.` or `..` segment, no trailing `/`, no control character, no `:`
# (a `-v host:container` separator).
ABSOLUTE_PATH = r"/|(?:/(?!\.\.?(?:/|$))[^/:\x00-\x1f\x7f]+)+"
RECIPE_NAME = r"[a-z0-9][a-z0-9._-]*"
MAX_GPUS = 64  # GPU ids are 0..63; a group or a node has at most 64 GPUs
MAX_NODES = 64  # hosts one group may span
# A matrix cell id: what a reference cell names (`5000x1`, `1000@10rps`, `2048-out1024x16`).
CELL_ID = r"[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,63}"
# Dataset and client backend names (`random-ids`, `sglang-oai`, `openai-chat`).
CLIENT_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
# Where a reference number was read: `post.txt:35` or `post.txt:35-60`.
SOURCE_LINE = r"[^\x00-\x1f:]{1,200}:[0-9]{1,7}(?:-[0-9]{1,7})?"

_STR_OR_NULL = {"type": ["string", "null"]}
_NUM_OR_NULL = {"type": ["number", "null"], "minimum": 0}
_INT_OR_NULL = {"type": ["integer", "null"], "minimum": 0}


def _pattern(regex: str, expected: str, *, nullable: bool = True, max_length: int = 512) -> dict[str, Any]:
    """A string field with a grammar; `expected` is what a grammar problem says was expected."""
    return {
        "type": ["string", "null"] if nullable else "string",
        "pattern": f"^(?:{regex})$",
        "maxLength": max_length,
        "description": expected,
    }


_WORD_LIST = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "description": "Shell-quoted words in original spelling, one option (or flag with its values) per item.",
}

_SOURCE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "url": _STR_OR_NULL,
        "author": _STR_OR_NULL,
        "date": {"type": ["string", "null"], "pattern": r"^\d{4}-\d{2}(-\d{2})?$"},
        "notes": _STR_OR_NULL,
    },
}
_IMAGE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["reference"],
    "properties": {
        "reference": _pattern(
            IMAGE_REFERENCE,
            "a Docker image reference: [registry[:port]/]path[:tag][@sha256:<64 hex>], the path in "
            "lowercase (e.g. lmsysorg/sglang:v0.5.23)",
            nullable=False,
        ),
        "digest": _pattern(DIGEST, "an image digest: sha256: and 64 lowercase hex digits"),
    },
}
_MODEL = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "repo_id": _pattern(
            REPO_ID, "a Hugging Face repo id: namespace/name of letters, digits, '_', '.', '-' (no '..')"
        ),
        "revision": _pattern(
            REVISION,
            "a branch, tag or commit: letters, digits, '_', '.', '/', '+', '-', no '..', no leading '-'",
            nullable=False,
            max_length=255,
        ),
        "local_dir": _pattern(
            ABSOLUTE_PATH, "an absolute, normalised path without '..', '.', '//', ':' or a trailing '/'"
        ),
        "mount_point": _pattern(
            ABSOLUTE_PATH, "an absolute, normalised path without '..', '.', '//', ':' or a trailing '/'"
        ),
        "allow_patterns": {"type": "array", "items": {"type": "string", "minLength": 1}},
    },
}
_DOCKER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["options"],
    "properties": {
        "invocation": {"type": "string", "enum": ["docker run", "docker container run"]},
        "options": _WORD_LIST,
    },
}
_SERVER = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "kind": {
            "enum": KIND_NAMES,
            "description": "The serving engine (hgxkit/kinds/); absent: detected from the program, then the image.",
        },
        "command": {
            "type": "string",
            "description": "Program words (e.g. 'sglang serve'); empty: the image's entrypoint.",
        },
        "args": _WORD_LIST,
    },
}
_GROUP_PROPERTIES: dict[str, Any] = {
    "size": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_GPUS},
    "explicit": {
        "type": ["array", "null"],
        "minItems": 1,
        "items": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_GPUS,
            "items": {"type": "integer", "minimum": 0, "maximum": MAX_GPUS - 1},
        },
    },
    "gpus_per_node": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_GPUS},
    "port_base": {"type": ["integer", "null"], "minimum": 1, "maximum": 65535},
    "name_template": _pattern(
        NAME_TEMPLATE,
        "a container name with {{group}} where the group index goes: letters, digits, '_', '.', '-', "
        "starting with a letter or digit",
        max_length=200,
    ),
    "server_args": {
        "type": ["array", "null"],
        "minItems": 1,
        "items": _WORD_LIST,
        "description": "Server arguments of each group in turn, after server.args (a prefill group and a decode "
        "group differ in these).",
    },
}


def _groups(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": ["object", "null"], "additionalProperties": False, "properties": properties}


# Sane maxima of a benchmark's size: a run that asks for more is a typo or a hostile recipe (1e15 prompts would
# keep a node busy for ever). Tokens: the longest context a served model has (1 Mi); prompts and concurrency:
# far beyond any published benchmark of one node or group.
MAX_BENCH_TOKENS = 1 << 20
MAX_BENCH_PROMPTS = 100_000
MAX_BENCH_CONCURRENCY = 10_000
MAX_BENCH_RATE = 100_000


def _at_most(maximum: int, *, nullable: bool = True, minimum: int = 1) -> dict[str, Any]:
    return {"type": ["integer", "null"] if nullable else "integer", "minimum": minimum, "maximum": maximum}


_CELL_SETTINGS: dict[str, Any] = {
    "num_prompts": _at_most(MAX_BENCH_PROMPTS),
    "input_len": _at_most(MAX_BENCH_TOKENS),
    "output_len": _at_most(MAX_BENCH_TOKENS),
    "concurrency": _at_most(MAX_BENCH_CONCURRENCY),
    "request_rate": {
        "type": ["number", "null"],
        "exclusiveMinimum": 0,
        "maximum": MAX_BENCH_RATE,
        "description": "Requests per second; absent: all at once",
    },
    "dataset": _pattern(CLIENT_NAME, "a dataset name of the client (e.g. random, random-ids, sharegpt)", max_length=64),
    "range_ratio": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    "warmups": _at_most(MAX_BENCH_PROMPTS, minimum=0),
    "seed": {"type": ["integer", "null"], "minimum": 0},
    "client": {"type": ["string", "null"], "maxLength": 64},
    "backend": _pattern(CLIENT_NAME, "a client backend name (e.g. sglang, vllm, openai-chat)", max_length=64),
}
_CELL = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id"],
    "properties": {
        "id": _pattern(
            CELL_ID, "a cell id: letters, digits, '_', '.', '@', ':', '+', '-' (e.g. 5000x1)", nullable=False
        ),
        **_CELL_SETTINGS,
        "extra_args": _WORD_LIST,
        "source": _STR_OR_NULL,
    },
}
# A run's shape: the smoke cell, a warmup run.
_RUN_SHAPE = {
    "input_len": _at_most(MAX_BENCH_TOKENS, nullable=False),
    "concurrency": _at_most(MAX_BENCH_CONCURRENCY, nullable=False),
    "num_prompts": _at_most(MAX_BENCH_PROMPTS, nullable=False),
}
_SMOKE = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": list(_RUN_SHAPE),
    "properties": _RUN_SHAPE,
}
_WARMUP = {
    "type": "object",
    "additionalProperties": False,
    "required": list(_RUN_SHAPE),
    "properties": {**_RUN_SHAPE, "output_len": _at_most(MAX_BENCH_TOKENS)},
}
_MATRIX = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["cells"],
    "properties": {
        "defaults": {
            "type": "object",
            "additionalProperties": False,
            "properties": _CELL_SETTINGS,
            "description": "Settings every cell has unless it gives its own.",
        },
        "cells": {"type": "array", "minItems": 1, "items": _CELL},
        "warmup_runs": {"type": "array", "items": _WARMUP, "description": "Runs done once before the cells."},
        "smoke": _SMOKE,
        "notes": _STR_OR_NULL,
    },
}
_METRIC_PROPERTIES = {
    m.key: ({"type": ["integer", "null"], "minimum": 0} if m.integer else _NUM_OR_NULL) for m in METRICS
}


def _reference(cell: dict[str, Any]) -> dict[str, Any]:
    """The reference section: the poster's tool and SLO, and one `cell` object per measured cell."""
    return {
        "type": ["object", "null"],
        "additionalProperties": False,
        "required": ["tool", "cells"],
        "properties": {
            "tool": {"type": "string"},
            "label": _STR_OR_NULL,
            "notes": _STR_OR_NULL,
            "slo_ttft_p99_ms": _NUM_OR_NULL,
            "cells": {"type": "array", "items": {"type": "object", "additionalProperties": False, **cell}},
        },
    }


_REFERENCE = _reference(
    {
        "required": ["cell"],
        "properties": {
            "cell": _pattern(CELL_ID, "the id of a matrix cell", nullable=False),
            "sources": {
                "type": "array",
                "items": _pattern(SOURCE_LINE, "where the numbers were read: FILE:LINE", nullable=False),
            },
            **_METRIC_PROPERTIES,
        },
    }
)


def _recipe_schema(
    version: int, groups: dict[str, Any], reference: dict[str, Any], matrix: dict[str, Any]
) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://hgxkit.dev/schema/recipe-v{version}.json",
        "title": "hgxkit recipe",
        "description": (
            "One serving setup captured exactly. Per-group placeholders in words: {{name}}, {{gpus}}, {{port}}, "
            "{{group}}; per host of a group spanning nodes: {{rank}}, {{head}}, {{dist_port}}; secrets as "
            "{{env:NAME}} (names on the node's recipe_env_allowlist), passed to the container in root-only files; "
            "no word may hold a $VAR or ~ for a shell to expand."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["schema_version", "name", "image", "docker"],
        "properties": {
            "schema_version": {"const": version},
            "name": _pattern(
                RECIPE_NAME,
                "a recipe name: lowercase letters, digits, '.', '_' and '-'",
                nullable=False,
                max_length=100,
            ),
            "description": _STR_OR_NULL,
            "source": _SOURCE,
            "image": _IMAGE,
            "model": _MODEL,
            "docker": _DOCKER,
            "server": _SERVER,
            "groups": groups,
            "reference": reference,
            "matrix": matrix,
        },
    }


RECIPE_SCHEMA: dict[str, Any] = _recipe_schema(
    2,
    _groups(
        {
            **_GROUP_PROPERTIES,
            "nodes": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": MAX_NODES,
                "description": "Hosts one group spans: tp x pp x dp = size x nodes.",
            },
            "dist_port": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": 65535,
                "description": "Rendezvous port on the head node ({{dist_port}}).",
            },
            "hosts": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": MAX_NODES,
                "description": "Hosts the groups are laid over in turn: each host runs the groups planned on its "
                "GPUs, numbered on from the previous host's (a prefill group on one node, a decode group on another).",
            },
        }
    ),
    _REFERENCE,
    _MATRIX,
)

# Version 1, read only to migrate: a grid matrix (input lengths x concurrencies) and reference cells that name
# their own input length and concurrency.
RECIPE_SCHEMA_V1: dict[str, Any] = _recipe_schema(
    1,
    _groups({k: v for k, v in _GROUP_PROPERTIES.items() if k != "server_args"}),
    _reference(
        {
            "required": ["input_len", "concurrency"],
            "properties": {
                "input_len": {"type": "integer", "minimum": 1},
                "concurrency": {"type": "integer", "minimum": 1},
                "num_prompts": _INT_OR_NULL,
                "ttft_mean_ms": _NUM_OR_NULL,
                "ttft_p90_ms": _NUM_OR_NULL,
                "ttft_p99_ms": _NUM_OR_NULL,
                "accept_length": _NUM_OR_NULL,
                "output_throughput": _NUM_OR_NULL,
                "peak_concurrency": _INT_OR_NULL,
            },
        }
    ),
    {
        "type": ["object", "null"],
        "additionalProperties": False,
        "required": ["input_lens", "concurrencies", "num_prompts", "output_len"],
        "properties": {
            "input_lens": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
            "concurrencies": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
            "num_prompts": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "integer", "minimum": 1},
                "description": "Prompts per cell, one per entry of concurrencies (same order).",
            },
            "output_len": {"type": "integer", "minimum": 1},
            "dataset": {"type": "string", "enum": ["random-ids", "random", "sharegpt"]},
            "random_range_ratio": {"type": "number", "minimum": 0, "maximum": 1},
            "smoke": _SMOKE,
            "notes": _STR_OR_NULL,
        },
    },
)
SCHEMAS: dict[int, dict[str, Any]] = {1: RECIPE_SCHEMA_V1, 2: RECIPE_SCHEMA}
