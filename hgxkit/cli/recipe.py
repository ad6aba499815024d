"""`hgxkit recipe …`: import a post, render a recipe per GPU group (and host), check, show, diff and migrate.

`--json` outputs follow a JSON Schema that `hgxkit recipe schema NAME` prints: `check` and `diff` (files in
`hgxkit/recipe/schemas/`), and `recipe` (the recipe file schema, which `recipe show --json` follows).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hgxkit.cli.allowances import allowance_options, allowances
from hgxkit.cli.args import json_option, package_schema
from hgxkit.cli.export import add_export
from hgxkit.errors import InputError
from hgxkit.importing.fill import parse_fill
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.inferencex_recipes import entry_recipes
from hgxkit.importing.model_placement import DEFAULT_MODELS_DIR
from hgxkit.importing.outcome import ImportOutcome, ImportRefused, explained, ledger_json
from hgxkit.kinds import KINDS
from hgxkit.recipe.diff import diff_recipes
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.groups import parse_groups_arg
from hgxkit.recipe.judge import findings as judgement
from hgxkit.recipe.read import load_recipe, parse_recipe_text, read_recipe_text
from hgxkit.recipe.render import render_recipe
from hgxkit.recipe.schema import RECIPE_SCHEMA
from hgxkit.recipe.show import recipe_json, show_recipe
from hgxkit.textinput import read_text_file, read_text_stream

_RAW = argparse.RawDescriptionHelpFormatter
SEED_RECIPE = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
CHECK_SCHEMA_VERSION = 1
DIFF_SCHEMA_VERSION = 1
SCHEMA_NAMES = ("recipe", "check", "diff", "import")


def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema `name`: `recipe` (recipe files, `recipe show --json`), `check`, `diff` or `import` (their
    --json)."""
    if name == "recipe":
        return RECIPE_SCHEMA
    return package_schema("hgxkit.recipe", name)


def register(groups: argparse._SubParsersAction) -> None:
    """Add the `recipe` command group and its sub-commands."""
    parser = groups.add_parser(
        "recipe",
        help="import, render, check and diff serving recipes",
        description="Recipes capture one serving setup exactly (image, docker options, server flags, model, "
        "GPU groups, the poster's results) and render back to the exact commands.",
    )
    commands = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    commands.required = True
    _add_import(commands)
    _add_render(commands)
    _add_check(commands)
    _add_diff(commands)
    _add_show(commands)
    _add_migrate(commands)
    add_export(commands)
    schema = commands.add_parser(
        "schema",
        help="print the recipe JSON Schema (or the schema of `check --json`, `diff --json`)",
        formatter_class=_RAW,
        epilog="examples:\n  hgxkit recipe schema > recipes/schema.json\n  hgxkit recipe schema check",
    )
    schema.add_argument(
        "name",
        nargs="?",
        default="recipe",
        choices=SCHEMA_NAMES,
        help="recipe (default: recipe files and `recipe show --json`), check or diff",
    )
    schema.set_defaults(handler=_cmd_schema)


_ENTRY_HELP = (
    "--entry KEY reads a checkout of SemiAnalysis InferenceX (FILE is its root directory): the entry of\n"
    "configs/nvidia-master.yaml, its sweep's cells as the matrix, the launch script's server command for each\n"
    "cell (its if/else branches and arrays resolved, the script never run). Cells that run different server\n"
    "commands become one recipe each, DIR/<entry>-<configuration>.yaml with -o DIR/; to stdout or one file,\n"
    "--pick N chooses one. TensorRT-LLM, Dynamo, multinode, AMD and agentic entries are refused by name.\n"
)


def _add_import(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import",
        help="turn a post (prose, code fences, several commands) into a recipe",
        formatter_class=_RAW,
        description="Read a whole post or any part of one and build one recipe: the serving command (a `docker run`, "
        "or a bare `sglang serve`/`python -m sglang.launch_server`/`vllm serve`, a docker compose service or a "
        "Kubernetes manifest's container translated to one), its model "
        "placed for the deploy, benchmark commands as matrix cells and printed results as reference numbers. "
        "Each command is reported as taken or skipped, each change as a note. Secret values (HF_TOKEN=…, "
        "--api-key …) become references and are never written.",
        epilog="examples:\n"
        "  hgxkit recipe import post.txt --name my-setup -o recipes/my-setup.yaml\n"
        "  hgxkit recipe import server-post.md bench-post.md --model-repo org/Model\n"
        "  hgxkit recipe import compose.yaml --pick 2   # the second serving service\n"
        "  hgxkit recipe import vendor-page.md --pick 2 --image vllm/vllm-openai:v0.33.0\n"
        "  hgxkit recipe import run.sh --fill /path/to/weights=/data/models/M   # a value the post leaves to you\n"
        "  pbpaste | hgxkit recipe import - --model-repo deepseek-ai/DeepSeek-V4-Flash-DSpark\n"
        "  hgxkit recipe import post.txt --explain    # what became of each line, or where it was refused\n"
        "  hgxkit recipe import ~/InferenceX --entry dsr1-fp8-h200-sglang -o recipes/   # a suite's entry\n"
        "  hgxkit recipe import ~/InferenceX --entry dsv4-fp8-h200-vllm --pick 2   # its second server command\n"
        f"\n{_ENTRY_HELP}\n"
        "exit status:\n"
        "  0  the recipe is what the post runs (every change a note)\n"
        "  2  refused: one line naming the file, line, cause and the way out (with --entry: an entry hgxkit does\n"
        "     not serve, an unknown key with the nearest ones, several configurations without --pick or -o DIR/)\n"
        "  3  the recipe is written, but a part of the post it belongs with was set aside (a benchmark command with\n"
        "     a placeholder, the results printed under it): `set aside:` lines name each and how to bring it in",
    )
    parser.add_argument("files", nargs="*", default=["-"], metavar="FILE", help="post(s), read in order; - for stdin")
    parser.add_argument("--name", help="recipe name (default: from the container name, model or image)")
    parser.add_argument("--image", help="image to run (a bare launch's default is the engine's official image)")
    parser.add_argument("--kind", choices=sorted(KINDS), help="server kind, where the post does not tell")
    parser.add_argument("--model-repo", help="Hugging Face repo id of the weights the command serves")
    parser.add_argument("--revision", default="main", help="model revision (branch, tag or commit)")
    parser.add_argument("--models-dir", default=DEFAULT_MODELS_DIR, help="host directory models are placed under")
    parser.add_argument(
        "--pick",
        type=_positive_int,
        help="take serving command N of a post that shows several (with --entry: configuration N)",
    )
    parser.add_argument(
        "--entry",
        metavar="KEY",
        help="import entry KEY of a SemiAnalysis InferenceX checkout (FILE: its root directory), one recipe per "
        "server command its cells run",
    )
    parser.add_argument(
        "--fill",
        action="append",
        default=[],
        metavar="PLACEHOLDER=VALUE",
        help="the value of a placeholder the post leaves to fill in (/path/to/…, <NAME>, YOUR_…, {your …}, "
        "an upper-case name such as MODEL_PATH), "
        "written out wherever the post has it; once per placeholder",
    )
    parser.add_argument(
        "-o",
        "--output",
        help="write the recipe here instead of stdout (with --entry, a directory or a path ending in / takes each "
        "configuration's recipe as <name>.yaml)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--explain",
        action="store_true",
        help="print every line of the post(s) with its fate (taken "
        "into which field, changed with its note, set aside with the reason) instead of the recipe; "
        "a refusal is printed with its file, line and column",
    )
    shown.add_argument(
        "--json",
        action="store_true",
        help="print that account as JSON (with schema_version; `hgxkit recipe schema import`)",
    )
    parser.set_defaults(handler=_cmd_import, json_schema=lambda: load_schema("import"))


def _add_render(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "render",
        help="print the exact docker run command of each GPU group",
        formatter_class=_RAW,
        description="Render one command per GPU group. Secrets stay ${NAME} references.",
        epilog="examples:\n"
        f"  hgxkit recipe render {SEED_RECIPE} --gpus 8\n"
        f'  hgxkit recipe render {SEED_RECIPE} --groups "0,1,2,3;4,5,6,7" --format json',
    )
    parser.add_argument("recipe", help="recipe YAML file")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--gpus", type=_positive_int, help="GPUs on the node (default: the recipe's)")
    where.add_argument("--groups", help='explicit GPU groups, e.g. "0,1,2,3;4,5,6,7"')
    parser.add_argument(
        "--format",
        choices=("shell", "json"),
        default="shell",
        help="shell: one commented docker run per group (default); json: a list of {group, name, gpus, port, argv}",
    )
    parser.add_argument("--rank", type=int, help="the host's rank, for a server spanning nodes (0 is the head)")
    parser.add_argument("--head", help="the head node's address, for a server spanning nodes")
    parser.set_defaults(handler=_cmd_render)


def _add_check(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check",
        help="report errors and known pitfalls in a recipe",
        formatter_class=_RAW,
        description="The judgement a node makes before it serves the recipe, under the same allowances: "
        "errors (GPU groups that overlap or do not fit, a group size different from the server's tp x pp x dp, "
        "two groups on one port, a model path outside every mount, dangerous docker options, an API open without "
        "a key, {{env:NAME}} names not allowed) and warnings (known SGLang/Docker pitfalls, each with its reason). "
        "Exit status 1 when there is an error: the node would refuse it.",
        epilog=f"examples:\n  hgxkit recipe check {SEED_RECIPE} --gpus 8\n"
        f"  hgxkit recipe check {SEED_RECIPE} --bind 0.0.0.0 --api-key auto",
    )
    parser.add_argument("recipe", help="recipe YAML file")
    parser.add_argument("--gpus", type=_positive_int, help="GPUs on the node (default: the recipe's)")
    allowance_options(parser)
    json_option(parser, lambda: load_schema("check"), "the findings (`hgxkit recipe schema check`)")
    parser.set_defaults(handler=_cmd_check)


def _add_diff(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "diff",
        help="show what differs between two recipes, one line each",
        formatter_class=_RAW,
        description="Compare image, env, docker options, server flags (aliases resolved), model and GPU "
        "grouping. Exit status 0 either way (with --exit-code: 1 when they differ, as `git diff`); the output "
        "is empty when the setups are the same.",
        epilog="examples:\n  hgxkit recipe diff recipes/deepseek-v4-flash-dspark-marlin.yaml "
        "recipes/deepseek-v4-flash-dspark-flashinfer.yaml\n"
        "  hgxkit recipe diff --exit-code deployed.yaml recipes/mine.yaml || echo changed",
    )
    parser.add_argument("a", help="first recipe")
    parser.add_argument("b", help="second recipe")
    json_option(parser, lambda: load_schema("diff"), "the differences (`hgxkit recipe schema diff`)")
    parser.add_argument("--exit-code", action="store_true", help="exit 1 when the recipes differ, 0 when not")
    parser.set_defaults(handler=_cmd_diff)


def _add_show(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "show",
        help="print a recipe: server kind, image, model, groups, matrix cells, reference numbers",
        formatter_class=_RAW,
        description="Load a recipe (a version 1 file is migrated in memory) and print what it holds, as tables or "
        "as JSON for scripts.",
        epilog=f"examples:\n  hgxkit recipe show {SEED_RECIPE}\n  hgxkit recipe show {SEED_RECIPE} --json | jq .matrix",
    )
    parser.add_argument("recipe", help="recipe YAML file")
    json_option(parser, lambda: load_schema("recipe"), "the recipe, matrix cells in full (`hgxkit recipe schema`)")
    parser.set_defaults(handler=_cmd_show)


def _add_migrate(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "migrate",
        help="rewrite a recipe file in the current schema version",
        formatter_class=_RAW,
        description="Load a recipe of any version this hgxkit reads and write it back in the current version "
        "(comments other than the header are not kept). A file already current is left alone.",
        epilog="example:\n  hgxkit recipe migrate recipes/my-setup.yaml",
    )
    parser.add_argument("recipe", help="recipe YAML file, rewritten in place")
    parser.set_defaults(handler=_cmd_migrate)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _cmd_import(args: argparse.Namespace) -> int:
    if args.entry is not None:
        return _cmd_import_entry(args)
    files = []
    for name in args.files:
        if name == "-":
            files.append(("<stdin>", read_text_stream("<stdin>", sys.stdin.buffer)))
        elif Path(name).is_dir():
            raise InputError(f"{name}: a directory; give a post's file, or an InferenceX checkout with --entry KEY")
        else:
            files.append((name, read_text_file(name)))
    options = ImportOptions(
        name=args.name,
        image=args.image,
        kind=args.kind,
        model_repo=args.model_repo,
        revision=args.revision,
        models_dir=args.models_dir,
        pick=args.pick,
        fill=tuple(parse_fill(f) for f in args.fill),
    )
    try:
        outcome = import_post(files, options)
    except ImportRefused as refused:
        if args.explain:
            sys.stdout.write("".join(f"{line}\n" for line in explained(None, refused)))
        elif args.json:
            print(json.dumps(ledger_json(None, refused), indent=2))
        raise
    source = files[0][0]
    yaml_text = dump_recipe(outcome.recipe)
    parse_recipe_text(yaml_text, source=f"recipe imported from {source}")  # what we write must load back
    console = _stderr()
    _print_account(outcome, console)
    if args.explain:
        sys.stdout.write("".join(f"{line}\n" for line in explained(outcome)))
    elif args.json:
        print(json.dumps(ledger_json(outcome), indent=2))
    if args.output is None:
        if not (args.explain or args.json):
            sys.stdout.write(yaml_text)
        return _set_aside(outcome, console)
    out = Path(args.output)
    if out.exists() and not args.force:
        raise InputError(f"{out}: already exists; pass --force to overwrite it or choose another -o")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml_text, encoding="utf-8")
    groups = outcome.recipe.groups
    shape = f"groups of {groups.size} GPUs" if groups and groups.size else "one container"
    if groups and groups.explicit and len(groups.explicit) > 1:
        shape = f"{len(groups.explicit)} GPU groups"
    if outcome.recipe.node_count() > 1:
        shape += f" spanning {outcome.recipe.node_count()} nodes"
    if groups and groups.host_count > 1:
        shape += f" on each of {groups.host_count} hosts in turn"
    console.print(f"wrote {out} (recipe {outcome.recipe.name!r}, {shape})")
    return _set_aside(outcome, console)


SET_ASIDE_EXIT = 3


def _print_account(outcome: ImportOutcome, console: Console) -> None:
    """What the import took, read and skipped, one line each, then its notes (on stderr)."""
    for line in outcome.report:
        style = "green" if line.action == "took" else "dim"
        console.print(f"[{style}]{escape(line.where)}: {line.action}[/] {escape(line.what)}")
    for note in outcome.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _cmd_import_entry(args: argparse.Namespace) -> int:
    """`recipe import CHECKOUT --entry KEY`: the entry's recipes, to stdout, one file, or one file each in a
    directory."""
    if len(args.files) != 1 or args.files == ["-"]:
        raise InputError(
            "--entry KEY: give one directory, the root of an InferenceX checkout (recipe import DIR --entry KEY)"
        )
    account = "its lines would be the rendered script's; the notes name the suite's own lines"
    given = (
        ("--explain", args.explain, account),
        ("--json", args.json, account),
        ("--kind", args.kind, "the entry's framework is its kind"),
        ("--fill", args.fill, "the entry's values are the suite's"),
    )
    for flag, value, why in given:
        if value:
            raise InputError(f"{flag} is not available with --entry ({why})")
    options = ImportOptions(
        name=args.name, image=args.image, model_repo=args.model_repo, revision=args.revision, models_dir=args.models_dir
    )
    made = entry_recipes(Path(args.files[0]), args.entry, options)
    listing = "; ".join(
        f"{number}: {m.label or m.recipe.name} ({len(m.points)} cells)" for number, m in enumerate(made, 1)
    )
    directory = args.output is not None and (args.output.endswith("/") or Path(args.output).is_dir())
    if args.pick is not None:
        if args.pick > len(made):
            raise InputError(f"--pick {args.pick}: {args.entry} has {len(made)} configuration(s) ({listing})")
        made = [made[args.pick - 1]]
    elif len(made) > 1 and not directory:
        raise InputError(
            f"{args.entry}: {len(made)} configurations, each its own server command ({listing}); choose one with "
            "--pick N, or write each with -o DIR/"
        )
    texts = []
    for entry_recipe in made:
        text = dump_recipe(entry_recipe.recipe)
        parse_recipe_text(text, source=f"recipe imported from entry {args.entry}")  # what we write must load back
        texts.append(text)
    outputs = [Path(args.output) / f"{m.recipe.name}.yaml" for m in made] if directory else [args.output] * len(made)
    for out in outputs:
        if out is not None and Path(out).exists() and not args.force:
            raise InputError(f"{out}: already exists; pass --force to overwrite it or choose another -o")
    console = _stderr()
    for entry_recipe, text, out in zip(made, texts, outputs, strict=True):
        outcome = entry_recipe.outcome
        _print_account(outcome, console)
        if out is None:
            sys.stdout.write(text)
        else:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            Path(out).write_text(text, encoding="utf-8")
            cells = len(entry_recipe.points)
            console.print(f"wrote {out} (recipe {outcome.recipe.name!r}, {cells} matrix cell(s))")
    return 0


def _set_aside(outcome: ImportOutcome, console: Console) -> int:
    """0, or `SET_ASIDE_EXIT` when a part of the post that belongs in the recipe was set aside (said first)."""
    if not outcome.set_aside:
        return 0
    for part in outcome.set_aside:
        console.print(f"[yellow]set aside:[/] {escape(part)}")
    console.print(
        f"hgxkit: the recipe is written without {len(outcome.set_aside)} part(s) of the post (above); exit status "
        f"{SET_ASIDE_EXIT}"
    )
    return SET_ASIDE_EXIT


def _cmd_render(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.recipe)
    groups = parse_groups_arg(args.groups) if args.groups else None
    rendered = render_recipe(recipe, total_gpus=args.gpus, groups=groups, rank=args.rank, head=args.head)
    if args.format == "json":
        print(json.dumps([group.to_json() for group in rendered], indent=2))
        return 0
    for group in rendered:
        gpus = ",".join(map(str, group.gpus)) if group.gpus is not None else "as written"
        print(f"# group {group.group}: {group.name or '(unnamed)'}  GPUs {gpus}  port {group.port or '-'}")
        print(group.shell())
    refs = rendered[0].env_refs if rendered else []
    if refs:
        _stderr().print(f"note: export {', '.join(refs)} before running (secrets are not stored in recipes)")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.recipe)
    findings = judgement(recipe, allowances(args), args.gpus)
    errors = [f for f in findings if f.level == "error"]
    if args.json:
        document = {
            "schema_version": CHECK_SCHEMA_VERSION,
            "recipe": str(args.recipe),
            "ok": not errors,
            "errors": len(errors),
            "warnings": len(findings) - len(errors),
            "findings": [{"level": f.level, "code": f.code, "message": f.message} for f in findings],
        }
        print(json.dumps(document, indent=2))
        return 1 if errors else 0
    console = Console(highlight=False, soft_wrap=True)
    for finding in findings:
        style = "red" if finding.level == "error" else "yellow"
        console.print(f"[{style}]{finding.level}[/] {escape(f'[{finding.code}]')} {escape(finding.message)}")
    warnings = len(findings) - len(errors)
    verdict = "[red]FAIL[/]" if errors else "[green]OK[/]"
    console.print(f"{verdict} {args.recipe}: {len(errors)} error(s), {warnings} warning(s)", markup=True)
    return 1 if errors else 0


def _cmd_diff(args: argparse.Namespace) -> int:
    a, b = load_recipe(args.a), load_recipe(args.b)
    differences = diff_recipes(a, b)
    if args.json:
        document = {
            "schema_version": DIFF_SCHEMA_VERSION,
            "a": str(args.a),
            "b": str(args.b),
            "same": not differences,
            "differences": [d.to_json() for d in differences],
        }
        print(json.dumps(document, indent=2))
    elif not differences:
        _stderr().print(f"{args.a} and {args.b} describe the same setup")
    else:
        _print_differences(differences, args.a, args.b)
    return 1 if args.exit_code and differences else 0


def _print_differences(differences: list, a: str, b: str) -> None:
    table = Table(show_header=True, header_style="bold", box=None)
    for column in ("area", "setting", a, b):
        table.add_column(column, overflow="fold")
    for d in differences:
        table.add_row(d.area, d.key, d.a, d.b)
    if sys.stdout.isatty():
        Console().print(table)
    else:
        for d in differences:
            print(d.line())


def _cmd_show(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.recipe)
    if args.json:
        print(json.dumps(recipe_json(recipe), indent=2))
        return 0
    # Tables wider than a terminal's default 80 columns when written to a file or pipe: a cell per line.
    show_recipe(recipe, Console(highlight=False, width=None if sys.stdout.isatty() else 200))
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    path = Path(args.recipe)
    recipe = load_recipe(path)  # validated first: the file is a recipe within every limit
    before = yaml.safe_load(read_recipe_text(path)).get("schema_version")
    if before == recipe.schema_version:
        _stderr().print(f"{path}: already schema version {before}; left as it is")
        return 0
    yaml_text = dump_recipe(recipe)
    parse_recipe_text(yaml_text, source=f"{path} migrated")  # what we write must load back
    path.write_text(yaml_text, encoding="utf-8")
    _stderr().print(f"{path}: migrated from schema version {before} to {recipe.schema_version}")
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(load_schema(args.name), indent=2))
    return 0
