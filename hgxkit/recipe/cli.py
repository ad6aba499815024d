"""`hgxkit recipe …`: import a posted `docker run`, render it per GPU group, check it, diff two recipes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hgxkit.errors import InputError
from hgxkit.recipe.check import check_recipe
from hgxkit.recipe.diff import diff_recipes
from hgxkit.recipe.groups import parse_groups_arg
from hgxkit.recipe.importer import import_with_notes
from hgxkit.recipe.loader import dump_recipe, load_recipe, parse_recipe_text
from hgxkit.recipe.render import render_recipe
from hgxkit.recipe.schema import RECIPE_SCHEMA

_RAW = argparse.RawDescriptionHelpFormatter
SEED_RECIPE = "recipes/deepseek-v4-flash-dspark-marlin.yaml"


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
    schema = commands.add_parser(
        "schema",
        help="print the recipe JSON Schema",
        formatter_class=_RAW,
        epilog="example:\n  hgxkit recipe schema > recipes/schema.json",
    )
    schema.set_defaults(handler=_cmd_schema)


def _add_import(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import",
        help="turn a posted `docker run …` command into a recipe",
        formatter_class=_RAW,
        description="Parse a `docker run` command as people post it (line continuations, the collapsed "
        "`\\ ` form, quotes, X placeholders for GPU groups) into recipe YAML. Secret values "
        "(HF_TOKEN=…, *_API_KEY=…, --api-key …) are replaced by references and never written.",
        epilog="examples:\n"
        "  hgxkit recipe import post.txt --name my-setup -o recipes/my-setup.yaml\n"
        "  pbpaste | hgxkit recipe import - --model-repo deepseek-ai/DeepSeek-V4-Flash-DSpark",
    )
    parser.add_argument("file", nargs="?", default="-", help="file holding the command, or - for stdin")
    parser.add_argument("--name", help="recipe name (default: from the container name or image)")
    parser.add_argument("--model-repo", help="Hugging Face repo id of the weights the command serves")
    parser.add_argument("--revision", default="main", help="model revision (branch, tag or commit)")
    parser.add_argument("-o", "--output", help="write the recipe here instead of stdout")
    parser.add_argument("--force", action="store_true", help="overwrite --output if it exists")
    parser.set_defaults(handler=_cmd_import)


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
    parser.add_argument("--format", choices=("shell", "json"), default="shell")
    parser.set_defaults(handler=_cmd_render)


def _add_check(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check",
        help="report errors and known pitfalls in a recipe",
        formatter_class=_RAW,
        description="Errors: GPU groups that overlap or do not fit, a group size different from the "
        "server's tp x pp x dp, two groups on one port, a model path outside every mount. Warnings: "
        "known SGLang/Docker pitfalls, each with its reason. Exit status 1 when there is an error.",
        epilog=f"example:\n  hgxkit recipe check {SEED_RECIPE} --gpus 8",
    )
    parser.add_argument("recipe", help="recipe YAML file")
    parser.add_argument("--gpus", type=_positive_int, help="GPUs on the node (default: the recipe's)")
    parser.add_argument("--json", action="store_true", help="print findings as JSON")
    parser.set_defaults(handler=_cmd_check)


def _add_diff(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "diff",
        help="show what differs between two recipes, one line each",
        formatter_class=_RAW,
        description="Compare image, env, docker options, server flags (aliases resolved), model and GPU "
        "grouping. Exit status 0 either way; the output is empty when the setups are the same.",
        epilog="example:\n  hgxkit recipe diff recipes/deepseek-v4-flash-dspark-marlin.yaml "
        "recipes/deepseek-v4-flash-dspark-flashinfer.yaml",
    )
    parser.add_argument("a", help="first recipe")
    parser.add_argument("b", help="second recipe")
    parser.add_argument("--json", action="store_true", help="print differences as JSON")
    parser.set_defaults(handler=_cmd_diff)


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
    if args.file == "-":
        text, source = sys.stdin.read(), "<stdin>"
    else:
        try:
            text, source = Path(args.file).read_text(encoding="utf-8"), args.file
        except OSError as err:
            raise InputError(f"{args.file}: cannot read: {err.strerror}") from None
    result = import_with_notes(
        text, name=args.name, source=source, model_repo=args.model_repo, revision=args.revision
    )
    yaml_text = dump_recipe(result.recipe)
    parse_recipe_text(yaml_text, source=f"recipe imported from {source}")  # what we write must load back
    console = _stderr()
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if args.output is None:
        sys.stdout.write(yaml_text)
        return 0
    out = Path(args.output)
    if out.exists() and not args.force:
        raise InputError(f"{out}: already exists; pass --force to overwrite it or choose another -o")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml_text, encoding="utf-8")
    groups = result.recipe.groups
    shape = f"groups of {groups.size} GPUs" if groups and groups.size else "one container"
    console.print(f"wrote {out} (recipe {result.recipe.name!r}, {shape})")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    recipe = load_recipe(args.recipe)
    groups = parse_groups_arg(args.groups) if args.groups else None
    rendered = render_recipe(recipe, total_gpus=args.gpus, groups=groups)
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
    findings = check_recipe(recipe, args.gpus)
    errors = [f for f in findings if f.level == "error"]
    if args.json:
        print(json.dumps([f.__dict__ for f in findings], indent=2))
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
        print(json.dumps([d.to_json() for d in differences], indent=2))
        return 0
    if not differences:
        _stderr().print(f"{args.a} and {args.b} describe the same setup")
        return 0
    table = Table(show_header=True, header_style="bold", box=None)
    for column in ("area", "setting", args.a, args.b):
        table.add_column(column, overflow="fold")
    for d in differences:
        table.add_row(d.area, d.key, d.a, d.b)
    if sys.stdout.isatty():
        Console().print(table)
    else:
        for d in differences:
            print(d.line())
    return 0


def _cmd_schema(_args: argparse.Namespace) -> int:
    print(json.dumps(RECIPE_SCHEMA, indent=2))
    return 0
