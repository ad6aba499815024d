"""Where an imported recipe's model lives, so that the deploy can place it before the server starts.

A Hub id (`--model-path org/name`, vLLM's positional model) becomes `model.repo_id`, stored at
`<models_dir>/<name>` on the host and mounted read-only at `/models/<name>`; the server is pointed at that
verified local copy (its model flag rewritten, a bind mount added) and told to answer to the name clients
used (`--served-model-name org/name`, unless the post names one), so posted benchmarks still match. A path
under a mounted directory (`-v /data:/data --model-path /data/models/x`) is kept as it is: `local_dir` is the
host side; `--model-repo` says which Hub repo it holds. Anything else is one error naming `--model-repo`.

Example:
    >>> from hgxkit.recipe.spec import DockerSpec
    >>> from hgxkit.recipe.server_args import ServerCommand
    >>> server = ServerCommand.from_words(["sglang", "serve", "--model-path", "org/Name-7B"], "sglang")
    >>> placed = place_model(DockerSpec(("docker", "run"), ()), server, where="p:1")
    >>> placed.model.local_dir, " ".join(placed.server.words()[2:])
    ('/data/models/Name-7B', '--model-path /models/Name-7B --served-model-name org/Name-7B')
    >>> [e.words for e in placed.docker.entries]
    [('-v', '/data/models/Name-7B:/models/Name-7B:ro')]
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from hgxkit.errors import InputError
from hgxkit.importing.commands import PLACEHOLDER
from hgxkit.recipe.docker_parse import parse_option_words
from hgxkit.recipe.schema import ABSOLUTE_PATH, REPO_ID
from hgxkit.recipe.server_args import ServerCommand, is_flag
from hgxkit.recipe.shellwords import shell_value
from hgxkit.recipe.spec import DockerSpec, ModelSpec

DEFAULT_MODELS_DIR = "/data/models"
MOUNT_ROOT = "/models"
HUB_CACHE = "/root/.cache/huggingface"
# A mount's host side written relative to a directory (`./models`, `models/`, `../data`): not `/…`, `~`, `$X`.
_RELATIVE_SOURCE = re.compile(r"^(?:\.{1,2}/|\.{1,2}$|[A-Za-z0-9_][\w.-]*/)")
# Values that stand for a model without being one: `<model>`, `xxx`, `/path/to/…`, `your-model`.
_PLACEHOLDER_MODEL = re.compile(r"(?i)^(?:x{2,}|model|your[-_].*|.*/path/to/.*|\.\.\.)$")


@dataclass(frozen=True)
class Placed:
    """The model spec, and the docker options and server command that serve it."""

    model: ModelSpec
    docker: DockerSpec
    server: ServerCommand
    notes: tuple[str, ...]


def place_model(
    docker: DockerSpec,
    server: ServerCommand,
    *,
    where: str,
    model_repo: str | None = None,
    revision: str = "main",
    models_dir: str = DEFAULT_MODELS_DIR,
    ties: dict[str, str] | None = None,
    unset_from: str = "",
) -> Placed:
    """Place the model `server` serves (see the module docstring); raise InputError when it cannot be placed.
    `unset_from` says where a variable the post does not set may come from (`reading.sourced_before`)."""
    kind = server.server_kind
    found = _model_entry(server)
    word = server.args[found[0]][found[1]] if found else None
    if found and found[1] == 0 and word is not None and is_flag(word):
        word = word.split("=", 1)[1]  # `--model-path=org/name`: the value is after the sign
    value = shell_value(word) if word is not None else None
    if value is not None and (PLACEHOLDER.fullmatch(value) or _PLACEHOLDER_MODEL.match(value)):
        raise InputError(
            f"{where}: the model {value!r} is a placeholder, not a model; write the model's Hub id or path"
        )
    if value is not None and value.startswith("/") and "$" not in value:
        local = _mounted(docker, value)
        if local is not None:
            model = ModelSpec(
                repo_id=model_repo, revision=revision, local_dir=local, mount_point=posixpath.normpath(value)
            )
            note = f"{where}: the model {value} is the host's {local} (mounted); the deploy uses it as it is"
            if model_repo is None:
                note += "; pass --model-repo ID to say which Hub repo it holds"
            docker, dropped = _without_hub_cache(docker, local)
            return Placed(model, docker, server, (note, *_dropped_notes(where, dropped, "the host's folder")))
    hub_id = value if value is not None and _is_hub_id(value) else None
    if hub_id is not None and model_repo is None:
        _refuse_gguf(hub_id, where)
    tied = (ties or {}).get(posixpath.basename(posixpath.normpath(value))) if value and not hub_id else None
    if value is not None and hub_id is None and tied and not value.startswith("/") and "$" not in value:
        hub_id = None  # a local directory the post downloads: its repo is known
    else:
        tied = None
    repo = model_repo or hub_id or tied
    if repo is None:
        raise InputError(
            f"{where}: {_why_not(value, kind.model_flag, docker, unset_from)}; pass --model-repo ORG/NAME "
            "(the Hub repo it holds)"
        )
    notes = []
    if tied and not model_repo:
        notes.append(f"{where}: the model {value} is the post's download of {tied} (--local-dir); {tied} is placed")
    if model_repo and hub_id and model_repo != hub_id:
        notes.append(f"{where}: --model-repo {model_repo} is placed instead of the post's {hub_id}")
    name = repo.rsplit("/", 1)[-1]
    local_dir = posixpath.join(models_dir, name)
    mount_point = posixpath.join(MOUNT_ROOT, name)
    mount = parse_option_words(["-v", f"{local_dir}:{mount_point}:ro"], source=where)
    docker = DockerSpec(docker.invocation, (*docker.entries, *mount))
    model = ModelSpec(repo_id=repo, revision=revision, local_dir=local_dir, mount_point=mount_point)
    if found is None:
        notes.append(
            f"{where}: the server command has no {kind.model_flag} hgxkit can rewrite; {repo} is placed at "
            f"{local_dir} and mounted at {mount_point}, but the server loads whatever its command names"
        )
        return Placed(model, docker, server, tuple(notes))
    server = _rewrite(server, found, mount_point)
    server = _files_within(server, value, mount_point, where, notes) if value is not None else server
    notes.append(
        f"{where}: the model {value} is placed at {local_dir} on the host and served from {mount_point} "
        f"(mounted read-only; {kind.model_flag} rewritten), so the server runs the verified copy"
    )
    if not server.has("--served-model-name"):
        served = hub_id or (value if tied else repo)
        server = ServerCommand(server.program, (*server.args, ("--served-model-name", served)), server.kind)
        notes.append(f"{where}: --served-model-name {served} added, so clients still ask for {served}")
    docker, dropped = _without_hub_cache(docker, local_dir)
    notes += _dropped_notes(where, dropped, "its verified copy")
    return Placed(model, docker, server, tuple(notes))


def _dropped_notes(where: str, dropped: list[str], served_from: str) -> list[str]:
    return [
        f"{where}: the mount {shell_value(value)} is dropped: the model is served from {served_from}, so the "
        "container needs no Hugging Face cache (and a mount of root's home would hand it the host's token)"
        for value in dropped
    ]


def _without_hub_cache(docker: DockerSpec, local_dir: str) -> tuple[DockerSpec, list[str]]:
    """`docker` without the option entries that only mount a Hugging Face cache at HUB_CACHE (its `hub/`, or root's
    `.cache` that holds it), unless the mount holds `local_dir` (a model served from inside the cache)."""
    from hgxkit.recipe.docker_options import canonical
    from hgxkit.recipe.spec import parse_mount, parse_volume

    kept, dropped = [], []
    for entry in docker.entries:
        parsers = {"--volume": parse_volume, "--mount": parse_mount}
        mounts = [
            (use.value or "", parsers[canonical(use.option.name)](use.value or ""))
            for use in entry.uses
            if canonical(use.option.name) in parsers
        ]
        if (
            len(mounts) == len(entry.uses) == 1
            and _caches_hub(mounts[0][1].target)
            and not (local_dir.rstrip("/") + "/").startswith(mounts[0][1].source.rstrip("/") + "/")  # holds it
        ):
            dropped.append(mounts[0][0])
            continue
        kept.append(entry)
    return DockerSpec(docker.invocation, tuple(kept)), dropped


def _refuse_gguf(hub_id: str, where: str) -> None:
    """Refuse a GGUF repository: a .gguf file per quantization, none chosen, which a deploy would fetch whole."""
    if re.search(r"[-_.]gguf$", hub_id, re.IGNORECASE):
        raise InputError(
            f"{where}: the model {hub_id} is a GGUF repository (a .gguf file per quantization, none of them chosen), "
            "which a deploy would fetch whole; serve the model's own repository (--model-repo ORG/NAME, the one "
            "the GGUF files were made from) or one .gguf file by its path"
        )


def _caches_hub(target: str) -> bool:
    """True for a mount at HUB_CACHE, inside it (its `hub/`), or at root's whole cache directory that holds it."""
    target = target.rstrip("/")
    return (target + "/").startswith(HUB_CACHE + "/") or target == posixpath.dirname(HUB_CACHE)


def _model_entry(server: ServerCommand) -> tuple[int, int] | None:
    """(argument entry, word) of the model value: the kind's model flag, or its positional model."""
    kind = server.server_kind
    found = None
    for index, entry in enumerate(server.args):
        head = entry[0]
        if not is_flag(head):
            launched = not server.program or kind.launches(server.program)
            if index == 0 and kind.positional_model and launched:
                found = (index, 0)
            continue
        flag, has_equals, _ = head.partition("=")
        if kind.canonical_flag(flag) == kind.model_flag and (has_equals or len(entry) > 1):
            found = (index, 0 if has_equals else 1)
    return found


def within(path: str, folder: str) -> bool:
    """True when `path` names something inside `folder` (both as the post writes them, normalised).

    >>> within("./m/chat.jinja", "./m"), within("./m", "./m"), within("./mm/x", "./m")
    (True, False, False)
    """
    return posixpath.normpath(path).startswith(posixpath.normpath(folder).rstrip("/") + "/")


def _files_within(server: ServerCommand, model: str, mount_point: str, where: str, notes: list[str]) -> ServerCommand:
    """`server` with each flag value naming a file of the model's own folder (`--chat-template ./m/t.jinja` beside
    `--model ./m`) written where the placed copy is mounted, a note each."""
    args = []
    for entry in server.args:
        words = list(entry)
        for at, word in enumerate(words):
            flag, glued, value = word.partition("=") if at == 0 else ("", "", word)
            if (at or glued) and within(shell_value(value), model):
                moved = posixpath.join(
                    mount_point, posixpath.relpath(posixpath.normpath(shell_value(value)), posixpath.normpath(model))
                )
                words[at] = f"{flag}={moved}" if at == 0 else moved
                notes.append(
                    f"{where}: {entry[0].partition('=')[0]} {shell_value(value)} is in the model's folder: {moved}"
                )
        args.append(tuple(words))
    return ServerCommand(server.program, tuple(args), server.kind)


def _rewrite(server: ServerCommand, found: tuple[int, int], value: str) -> ServerCommand:
    index, position = found
    entry = list(server.args[index])
    word = entry[position]
    entry[position] = word.split("=", 1)[0] + "=" + value if position == 0 and is_flag(word) else value
    args = list(server.args)
    args[index] = tuple(entry)
    return ServerCommand(server.program, tuple(args), server.kind)


def _holding(docker: DockerSpec, path: str) -> tuple[str, str] | None:
    """(host source, container target) of the last mount that holds container path `path`, or None."""
    path = posixpath.normpath(path)
    for mount in reversed(docker.mounts()):
        target = posixpath.normpath(mount.target) if mount.target else ""
        if target and (path == target or path.startswith(target.rstrip("/") + "/")):
            return mount.source, target
    return None


def _mounted(docker: DockerSpec, path: str) -> str | None:
    """The host path behind container path `path`, when a bind mount of an absolute host directory holds it."""
    held = _holding(docker, path)
    if held is None or not held[0].startswith("/") or "$" in held[0]:
        return None
    source, target = held
    local = posixpath.normpath(source + posixpath.normpath(path)[len(target) :])
    return local if re.fullmatch(ABSOLUTE_PATH, local) else None


def _is_hub_id(value: str) -> bool:
    """True for `org/name`; a bare name (`gpt-oss-120b`) is a local directory the server is started in, and a
    folder's or a stand-in's word where the org goes (`mypath/DeepSeek-V3.2`, `checkpoints/run1`) a relative
    path, never guessed to be a repository."""
    if not re.fullmatch(REPO_ID, value) or "/" not in value or value.startswith((".", "/")) or "$" in value:
        return False
    return value.split("/", 1)[0].lower().replace("-", "_") not in _FOLDER_WORDS


# Words a post writes where a Hub id's org would be, for a folder of the poster's own (none is an org on the Hub
# that posts serve from): a stand-in (`mypath/`, `your_dir/`) or a directory's usual name (`models/`).
_FOLDER_WORDS = frozenset(
    {
        *("path", "mypath", "my_path", "yourpath", "your_path", "path_to", "local", "local_path", "localpath"),
        *("dir", "mydir", "my_dir", "your_dir", "yourdir", "model_dir", "model_path", "your_model_path"),
        *("models", "my_models", "local_models", "hf_models", "pretrained_models", "saved_models", "llm_models"),
        *("checkpoints", "checkpoint", "ckpt", "ckpts", "weights", "outputs", "output", "saves", "workspace"),
    }
)


# A storage URI (KServe's storageUri, a bucket): `oci://`, `s3://`, `gs://`, `pvc://`, `https://`.
_URI = re.compile(r"[a-z][a-z0-9+.-]*://")


def _why_not(value: str | None, flag: str, docker: DockerSpec, unset_from: str = "") -> str:
    if value is None:
        return f"the server command names no model ({flag}) hgxkit can place"
    if not value.strip():
        return f"the server command's model ({flag}) is empty: the post sets it to nothing"
    if (positional := re.fullmatch(r"\$\{?([1-9])\}?", value)) is not None:  # no file the post sources sets it
        return f"the model {value!r} is argument {positional[1]} of the script, which the post does not give"
    if "$" in value:
        return f"the model {value!r} is a variable the post does not set{unset_from}"
    held = _holding(docker, value) if value.startswith("/") else None
    if held is not None and _RELATIVE_SOURCE.match(held[0]):
        return (
            f"the model path {value} is in the mount {held[0]}:{held[1]}, whose host directory {held[0]} is "
            "relative to the directory the post ran in (a compose file's: the project's), which the post does "
            "not give; write that directory as an absolute host path"
        )
    if value.startswith("/"):
        return f"the model path {value} is not inside a bind mount of a host directory"
    if (scheme := _URI.match(value)) is not None:
        return f"the model {value!r} is fetched from {scheme[0]} storage, not the Hugging Face Hub hgxkit places from"
    if "/" not in value:
        return f"the model {value!r} has no org: a local directory, not a Hub id (org/name); write ORG/NAME"
    folder = value.split("/", 1)[0]
    if folder.lower().replace("-", "_") in _FOLDER_WORDS:
        return f"the model {value!r} is a local path ({folder}/ is a folder's name, not a Hub org)"
    return f"the model {value!r} is a local path, neither a Hub id (org/name) nor an absolute path"
