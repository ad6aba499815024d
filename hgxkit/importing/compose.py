"""A docker compose file (the compose spec) as the `docker run` of each serving service, so that check, render
and the node's policy judge it like any posted `docker run`.

A service with GPUs (`deploy.resources.reservations.devices`, `gpus`, `runtime: nvidia`) or whose command
launches a server is a serving command; the others (a web UI, a proxy) are set aside, each saying so. Each key
becomes the `docker run` option compose itself passes: `devices` with `count`/`device_ids` become `--gpus`,
`ports` and `volumes` in short and long form `-p`/`-v`/`--tmpfs`, `environment` (map or list) `-e`, `env_file`
`--env-file`, `ulimits` `--ulimit`, `command`/`entrypoint` (a string split as compose splits it, a list as
argv) the container's command. `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?msg}` and `$$` are
interpolated as compose does, from the post's `NAME=value` lines (its `.env`); a variable left unset is refused
by name, except the host's `HOME`/`USER`/`PWD` and credentials, which stay for the host's environment to give.
What compose sets that a recipe cannot hold (`build`, `extends`, `secrets`, `configs`, another service's
network) is refused naming the key; what changes nothing a container feels (`healthcheck`, `depends_on`,
`restart` policy aside) is a note. Several serving services are the GPU groups of one setup or are told apart
by `--pick N` (the importer's rule for several serving commands).

Example:
    >>> from hgxkit.importing.documents import load_documents, yaml_regions
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("compose.yaml", "services:\\n  llm:\\n    image: vllm/vllm-openai:v0.9.0\\n"
    ...                  "    command: --model org/m\\n    ipc: host\\n    ports: ['8000:8000']\\n"
    ...                  "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: 1,"
    ...                  " capabilities: [gpu]}]}}}\\n")
    >>> [simple] = COMPOSE.simples(load_documents(post, yaml_regions(post)[0]))
    >>> " ".join(simple.texts)
    'docker run --gpus 1 --ipc host -p 8000:8000 vllm/vllm-openai:v0.9.0 --model org/m'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.documents import (
    LINE,
    LINES,
    SHAPE_ERRORS,
    Document,
    WordAt,
    as_input_error,
    container_command,
    document_simple,
    refused,
    shell_words,
    take_document,
)
from hgxkit.importing.provenance import PREFIX as PROVENANCE
from hgxkit.importing.provenance import exported_by_hgxkit
from hgxkit.importing.reading import Reading
from hgxkit.kinds import KINDS, UNSUPPORTED, image_matches, python_program
from hgxkit.secrets import is_secret_name

_VARIABLE = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
HEAD_VARIABLE = "HGXKIT_HEAD"  # the head node's address in a compose file hgxkit exported for a node rank
HEAD_STANDIN = "hgxkit-head"  # what it reads as until the ranks' head flag becomes `{{head}}`
_HOST_VARIABLES = frozenset({"HOME", "USER", "PWD"})  # the host's shell has them: kept as `$NAME`
# Keys a recipe cannot hold: refused, naming the key and what to do instead.
_REFUSED = {
    "build": "the image is built from a local checkout, which a node cannot pull: give --image REF or `image:`",
    "extends": "the service extends another file's service: give the merged file (`docker compose config`)",
    "secrets": "compose secrets are files mounted at /run/secrets: pass the value as an environment variable",
    "configs": "compose configs are files the manifest does not hold: mount the file with `volumes:`",
    "volumes_from": "it mounts another container's volumes: mount the host directories with `volumes:`",
    "scale": "several replicas of one service: import one; hgxkit places GPU groups itself",
}
# Keys that change nothing the container runs with: each a note.
_NOTED = {
    "healthcheck": "hgxkit checks the server's health itself",
    "depends_on": "the services it waits for are not part of the recipe",
    "restart": "hgxkit starts and watches the container itself",
    "logging": "the logs are docker's default; hgxkit archives them",
    "networks": "the container is on docker's default network",
    "expose": "exposed ports are documentation only",
    "profiles": "profiles choose services; the serving one is imported",
    "stop_grace_period": "hgxkit stops the container itself",
    "pull_policy": "hgxkit pulls the image itself and records its digest",
    "container_name": "",
    "labels": "",
}
# Keys with a `docker run` option of the same meaning: (option, how the value is written).
_OPTIONS = {
    "ipc": "--ipc",
    "pid": "--pid",
    "shm_size": "--shm-size",
    "user": "--user",
    "working_dir": "--workdir",
    "hostname": "--hostname",
    "runtime": "--runtime",
    "platform": "--platform",
    "cpus": "--cpus",
    "mem_limit": "--memory",
    "userns_mode": "--userns",
    "stop_signal": "--stop-signal",
}
_LISTS = {
    "cap_add": "--cap-add",
    "cap_drop": "--cap-drop",
    "security_opt": "--security-opt",
    "devices": "--device",
    "group_add": "--group-add",
    "dns": "--dns",
    "extra_hosts": "--add-host",
    "tmpfs": "--tmpfs",
}
_SWITCHES = {
    "privileged": "--privileged",
    "init": "--init",
    "stdin_open": "--interactive",
    "tty": "--tty",
    "read_only": "--read-only",
}
_KNOWN = {
    "image",
    "command",
    "entrypoint",
    "deploy",
    "gpus",
    "network_mode",
    "ports",
    "volumes",
    "environment",
    "env_file",
    "ulimits",
    "sysctls",
    LINE,
    LINES,
}


class Compose:
    """A compose file: each serving service a `docker run` (see the module docstring)."""

    name = "docker compose"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "compose"

    def take(self, simple: Simple, reading: Reading) -> None:
        take_document(simple, reading)

    def claims_document(self, data: Any) -> bool:
        return isinstance(data, dict) and isinstance(data.get("services"), dict)

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        out = []
        for document in documents:
            fragment = "services" not in document.data
            services = document.data if fragment else document.data["services"]
            names = [n for n in services if n not in (LINE, LINES)]
            starts = [services[LINES].get(n, document.first) for n in names]
            for index, (name, line) in enumerate(zip(names, starts, strict=True)):
                service = services[name]
                # each service's lines run to the next one's; the first and last take the file's head and tail
                first = document.first if index == 0 else line
                last = starts[index + 1] - 1 if index + 1 < len(starts) else document.last
                if not isinstance(service, dict):
                    raise InputError(f"{document.where(line)}: services.{name}: a service is a mapping of keys")
                if not _serving(service):
                    why = f"service {name} ({service.get('image', 'no image')}): no GPUs and no server, not imported"
                    out.append(document_simple(document, "compose", (), first, last, [why]))
                    continue
                engine = _engine_image(service.get("image"))
                if engine is not None:  # an engine refused by name: its image is all the refusal needs
                    words = [("docker", line), ("run", line), (str(service["image"]), line)]
                    out.append(document_simple(document, "compose", words, first, last))
                    continue
                try:
                    words, notes = _Service(document, name, service).run_words()
                    notes += [FRAGMENT_NOTE] if fragment else []
                except (InputError, *SHAPE_ERRORS) as err:  # this service cannot be imported; another may be
                    error = as_input_error(err, document.where(line), f"service {name}")
                    out.append(refused(document, "compose", error, first, last))
                    continue
                exported = exported_by_hgxkit(dict(_pairs(service.get("labels"))))
                out.append(document_simple(document, "compose", words, first, last, notes, exported))
        return out


COMPOSE = Compose()


class ComposeFragment(Compose):
    """A compose file's services pasted without their `services:` key; offered a document after every other format,
    so a format's own file that looks like one (a chart's values) stays that format's."""

    def claims_document(self, data: Any) -> bool:
        return isinstance(data, dict) and "services" not in data and services_fragment(data)


COMPOSE_FRAGMENT = ComposeFragment()


FRAGMENT_NOTE = "a compose file's services with no `services:` key above them: read as that file's services"


def services_fragment(data: dict) -> bool:
    """True for a compose file's services pasted without their `services:` key (a fence of indented services): a
    mapping whose every entry is a mapping with an `image` or `build`, one of them with a key only a compose service
    has (`container_name`, `ports`, `volumes`, `ipc`, …)."""
    entries = [value for key, value in data.items() if key not in (LINE, LINES)]
    return (
        bool(entries)
        and all(isinstance(e, dict) and ("image" in e or "build" in e) for e in entries)
        and any(key in _FRAGMENT_SIGNS for e in entries for key in e)
    )


_FRAGMENT_SIGNS = {"container_name", "ports", "volumes", "ipc", "shm_size", "deploy", "runtime", "networks", "restart"}


def _serving(service: dict) -> bool:
    """A service with GPUs, or one whose image or command is a server (or an engine refused by name)."""
    if service.get("gpus") or service.get("runtime") == "nvidia" or _gpu_devices(service):
        return True
    image = str(service.get("image") or "")
    if any(image_matches(image, k.images) for k in KINDS.values()) or "build" in service:
        return True
    if any(image_matches(image, o.images) for o in UNSUPPORTED):
        return True
    words = [str(w) for key in ("entrypoint", "command") for w in _as_list(service.get(key))]
    return any(k.launches(python_program(words)) for k in KINDS.values())


def _engine_image(image: object) -> object:
    """The engine hgxkit refuses by name whose image this is (TGI, NIM, …), or None."""
    return next((o for o in UNSUPPORTED if image_matches(str(image or ""), o.images)), None)


def _gpu_devices(service: dict) -> list[dict]:
    deploy = service.get("deploy") or {}
    devices = ((deploy.get("resources") or {}).get("reservations") or {}).get("devices") or []
    return [
        d
        for d in devices
        if isinstance(d, dict) and ("gpu" in (d.get("capabilities") or []) or d.get("driver") == "nvidia")
    ]


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return value.split() if isinstance(value, str) else list(value)


class _Service:
    """One service's `docker run` words, each with its line; notes for what was translated."""

    def __init__(self, document: Document, name: str, service: dict) -> None:
        self.document = document
        self.name = name
        self.service = service
        self.lines = service.get(LINES, {})
        self.line = service.get(LINE, document.first)
        self.words: list[WordAt] = []
        self.notes: list[str] = []

    def where(self, key: str | None = None) -> str:
        return self.document.where(self.lines.get(key, self.line) if key else self.line)

    def add(self, key: str, *texts: str) -> None:
        line = self.lines.get(key, self.line)
        self.words += [(text, line) for text in texts]

    def value(self, key: str, value: Any) -> str:
        """A scalar with compose's interpolation done (the word encoding: a literal `$` is `$$`)."""
        text = (
            value
            if isinstance(value, str)
            else ("true" if value is True else "false" if value is False else "" if value is None else str(value))
        )
        return interpolate(text, self.document.environment, f"{self.where(key)}: {self.name}.{key}", self.notes)

    def run_words(self) -> tuple[list[WordAt], list[str]]:
        service = self.service
        for key in service:
            if key in _REFUSED:
                raise InputError(f"{self.where(key)}: services.{self.name}.{key}: {_REFUSED[key]}")
            if _NOTED.get(key):
                self.notes.append(f"{self.where(key)}: services.{self.name}.{key} not carried: {_NOTED[key]}")
            elif (
                key not in _NOTED
                and key not in _KNOWN
                and key not in _OPTIONS
                and key not in _LISTS
                and key not in _SWITCHES
                and not str(key).startswith("x-")
            ):
                raise InputError(
                    f"{self.where(key)}: services.{self.name}.{key}: a compose key hgxkit does not "
                    "carry into a `docker run`; remove it or run the container by hand"
                )
        self._essentials_first()
        self.words.append(("docker", self.line))
        self.words.append(("run", self.line))
        if "container_name" in service:
            self.add("container_name", "--name", self.value("container_name", service["container_name"]))
        self._gpus()
        for key, option in _OPTIONS.items():
            if key in service:
                self.add(key, option, self.value(key, service[key]))
        for key, option in _SWITCHES.items():
            if service.get(key) is True:
                self.add(key, option)
        for key, option in _LISTS.items():
            for item in _as_list(service.get(key)) if not isinstance(service.get(key), str) else [service[key]]:
                self.add(key, option, self.value(key, item))
        self._network()
        self._ports()
        self._volumes()
        self._environment()
        self._ulimits()
        for name, value in _pairs(service.get("sysctls")):
            self.add("sysctls", "--sysctl", f"{name}={self.value('sysctls', value)}")
        for name, value in _pairs(service.get("labels")):
            if str(name).startswith(PROVENANCE):
                continue  # an hgxkit export's record of its recipe: read into the recipe's fields (provenance)
            self.add("labels", "--label", f"{name}={self.value('labels', value)}")
        return self._program(), self.notes

    def _essentials_first(self) -> None:
        """Interpolate the command, the image and the entrypoint before the rest, their results dropped: of the
        variables a post leaves unset, the one refused is then the model's or the image tag's, not the first in
        the file (a container's name, a port)."""
        scratch: list[str] = []
        for key in ("command", "image", "entrypoint"):
            value = self.service.get(key)
            for item in value if isinstance(value, list) else [] if value is None else [value]:
                interpolate(str(item), self.document.environment, f"{self.where(key)}: {self.name}.{key}", scratch)

    def _program(self) -> list[WordAt]:
        service = self.service
        if "image" not in service:
            raise InputError(f"{self.where()}: services.{self.name}: no `image`; give the image the service runs")
        image = self.value("image", service["image"])
        entrypoint = self._argv("entrypoint") if "entrypoint" in service else None
        command = self._argv("command") if "command" in service else []
        option, words, notes = container_command(image, entrypoint, command, self.where("entrypoint"))
        self.notes += notes
        if option is not None:
            self.add("entrypoint", "--entrypoint", option)
        self.add("image", image)
        key = "command" if "command" in service else "entrypoint"
        self.add(key, *words)
        return self.words

    def _argv(self, key: str) -> list[str]:
        value = self.service[key]
        if isinstance(value, str):
            return shell_words(self.value(key, value), self.where(key))
        return [self.value(key, item) for item in value or []]

    def _gpus(self) -> None:
        service = self.service
        if "gpus" in service:
            gpus = service["gpus"]
            if gpus == "all" or gpus == -1:
                self.add("gpus", "--gpus", "all")
            else:
                ids = [str(g.get("device_ids", g.get("count", ""))) if isinstance(g, dict) else str(g) for g in gpus]
                self.add("gpus", "--gpus", f'"device={",".join(ids)}"')
        for device in _gpu_devices(service):
            line = device.get(LINE, self.line)
            driver = device.get("driver", "nvidia")
            if driver != "nvidia":
                raise InputError(
                    f"{self.document.where(line)}: services.{self.name}: GPU driver {driver}; hgxkit "
                    "serves NVIDIA HGX-H200 nodes"
                )
            at = max(device.get(LINES, {}).values(), default=line)  # the device's last key: the GPUs it names
            if "device_ids" in device:
                ids = ",".join(self.value("deploy", i) for i in device["device_ids"])
                self.words += [("--gpus", line), (f'"device={ids}"', at)]
            else:
                count = device.get("count", "all")
                self.words += [("--gpus", line), ("all" if count in ("all", -1) else self.value("deploy", count), at)]
            extra = [c for c in device.get("capabilities") or [] if c != "gpu"]
            if extra:
                self.notes.append(
                    f"{self.document.where(line)}: services.{self.name}: capabilities {extra} not "
                    "carried (the NVIDIA runtime gives compute and utility)"
                )
        limits = ((self.service.get("deploy") or {}).get("resources") or {}).get("limits") or {}
        for key, option in (("cpus", "--cpus"), ("memory", "--memory")):
            if key in limits:
                self.words += [
                    (option, limits.get(LINE, self.line)),
                    (self.value("deploy", limits[key]), limits.get(LINE, self.line)),
                ]

    def _network(self) -> None:
        mode = self.service.get("network_mode")
        if mode is None:
            return
        mode = self.value("network_mode", mode)
        if mode.startswith(("service:", "container:")):
            raise InputError(
                f"{self.where('network_mode')}: services.{self.name}.network_mode: {mode} shares "
                "another container's network, which the recipe does not start"
            )
        self.add("network_mode", "--network", mode)

    def _ports(self) -> None:
        for port in self.service.get("ports") or []:
            if isinstance(port, dict):
                target = self.value("ports", port.get("target", ""))
                published = self.value("ports", port.get("published", "")) if "published" in port else ""
                host = self.value("ports", port["host_ip"]) + ":" if port.get("host_ip") else ""
                protocol = f"/{port['protocol']}" if port.get("protocol") not in (None, "tcp") else ""
                spec = f"{host}{published}:{target}{protocol}" if published else f"{target}{protocol}"
                self.words += [("-p", port.get(LINE, self.line)), (spec, port.get(LINE, self.line))]
            else:
                self.add("ports", "-p", self.value("ports", port))

    def _volumes(self) -> None:
        for volume in self.service.get("volumes") or []:
            if not isinstance(volume, dict):
                text = self.value("volumes", volume)
                if text.startswith("."):
                    self.notes.append(
                        f"{self.where('volumes')}: -v {text}: compose resolves a relative path "
                        "against the compose file's directory; docker against its working "
                        "directory"
                    )
                self.add("volumes", "-v", text)
                continue
            line = volume.get(LINE, self.line)
            kind = volume.get("type", "volume")
            target = self.value("volumes", volume.get("target", ""))
            if kind == "tmpfs":
                size = (volume.get("tmpfs") or {}).get("size")
                self.words += [("--tmpfs", line), (f"{target}:size={size}" if size else target, line)]
                continue
            if kind not in ("bind", "volume"):
                raise InputError(
                    f"{self.document.where(line)}: services.{self.name}.volumes: type {kind} is not "
                    "carried; use a bind mount"
                )
            source = self.value("volumes", volume.get("source", ""))
            mode = ":ro" if volume.get("read_only") else ""
            self.words += [("-v", line), (f"{source}:{target}{mode}" if source else target, line)]

    def _environment(self) -> None:
        environment = self.service.get("environment")
        if isinstance(environment, dict):
            for name, value in environment.items():
                if name in (LINE, LINES):
                    continue
                at = environment[LINES].get(name, self.line)
                text = f"{name}" if value is None else f"{name}={self.value('environment', value)}"
                self.words += [("-e", at), (text, at)]
        else:
            for item in environment or []:
                self.add("environment", "-e", self.value("environment", item))
        env_file = self.service.get("env_file")
        for item in [env_file] if isinstance(env_file, str) else env_file or []:
            path = item.get("path") if isinstance(item, dict) else item
            self.add("env_file", "--env-file", self.value("env_file", path))

    def _ulimits(self) -> None:
        for name, value in _pairs(self.service.get("ulimits")):
            if isinstance(value, dict):
                text = f"{name}={self.value('ulimits', value.get('soft'))}:{self.value('ulimits', value.get('hard'))}"
            else:
                text = f"{name}={self.value('ulimits', value)}"
            self.add("ulimits", "--ulimit", text)


def _pairs(value: Any) -> list[tuple[str, Any]]:
    """A compose map (or `NAME=value` list) as (name, value) pairs."""
    if isinstance(value, dict):
        return [(k, v) for k, v in value.items() if k not in (LINE, LINES)]
    return [tuple(item.split("=", 1)) if "=" in item else (item, "") for item in value or []]  # type: ignore[misc]


def _note_once(notes: list[str], note: str) -> None:
    """Add `note` unless it is there: a variable used twice in one value is said once."""
    if note not in notes:
        notes.append(note)


def interpolate(text: str, environment: dict[str, str], where: str, notes: list[str]) -> str:
    """`text` with compose's `${VAR}` forms resolved from `environment`, as a word's text (see the module
    docstring): a variable set nowhere is refused, except the host's own and credentials, kept as `${NAME}`.

    Example:
        >>> interpolate("${MODEL:-org/m} $$x ${HOME}/c", {}, "f:1", [])
        'org/m $$x ${HOME}/c'
    """

    def one(match: re.Match[str]) -> str:
        if match.group(1):
            return "$$"
        name = match.group(2) or match.group(5)
        operator, word = match.group(3), match.group(4) or ""
        value = environment.get(name)
        is_set = value is not None and (value != "" or not (operator or "").startswith(":"))
        if operator in ("-", ":-") and is_set:
            return value.replace("$", "$$")  # type: ignore[union-attr]
        if operator in ("-", ":-"):
            _note_once(
                notes,
                f"{where}: ${{{name}}} is not set by the post, so its default {word!r} is taken "
                f"(compose takes {name} from the shell or the project's .env first)",
            )
            return interpolate(word, environment, where, notes)
        if name == HEAD_VARIABLE and not is_set and operator not in ("-", ":-", "+", ":+"):
            # hgxkit's export writes the head node's address so; hgxkit gives each rank the head's itself
            notes.append(f"{where}: ${{{name}}} is the head node's address (hgxkit's export); each deploy gives it")
            return HEAD_STANDIN
        if operator in ("?", ":?") and not is_set:
            raise InputError(
                f"{where}: ${{{name}}} is required ({word or 'no message'}) and the post does not "
                "set it; add NAME=value to the .env lines"
            )
        if operator in ("+", ":+"):
            return interpolate(word, environment, where, notes) if is_set else ""
        if value is not None:
            notes.append(f"{where}: ${{{name}}} is the post's {name}={value}")
            return value.replace("$", "$$")
        if name in _HOST_VARIABLES or is_secret_name(name):
            notes.append(f"{where}: ${{{name}}} is not set by the post; the host's environment gives it")
            return "${" + name + "}"
        if text.startswith(f"{name}="):  # `PYTHONPATH=/x:$PYTHONPATH`: appends to the shell's own, unset here
            _note_once(
                notes,
                f"{where}: ${{{name}}} in {name}'s own value is the {name} of the shell that runs compose, which the "
                "post does not set: empty, as compose reads an unset variable",
            )
            return ""
        raise InputError(
            f"{where}: ${{{name}}} is not set by the post and has no default; give its value in "
            f"the post's .env lines ({name}=…) or write ${{{name}:-default}}"
        )

    return _VARIABLE.sub(one, text)
