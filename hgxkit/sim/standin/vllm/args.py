"""vLLM 0.33's server command line, as the stand-in parses it (simulated; stdlib only).

The options come from `hgxkit.engines.vllm_serve`
(names, aliases, kinds, types, choices and defaults read from vLLM 0.33.0's
real `vllm serve` parser by tools/gen_engine_options.py); this module builds stdlib argparse parsers from that table and
reproduces the spelling rules of vLLM's ``FlexibleArgumentParser`` (written here from its documented and
observed behaviour, no vLLM code):

- ``vllm serve MODEL …`` (positional model); ``--model X`` still works: it is moved to the positional slot and
  a deprecation line is logged; ``--served-model-name`` without a positional model (and no ``--config``) is a
  ``ValueError``;
- ``--long_names`` with underscores = dashes (only the part before the first ``.``), ``--flag=value``;
- bool options: ``--enable-x`` / ``--disable-x`` / legacy ``--no-enable-x``; ``--x`` / ``--no-x``;
- ``-O3`` / ``-O 3`` / ``-O=3`` = ``--optimization-level 3``;
- dotted JSON keys: ``--speculative-config.method mtp`` (``key+`` appends to a list), merged into one JSON;
- repeated flags: the last wins and ``Found duplicate keys …`` is logged;
- ``--config FILE.yaml``: its keys become flags (CLI > file > defaults);
- argparse prefix abbreviations stay on (``--max-model 32k``);
- an unknown flag: ``vllm: error: unrecognized arguments: …`` with the top-level usage, exit 2 (with the
  ``--task`` hint when that is the stray flag); a bad value: ``vllm serve: error: argument …``, exit 2.
``python3 -m vllm.entrypoints.openai.api_server`` uses the same options with prog ``api_server.py`` and, as
in 0.33, ignores a positional model (the default model is served).

Example:
    >>> ns, warnings = parse_serve(["m", "-tp", "2", "--enable_expert_parallel", "--max-model-len=32k"])
    >>> ns.model, ns.tensor_parallel_size, ns.enable_expert_parallel, ns.max_model_len
    ('m', 2, True, 32000)
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any

from hgxkit.engines.vllm_serve import SERVE_OPTIONS, VLLM_VERSION
from hgxkit.sim.standin.common.options import add_table_options, other_version, without_unread
from hgxkit.sim.standin.vllm import miniyaml

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # vLLM 0.33's default when no model is given
SUBCOMMANDS = (
    "chat",
    "complete",
    "serve",
    "launch",
    "bench",
    "collect-env",
    "download-kernels",
    "preload",
    "run-batch",
    "snapshot",
)
SERVE_USAGE = "vllm serve [model_tag] [options]"
MODEL_FLAG_WARNING = (
    "With `vllm serve`, you should provide the model as a positional argument or in a config file instead of "
    "via the `--model` option. The `--model` option will be removed in a future version."
)
TASK_HINT = (
    "\n\nHint: --task is not a vllm serve option. For embedding, reranking, or reward models, use --runner "
    "pooling. To adapt a generative model for pooling, also use --convert embed, --convert classify, or "
    "--convert reward."
)


class ServeArgsError(ValueError):
    """Raised like vLLM's ValueError for argument combinations its parser rejects before argparse."""


# -- value types (named like vLLM's, because argparse quotes a failing type's __name__) -----------------------


def human_readable_int(value: str) -> int:
    """``1k`` = 1000, ``1K`` = 1024, ``25.6k`` = 25600; decimals with binary suffixes are refused."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
        if "." in number:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            )
        return int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """As `human_readable_int`, plus ``-1``/``auto`` = -1 (fit to memory)."""
    return -1 if value.strip() in ("-1", "auto", "AUTO", "Auto") else human_readable_int(value)


def _parse(inner: Callable[[str], Any]) -> Callable[[str], Any]:
    def _parse_type(val: str) -> Any:
        try:
            return inner(val)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"Value {val} cannot be converted to {inner}.") from err

    return _parse_type


def _optional(inner: Callable[[str], Any]) -> Callable[[str], Any]:
    parse = _parse(inner)

    def _optional_type(val: str) -> Any:
        return None if val in ("", "None") else parse(val)

    return _optional_type


def union_dict_and_str(val: str) -> Any:
    """A JSON object when the value looks like one, else the string."""
    return _optional(json.loads)(val) if re.match(r"(?s)^\s*{.*}\s*$", val) else str(val)


def parse_reasoning_parser(val: str) -> str:
    return "" if val.lower() == "none" else val


def _dataclass(name: str) -> Callable[[str], Any]:
    def parse_dataclass(val: str) -> Any:
        # vLLM validates with pydantic; the stand-in checks the JSON shape only (messages approximate pydantic's).
        try:
            doc = json.loads(val)
        except json.JSONDecodeError as err:
            raise argparse.ArgumentTypeError(
                f"1 validation error for {name}\n  Invalid JSON: {err.msg} at line {err.lineno} column {err.colno} "
                f"[type=json_invalid, input_value={val!r}, input_type=str]"
            ) from err
        if not isinstance(doc, dict):
            raise argparse.ArgumentTypeError(
                f"1 validation error for {name}\n  Input should be an object [type=dataclass_type, "
                f"input_value={doc!r}, input_type={type(doc).__name__}]"
            )
        return doc

    return parse_dataclass


def _device_ids() -> Callable[[str], Any]:
    return lambda s: [int(part) if part.isdigit() else part for part in (p.strip() for p in s.split(",")) if part]


def _lower_underscore() -> Callable[[str], Any]:
    return lambda s: s.lower().replace("-", "_")


def value_type(code: str) -> Callable[[str], Any] | None:
    """The argparse `type` for an option table type code (``opt:int``, ``dataclass:CompilationConfig``, …)."""
    if code.startswith("opt:"):
        inner = value_type(code[4:])
        return _optional(inner or str)
    if code.startswith("parse:"):
        inner = value_type(code[6:])
        return _parse(inner or str)
    if code.startswith("dataclass:"):
        return _dataclass(code.split(":", 1)[1])
    simple: dict[str, Callable[[str], Any] | None] = {
        "": None,
        "str": str,
        "int": int,
        "float": float,
        "json": json.loads,
        "hrint": human_readable_int,
        "hrint_auto": human_readable_int_or_auto,
        "dict_or_str": union_dict_and_str,
        "reasoning_parser": parse_reasoning_parser,
    }
    if code in simple:
        return simple[code]
    if code == "device_ids":
        return _device_ids()
    if code == "lower_underscore":
        return _lower_underscore()
    raise KeyError(f"unknown option table type code {code!r}")


# -- actions -----------------------------------------------------------------------------------------------


class _LoRA(argparse.Action):
    """``--lora-modules name=path …`` or JSON objects; kept as given (the stand-in serves no adapters)."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, opt: Any = None) -> None:
        out = []
        for item in values or []:
            item = item.strip()
            if item.startswith("{"):
                out.append(json.loads(item))
            elif "=" in item:
                name, path = item.split("=", 1)
                out.append({"name": name, "path": path})
            else:
                raise argparse.ArgumentTypeError(f"Invalid format for --lora-modules: {item}")
        setattr(ns, self.dest, out)


def add_serve_options(parser: argparse.ArgumentParser, positional: bool = True) -> argparse.ArgumentParser:
    """Add every option of the table to `parser` (the positional ``model_tag`` too unless `positional` is False)."""
    return add_table_options(parser, SERVE_OPTIONS, value_type, {"lora": _LoRA}, positional)


def build_main_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The ``vllm`` parser (all sub-command names, as in 0.33) and its ``serve`` sub-parser."""
    top = argparse.ArgumentParser(prog="vllm", description="vLLM CLI (hgxkit stand-in, SIMULATED)")
    top.add_argument("-v", "--version", action="version", version=VLLM_VERSION)
    sub = top.add_subparsers(required=False, dest="subparser")
    serve = None
    for name in SUBCOMMANDS:
        if name == "serve":
            serve = sub.add_parser(name, usage=SERVE_USAGE, description="SIMULATED vLLM server (hgxkit stand-in)")
            add_serve_options(serve)
        else:
            sub.add_parser(name, add_help=False)
    assert serve is not None
    return top, serve


def build_api_server_parser(prog: str = "api_server.py") -> argparse.ArgumentParser:
    """``python3 -m vllm.entrypoints.openai.api_server``'s parser (same options, its own prog)."""
    return add_serve_options(argparse.ArgumentParser(prog=prog, description="SIMULATED vLLM API server"))


# -- spelling rules ------------------------------------------------------------------------------------------


def _move_model_flag(args: list[str], warnings: list[str]) -> list[str]:
    """``serve … --model X …`` → ``serve X …`` (vLLM 0.33), with its deprecation line."""
    for i, arg in enumerate(args):
        if re.match(r"^--model(=.+|$)", arg):
            warnings.append(MODEL_FLAG_WARNING)
            if arg == "--model":
                if i + 1 >= len(args):
                    return args  # argparse reports the missing value
                return ["serve", args[i + 1], *args[1:i], *args[i + 2 :]]
            return ["serve", arg.removeprefix("--model="), *args[1:i], *args[i + 1 :]]
    return args


def _pull_config(args: list[str], serve: bool) -> list[str]:
    """Insert a ``--config FILE.yaml``'s keys as flags, so that CLI > file > defaults."""
    if args.count("--config") > 1:
        raise ServeArgsError("More than one config file specified!")
    index = args.index("--config")
    if index == len(args) - 1:
        raise ServeArgsError("No config file specified! Please check your command-line arguments.")
    path = args[index + 1]
    if path.rsplit(".", 1)[-1] not in ("yaml", "yml"):
        raise ServeArgsError(f"Config file must be of a yaml/yml type. {path.rsplit('.', 1)[-1]} supplied")
    with open(path, encoding="utf-8") as fh:
        doc = miniyaml.load(fh.read()) or {}
    flags: list[str] = []
    for key, value in doc.items():
        if isinstance(value, bool):
            flags += [f"--{key}"] if value else [f"--no-{key}"]
        elif isinstance(value, list):
            flags += [f"--{key}", *(str(v) for v in value)] if value else []
        elif isinstance(value, dict):
            flags += [f"--{key}", json.dumps(value)]
        else:
            flags += [f"--{key}", str(value)]
    rest = args[:index] + args[index + 2 :]
    if not serve:
        return flags + rest
    model_in_cli = len(rest) > 1 and not rest[1].startswith("-")
    if not model_in_cli and "--model" not in flags:
        raise ServeArgsError(
            "No model specified! Please specify model either as a positional argument or in a config file."
        )
    split = 2 if model_in_cli else 1
    return rest[:split] + flags + rest[split:]


def _nested(keys: list[str], value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(into: dict[str, Any], update: dict[str, Any], prefix: str, dupes: set[str]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, f"{prefix}{key}.", dupes)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] += value
        else:
            if key in into:
                dupes.add(prefix + key)
            into[key] = value


def normalize(args: list[str], warnings: list[str], serve: bool) -> list[str]:
    """Apply the spelling rules (module doc) to `args` (starting with ``serve`` when `serve`)."""
    if serve:
        args = _move_model_flag(args, warnings)
        if (
            len(args) > 1
            and args[1].startswith("-")
            and not any(re.match(r"^--config(=.+|$)", a) for a in args)
            and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", a) for a in args)
        ):
            raise ServeArgsError(
                "`model` should be provided as the first positional argument when using `vllm serve`. "
                "i.e. `vllm serve <model> --<arg> <value>`."
            )
    if "--config" in args:
        args = _pull_config(args, serve)
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            out.append("--help")
        elif arg.startswith("--"):
            key, eq, value = arg.partition("=")
            head, dot, tail = key[2:].partition(".")
            out.append("--" + head.replace("_", "-") + dot + tail + eq + value)
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in ("0", "1", "2", "3"):
            out.append("--optimization-level")
        else:
            out.append(arg)
    dicts: dict[str, dict[str, Any]] = {}
    dupes: set[str] = set()
    seen: set[str] = set()
    kept: list[str] = []
    skip = set()
    for i, arg in enumerate(out):
        if i in skip:
            continue
        if arg.startswith("--") and "." not in arg:
            name = arg.split("=", 1)[0]
            (dupes if name in seen else seen).add(name)
            kept.append(arg)
            continue
        if arg.startswith("-") and "." in arg:
            if "=" in arg:
                arg, value = arg.split("=", 1)
                if "." not in arg:  # the dot was in the value only
                    kept.append(f"{arg}={value}")
                    continue
            elif i + 1 < len(out):
                value = out[i + 1]
                skip.add(i + 1)
            else:
                kept.append(arg)
                continue
            if arg.endswith("+"):
                arg = arg[:-1]
                value = json.dumps(value.split(","))
            key, *keys = arg.split(".")
            try:
                parsed: Any = json.loads(value)
            except json.JSONDecodeError:
                try:
                    parsed = human_readable_int(value)
                except (ValueError, argparse.ArgumentTypeError):
                    parsed = value
            _merge(dicts.setdefault(key, {}), _nested(keys, parsed), f"{key}.", dupes)
            continue
        kept.append(arg)
    if dupes:
        warnings.append(f"Found duplicate keys {', '.join(sorted(dupes))}")
    for key, value in dicts.items():
        kept += [key, json.dumps(value)]
    return kept


class _TopParser(argparse.ArgumentParser):
    """The ``vllm`` parser, adding vLLM's ``--task`` hint to ``unrecognized arguments`` errors."""

    def error(self, message: str) -> Any:
        if message.startswith("unrecognized arguments:") and re.search(r"(^|\s)--task(=|\s|$)", message):
            message += TASK_HINT
        super().error(message)


def parse_serve(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``vllm serve ARGV…`` → (namespace with ``model`` resolved, warning lines). argparse exits 2 on errors;
    `ServeArgsError` for what vLLM rejects with a ValueError before argparse."""
    warnings: list[str] = []
    args = normalize(["serve", *argv], warnings, serve=True)
    if other := other_version():
        args, unread = without_unread(args, SERVE_OPTIONS)
        warnings += [f"SIMULATED: {other} runs another vLLM; {flag} is taken unread" for flag in unread]
    top, _ = build_main_parser()
    top.__class__ = _TopParser
    ns = top.parse_args(args)
    if getattr(ns, "model_tag", None):
        ns.model = ns.model_tag  # the positional wins over --model (which normalize already moved)
    return ns, warnings


def parse_api_server(argv: list[str], prog: str = "api_server.py") -> tuple[argparse.Namespace, list[str]]:
    """``python3 -m vllm.entrypoints.openai.api_server ARGV…``: a positional model is accepted but IGNORED
    (vLLM 0.33 never copies it into ``--model``), so the default model is served unless ``--model`` is given."""
    warnings: list[str] = []
    args = normalize(argv, warnings, serve=False)
    if other := other_version():
        args, unread = without_unread(args, SERVE_OPTIONS)
        warnings += [f"SIMULATED: {other} runs another vLLM; {flag} is taken unread" for flag in unread]
    parser = build_api_server_parser(prog)
    parser.__class__ = _TopParser
    return parser.parse_args(args), warnings


def defaults() -> dict[str, Any]:
    """Every option's default (``dest`` → value), for logging the non-default arguments as vLLM does."""
    return {row[2]: row[7] for row in SERVE_OPTIONS if row[3] != "help"}


def non_default(ns: argparse.Namespace) -> dict[str, Any]:
    """The options that differ from their defaults (``api_key``/``hf_token`` redacted, as vLLM logs them)."""
    base = defaults()
    out: dict[str, Any] = {}
    for key, value in vars(ns).items():
        if key in base and value != base[key] and key != "model_tag":
            out[key] = "***" if key in ("api_key", "hf_token", "watermark_config") else value
    if getattr(ns, "model_tag", None):
        out = {"model_tag": ns.model_tag, **out}
    return out
