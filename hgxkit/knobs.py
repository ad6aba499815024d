"""Knobs: each declared once with its type, default and meaning, and read, cast and checked in one place.

A role's knobs are one frozen dataclass in `roles/<role>/defaults.py`, a subclass of `Knobs` whose fields are
declared with `declare(default, "meaning")`; the knobs several roles read are declared once here, in
`SharedKnobs`, and a role's class takes each one it reads with `shared("name")`. `RoleKnobs.from_host(host)`
gives every knob of the role for that host: the inventory or `--data` value, else the default. pyinfra hands a
`--data key=value` value over as a string (or what `true`, `false`, a number or JSON parse to), so each value is
cast to its field's type here, and a value that does not fit stops the run with one line naming the knob, the
value and the type: `knob allow_reboot: 'maybe' is not a boolean (true or false)`. Code outside a role reads a
shared knob with `knob(host, name)`, under the same rule. `refuse_unknown_knobs` stops a run whose data names a
knob nobody declared (a misspelling), with the closest known name. The recipe a host's `recipe` knob names is
loaded by hgxkit.recipe.host_recipe.

Example:
    >>> from types import SimpleNamespace
    >>> knob(SimpleNamespace(data={"expected_gpu_count": "7"}), "expected_gpu_count")
    7
    >>> cast_knob("allow_reboot", "maybe", bool)
    Traceback (most recent call last):
    ...
    pyinfra.api.exceptions.DeployError: knob allow_reboot: 'maybe' is not a boolean (true or false)
"""

from __future__ import annotations

import difflib
import json
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from functools import cache
from typing import Any, NoReturn, TypeVar, Union, get_args, get_origin, get_type_hints

SEED_RECIPE = "recipes/deepseek-v4-flash-dspark-marlin.yaml"

_ABSENT = object()  # a knob the host's data does not name at all (None is a value: "no limit", "skip")
_NONE_WORDS = ("none", "null", "")
_TRUE_WORDS = ("true", "yes", "1")
_FALSE_WORDS = ("false", "no", "0")

K = TypeVar("K", bound="Knobs")


def stop(line: str) -> NoReturn:
    """Stop the run with one line (pyinfra `DeployError`, printed without a traceback)."""
    # Here, not at the top: the recipe commands read this module and must not load pyinfra for it.
    from pyinfra.api.exceptions import DeployError

    raise DeployError(line)


def declare(default: Any, doc: str) -> Any:
    """A knob's field: its `default` and its one-line meaning (a list or dict default is copied per instance)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


class Knobs:
    """The base of each role's knob class (a frozen dataclass of `declare(...)`/`shared(...)` fields)."""

    @classmethod
    def from_host(cls: type[K], host: Any) -> K:
        """Every knob of this class for `host`: its inventory or `--data` value, cast to the field's type, else
        the default. A value of None keeps the default unless the type allows None. Read once per host and class
        while pyinfra plans (nothing changes a host's data then; each read walks every inventory group)."""
        memo = _planning_memo(host)
        if memo is not None and cls in memo:
            return memo[cls]
        values = {}
        for name, kind in _types(cls).items():
            raw = host.data.get(name, _ABSENT)
            if raw is _ABSENT or (raw is None and not _allows_none(kind)):
                continue
            values[name] = cast_knob(name, raw, kind)
        knobs = cls(**values)
        if memo is not None:
            memo[cls] = knobs
        return knobs

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each knob's default, by name (pyinfra's `@deploy(data_defaults=...)`, `hgxkit doctor`, bundles)."""
        return {f.name: _default_of(f) for f in fields(cls)}  # type: ignore[arg-type]

    @classmethod
    def docs(cls) -> dict[str, str]:
        """Each knob's one-line meaning, by name."""
        return {f.name: f.metadata.get("doc", "") for f in fields(cls)}  # type: ignore[arg-type]

    @classmethod
    def table(cls) -> str:
        """The knobs as a table (name, meaning, default), one block per knob, for the role's docstring."""
        docs = cls.docs()
        width = max(map(len, docs)) + 2
        blocks = []
        for name, default in cls.defaults().items():
            text = f"{docs[name]} Default: {default!r}."
            lines = _wrap(text, 116 - width)
            blocks.append("\n".join([f"{name:<{width}}{lines[0]}", *(" " * width + line for line in lines[1:])]))
        return "\n".join(blocks)


def _wrap(text: str, width: int) -> list[str]:
    """`text`'s words in lines of at most `width` characters (a longer word alone on its line). Not textwrap: every
    role's defaults module builds its docstring's table when a deploy imports it, and textwrap cost the controller
    about 6 ms a run for the docstrings alone.

    >>> _wrap("a bb ccc dddd", 6)
    ['a bb', 'ccc', 'dddd']
    """
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


def _planning_memo(host: Any) -> dict | None:
    """The host's kept knob objects while pyinfra plans it (kept on the host itself, as hgxkit.planfacts keeps
    facts: pyinfra's `host` proxy is shared by every host's plan); None at any other time."""
    stage = getattr(getattr(host, "state", None), "current_stage", None)
    if getattr(stage, "name", None) != "Prepare":
        return None
    memo = getattr(host, _KNOBS_MEMO, None)
    if memo is None:
        memo = {}
        setattr(host, _KNOBS_MEMO, memo)
    return memo


_KNOBS_MEMO = "_hgxkit_plan_knobs"


def _default_of(f: Field) -> Any:
    return f.default_factory() if f.default is MISSING else f.default  # type: ignore[misc]


@cache
def _types(cls: type) -> dict[str, Any]:
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def _allows_none(kind: Any) -> bool:
    return kind is Any or (_is_union(kind) and type(None) in get_args(kind))


def _is_union(kind: Any) -> bool:
    return get_origin(kind) in (Union, types.UnionType)


def cast_knob(name: str, value: Any, kind: Any) -> Any:
    """`value` of knob `name` as type `kind`, or stop the run with one line naming the knob, value and type.

    Example:
        >>> cast_knob("bench_repeats", "none", int | None), cast_knob("gpu_health_allow_xids", "[79]", list[int])
        (None, [79])
    """
    try:
        return _convert(value, kind)
    except ValueError as error:
        stop(f"knob {name}: {value!r} is not {error}")


def _convert(value: Any, kind: Any) -> Any:
    """`value` as `kind`; ValueError with what `kind` is called ("an integer") when it does not fit."""
    if kind is Any:
        return value
    if _is_union(kind):
        return _convert_union(value, get_args(kind))
    origin = get_origin(kind) or kind
    if origin is bool:
        return _boolean(value)
    if origin is int:
        return _integer(value)
    if origin is float:
        return _number(value)
    if origin is str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError("a string")
        return str(value)
    if origin in (list, dict):
        return _collection(value, origin, get_args(kind))
    raise TypeError(f"no rule casts a knob to {kind!r} (hgxkit/knobs.py)")


def _convert_union(value: Any, members: tuple[Any, ...]) -> Any:
    others = [m for m in members if m is not type(None)]
    if len(others) < len(members) and (value is None or (isinstance(value, str) and value.lower() in _NONE_WORDS)):
        return None
    # A value already of a member's kind stays that kind (a group name stays a string, a list a list).
    ordered = sorted(others, key=lambda m: not isinstance(value, get_origin(m) or m))
    names = []
    for member in ordered:
        try:
            return _convert(value, member)
        except ValueError as error:
            names.append(str(error))
    if len(others) < len(members):
        names.append("none")
    raise ValueError(" or ".join(names))


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if word in _TRUE_WORDS or word in _FALSE_WORDS:
        return word in _TRUE_WORDS
    raise ValueError("a boolean (true or false)")


def _integer(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError("an integer")


def _number(value: Any) -> int | float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ValueError("a number")


def _collection(value: Any, origin: type, args: tuple[Any, ...]) -> Any:
    shape = 'a list (JSON: ["a", "b"])' if origin is list else 'a mapping (JSON: {"a": 1})'
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(shape) from None
    if origin is list and isinstance(value, (list, tuple)):
        return [_convert(item, args[0]) for item in value] if args else list(value)
    if origin is dict and isinstance(value, Mapping):
        return {_convert(k, args[0]): _convert(v, args[1]) for k, v in value.items()} if args else dict(value)
    raise ValueError(shape)


@dataclass(frozen=True)
class SharedKnobs(Knobs):
    """The knobs more than one role (or hgxkit outside the roles) reads; a role's class takes them by `shared`."""

    recipe: str = declare(
        SEED_RECIPE,
        "the recipe file (relative to where pyinfra runs, or to the hgxkit checkout); per host or group. The "
        "default is the seed post's marlin recipe, which deploys/dspark.py serves; deploys/reproduce.py refuses "
        "to guess and asks for --data recipe=FILE.",
    )
    expected_gpu_count: int | None = declare(8, "NVIDIA GPUs a node must have (8 for HGX-H200); None skips the checks.")
    models_dir: str = declare(
        "/data/models", "where models live on the node; recipes' model directories must resolve under it."
    )
    model_dirs_allowed: list[str] = declare(
        [],
        'more directories a recipe\'s model.local_dir may be under (e.g. ["/mnt/nvme/models"]); every other place '
        "(/etc, /root, a symlink leaving them, ...) is refused before anything is written.",
    )
    serve_total_gpus: int | None = declare(None, "GPUs to plan serving groups over; None: as many as nvidia-smi lists.")
    bind_address: str = declare(
        "127.0.0.1", "host address the serving groups' published ports bind to (127.0.0.1 keeps the API local)."
    )
    api_key: str | None = declare(
        None, 'None, or "auto": a key generated once per host, root-only at serve_api_key_file.'
    )
    serve_state_dir: str = declare(
        "/var/lib/hgxkit/serve", "where the serving role records what it runs (image digest) on the node."
    )
    serve_api_key_file: str = declare("/etc/hgxkit/serve/api-key", "where the API key lives on the node (root-only).")
    state_dir: str = declare("/var/lib/hgxkit", "hgxkit's own state on the node (records, locks).")
    host_lock_wait_s: float = declare(
        0,
        "how long a run waits for another hgxkit run on the same node to finish (0: refuse at once, naming the "
        "other run's PID and start time; hgxkit/hostlock.py).",
    )
    bundle: str | None = declare(
        None,
        "None, or a bundle directory on the controller (`hgxkit bundle create`): every role reads only from it (apt "
        "repositories, the image, the model, pip's wheels). It is copied to each node over the deploy's SSH "
        "connection and verified there before anything is installed from it (hgxkit/bundle/source.py); a "
        "bundle.json whose hash was edited stops the run first.",
    )
    bundle_fingerprint: str | None = declare(
        None,
        "None, or the bundle key's fingerprint as the bundle's maker gave it to the site another way: bundle.json "
        "must then carry a valid signature by that key, or the run stops before any change.",
    )
    recheck: bool = declare(
        False,
        "true: run every bring-up role and gate even when the node is unchanged since they last all passed (by "
        "default such a re-run skips them and says why; hgxkit/node/converged.py).",
    )
    group_hosts: str | list[str] | None = declare(
        None,
        "a server spanning nodes (recipe `groups.nodes`): the hosts of this host's group in rank order (inventory "
        "host names, rank 0 first), or the name of an inventory group whose hosts, in inventory order, are the "
        "ranks. None: every inventory host serving the same recipe, in inventory order, `groups.nodes` at a time "
        "(hgxkit/serving/multinode.py).",
    )
    fabric_address: str | None = declare(
        None,
        "the address the other nodes of a multi-node group reach this host at (the head's goes into "
        "--dist-init-addr; an IPv4 address is safest). None: `model_peer_address`, else refused.",
    )
    dist_port: int | None = declare(
        None, "the rendezvous port on a multi-node group's head; None: the recipe's `groups.dist_port`."
    )
    monitoring: bool = declare(
        False,
        "true: exporters, Prometheus and its alert rules stay on the node (roles/monitoring); verify then reads "
        "each cell's telemetry from Prometheus.",
    )
    monitoring_host: str | None = declare(
        None, "the inventory host that runs Prometheus; None: the first host with `monitoring: true`."
    )
    prometheus_port: int = declare(9090, "Prometheus' port on the monitoring host.")
    prometheus_bind_address: str = declare("127.0.0.1", "the address Prometheus listens on.")
    prometheus_scrape_interval: str = declare(
        "15s", "how often Prometheus scrapes (also the resolution of verify's telemetry from it)."
    )
    router: bool = declare(
        False,
        "False. True: run an SGLang router (sglang-router, the SGLang Model Gateway) fronting every serving group of "
        "every inventory host. Benchmarks still address each group directly (speculative accept length is per "
        "server), save a prefill/decode split's, which only the router serves (and needs it true).",
    )
    router_port: int = declare(30000, "the router's port (its default, 30000).")
    router_policy: str = declare(
        "cache_aware",
        "load-balancing policy: random, round_robin, power_of_two, cache_aware (prefix-cache aware, the router's "
        "default) or bucket.",
    )
    router_host: str | None = declare(
        None,
        "the inventory host that runs the router; None: the first host with `router: true`.",
    )
    model_peer_address: str | None = declare(
        None,
        "set on a host: the address other hosts reach it at (model peer copies, router workers, scrape targets); "
        "default: its ssh_hostname, else its inventory name.",
    )
    allow_unauthenticated: bool = declare(
        False,
        "serve a non-loopback bind_address (groups, router, image cache) without a key; warns on every run.",
    )
    allow_docker_options: list[str] = declare(
        [],
        "the dangerous Docker options a recipe may use on this node, by danger name, option or class (e.g. "
        '["--privileged"]); any other is refused (hgxkit/recipe/danger.py).',
    )
    recipe_env_allowlist: list[str] | None = declare(
        None,
        "the names a recipe's {{env:NAME}} may take from the operator's environment (None: HF_TOKEN and the kind's "
        "API-key variable, VLLM_API_KEY or SGLANG_API_KEY); any other is refused. Values reach the container only "
        "through root-only files (hgxkit/recipe/secretenv.py).",
    )
    verify: bool = declare(True, "deploys/reproduce.py and dspark.py benchmark what they serve (false: serve only).")
    hgxkit_simulated: bool = declare(
        False, "set by inventories/sim.py: a simulated node, whose roles may relax hardware-only checks."
    )
    nvidia_driver_versions: list[str] = declare(
        [], "set by inventories/sim.py: every simulated driver version, oldest first (for pin and mismatch tests)."
    )


SHARED_DEFAULTS: dict[str, Any] = SharedKnobs.defaults()


def shared(name: str) -> Any:
    """The field of shared knob `name`, for a role's knob class (its type is written there again, and
    tests/unit/core/test_role_knobs.py checks that it matches)."""
    found = {f.name: f for f in fields(SharedKnobs)}.get(name)
    if found is None:
        raise KeyError(f"not a shared knob: {name} (see hgxkit/knobs.py)")
    return declare(_default_of(found), found.metadata["doc"])


def knob(host: Any, name: str) -> Any:
    """The value of shared knob `name` for `host`: inventory or `--data`, cast, else its default here."""
    kind = _types(SharedKnobs)[name]
    raw = host.data.get(name, _ABSENT)
    if raw is _ABSENT or (raw is None and not _allows_none(kind)):
        return SHARED_DEFAULTS[name]
    return cast_knob(name, raw, kind)


def ssh_hostname(host: Any) -> str | None:
    """pyinfra's `ssh_hostname` of `host` (its SSH address), when the inventory sets one."""
    value = host.data.get("ssh_hostname")
    return str(value) if value else None


@cache
def pyinfra_data_names() -> tuple[frozenset[str], tuple[str, ...]]:
    """The data keys pyinfra itself reads: its operation arguments (`_sudo`, `_env`, ...) and its connectors'
    keys (`ssh_user`, ...), and the prefix of each connector (`docker_`, `chroot_`, ...) whose keys it sets.
    Once per process: the connectors come from the installed packages' entry points (~10 ms to scan)."""
    from pyinfra.api.arguments import all_argument_meta
    from pyinfra.api.connectors import get_all_connectors

    connectors = get_all_connectors()
    names = set(all_argument_meta)
    for connector in connectors.values():
        names.update(getattr(connector, "data_meta", None) or {})
    return frozenset(names), tuple(sorted({f"{name}_" for name in connectors} | {"ssh_"}))


def refuse_unknown_knobs(
    given: Iterable[str], known: Iterable[str], more: Callable[[], Iterable[str]] = frozenset
) -> None:
    """Stop the run when the host's data names a knob that is neither in `known` (nor in `more()`) nor pyinfra's
    own, with the closest known name: `unknown knob 'modles_dir' (did you mean models_dir?)`. `more()` is read
    only for a name that is none of `known`, pyinfra's operation arguments and its SSH keys, and pyinfra's
    connectors (their entry points) only for a name still unknown: each costs the controller a few ms a run."""
    from pyinfra.api.arguments import all_argument_meta

    known = set(known)
    left = [n for n in given if n not in known and n not in all_argument_meta and not n.startswith("ssh_")]
    if left:
        known.update(more())
        left = [n for n in left if n not in known]
    if not left:
        return
    own, prefixes = pyinfra_data_names()
    unknown = sorted(n for n in left if n not in own and not n.startswith(prefixes))
    if unknown:
        stop("; ".join(_unknown_line(name, known) for name in unknown))


def _unknown_line(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f"did you mean {close[0]}?" if close else "every knob is in roles/<role>/defaults.py and hgxkit/knobs.py"
    return f"unknown knob {name!r} ({hint})"
