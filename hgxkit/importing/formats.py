"""The source formats an import reads, in the order they are asked: the first that claims a command takes it.

A format is one module with an object that has a `name`, `claims(simple)` (is this command mine?) and
`take(simple, reading)` (record what it is in the `Reading`: a server candidate, a container, a benchmark, a
report line). A new source (a compose file, a Kubernetes manifest, a SkyPilot task, a dstack file, a Helm
values file, a Slurm script, a Ray cluster) joins by adding its module and one line to `FORMATS`. What is shell
rather than a source (variables, `for`/`if`, an unreadable line, an engine hgxkit does not serve) is the importer's
own; printed result blocks are not commands: `benchmarks` reads them (`result_blocks`) for the benchmark commands
taken.

Example:
    >>> [f.name for f in FORMATS]
    ['docker run', 'docker build/tag', 'bare launch', 'benchmark command', 'docker compose', 'Kubernetes manifest', \
'SkyPilot task', 'dstack run configuration', 'Helm values file', 'Slurm script', 'Ray cluster']

A YAML document (a whole file, a ```yaml fence) is offered to `DOCUMENT_FORMATS` first (see `documents`): the
one that claims it gives the `docker run` commands it stands for, which its own entry in `FORMATS` then takes.
A script format (`SCRIPT_FORMATS`: a Slurm batch script) first rewrites a post's simple commands into the ones
each node runs (`srun … CMD` is CMD, the rank and head read from the scheduler's variables); its entry in
`FORMATS` then reports its own lines (`#SBATCH`).
"""

from __future__ import annotations

from typing import Protocol

from hgxkit.importing.bare_launch import BARE_LAUNCH
from hgxkit.importing.benchmarks import BENCH_COMMANDS
from hgxkit.importing.commands import Simple
from hgxkit.importing.compose import COMPOSE, COMPOSE_FRAGMENT
from hgxkit.importing.docker_run import DOCKER_IMAGES, DOCKER_RUN
from hgxkit.importing.documents import DocumentFormat
from hgxkit.importing.dstack import DSTACK
from hgxkit.importing.helm_values import HELM_VALUES
from hgxkit.importing.kubernetes import KUBERNETES
from hgxkit.importing.pod_shaped import AKASH_SDL, CONTAINER_APP
from hgxkit.importing.post import PostFile
from hgxkit.importing.reading import Reading
from hgxkit.importing.skypilot import SKYPILOT
from hgxkit.importing.slurm import SLURM
from hgxkit.importing.substitutions import SUBSTITUTED
from hgxkit.importing.truss import TRUSS
from hgxkit.importing.vllm_multinode import RAY_START


class SourceFormat(Protocol):
    """One kind of command a post holds, and what the importer takes from it."""

    name: str

    def claims(self, simple: Simple) -> bool:
        """True when `simple` is a command of this format."""
        ...

    def take(self, simple: Simple, reading: Reading) -> None:
        """Record what `simple` is in `reading` (a candidate, a container, a benchmark, a report line)."""
        ...


class ScriptFormat(Protocol):
    """A script whose commands run elsewhere than where they are written (a Slurm batch script's `srun`)."""

    name: str

    def rewrite(self, post: PostFile, simples: list[Simple]) -> list[Simple]:
        """The post's simple commands as they run (a post not of this format as it is)."""
        ...


FORMATS: tuple[SourceFormat, ...] = (
    DOCKER_RUN,
    DOCKER_IMAGES,
    BARE_LAUNCH,
    BENCH_COMMANDS,
    COMPOSE,
    KUBERNETES,
    SKYPILOT,
    DSTACK,
    TRUSS,
    HELM_VALUES,
    SLURM,
    RAY_START,
)
DOCUMENT_FORMATS: tuple[DocumentFormat, ...] = (
    AKASH_SDL,  # before compose, whose `services:` an SDL has too
    CONTAINER_APP,
    COMPOSE,
    KUBERNETES,
    SKYPILOT,
    DSTACK,
    TRUSS,
    HELM_VALUES,
    COMPOSE_FRAGMENT,
)
SCRIPT_FORMATS: tuple[ScriptFormat, ...] = (SUBSTITUTED, SLURM)


def format_of(simple: Simple) -> SourceFormat | None:
    """The first format that claims `simple`, or None."""
    return next((f for f in FORMATS if f.claims(simple)), None)
