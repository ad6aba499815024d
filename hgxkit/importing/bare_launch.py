"""A bare launch (`python -m sglang.launch_server …`, `VAR=1 vllm serve MODEL …`) as the `docker run` of a recipe.

hgxkit serves from containers, so a command posted for a plain shell is translated, each step a note:
`CUDA_VISIBLE_DEVICES=1,2` becomes `--gpus '"device=1,2"'` (else `--gpus all`); other `VAR=value` prefixes and
the post's `export`s become `-e VAR=value`; the server's port is published (`-p PORT:PORT`; the serving role
binds it to its own address), or, for a server spanning nodes (`--nnodes` > 1), the container gets the host's
network (`--network=host`) as the engines' multi-node examples do, and the server listens as posted;
`--ipc=host` is added (SGLang and vLLM document it for tensor parallelism);
where the engine listens on loopback by default (SGLang) the server gets `--host 0.0.0.0`, reachable inside
the container; absolute paths among the arguments (the model, a draft model, a template), and those a value
names inside it (a LoRA adapter's `NAME=/path`, a JSON config's draft "model"), are bind-mounted read-only at
the same path. The interpreter becomes the image's `python3`. vLLM's image runs `vllm serve`
itself, so the container gets only its arguments, the model as `--model MODEL` (the form both image eras
read). As a source format of a post (`BARE_LAUNCH`, see `formats`) it runs in the container the post opened
before it, if any (that container's image is used).

Example:
    >>> from hgxkit.kinds import KINDS
    >>> run, notes = docker_run_for(["CUDA_VISIBLE_DEVICES=0,1"], ["python", "-m", "sglang.launch_server",
    ...                             "--model-path", "/m", "--tp", "2"], kind=KINDS["sglang"], image="img:1",
    ...                             environment={}, where="p:1")
    >>> print(" ".join(run.argv()))  # doctest: +ELLIPSIS
    docker run --gpus "device=0,1" --ipc=host -p 30000:30000 -v /m:/m:ro img:1 python3 -m sglang.launch_server ...
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence

from hgxkit.errors import InputError
from hgxkit.importing.commands import PLACEHOLDER, Simple
from hgxkit.importing.container_context import context_mounts, context_options, installs
from hgxkit.importing.dockerfile import ENV_NOTE
from hgxkit.importing.fill import FILL_IN, fill_hint
from hgxkit.importing.model_placement import within
from hgxkit.importing.reading import Candidate, Reading
from hgxkit.importing.variables import Scope
from hgxkit.importing.workdir import directory_before
from hgxkit.kinds import DEFAULT_KIND, KINDS, ServerKind, detect_kind, image_names_kind, program_of, python_program
from hgxkit.netaddr import is_loopback
from hgxkit.recipe.docker_parse import ParsedRun, parse_option_words
from hgxkit.recipe.network_env import NETWORK_ENV, host_interface_settings
from hgxkit.recipe.nodes import HGX_GPUS, dp_hosts
from hgxkit.recipe.pd import is_side
from hgxkit.recipe.server_args import ServerCommand, group_args, is_flag
from hgxkit.recipe.shellwords import shell_value


class BareLaunch:
    """A server launched in the host's shell (`sglang serve`, `vllm serve`, `python -m …`): translated to a
    `docker run`, in the container the post opened before it if there is one."""

    name = "bare launch"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "server"

    def take(self, simple: Simple, reading: Reading) -> None:
        reading.servers.append(Candidate(simple, "server", simple.engine, context=reading.container_before(simple)))


BARE_LAUNCH = BareLaunch()


def _refuse_placeholder_image(image: str, container: Simple) -> None:
    """Refuse the image of the container a launch runs in when a part of it is left for the reader (the docs'
    `nvcr.io/nvidia/sglang:xx.yy-py3`): the container's own command is set aside, so its words are checked here."""
    found = FILL_IN.search(image) or PLACEHOLDER.search(image)
    if found is not None:
        raise InputError(
            f"{container.where()}: the launch runs in this container, whose image {image} holds the placeholder "
            f"{found.group()}; give --image REF, or {fill_hint(found.group())}"
        )


def bare_run(
    server: Candidate, words: list[str], notes: list[str], *, reading: Reading, image: str | None
) -> tuple[ParsedRun, str]:
    """The `docker run` (and kind) of a bare launch: the image given, the container's it runs in, or the kind's
    default image; the post's `export`s and the command's prefix as its environment."""
    simple = server.simple
    kind = reading.kind or server.kind or DEFAULT_KIND
    installs(server, reading, image is not None, notes)
    if image is None and server.context is not None:
        image = server.context.run.image
        _refuse_placeholder_image(image, server.context.simple)
        notes.append(
            f"{simple.where()}: runs in the container started at {server.context.simple.where()}, "
            f"so its image {image} is used"
        )
    if image is None and simple.container is not None:
        image = _container_image(simple, notes)
    if image is None:
        image = pulled_image(reading.pulled, kind, simple.where(), notes)
    if image is None:
        image = prose_image(simple, reading.simples, kind, notes)
    if image is None:
        image = KINDS[kind].default_image
        notes.append(f"{simple.where()}: a bare launch; the image is {kind}'s {image} (give --image REF to choose)")
        notes += prose_version(simple, kind)
    scope = Scope.before(reading.simples, simple)
    _refuse_unexported(scope, simple)
    _refuse_computed_exports(scope, simple)
    host = server.context is None  # a launch in the post's own container reads that container's paths
    from_image = {n for n, text in simple.command.post.notes if text == ENV_NOTE}  # a Dockerfile's ENV lines
    environment = {
        name: d.value
        for name, d in scope.exported().items()
        if not (host and d.line not in from_image and _host_cache(name, d.value, simple.where(), notes))
    }
    prefix = [
        assignment
        for assignment in _prefix_values(reading, simple)
        if not (host and _host_cache(*assignment.split("=", 1), simple.where(), notes))
    ]
    directory, cd_where = directory_before(reading.simples, simple)
    words = based_files(words, KINDS[kind], directory, cd_where, simple.where(), notes)
    run, more = docker_run_for(
        prefix,
        words,
        kind=KINDS[kind],
        image=image,
        environment=environment,
        where=simple.where(),
        mounts=context_mounts(server),
        carried=context_options(server, notes),
    )
    notes += more
    return run, kind


def _prefix_values(reading: Reading, simple: Simple) -> list[str]:
    """The launch's `NAME=value` prefix with the post's variables written out (`CUDA_VISIBLE_DEVICES=${GPUS}`); a
    secret the shell passes on (`HF_TOKEN=$HF_TOKEN`) or one taken from it stays as written, for `docker_run_for`."""
    out = []
    for word in simple.prefix:
        resolved = reading.resolved(simple, [word])
        text = resolved[0].text if len(resolved) == 1 else word.text
        out.append(text if "=" in text and "{{env:" not in text else word.text)
    return out


def _model_value(words: Sequence[str], kind: ServerKind) -> str | None:
    """The model a launch's words name by the kind's model flag (`--model ./m`, `--model-path=./m`), or None."""
    for index, word in enumerate(words):
        flag, glued, value = word.partition("=")
        if is_flag(flag) and kind.canonical_flag(flag) == kind.model_flag:
            return shell_value(value) if glued else (shell_value(words[index + 1]) if index + 1 < len(words) else None)
    return None


def _host_cache(name: str, value: str, where: str, notes: list[str]) -> bool:
    """True (with a note) for a variable naming a cache folder of the host (`HF_HOME=$HOME/.cache/hf`), which the
    container does not have: left out of its environment."""
    if name not in _HOST_CACHES or not shell_value(value).startswith(("/", "~", "$")):
        return False
    notes.append(
        f"{where}: {name}={shell_value(value)} from the shell is left out: it names a cache folder of the host, "
        "which the container does not have (the model is placed by hgxkit and mounted; the image keeps its own "
        "caches)"
    )
    return True


def based_files(
    words: list[str], kind: ServerKind, directory: str | None, cd_where: str | None, where: str, notes: list[str]
) -> list[str]:
    """`words` with each file a flag names relative to the shell's directory (`--chat-template ./t.jinja`, after a
    name: `--lora-modules a=./lora`) written out from the directory the post's `cd` leaves (a note), so the
    launch's mount of it is the post's file; refused where no `cd` says the directory: the container starts in the
    image's, where the file is not. The model's own flag is left to the model's placement, which asks for
    --model-repo.

    Example:
        >>> from hgxkit.kinds import KINDS
        >>> based_files(["vllm", "serve", "org/m", "--chat-template", "./t.jinja"], KINDS["vllm"], "/opt/a",
        ...             "p:1", "p:2", [])
        ['vllm', 'serve', 'org/m', '--chat-template', '/opt/a/t.jinja']
        >>> based_files(["vllm", "serve", "org/m", "--lora-modules", "a=../l/a"], KINDS["vllm"], "/opt/a", "p:1",
        ...             "p:2", [])[-1]
        'a=/opt/l/a'
    """
    out = list(words)
    model = _model_value(out, kind)
    for index, word in enumerate(out):
        glued = is_flag(word) and "=" in word  # `--chat-template=./t.jinja`
        flag, _, value = word.partition("=") if glued else (out[index - 1] if index else "", "", word)
        value = shell_value(value)
        named = _NAMED_RELATIVE.match(value)  # `--lora-modules a=./lora`: the file is after the name
        name, relative = (named.group(1), named.group(2)) if named else ("", value)
        if not is_flag(flag) or kind.canonical_flag(flag) == kind.model_flag or not _RELATIVE_FILE.match(relative):
            continue
        if model and within(relative, model):
            continue  # a file of the model's own folder: where the model is placed, it is (model_placement)
        if directory is None and named:
            # An adapter registered by name is read when a request asks for it, not at start-up: the server runs,
            # so the import goes on, saying that requests for that name will fail.
            notes.append(
                f"{where}: {flag} {value} names a file relative to the directory the post runs in, which it does "
                "not say, so the container does not have it and requests for that name fail: write its absolute "
                "path (it is mounted read-only)"
            )
            continue
        if directory is None:
            raise InputError(
                f"{where}: {flag} {value} names a file relative to the directory the post runs in, which it does not "
                "say (the container starts in its image's): write the file's absolute path (it is mounted read-only)"
            )
        path = name + posixpath.normpath(posixpath.join(directory, relative))
        out[index] = f"{flag}={path}" if glued else path
        notes.append(f"{where}: {flag} {value} is {path} (the post's `cd` at {cd_where})")
    return out


def _container_image(simple: Simple, notes: list[str]) -> str:
    """The registry image an `apptainer exec docker://REF …` launch (or an `hf jobs run REF …`) runs in; refused
    for an image file (`x.sif`, a sandbox directory), which a node cannot pull, naming it and --image."""
    assert simple.container is not None
    word = simple.container.image
    if simple.container.program == "hf jobs":
        notes.append(f"{simple.where()}: the image is {word.text}, the Job's")
        return word.text
    if simple.container.program == "pyxis" and not word.text.startswith(("/", ".")):
        # enroot's URI: `[docker://][USER@][REGISTRY#]IMAGE[:TAG]`, `#` where Docker writes the registry's `/`
        image = re.sub(r"^(?:docker://)?(?:[^@/#]+@)?", "", word.text).replace("#", "/", 1)
        named = f"enroot's {word.text}" if image != word.text else "srun's --container-image"
        notes.append(f"{simple.where()}: the image is {image}, {named}")
        return image
    if word.text.startswith("docker://"):
        image = word.text.removeprefix("docker://")
        notes.append(f"{simple.where()}: the image is {image}, the registry image {word.text} names")
        return image
    raise InputError(
        f"{simple.command.post.name}: line {word.line}, column {word.column}: the image {word.text} is a local "
        f"{simple.container.program} image, which a node cannot pull: give --image REF, the registry image it was "
        "built from"
    )


def _refuse_computed_exports(scope: Scope, simple: Simple) -> None:
    """Refuse an exported variable that reaches the launch and is set by a command substitution
    (`export VLLM_HOST_IP=$(hostname -I | …)`), at the line that sets it: the container's environment would carry
    the substitution's text, and its value is the host's at run time, which the import does not run."""
    post = simple.command.post.name
    for name, definition in scope.exported().items():
        if not (definition.computed or "$(" in definition.value or "`" in definition.value):
            continue
        written = definition.written or definition.value
        shown = written if len(written) <= 60 else written[:57] + "…"
        text = simple.command.post.clean[definition.line - 1] if definition.file == post else ""
        column = f", column {text.find(written) + 1}" if written in text else ""
        raise InputError(
            f"{post}: {definition.at(post)}{column}: `{shown}` (the value of {name}, exported, so in the "
            f"environment of the launch at {simple.where()}) is a command substitution, run by the shell where the "
            "post runs; the import does not run it: write its value, or drop the export"
        )


# Variables only the server process reads: set without `export` right above a launch, they reach no one.
_LAUNCH_ENV = frozenset({"CUDA_VISIBLE_DEVICES", *NETWORK_ENV})


def _refuse_unexported(scope: Scope, simple: Simple) -> None:
    """Refuse `CUDA_VISIBLE_DEVICES=0` (or a network variable) set without `export` by the command right above a
    launch (its own line, or the first of several `NAME=value \\` lines): the shell keeps it to itself, so the
    server never sees it; the post most likely lost the continuation backslash that made it the launch's prefix
    (or the `export`). Not guessed either way."""
    post = simple.command.post
    start = simple.start_line
    for name in sorted(_LAUNCH_ENV - set(simple.assignments)):
        found = scope.definitions.get(name)
        if found is None or found.exported or found.file not in ("", post.name):
            continue
        if not _ends_right_above(post.clean, found.line, start):
            continue
        if any(f"${name}" in word or "${" + name in word for word in simple.texts):
            continue  # read by the command itself: an ordinary shell variable
        last = "the line" if found.line == start - 1 else f"line {start - 1}"  # where the backslash was lost
        raise InputError(
            f"{post.name}: line {found.line}, column 1: {name}={found.value} is set without export "
            f"right above the launch at line {start}, so the server would not see it; a continuation "
            f"backslash may be missing (end {last} with `\\`, or write `export {name}=…`)"
        )


def _ends_right_above(clean: Sequence[str], line: int, start: int) -> bool:
    """True when the command written from `line` ends on the line right above `start`: every line of it but its
    last is continued by a backslash.

    >>> _ends_right_above(["A=1 \\\\", "B=2", "vllm serve m"], 1, 3)
    True
    >>> _ends_right_above(["A=1", "B=2", "vllm serve m"], 1, 3)
    False
    """
    return line < start and all(clean[n - 1].rstrip().endswith("\\") for n in range(line, start - 1))


# What names an image for an H200 (Hopper) node, or for other hardware, in its tag or the comment above its pull.
_HOPPER = re.compile(r"h200|h100|\bh20\b|hopper|sm_?90", re.IGNORECASE)
_OTHER_HARDWARE = re.compile(
    r"rocm|\bmi\d{3}|npu|ascend|-a[23]\b|\bcpu|xpu|hpu|gaudi|tpu|neuron|b200|gb200|sm_?100", re.IGNORECASE
)


def pulled_image(pulled: Sequence[tuple[str, str, str]], kind: str, where: str, notes: list[str]) -> str | None:
    """The image the post's `docker pull` lines chose for a bare launch of `kind` ((image, where, the comment
    above the pull)): the one pulled, else of several per hardware the H200 (Hopper) one (images for other
    hardware set aside); None when it pulls none of that kind; a refusal naming them when that does not decide."""
    first = {}  # the same image pulled again is one image: its first pull
    for p in pulled:
        first.setdefault(p[0], p)
    images = [p for p in first.values() if _image_kind(p[0]) == kind]
    if not images:
        return _unknown_pull_above(pulled, kind, where, notes)
    if len(images) > 1:
        label = {p: f"{p[0].rsplit(':', 1)[-1] if ':' in p[0] else ''} {p[2]}" for p in images}
        hopper = [p for p in images if _HOPPER.search(label[p])]
        nvidia = [p for p in images if not _OTHER_HARDWARE.search(label[p]) or _HOPPER.search(label[p])]
        chosen = hopper if len(hopper) == 1 else nvidia if len(nvidia) == 1 else []
        if not chosen:
            shown = ", ".join(f"{image} ({at})" for image, at, _ in images)
            raise InputError(
                f"{where}: a bare launch, and the post pulls {len(images)} {kind} images ({shown}) without saying "
                "which is for an H200 node; give --image REF naming the one to run"
            )
        others = ", ".join(p[0] for p in images if p != chosen[0])
        notes.append(
            f"{where}: of the images the post pulls, {chosen[0][0]} is the one for an H200 (Hopper) node (not {others})"
        )
        images = chosen
    image, at, _ = images[0]
    notes.append(f"{where}: a bare launch; the image is {image}, the one the post pulls ({at})")
    return image


# An image reference with a tag as prose writes it (`using docker image lmsysorg/sglang:v0.5.0rc2-cu128-b200 on …`).
_TAGGED_IMAGE = re.compile(r"(?<![\w./:-])[a-z0-9][\w.-]*(?:/[\w.-]+)+:\w[\w.-]*")


def prose_image(simple: Simple, simples: Sequence[Simple], kind: str, notes: list[str]) -> str | None:
    """The one image of `kind` with a tag that the launch's post names outside its commands (`using docker image
    lmsysorg/sglang:v0.5.0rc2-cu128-b200 on …`), for a bare launch the post gives no other image; None when it
    names none, or several (which one ran is not said)."""
    post = simple.command.post
    commands = {n for s in simples if s.command.post is post for n in range(s.command.first, s.command.last + 1)}
    found: dict[str, int] = {}
    for number, line in enumerate(post.lines, 1):
        for match in _TAGGED_IMAGE.finditer(line) if number not in commands else ():
            image = match.group().rstrip(".")
            if _image_kind(image) == kind:
                found.setdefault(image, number)
    if len(found) != 1:
        return None
    image, number = next(iter(found.items()))
    notes.append(f"{simple.where()}: a bare launch; the image is {image}, the one the post names (line {number})")
    return image


# The engine's name and a release after it, as posts write one (`vllm 0.8.5.post1`, `vLLM v0.10.1.1`,
# `vllm==0.9.2`, `vllm version: 0.9.2`, `sglang 0.4.6.post5`): group 1 the name, group 2 the release.
_NAMED_VERSION = re.compile(
    r"(?<![\w/.-])(vllm|sglang)(?:[ \t]*(?:version)?[ \t]*(?:==|=|:)?[ \t]*)v?(\d+\.\d+\.\d+(?:\.?post\d+|rc\d+)?)"
    r"(?!\w|\.\w)",
    re.IGNORECASE,
)


def prose_version(simple: Simple, kind: str) -> list[str]:
    """A note naming the one release of the kind the launch's post names (`vllm 0.8.5.post1`, `pip install
    vllm==0.9.2`), the image that runs it, for a bare launch given the kind's default image: the poster ran that
    release, which the option table (today's) does not judge, so it is said, not taken. None where the post names
    none, or several."""
    found = {
        (m.group(2), number)
        for number, line in enumerate(simple.command.post.lines, 1)
        for m in _NAMED_VERSION.finditer(line)
        if m.group(1).lower() == kind
    }
    if len({version for version, _ in found}) != 1:
        return []
    version, number = min(found, key=lambda f: f[1])
    repository = KINDS[kind].default_image.rsplit(":", 1)[0]
    return [
        f"{simple.where()}: the post names {kind} {version} (line {number}), which the image (today's release) may "
        f"not be: to run that release, import with --image {repository}:v{version} (its options are then not checked)"
    ]


def _unknown_pull_above(pulled: Sequence[tuple[str, str, str]], kind: str, where: str, notes: list[str]) -> str | None:
    """Where the post pulls no image hgxkit knows for `kind`: the last pull above the launch (in its file) of an
    image whose server hgxkit cannot tell but whose name holds the engine's (a model's own build of it); None when
    there is none. A pull below the launch belongs to what the post shows next, so it is never taken; nor is an
    image named for something else (a web UI, a database), which does not run the launch."""
    file, _, line = where.rpartition(":")
    above = [
        p
        for p in pulled
        if _image_kind(p[0]) is None and image_names_kind(p[0], kind) and _at(p[1]) < (file, _line(line))
    ]
    if not above:
        return None
    image, at, _ = above[-1]
    notes.append(
        f"{where}: a bare launch; the image is {image}, the one the post pulls above it ({at}), taken to run "
        f"{kind} as the launch says (hgxkit does not know that image's server; give --image REF to choose another)"
    )
    return image


def _at(where: str) -> tuple[str, int]:
    file, _, line = where.rpartition(":")
    return file, _line(line)


def _line(text: str) -> int:
    first = text.split("-", 1)[0]
    return int(first) if first.isdigit() else 0


def _size(args: Sequence[str], kind: ServerKind) -> int | None:
    """GPUs the launch's server uses (tp x pp x dp), or None where a size is not a whole number or a config
    file (`--config`) may set it."""
    if any(word == "--config" or word.startswith("--config=") for word in args):
        return None
    try:
        return ServerCommand((), tuple(group_args(args)), kind.name).parallel_size()
    except ValueError:
        return None


def _image_kind(image: str) -> str | None:
    try:
        return detect_kind(image, ()).name
    except InputError:
        return None


# An environment value naming a file by a path relative to the shell's directory: `./x`, `../x`.
_RELATIVE_FILE = re.compile(r"\.\.?/")
# A flag's value naming such a file under a name (`--lora-modules a=./lora`): the name, the file.
_NAMED_RELATIVE = re.compile(r"^([\w.@+-]+=)(\.\.?/.*)$")
# Paths a server argument may name that are no input to mount (devices, the container's own temp space).
_NOT_INPUTS = ("/dev/", "/proc/", "/sys/", "/tmp/")


def docker_run_for(
    prefix: Sequence[str],
    words: Sequence[str],
    *,
    kind: ServerKind,
    image: str,
    environment: Mapping[str, str],
    where: str,
    mounts: Sequence[tuple[str, str, str]] = (),
    carried: Sequence[str] = (),
) -> tuple[ParsedRun, list[str]]:
    """The `docker run` that runs bare launch `words` (`prefix`: its `VAR=value` words; `environment`: the
    post's exported variables in scope, by name) in `image`; and a note per translation. `mounts`: (host
    directory, container directory, where) of the bind mounts of the container the launch runs in, through which
    a path the server reads is the host's; `carried`: that container's options the launch keeps."""
    notes: list[str] = []
    program, args = _program(list(words), kind, notes, where)
    options: list[str] = []
    env = {**environment}
    for assignment in prefix:
        name, _, value = assignment.partition("=")
        env[name] = value
    devices = env.pop("CUDA_VISIBLE_DEVICES", None)
    if devices:
        options += ["--gpus", f'"device={shell_value(devices)}"']
        notes.append(f"{where}: CUDA_VISIBLE_DEVICES={devices} became --gpus '\"device={devices}\"'")
    else:
        options += ["--gpus", "all"]
        notes.append(f"{where}: no CUDA_VISIBLE_DEVICES, so the container gets every GPU (--gpus all)")
    options.append("--ipc=host")
    nodes = _nodes(args, kind)
    size = _size(args, kind)
    if not devices and nodes <= 1 and size and size < HGX_GPUS:
        notes.append(f"{where}: the server uses {size} of them (tp x pp x dp), the first {size}, the rest left idle")
    interfaces = host_interface_settings(
        ((name, shell_value(value)) for name, value in env.items()), spanning=_nodes(args, kind) > 1
    )
    if nodes <= 1 and interfaces:
        # NCCL/Gloo told to use a host interface: that interface exists only on the host's network.
        options.append("--network=host")
        shown = ", ".join(f"{name}={value}" for name, value in interfaces)
        notes.append(
            f"{where}: {shown} names a host network interface, so the container uses the host's network "
            "(--network=host), where it exists, and listens as the post says; no port is published"
        )
    elif nodes > 1:
        # A server spanning nodes: its ranks reach each other on the host's network (rendezvous, NCCL and Gloo
        # ports no -p predicts), as the engines' multi-node Docker examples run them; it listens as posted.
        options.append("--network=host")
        listens = _posted_host(args, kind)
        loopback = listens is None and is_loopback(kind.default_host)
        said = f" ({kind.title}'s default {kind.default_host}: the head node's own clients only)" if loopback else ""
        notes.append(
            f"{where}: the server spans {nodes} nodes, so the container uses the host's "
            f"network (--network=host) and listens as the post says{said}; no port is published"
        )
    elif _split_side(args, kind):
        # The decode reaches the prefill's bootstrap port at the address the router gives (127.0.0.1 on the
        # router's host), which a container's own network does not reach: a side runs as the shell it was
        # posted for does, listening where its command says (SGLang's loopback default stays loopback).
        options.append("--network=host")
        listens = _posted_host(args, kind) or kind.default_host
        notes.append(
            f"{where}: a prefill/decode side, so the container uses the host's network (--network=host) and "
            f"listens where the post's command does ({listens}); no port is published: the decode reaches the "
            "prefill at the address the router gives"
        )
    else:
        args, port = _listen(args, kind, notes, where)
        options += ["-p", f"{port}:{port}"]
    options += _input_mounts(args, kind, mounts, where, notes)
    options += _env_options(env, where, notes)
    options += carried
    notes.append(f"{where}: --ipc=host added (shared memory between tensor-parallel ranks, as the engines document)")
    entries = parse_option_words(options, source=where)
    return ParsedRun(("docker", "run"), entries, image, (*program, *args)), notes


def _env_options(env: dict[str, str], where: str, notes: list[str]) -> list[str]:
    """`-e NAME=value` for each variable the launch's shell gives it, but the host install's (`_HOST_INSTALL`)."""
    options: list[str] = []
    for name, value in env.items():
        if name in _HOST_INSTALL:
            notes.append(
                f"{where}: {name}={shell_value(value)} from the shell is left out: it points at the host's own "
                "install (a virtualenv, CUDA, libraries), and the image has its own"
            )
            continue
        if _RELATIVE_FILE.match(shell_value(value)):  # the shell's directory; the container starts elsewhere
            raise InputError(
                f"{where}: {name}={shell_value(value)} names a file relative to the directory the post ran in, "
                "which the container does not have (hgxkit mounts the files a server argument names, not a "
                "variable's); drop it, or build the file into the image (--image)"
            )
        options += ["-e", f"{name}={value}"]
        notes.append(f"{where}: {name}={shell_value(value)} from the shell became -e {name}=…")
    return options


# Variables that locate the host's own install of the engine: the image's paths differ (a host PATH would hide
# its programs, a host LD_LIBRARY_PATH or LD_PRELOAD point at libraries it does not have).
_HOST_INSTALL = frozenset(
    {
        "PATH",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "LIBRARY_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "PYTHONHOME",
        "PYTHONPATH",
        "CUDA_HOME",
        "CUDA_PATH",
        "HOME",
    }
)
# Where the host keeps its caches (a Slurm job's `export HF_HOME=/scratch/$USER/hf`): a host folder by its path.
_HOST_CACHES = frozenset(
    {
        "HF_HOME",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "TRANSFORMERS_CACHE",
        "HF_DATASETS_CACHE",
        "XDG_CACHE_HOME",
        "VLLM_CACHE_ROOT",
        "VLLM_CONFIG_ROOT",
        "TORCH_HOME",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "FLASHINFER_WORKSPACE_BASE",
        "TMPDIR",
    }
)


def _program(words: list[str], kind: ServerKind, notes: list[str], where: str) -> tuple[list[str], list[str]]:
    """The container's program words and the server's arguments."""
    normal = python_program(words)
    if normal[0] != words[0]:
        notes.append(f"{where}: {words[0]} became the image's python3")
    if len(normal) < len(words):
        dropped = " ".join(words[1 : 1 + len(words) - len(normal)])
        notes.append(f"{where}: the interpreter's own options ({dropped}) are dropped: they are not the server's")
    program = program_of(normal, (*kind.programs, *kind.deprecated_programs))
    assert program is not None  # the command was taken for this kind's launch
    if normal[0] != program[0]:
        notes.append(f"{where}: {shell_value(normal[0])} became the image's {program[0]}")
    args = normal[len(program) :]
    if program[-1] == "serve" and args[:1] == ["serve"]:
        notes.append(f"{where}: `serve` is written twice ({' '.join(program)} serve …); the second one is dropped")
        args = args[1:]
    if not kind.image_entrypoint:
        return list(program), args
    # The image's entrypoint is the server: the container command is its arguments, the model as a flag.
    if args and not is_flag(args[0]) and kind.positional_model:
        notes.append(f"{where}: the model {args[0]} is passed as {kind.model_flag} (read by old and new images)")
        args = [kind.model_flag, args[0], *args[1:]]
    notes.append(f"{where}: `{' '.join(program)}` is the image's entrypoint; the container gets its arguments")
    return [], args


def _nodes(args: list[str], kind: ServerKind) -> int:
    """The hosts the server spans: its `--nnodes`, or its data-parallel ranks over hosts (1 when neither)."""
    server = ServerCommand((), tuple(group_args(args)), kind.name)
    spread = dp_hosts(server)
    if spread is not None:
        return -(-spread[0] // max(spread[1], 1))
    value = server.flag(kind.nnodes_flag)
    return int(value) if value is not None and value.isdigit() else 1


def _split_side(args: list[str], kind: ServerKind) -> bool:
    """Whether the server is one side of a prefill/decode split (`hgxkit.recipe.pd.is_side`)."""
    return is_side(ServerCommand((), tuple(group_args(args)), kind.name))


def _posted_host(args: list[str], kind: ServerKind) -> str | None:
    """The address the server's `--host` names (None when it has none)."""
    return ServerCommand((), tuple(group_args(args)), kind.name).flag("--host")


def _listen(args: list[str], kind: ServerKind, notes: list[str], where: str) -> tuple[list[str], str]:
    """Arguments with a reachable `--host` where the engine defaults to loopback, and the port listened on."""
    port = None
    host_at = None
    out = list(args)
    for index, word in enumerate(out):
        flag, has_equals, inline = word.partition("=")
        if not is_flag(word):
            continue
        canonical = kind.canonical_flag(flag)
        value = inline if has_equals else (out[index + 1] if index + 1 < len(out) else "")
        if canonical == "--port":
            port = value
        elif canonical == "--host":
            host_at = (index, has_equals, value)
    loopback_default = is_loopback(kind.default_host)
    if host_at is None and loopback_default:
        out += ["--host", "0.0.0.0"]
        notes.append(
            f"{where}: --host 0.0.0.0 added ({kind.title} listens on {kind.default_host} by default, "
            "which a published port cannot reach)"
        )
    elif host_at is not None and _rebound(host_at[2]):
        index, has_equals, value = host_at
        if has_equals:
            out[index] = out[index].split("=", 1)[0] + "=0.0.0.0"
        else:
            out[index + 1] = "0.0.0.0"
        why = (
            "loopback inside a container is unreachable"
            if is_loopback(value)
            else "an address of the post's host, which the container does not have: its port is published on the "
            "node instead"
        )
        notes.append(f"{where}: --host {value} became 0.0.0.0 ({why})")
    if port is None:
        port = str(kind.default_port)
        notes.append(f"{where}: no --port, so {kind.title}'s default {port} is published")
    return out, port


def _rebound(host: str) -> bool:
    """Whether a bridged container's server must listen on 0.0.0.0 instead of `host`: loopback (unreachable through
    a published port) or one address of the post's host (`192.168.66.15`, a host name), which the container's own
    interfaces lack, so the server could not bind it; not every-interface addresses or a value the shell writes in.

    >>> [_rebound(h) for h in ("127.0.0.1", "192.168.66.15", "node-a", "0.0.0.0", "::", "$HOST_IP")]
    [True, True, True, False, False, False]
    """
    return host.strip("[]") not in ("0.0.0.0", "::", "") and "$" not in host


def _input_mounts(
    args: list[str], kind: ServerKind, mounts: Sequence[tuple[str, str, str]], where: str, notes: list[str]
) -> list[str]:
    """`-v HOST:PATH:ro` for each absolute path the server reads: the same path on the host, or the host's path
    through the bind mount of the container the launch runs in that holds it; a note each. A path inside another
    one mounted here gets no mount of its own (it is in that one's)."""
    options = []
    found = _input_paths(args, kind)
    for entry in group_args(args):
        flag, glued, value = entry[0].partition("=")
        if is_flag(flag) and kind.canonical_flag(flag) in _WRITTEN_DIRS and (glued or len(entry) > 1):
            path = posixpath.normpath(value if glued else entry[1])
            found = [(p, by) for p, by in found if p != path]
            notes.append(
                f"{where}: {flag} {shell_value(path)} is where the server would download the model, which hgxkit "
                "places and mounts: the folder is the container's own, not mounted from the host"
            )
    for path, flag in found:
        shown = shell_value(path)
        named = f" (named in {flag}'s value)" if flag else ""
        if ":" in path:  # `-v` splits at each colon: the rest would be read as a target and mount options
            raise InputError(
                f"{where}: {shown}{named} holds a colon, which a bind mount cannot carry (`-v HOST:PATH:MODE`); "
                "move the file to a path without one"
            )
        outer = next((other for other, _ in found if _inside(path, other)), None)
        if outer is not None:
            notes.append(f"{where}: {shown}{named} is inside {shell_value(outer)}, mounted read-only")
            continue
        host, mount = _through(path, mounts)
        options += ["-v", f"{host}:{path}:ro"]
        if mount is None:
            notes.append(f"{where}: {shown}{named} is mounted read-only at the same path in the container")
        else:
            notes.append(
                f"{where}: {shown}{named} is in the mount {mount} of the container the launch runs in: the "
                f"host's {host}, mounted read-only at {shown}"
            )
    return options


# Flags naming a folder the server writes (its downloads), not an input: no host folder is mounted for them.
_WRITTEN_DIRS = frozenset({"--download-dir"})


def _inside(path: str, other: str) -> bool:
    """True when normalised path `path` is strictly inside directory `other`.

    >>> _inside("/m/base/tok", "/m/base"), _inside("/m/base2", "/m/base"), _inside("/m", "/m")
    (True, False, False)
    """
    return path != other and path.startswith(other.rstrip("/") + "/")


def _through(path: str, mounts: Sequence[tuple[str, str, str]]) -> tuple[str, str | None]:
    """(the host path of container path `path` through the deepest bind mount holding it, the mount as written),
    or (`path`, None) where no mount holds it.

    Example:
        >>> _through("/mnt/models/m", [("/ssd1/models", "/mnt/models", "-v /ssd1/models:/mnt/models")])
        ('/ssd1/models/m', '-v /ssd1/models:/mnt/models')
        >>> _through("/mnt/models/../../etc/shadow", [("/ssd1/models", "/mnt/models", "-v /ssd1/models:/mnt/models")])
        ('/etc/shadow', None)
    """
    path = posixpath.normpath(path)  # `/mnt/models/../../etc` is not in the mount at /mnt/models
    holding = [m for m in mounts if path == m[1] or path.startswith(m[1].rstrip("/") + "/")]
    if not holding:
        return path, None
    source, target, written = max(holding, key=lambda m: len(m[1]))
    return posixpath.normpath(source + path[len(target.rstrip("/")) :]), written


def _input_paths(args: list[str], kind: ServerKind) -> list[tuple[str, str | None]]:
    """Absolute paths the server reads, normalised, each once, in order: flag values and a positional model as
    written, and those a value names inside it (None, or the flag whose value names it): a LoRA adapter's
    `NAME=/path`, a JSON value's string under one of the kind's `json_path_keys` (a LoRA's "path", a draft's
    "model").

    Example:
        >>> from hgxkit.kinds import KINDS
        >>> _input_paths(["/m", "--lora-modules", "a=/l/a/", '{"name": "b", "path": "/l/b"}', "--port", "1"],
        ...              KINDS["vllm"])
        [('/m', None), ('/l/a', '--lora-modules'), ('/l/b', '--lora-modules')]
    """
    paths: dict[str, str | None] = {}
    for entry in group_args(args):
        flag = entry[0].partition("=")[0] if is_flag(entry[0]) else None
        values = [entry[0].partition("=")[2]] if "=" in entry[0] and is_flag(entry[0]) else list(entry[1:])
        if flag is None:
            values = list(entry)
        for value in values:
            named = [(value, None)] if value.startswith("/") else [(v, flag) for v in _named_paths(value, kind)]
            for written, by in named:
                path = posixpath.normpath(written) if written.startswith("/") and "$" not in written else None
                if path and not path.startswith(_NOT_INPUTS) and path not in paths and path != "/":
                    paths[path] = by
    return list(paths.items())


# `NAME=/path`: a value naming a file under a name (vLLM's `--lora-modules NAME=PATH`, SGLang's `--lora-paths`).
_NAMED_PATH = re.compile(r"^[\w.@+-]+=(/.*)$")


def _named_paths(value: str, kind: ServerKind) -> list[str]:
    """The absolute paths a value names inside it: after `NAME=`, or a JSON value's strings under the kind's
    `json_path_keys` (at any depth).

    Example:
        >>> from hgxkit.kinds import KINDS
        >>> _named_paths('{"model": "/d", "num_speculative_tokens": 3, "x": "/y"}', KINDS["vllm"])
        ['/d']
        >>> _named_paths("bi-lora=/a/b/", KINDS["vllm"]), _named_paths("qwen", KINDS["vllm"])
        (['/a/b/'], [])
    """
    matched = _NAMED_PATH.match(value)
    if matched:
        return [matched.group(1)]
    if not value.startswith(("{", "[")):
        return []
    try:
        document = json.loads(value)
    except ValueError:
        return []
    return [v for v in _json_strings(document, kind.json_path_keys) if v.startswith("/")]


def _json_strings(document: object, keys: Sequence[str]) -> list[str]:
    """The strings under `keys` anywhere in a parsed JSON document."""
    if isinstance(document, list):
        return [found for item in document for found in _json_strings(item, keys)]
    if not isinstance(document, dict):
        return []
    found = [value for key, value in document.items() if key in keys and isinstance(value, str)]
    return found + [deeper for value in document.values() for deeper in _json_strings(value, keys)]
