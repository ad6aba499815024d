"""`hgxkit recipe export RECIPE --to compose|k8s|skypilot|slurm`: the recipe as another engine's files."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from hgxkit.cli.allowances import allowance_options, allowances
from hgxkit.errors import InputError
from hgxkit.recipe.judge import judge
from hgxkit.recipe.read import load_recipe
from hgxkit.recipe.secretenv import api_key_variable
from hgxkit.recipe.spec import Recipe

# The exporters load the serving modules (and pyinfra's API with them): only when `recipe export` runs, so that
# every other `hgxkit recipe …` starts without them. The registry's names, repeated here, are checked by a test.
TARGETS = ("compose", "k8s", "skypilot", "slurm")
SLURM_RUNTIMES = ("docker", "pyxis")  # hgxkit.export.slurm.RUNTIMES, the same test checks them
DEFAULT_GPU_PRODUCT = "NVIDIA-H200"
_EXAMPLE = "recipes/deepseek-v4-flash-dspark-marlin.yaml"


def add_export(commands: argparse._SubParsersAction) -> None:
    """Add `recipe export` to the `recipe` command group."""
    parser = commands.add_parser(
        "export",
        help="write the recipe as a compose file, Kubernetes manifests, a SkyPilot task or an sbatch script",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Export a verified recipe to another engine, from its render: the image by digest, the model "
        "repository and revision, the recipe hash and the verifying run travel as labels and comments. "
        "Secrets stay references (env files, Secret refs, SkyPilot secrets). The recipe is judged as a node "
        "judges it, under the same allowances (`recipe check`): what a node refuses is not exported, and what an "
        "allowance lets through is written into the files. Without -o the files are printed.",
        epilog="examples:\n"
        f"  hgxkit recipe export {_EXAMPLE} --to compose -o deploy/compose --run 20261201-120000-abcd\n"
        f"  hgxkit recipe export {_EXAMPLE} --to k8s --model-pvc models --model-gb 160 -o base\n"
        "  kubectl apply -k base    # the kustomize base; a cluster's overlay patches it\n"
        f"  hgxkit recipe export {_EXAMPLE} --to skypilot -o sky/\n"
        f"  hgxkit recipe export {_EXAMPLE} --to slurm -o slurm/ && sbatch slurm/*.sbatch\n"
        f"  hgxkit recipe export {_EXAMPLE} --to slurm --slurm-runtime pyxis -o slurm/",
    )
    parser.add_argument("recipe", help="recipe YAML file")
    parser.add_argument("--to", required=True, choices=TARGETS, help="the engine")
    parser.add_argument("-o", "--output", type=Path, help="directory to write the files into (default: print them)")
    parser.add_argument(
        "--run",
        help="id of the run that verified the recipe: the export runs the image digest that run archived, and is "
        "refused when the run ran another recipe",
    )
    parser.add_argument(
        "--results-dir", type=Path, default=Path("results"), help="where --run is archived (default: ./results)"
    )
    parser.add_argument("--model-pvc", help="k8s: the PersistentVolumeClaim holding the model (default: a hostPath)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node (default: 8)")
    parser.add_argument(
        "--gpu-product",
        default=DEFAULT_GPU_PRODUCT,
        help=f"GPU feature discovery's product name (default: {DEFAULT_GPU_PRODUCT})",
    )
    parser.add_argument(
        "--time",
        default="7-00:00:00",
        type=_slurm_time,
        help="slurm: how long the job (the server) may run, in Slurm's format (default: 7-00:00:00; a partition "
        "may allow less)",
    )
    parser.add_argument(
        "--slurm-runtime",
        choices=SLURM_RUNTIMES,
        default="docker",
        help="slurm: what runs the containers on each node: docker (default), or pyxis (enroot + pyxis, `srun "
        "--container-image`, for clusters whose users have no Docker)",
    )
    parser.add_argument(
        "--disk-size",
        type=int,
        default=1024,
        metavar="GB",
        help="skypilot: the node's disk in GB, for the image and the weights (default: 1024; SkyPilot's own 256 "
        "holds no DeepSeek-class model)",
    )
    parser.add_argument(
        "--model-gb",
        type=float,
        metavar="GB",
        help="k8s: the weights' size on disk (the recipe does not hold it), counted in each pod's memory request "
        "(their page cache) and in HiCache's estimate of its host pools (default: not counted)",
    )
    allowance_options(parser)
    parser.set_defaults(handler=_cmd_export)


def _slurm_time(text: str) -> str:
    if not re.fullmatch(r"(\d+-)?\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Slurm time (MM, HH:MM:SS, D-HH:MM:SS or UNLIMITED)")
    return text


def _output_dir(path: Path | None) -> Path | None:
    """`-o` names a directory; a name that reads as a format or a file (`-o yaml`, `-o out.yaml`) is refused
    rather than made into a directory of that name."""
    if path is None or path.is_dir():
        return path
    if path.name.lower() in ("yaml", "yml", "json") or path.suffix.lower() in (".yaml", ".yml", ".json", ".sbatch"):
        raise InputError(f"-o {path}: names the directory the files go into; leave -o out to print them")
    return path


def _cmd_export(args: argparse.Namespace) -> int:
    from hgxkit.export.common import ExportOptions
    from hgxkit.export.registry import export_recipe, write_export

    recipe = load_recipe(args.recipe)
    if args.run:
        recipe = pinned_to_run(recipe, args.run, args.results_dir)
    output = _output_dir(args.output)
    options = ExportOptions(
        run_id=args.run,
        model_pvc=args.model_pvc,
        total_gpus=args.gpus,
        gpu_product=args.gpu_product,
        time_limit=args.time,
        disk_gb=args.disk_size,
        model_gb=args.model_gb,
        slurm_runtime=args.slurm_runtime,
    )

    # Every export passes the kind's key variable on from the engine's secrets: `api_key: auto` for such a kind.
    kind = recipe.server.server_kind
    if args.api_key and not kind.api_key_env:
        raise InputError(
            f"--api-key auto: {kind.title} takes its key only as a flag, which an export cannot fill from a secret; "
            f"add --api-key {{{{env:{api_key_variable(kind)}}}}} to the recipe's server flags instead"
        )
    judged = judge(recipe, allowances(args, api_key="auto" if kind.api_key_env else None), args.gpus)
    exported = export_recipe(judged, args.to, options)
    err = Console(stderr=True, soft_wrap=True)
    for line in judged.allowed_lines():
        err.print(f"[yellow]carried[/] {escape(line)}")
    if output is None:
        many = len(exported.files) > 1
        for name, text in exported.files.items():
            sys.stdout.write((f"# ---- {name}\n" if many else "") + text + ("" if text.endswith("\n") else "\n"))
    else:
        for path in write_export(exported, output):
            err.print(f"wrote {escape(str(path))}")
    for note in exported.not_carried:
        err.print(f"not carried: {escape(note)}")
    for need in exported.needs:
        err.print(f"needs: {escape(need)}")
    return 0


def pinned_to_run(recipe: Recipe, run_id: str, results_dir: Path) -> Recipe:
    """`recipe` running the image digest the verifying run archived; InputError when that run ran another recipe
    (other settings, or another digest), or archived no digest."""
    from hgxkit.recipe.diff import diff_recipes
    from hgxkit.recipe.read import parse_recipe_text
    from hgxkit.results.archive import RECIPE_FILE, load_run

    run = load_run(run_id, results_dir)
    archived = run.path / RECIPE_FILE
    if archived.is_file():
        ran = parse_recipe_text(archived.read_text(), source=str(archived))
        differ = [d.line() for d in diff_recipes(ran, recipe) if not (d.area == "image" and d.key == "digest")]
        if differ:
            raise InputError(
                f"--run {run_id}: that run verified another recipe ({'; '.join(differ[:3])}); export the recipe it "
                f"ran ({archived}) or verify this one"
            )
    digest = run.fingerprint.serving.get("image_digest")
    if not digest:
        raise InputError(f"--run {run_id}: the run archived no image digest; pin image.digest in the recipe")
    if recipe.image.digest and recipe.image.digest != digest:
        raise InputError(f"--run {run_id}: the run ran {digest}, the recipe pins {recipe.image.digest}")
    return replace(recipe, image=replace(recipe.image, digest=digest))
