"""Verify a serving node: health, one real generation, SGLang's own benchmark client per cell, gates, the
host fingerprint. Runs through a command runner, so it works over pyinfra's SSH connection at execute time.

The benchmark matrix runs DETACHED on the host (a systemd transient unit running a small shell script), so an
SSH drop cannot kill it; the role polls its progress file ("cell k of n") and attaches to a run in progress.

Example (inside a pyinfra python.call callback):
    cells = plan_cells(recipe, "smoke", groups)
    script = bench_script(cells, workdir="/var/lib/hgxkit/verify/RUN", api_key_file=None, run_tag="T")
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hgxkit import __version__
from hgxkit.driver_gate import Runner
from hgxkit.nvidia.host import parse_meminfo_bytes, parse_os_release
from hgxkit.nvidia.smi import gpus_from_xml, parse_topo_matrix
from hgxkit.recipe.model import Recipe
from hgxkit.results.bench import parse_bench_jsonl
from hgxkit.results.fingerprint import Fingerprint, GpuFingerprint, hash_uuid
from hgxkit.results.summary import CellResult

BenchMode = Literal["smoke", "full", "none"]
CLIENT_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")
CONTAINER_PORT_DEFAULT = 30000


@dataclass(frozen=True)
class Cell:
    """One benchmark cell for one group's container."""

    group: int
    container: str
    port: int
    input_len: int
    concurrency: int
    num_prompts: int
    output_len: int

    @property
    def file(self) -> str:
        return f"g{self.group}_{self.input_len}_{self.concurrency}.jsonl"


def plan_cells(
    recipe: Recipe, mode: BenchMode, groups: list[tuple[int, str]], output_len: int | None = None
) -> list[Cell]:
    """The cells to run: the recipe's smoke cell or whole matrix, for each (group, container name)."""
    matrix = recipe.matrix
    if mode == "none" or matrix is None:
        return []
    out_len = output_len or matrix.output_len
    port = int(recipe.server.flag("--port") or CONTAINER_PORT_DEFAULT)
    if mode == "smoke":
        smoke = matrix.smoke or None
        shapes = [(smoke.input_len, smoke.concurrency, smoke.num_prompts)] if smoke else [(matrix.input_lens[0], 1, 3)]
    else:
        shapes = [(i, c, matrix.prompts_for(c)) for i in matrix.input_lens for c in matrix.concurrencies]
    return [Cell(g, name, port, i, c, n, out_len) for g, name in groups for i, c, n in shapes]


def client_argv(cell: Cell, output_dir: str) -> list[str]:
    """Arguments of SGLang's benchmark client for one cell (random-ids: no dataset download)."""
    return [
        "--backend", "sglang", "--host", "127.0.0.1", "--port", str(cell.port),
        "--dataset-name", "random-ids",
        "--random-input-len", str(cell.input_len), "--random-output-len", str(cell.output_len),
        "--random-range-ratio", "1.0",
        "--num-prompts", str(cell.num_prompts), "--max-concurrency", str(cell.concurrency),
        # Warmups at least the concurrency (a cold first batch is not the steady state); --flush-cache resets
        # the server's accept-length counter, which is otherwise lifetime-cumulative.
        "--warmup-requests", str(max(cell.concurrency, 1)), "--flush-cache", "--output-details",
        "--output-file", f"{output_dir}/{cell.file}",
    ]  # fmt: skip


def client_args(cell: Cell, output_dir: str) -> str:
    """`client_argv` as one shell string (its words need no quoting)."""
    return " ".join(client_argv(cell, output_dir))


FIND_CLIENT = (
    "sh -c 'for m in " + " ".join(CLIENT_MODULES) + "; do "
    'python3 -c "import $m" >/dev/null 2>&1 && { echo $m; break; }; done\''
)

# Runs inside a serving container: SGLang's benchmark client, its own command line unchanged, once per cell in
# ONE process (runpy re-runs the module as __main__ each time), so torch and transformers are imported once per
# container instead of once per cell (about 14 s each on two cores). Progress and each cell's exit status go to
# stdout for the host script; each cell's output goes to its own log.
CELL_DRIVER = """\
import contextlib, importlib.util, json, runpy, sys, traceback, warnings
warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
candidates, plan = json.loads(sys.argv[1]), json.loads(sys.argv[2])
module = None
for name in candidates:
    try:
        if importlib.util.find_spec(name) is not None:
            module = name
            break
    except ImportError:
        pass
if module is None:
    print("hgxkit-noclient", flush=True)
    sys.exit(3)
for file, log_path, label, args in plan:
    print("hgxkit-progress " + label, flush=True)
    rc = 0
    with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        sys.argv = [module, *args]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            rc = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except Exception:
            traceback.print_exc()
            rc = 1
    print("hgxkit-done %s %d" % (file, rc), flush=True)
"""
DRIVER_FILE = "hgxkit_cells.py"
ClientProcess = Literal["per_container", "per_cell"]


def _progress(k: int, total: int, cell: Cell) -> str:
    return (
        f"cell {k} of {total}: group {cell.group}, input {cell.input_len}, concurrency {cell.concurrency}, "
        f"{cell.num_prompts} prompts"
    )


def bench_script(
    cells: list[Cell],
    *,
    workdir: str,
    api_key_file: str | None,
    run_tag: str,
    client_process: ClientProcess = "per_container",
) -> str:
    """The host-side script the transient unit runs: each cell in turn, progress and status in `workdir`.

    The client runs inside the serving container (`docker exec`), as on a real node: it reads the tokenizer
    from the container's model path. The API key reaches it through the environment, never the command line.
    `client_process="per_container"` runs all of a container's cells in one client process (see CELL_DRIVER);
    `"per_cell"` starts `python3 -m <client>` for every cell.
    """
    inner = f"/tmp/hgxkit-verify/{run_tag}"
    lines = [
        "#!/bin/sh",
        "# hgxkit verify: SGLang's benchmark client inside each serving container, one cell at a time.",
        f"cd {workdir} || exit 1",
        "export HF_HUB_OFFLINE=1",
        f'[ -s {api_key_file} ] && export OPENAI_API_KEY="$(cat {api_key_file})"' if api_key_file else ":",
        "rc=0",
        "rm -f failed",
    ]
    labels = {id(cell): _progress(k, len(cells), cell) for k, cell in enumerate(cells, start=1)}
    containers = dict.fromkeys(cell.container for cell in cells)
    for container in containers:
        lines.append(f"docker exec {container} mkdir -p {inner}")
    if client_process == "per_cell":
        lines += _per_cell_lines(cells, labels, inner)
    else:
        lines += [f"cat > {DRIVER_FILE} <<'HGXKIT_DRIVER'", CELL_DRIVER.rstrip("\n"), "HGXKIT_DRIVER"]
        for container in containers:
            mine = [cell for cell in cells if cell.container == container]
            lines += _per_container_lines(container, mine, labels, inner)
    lines += ['[ -s failed ] && rc=1', 'echo "done" > progress', 'echo "$rc" > status', "exit $rc"]
    return "\n".join(lines) + "\n"


def _per_container_lines(container: str, cells: list[Cell], labels: dict[int, str], inner: str) -> list[str]:
    plan = [[cell.file, f"{inner}/{cell.file}.log", labels[id(cell)], client_argv(cell, inner)] for cell in cells]
    driver_log = f"client-{container}.log"
    lines = [
        f"echo {shlex.quote(labels[id(cells[0])])} > progress",
        f"docker cp {DRIVER_FILE} {container}:{inner}/{DRIVER_FILE}",
        f"docker exec -e OPENAI_API_KEY -e HF_HUB_OFFLINE {container} python3 {inner}/{DRIVER_FILE} "
        f"{shlex.quote(json.dumps(list(CLIENT_MODULES)))} {shlex.quote(json.dumps(plan))} 2> {driver_log} "
        "| while IFS= read -r line; do",
        '  case "$line" in',
        "    \"hgxkit-progress \"*) printf '%s\\n' \"${line#hgxkit-progress }\" > progress ;;",
        '    "hgxkit-done "*" 0") ;;',
        f'    "hgxkit-noclient") echo "no SGLang benchmark client in {container}" >> {driver_log}; '
        'echo "$line" >> failed ;;',
        '    "hgxkit-done "*) echo "$line" >> failed ;;',
        "  esac",
        "done",
    ]
    for cell in cells:
        lines += [
            f"docker cp {container}:{inner}/{cell.file} {cell.file} >/dev/null 2>&1 || rc=1",
            f"docker cp {container}:{inner}/{cell.file}.log {cell.file}.log >/dev/null 2>&1 "
            f"|| cp {driver_log} {cell.file}.log",
        ]
    return lines


def _per_cell_lines(cells: list[Cell], labels: dict[int, str], inner: str) -> list[str]:
    lines = []
    for container in dict.fromkeys(cell.container for cell in cells):
        var = "module_" + re.sub(r"\W", "_", container)
        lines.append(f"{var}=$(docker exec {container} {FIND_CLIENT} 2>/dev/null)")
    for cell in cells:
        var = "module_" + re.sub(r"\W", "_", cell.container)
        lines += [
            f"echo {shlex.quote(labels[id(cell)])} > progress",
            f'if [ -z "${var}" ]; then echo "no SGLang benchmark client in {cell.container}" > {cell.file}.log; '
            "rc=1; else",
            f'  docker exec -e OPENAI_API_KEY -e HF_HUB_OFFLINE {cell.container} python3 -m "${var}" '
            f"{client_args(cell, inner)} > {cell.file}.log 2>&1 || rc=1",
            f"  docker cp {cell.container}:{inner}/{cell.file} {cell.file} >/dev/null 2>&1 || rc=1",
            "fi",
        ]
    return lines


def cells_from_jsonl(cells: list[Cell], texts: dict[str, str]) -> tuple[list[CellResult], list[str]]:
    """Results per cell from the client's JSONL files; problems for cells that produced none."""
    results, problems = [], []
    for cell in cells:
        text = texts.get(cell.file, "")
        records = parse_bench_jsonl(text, source=cell.file) if text.strip() else []
        if not records:
            problems.append(f"group {cell.group} cell {cell.input_len}x{cell.concurrency}: the client wrote no result")
            continue
        results.append(CellResult.from_record(records[-1], num_prompts=cell.num_prompts, group=cell.group,
                                              raw_file=cell.file))  # fmt: skip
    return results, problems


def gates(recipe: Recipe, results: list[CellResult], mode: BenchMode) -> list[str]:
    """Failures that fail the run: accept length ~1.0 under speculation, failed requests in the smoke run."""
    problems = []
    algorithm = recipe.server.flag("--speculative-algorithm")
    for cell in results:
        if algorithm and cell.accept_length is not None and cell.accept_length <= 1.05:
            problems.append(
                f"group {cell.group}: accept length {cell.accept_length:.2f} with --speculative-algorithm "
                f"{algorithm}: the drafts are never accepted (wrong algorithm for this checkpoint?)"
            )
        if mode == "smoke" and cell.failed:
            problems.append(f"group {cell.group}: {cell.failed} of {cell.num_prompts} smoke requests failed")
    return problems


def collect_fingerprint(
    run: Runner,
    *,
    system_name: str,
    recipe: Recipe,
    rendered: list[str],
    image: str,
    image_digest: str | None,
    server_info: dict,
    model_record: dict,
    gpu_health: dict,
) -> Fingerprint:
    """Read everything that can change a result from the host (one runner call per source)."""
    os_release = parse_os_release("\n".join(run("cat /etc/os-release")))
    lscpu = dict(line.split(":", 1) for line in run("LC_ALL=C lscpu 2>/dev/null") if ":" in line)
    lscpu = {k.strip(): v.strip() for k, v in lscpu.items()}
    xml = "\n".join(run("nvidia-smi -q -x 2>/dev/null || true"))
    gpus, top = gpus_from_xml(xml) if "<nvidia_smi_log" in xml else ([], {})
    topo_text = "\n".join(run("nvidia-smi topo -m 2>/dev/null || true"))
    try:
        topo = {f"{r}-{c}": v for (r, c), v in parse_topo_matrix(topo_text).items() if r.startswith("GPU")}
    except ValueError:
        topo = {}
    versions = dict(
        line.split(" ", 1)
        for line in run(
            "dpkg-query -W -f='${Package} ${Version}\\n' 'nvidia-open*' 'cuda-drivers*' nvidia-driver "
            "'nvidia-fabricmanager*' 'libnvidia-nscq*' nvidia-container-toolkit 'datacenter-gpu-manager-4*' "
            "docker-ce docker.io 2>/dev/null || true"
        )
        if " " in line
    )
    docker_info = {}
    raw_docker = run("docker info --format '{{json .}}' 2>/dev/null || true")
    if raw_docker and raw_docker[0].startswith("{"):
        info = json.loads(raw_docker[0])
        docker_info = {
            "server_version": info.get("ServerVersion"),
            "storage_driver": info.get("Driver"),
            "cgroup_driver": info.get("CgroupDriver"),
            "cgroup_version": info.get("CgroupVersion"),
            "runtimes": ",".join(sorted(info.get("Runtimes") or {})),
            "default_runtime": info.get("DefaultRuntime"),
        }
    simulated = "<simulated>true</simulated>" in xml or bool(server_info.get("simulated"))
    meminfo = parse_meminfo_bytes("\n".join(run("cat /proc/meminfo")))
    secure_boot = " ".join(run("mokutil --sb-state 2>/dev/null || echo unknown"))
    recipe_text = Path(recipe.path).read_bytes() if recipe.path else b""
    driver = next(
        (v for k, v in versions.items() if k.startswith(("nvidia-open", "cuda-drivers", "nvidia-driver"))), None
    )
    fabric = next((v for k, v in versions.items() if k.startswith("nvidia-fabricmanager")), None)
    return Fingerprint(
        system_name=system_name,
        simulated=simulated,
        operating_system=os_release.get("PRETTY_NAME"),
        kernel=" ".join(run("uname -r")),
        host_processor_model_name=lscpu.get("Model name"),
        host_processors_per_node=int(lscpu["Socket(s)"]) if lscpu.get("Socket(s)", "").isdigit() else None,
        host_processor_core_count=int(lscpu["Core(s) per socket"])
        if lscpu.get("Core(s) per socket", "").isdigit()
        else None,
        host_memory_capacity=f"{meminfo / 1024**3:.0f} GiB" if meminfo else None,
        numa_nodes=int(lscpu["NUMA node(s)"]) if lscpu.get("NUMA node(s)", "").isdigit() else None,
        secure_boot=secure_boot.strip() or None,
        cgroup_version={"cgroup2fs": 2, "tmpfs": 1}.get(" ".join(run("stat -fc %T /sys/fs/cgroup")).strip()),
        accelerator_model_name=gpus[0].name if gpus else None,
        accelerators_per_node=len(gpus) or None,
        accelerator_memory_capacity=f"{gpus[0].memory_total_mib} MiB" if gpus and gpus[0].memory_total_mib else None,
        gpus=[
            GpuFingerprint(
                index=g.index,
                name=g.name,
                uuid_hash=hash_uuid(g.uuid),
                vbios_version=g.vbios_version,
                driver_version=g.driver_version,
                cuda_version=g.cuda_version,
                ecc_enabled=g.ecc_enabled,
                power_limit_w=g.power_limit_w,
                clocks_max_sm_mhz=g.clocks_max_sm_mhz,
                clocks_max_mem_mhz=g.clocks_max_mem_mhz,
                fabric_state=g.fabric_state,
                fabric_status=g.fabric_status,
            )
            for g in gpus
        ],
        topology=topo,
        packages={
            "driver": driver.split("-")[0] if driver else top.get("driver_version"),
            "fabricmanager": fabric.split("-")[0] if fabric else None,
            "container_toolkit": versions.get("nvidia-container-toolkit"),
            "dcgm": next((v for k, v in versions.items() if k.startswith("datacenter-gpu-manager")), None),
            "docker": versions.get("docker-ce") or versions.get("docker.io"),
        },
        docker=docker_info,
        serving={
            "image": image,
            "image_digest": image_digest,
            "sglang_version": server_info.get("version"),
            "speculative_algorithm": server_info.get("speculative_algorithm"),
            "moe_runner_backend": server_info.get("moe_runner_backend"),
        },
        model=model_record,
        recipe={
            "name": recipe.name,
            "path": recipe.path,
            "hash": "sha256:" + hashlib.sha256(recipe_text).hexdigest(),
            "rendered": rendered,
        },
        gpu_health=gpu_health,
        hgxkit={"version": __version__, "git_commit": controller_git_commit(), "python": platform.python_version()},
    )


def controller_git_commit() -> str | None:
    """The hgxkit checkout's commit on the controller (None outside a git checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False,
                             cwd=Path(__file__).resolve().parent)  # fmt: skip
    except OSError:
        return None
    commit = out.stdout.strip()
    return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None
