"""`hgxkit results …`: list, show and compare archived runs, or compare a run with the post's numbers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from hgxkit.errors import InputError
from hgxkit.recipe.loader import load_recipe
from hgxkit.results.archive import Run, list_runs, load_run
from hgxkit.results.compare import DEFAULT_SLO_P99_MS, DEFAULT_TIE, compare_reference, compare_runs
from hgxkit.results.fingerprint import fingerprint_differences
from hgxkit.results.report import comparison_markdown, reference_markdown, run_markdown

_RAW = argparse.RawDescriptionHelpFormatter


def register(groups: argparse._SubParsersAction) -> None:
    """Add the `results` command group."""
    parser = groups.add_parser(
        "results",
        help="list, show and compare archived benchmark runs",
        description="Runs are archived by the verify role under results/<host>/<UTC time>_<recipe>/ "
        "(fingerprint.json, raw/*.jsonl, summary.json, report.md).",
    )
    parser.add_argument("--root", default="results", help="the archive directory (default: ./results)")
    commands = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    commands.required = True
    ls = commands.add_parser(
        "ls",
        help="list runs, oldest first",
        formatter_class=_RAW,
        epilog="examples:\n  hgxkit results ls\n  hgxkit results ls --json",
    )
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(handler=_cmd_ls)
    show = commands.add_parser(
        "show",
        help="one run's cells and fingerprint",
        formatter_class=_RAW,
        epilog="example:\n  hgxkit results show node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin",
    )
    show.add_argument("run", help="a run directory, or its id from `results ls` (any unique part is enough)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=_cmd_show)
    compare = commands.add_parser(
        "compare",
        help="compare two runs (or a run with the recipe's reference numbers)",
        formatter_class=_RAW,
        description="Tables in the post's layout (TTFT mean/P90/P99 with the SLO column, accept length, "
        "output throughput), preceded by what differs between the two hosts and setups. A delta within "
        "the noise threshold (or not significant by a Mann-Whitney U test on per-request TTFTs) is a tie.",
        epilog="examples:\n  hgxkit results compare RUN_A RUN_B --md\n"
        "  hgxkit results compare RUN_A RUN_B --plot plots/\n  hgxkit results compare RUN --reference",
    )
    compare.add_argument("run_a")
    compare.add_argument("run_b", nargs="?")
    compare.add_argument("--reference", action="store_true", help="compare RUN_A with its recipe's reference")
    compare.add_argument("--recipe", help="recipe file holding the reference (default: recipes/<run's recipe>.yaml)")
    compare.add_argument("--md", action="store_true", help="print Markdown (for pasting into a post)")
    compare.add_argument("--plot", metavar="DIR", help="also write PNG plots into DIR")
    compare.add_argument("--tie", type=float, default=DEFAULT_TIE, help="noise threshold as a fraction (0.06)")
    compare.add_argument("--slo-p99-ms", type=float, default=DEFAULT_SLO_P99_MS, help="P99 TTFT SLO (5000)")
    compare.add_argument("--ttft-tolerance", type=float, default=0.25, help="--reference: relative TTFT tolerance")
    compare.add_argument("--accept-tolerance", type=float, default=0.3, help="--reference: accept-length tolerance")
    compare.set_defaults(handler=_cmd_compare)


def _print(markdown: str, as_markdown: bool) -> None:
    if as_markdown or not sys.stdout.isatty():
        print(markdown)
    else:
        Console().print(Markdown(markdown))


def _cmd_ls(args: argparse.Namespace) -> int:
    runs = list_runs(args.root)
    if args.json:
        print(json.dumps([run.ls_json() for run in runs], indent=2))
        return 0
    if not runs:
        print(f"no runs under {args.root}/ yet: `pyinfra -y inventories/sim.py deploys/dspark.py` makes one")
        return 0
    for run in runs:
        flag = "  SIMULATED" if run.summary.simulated else ""
        print(f"{run.run_id}  {run.summary.recipe}  {len(run.summary.cells)} cells{flag}")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    run = load_run(args.run, args.root)
    if args.json:
        print(json.dumps({"summary": run.summary.to_json(), "fingerprint": run.fingerprint.to_json()}, indent=2))
        return 0
    _print(run_markdown(run.summary, run.fingerprint), False)
    return 0


def _reference_recipe(run: Run, recipe_arg: str | None) -> str:
    if recipe_arg:
        return recipe_arg
    recorded = run.fingerprint.recipe.get("path")
    if recorded and Path(recorded).exists():
        return recorded
    return f"recipes/{run.summary.recipe}.yaml"


def _cmd_compare(args: argparse.Namespace) -> int:
    run_a = load_run(args.run_a, args.root)
    if args.reference:
        recipe = load_recipe(_reference_recipe(run_a, args.recipe))
        if recipe.reference is None:
            raise InputError(f"{recipe.path}: has no reference results to compare with")
        check = compare_reference(
            run_a.summary, recipe.reference, ttft_tolerance=args.ttft_tolerance, accept_tolerance=args.accept_tolerance
        )
        _print(reference_markdown(run_a.summary, check, f"{recipe.path}: {recipe.reference.tool}"), args.md)
        return 0
    if not args.run_b:
        raise InputError("compare needs RUN_B, or --reference to compare RUN_A with its recipe's reference")
    run_b = load_run(args.run_b, args.root)
    comparison = compare_runs(run_a.summary, run_b.summary, tie=args.tie, slo_p99_ms=args.slo_p99_ms)
    differences = fingerprint_differences(run_a.fingerprint, run_b.fingerprint)
    _print(comparison_markdown(comparison, differences), args.md)
    if args.plot:
        from hgxkit.results.plots import plot_comparison

        paths = plot_comparison(run_a.summary, run_b.summary, Path(args.plot), comparison.label_a, comparison.label_b)
        print("plots: " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return 0
