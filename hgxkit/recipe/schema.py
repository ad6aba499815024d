"""JSON Schema of recipe files (`schema_version: 1`), published as `recipes/schema.json`.

`hgxkit recipe schema` prints it; a test keeps the published copy equal to this one. Every field that
reaches a command line, a path or a container name has its real grammar here, as a regex the loader also
applies to whole values (`re.fullmatch`, so a trailing newline cannot slip past `$`); the `description` of
each pattern is the "what was expected" of the loader's error.

Example:
    >>> import re
    >>> bool(re.fullmatch(IMAGE_REFERENCE, "lmsysorg/sglang:dev-dspark")), bool(re.fullmatch(IMAGE_REFERENCE, "x;id"))
    (True, False)
"""

from __future__ import annotations

from typing import Any

from hgxkit.recipe.kinds import KINDS

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
SERVED_MODEL_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,255}"
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

_STR_OR_NULL = {"type": ["string", "null"]}
_NUM_OR_NULL = {"type": ["number", "null"], "minimum": 0}
_INT_OR_NULL = {"type": ["integer", "null"], "minimum": 0}



def _pattern(regex: str, expected: str, *, nullable: bool = True, max_length: int = 512) -> dict[str, Any]:
    """A string field with a grammar; `expected` is what the loader's error says was expected."""
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

RECIPE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://hgxkit.dev/schema/recipe-v1.json",
    "title": "hgxkit recipe",
    "description": (
        "One serving setup captured exactly. Per-group placeholders in words: {{name}}, {{gpus}}, {{port}}, "
        "{{group}}; secrets as {{env:NAME}}, read from the environment when the command runs."
    ),
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "name", "image", "docker"],
    "properties": {
        "schema_version": {"const": 1},
        "name": _pattern(
            RECIPE_NAME, "a recipe name: lowercase letters, digits, '.', '_' and '-'", nullable=False, max_length=100
        ),
        "description": _STR_OR_NULL,
        "source": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "url": _STR_OR_NULL,
                "author": _STR_OR_NULL,
                "date": {"type": ["string", "null"], "pattern": r"^\d{4}-\d{2}(-\d{2})?$"},
                "notes": _STR_OR_NULL,
            },
        },
        "image": {
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
        },
        "model": {
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
        },
        "docker": {
            "type": "object",
            "additionalProperties": False,
            "required": ["options"],
            "properties": {
                "invocation": {"type": "string", "enum": ["docker run", "docker container run"]},
                "options": _WORD_LIST,
            },
        },
        "server": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kind": {
                    "enum": list(KINDS),
                    "description": "The serving engine (hgxkit/recipe/kinds.py); absent: detected from the "
                    "program, then the image.",
                },
                "command": {
                    "type": "string",
                    "description": "Program words (e.g. 'sglang serve'); empty: the image's entrypoint.",
                },
                "args": _WORD_LIST,
            },
        },
        "groups": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "properties": {
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
            },
        },
        "reference": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["tool", "cells"],
            "properties": {
                "tool": {"type": "string"},
                "label": _STR_OR_NULL,
                "notes": _STR_OR_NULL,
                "slo_ttft_p99_ms": _NUM_OR_NULL,
                "cells": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
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
                    },
                },
            },
        },
        "matrix": {
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
                "smoke": {
                    "type": ["object", "null"],
                    "additionalProperties": False,
                    "required": ["input_len", "concurrency", "num_prompts"],
                    "properties": {
                        "input_len": {"type": "integer", "minimum": 1},
                        "concurrency": {"type": "integer", "minimum": 1},
                        "num_prompts": {"type": "integer", "minimum": 1},
                    },
                },
                "notes": _STR_OR_NULL,
            },
        },
    },
}
