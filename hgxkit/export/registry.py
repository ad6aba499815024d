"""The export registry: target name -> exporter (`hgxkit recipe export RECIPE --to TARGET`).

One module per engine (compose, kubernetes, skypilot, slurm), each a function (judged recipe, options) -> `Exported`
(file name -> text, and what the engine's format does not carry), built from the recipe's structured render
(hgxkit/export/common.py). A new engine is one module and one line in `EXPORTERS`.

Example:
    >>> sorted(EXPORTERS)
    ['compose', 'k8s', 'skypilot', 'slurm']
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hgxkit.errors import InputError
from hgxkit.export.common import Exported, ExportOptions
from hgxkit.export.compose import export_compose
from hgxkit.export.kubernetes import export_kubernetes
from hgxkit.export.skypilot import export_skypilot
from hgxkit.export.slurm import export_slurm
from hgxkit.recipe.judge import Judged
from hgxkit.recipe.pd import is_prefill_decode

EXPORTERS: dict[str, Callable[[Judged, ExportOptions], Exported]] = {
    "compose": export_compose,
    "k8s": export_kubernetes,
    "skypilot": export_skypilot,
    "slurm": export_slurm,
}
# The targets that write a prefill/decode split's router in PD mode (hgxkit.export.pd_router), one node; the others
# would write groups that answer every request with an error (SGLang's decode: 400, no bootstrap room).
SPLIT_TARGETS = ("compose", "k8s", "slurm")


def export_recipe(judged: Judged, target: str, options: ExportOptions) -> Exported:
    """The judged recipe as `target`'s files (an export takes only what a node would serve, under the same
    allowances, hgxkit.recipe.judge); InputError for an unknown target."""
    if target not in EXPORTERS:
        raise InputError(f"--to {target}: export to one of {', '.join(EXPORTERS)}")
    if target not in SPLIT_TARGETS and is_prefill_decode(judged.recipe, options.total_gpus):
        raise InputError(
            f"{judged.recipe.name}: a prefill/decode split is not exported to {target} (the router in PD mode that "
            f"joins its groups is not written there); export it --to {' or '.join(SPLIT_TARGETS)}, or deploy it "
            "with hgxkit and --data router=true"
        )
    return EXPORTERS[target](judged, options)


def write_export(exported: Exported, directory: Path) -> list[Path]:
    """Write every file into `directory` (created); an sbatch script is made executable."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in exported.files.items():
        path = directory / name
        path.write_text(text if text.endswith("\n") else text + "\n")
        if name.endswith(".sbatch"):
            path.chmod(0o755)
        written.append(path)
    return written
