"""Regenerate an engine's option table in `hgxkit/engines/` from the REAL engine's argument parser.

A developer tool; it needs the engine installed (the client store has both). The library judges a post's flags
with these tables and the stand-ins parse with them: names, aliases, kind, value type, nargs, choices, defaults —
facts about the command-line interface, read from the real parser, no engine code or help text. Run it with the
client store's python after changing an engine's pinned version, then review the diff:

    /var/lib/hgxkit/sglang-client/bin/python tools/gen_engine_options.py vllm > hgxkit/engines/vllm_serve.py
    /var/lib/hgxkit/sglang-client/bin/python tools/gen_engine_options.py sglang > hgxkit/engines/sglang_serve.py

tests/unit/engines/test_option_tables.py runs both and compares them with the committed tables. The store keeps
vllm in a layer of its own (`vllm-site/`, so that SGLang's imports never find it); the script adds that layer
when it runs from the store. Building vLLM's serve parser needs a platform; like `vllm bench` on a GPU-less host,
this switches to the CPU platform first.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import site
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

# The argparse action classes each engine uses, by the kind the stand-ins build again.
KINDS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_AppendAction": "append",
    "_HelpAction": "help",
    "BooleanOptionalAction": "bool",
}
VALUED = ("store", "append", "lora", "lora_paths")  # the kinds whose value type the table records
# Type callables both engines have, by __name__; each engine's stand-in reads `hrint` as its own engine's suffixes.
PLAIN_TYPES = {"int": "int", "float": "float", "str": "str", "loads": "json", "human_readable_int": "hrint"}


@dataclass(frozen=True)
class Engine:
    """How to read one engine's parser and describe it."""

    package: str  # the distribution whose version the table records
    title: str
    constant: str  # the module constant that holds the version
    command: str  # what the table describes, for the docstring
    kinds: dict[str, str]  # the engine's own action classes (beside KINDS)
    types: dict[str, str]  # type callables by __name__ -> the code the stand-in reads
    parser: Callable[[], argparse.ArgumentParser]
    # options whose value the engine checks against a list after parsing (its config, not argparse's choices)
    config_choices: Callable[[], dict[str, tuple[str, ...]]] | None = None
    # JSON options whose key the engine looks up in a registry: option -> (key, the names, the key that names an
    # outside module instead, so any name goes)
    config_keys: Callable[[], dict[str, tuple[str, tuple[str, ...], str]]] | None = None


def _vllm_parser() -> argparse.ArgumentParser:
    layer = Path(sys.prefix) / "vllm-site"
    if layer.is_dir():
        site.addsitedir(str(layer))
    from vllm import platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms.current_platform = CpuPlatform()
    import vllm.entrypoints.cli.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    return serve.ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))


def _sglang_parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")  # as prepare_server_args builds it
    ServerArgs.add_cli_args(parser)
    return parser


def _vllm_config_choices() -> dict[str, tuple[str, ...]]:
    """vLLM's model config refuses a `--quantization` outside its registry of methods (`Unknown quantization
    method`), which the parser itself does not check."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    return {"--quantization": tuple(QUANTIZATION_METHODS)}


def _vllm_config_keys() -> dict[str, tuple[str, tuple[str, ...], str]]:
    """vLLM's KV connector factory refuses a `kv_connector` it has not registered (`Unsupported connector type`)
    unless `kv_connector_module_path` names the module that defines it."""
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    return {"--kv-transfer-config": ("kv_connector", tuple(KVConnectorFactory._registry), "kv_connector_module_path")}


ENGINES = {
    "vllm": Engine(
        package="vllm",
        title="vLLM",
        constant="VLLM_VERSION",
        command="`vllm serve` options",
        kinds={
            "EnableDisableAction": "bool",
            "LoRAParserAction": "lora",
            "DeprecatedLogConfigFileAction": "store",
        },
        types={
            **PLAIN_TYPES,
            "human_readable_int_or_auto": "hrint_auto",
            "union_dict_and_str": "dict_or_str",
            "parse_reasoning_parser": "reasoning_parser",
        },
        parser=_vllm_parser,
        config_choices=_vllm_config_choices,
        config_keys=_vllm_config_keys,
    ),
    "sglang": Engine(
        package="sglang",
        title="SGLang",
        constant="SGLANG_VERSION",
        command="server options (`sglang serve`, `python -m sglang.launch_server`)",
        kinds={
            "LoRAPathAction": "lora_paths",
            "DeprecatedStoreTrueAction": "deprecated_true",
            "DeprecatedStoreConstAction": "deprecated_const",
        },
        types={
            **PLAIN_TYPES,
            "json_list_type": "json_list",
            "nullable_str": "nullable_str",
            "parse_cuda_graph_backend_arg": "cuda_graph_backend",
            "parse_cuda_graph_config_arg": "cuda_graph_config",
        },
        parser=_sglang_parser,
    ),
}


def _closure(fn: Any) -> list[Any]:
    out = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            continue
    return out


def type_code(fn: Any, types: dict[str, str]) -> str:
    """A short code for an argparse `type` callable (the stand-in's `value_type` says what each means)."""
    if fn is None:
        return "str"
    name = getattr(fn, "__name__", "")
    if name in types:
        return types[name]
    if name == "_optional_type":
        return "opt:" + type_code(_closure(fn)[0], types)
    if name == "_parse_type":
        return "parse:" + type_code(_closure(fn)[0], types)
    if name == "parse_dataclass":
        return "dataclass:" + fn.__defaults__[0].__name__
    if name == "<lambda>":
        probe = fn("A-b")
        if probe == "a_b":
            return "lower_underscore"
        if probe == ["A-b"]:
            return "device_ids"
    raise SystemExit(f"unknown type callable {fn!r}: extend the engine's types / type_code")


def _default(value: Any) -> Any:
    """A plain literal for `value` (enums become their value); None for config objects the stand-in ignores."""
    for plain in (bool, int, float, str):
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, (list, tuple)):
        return [_default(v) for v in value]
    if isinstance(value, dict):
        try:
            return json.loads(json.dumps(value))
        except TypeError:
            return None
    return None


def _choices(choices: Any) -> tuple[Any, ...] | None:
    """The choices as a tuple; a set's in sorted order, which its iteration does not keep from run to run."""
    if choices is None:
        return None
    return tuple(sorted(choices)) if isinstance(choices, (set, frozenset)) else tuple(choices)


def _row(action: argparse.Action, hidden: list[str], engine: Engine) -> tuple[Any, ...]:
    name = type(action).__name__
    kinds = {**KINDS, **engine.kinds}
    if name not in kinds:
        raise SystemExit(f"unknown action class {name}: extend the engine's kinds")
    kind = kinds[name]
    shown = list(action.option_strings)
    negative = sorted(getattr(action, "negative_option_strings", set()) or set())
    if name == "BooleanOptionalAction":
        negative = [o for o in shown if o.startswith("--no-")]
    # a deprecated constant writes its own value, not argparse's const
    const = getattr(action, "const_value", action.const)
    return (
        tuple(shown),
        tuple(hidden),
        action.dest,
        kind,
        type_code(action.type, engine.types) if kind in VALUED else "",
        action.nargs,
        _choices(action.choices),
        _default(action.default),
        const if isinstance(const, (str, int, float, bool)) else None,
        tuple(negative),
    )


def write_table(engine: Engine, out: TextIO) -> None:
    """The table module for `engine`, from its real parser."""
    parser = engine.parser()
    by_action: dict[int, list[str]] = {}
    for opt, action in parser._option_string_actions.items():
        by_action.setdefault(id(action), []).append(opt)
    rows = []
    for action in parser._actions:
        hidden = [o for o in by_action.get(id(action), []) if o not in action.option_strings]
        rows.append(_row(action, hidden, engine))
    required = tuple(action.dest for action in parser._actions if action.required)
    version = importlib.metadata.version(engine.package)
    module = f"hgxkit/engines/{engine.package}_serve.py"
    command = f"/var/lib/hgxkit/sglang-client/bin/python tools/gen_engine_options.py {engine.package} > {module}"
    out.write("# ruff: noqa: E501\n")
    out.write(f'"""{engine.title} {version}\'s {engine.command} as data ')
    out.write(f"(GENERATED by `tools/gen_engine_options.py {engine.package}`; do not edit).\n\n")
    out.write("One row per argparse action, in the real parser's order: (shown option strings, hidden option\n")
    out.write("strings, dest, kind, value type code, nargs, choices, default, const, negative option strings).\n")
    out.write(f"Facts about the command-line interface only; no {engine.title} code or help text. Regenerate with\n")
    out.write(f"the client store's {engine.package}:\n\n    {command}\n")
    out.write('"""\n\nfrom __future__ import annotations\n\nfrom typing import Any\n\n')
    out.write(f'{engine.constant} = "{version}"\n')
    if required:
        names = ", ".join(f'"{dest}"' for dest in required)
        out.write(f"REQUIRED: tuple[str, ...] = ({names},)  # the dests the parser requires\n")
    out.write("Row = tuple[tuple[str, ...], tuple[str, ...], str, str, str, Any, Any, Any, Any, tuple[str, ...]]\n")
    out.write("# The formatter leaves the table as generated: one row per parser action.\n# fmt: off\n")
    out.write("SERVE_OPTIONS: tuple[Row, ...] = (\n")
    for row in rows:
        out.write(f"    {row!r},\n")
    out.write(")\n")
    if engine.config_choices is not None:
        out.write(
            "# Values the engine checks after parsing (its config), not the parser: the value must be one of these.\n"
        )
        out.write(f"CONFIG_CHOICES: dict[str, tuple[str, ...]] = {engine.config_choices()!r}\n")
    if engine.config_keys is not None:
        out.write("# JSON options whose key the engine looks up: (key, registered names, the key naming a module).\n")
        out.write(f"CONFIG_KEY_CHOICES: dict[str, tuple[str, tuple[str, ...], str]] = {engine.config_keys()!r}\n")
    out.write("# fmt: on\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engine", choices=sorted(ENGINES))
    args = parser.parse_args(argv)
    for key in [k for k in os.environ if k.startswith(("SGLANG_", "VLLM_"))]:
        del os.environ[key]  # the engines' switches change choices and defaults: the table is the engine as shipped
    write_table(ENGINES[args.engine], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
