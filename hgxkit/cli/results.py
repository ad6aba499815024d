"""`hgxkit results …`: list, show, compare and report archived runs, or compare a run with the post's numbers.

Every `--json` output carries a `schema_version` and follows a JSON Schema in `hgxkit/results/schemas/`
(`ls`, `show`, `compare`); `hgxkit results schema NAME` prints one. `--root` goes before or after the sub-command.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

from hgxkit.cli.args import json_option, share_group_options
from hgxkit.cli.results_reference import register_import_reference
from hgxkit.errors import InputError
from hgxkit.results.archive import RECIPE_FILE, load_run, scan_runs
from hgxkit.results.compare import DEFAULT_SLO_P99_MS, FAIL_ON, compare_reference, compare_runs, run_flags
from hgxkit.results.fingerprint import fingerprint_differences, member_differences
from hgxkit.results.goodput import parse_slos
from hgxkit.results.report import comparison_markdown, reference_markdown, run_markdown
from hgxkit.results.run import Run
from hgxkit.results.schemas import SCHEMA_NAMES, load_schema

LS_SCHEMA_VERSION = 1
SHOW_SCHEMA_VERSION = 1

_RAW = argparse.RawDescriptionHelpFormatter


def register(groups: argparse._SubParsersAction) -> None:
    """Add the `results` command group."""
    parser = groups.add_parser(
        "results",
        help="list, show and compare archived benchmark runs",
        description="Runs are archived by the verify role under results/<host>/<UTC time>_<recipe>/ "
        "(fingerprint.json, raw/*, telemetry/*, summary.json, report.md, report.html).",
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
    json_option(ls, lambda: load_schema("ls"), "the runs")
    ls.set_defaults(handler=_cmd_ls)
    show = commands.add_parser(
        "show",
        help="one run's cells and fingerprint",
        formatter_class=_RAW,
        epilog="example:\n  hgxkit results show node1/20261130T120000Z_deepseek-v4-flash-dspark-marlin",
    )
    show.add_argument("run", help="a run directory, or its id from `results ls` (any unique part is enough)")
    json_option(show, lambda: load_schema("show"), "the run's summary and fingerprint")
    show.set_defaults(handler=_cmd_show)
    _register_compare(commands)
    register_import_reference(commands)
    report = commands.add_parser(
        "report",
        help="write one self-contained HTML page for runs, or the index of every run",
        formatter_class=_RAW,
        description="One HTML file that needs no network to view: the hosts and setup, the post's tables, plots "
        "(TTFT, accept length, throughput, latency vs throughput when concurrency is swept), every metric with "
        "95% intervals, telemetry per cell, the comparison with the recipe's reference (one run) or between "
        "the runs (several), and what differs between the hosts. --index lists every archived run with links.",
        epilog="examples:\n  hgxkit results report RUN -o report.html\n  hgxkit results report RUN_A RUN_B -o ab.html\n"
        "  hgxkit results report --index -o results/index.html",
    )
    report.add_argument("runs", nargs="*", metavar="RUN", help="runs to report on (ids or directories)")
    report.add_argument("--index", action="store_true", help="the index page of every archived run")
    report.add_argument("-o", "--output", metavar="FILE.html", help="where to write (default: stdout)")
    report.add_argument("--recipe", help="recipe file holding the reference (default: recipes/<run's recipe>.yaml)")
    report.add_argument("--slo-p99-ms", type=float, default=DEFAULT_SLO_P99_MS, help="P99 TTFT SLO (5000)")
    report.set_defaults(handler=_cmd_report)
    schema = commands.add_parser("schema", help="print the JSON Schema of an output or archive file")
    schema.add_argument("name", choices=SCHEMA_NAMES, help="which schema: " + ", ".join(SCHEMA_NAMES))
    schema.set_defaults(handler=lambda args: print(json.dumps(load_schema(args.name), indent=2)) or 0)
    share_group_options(parser, commands)


def _register_compare(commands: argparse._SubParsersAction) -> None:
    """Add `results compare`: two runs, or a run and its recipe's reference."""
    compare = commands.add_parser(
        "compare",
        help="compare two runs (or a run with the recipe's reference numbers)",
        formatter_class=_RAW,
        description="Tables in the post's layout (TTFT mean/P90/P99 with the SLO column, TPOT, accept length, "
        "output throughput) with 95% intervals, preceded by what differs between the two hosts and setups. "
        "The repeat is the unit: a difference is real when the 95% interval of B - A excludes 0 (alpha 0.05); "
        "throughput and accept length by Welch t over the repeats, TTFT/TPOT by a hierarchical bootstrap "
        "(repeats, then requests) of the row's own statistic; P90/P99 also need both quantiles bounded by "
        "their order statistics. Too few repeats or requests say 'too small to judge'.",
        epilog="examples:\n  hgxkit results compare RUN_A RUN_B --md\n"
        "  hgxkit results compare RUN_A RUN_B --plot plots/\n  hgxkit results compare RUN --reference\n"
        "  hgxkit results compare RUN --reference --fail-on outside   # exit 1 when the post is not met (CI)\n"
        "  hgxkit results compare RUN_A RUN_B --slo ttft_p99<=2000,tpot_p99<=50   # goodput per cell\n"
        "  hgxkit results import-reference profile_export_aiperf.json --recipe R.yaml --in-place   # then --reference",
    )
    compare.add_argument("run_a", help="the first run: a run directory or any unique part of its id")
    compare.add_argument("run_b", nargs="?", help="the second run (omit with --reference)")
    compare.add_argument("--reference", action="store_true", help="compare RUN_A with its recipe's reference")
    compare.add_argument("--recipe", help="recipe file holding the reference (default: recipes/<run's recipe>.yaml)")
    compare.add_argument("--md", action="store_true", help="print Markdown (for pasting into a post)")
    json_option(compare, lambda: load_schema("compare"), "the comparison (`hgxkit results schema compare`)")
    compare.add_argument("--plot", metavar="DIR", help="also write PNG plots into DIR")
    compare.add_argument("--slo-p99-ms", type=float, default=DEFAULT_SLO_P99_MS, help="P99 TTFT SLO (5000)")
    compare.add_argument(
        "--slo",
        type=_slo_terms,
        metavar="TERMS",
        help="goodput per cell under latency SLOs in ms, as SGLang's/vLLM's --goodput: a request is good when it "
        "meets every term (e.g. ttft_p99<=2000,tpot_p99<=50; a _pNN term is also checked on the cell's quantile)",
    )
    compare.add_argument("--ttft-tolerance", type=float, default=0.25, help="--reference: relative TTFT tolerance")
    compare.add_argument("--accept-tolerance", type=float, default=0.3, help="--reference: accept-length tolerance")
    compare.add_argument("--tpot-tolerance", type=float, default=0.25, help="--reference: relative TPOT tolerance")
    compare.add_argument(
        "--throughput-tolerance", type=float, default=0.25, help="--reference: relative output-throughput tolerance"
    )
    compare.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        metavar="WHEN",
        help="exit 1 when the answer holds (for CI): outside = a --reference metric outside its tolerance; "
        "regression = RUN_B really worse than RUN_A (or, with --reference, outside and worse than the post); "
        "any = any real difference (or, with --reference, outside or not measured)",
    )
    compare.set_defaults(handler=_cmd_compare)


def _slo_terms(text: str) -> list:
    """argparse type of --slo: a bad term is a usage error (exit 2) naming the term."""
    try:
        return parse_slos(text)
    except InputError as err:
        raise argparse.ArgumentTypeError(err.message.removeprefix("--slo: ")) from None


def _print(markdown: str, as_markdown: bool) -> None:
    if as_markdown or not sys.stdout.isatty():
        print(markdown)
    else:
        Console().print(Markdown(markdown))


def _cmd_ls(args: argparse.Namespace) -> int:
    runs, skipped = scan_runs(args.root)
    if args.json:
        document = {
            "schema_version": LS_SCHEMA_VERSION,
            "root": str(args.root),
            "runs": [run.ls_json() for run in runs],
            "skipped": [{"path": path, "reason": reason} for path, reason in skipped],
        }
        print(json.dumps(document, indent=2))
        return 0
    for _, reason in skipped:
        print(f"warning: skipped {reason}", file=sys.stderr)
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
        document = {
            "schema_version": SHOW_SCHEMA_VERSION,
            "id": run.run_id,
            "path": str(run.path),
            "summary": run.summary.to_json(),
            "fingerprint": run.fingerprint.to_json(),
            "mlperf_system_desc": run.fingerprint.mlperf_system_desc(),
            "flags": run_flags(run.summary, run.run_id),
        }
        if run.members:
            document["members"] = {name: fp.to_json() for name, fp in run.members.items()}
        print(json.dumps(document, indent=2))
        return 0
    _print(run_markdown(run.summary, run.fingerprint, members=run.members), False)
    return 0


def recipe_differences(run_a: Run, run_b: Run) -> list[str]:
    """The settings that differ between the recipes two runs archived (`recipe.yaml`), one line each, as
    `hgxkit recipe diff` says them (e.g. `server --tp: 8 -> (absent)`); none when either run has no recipe."""
    from hgxkit.recipe.diff import diff_recipes
    from hgxkit.recipe.read import parse_recipe_text

    files = [run.path / RECIPE_FILE for run in (run_a, run_b)]
    if not all(f.is_file() for f in files):
        return []
    a, b = (parse_recipe_text(f.read_text(), source=str(f)) for f in files)
    return [f"recipe {d.line()}" for d in diff_recipes(a, b)]


def _reference_recipe(run: Run, recipe_arg: str | None) -> str:
    if recipe_arg:
        return recipe_arg
    if (run.path / RECIPE_FILE).is_file():  # the recipe as it ran, archived with the run
        return str(run.path / RECIPE_FILE)
    recorded = run.fingerprint.recipe.get("path")
    if recorded and Path(recorded).exists():
        return recorded
    return f"recipes/{run.summary.recipe}.yaml"


def _load_reference(run: Run, recipe_arg: str | None) -> tuple[object | None, str]:
    """The recipe's reference numbers for a run, and where they came from (or why there are none)."""
    from hgxkit.recipe.read import load_recipe  # the recipe package is only needed for references

    path = _reference_recipe(run, recipe_arg)
    if not recipe_arg and not Path(path).exists():
        return None, f"{path}: no such recipe file (give --recipe)"
    recipe = load_recipe(path)
    if recipe.reference is None:
        return None, f"{recipe.path}: has no reference results"
    label = f" ({recipe.reference.label})" if recipe.reference.label else ""
    return recipe.reference, f"{recipe.path}: {recipe.reference.tool}{label}"


def _cmd_compare(args: argparse.Namespace) -> int:
    run_a = load_run(args.run_a, args.root)
    if args.reference:
        reference, source = _load_reference(run_a, args.recipe)
        if reference is None:
            raise InputError(f"{source}; nothing to compare with")
        check = compare_reference(
            run_a.summary,
            reference,
            ttft_tolerance=args.ttft_tolerance,
            accept_tolerance=args.accept_tolerance,
            tpot_tolerance=args.tpot_tolerance,
            throughput_tolerance=args.throughput_tolerance,
        )
        if args.json:
            print(json.dumps(check.to_json(run_a.run_id, source), indent=2))
        else:
            _print(reference_markdown(run_a.summary, check, source, getattr(reference, "notes", None)), args.md)
        return _verdict(check.fails(args.fail_on) if args.fail_on else [], args.fail_on)
    if args.fail_on == "outside":
        raise InputError("--fail-on outside needs --reference (two runs are compared by regression or any)")
    if not args.run_b:
        raise InputError("compare needs RUN_B, or --reference to compare RUN_A with its recipe's reference")
    run_b = load_run(args.run_b, args.root)
    comparison = compare_runs(run_a.summary, run_b.summary, slo_p99_ms=args.slo_p99_ms, slos=args.slo)
    differences = fingerprint_differences(run_a.fingerprint, run_b.fingerprint)
    differences += member_differences(run_a.members, run_b.members, run_a.fingerprint, run_b.fingerprint)
    differences += recipe_differences(run_a, run_b)
    if args.json:
        print(json.dumps(comparison.to_json(differences), indent=2))
    else:
        _print(comparison_markdown(comparison, differences), args.md)
    if args.plot:
        from hgxkit.results.plots import plot_comparison

        paths = plot_comparison(run_a.summary, run_b.summary, Path(args.plot), comparison.label_a, comparison.label_b)
        print("plots: " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return _verdict(comparison.fails(args.fail_on) if args.fail_on else [], args.fail_on)


def _verdict(failing: list[str], fail_on: str | None) -> int:
    """Exit 1 with one line per reason when `--fail-on` holds, else 0."""
    for reason in failing:
        print(f"fail-on {fail_on}: {reason}", file=sys.stderr)
    return 1 if failing else 0


def _cmd_report(args: argparse.Namespace) -> int:
    from hgxkit.results.html_report import index_html, run_html

    out = Path(args.output) if args.output else None
    if args.index:
        if args.runs:
            raise InputError("report --index lists every run; give no RUN with it")
        runs, skipped = scan_runs(args.root)
        for _, reason in skipped:
            print(f"warning: skipped {reason}", file=sys.stderr)
        page = index_html(runs, skipped, out_dir=(out.parent if out else Path.cwd()).resolve())
    else:
        if not args.runs:
            raise InputError("report needs RUN (one or more), or --index for the list of every run")
        runs = [load_run(ref, args.root) for ref in args.runs]
        reference = None
        if len(runs) == 1:
            try:
                reference, source = _load_reference(runs[0], args.recipe)
            except InputError as err:  # a broken recipe must not stop the report of the run
                reference, source = None, err.message
            if reference is None:
                print(f"note: no reference comparison ({source})", file=sys.stderr)
        page = run_html(runs, reference=reference, slo_p99_ms=args.slo_p99_ms)
    if out is None:
        sys.stdout.write(page)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page)
        print(f"wrote {out}", file=sys.stderr)
    return 0
