"""A post's command lines taken apart the way a shell runs them, and each simple command classified.

`a && b | tee log > out 2>&1 &` is three simple commands for a shell; the one that matters keeps its words,
and what a recipe cannot hold (the pipe into `tee`, redirections, `&`) becomes a note. An environment
prefix (`VAR=1 cmd`), `sudo` and `nohup` are set apart from the program. Commands inside `for`/`while`/`if` blocks are
marked: their words depend on shell logic.

Kinds: `assign` (`NAME=value` alone), `export`, `docker-run`, `docker-exec`, `docker-build`, `docker-tag`,
`docker`, `server` (a bare launch of a supported engine), `bench` (a benchmark client), `engine` (a launch of an
engine hgxkit does not serve), `control` (shell keywords), `other`.

Example:
    >>> from hgxkit.importing.post import find_commands, read_post
    >>> post = read_post("p", "CUDA_VISIBLE_DEVICES=0 vllm serve org/m 2>&1 | tee log")
    >>> simple = simple_commands(find_commands(post))
    >>> [(s.kind, [w.text for w in s.prefix], [w.text for w in s.words]) for s in simple]
    [('server', ['CUDA_VISIBLE_DEVICES=0'], ['vllm', 'serve', 'org/m']), ('other', [], ['tee', 'log'])]
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from hgxkit.errors import InputError
from hgxkit.importing.bench_clients import client_of
from hgxkit.importing.post import (
    ASSIGNMENT_RE,
    MAX_COMMANDS,
    UV_MODULE,
    Command,
    EnvOptions,
    env_options,
    runner_end,
)
from hgxkit.importing.provenance import Exported
from hgxkit.kinds import KINDS, UNSUPPORTED, UnsupportedKind, image_file_kind, image_matches, python_program
from hgxkit.recipe.shellwords import Word

_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;"})
_OPEN_BLOCK = frozenset({"for", "while", "until", "if", "case", "select"})
_CLOSE_BLOCK = frozenset({"done", "fi", "esac"})
_KEYWORDS = _OPEN_BLOCK | _CLOSE_BLOCK | {"do", "then", "else", "elif", "in", "{", "}"}
# A `<name>` placeholder in a posted command: `vllm serve <model>`, `-e VLLM_HOST_IP=<HEAD_NODE_IP>`.
PLACEHOLDER = re.compile(r"(?<![<\w])<([^\W\d_][\w .:/-]{0,60})>(?!>)")


@dataclass(frozen=True)
class Simple:
    """One simple command: environment prefix, program and arguments, what it is, what was set aside."""

    command: Command
    kind: str
    words: tuple[Word, ...]
    prefix: tuple[Word, ...] = ()
    notes: tuple[str, ...] = field(default=())
    in_block: str | None = None  # the shell block (`for`, `if`) it runs in
    placeholder: tuple[int, int, str] | None = None  # (line, column, text) of a `<…>` placeholder
    substitution: Word | None = None  # the first `$(`, backtick or subshell parenthesis
    piped: bool = False  # it reads the output of the command before it
    engine: str | None = None  # the server kind, or the unsupported engine's name
    client: str | None = None  # the benchmark client's name
    exported: Exported | None = None  # what an hgxkit export's labels say of its recipe (a document's command)
    container: ContainerExec | None = None  # the Apptainer/Singularity container a launch runs in

    @property
    def texts(self) -> list[str]:
        return [word.text for word in self.words]

    @property
    def assignments(self) -> dict[str, str]:
        """The environment prefix as NAME -> value (as written)."""
        return {w.text.split("=", 1)[0]: w.text.split("=", 1)[1] for w in self.prefix}

    @property
    def first_line(self) -> int:
        return self.words[0].line if self.words else self.command.first

    @property
    def start_line(self) -> int:
        """The line the command is written from: its environment prefix's when that stands on lines of its own
        (`A=1 \\` above `vllm serve`), else the program's."""
        return min((w.line for w in self.prefix), default=self.first_line)

    def where(self) -> str:
        return f"{self.command.post.name}:{self.first_line}"

    def span(self) -> str:
        """`PATH:FIRST-LAST`, the lines the command is written on (the path as given, for messages)."""
        return f"{self.command.post.name}:{self._lines()}"

    def source(self) -> str:
        """`FILE:FIRST-LAST` with the file's name only (what a recipe records)."""
        return f"{self.command.post.label}:{self._lines()}"

    def _lines(self) -> str:
        last = max((w.line for w in self.words), default=self.command.last)
        first = self.start_line
        return f"{first}" + (f"-{last}" if last != first else "")

    def error(self) -> InputError | None:
        return self.command.error


@dataclass(frozen=True)
class SimpleIndex:
    """Where things are in one list of simple commands, for questions asked once per command (the variables
    and the directory that reach it): answered from here they cost the command's own share, not the list's."""

    position: dict[int, int]  # id(simple) -> its index
    definitions: tuple[int, ...]  # indexes of assignments and exports
    cds: tuple[int, ...]  # indexes of `cd` commands


_LAST_INDEX: list[tuple[Sequence[Simple], int, SimpleIndex]] = []


def simple_index(simples: Sequence[Simple]) -> SimpleIndex:
    """The index of `simples`, made once per list (the last list's is kept while it keeps its length)."""
    if _LAST_INDEX and _LAST_INDEX[0][0] is simples and _LAST_INDEX[0][1] == len(simples):
        return _LAST_INDEX[0][2]
    index = SimpleIndex(
        position={id(simple): n for n, simple in enumerate(simples)},
        definitions=tuple(n for n, simple in enumerate(simples) if simple.kind in ("assign", "export")),
        cds=tuple(n for n, simple in enumerate(simples) if simple.words and simple.words[0].text == "cd"),
    )
    _LAST_INDEX[:] = [(simples, len(simples), index)]
    return index


def simple_commands(commands: Sequence[Command]) -> list[Simple]:
    """Every simple command of the given command lines, in order, classified; more than `MAX_COMMANDS` of them
    (each stage of a pipeline and each command of a list `a; b && c` counts) is refused in one line."""
    out: list[Simple] = []
    blocks: list[str] = []
    fence = 0
    for command in commands:
        if command.post.fences and command.post.fences[command.first - 1] != fence:
            blocks.clear()  # a block of one code fence (a Python `for …:` read as shell) never spans into another
            fence = command.post.fences[command.first - 1]
        if command.error is not None:
            out.append(Simple(command, "broken", ()))
            continue
        placeholder = _placeholder(command)
        for words, piped, notes in _split(command, keep_angles=placeholder is not None):
            if len(out) >= MAX_COMMANDS:
                raise InputError(
                    f"{command.where()}: more than {MAX_COMMANDS} commands (each stage of a pipeline `a | b` counts); "
                    "give the part of the post with a setup"
                )
            words, prefix, more = _prefix(words, command.post.name)
            words, prefix, container = _container_exec(words, prefix, command.post.name, more)
            words = _as_docker(words, command.post.name, more)
            head = words[0].text if words else ""
            if head in _OPEN_BLOCK:
                blocks.append(head)
            in_block = blocks[-1] if blocks and head not in _OPEN_BLOCK else None
            if head in _CLOSE_BLOCK and blocks:
                blocks.pop()
            substitution = next((w for w in words if w.is_operator and w.text in ("$(", "`", "(", ")")), None)
            kind, engine, client = _classify(words, prefix)
            out.append(
                Simple(
                    command,
                    kind,
                    tuple(words),
                    tuple(prefix),
                    (*command.notes, *notes, *more),
                    in_block,
                    placeholder,
                    substitution,
                    piped,
                    engine,
                    client,
                    container=container,
                )
            )
    return out


@dataclass(frozen=True)
class ContainerExec:
    """`apptainer exec [OPTIONS] IMAGE LAUNCH…` or `apptainer run [OPTIONS] IMAGE ARGS…` (or `singularity`): the
    image word the launch runs in."""

    image: Word
    program: str  # apptainer, singularity, hf jobs or pyxis


# Options of `apptainer exec|run` (or `singularity`) that take a value (the rest are switches: --nv, --cleanenv, …)
_EXEC_VALUES = frozenset(
    {"-B", "--bind", "--env", "--env-file", "-H", "--home", "-W", "--workdir", "--pwd", "-o", "--overlay", "--mount"}
)


# Options of `hf jobs run` (huggingface_hub's CLI) that take a value; the rest are switches (--detach, --ssh, …).
_HF_JOB_VALUES = frozenset(
    {
        *("-e", "--env", "-s", "--secrets", "--name", "-l", "--label", "-v", "--volume", "--env-file"),
        *("--secrets-file", "--flavor", "--timeout", "--attempts", "--expose", "--expose-public", "--network-group"),
        *("--network-alias", "--resource-group-id", "--namespace", "--token", "--format"),
    }
)


# Its options that carry a credential: `--secrets NAME=value` (or NAME, read from the environment), `--token`.
_HF_JOB_SECRETS = frozenset({"-s", "--secrets", "--token"})


def _hf_job(words: list[Word], name: str, notes: list[str]) -> tuple[int, list[Word]] | None:
    """(where the image is, the `-e NAME=value`s) of `hf jobs run [OPTIONS] IMAGE COMMAND…`: a Hugging Face Job,
    a container on Hugging Face's machines. Its machine (`--flavor`), time limit, exposure and secrets are the
    Job service's, said in one note; a `-v` volume (a Hub repository or a local folder synced to a bucket) is
    refused naming it. None for any other command."""
    texts = [w.text for w in words]
    if texts[:3] != ["hf", "jobs", "run"]:
        return None
    index, env, dropped = 3, [], []
    while index < len(words) and texts[index].startswith("-"):
        option, equals, value = texts[index].partition("=")
        at = words[index]
        if option in _HF_JOB_VALUES and not equals:
            index += 1
            value = texts[index] if index < len(texts) else ""
        if option in ("-v", "--volume"):
            raise InputError(
                f"{name}: line {at.line}, column {at.column}: {option} {value}: a Hugging Face Job's volume (synced "
                "through the Hub), which hgxkit does not carry: serve the model by its Hub id, or write the recipe's "
                "mount by hand"
            )
        if option in ("-e", "--env"):
            env.append(replace(at, text=value))
        elif option in _HF_JOB_SECRETS:  # a secret's name at most: its value must never reach a note
            shown = value.partition("=")[0] if option in ("-s", "--secrets") else "***"
            dropped.append(f"{option} {shown}")
        else:
            dropped.append(f"{option} {value}".strip() if option in _HF_JOB_VALUES else option)
        index += 1
    if dropped:
        notes.append(
            f"{name}:{words[0].line}: the Job's own options are the Hugging Face Jobs service's, not carried "
            f"({', '.join(dropped)}): the node is the inventory's, its GPUs the recipe's"
        )
    return index, env


def _container_exec(
    words: list[Word], prefix: list[Word], name: str, notes: list[str]
) -> tuple[list[Word], list[Word], ContainerExec | None]:
    """The launch an `apptainer exec` / `singularity exec` (or `… run`, see `_runscript`) or an `hf jobs run`
    (`_hf_job`) runs, with its `--env NAME=value`s as the launch's prefix and its `--bind SRC:DST` container paths
    written as the host's (each a note); the words unchanged for any other command, or a container command that is
    no launch of a served engine."""
    texts = [w.text for w in words]
    job = _hf_job(words, name, notes)
    if job is not None:
        index, env = job
        launch = words[index + 1 :]
        if index >= len(words) or not _launches(launch):
            return words, prefix, None
        notes.append(
            f"{name}:{words[index].line}: `hf jobs run … {texts[index]}` runs the launch after it, which is taken; "
            "hgxkit runs it in a Docker container"
        )
        return launch, [*prefix, *env], ContainerExec(words[index], "hf jobs")
    if len(texts) < 3 or texts[0] not in ("apptainer", "singularity") or texts[1] not in ("exec", "run"):
        return words, prefix, None
    index, binds, env = 2, [], []
    while index < len(words) and texts[index].startswith("-"):
        option, equals, value = texts[index].partition("=")
        if option in _EXEC_VALUES and not equals:
            index += 1
            value = texts[index] if index < len(texts) else ""
        if option in ("-B", "--bind"):
            binds += [b.split(":")[:2] for b in value.split(",") if b]
        elif option == "--env":
            env.append(replace(words[index], text=value))
        index += 1
    if index >= len(words):
        return words, prefix, None
    image, launch = words[index], words[index + 1 :]
    if not _launches(launch) and texts[1] == "run":
        launch = _runscript(image, launch)
    if not _launches(launch):
        return words, prefix, None
    runs = "the launch after it" if launch[:1] == words[index + 1 : index + 2] else "the image's server"
    notes.append(
        f"{name}:{image.line}: `{texts[0]} {texts[1]} … {image.text}` runs {runs}, which is taken; hgxkit runs "
        "it in a Docker container"
    )
    return host_paths(launch, binds, name, notes, "--bind"), [*prefix, *env], ContainerExec(image, texts[0])


def host_paths(
    launch: Sequence[Word], binds: Sequence[Sequence[str]], name: str, notes: list[str], option: str
) -> list[Word]:
    """`launch` with each word that is a container path of one of `binds` ([host, container] or [path]) written as
    the host's, a note each (`option` names the binds as the post wrote them)."""
    written = []
    for word in launch:
        for source, *target in binds:
            inside = target[0] if target else source
            if word.text == inside or word.text.startswith(inside.rstrip("/") + "/"):
                host = source.rstrip("/") + word.text[len(inside.rstrip("/")) :]
                notes.append(f"{name}:{word.line}: {word.text} is the host's {host} ({option} {source}:{inside})")
                word = replace(word, text=host)
                break
        written.append(word)
    return written


# Container CLIs whose `run` takes Docker's options: read as `docker run`, which hgxkit runs.
_DOCKER_LIKE = ("podman", "nerdctl")
# A CDI device name for NVIDIA GPUs (podman's, Docker's from 25): `nvidia.com/gpu=all`, `nvidia.com/gpu=0`.
_CDI_GPU = re.compile(r"nvidia\.com/gpu=(all|[\w-]+(?:,[\w-]+)*)")


def _as_docker(words: list[Word], name: str, notes: list[str]) -> list[Word]:
    """`podman run …` / `nerdctl run …` as the `docker run …` it is, with a note; a CDI GPU device
    (`--device nvidia.com/gpu=all`) as Docker's `--gpus all` (or the GPUs it names). Other words unchanged."""
    texts = [w.text for w in words]
    if len(texts) < 2 or texts[0] not in _DOCKER_LIKE or texts[1] != "run":
        return words
    notes.append(
        f"{name}:{words[0].line}: `{texts[0]} run` read as `docker run` (the same options; hgxkit runs Docker)"
    )
    out = [replace(words[0], text="docker")]
    index = 1
    while index < len(words):
        word, value = words[index], texts[index + 1] if index + 1 < len(texts) else ""
        glued = texts[index].startswith("--device=")
        cdi = _CDI_GPU.fullmatch(
            texts[index].partition("=")[2] if glued else value if texts[index] == "--device" else ""
        )
        if cdi is None:
            out.append(word)
            index += 1
            continue
        gpus = "all" if cdi.group(1) == "all" else f'"device={cdi.group(1)}"'
        notes.append(f"{name}:{word.line}: the CDI device nvidia.com/gpu={cdi.group(1)} is --gpus {gpus}")
        out += [replace(word, text="--gpus"), replace(word, text=gpus)]
        index += 1 if glued else 2
    return out


def _launches(words: Sequence[Word]) -> bool:
    return any(kind.launches(python_program([w.text for w in words])) for kind in KINDS.values())


def _runscript(image: Word, args: list[Word]) -> list[Word]:
    """What `apptainer run IMAGE ARGS…` runs: the image's runscript, which for an image built from a Docker image
    is its ENTRYPOINT with ARGS; the kind's server launch when the image (`docker://REF`, or a file named like
    `vllm-0.8.5.sif`) holds a kind whose image's entrypoint is its server, else ARGS as they are."""
    if image.text.startswith("docker://"):
        kind = next((k for k in KINDS.values() if image_matches(image.text.removeprefix("docker://"), k.images)), None)
    else:
        kind = image_file_kind(image.text)
    if kind is None or not kind.image_entrypoint:
        return args
    return [*(replace(image, text=word) for word in kind.image_entrypoint), *args]


def _placeholder(command: Command) -> tuple[int, int, str] | None:
    for offset, line in enumerate(command.post.clean[command.first - 1 : command.last]):
        match = PLACEHOLDER.search(line)
        if match:
            return command.first + offset, match.start() + 1, match.group()
    return None


def _split(command: Command, *, keep_angles: bool) -> list[tuple[list[Word], bool, list[str]]]:
    """The simple commands of one command line, redirections and `&` set aside with a note each."""
    parts: list[tuple[list[Word], bool, list[str]]] = []
    current: list[Word] = []
    notes: list[str] = []
    piped = False
    words = list(command.words)
    index = 0
    while index < len(words):
        word = words[index]
        if word.is_operator and word.text in _SEPARATORS:
            if word.text == "&":
                notes.append(f"{command.post.name}:{word.line}: `&` (run in the background) dropped")
            parts.append((current, piped, notes))
            current, notes, piped = [], [], word.text in ("|", "|&")
        elif word.is_operator and word.text[0] in "<>" and not keep_angles:
            target = words[index + 1] if index + 1 < len(words) and not words[index + 1].is_operator else None
            if current and current[-1].text.isdigit() and _adjacent(current[-1], word):
                current.pop()  # the descriptor of `2>&1`
            shown = word.text + (target.text if target else "")
            notes.append(
                f"{command.post.name}:{word.line}: redirection `{shown}` dropped (the server's output goes to "
                "docker logs)"
            )
            index += 1 if target else 0
        else:
            current.append(word)
        index += 1
    parts.append((current, piped, notes))
    name = command.post.name
    return [(words, *rest) for part in parts if part[0] for words, *rest in _exports_apart(part, name)]


def _exports_apart(part: tuple[list[Word], bool, list[str]], name: str) -> list[tuple[list[Word], bool, list[str]]]:
    """An `export NAME=value` that a copy joined with the lines after it (`export A=1 export B=2 vllm serve …`,
    a page that lost its newlines) as the commands it was: another `export`, or a launch, after the assignments
    starts a command of its own (a `docker` command too). A shell would export `vllm` and `serve` as names, which
    no poster meant; an export of bare names (`export A B`) stays as written.

    >>> from hgxkit.recipe.shellwords import split_words
    >>> words = split_words("export A=1 export B=2 vllm serve org/m")
    >>> [[w.text for w in p[0]] for p in _exports_apart((words, False, []), "p")]
    [['export', 'A=1'], ['export', 'B=2'], ['vllm', 'serve', 'org/m']]
    """
    words, piped, notes = part
    if [w.text for w in words[:1]] != ["export"]:
        return [part]
    starts = [0]
    for index in range(1, len(words)):
        word = words[index]
        if word.is_operator:
            return [part]
        if word.text == "export":
            starts.append(index)
        elif not ASSIGNMENT_RE.match(word.text):
            if not _launches(words[index:]) and words[index].text != "docker":
                return [part]
            starts.append(index)
            break
    if len(starts) == 1:
        return [part]
    joined = (
        f"{name}:{words[0].line}: `export` and the command(s) after it on one line are read apart (a copy that "
        "joined the post's lines)"
    )
    bounds = [*starts, len(words)]
    return [
        (words[a:b], piped if n == 0 else False, [*notes, joined] if n == 0 else [])
        for n, (a, b) in enumerate(itertools.pairwise(bounds))
    ]


def _adjacent(left: Word, right: Word) -> bool:
    return left.line == right.line and left.column + len(left.text) == right.column


def _prefix(words: list[Word], name: str) -> tuple[list[Word], list[Word], list[str]]:
    """Split off `sudo`, `nohup`, `exec`, `env` and `NAME=value` words before the program (a bare `NAME=value`
    keeps them all)."""
    prefix: list[Word] = []
    notes: list[str] = []
    index = 0
    while index < len(words):
        text = words[index].text
        if text == "sudo" or (text in ("-E", "-H") and index and words[index - 1].text == "sudo"):
            if text == "sudo":
                notes.append(f"{name}:{words[index].line}: `sudo` dropped (hgxkit runs the command as root)")
            index += 1
        elif text == "exec" and index + 1 < len(words) and not words[index + 1].text.startswith("-"):
            notes.append(
                f"{name}:{words[index].line}: `exec` dropped (the shell becomes the command; in a container the "
                "command is the process anyway)"
            )
            index += 1
        elif text == "nohup":
            notes.append(
                f"{name}:{words[index].line}: `nohup` dropped (the container outlives the shell; its output is "
                "the container's log)"
            )
            index += 1
        elif text == "env" and index + 1 < len(words) and not words[index + 1].text.startswith("-"):
            # `env NAME=value … cmd` runs cmd with those variables, as the same words without `env` do
            notes.append(f"{name}:{words[index].line}: `env` dropped (its NAME=value words are the command's prefix)")
            index += 1
        elif text == "env" and (given := env_options([w.text for w in words], index)) is not None:
            words, prefix = _env_applied(words, index, given, prefix, notes, name)
            index = given.end
        elif text == "env" and index + 2 < len(words) and words[index + 1].text in _EMPTY_ENVIRONMENT:
            # A container starts from its image's environment, never the host shell's, which is what `-i` keeps
            # away; emptying the image's too would lose its PATH and CUDA settings, which the post never meant.
            notes.append(
                f"{name}:{words[index].line}: `env {words[index + 1].text}` dropped (its NAME=value words are the "
                "command's prefix; the container starts from its image's environment, and the host's never reaches it)"
            )
            index += 2
        elif ASSIGNMENT_RE.match(text) and not words[index].is_operator:
            prefix.append(words[index])
            index += 1
        elif (end := runner_end([w.text for w in words], index)) > index:
            runner = " ".join(w.text for w in words[index:end])
            notes.append(
                f"{name}:{words[index].line}: `{runner}` dropped ({words[index].text} runs the command in an "
                "environment of its own; the container runs the image's)"
            )
            index = end
            if index < len(words) and words[index].text in UV_MODULE:  # `uv run -m MODULE` is `python -m MODULE`
                words = [
                    *words[:index],
                    replace(words[index], text="python3"),
                    replace(words[index], text="-m"),
                    *words[index + 1 :],
                ]
        else:
            break
    if index == len(words) or (prefix and words[index].is_operator and words[index].text in ("$(", "`")):
        return prefix + words[index:], [], notes  # `NAME=value …` alone (or `NAME=$(cmd)`): assignments
    if _wraps_launch([w.text for w in words[index:]]):
        notes.append(
            f"{name}:{words[index].line}: the wrapper script {words[index].text} dropped: it is the host's (a "
            "container of the engine's image does not have it) and runs the launch after it, which is taken"
        )
        index += 1
    return words[index:], prefix, notes


_EMPTY_ENVIRONMENT = frozenset({"-i", "--ignore-environment", "-"})
# A word naming a path relative to the shell's directory: `./x`, `../x`, or a flag's `--opt=./x`.
_RELATIVE_WORD = re.compile(r"^(?:--?[\w.-]+=)?\.\.?/")


def _env_applied(
    words: list[Word], index: int, given: EnvOptions, prefix: list[Word], notes: list[str], name: str
) -> tuple[list[Word], list[Word]]:
    """`words` and the prefix with the `env` at `index` and its `-u NAME`/`-C DIR` options read, a note each: the
    container never gets the host shell's variables, so `-u NAME` takes nothing from it but a NAME=value of the
    post's just before; `-C DIR` runs the program in DIR, so its `./x` words are DIR's files (written out)."""
    line = words[index].line
    if given.unsets:
        undone = [w.text for w in prefix if w.text.split("=", 1)[0] in given.unsets]
        prefix = [w for w in prefix if w.text not in undone]
        also = f"; the post's {', '.join(undone)} before it is dropped with it" if undone else ""
        notes.append(
            f"{name}:{line}: `env -u {' -u '.join(given.unsets)}` dropped (the launch runs without "
            f"{', '.join(given.unsets)}, and the container gets no variable of the host's shell{also})"
        )
    directory = given.directory
    if directory is None:
        return words, prefix
    if not directory.startswith("/") or "$" in directory:  # relative to a directory the post does not say
        notes.append(f"{name}:{line}: `env -C {directory}` dropped (the launch ran in {directory})")
        return words, prefix
    rewritten = [
        replace(w, text=_based(w.text, directory)) if at > index and _RELATIVE_WORD.match(w.text) else w
        for at, w in enumerate(words)
    ]
    based = [w.text for w, old in zip(rewritten, words, strict=True) if w.text != old.text]
    written = f"; its relative paths are {directory}'s: {', '.join(based)}" if based else ""
    notes.append(f"{name}:{line}: `env -C {directory}` dropped (the launch ran in {directory}{written})")
    return rewritten, prefix


def _based(text: str, directory: str) -> str:
    """A word naming `./x` (or `--opt=./x`) as `directory`'s x."""
    option, equals, path = text.rpartition("=") if text.startswith("-") else ("", "", text)
    return f"{option}{equals}{posixpath.normpath(posixpath.join(directory, path))}"


def _wraps_launch(texts: Sequence[str]) -> bool:
    """True for `SCRIPT.sh LAUNCH…`: a host's wrapper script (one that sets the environment, then `exec "$@"`)
    whose arguments are a launch of a served engine."""
    if len(texts) < 2 or not texts[0].endswith(".sh"):
        return False
    program = python_program(texts[1:])
    return any(kind.launches(program) for kind in KINDS.values())


def _classify(words: list[Word], prefix: list[Word]) -> tuple[str, str | None, str | None]:
    """(kind, engine, client) of a simple command's words (prefix already removed)."""
    texts = [w.text for w in words]
    if not texts:
        return "other", None, None
    substituted = any(w.is_operator and w.text in ("$(", "`") for w in words)  # `NAME=$(cmd)`
    if not prefix and ASSIGNMENT_RE.match(texts[0]) and (substituted or all(ASSIGNMENT_RE.match(t) for t in texts)):
        return "assign", None, None
    head = texts[0]
    if head == "export":
        return "export", None, None
    if head in _KEYWORDS:
        return "control", None, None
    if head == "docker":
        sub = texts[1] if len(texts) > 1 else ""
        if sub == "container" and len(texts) > 2:
            sub = texts[2]
        if (engine := unsupported_program(texts)) is not None:  # `docker model run`: Docker Model Runner
            return "engine", engine.name, None
        if sub == "exec":
            inner = exec_command(texts[2:])
            return "docker-exec", None, client_of(python_program(inner)) if inner else None
        if sub == "run" and _asks_help(texts):  # `docker run … IMAGE serve --help=all`: the same check in a container
            return "other", None, None
        return (
            {"run": "docker-run", "exec": "docker-exec", "build": "docker-build", "tag": "docker-tag"}.get(
                sub, "docker"
            ),
            None,
            None,
        )
    program = python_program(texts)
    client = client_of(program)
    if client is not None:
        return "bench", None, client
    if _asks_help(texts) or "-h" in texts[1:]:  # `vllm serve --help`: an install check that prints and exits
        return "other", None, None
    for kind in KINDS.values():
        if kind.launches(program):
            return "server", kind.name, None
    engine = unsupported_program(program)
    if engine is not None:
        return "engine", engine.name, None
    return "other", None, None


def _asks_help(texts: Sequence[str]) -> bool:
    """`--help`, or vLLM's `--help=all` / `--help=GROUP`: the program prints its options and exits."""
    return any(text == "--help" or text.startswith("--help=") for text in texts)


_EXEC_VALUE_OPTIONS = frozenset({"-e", "--env", "-u", "--user", "-w", "--workdir", "--env-file", "--detach-keys"})


def exec_command(args: Sequence[str]) -> list[str]:
    """The command of `docker exec [OPTIONS] CONTAINER COMMAND…` (`args` after `exec`)."""
    index = 0
    while index < len(args) and args[index].startswith("-"):
        flag = args[index].split("=", 1)[0]
        index += 2 if flag in _EXEC_VALUE_OPTIONS and "=" not in args[index] else 1
    return list(args[index + 1 :])


def unsupported_program(words: Sequence[str]) -> UnsupportedKind | None:
    """The unsupported engine whose launch program `words` start with, if any."""
    for other in UNSUPPORTED:
        if any(tuple(words[: len(p)]) == p for p in other.programs):
            return other
    return None
