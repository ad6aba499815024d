"""`hgxkit results import-reference`: other tools' result files, or a suite's published rows, as a recipe's reference.

The files are read (`hgxkit.importing.result_files`), matched with the recipe's matrix cells
(`hgxkit.importing.reference_import`), and the recipe is written back with the new `reference:` section: to
stdout by default, to `-o FILE`, or over the recipe with `--in-place`. A recipe that already has a reference
keeps it unless `--force` is given; one line per file on stderr says which cells it became, or why none.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from hgxkit.errors import InputError

_EPILOG = """examples:
  hgxkit results import-reference artifacts/c4/profile_export_aiperf.json --recipe recipes/my.yaml
  hgxkit results import-reference c4/profile_export_aiperf.json c8/profile_export_aiperf.json \\
      --recipe recipes/my.yaml --in-place
  hgxkit results import-reference benchmarks.json --recipe recipes/my.yaml -o recipes/my-guidellm.yaml
  hgxkit results import-reference rows.json --recipe recipes/dsr1.yaml --entry dsr1-fp8-h200-sglang --in-place
  hgxkit results import-reference rows.json --recipe recipes/dsr1.yaml --where hardware=h200 \\
      --where framework=sglang --where spec_method=none --force --in-place
  hgxkit results import-reference post.txt --recipe recipes/my.yaml --cell 1024x8

formats (told from the content):
  AIPerf profile_export_aiperf.json, GenAI-Perf profile_export_genai_perf.json (one result each),
  GuideLLM benchmarks.json (one result per benchmark), InferenceX rows (the dashboard's
  /api/v1/benchmarks?model=NAME answer, or the suite's agg_bmk.json: one result per row),
  a post or log with SGLang/vLLM result blocks.

units: every latency becomes ms (AIPerf/GenAI-Perf by each metric's unit, GuideLLM request_latency and
InferenceX latencies from s), throughput tok/s and req/s for the whole server (InferenceX per-GPU numbers
times the row's GPUs). AIPerf's, GenAI-Perf's and GuideLLM's inter_token_latency is per request
(latency - TTFT) / (output tokens - 1): it is stored as TPOT, not ITL."""


def register_import_reference(commands: argparse._SubParsersAction) -> None:
    """Add `results import-reference`."""
    parser = commands.add_parser(
        "import-reference",
        help="read other tools' result files (AIPerf, GenAI-Perf, GuideLLM, InferenceX rows) into a recipe's reference",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Each result is matched with the recipe's matrix cell that agrees with the settings the file "
        "states (input/output length, concurrency, rate; request count breaks ties) and becomes that cell's "
        "reference numbers, in the recipe's units, with the file and line it was read from. The recipe is "
        "written back (comments other than the header are not kept); `results compare RUN --reference` then "
        "compares a run with these numbers.",
        epilog=_EPILOG,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="result files, in any of the formats below")
    parser.add_argument("--recipe", required=True, help="the recipe whose matrix cells the results belong to")
    parser.add_argument(
        "--cell",
        metavar="ID",
        help="put the one result of a single file on this cell (for a file that does not say its concurrency or "
        "rate, or fits several cells)",
    )
    parser.add_argument(
        "--entry",
        metavar="KEY",
        help="InferenceX rows: keep the rows of this suite entry (MODEL-PRECISION-HARDWARE-FRAMEWORK[-…], "
        "e.g. dsr1-fp8-h200-sglang)",
    )
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="InferenceX rows: keep rows whose field has this value (hardware, framework, precision, "
        "spec_method, date, image, …); repeat for more",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", metavar="FILE", help="write the recipe with the reference here")
    out.add_argument("--in-place", action="store_true", help="rewrite the recipe file itself")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace the recipe's existing reference (and overwrite -o FILE if it exists)",
    )
    parser.set_defaults(handler=_cmd_import_reference)


def _cmd_import_reference(args: argparse.Namespace) -> int:
    from hgxkit.importing.reference_import import build_reference
    from hgxkit.importing.result_files import read_result_file
    from hgxkit.recipe.dump import dump_recipe
    from hgxkit.recipe.read import load_recipe, parse_recipe_text
    from hgxkit.secrets import redact

    recipe = load_recipe(args.recipe)
    if recipe.reference is not None and not args.force:
        old = recipe.reference
        raise InputError(
            f"{args.recipe}: already has a reference ({old.tool}, {len(old.cells)} cells); pass --force to replace it"
        )
    out = Path(args.output) if args.output else None
    if out is not None and out.exists() and not args.force:
        raise InputError(f"{out}: already exists; pass --force to overwrite it or choose another -o")
    files = [read_result_file(name) for name in args.files]
    outcome = build_reference(recipe, files, cell=args.cell, entry=args.entry, where=args.where)
    # A result file is a stranger's text: a credential in a run's URL or an image name is masked wherever it goes.
    for line in outcome.lines:
        print(redact(line), file=sys.stderr)
    for note in outcome.notes:
        print(f"note: {redact(note)}", file=sys.stderr)
    if outcome.reference is None:
        raise InputError(f"{len(outcome.failed)} of {len(files)} files became no cell; nothing was written")
    said = outcome.reference
    reference = replace(said, label=said.label and redact(said.label), notes=said.notes and redact(said.notes))
    text = dump_recipe(replace(recipe, reference=reference))
    parse_recipe_text(text, source=f"{args.recipe} with the imported reference")  # what we write must load back
    if args.in_place:
        out = Path(args.recipe)
    if out is None:
        sys.stdout.write(text)
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}: reference of {len(outcome.reference.cells)} cells", file=sys.stderr)
    return 0
