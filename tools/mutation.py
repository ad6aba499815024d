"""Mutation testing of the promise-carrying modules with mutmut, one module at a time, with a score per module.

Each module runs in its own scratch tree under build/mutation/<name>/ (a copy of hgxkit/, the tests and the
data they read, and a pyproject.toml whose [tool.mutmut] names that module and only its unit test files), so a
mutant runs only the tests that reach it and the run stays tractable on a two-core machine:

    make mutation                      # every module
    make mutation MODULES="secrets hostcmd"
    python tools/mutation.py --sample 7 hostlock # the mutants whose number ends in 7 (CI's sample)
    python tools/mutation.py --list    # the modules and their test files

Each mutant runs under limits, so a runaway one ends and counts as killed (the tests told it apart): memory
(RLIMIT_AS on every process of the run, `--memory-mb`: an allocation past it raises MemoryError in the test, and
the test fails) and time (mutmut's CPU limit and wall-clock deadline per mutant, from the tests' own duration:
(duration + TIMEOUT_CONSTANT_S) x TIMEOUT_MULTIPLIER; a process stopped by SIGXCPU or SIGKILL counts as killed
by a limit). A whole module's run is also cut at `--module-timeout-s`.

A surviving mutant that no test can kill (an equivalent mutant) is explained in one line in
tests/mutation/equivalent.txt as `<mutant name>  <why>`; the score counts it as accounted for, and the run
fails (exit 1) when any module has a mutant that is neither killed nor explained (a survivor, a mutant no
selected test reaches, or one whose outcome mutmut could not tell).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "tests/mutation/equivalent.txt"
# What the tests read besides hgxkit/ and tests/ (recipes, roles, the README's map…): linked into the scratch
# tree, and copied by mutmut into its mutants/ tree.
DATA = ["recipes", "roles", "deploys", "inventories", "README.md", "bench", "tools"]
# Limits per mutant: address space of each process (MiB), and mutmut's timeout from the tests' own duration.
MEMORY_MB = 4096
TIMEOUT_MULTIPLIER = 10.0
TIMEOUT_CONSTANT_S = 5.0
MODULE_TIMEOUT_S = 4 * 3600
PYTEST_ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-m", "not install")


SLURM_TESTS = (
    "sbatch_scripts_pass_bash_n_and_shellcheck",
    "an_sbatch_script_runs_one_task_per_node_with_rank_and_head_from_slurm",
    "the_sbatch_script_starts_both_groups_on_one_node_and_stops_them_with_the_job",
)


# The tests that judge one export writer: its secrets, its own format's checks, and the round trip of every test
# recipe through it (their ids: tests/unit/export/test_export.py's RECIPES and targets).
EXPORT_RECIPES = (
    "flashinfer",
    "lws-two-node",
    "marlin",
    "sglang-two-node",
    "vllm",
    "vllm-dp-two-node",
    "vllm-ray-two-node",
    "vllm-two-node",
)
# Shared by every writer: secrets, the API key's file, the digest a run pinned.
EXPORT_FILES = ("test_export_secrets.py", "test_export_key.py", "test_export_run_pin.py")
# Every target's: the bind address's key rule, data-parallel ranks, a Ray cluster's head and workers.
EXPORT_SHARED = (
    "binding_beyond_loopback_needs_a_key_the_kind_can_take",
    "data_parallel_workers_start_headless_at_their_first_rank_on_every_target",
    "on_a_ray_cluster_the_head_starts_ray_then_the_server_and_every_worker_joins_it",
    "data_parallelism_over_four_hosts_computes_each_workers_first_rank",
)
EXPORT_TESTS = {
    "compose": (
        ("compose", "compose.yaml"),
        (*EXPORT_FILES, "test_export_pd.py"),
        (
            "compose_files_pass_docker_compose_config",
            "a_compose_service_pins_its_gpus_binds_loopback_and_mounts_the_model_read_only",
            "compose_takes_secrets_and_the_head_from_the_environment_with_no_file_to_write",
            "compose_says_that_a_server_on_the_hosts_network_is_bound_by_its_own_flags",
            "an_env_file_the_recipe_reads_is_the_compose_services_env_file",
            "a_compose_service_is_what_docker_run_would_start",
        ),
    ),
    "kubernetes": (
        ("k8s", "kubernetes.yaml"),
        (
            *EXPORT_FILES,
            "test_export_pod_security.py",
            "test_export_kubernetes_resources.py",
            "test_export_kubernetes.py",
            "test_export_kubernetes_notes.py",
            "test_export_pd_kubernetes.py",
            # the split found at the export's own GPU count, a test of every target that writes a router
            "test_export_pd.py::test_an_export_finds_a_split_among_the_groups_it_exports_at_its_own_gpu_count",
        ),
        (
            "kubernetes_manifests_validate_against_the_real_schemas",
            "a_deployment_carries_gpus_model_shm_probes_and_provenance",
            "a_leaderworkerset_gives_the_leader_address_and_the_worker_index",
            "kubernetes_notation_expands_references_and_escapes_literal_dollars",
            "a_leaderworkersets_service_selects_its_leader_alone",
            "a_model_pvc_replaces_the_host_path",
            "the_validators_refuse_a_broken_manifest",
        ),
    ),
    "skypilot": (
        ("skypilot", "skypilot-*.yaml"),
        (*EXPORT_FILES, "test_export_skypilot.py"),
        ("skypilot_tasks_load_with_skypilots_own_parser",),
    ),
}


def _export_tests(target: str, tests: tuple[tuple[str, str], tuple[str, ...], tuple[str, ...]]) -> tuple[str, ...]:
    (name, pattern), files, own = tests
    unit = "tests/unit/export"
    return (
        *(f"{unit}/{file}" for file in files),
        *(f"{unit}/test_export.py::test_{test}" for test in (*own, *EXPORT_SHARED)),
        *(
            f"{unit}/test_export.py::test_an_export_imports_back_to_the_same_render[{key}-{name}-{pattern}]"
            for key in EXPORT_RECIPES
        ),
    )


@dataclass(frozen=True)
class Module:
    """One mutation target: the source files mutated, the unit test files that judge them, and the tests of those
    files that cannot judge a mutant (`deselect`, with the reason where the module is declared)."""

    name: str
    sources: tuple[str, ...]
    tests: tuple[str, ...]
    deselect: tuple[str, ...] = ()


MODULES = (
    Module(
        "secrets", ("hgxkit/secrets.py",), ("tests/unit/core/test_secrets.py", "tests/unit/results/test_results.py")
    ),
    # Not test_secrets.py: its timing test (scrubbing under 2 s) fails under mutmut's tracing on a busy machine.
    Module(
        "scrub-sites",
        ("hgxkit/results/archive.py",),
        tuple(f"tests/unit/results/test_results{name}.py" for name in ("", "_archive", "_known_secrets")),
    ),
    # test_hostile_recipes.py also reaches danger.py, through hypothesis and subprocesses: a minute per mutant.
    Module(
        "danger",
        ("hgxkit/recipe/danger.py",),
        (
            "tests/unit/recipe/test_danger.py",
            "tests/unit/recipe/test_hostile_argv.py",
            "tests/unit/recipe/test_mount_policy.py",
        ),
    ),
    Module(
        "exposure",
        ("hgxkit/serving/policy.py",),
        (
            "tests/unit/serving/test_serving_policy.py",
            "tests/unit/serving/test_serve_logic.py",
            "tests/unit/recipe/test_hostile_argv.py",
        ),
    ),
    Module(
        "hostcmd",
        ("hgxkit/hostcmd.py",),
        ("tests/unit/core/test_hostcmd.py", "tests/unit/project/test_source_rules.py"),
    ),
    # core.py is more than the hashing: the stamp, the Spec, the no-link file operations the sync does under
    # local_dir. The fetch, stamp, link-path and untrusted-directory tests are the ones that call them. Two stamp
    # tests copy core.py beside the node program and run the shell's check on it: under mutmut that copy is its
    # trampoline, which does not run alone, so they fail with no mutant applied.
    Module(
        "model-hash",
        ("hgxkit/model/core.py",),
        tuple(
            f"tests/unit/model/test_model_{name}.py"
            for name in ("core", "core_files", "stamp", "fetch", "link_path", "untrusted")
        ),
        deselect=tuple(
            f"tests/unit/model/test_model_stamp.py::test_{name}"
            for name in (
                "the_fact_answers_from_the_stamp_and_each_python_tier_writes_it",
                "a_dry_runs_check_leaves_the_stamp_as_it_is",
            )
        ),
    ),
    Module(
        "rollout",
        ("hgxkit/serving/rollout.py", "hgxkit/serving/replace.py"),
        (
            "tests/unit/serving/test_serving_replace.py",
            "tests/unit/serving/test_replace_poll.py",
            "tests/unit/serving/test_serve_plan.py",
            "tests/unit/serving/test_serve_dry.py",
            "tests/unit/serving/test_serve_logic.py",
            "tests/unit/serving/test_held_ports.py",
        ),
    ),
    Module(
        "results-stats",
        ("hgxkit/results/stats.py",),
        (
            "tests/unit/results/test_results_stats.py",
            "tests/unit/results/test_results_stats_exact.py",
            "tests/unit/results/test_results_doctests.py::test_docstring_examples[hgxkit.results.stats]",
        ),
    ),
    Module("hostfiles", ("hgxkit/hostfiles.py",), ("tests/unit/core/test_hostfiles.py",)),
    Module(
        "hostlock",
        ("hgxkit/hostlock.py",),
        (
            "tests/unit/core/test_hostlock.py",
            "tests/unit/core/test_hostlock_dry.py",
            "tests/unit/core/test_planfacts.py",
        ),
    ),
    # The Slurm writer against its secret, key, smoke-cell, script and pyxis-runtime tests, the shared ones every
    # target passes and its scripts' round trip through the importer (test_export.py's others run compose, k8s and
    # SkyPilot).
    Module(
        "export-slurm",
        ("hgxkit/export/slurm.py",),
        (
            *(
                f"tests/unit/export/{file}"
                for file in (
                    *EXPORT_FILES,
                    "test_export_slurm_smoke.py",
                    "test_export_slurm_script.py",
                    "test_export_slurm_pyxis.py",
                    "test_export_pd.py",
                )
            ),
            *(f"tests/unit/export/test_export.py::test_{name}" for name in (*SLURM_TESTS, *EXPORT_SHARED)),
            *(
                f"tests/unit/export/test_export.py::test_an_export_imports_back_to_the_same_render[{key}-slurm-*.sbatch]"
                for key in EXPORT_RECIPES
            ),
            "tests/unit/export/test_export.py::test_every_export_names_the_image_the_model_and_the_run",
            "tests/unit/export/test_export.py::test_docstring_examples[slurm]",
        ),
    ),
    Module(
        "bundle-manifest",
        ("hgxkit/bundle/manifest.py",),
        ("tests/unit/bundle/test_bundle_manifest.py", "tests/unit/bundle/test_bundle_tree.py"),
    ),
    # The alert rules as Prometheus reads them: `promtool check rules` and `promtool test rules` on each alert.
    Module(
        "alert-rules",
        ("hgxkit/monitoring/alerts.py",),
        ("tests/unit/monitoring/test_monitoring_rules.py", "tests/unit/monitoring/test_monitoring_config.py"),
    ),
    # A split's router in every target that writes one: its exposure and key refusals, its workers' addresses.
    Module(
        "export-pd-router",
        ("hgxkit/export/pd_router.py",),
        (
            "tests/unit/export/test_export_pd.py",
            "tests/unit/export/test_export_pd_kubernetes.py",
            "tests/unit/verify/test_verify_pd.py",
        ),
    ),
    *(
        Module(f"export-{target}", (f"hgxkit/export/{target}.py",), _export_tests(target, tests))
        for target, tests in EXPORT_TESTS.items()
    ),
)


def equivalents(path: Path = EQUIVALENT) -> dict[str, str]:
    """The explained equivalent mutants: mutant name -> one-line reason (blank lines and `#` comments skipped)."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, why = line.partition(" ")
        if not why.strip():
            raise SystemExit(f"{path}:{number}: {name} has no reason; write `<mutant>  <why it is equivalent>`")
        out[name] = why.strip()
    return out


@dataclass(frozen=True)
class Score:
    """One module's mutants by outcome. A mutant that made its tests run past a limit (time or memory) or crash
    was detected, so it counts as killed; `explained` are survivors listed as equivalent; `untested` are mutants
    no selected test reaches; `other` are outcomes mutmut could not tell (not checked, an unknown exit)."""

    name: str
    killed: int
    timeouts: int
    survived: tuple[str, ...]
    explained: tuple[str, ...]
    untested: tuple[str, ...]
    other: dict[str, int]

    @property
    def total(self) -> int:
        return self.killed + len(self.survived) + len(self.explained) + len(self.untested) + sum(self.other.values())

    def line(self) -> str:
        """The printed score: killed plus explained over all mutants."""
        pct = 100.0 * (self.killed + len(self.explained)) / self.total if self.total else 100.0
        rest = "".join(f", {n} {status}" for status, n in sorted(self.other.items()))
        timeouts = f" ({self.timeouts} by timeout)" if self.timeouts else ""
        counts = f"{len(self.explained)} equivalent, {len(self.survived)} survived, {len(self.untested)} untested"
        return (
            f"mutation score {self.name}: {pct:.1f}% ({self.killed} killed{timeouts}, {counts}{rest} of {self.total})"
        )

    @property
    def accounted(self) -> bool:
        """Every mutant killed or explained as equivalent."""
        return not (self.survived or self.untested or self.other)


# mutmut's timeouts (SIGXCPU: its wall-clock deadline or the CPU soft limit; 36, 255) and SIGKILL (the CPU hard
# limit, or the kernel's OOM killer when a mutant outgrows memory before RLIMIT_AS stops it).
TIMEOUT_CODES = {36, 24, -24, 152, 255, -9, 137}
# The tests crashed under the mutant (abort, segfault): told apart from the original.
CRASH_CODES = {-6, -11, 134, 139}


def sample_pattern(digit: int) -> str:
    """The mutants whose number ends in `digit` (a tenth of each module), as mutmut's name pattern."""
    return f"*__mutmut_*{digit}"


def score(name: str, meta_files: list[Path], explained: dict[str, str], only: str = "*") -> Score:
    """Tally mutmut's per-file results (mutants/<file>.meta: exit code by mutant), of the mutants `only` names."""
    killed, timeouts, survived, equivalent, untested, other = 0, 0, [], [], [], {}
    for meta in meta_files:
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for mutant, code in sorted(codes.items()):
            if not fnmatch.fnmatch(mutant, only):
                continue
            if code in (1, 3) or code in TIMEOUT_CODES or code in CRASH_CODES:
                killed += 1
                timeouts += code in TIMEOUT_CODES
            elif code == 0:
                (equivalent if mutant in explained else survived).append(mutant)
            elif code in (5, 33):
                (equivalent if mutant in explained else untested).append(mutant)
            else:
                status = "not checked" if code is None else f"exit {code}"
                other[status] = other.get(status, 0) + 1
    return Score(name, killed, timeouts, tuple(survived), tuple(equivalent), tuple(untested), other)


def prepare(module: Module, work: Path) -> None:
    """A fresh scratch tree for `module`: hgxkit/ and tests/ copied, the data linked, its [tool.mutmut] written."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copytree(ROOT / "hgxkit", work / "hgxkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__", "e2e"))
    for name in DATA:
        if (ROOT / name).exists():
            (work / name).symlink_to(ROOT / name)
    tests = [t for t in module.tests if (ROOT / t.split("::")[0]).exists()]  # a file, or a test in one
    deselect = [word for test in module.deselect for word in ("--deselect", test)]
    config = (ROOT / "pyproject.toml").read_text()
    config += (
        "\n[tool.mutmut]\n"
        'source_paths = ["hgxkit"]\n'
        f"only_mutate = {json.dumps(list(module.sources))}\n"
        f"also_copy = {json.dumps([d for d in DATA if (ROOT / d).exists()])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
        f"pytest_add_cli_args = {json.dumps([*PYTEST_ARGS, *deselect])}\n"
        "use_git_change_detection = false\n"
        f"timeout_multiplier = {TIMEOUT_MULTIPLIER}\n"
        f"timeout_constant = {TIMEOUT_CONSTANT_S}\n"
    )
    (work / "pyproject.toml").write_text(config)


def _start_time(pid: int) -> str | None:
    """The kernel's start time of process `pid` (field 22 of /proc/PID/stat): with the pid, it names one process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def guard_mutmut_timeouts() -> None:
    """Make mutmut's wall-clock timeouts signal only the worker they were set for.

    mutmut 3.8 sends SIGXCPU to a worker's pid when its deadline passes, also long after the worker exited, and
    pids are reused: on a busy machine (pid_max 32768, thousands of forks) that killed an unrelated pytest run.
    Here each deadline remembers the worker's start time and signals the pid only while it is that process.
    """
    import heapq
    import threading
    import time

    from mutmut.workers import isolation, timeout

    heap: list[tuple[float, int, str]] = []
    ready = threading.Condition()

    def checker() -> None:
        with ready:
            while True:
                while not heap:
                    ready.wait()
                now = time.time()
                while heap and heap[0][0] <= now:
                    _, pid, started = heapq.heappop(heap)
                    if _start_time(pid) == started:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGXCPU)
                if heap:
                    ready.wait(timeout=max(0.0, heap[0][0] - now))

    threading.Thread(target=checker, name="mutation-timeouts", daemon=True).start()

    def register_timeout(pid: int, timeout_s: float) -> None:
        started = _start_time(pid)
        if started is None:  # gone already: nothing to time out
            return
        with ready:
            heapq.heappush(heap, (time.time() + timeout_s, pid, started))
            ready.notify()

    timeout.register_timeout = register_timeout
    isolation.register_timeout = register_timeout  # imported by name there


def memory_limit(megabytes: int) -> Callable[[], None]:
    """A preexec_fn capping the address space of the process and of everything it forks at `megabytes` MiB."""

    def limit() -> None:
        size = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return limit


def run(
    module: Module,
    work: Path,
    children: int,
    memory_mb: int = MEMORY_MB,
    limit_s: float = MODULE_TIMEOUT_S,
    only: str | None = None,
) -> int:
    """mutmut run in the scratch tree (without the caller's PYTHONPATH: mutmut puts its mutants/ first), through
    this script's `--mutmut` entry so that its timeouts are guarded (`guard_mutmut_timeouts`), with every process
    under `memory_mb` of address space and the whole run cut at `limit_s` (exit 124 then)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    log = work / "mutmut.log"
    argv = [sys.executable, str(Path(__file__).resolve()), "--mutmut", "run", "--max-children", str(children)]
    argv += [only] if only else []  # the mutants of a sample (mutmut's name pattern)
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv,
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=memory_limit(memory_mb),
            start_new_session=True,  # its own process group: a run cut short takes its fork server and workers along
        )
        try:
            return proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 124


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--mutmut"]:  # run() starts mutmut this way, in the module's scratch tree
        guard_mutmut_timeouts()
        from mutmut.__main__ import cli

        sys.argv = ["mutmut", *argv[1:]]
        return cli()  # type: ignore[no-any-return]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="module names (default: all); --list shows them")
    parser.add_argument("--list", action="store_true", help="print the modules, their sources and tests")
    parser.add_argument("--children", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--score-only", action="store_true", help="reprint the scores of the last run")
    parser.add_argument("--work", type=Path, default=ROOT / "build/mutation")
    parser.add_argument(
        "--memory-mb", type=int, default=MEMORY_MB, help=f"address space per process (MiB, {MEMORY_MB})"
    )
    parser.add_argument(
        "--module-timeout-s", type=float, default=MODULE_TIMEOUT_S, help="the longest one module's run may take"
    )
    parser.add_argument(
        "--sample",
        type=int,
        choices=range(10),
        metavar="DIGIT",
        help="only the mutants whose number ends in DIGIT (a tenth of each module; CI's sample)",
    )
    args = parser.parse_args(argv)
    if args.list:
        for m in MODULES:
            skipped = f" (deselected: {' '.join(m.deselect)})" if m.deselect else ""
            print(f"{m.name}: {' '.join(m.sources)} <- {' '.join(m.tests)}{skipped}")
        return 0
    by_name = {m.name: m for m in MODULES}
    unknown = [n for n in args.modules if n not in by_name]
    if unknown:
        print(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(by_name)}", file=sys.stderr)
        return 2
    explained = equivalents()
    only = sample_pattern(args.sample) if args.sample is not None else None
    failed = False
    for module in [by_name[n] for n in args.modules] or list(MODULES):
        work = args.work / module.name
        if not args.score_only:
            prepare(module, work)
            code = run(module, work, args.children, args.memory_mb, args.module_timeout_s, only)
            if code != 0:
                print(f"{module.name}: mutmut run failed (exit {code}); see {work / 'mutmut.log'}")
                failed = True
                continue
        metas = [work / "mutants" / (s + ".meta") for s in module.sources]
        missing = [m for m in metas if not m.exists()]
        if missing:
            print(f"{module.name}: no results at {missing[0]}; run without --score-only")
            failed = True
            continue
        result = score(module.name, metas, explained, only or "*")
        print(result.line(), flush=True)
        for mutant in result.survived + result.untested:
            print(f"    {'survived' if mutant in result.survived else 'untested'}: {mutant}")
        failed = failed or not result.accounted
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
