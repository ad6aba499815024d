"""One serving container per GPU group: the recipe's rendered command plus hgxkit's overrides, and a hash
of the whole spec that labels the container (pyinfra's docker.container never recreates a changed one, so
the serving role compares this label instead).

Overrides: the container is always named (the post's name, else `<recipe>-<group>`) and labelled; every
published port binds `bind_address`; it runs detached and by image digest; with `api_key: auto` the server
gets `--api-key` read from the host's root-only key file when the command runs.

Example:
    >>> from hgxkit.recipe.loader import load_recipe
    >>> specs = container_specs(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), total_gpus=8,
    ...                         bind_address="127.0.0.1", api_key=False, image="lmsysorg/sglang@sha256:" + "0" * 64)
    >>> [(s.name, s.port) for s in specs]
    [('deepseek-v4-flash-0', 5000), ('deepseek-v4-flash-1', 5001)]
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from pyinfra.api import StringCommand

from hgxkit.hostcmd import script
from hgxkit.recipe.model import Recipe
from hgxkit.recipe.render import RenderedGroup, render_recipe
from hgxkit.recipe.shellwords import quote_word

MANAGED_LABEL = "hgxkit.serve"
SPEC_LABEL = "hgxkit.spec"
GROUP_LABEL = "hgxkit.group"
RECIPE_LABEL = "hgxkit.recipe"
# Stands for the API key in a spec's argv; `ContainerSpec.command` reads the key from its file there.
API_KEY_WORD = "${HGXKIT_API_KEY}"


@dataclass(frozen=True)
class ContainerSpec:
    """One serving container: its rendered command with overrides, and the labels that identify it."""

    group: int
    name: str
    gpus: list[int]
    port: int | None
    rendered: RenderedGroup
    spec_hash: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return self.rendered.argv

    def command(self, api_key_file: str | None = None) -> StringCommand:
        """The `docker run` command; the API key is read from the root-only `api_key_file` when it runs."""
        bits: list[object] = []
        for word in self.argv:
            if word == API_KEY_WORD and api_key_file:
                bits.append(script('"$(cat {file})"', file=api_key_file))
            else:
                bits.append(quote_word(word))  # keeps a recipe's $HOME expandable, quotes everything else
        return StringCommand(*bits)

    def shell(self) -> str:
        """The command as a person would read it (the key shown as its placeholder)."""
        return " ".join(quote_word(word) for word in self.argv)


def container_name(recipe: Recipe, group: RenderedGroup) -> str:
    """The post's container name, else `<recipe>-<group>`."""
    return group.name or f"{recipe.name}-{group.group}"


def container_specs(
    recipe: Recipe, *, total_gpus: int | None, bind_address: str, api_key: bool, image: str
) -> list[ContainerSpec]:
    """Every group's container with hgxkit's overrides (module doc), run by `image` (a digest reference)."""
    specs = []
    for group in render_recipe(recipe, total_gpus=total_gpus):
        name = container_name(recipe, group)
        extra = ["--api-key", API_KEY_WORD] if api_key and "--api-key" not in group.server_argv else []
        body = group.with_overrides(name=name, publish_address=bind_address, detach=True, image=image,
                                    extra_args=extra)  # fmt: skip
        spec_hash = hashlib.sha256(json.dumps(body.argv).encode()).hexdigest()[:16]
        labels = {MANAGED_LABEL: "1", RECIPE_LABEL: recipe.name, GROUP_LABEL: str(group.group), SPEC_LABEL: spec_hash}
        rendered = body.with_overrides(labels=labels)
        specs.append(ContainerSpec(group.group, name, group.gpus or [], group.port, rendered, spec_hash, labels))
    return specs
