"""JSON Schema of recipe files (`schema_version: 1`), published as `recipes/schema.json`.

`hgxkit recipe schema` prints it; a test keeps the published copy equal to this one.
"""

from __future__ import annotations

from typing import Any

_STR_OR_NULL = {"type": ["string", "null"]}
_NUM_OR_NULL = {"type": ["number", "null"], "minimum": 0}
_INT_OR_NULL = {"type": ["integer", "null"], "minimum": 0}
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
        "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 100},
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
                "reference": {"type": "string", "minLength": 1, "pattern": r"^[^\s]+$"},
                "digest": {"type": ["string", "null"], "pattern": "^sha256:[0-9a-f]{64}$"},
            },
        },
        "model": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "repo_id": {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9][\w.-]*/[\w.-]+$"},
                "revision": {"type": "string", "minLength": 1},
                "local_dir": {"type": ["string", "null"], "pattern": "^/"},
                "mount_point": {"type": ["string", "null"], "pattern": "^/"},
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
                "size": {"type": ["integer", "null"], "minimum": 1},
                "explicit": {
                    "type": ["array", "null"],
                    "minItems": 1,
                    "items": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "integer", "minimum": 0},
                    },
                },
                "gpus_per_node": {"type": ["integer", "null"], "minimum": 1},
                "port_base": {"type": ["integer", "null"], "minimum": 1, "maximum": 65535},
                "name_template": _STR_OR_NULL,
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
