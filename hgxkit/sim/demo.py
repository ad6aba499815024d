"""`make demo` (`hgxkit sim demo`): one simulated node -> the seed post's setup served, benchmarked, and the answer.

The phases, each timed:

    benchmark client   SGLang's real benchmark client in the host's store, once per host (`hgxkit sim client
                       install --client sglang`), side by side with the image build
    image build        the node image, the simulated apt repositories and the Hub store, and beside them the
                       SGLang stand-in's image
    node start         `hgxkit sim up --nodes 1 --memory-gib 3072` until systemd booted and SSH answers
    pyinfra plan       `pyinfra -y inventories/sim.py deploys/dspark.py` connects, reads facts, plans (and preflight)
    bring-up           driver + fabric manager (with the reboot), Docker, container toolkit, GPU health
    model              the model download through the Hub stand-in
    serve              the post's two `docker run`s (and the router, when the recipe has one)
    verify             the smoke benchmark with SGLang's client, the fingerprint and the archive

The first three are this module's own calls into hgxkit.sim. The last five are ONE pyinfra run, the README's
command, unchanged: its phases are timed by reading its output as it streams (`--> Starting operation: <role's
@deploy name> | …`, each line stamped on arrival), not by running the deploy in pieces, which would connect and
gather facts once per piece and measure something other than what a user runs. Preflight only reads facts, so
it falls in "pyinfra plan". The whole output goes to a log file; on failure its last lines are printed.

At the end: the run's cells next to the post's numbers (`hgxkit results compare RUN --reference`, the measured
cells), the archive, its `report.html`, how long each phase took, and the command that removes the node.

Example:
    >>> clock = PhaseClock(0.0)
    >>> clock.feed(4.0, "--> Starting operation: hgxkit preflight | Check the OS")
    'bring-up'
    >>> clock.feed(30.0, "--> Starting operation: hgxkit model | Sync the model")
    'model'
    >>> clock.finish(41.0); clock.spent
    {'pyinfra plan': 4.0, 'bring-up': 26.0, 'model': 11.0}
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hgxkit.errors import HgxkitError

ROOT = Path(__file__).resolve().parents[2]  # the checkout: inventories/, deploys/, recipes/
PHASES = (
    "benchmark client",
    "image build",
    "node start",
    "pyinfra plan",
    "bring-up",
    "model",
    "serve",
    "verify",
)
DEMO_CLIENTS = ("sglang",)  # the benchmark clients the seed post's recipe needs
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
OPERATION = re.compile(r"^--> Starting (?:[\w ,]+ )?operation: (?P<names>.+)$")
ARCHIVED = re.compile(r"run archived in (?P<path>\S+) \(hgxkit results show (?P<id>\S+)\)")
Say = Callable[[str], None]


def phase_of(names: str) -> str | None:
    """The demo phase of an operation, from the name of the role (@deploy) it belongs to; None outside any role.

    pyinfra names an operation `<included file> | … | <role's @deploy name> | <operation>`:

    >>> phase_of("deploys/reproduce.py | deploys/bringup.py | hgxkit GPU health | Gate: GPU health")
    'bring-up'
    >>> phase_of("deploys/reproduce.py | hgxkit model | Verified /data/models/x"), phase_of("hgxkit verify | Verify x")
    ('model', 'verify')
    """
    parts = [part.strip() for part in names.split(" | ")][:-1]  # the operation's own name could say "model"
    roles = [part.lower() for part in parts if not part.endswith(".py")]
    if not roles:
        return None
    role = roles[-1]
    for word, phase in (("verify", "verify"), ("serving", "serve"), ("router", "serve"), ("model", "model")):
        if word in role:
            return phase
    return "bring-up"  # preflight, NVIDIA driver + fabric manager, Docker engine, container toolkit, GPU health


@dataclass
class PhaseClock:
    """Seconds spent in each phase of a pyinfra run, from its output lines and the times they arrived."""

    since: float  # when the current phase began
    current: str = "pyinfra plan"  # "" once the run's results table was printed
    spent: dict[str, float] = field(default_factory=dict)

    def feed(self, when: float, line: str) -> str | None:
        """Account one output line; return the phase it starts, if it starts one."""
        text = ANSI.sub("", line).strip()
        if text.startswith("--> Results:"):
            self.finish(when)
            return None
        match = OPERATION.match(text)
        phase = phase_of(match.group("names")) if match else None
        if not phase or not self.current or phase == self.current:
            return None
        self.finish(when)
        self.current = phase
        return self.current

    def finish(self, when: float) -> None:
        """End the current phase at `when`."""
        if self.current:
            self.spent[self.current] = round(self.spent.get(self.current, 0.0) + when - self.since, 1)
        self.current, self.since = "", when


@dataclass(frozen=True)
class DemoOptions:
    cluster: str = "demo"
    memory_gib: int = 3072
    results: str = "results"
    verbose: bool = False


def _shown(path: Path) -> str:
    """`path` relative to the current directory when it is under it (what a user types)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _command(name: str) -> str:
    """How to run this environment's `name` script (hgxkit, pyinfra): its path, relative when under the cwd."""
    script = Path(sys.executable).parent / name
    return _shown(script) if script.exists() else name


def _pyinfra_argv(cluster: str, results: Path) -> list[str]:
    script = Path(sys.executable).parent / "pyinfra"
    exe = str(script) if script.exists() else "pyinfra"
    return [exe, "-y", "inventories/sim.py", "deploys/dspark.py", "--data", f"results_dir={results}"]


def deploy(cluster: str, results: Path, log_path: Path, say: Say, verbose: bool) -> tuple[PhaseClock, str]:
    """Run the README's deploy on the demo cluster, streaming its output into `log_path`; return the phase clock
    and the whole output. HgxkitError (with the output's tail) when pyinfra fails."""
    if not (ROOT / "inventories" / "sim.py").is_file():
        raise HgxkitError(f"{ROOT} is not an hgxkit checkout (no inventories/sim.py): run the demo from a clone")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # this environment's hgxkit first
    env = {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off", "PYTHONUNBUFFERED": "1"}
    env["PATH"] = path
    argv = _pyinfra_argv(cluster, results)
    started = time.monotonic()
    clock = PhaseClock(started)
    lines: list[str] = []
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with (
        log_path.open("w") as log,
        subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        ) as proc,
    ):
        assert proc.stdout is not None
        say(f"demo: {' '.join(['pyinfra', *argv[1:4]])}  (output in {_shown(log_path)})")
        for raw in proc.stdout:
            now = time.monotonic()
            log.write(raw)
            lines.append(ANSI.sub("", raw.rstrip("\n")))
            if verbose:
                say(raw.rstrip("\n"))
            phase = clock.feed(now, raw)
            if phase:
                say(f"demo: [{_clock(now - started)}] {phase}")
        code = proc.wait()
    clock.finish(time.monotonic())
    if code != 0:
        tail = "\n".join(line for line in lines[-30:] if line.strip())
        raise HgxkitError(f"pyinfra failed (exit {code}); its last lines:\n{tail}\nwhole output: {_shown(log_path)}")
    return clock, "\n".join(lines)


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def find_run(output: str, results: Path, since: float):  # -> hgxkit.results.run.Run
    """The run the deploy archived: from its `run archived in …` line, else the newest run made since `since`."""
    from hgxkit.results.archive import load_run, scan_runs

    archived = ARCHIVED.findall(output)
    if archived:
        return load_run(archived[-1][0], results)
    runs, _ = scan_runs(results)
    fresh = [r for r in runs if r.path.stat().st_mtime >= since]
    if not fresh:
        raise HgxkitError(f"the deploy succeeded but archived no run under {results}/: see the log")
    return fresh[-1]


def reference_table(run) -> tuple[str, object | None]:  # run: hgxkit.results.run.Run
    """The run's measured cells next to the recipe's reference numbers (Markdown), and the recipe's reference."""
    from hgxkit.recipe.read import load_recipe
    from hgxkit.results.compare import compare_reference
    from hgxkit.results.report import reference_markdown

    recorded = run.fingerprint.recipe.get("path")
    candidates = [Path(recorded), ROOT / recorded] if recorded else []  # relative to pyinfra's directory, ROOT
    candidates.append(ROOT / "recipes" / f"{run.summary.recipe}.yaml")
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        return f"(no recipe file for {run.summary.recipe}, so no reference to compare with)", None
    recipe = load_recipe(path)
    if recipe.reference is None:
        return f"({_shown(path)} has no reference results)", None
    check = compare_reference(run.summary, recipe.reference)
    measured = dataclasses.replace(check, rows=[row for row in check.rows if row[4] is not None])
    return reference_markdown(run.summary, measured, f"{_shown(path)}: {recipe.reference.tool}"), recipe.reference


def client_store_ready(say: Say) -> object:
    """SGLang's client in the store (the seed post's server; minutes, once per host) unless it is there; an install
    under way (`make demo` starts one while it makes the venv) is waited for. vLLM's client is left to `hgxkit sim
    client install`, which a vLLM recipe's verify names."""
    from hgxkit.sim.standin import client_store

    return client_store.ensure_installed(log=lambda line: say(f"demo: {line}"), clients=DEMO_CLIENTS)


def side_by_side(steps: dict[str, Callable[[], object]], say: Say, begun: float) -> dict[str, float]:
    """Run `steps` at once (they wait on different things: pip on PyPI and the disk, mmdebstrap on the Debian
    archive, docker build on the daemon) and return each one's seconds; the first failure is raised after all
    have ended, so none is left half-done behind the error."""

    def timed(phase: str, step: Callable[[], object]) -> float:
        start = time.monotonic()
        step()
        say(f"demo: [{_clock(time.monotonic() - begun)}] {phase} done")
        return round(time.monotonic() - start, 1)

    say(f"demo: [{_clock(time.monotonic() - begun)}] {' and '.join(steps)}, side by side")
    with ThreadPoolExecutor(max_workers=len(steps)) as pool:
        futures = {phase: pool.submit(timed, phase, step) for phase, step in steps.items()}
    return {phase: future.result() for phase, future in futures.items()}


def _print_markdown(text: str, say: Say) -> None:
    if sys.stdout.isatty() and say is print:
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(text))
    else:
        say(text)


def closing_lines(spent: dict[str, float], total: float, run, report: Path, cluster: str) -> list[str]:
    """The demo's last lines: what it was, how long each phase took, where the run and its report are, and how
    to remove the node. A pyinfra phase without operations (nothing to change: decided while planning) is 0 s."""
    lines = []
    if run.summary.simulated:
        lines.append("SIMULATED: no real GPU was used; the numbers show the machinery works, not what an H200 does.")
    took = [f"{phase} {spent.get(phase, 0.0):.0f} s" for phase in PHASES]
    phases = ", ".join([f"{took[0]} and {took[1]} (side by side)", *took[2:]])
    hgxkit = _command("hgxkit")
    lines += [
        f"phases:  {phases}; total {total:.0f} s",
        f"run:     {run.run_id}  (archived in {_shown(run.path)}/; `{hgxkit} results show {run.run_id}`)",
        f"report:  {_shown(report)}",
        f"remove the node:  {hgxkit} sim down --cluster {cluster}",
    ]
    return lines


def run(options: DemoOptions, say: Say = print) -> int:
    """The whole demo (see the module doc); 0 when the run was archived and its answer printed."""
    from hgxkit.sim import aptrepo, hubrepos, image, nodes
    from hgxkit.sim.paths import state_dir
    from hgxkit.sim.standin import node as serving_node

    spent: dict[str, float] = {}
    begun = time.monotonic()

    def timed(phase: str, step: Callable[[], object]) -> object:
        say(f"demo: [{_clock(time.monotonic() - begun)}] {phase}")
        start = time.monotonic()
        result = step()
        spent[phase] = round(time.monotonic() - start, 1)
        return result

    client = nodes.client()

    def node_side() -> None:
        image.ensure_node_image(client)
        aptrepo.build_repo(state_dir() / "repos")
        hubrepos.build_hub_store(state_dir() / "hub")

    def build() -> None:
        # The node image and the SGLang stand-in's are two mmdebstrap bases that share nothing: built at once,
        # each on a Docker client of its own; a failure is raised once both have ended.
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(node_side), pool.submit(serving_node.prepare, nodes.client())]
        for future in futures:
            future.result()

    spent.update(side_by_side({"benchmark client": lambda: client_store_ready(say), "image build": build}, say, begun))
    timed("node start", lambda: nodes.up(1, memory_gib=options.memory_gib, cluster=options.cluster))
    results = Path(options.results).resolve()
    log_path = state_dir() / "demo" / f"{options.cluster}-deploy.log"
    deploy_start = time.time()
    clock, output = deploy(options.cluster, results, log_path, say, options.verbose)
    spent.update(clock.spent)
    run_ = find_run(output, results, deploy_start - 1)
    from hgxkit.results.archive import write_report_html

    table, reference = reference_table(run_)
    report = write_report_html(run_.path, reference=reference)
    total = time.monotonic() - begun

    say("")
    _print_markdown(table, say)
    say("")
    for line in closing_lines(spent, total, run_, report, options.cluster):
        say(line)
    return 0
