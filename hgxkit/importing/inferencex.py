"""A SemiAnalysis InferenceX entry, read from a checkout of the suite: its sweep's cells, each with the launch
script's server command written out for that cell, grouped by the text they launch.

An entry of `configs/nvidia-master.yaml` (`dsr1-fp8-h200-sglang: {image, model, model-prefix, runner, precision,
framework, multinode, scenarios: {fixed-seq-len: [{isl, osl, search-space: [{tp, ep, dp-attn, conc-start,
conc-end, spec-decoding}]}]}}`) expands into one cell per concurrency (doubling from conc-start, the last capped
at conc-end, or each of conc-list) as the suite's `utils/matrix_logic/generate_sweep_configs.py` does. A cell runs
`benchmarks/single_node/fixed_seq_len/<model-prefix>_<precision>_<gpu>_<framework>[_mtp].sh`, or where that file
is missing `<model-prefix>_<precision>_<gpu>[_mtp].sh` (the runners' `launch_*.sh` look in that order), with the
variables the suite's workflow and runner set (`cell_environment`). The script is never run: its branches are
resolved for the cell (`hgxkit.importing.shell_branches`), the suite's own functions set aside, and the call of
`run_benchmark_serving` read for the client's settings (benchmarks/benchmark_lib.sh adds `--request-rate inf
--ignore-eos --num-warmups 2×CONC`). Cells whose launch text is the same form one `Configuration`.

Refused by name: entries of configs/amd-master.yaml or an AMD runner, TensorRT-LLM, Dynamo, llm-d and other
frameworks hgxkit does not serve, multinode and disaggregated entries, entries without a fixed-seq-len sweep
(agentic ones); an unknown key names the nearest ones.

Example:
    >>> from pathlib import Path
    >>> entry = read_entry(Path("tests/fixtures/inferencex"), "dsr1-fp8-h200-sglang")
    >>> entry.commit, [(c.script, [p.conc for p in c.points]) for c in entry.configurations]
    (None, [('benchmarks/single_node/fixed_seq_len/dsr1_fp8_h200.sh', [4, 8, 16, 32, 64])])
    >>> [cell.id for cell in matrix_cells(entry.configurations[0].points)][:2]
    ['8192x1024-c4', '8192x1024-c8']
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hgxkit.errors import InputError
from hgxkit.importing.shell_branches import Call, ShellScript
from hgxkit.recipe.matrix import MatrixCell
from hgxkit.recipe.schema import MAX_BENCH_TOKENS
from hgxkit.textinput import read_text_file

SUITE = "SemiAnalysis InferenceX"
CONFIG_FILES = ("configs/nvidia-master.yaml", "configs/amd-master.yaml")
SCRIPTS = "benchmarks/single_node/fixed_seq_len"
LIBRARY = "benchmarks/benchmark_lib.sh"
# The suite's own functions (benchmarks/benchmark_lib.sh): monitoring, waiting, the client, evals.
HELPERS = (
    "check_env_vars",
    "start_gpu_monitor",
    "stop_gpu_monitor",
    "wait_for_server_ready",
    "run_benchmark_serving",
    "run_eval",
    "append_lm_eval_summary",
    "setup_eval_context",
)
# The client run_benchmark_serving starts: a fork of vLLM's benchmarks/benchmark_serving.py from before `vllm
# bench serve`, whose --random-range-ratio R draws each length from [R×L, L] (utils/bench_serving).
CLIENT = "InferenceX benchmark_serving.py (vLLM fork)"
# What the workflow (.github/workflows/benchmark-tmpl.yml) and every runner give each run.
RANDOM_RANGE_RATIO = "0.8"
PORT = "8888"
# run_benchmark_serving's body at the commit these settings were read from; a checkout whose body lacks one is
# said to differ.
_CLIENT_FLAGS = (
    "--dataset-name random",
    "--request-rate inf",
    "--ignore-eos",
    '--num-warmups "$((2 * max_concurrency))"',
)
_CLIENT_OPTIONS = frozenset(
    {
        "--model",
        "--port",
        "--backend",
        "--endpoint",
        "--input-len",
        "--output-len",
        "--random-range-ratio",
        "--num-prompts",
        "--max-concurrency",
        "--result-filename",
        "--result-dir",
        "--bench-serving-dir",
        "--server-pid",
        "--tokenizer",
        "--tokenizer-mode",
    }
)
_CLIENT_SWITCHES = frozenset({"--use-chat-template", "--dsv4", "--trust-remote-code"})
_SERVED = ("sglang", "vllm")
_FRAMEWORKS = {
    "trt": "TensorRT-LLM",
    "dynamo": "NVIDIA Dynamo",
    "llmd": "llm-d",
    "tilert": "TileRT",
    "atom": "AMD ATOM",
}
_FIELD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ROW_KEYS = frozenset(
    {"tp", "ep", "dp-attn", "conc-start", "conc-end", "conc-list", "spec-decoding", "pp", "dcp-size", "pcp-size"}
)
_ROW_METADATA = frozenset({"router", "kv-p2p-transfer"})  # recorded by the suite, not given to the script
MAX_CELLS = 4096
_SEQ_NAMES = {(1024, 1024): "1k1k", (8192, 1024): "8k1k"}


@dataclass(frozen=True)
class Point:
    """One cell of the sweep, as the suite expands it, with its client settings read from the script."""

    isl: int
    osl: int
    tp: int
    pp: int
    dcp: int
    pcp: int
    ep: int
    dp_attn: bool
    spec: str
    conc: int
    source: str  # `config file:line` of its search-space row
    client: tuple[tuple[str, str], ...] = ()  # run_benchmark_serving's options (`--flag`, value; "" for a switch)

    @property
    def parallel(self) -> str:
        """`tp8`, `tp8-ep8-dpa`, `tp4-pp2`: the parallel layout, as the suite's job names write it."""
        parts = [f"tp{self.tp}"]
        parts += [f"{name}{size}" for name, size in (("pp", self.pp), ("dcp", self.dcp), ("pcp", self.pcp)) if size > 1]
        parts += [f"ep{self.ep}"] if self.ep > 1 else []
        return "-".join(parts + (["dpa"] if self.dp_attn else []))


@dataclass(frozen=True)
class Configuration:
    """Cells that launch the same text: the script, the launch text of the first, the cells in sweep order."""

    script: str
    text: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Entry:
    """One entry of the suite's configs: what it says, where, and its configurations."""

    key: str
    file: str  # the config file, relative to the checkout
    line: int
    image: str
    model: str
    framework: str
    runner: str
    gpu: str
    commit: str | None  # the checkout's commit, None when it is not a git work tree
    configurations: tuple[Configuration, ...]
    notes: tuple[str, ...]


def read_entry(checkout: Path, key: str) -> Entry:
    """The entry `key` of the checkout's configs, expanded and rendered; InputError (one line) when it is
    missing, not served by hgxkit, or its script holds what hgxkit does not resolve."""
    file, line, data, node = _find(checkout, key)
    framework = _text(data, "framework", file, line, key)
    runner = _text(data, "runner", file, line, key)
    where = f"{file}:{line}: {key}"
    _refuse_unserved(where, file, framework, runner, data)
    fixed = (data.get("scenarios") or {}).get("fixed-seq-len") if isinstance(data.get("scenarios"), dict) else None
    if not fixed:
        scenarios = ", ".join(sorted(data.get("scenarios") or {})) or "none"
        raise InputError(
            f"{where}: scenario {scenarios} (framework {framework}) is not imported: hgxkit imports an entry's "
            "fixed-seq-len sweep (an agentic run replays traces with the suite's own harness); pick an entry with one"
        )
    gpu = runner.removeprefix("cluster:").split("-")[0]
    if not _FIELD.fullmatch(gpu):
        raise InputError(f"{where}: runner {runner!r} names no GPU; give an entry of the suite's runners")
    fields = {name: _text(data, name, file, line, key) for name in ("image", "model", "model-prefix", "precision")}
    for name in ("model-prefix", "precision"):
        if not _FIELD.fullmatch(fields[name]):
            raise InputError(f"{where}: {name} {fields[name]!r} is not a name a script file has; check the entry")
    points = sweep_points(fixed, _rows_lines(node), file, where)
    scripts: dict[str, ShellScript] = {}
    runs: dict[tuple[str, str], list[Point]] = {}
    commit = git_commit(checkout)
    others = sorted(set(data["scenarios"]) - {"fixed-seq-len"})
    notes = [f"{where}: scenario {', '.join(others)} is not imported (only fixed-seq-len is)"] if others else []
    if gpu != "h200":
        notes.append(
            f"{where}: measured on {gpu} (runner {runner}); an HGX-H200 node runs the same command, so its numbers "
            "will differ from the suite's"
        )
    for point in points:
        script = _script(checkout, fields["model-prefix"], fields["precision"], gpu, framework, point.spec, where)
        if script not in scripts:
            scripts[script] = ShellScript.parse(read_text_file(str(_inside(checkout, script, where))), script)
        env = cell_environment(fields, framework, runner, point, disagg=bool(data.get("disagg")))
        rendered = scripts[script].render(env, HELPERS, Path(LIBRARY).name)
        notes += rendered.notes
        client = _client(rendered.calls, script, point)
        runs.setdefault((script, rendered.text), []).append(_with_client(point, client))
    notes += _library_note(checkout)
    configurations = tuple(Configuration(s, t, tuple(p)) for (s, t), p in runs.items())
    return Entry(
        key,
        file,
        line,
        fields["image"],
        fields["model"],
        framework,
        runner,
        gpu,
        commit,
        configurations,
        tuple(dict.fromkeys(notes)),
    )


def cell_environment(
    fields: dict[str, str], framework: str, runner: str, point: Point, *, disagg: bool = False
) -> dict[str, str]:
    """The variables a cell's script runs with: what the workflow's benchmark template, the runner's
    `launch_*.sh` (PORT) and benchmark_lib.sh give. A variable not here (a runner's own, `SLURM_JOB_ID`) is
    unknown to the evaluator: a branch or a kept word that needs its value is refused."""
    seq = _SEQ_NAMES.get((point.isl, point.osl), f"{point.isl}_{point.osl}")
    values = {
        "MODEL": fields["model"],
        "MODEL_PREFIX": fields["model-prefix"],
        "PRECISION": fields["precision"],
        "FRAMEWORK": framework,
        "IMAGE": fields["image"],
        "EXP_NAME": f"{fields['model-prefix']}_{seq}",
        "RUNNER_TYPE": runner,
        "ISL": point.isl,
        "OSL": point.osl,
        "MAX_MODEL_LEN": point.isl + point.osl + 256,
        "TP": point.tp,
        "PP_SIZE": point.pp,
        "DCP_SIZE": point.dcp,
        "PCP_SIZE": point.pcp,
        "EP_SIZE": point.ep,
        "DP_ATTENTION": "true" if point.dp_attn else "false",
        "CONC": point.conc,
        "SPEC_DECODING": point.spec,
        "DISAGG": "true" if disagg else "false",
        "GPU_COUNT": point.tp * point.pp * point.pcp,
        "RUN_EVAL": "false",  # a benchmark cell: eval runs are other jobs
        "EVAL_ONLY": "false",
        "RANDOM_RANGE_RATIO": RANDOM_RANGE_RATIO,
        "SCENARIO_TYPE": "fixed-seq-len",
        "SCENARIO_SUBDIR": "fixed_seq_len/",
        "IS_AGENTIC": "0",
        "KV_OFFLOADING": "",
        "KV_OFFLOAD_BACKEND": "",
        "TOTAL_CPU_DRAM_GB": "0",
        "DURATION": "3600",
        "PORT": PORT,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return {name: str(value) for name, value in values.items()}


def matrix_cells(points: Sequence[Point]) -> list[MatrixCell]:
    """One matrix cell per point, with the client's settings; ids `ISLxOSL-cCONC`, the parallel layout added
    where two cells would share one."""
    base = [f"{p.isl}x{p.osl}-c{p.conc}" for p in points]
    ids = [
        f"{p.isl}x{p.osl}-{p.parallel}-c{p.conc}" if base.count(b) > 1 else b for p, b in zip(points, base, strict=True)
    ]
    seen: dict[str, int] = {}
    cells = []
    for point, cell_id in zip(points, ids, strict=True):
        seen[cell_id] = seen.get(cell_id, 0) + 1
        client = dict(point.client)
        concurrency = int(client["--max-concurrency"])
        cells.append(
            MatrixCell(
                id=cell_id if seen[cell_id] == 1 else f"{cell_id}-{seen[cell_id]}",
                input_len=int(client["--input-len"]),
                output_len=int(client["--output-len"]),
                concurrency=concurrency,
                num_prompts=int(client["--num-prompts"]),
                dataset="random",
                range_ratio=float(client["--random-range-ratio"]),
                warmups=2 * concurrency,
                client=CLIENT,
                backend=client["--backend"],
                extra_args=_extra_args(client),
                source=point.source,
            )
        )
    return cells


def client_notes(points: Sequence[Point]) -> list[str]:
    """What the suite's client does that a cell cannot say: a chat template, its own tokenizer."""
    client = {flag: value for point in points for flag, value in point.client}
    notes = []
    if "--use-chat-template" in client or "--dsv4" in client:
        notes.append(
            "the suite's client wraps each prompt in the model's chat template (--use-chat-template"
            + (", --dsv4: DeepSeek-V4's" if "--dsv4" in client else "")
            + ") and shortens it by the template's tokens; hgxkit's client sends the prompt as it is"
        )
    if "--tokenizer" in client:
        notes.append(
            f"the suite's client counts tokens with --tokenizer {client['--tokenizer']}; hgxkit's uses the model's"
        )
    return notes


def _extra_args(client: dict[str, str]) -> tuple[str, ...]:
    """The client's flags that shape the load and are not a cell setting, in their spelling (checked against
    the recipe's kind's client when the recipe is made)."""
    extra = ["--ignore-eos"]
    for flag in ("--endpoint", "--tokenizer-mode"):
        if flag in client:
            extra += [flag, client[flag]]
    return (*extra, *(["--trust-remote-code"] if "--trust-remote-code" in client else []))


def _find(checkout: Path, key: str) -> tuple[str, int, dict[str, Any], yaml.MappingNode]:
    """(config file, line, the entry's data, its YAML node) of `key`; InputError naming the nearest keys."""
    if not checkout.is_dir():
        raise InputError(f"{checkout}: not a directory; give the root of a checkout of the {SUITE} repository")
    keys: list[str] = []
    for file in CONFIG_FILES:
        path = checkout / file
        if not path.exists():
            if file == CONFIG_FILES[0]:
                raise InputError(
                    f"{checkout}: no {file}; give the root of a checkout of the {SUITE} repository with --entry"
                )
            continue
        top = _compose(read_text_file(str(_inside(checkout, file, file))), file)
        for key_node, value in top.value if isinstance(top, yaml.MappingNode) else ():
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            if key_node.value == key:
                data = _construct(value, file) if isinstance(value, yaml.MappingNode) else None
                if not isinstance(data, dict) or not isinstance(value, yaml.MappingNode):
                    raise InputError(f"{file}:{key_node.start_mark.line + 1}: {key}: not a mapping; check the entry")
                return file, key_node.start_mark.line + 1, data, value
            keys.append(str(key_node.value))
    near = difflib.get_close_matches(key, keys, n=3, cutoff=0.6) or difflib.get_close_matches(key, keys, n=3, cutoff=0)
    raise InputError(
        f"{checkout}: no entry {key!r} in {' or '.join(CONFIG_FILES)}; nearest: {', '.join(near) or 'none'}"
    )


def _compose(text: str, file: str) -> yaml.Node | None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.compose(text, Loader=loader)  # type: ignore[no-any-return]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{file}{at}: not valid YAML; give the file as the suite publishes it") from None
    except RecursionError:  # the pure-Python composer, where libyaml's nesting limit is missing
        raise InputError(f"{file}: nested too deeply; give the file as the suite publishes it") from None


def _construct(node: yaml.Node, file: str) -> Any:
    try:
        return yaml.SafeLoader("").construct_document(node)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as err:
        line = node.start_mark.line + 1
        raise InputError(f"{file}:{line}: cannot read the entry ({type(err).__name__}); check the entry") from None


def _inside(checkout: Path, relative: str, where: str) -> Path:
    """`checkout/relative`, refused when a link takes it out of the checkout."""
    path = checkout / relative
    if not path.resolve().is_relative_to(checkout.resolve()):
        raise InputError(f"{where}: {relative} leads out of the checkout (a symbolic link); give a plain checkout")
    return path


def _text(data: dict[str, Any], name: str, file: str, line: int, key: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise InputError(f"{file}:{line}: {key}: {name} is {value!r}, not text; check the entry")
    return value


def _refuse_unserved(where: str, file: str, framework: str, runner: str, data: dict[str, Any]) -> None:
    if file != CONFIG_FILES[0] or runner.removeprefix("cluster:").startswith("mi"):
        raise InputError(
            f"{where}: an AMD entry ({file}, runner {runner}, framework {framework}); hgxkit serves NVIDIA HGX-H200 "
            f"nodes: pick an entry of {CONFIG_FILES[0]}"
        )
    family = framework.split("-")[0]
    if framework not in _SERVED:
        title = _FRAMEWORKS.get(family) or ("a disaggregated setup" if framework.endswith("-disagg") else "")
        named = f" ({title})" if title else ""
        raise InputError(
            f"{where}: framework {framework}{named} is not served by hgxkit, which serves SGLang and vLLM: pick an "
            "entry whose framework is sglang or vllm"
        )
    if data.get("multinode") or data.get("disagg"):
        what = "multinode" if data.get("multinode") else "disaggregated"
        raise InputError(
            f"{where}: a {what} entry (framework {framework}, runner {runner}); a hgxkit recipe is one server on "
            "one node: pick a single-node entry"
        )


def _rows_lines(node: yaml.MappingNode) -> list[list[int]]:
    """The line of each search-space row, per fixed-seq-len item."""
    scenarios = _child(node, "scenarios")
    fixed = _child(scenarios, "fixed-seq-len") if isinstance(scenarios, yaml.MappingNode) else None
    lines = []
    for item in fixed.value if isinstance(fixed, yaml.SequenceNode) else ():
        rows = _child(item, "search-space") if isinstance(item, yaml.MappingNode) else None
        lines.append([row.start_mark.line + 1 for row in rows.value] if isinstance(rows, yaml.SequenceNode) else [])
    return lines


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((value for k, value in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def sweep_points(fixed: Any, lines: Sequence[Sequence[int]] = (), file: str = "", where: str = "") -> list[Point]:
    """Every cell of an entry's fixed-seq-len sweep (its `scenarios.fixed-seq-len` list), in the suite's order;
    `lines` (per item, each search-space row's line in `file`) give the cells their source."""
    if not isinstance(fixed, list):
        raise InputError(f"{where}: scenarios.fixed-seq-len is not a list; check the entry")
    points: list[Point] = []
    for index, item in enumerate(fixed):
        rows = item.get("search-space") if isinstance(item, dict) else None
        if not isinstance(rows, list):
            raise InputError(f"{where}: fixed-seq-len item {index + 1} has no search-space list; check the entry")
        isl, osl = _number(item, "isl", where, MAX_BENCH_TOKENS), _number(item, "osl", where, MAX_BENCH_TOKENS)
        for number, row in enumerate(rows):
            at = f"{file}:{lines[index][number]}" if index < len(lines) and number < len(lines[index]) else where
            points += _row_points(row, isl, osl, at)
            if len(points) > MAX_CELLS:
                raise InputError(f"{where}: more than {MAX_CELLS} cells; the suite's entries have a few dozen")
    return points


def _row_points(row: Any, isl: int, osl: int, at: str) -> list[Point]:
    if not isinstance(row, dict):
        raise InputError(f"{at}: a search-space row that is not a mapping; check the entry")
    unknown = sorted(set(row) - _ROW_KEYS - _ROW_METADATA)
    if unknown:
        raise InputError(f"{at}: {', '.join(map(str, unknown))}: not a setting hgxkit knows the suite to read")
    dp_attn = row.get("dp-attn", False)
    spec = row.get("spec-decoding", "none")
    if not isinstance(dp_attn, bool) or not isinstance(spec, str):
        raise InputError(f"{at}: dp-attn is a true/false and spec-decoding a name; check the row")
    sizes = {name: _number(row, name, at, 1 << 10, default=1) for name in ("tp", "pp", "dcp-size", "pcp-size", "ep")}
    return [
        Point(
            isl, osl, sizes["tp"], sizes["pp"], sizes["dcp-size"], sizes["pcp-size"], sizes["ep"], dp_attn, spec, c, at
        )
        for c in _concurrencies(row, at)
    ]


def _concurrencies(row: dict[str, Any], at: str) -> list[int]:
    """conc-list as written, or doubling from conc-start with the last value capped at conc-end."""
    if "conc-list" in row:
        values = row["conc-list"]
        if not isinstance(values, list) or not values:
            raise InputError(f"{at}: conc-list is not a list of numbers; check the row")
        return [_number({"conc": v}, "conc", at, 1 << 20) for v in values]
    start, end = _number(row, "conc-start", at, 1 << 20), _number(row, "conc-end", at, 1 << 20)
    if start > end:
        raise InputError(f"{at}: conc-start {start} is above conc-end {end}; check the row")
    values = [start]
    while values[-1] < end:
        values.append(min(values[-1] * 2, end))
    return values


def _number(data: dict[str, Any], name: str, at: str, limit: int, default: int | None = None) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise InputError(f"{at}: {name} is {value!r}, not a whole number from 1 to {limit}; check the entry")
    return value


def _script(checkout: Path, prefix: str, precision: str, gpu: str, framework: str, spec: str, where: str) -> str:
    base = f"{SCRIPTS}/{prefix}_{precision}_{gpu}"
    mtp = "_mtp" if spec == "mtp" else ""
    candidates = (f"{base}_{framework}{mtp}.sh", f"{base}{mtp}.sh")
    for candidate in candidates:
        if (checkout / candidate).is_file():
            return candidate
    raise InputError(f"{where}: no launch script: neither {candidates[0]} nor {candidates[1]} is in the checkout")


def _client(calls: Sequence[Call], script: str, point: Point) -> tuple[tuple[str, str], ...]:
    """run_benchmark_serving's options in the script's one call on this cell's path."""
    runs = [c for c in calls if c.name == "run_benchmark_serving"]
    cell = f"ISL {point.isl}, OSL {point.osl}, {point.parallel}, CONC {point.conc}"
    if len(runs) != 1:
        raise InputError(
            f"{script}: {len(runs)} calls of run_benchmark_serving on the path of {cell}; hgxkit reads the client's "
            "settings from exactly one"
        )
    words, options = list(runs[0].words), []
    while words:
        flag = words.pop(0)
        if flag in _CLIENT_SWITCHES:
            options.append((flag, ""))
        elif flag in _CLIENT_OPTIONS and words:
            options.append((flag, words.pop(0)))
        else:
            raise InputError(
                f"{script}:{runs[0].line}: run_benchmark_serving {flag}: not an option benchmark_lib.sh reads"
            )
    client = dict(options)
    needed = ("--backend", "--input-len", "--output-len", "--random-range-ratio", "--num-prompts", "--max-concurrency")
    for flag in needed:
        value = client.get(flag)
        number = flag not in ("--backend", "--random-range-ratio")
        if value is None or (number and not value.isdigit()) or not re.fullmatch(r"[\w.-]+", value):
            raise InputError(
                f"{script}:{runs[0].line}: run_benchmark_serving {flag} is {value!r} for {cell}; hgxkit needs it "
                "known before the script runs"
            )
    return tuple((flag, value) for flag, value in options if value is not None)


def _with_client(point: Point, client: tuple[tuple[str, str], ...]) -> Point:
    return Point(*(getattr(point, f) for f in Point.__dataclass_fields__ if f != "client"), client=client)


def _library_note(checkout: Path) -> list[str]:
    """A note when the checkout's run_benchmark_serving no longer adds the flags hgxkit's cells assume."""
    path = checkout / LIBRARY
    if not path.is_file():
        return [f"{LIBRARY} is not in the checkout: the cells assume its client flags ({', '.join(_CLIENT_FLAGS)})"]
    text = read_text_file(str(_inside(checkout, LIBRARY, LIBRARY)))
    start = text.find("run_benchmark_serving()")
    body = text[start : text.find("\n}\n", start)] if start >= 0 else ""
    missing = [flag for flag in _CLIENT_FLAGS if flag not in body]
    if not missing:
        return []
    return [
        f"{LIBRARY}: run_benchmark_serving no longer passes {', '.join(missing)}; the cells' warmups and "
        "--ignore-eos are those of the suite's commit 843c6254: check them against its client"
    ]


def git_commit(checkout: Path) -> str | None:
    """The commit the checkout's work tree is at, read from its `.git` (no git is run); None when it is not a git
    work tree or the commit cannot be read."""
    git = checkout / ".git"
    try:
        if git.is_file():
            pointer = read_text_file(str(git)).strip()
            if not pointer.startswith("gitdir: "):
                return None
            git = (checkout / pointer.removeprefix("gitdir: ")).resolve()
        if not git.is_dir():
            return None
        head = read_text_file(str(git / "HEAD")).strip()
        if not head.startswith("ref: "):
            return head if re.fullmatch(r"[0-9a-f]{40}", head) else None
        ref = head.removeprefix("ref: ")
        common = git
        if (git / "commondir").is_file():
            common = (git / read_text_file(str(git / "commondir")).strip()).resolve()
        for base in (git, common):
            if (base / ref).is_file():
                sha = read_text_file(str(base / ref)).strip()
                return sha if re.fullmatch(r"[0-9a-f]{40}", sha) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in read_text_file(str(packed)).splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and re.fullmatch(r"[0-9a-f]{40}", sha):
                    return sha
    except (InputError, OSError):
        return None
    return None


def configuration_labels(groups: Sequence[Sequence[Point]]) -> list[str]:
    """A short name for each group of cells that runs one server command, from what sets it apart: the sequence
    lengths, the parallel layout, speculative decoding, the concurrency; a number where those do not."""
    if len(groups) < 2:
        return [""] * len(groups)
    every = [p for group in groups for p in group]
    aspects = (
        (lambda p: f"{p.isl}x{p.osl}", len({(p.isl, p.osl) for p in every}) > 1),
        (lambda p: p.parallel, True),
        (lambda p: p.spec if p.spec != "none" else "nospec", len({p.spec for p in every}) > 1),
    )
    labels = []
    for group in groups:
        parts = [name(group[0]) for name, wanted in aspects if wanted and len({name(p) for p in group}) == 1]
        labels.append("-".join(parts))
    if len(set(labels)) < len(labels):
        labels = [f"{label}-{_concurrency(group)}" for label, group in zip(labels, groups, strict=True)]
    if len(set(labels)) < len(labels) or not all(labels):
        labels = [f"{label}-{number}" if label else str(number) for number, label in enumerate(labels, 1)]
    return labels


def _concurrency(group: Sequence[Point]) -> str:
    low, high = min(p.conc for p in group), max(p.conc for p in group)
    return f"c{low}" if low == high else f"c{low}-c{high}"
