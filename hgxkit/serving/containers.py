"""One serving container per GPU group: the recipe's rendered command plus hgxkit's overrides, and a hash
of the whole spec that labels the container (pyinfra's docker.container never recreates a changed one, so
the serving role compares this label instead).

Overrides: the container is always named (the post's name, else `<recipe>-<group>`) and labelled; every
published port binds `bind_address`; it runs detached and by image digest. With `api_key: auto` the server
gets the node's key from a root-only file, the way its kind reads one: SGLang from a `--config` YAML file
mounted read-only (so the key is on no command line), vLLM from `--env-file` (VLLM_API_KEY). A recipe's
own `{{env:NAME}}` values come from the controller's environment when the command runs, never into the spec,
its hash, or anything printed, and never onto a command line: they go to root-only files next to the start
script (`secrets.env`, Docker's `--env-file`; SGLang's key in `recipe-api-key.yaml`, mounted read-only as
`--config`; see hgxkit.recipe.secretenv). The start command (`command`) is the literal argv, each word quoted
so that the node's shell passes it as it is: `final_argv` is exactly what Docker receives, and what the
serving role judges (hgxkit.recipe.danger.judge_argv) before it starts anything.

Example:
    >>> from hgxkit.recipe.read import load_recipe
    >>> specs = container_specs(load_recipe("recipes/deepseek-v4-flash-dspark-marlin.yaml"), total_gpus=8,
    ...                         bind_address="127.0.0.1", api_key=None, image="lmsysorg/sglang@sha256:" + "0" * 64)
    >>> [(s.name, s.port, s.health_url) for s in specs][0]
    ('deepseek-v4-flash-0', 5000, 'http://127.0.0.1:5000/health_generate')
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyinfra.api import StringCommand

from hgxkit.errors import InputError
from hgxkit.hostcmd import argv as host_argv
from hgxkit.recipe.danger import expansions
from hgxkit.recipe.render import RenderedGroup, render_recipe
from hgxkit.recipe.secretenv import SecretStart, default_env_allowlist, take_secrets
from hgxkit.recipe.shellwords import quote_word, shell_value
from hgxkit.recipe.spec import Recipe

MANAGED_LABEL = "hgxkit.serve"
SPEC_LABEL = "hgxkit.spec"
GROUP_LABEL = "hgxkit.group"
RECIPE_LABEL = "hgxkit.recipe"
PORT_LABEL = "hgxkit.port"  # the host port the server answers on (published, or its own with --network host)
RANK_LABEL = "hgxkit.rank"  # the node rank of a container of a group spanning nodes
KEY_CONFIG_IN_CONTAINER = "/run/hgxkit/api-key.yaml"
SECRETS_ENV = "secrets.env"  # in the group's state folder: the recipe's secrets for Docker's --env-file
RECIPE_KEY_YAML = "recipe-api-key.yaml"  # ... and SGLang's key from the recipe, for its --config
DEFAULT_STATE_DIR = "/var/lib/hgxkit/serve"


@dataclass(frozen=True)
class ApiKeyFiles:
    """The node's API key as each kind reads it (root-only files next to `serve_api_key_file`)."""

    config_yaml: str  # `api-key: KEY`, for a --config YAML (SGLang: a kind without `api_key_env`)
    env_file: str  # `NAME=KEY` for every kind's `api_key_env` (vLLM: VLLM_API_KEY), for docker --env-file

    @classmethod
    def beside(cls, key_file: str) -> ApiKeyFiles:
        return cls(f"{key_file}.yaml", f"{key_file}.env")


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
    health_url: str = ""
    secrets: SecretStart | None = field(default=None, repr=False)  # the start command and its secret files
    own_files: tuple[str, ...] = ()  # host files hgxkit wrote for this container (key and secret files)

    @property
    def argv(self) -> list[str]:
        return self.rendered.argv

    def final_argv(self) -> list[str]:
        """The words Docker receives, literal: the start command with secrets moved to files (module doc).
        Raises InputError for a word a shell would still expand (loading refuses those; this is the last net)."""
        group = self.secrets.group if self.secrets is not None else self.rendered
        for word in group.argv:
            left = expansions(word)
            if left:
                raise InputError(f"{self.name}: {left[0]} in {shell_value(word)!r} is left for a shell to expand")
        return [shell_value(word) for word in group.argv]

    def command(self) -> StringCommand:
        """The `docker run` command as the node runs it: `final_argv`, every word quoted literally."""
        return host_argv(*self.final_argv())

    def secret_files(self) -> dict[str, str]:
        """Root-only files (name in the group's state folder -> content) the command reads; never printed."""
        if self.secrets is None:
            return {}
        files = {SECRETS_ENV: self.secrets.env_file_text()} if self.secrets.env else {}
        if self.secrets.config_key is not None:
            files[RECIPE_KEY_YAML] = self.secrets.config_text()
        return files

    def shell(self) -> str:
        """The command as a person reads it (secrets as `${NAME}` references)."""
        return " ".join(quote_word(word) for word in self.argv)


def container_name(recipe: Recipe, group: RenderedGroup) -> str:
    """The post's container name, else `<recipe>-<group>`."""
    return group.name or f"{recipe.name}-{group.group}"


def health_url(recipe: Recipe, group: RenderedGroup) -> str:
    """Where the node asks the group's server whether it can generate: its published host port on loopback,
    or (with `--network host`) the server's own port."""
    kind = recipe.server.server_kind
    port = group.port
    if port is None:
        port = int(recipe.server.flag("--port") or kind.default_port)
    return f"http://127.0.0.1:{port}{kind.health_path}"


def _key_overrides(recipe: Recipe, keys: ApiKeyFiles | None) -> tuple[list[tuple[str, str]], list[str]]:
    if keys is None:
        return [], []
    kind = recipe.server.server_kind
    if kind.api_key_env:
        return [("--env-file", keys.env_file)], []
    return [("--volume", f"{keys.config_yaml}:{KEY_CONFIG_IN_CONTAINER}:ro")], ["--config", KEY_CONFIG_IN_CONTAINER]


def _key_files(keys: ApiKeyFiles | None) -> tuple[str, ...]:
    return (keys.env_file, keys.config_yaml) if keys is not None else ()


def _labels(recipe: Recipe, group: int, url: str, spec_hash: str) -> dict[str, str]:
    """The labels that tie a container to hgxkit, its recipe, its group, its spec and its published port."""
    return {
        MANAGED_LABEL: "1",
        RECIPE_LABEL: recipe.name,
        GROUP_LABEL: str(group),
        SPEC_LABEL: spec_hash,
        PORT_LABEL: url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1],
    }


def _spec_labels(
    recipe: Recipe, group: int, url: str, argv: list[str], *, rank: int | None, group_hash: str | None
) -> dict[str, str]:
    """A container's labels, its spec hash taken over its command line.

    A rank of a server spanning nodes also carries its rank, and the whole group's hash in place of its own.
    """
    labels = _labels(recipe, group, url, hashlib.sha256(json.dumps(argv).encode()).hexdigest()[:16])
    if rank is not None:
        labels[RANK_LABEL] = str(rank)
        labels[SPEC_LABEL] = group_hash or labels[SPEC_LABEL]
    return labels


def container_specs(
    recipe: Recipe,
    *,
    total_gpus: int | None,
    bind_address: str,
    api_key: ApiKeyFiles | None,
    image: str,
    environ: Mapping[str, str] | None = None,
    rank: int | None = None,
    head: str | None = None,
    group_hash: str | None = None,
    state_dir: str = DEFAULT_STATE_DIR,
    env_allowlist: tuple[str, ...] | None = None,
    first_group: int = 0,
) -> list[ContainerSpec]:
    """Every group's container with hgxkit's overrides (module doc), run by `image` (a digest reference).

    `environ` (the controller's environment, at execute time) gives the recipe's `{{env:NAME}}` values, for
    names on `env_allowlist` only (default: hgxkit.recipe.secretenv). They are written to files under
    `<state_dir>/replace/<name>/` (`ContainerSpec.secret_files`); the spec, its hash and `shell()` keep `${NAME}`
    references.

    A server spanning nodes is rendered for one host: `rank` and `head` (the head's address; see
    render_recipe). Its container is labelled with its rank, and with `group_hash` (the hash over every rank's
    spec, hgxkit.serving.multinode.group_spec_hash) in place of its own. The post's `--rm` is dropped: a
    stopped rank is kept, so a failed replace of the group can start it again. `first_group`: this host's first
    group of a recipe laid over several hosts (render_recipe).
    """
    shown = render_recipe(recipe, total_gpus=total_gpus, rank=rank, head=head, first_group=first_group)
    allowlist = env_allowlist if env_allowlist is not None else default_env_allowlist(recipe)
    options, args = _key_overrides(recipe, api_key)
    specs = []
    for group in shown:
        name = container_name(recipe, group)
        body = group.with_overrides(
            name=name,
            publish_address=bind_address,
            detach=True,
            image=image,
            extra_options=options,
            extra_args=args,
            keep_stopped=rank is not None,
        )
        url = health_url(recipe, group)
        labels = _spec_labels(recipe, group.group, url, body.argv, rank=rank, group_hash=group_hash)
        rendered = body.with_overrides(labels=labels)
        folder = f"{state_dir}/replace/{name}"
        secrets = (
            take_secrets(
                rendered,
                recipe.server.server_kind,
                environ,
                allowlist,
                env_file=f"{folder}/{SECRETS_ENV}",
                key_file=f"{folder}/{RECIPE_KEY_YAML}",
            )
            if environ is not None
            else None
        )
        specs.append(
            ContainerSpec(
                group=group.group,
                name=name,
                gpus=group.gpus or [],
                port=group.port,
                rendered=rendered,
                spec_hash=labels[SPEC_LABEL],
                labels=labels,
                health_url=url,
                secrets=secrets,
                own_files=(*_key_files(api_key), f"{folder}/{SECRETS_ENV}", f"{folder}/{RECIPE_KEY_YAML}"),
            )
        )
    return specs
