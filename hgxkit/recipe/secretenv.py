"""Recipe secrets (`{{env:NAME}}`): which names a recipe may take from the operator, where it may use them, and
how their values reach the container without ever being text on a command line.

A recipe is untrusted, so `{{env:NAME}}` takes only names on the inventory's `recipe_env_allowlist` (default:
`HF_TOKEN` and the kind's API-key variable, `VLLM_API_KEY` or `SGLANG_API_KEY`); any other is refused at check
time (`env-allowlist`), so a recipe cannot ship `AWS_SECRET_ACCESS_KEY` into a stranger's container. A secret is
used only where its value can reach the server without a command line (`secret-placement` otherwise):

- `-e VAR={{env:NAME}}` (or `-e NAME`, a declared secret): the value goes to a root-only env file that hgxkit
  writes (0600, under its state dir) and Docker reads with `--env-file`;
- the kind's key flag `--api-key {{env:NAME}}`: vLLM reads `VLLM_API_KEY`, so the flag is dropped and the key goes
  to the env file. SGLang reads no API-key variable (reference docs: only `--api-key` or its `--config` YAML), so
  the key goes to a root-only YAML file mounted read-only and given as `--config`: either way not on a command
  line, so `ps` on the host shows no key;
- `--hf-token {{env:NAME}}`: both engines read `HF_TOKEN` (huggingface_hub), so it goes to the env file.

Example:
    >>> from hgxkit.importing.docker_run import import_docker_run
    >>> recipe = import_docker_run("docker run -l gh=ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000 img "
    ...                            "sglang serve --api-key k --served-model-name x")
    >>> default_env_allowlist(recipe), [p.found.split(" takes")[0] for p in env_problems(recipe)]
    (('HF_TOKEN', 'SGLANG_API_KEY'), ['docker.options[0]: {{env:GITHUB_TOKEN}}'])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from hgxkit.errors import InputError
from hgxkit.kinds.base import ServerKind
from hgxkit.problems import Problem
from hgxkit.recipe.danger import expansions
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import OptionEntry
from hgxkit.recipe.render import RenderedGroup
from hgxkit.recipe.shellwords import shell_value
from hgxkit.recipe.spec import ENV_REF_RE, Recipe
from hgxkit.recipe.validate import format_path
from hgxkit.secrets import flag_env_name

KEY_CONFIG_IN_CONTAINER = "/run/hgxkit/recipe-api-key.yaml"
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # how a reference-mode render writes {{env:NAME}}


def api_key_variable(kind: ServerKind) -> str:
    """The variable a recipe's API key comes from: the kind's own (vLLM), else `<KIND>_API_KEY`."""
    return kind.api_key_env or flag_env_name("--api-key", kind.name.upper())


def default_env_allowlist(recipe: Recipe) -> tuple[str, ...]:
    """`recipe_env_allowlist`'s default: HF_TOKEN and the kind's API-key variable."""
    return ("HF_TOKEN", api_key_variable(recipe.server.server_kind))


def _flag_variable(flag: str, kind: ServerKind) -> str | None:
    """The container variable a secret flag's value goes to (None: a flag whose value cannot leave the line)."""
    if flag == "--api-key":
        return kind.api_key_env or ""  # "": SGLang, through its --config file (module doc)
    if flag == "--hf-token":
        return "HF_TOKEN"
    return None


def env_problems(recipe: Recipe, allowlist: Sequence[str] | None = None) -> list[Problem]:
    """Every `{{env:NAME}}` not on `allowlist` (default: `default_env_allowlist`), and every one used where its
    value would be text on a command line (module doc), one error each naming its key path."""
    allowed = tuple(allowlist) if allowlist is not None else default_env_allowlist(recipe)
    kind = recipe.server.server_kind
    places: list[tuple[tuple[str | int, ...], list[str], bool]] = []
    for i, entry in enumerate(recipe.docker.entries):
        placed = all(canonical(u.option.name) == "--env" for u in entry.uses) and entry.uses
        values = [u.value or "" for u in entry.uses]
        ok = bool(placed) and all(ENV_REF_RE.fullmatch(v.partition("=")[2]) or not ENV_REF_RE.search(v) for v in values)
        places.append((("docker", "options", i), list(entry.words), ok))
    places.append((("image", "reference"), [recipe.image.reference], False))
    places.append((("server", "command"), list(recipe.server.program), False))
    for i, words in enumerate(recipe.server.args):
        flag, has_equals, inline = words[0].partition("=")
        value = inline if has_equals else (words[1] if len(words) == 2 else "")
        ok = _flag_variable(flag, kind) is not None and bool(ENV_REF_RE.fullmatch(value))
        places.append((("server", "args", i), list(words), ok))
    problems = []
    for where, words, placed_ok in places:
        for name in dict.fromkeys(n for word in words for n in ENV_REF_RE.findall(word)):
            if name not in allowed:
                problems.append(
                    Problem(
                        "env-allowlist",
                        f"{format_path(where)}: {{{{env:{name}}}}} takes ${name} from the operator's environment, and "
                        f"{name} is not on recipe_env_allowlist ({', '.join(allowed)})",
                        f"remove it, or add {name} to recipe_env_allowlist in the inventory if this recipe may have it",
                    )
                )
            elif not placed_ok:
                problems.append(
                    Problem(
                        "secret-placement",
                        f"{format_path(where)}: {{{{env:{name}}}}} would be text on the container's command line",
                        f"pass it as -e {name}={{{{env:{name}}}}} (a root-only env file) or as the kind's --api-key",
                    )
                )
    return problems


@dataclass(frozen=True)
class SecretStart:
    """A group's command with every secret taken out of its words, and where their values go instead."""

    group: RenderedGroup  # no `${NAME}` left in any word
    env: dict[str, str] = field(default_factory=dict, repr=False)  # container variable -> value (--env-file)
    config_key: str | None = field(default=None, repr=False)  # SGLang's API key (--config YAML, mounted ro)

    def env_file_text(self) -> str:
        """The env file Docker reads (`NAME=value` lines; Docker takes each value as it is)."""
        return "".join(f"{name}={value}\n" for name, value in self.env.items())

    def config_text(self) -> str:
        """SGLang's `--config` YAML with the key (JSON quoting is valid YAML and escapes anything)."""
        import json

        return f"api-key: {json.dumps(self.config_key)}\n"


def take_secrets(
    group: RenderedGroup,
    kind: ServerKind,
    environ: Mapping[str, str],
    allowlist: Sequence[str],
    *,
    env_file: str,
    key_file: str,
) -> SecretStart:
    """`group` (rendered with `${NAME}` references) with its secrets moved to an env file (`env_file`, given to
    Docker as `--env-file`) and, for SGLang's key, a YAML file (`key_file`, mounted read-only as `--config`).

    Raises InputError for a name off `allowlist`, unset in `environ`, or a secret anywhere else."""
    env: dict[str, str] = {}
    config_key: str | None = None

    def value(name: str) -> str:
        if name not in allowlist:
            raise InputError(f"{{{{env:{name}}}}}: {name} is not on recipe_env_allowlist ({', '.join(allowlist)})")
        if name not in environ:
            raise InputError(f"{{{{env:{name}}}}} needs ${name}; export it first")
        return environ[name]

    options: list[OptionEntry] = []
    for entry in group.options:
        uses = entry.uses
        if uses and all(canonical(u.option.name) == "--env" for u in uses):
            variable, has_equals, text = (uses[0].value or "").partition("=")
            ref = _REFERENCE.fullmatch(text) if has_equals else None
            if len(uses) == 1 and ref:
                env[variable] = value(ref.group(1))
                continue
            if len(uses) == 1 and not has_equals and variable in allowlist and variable in environ:
                env[variable] = environ[variable]  # `-e NAME`: a declared secret
                continue
        options.append(entry)
    command: list[tuple[str, ...]] = []
    for index, words in enumerate(group.command):
        flag, has_equals, inline = words[0].partition("=") if words else ("", "", "")
        text = inline if has_equals else (words[1] if len(words) == 2 else "")
        ref = _REFERENCE.fullmatch(text) if index and text else None
        variable = _flag_variable(flag, kind) if ref else None
        if ref and variable is not None:
            if variable:
                env[variable] = value(ref.group(1))
            else:
                config_key = value(ref.group(1))
            continue
        command.append(words)
    if env:
        options.insert(0, OptionEntry.long("--env-file", env_file))
    if config_key is not None:
        options.insert(0, OptionEntry.long("--volume", f"{key_file}:{KEY_CONFIG_IN_CONTAINER}:ro"))
        command.append(("--config", KEY_CONFIG_IN_CONTAINER))
    out = replace(group, options=tuple(options), command=tuple(command))
    for word in out.argv:
        left = expansions(word)
        if left:
            raise InputError(
                f"{left[0]} in {shell_value(word)!r} would be text on the container's command line (or left to a "
                "shell); pass a secret as -e NAME={{env:NAME}} or as the kind's --api-key"
            )
    return SecretStart(out, env, config_key)
