"""The host-side benchmark script the verify role runs DETACHED (a systemd transient unit), so an SSH drop
cannot kill it; the role polls its progress file ("cell k of n") and attaches to a run in progress.

The client runs inside each serving container (`docker exec`), as on a real node: it reads the tokenizer from
the container's model path. Every line is built with `hgxkit.hostcmd` (container names come from recipes).

Example:
    >>> from hgxkit.verify.plan import Cell
    >>> text = bench_script([Cell(0, "dsv4-0", 30000, 5000, 1, 3, 512)], workdir="/var/lib/hgxkit/verify/R",
    ...                     api_key_file=None, run_tag="T")
    >>> text.splitlines()[2]
    'cd /var/lib/hgxkit/verify/R || exit 1'
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pyinfra.api import StringCommand

from hgxkit.hostcmd import argv, script, text, variable
from hgxkit.kinds import KINDS
from hgxkit.nvidia.smi import GPU_QUERY
from hgxkit.verify.plan import Cell, client_argv

ClientProcess = Literal["per_container", "per_cell"]
DRIVER_FILE = "hgxkit_cells.py"
COPY_LIMIT_BYTES = 4 * 2**30  # the most one container's benchmark outputs may bring back to the host
CLIENT_START_FILE = "client-start.txt"  # per container: when its client process started, when it had imported

# Runs inside a serving container: the kind's benchmark client (SGLang's module, or vLLM's CLI with
# `bench serve`), with its own command line unchanged. Every cell runs in ONE process: runpy re-runs the module
# as __main__ each time, so torch and transformers are imported once per container, not once per cell (about
# 14 s each on two cores). Progress, each cell's start and its exit status go to stdout for the host script,
# which records telemetry between a cell's start and its end. Each cell's output goes to its own log.
CELL_DRIVER = """\
import time
started = time.time()
import contextlib, importlib, importlib.util, json, runpy, sys, traceback, warnings
warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
candidates, plan = json.loads(sys.argv[1]), json.loads(sys.argv[2])
module, prefix = None, []
for entry in candidates:
    name, before = (entry, []) if isinstance(entry, str) else entry
    try:
        if importlib.util.find_spec(name) is not None:
            module, prefix = name, before
            break
    except ImportError:
        pass
if module is None:
    print("hgxkit-noclient", flush=True)
    sys.exit(3)
try:  # the client's heavy imports (torch, transformers) now, not inside the first cell's window
    with contextlib.redirect_stdout(sys.stderr):
        importlib.import_module(module)
except BaseException:
    pass  # the first cell's run reports it
print("hgxkit-client-ready %.3f %.3f" % (started, time.time()), flush=True)
for entry in plan:
    file, log_path, label, args = entry[:4]
    repeats = entry[4] if len(entry) > 4 else 1
    again = entry[5] if len(entry) > 5 else args  # a repeat's arguments (no warm-up: the server is warm)
    print("hgxkit-progress " + label, flush=True)
    print("hgxkit-start " + file, flush=True)
    rc = 0
    with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        for k in range(repeats):  # each run appends its result to the same file
            sys.argv = [module, *prefix, *(again if k else args)]
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            except SystemExit as stop:
                rc = rc or (stop.code if isinstance(stop.code, int) else int(stop.code is not None))
            except Exception:
                traceback.print_exc()
                rc = 1
    print("hgxkit-done %s %d" % (file, rc), flush=True)
"""


def find_client(kind: str) -> str:
    """Shell text printing the first of the kind's client modules that imports (per-cell mode)."""
    return text(
        script(
            'for m in {modules}; do python3 -c "import $m" >/dev/null 2>&1 && {{ echo $m; break; }}; done',
            modules=[module for module, _ in KINDS[kind].bench.modules],
        )
    )


# While a cell runs: the server's /metrics scraped every second (a `# hgxkit-scrape <unix time>` line before
# each scrape) and nvidia-smi samples of the group's GPUs every second; the window file holds start and end.
TELEMETRY_FUNCTIONS = (
    "tele_start() {",
    '  date +%s.%N > "$1.window"; : > "$1.metrics.prom"; : > "$1.gpu.csv"; tm=; tg=',
    '  if [ -n "$2" ]; then (while :; do echo "# hgxkit-scrape $(date +%s.%N)"; curl -s -m 2 "$2" 2>/dev/null; '
    'sleep 1; done) > "$1.metrics.prom" 2>/dev/null & tm=$!; fi',
    text(
        script(
            '  if [ -n "$3" ]; then TZ=UTC nvidia-smi {query} --format=csv,noheader,nounits -i "$3" -lms 1000 '
            '> "$1.gpu.csv" 2>/dev/null & tg=$!; fi',
            query=f"--query-gpu={GPU_QUERY}",
        )
    ),
    "}",
    'tele_stop() { [ -n "$tm$tg" ] && kill $tm $tg 2>/dev/null; wait $tm $tg 2>/dev/null; '
    'date +%s.%N >> "$1.window"; }',
)


def _telemetry_args(cell: Cell) -> dict[str, str]:
    return {"url": cell.metrics_url or "", "gpus": ",".join(str(g) for g in cell.gpus)}


def _progress(k: int, total: int, cell: Cell) -> str:
    what = "warmup run" if not cell.record else "cell"
    load = f"concurrency {cell.concurrency}" if cell.concurrency is not None else f"rate {cell.request_rate or 'inf'}/s"
    return f"{what} {k} of {total}: group {cell.group}, input {cell.input_len}, {load}, {cell.num_prompts} prompts"


def _exec(container: str, *words: str) -> list[str]:
    """`docker exec` with the API key and offline mode passed by name from the script's environment."""
    return ["docker", "exec", "-e", "OPENAI_API_KEY", "-e", "HF_HUB_OFFLINE", container, *words]


def bench_script(
    cells: list[Cell],
    *,
    workdir: str,
    api_key_file: str | None,
    run_tag: str,
    client_process: ClientProcess = "per_container",
) -> str:
    """The script the transient unit runs: each cell in turn, progress and status in `workdir`.

    The API key reaches the client through the environment, never the command line.
    `client_process="per_container"` runs all of a container's cells in one client process (see CELL_DRIVER);
    `"per_cell"` starts `python3 -m <client>` for every cell.
    """
    inner = f"/tmp/hgxkit-verify/{run_tag}"
    key = script('[ -s {file} ] && export OPENAI_API_KEY="$(cat {file})"', file=api_key_file) if api_key_file else None
    lines = [
        "#!/bin/sh",
        "# hgxkit verify: the server kind's own benchmark client inside each serving container, one cell at a time.",
        text(script("cd {dir} || exit 1", dir=workdir)),
        "export HF_HUB_OFFLINE=1",
        text(key) if key else ":",
        "rc=0",
        "rm -f failed",
        *TELEMETRY_FUNCTIONS,
    ]
    labels = {id(cell): _progress(k, len(cells), cell) for k, cell in enumerate(cells, start=1)}
    containers = list(dict.fromkeys(cell.container for cell in cells))
    lines += [text(argv("docker", "exec", container, "mkdir", "-p", inner)) for container in containers]
    if client_process == "per_cell":
        lines += _per_cell_lines(cells, labels, inner)
    else:
        heredoc = text(script("cat > {file} <<'HGXKIT_DRIVER'", file=DRIVER_FILE))
        lines += [heredoc, CELL_DRIVER.rstrip("\n"), "HGXKIT_DRIVER"]
        for container in containers:
            mine = [cell for cell in cells if cell.container == container]
            lines += _per_container_lines(container, mine, labels, inner)
    lines += ["[ -s failed ] && rc=1", 'echo "done" > progress', 'echo "$rc" > status', "exit $rc"]
    return "\n".join(lines) + "\n"


def _per_container_lines(container: str, cells: list[Cell], labels: dict[int, str], inner: str) -> list[str]:
    """A container's cells in one driver process: its stdout read line by line, then every output copied back."""
    driver_log = f"client-{_safe(container)}.log"
    return [
        *_driver_start_lines(container, cells, labels, inner, driver_log),
        '  case "$line" in',
        *_progress_cases(cells, labels),
        "  esac",
        '  case "$line" in',
        *_failure_cases(container, KINDS[cells[0].kind].title, driver_log),
        "  esac",
        '  case "$line" in "hgxkit-done "*) f= ;; esac',
        "done",
        *_copy_back_lines(container, cells, inner, driver_log),
    ]


def _driver_start_lines(
    container: str, cells: list[Cell], labels: dict[int, str], inner: str, driver_log: str
) -> list[str]:
    """Copy CELL_DRIVER in and start it on the cells' plan; the loop that reads its stdout opens here."""
    plan = [
        [
            cell.file,
            f"{inner}/{cell.file}.log",
            labels[id(cell)],
            client_argv(cell, inner),
            cell.repeats,
            client_argv(cell, inner, warm=True),
        ]
        for cell in cells
    ]
    candidates = [[module, list(prefix)] for module, prefix in KINDS[cells[0].kind].bench.modules]
    client = argv(*_exec(container, "python3", f"{inner}/{DRIVER_FILE}", json.dumps(candidates), json.dumps(plan)))
    return [
        text(script("echo {label} > progress", label=labels[id(cells[0])])),
        text(argv("docker", "cp", DRIVER_FILE, f"{container}:{inner}/{DRIVER_FILE}")),
        # The exec's exit status follows as the last line. A `docker exec` that never started the driver prints no
        # cell line at all (Docker 20.10 prints its own "OCI runtime exec failed …" on stdout).
        text(
            script(
                '{{ {client} 2> {log}; echo "hgxkit-exit $?"; }} | while IFS= read -r line; do',
                client=client,
                log=driver_log,
            )
        ),
    ]


def _progress_cases(cells: list[Cell], labels: dict[int, str]) -> list[str]:
    """The driver's progress lines: a cell started (progress, telemetry on), the client ready, a cell done."""
    return [
        # The client runs in a stranger's image: what it prints picks one of the cells below by its exact line.
        # Every file name, progress text and telemetry argument comes from the cell table, never from the line,
        # so a printed `hgxkit-start ../../etc/cron.d/x` cannot choose where telemetry is written.
        *(
            text(
                script(
                    "    {line}) f={file}; echo {label} > progress; tele_start {stem} {url} {gpus} ;;",
                    line=f"hgxkit-start {cell.file}",
                    file=cell.file,
                    label=labels[id(cell)],
                    stem=cell.file.rsplit(".", 1)[0],
                    **_telemetry_args(cell),
                )
            )
            for cell in cells
        ),
        "    \"hgxkit-client-ready \"*) printf '%s\\n' \"${line#hgxkit-client-ready }\" | tr -cd '0-9. \\n' >> "
        + CLIENT_START_FILE
        + " ;;",
        '    "hgxkit-done "*) [ -n "$f" ] && tele_stop "${f%.*}" ;;',
    ]


def _failure_cases(container: str, title: str, driver_log: str) -> list[str]:
    """What marks the run failed: no client in the image, a cell's nonzero status, the exec's own failure."""
    return [
        '    "hgxkit-done "*" 0") ;;',
        text(
            script(
                '    "hgxkit-noclient") echo {why} >> {log}; echo "$line" >> failed ;;',
                why=f"no {title} benchmark client in {container}",
                log=driver_log,
            )
        ),
        '    "hgxkit-done "*) echo "hgxkit-done ${f:-unknown} $(printf %s "${line##* }" | tr -cd 0-9)" >> failed ;;',
        '    "hgxkit-exit 0") ;;',
        text(
            script(
                '    "hgxkit-exit "*) x=$(printf %s "${{line#hgxkit-exit }}" | tr -cd 0-9); '
                'echo docker exec {container} exited "$x" >> {log}; echo "hgxkit-exit $x" >> failed ;;',
                container=container,
                log=driver_log,
            )
        ),
        '    "hgxkit-"*) ;;',
        # Anything else on stdout is Docker's or the image's own word: the driver sends the client's output to the
        # cells' logs. It is kept in the client log, where "no result" is explained.
        text(script("""    *) printf '%s\\n' "$line" >> {log} ;;""", log=driver_log)),
    ]


def _copy_back_lines(container: str, cells: list[Cell], inner: str, driver_log: str) -> list[str]:
    """Copy every cell's output and log out of the container, bounded and without following a link."""
    # Every cell's output and log in one copy, not two `docker cp` per cell.
    # The image is a stranger's and its code runs as root in the container, so the copy is bounded:
    # - a tar stream of the directory, cut at COPY_LIMIT_BYTES (the directory could be a link to the container's
    #   whole file system);
    # - only the cells' own names are unpacked, without recursion (a name that is a directory brings nothing
    #   inside it), into a directory of its own;
    # - each is moved into the workdir only when it is a regular file. A planted link (one named `progress`, say)
    #   would otherwise be written through by this script or a later run.
    out = f"out-{_safe(container)}"
    names = [f"./{name}" for cell in cells for name in (cell.file, f"{cell.file}.log")]
    stream = argv("docker", "cp", f"{container}:{inner}/.", "-")
    unpack = argv(
        "tar", "-xf", "-", "-C", out, "--no-same-owner", "--no-same-permissions", "--no-recursion", "--", *names
    )
    lines = [
        text(
            script(
                "mkdir {out} && {stream} 2>/dev/null | head -c {limit} | {unpack} 2>/dev/null",
                out=out,
                stream=stream,
                limit=str(COPY_LIMIT_BYTES),
                unpack=unpack,
            )
        )
    ]
    for cell in cells:
        log = f"{cell.file}.log"
        lines += [
            text(script("{move} || rc=1", move=_move_regular(f"{out}/{cell.file}", cell.file))),
            text(
                script(
                    "{move} || cp {driver} {dst}", move=_move_regular(f"{out}/{log}", log), driver=driver_log, dst=log
                )
            ),
        ]
    lines.append(text(script("rm -rf {out}", out=out)))
    return lines


def _move_regular(src: str, dst: str) -> StringCommand:
    """Move `src` to `dst` when it is a regular file (not a link, not a directory); fail otherwise."""
    return script("{{ [ -f {src} ] && [ ! -L {src} ] && mv -f {src} {dst}; }}", src=src, dst=dst)


def _safe(name: str) -> str:
    """A container name as part of a file name (ASCII letters, digits and `_` only)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _per_cell_lines(cells: list[Cell], labels: dict[int, str], inner: str) -> list[str]:
    # One shell variable per container, named by its position (never by the recipe's container name).
    var_of = {container: f"module_{i}" for i, container in enumerate(dict.fromkeys(c.container for c in cells))}
    lines = []
    kind_of = {cell.container: cell.kind for cell in cells}
    for container, var in var_of.items():
        find = argv("docker", "exec", container, "sh", "-c", find_client(kind_of[container]))
        lines.append(text(script("{var}=$({find} 2>/dev/null)", var=variable(var), find=find)))
    for cell in cells:
        var = var_of[cell.container]
        log = f"{cell.file}.log"
        client = argv(*_exec(cell.container, "python3", "-m"))
        prefix = list(KINDS[cell.kind].bench.modules[0][1])
        copy = argv("docker", "cp", f"{cell.container}:{inner}/{cell.file}", cell.file)
        lines += [
            text(script("echo {label} > progress", label=labels[id(cell)])),
            text(
                script(
                    'if [ -z "${var}" ]; then echo {why} > {log}; rc=1; else',
                    var=variable(var),
                    why=f"no {KINDS[cell.kind].title} benchmark client in {cell.container}",
                    log=log,
                )
            ),
            text(script("  tele_start {stem} {url} {gpus}", stem=cell.file.rsplit(".", 1)[0], **_telemetry_args(cell))),
            text(
                script(
                    '  {client} "${var}" {args} >> {log} 2>&1 || rc=1',
                    client=client,
                    var=variable(var),
                    args=[*prefix, *client_argv(cell, inner)],
                    log=log,
                )
            ),
            text(script("  for _ in $(seq 2 {n}); do", n=int(cell.repeats))),
            text(
                script(
                    '    {client} "${var}" {args} >> {log} 2>&1 || rc=1',
                    client=client,
                    var=variable(var),
                    args=[*prefix, *client_argv(cell, inner, warm=True)],
                    log=log,
                )
            ),
            "  done",
            text(script("  tele_stop {stem}", stem=cell.file.rsplit(".", 1)[0])),
            text(script("  {cp} >/dev/null 2>&1 || rc=1", cp=copy)),
            "fi",
        ]
    return lines


PROGRESS_MARK = "##hgxkit-progress"


def wait_for_progress(workdir: str, seen: str, wait_s: float) -> StringCommand:
    """One node-side wait: returns as soon as the run's status file appears or its progress file differs from
    `seen` (its checksum, as `parse_progress` returned it last time), else after `wait_s` seconds; prints the
    progress checksum, the status and the progress (read with `parse_progress`)."""
    return script(
        "i=0; while [ $i -lt {ticks} ]; do [ -s {status} ] && break; "
        '[ "$( (cksum < {progress}) 2>/dev/null || echo none)" != {seen} ] && break; sleep 0.2; i=$((i+1)); '
        "done; (cksum < {progress}) 2>/dev/null || echo none; echo {mark}; cat {status} 2>/dev/null; echo {mark}; "
        "cat {progress} 2>/dev/null; true",
        ticks=max(round(wait_s / 0.2), 1),
        status=f"{workdir}/status",
        progress=f"{workdir}/progress",
        seen=seen or "unseen",
        mark=PROGRESS_MARK,
    )


def parse_progress(lines: list[str]) -> tuple[str, list[str], str]:
    """(progress checksum, status lines, progress text) from `wait_for_progress`'s output."""
    parts: list[list[str]] = [[]]
    for line in lines:
        if line == PROGRESS_MARK:
            parts.append([])
        else:
            parts[-1].append(line)
    seen, status, progress = ([*parts, [], [], []])[:3]
    return " ".join(seen).strip(), [s for s in status if s.strip()], " ".join(progress).strip()
