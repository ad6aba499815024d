"""`hgxkit recipe import FILE…`: whole posts become one recipe, with a report of what was taken and skipped.

The serving command is found wherever it is (`hgxkit.recipe.post` reads the text, `commands` classifies each
command). A `docker run` is kept as written; a bare launch is translated (`hgxkit.recipe.bare`). Several
serving commands become one recipe when they are the ranks of one server over several hosts (`nodes`);
commands that differ otherwise are refused, saying what differs, until `--pick N` chooses one. Engines
hgxkit does not serve are refused by name, and so are setups it cannot reproduce on an HGX-H200 node (AMD
ROCm, Ascend, Windows host paths, an image built from a local checkout, more GPUs than the node has). The
model is placed (`placement`), benchmark commands and printed numbers become the matrix and the reference
(`results_import`). Every change is a note; every refusal is one line naming the file, line and column.

Example:
    >>> post = "Serve it:\\n\\n```\\n$ vllm serve org/Tiny-1B --port 8001 -tp 1\\n```\\n"
    >>> result = import_post([("post.md", post)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    >>> recipe = result.recipe
    >>> recipe.server.kind, recipe.model.repo_id, [w for e in recipe.docker.entries for w in e.words][:4]
    ('vllm', 'org/Tiny-1B', ['--gpus', 'all', '--ipc=host', '-p'])
    >>> for line in result.report:
    ...     print(line.line())
    post.md:1: skipped 1 line(s) of prose, comments and output (printed results are read apart)
    post.md:4: took `vllm serve` (the server, vLLM)
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from hgxkit.errors import InputError
from hgxkit.kinds import (
    DEFAULT_KIND,
    KINDS,
    UNSUPPORTED,
    ServerKind,
    UnsupportedKind,
    detect_kind,
    image_matches,
    python_program,
)
from hgxkit.netaddr import is_loopback
from hgxkit.recipe.bare import docker_run_for
from hgxkit.recipe.clients import client_of
from hgxkit.recipe.commands import PLACEHOLDER, Simple, simple_commands, unsupported_program
from hgxkit.recipe.diff import Difference, diff_recipes
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.dockerrun import ParsedRun, parse_run_words
from hgxkit.recipe.group_join import join_groups
from hgxkit.recipe.importer import ImportResult, Report, finish, scrub_run
from hgxkit.recipe.loader import MAX_RECIPE_BYTES
from hgxkit.recipe.model import DockerSpec, ImageRef, ModelSpec, Recipe, Source
from hgxkit.recipe.nodes import HGX_GPUS, join_ranks, parallel_size, rank_of, spans_nodes
from hgxkit.recipe.placement import DEFAULT_MODELS_DIR, place_model
from hgxkit.recipe.post import PostFile, find_commands, read_post
from hgxkit.recipe.results_import import Bench, bench_commands, benchmarks
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.shellwords import Word, shell_value, split_words
from hgxkit.recipe.variables import Scope
from hgxkit.secrets import is_secret_flag, is_secret_name

_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh"})
# Signs of hardware hgxkit does not serve on: AMD ROCm and Huawei Ascend.
_AMD_ENV = re.compile(r"^(?:VLLM_ROCM_|HIP_|ROCR_|HSA_|ROCM_)")
_ASCEND_ENV = re.compile(r"^(?:HCCL_|ASCEND_)")
_WINDOWS_MOUNT = re.compile(r"(?:-v|--volume|--mount)[=\s]+[\"']?(?:[^\s\"']*?(?:source|src)=)?([A-Za-z]:\\[^\s\"':]*)")
# vLLM data parallelism spread over hosts by hand (not the --nnodes form hgxkit renders per host).


@dataclass(frozen=True)
class ImportOptions:
    """What the person importing says that the post does not: recipe name, image, kind, model, which command."""

    name: str | None = None
    image: str | None = None
    kind: str | None = None
    model_repo: str | None = None
    revision: str = "main"
    models_dir: str = DEFAULT_MODELS_DIR
    pick: int | None = None


@dataclass
class _Server:
    """A command that may be the server: what it is, its parsed run, or why it cannot be."""

    simple: Simple
    role: str  # server | engine | unknown | broken
    kind: str | None = None  # a supported kind's name, or an unsupported engine's name
    run: ParsedRun | None = None  # `docker run` commands
    error: InputError | None = None
    context: _Container | None = None  # the interactive container a bare launch runs in
    words: list[str] | None = None  # the container command to keep (after unwrapping `bash -c`)
    notes: list[str] = field(default_factory=list)
    number: int = 0  # its number among the post's serving commands (what --pick takes)

    def where(self) -> str:
        return self.simple.where()


@dataclass(frozen=True)
class _Container:
    """A `docker run IMAGE bash` the post opens to run commands in."""

    simple: Simple
    run: ParsedRun


def import_post(files: Sequence[tuple[str, str]], options: ImportOptions | None = None) -> ImportResult:
    """Import one recipe from the posts `files` ((name, text) pairs, read in order)."""
    return _Importer(files, options or ImportOptions()).run()


class _Importer:
    def __init__(self, files: Sequence[tuple[str, str]], options: ImportOptions) -> None:
        self.options = options
        self.posts: list[PostFile] = []
        for name, text in files:
            if len(text) > MAX_RECIPE_BYTES:
                raise InputError(f"{name}: longer than {MAX_RECIPE_BYTES >> 10} KiB; give the post, not a log")
            self.posts.append(read_post(name, text))
        self.simples: list[Simple] = []
        for post in self.posts:
            self.simples += simple_commands(find_commands(post))

        self.report: list[Report] = []
        self.notes: list[str] = [f"{p.name}:{line}: {what}" for p in self.posts for line, what in p.notes]
        self.servers: list[_Server] = []
        self.containers: list[_Container] = []
        self.client_runs: list[Bench] = []
        self.built: dict[str, str] = {}  # image tag -> where `docker build` made it
        self.join = "one"  # how the serving commands join: one, ranks (over hosts), groups (of GPUs)
        self.unset: dict[str, list[tuple[str, int]]] = {}  # $NAME the post uses but does not set -> where
        self.aliases: dict[str, tuple[str, str]] = {}  # `docker tag SRC DST`: DST -> (SRC, where)

    def run(self) -> ImportResult:
        for simple in self.simples:
            self._consider(simple)
        chosen = self._choose()
        recipe, where = self._build(chosen)
        recipe = self._benchmarks(recipe, chosen)
        recipe = replace(recipe, name=self.options.name or _name(recipe))
        self._prose()
        for name, places in self.unset.items():
            shown = ", ".join(f"{file}:{line}" if i == 0 or file != places[0][0] else str(line)
                              for i, (file, line) in enumerate(places))  # fmt: skip
            self.notes.append(
                f"${name} is not set by the post ({shown}); the host's shell gives it when the command runs"
            )
        report = tuple(sorted(dict.fromkeys(self.report), key=_report_order))
        return finish(recipe, self.notes, where, report)

    # --- what each command is ---

    def _consider(self, simple: Simple) -> None:
        text = " ".join(simple.texts[:3])
        if simple.kind == "broken":
            error = simple.error()
            assert error is not None
            if re.search(r"docker run|serve|launch_server|api_server", " ".join(simple.command.post.clean[
                    simple.command.first - 1 : simple.command.last])):  # fmt: skip
                self.servers.append(_Server(simple, "broken", error=error))
            else:
                self._said(simple, "skipped", f"an unreadable command ({error.message.split(': ', 1)[-1]})")
        elif simple.kind in ("assign", "export"):
            names = [w.text.split("=", 1)[0] for w in simple.words[simple.kind == "export" :]]
            self._said(simple, "read", f"variable(s) {', '.join(names)} (used where the post writes $NAME)")
        elif simple.kind == "server":
            self.servers.append(_Server(simple, "server", simple.engine, context=self._container_before(simple)))
        elif simple.kind == "engine":
            self.servers.append(_Server(simple, "engine", simple.engine))
        elif simple.kind in ("bench", "docker-exec") and simple.client:
            pass  # reported by the benchmark step
        elif simple.kind == "docker-run":
            self._docker_run(simple)
        elif simple.kind == "docker-build":
            for flag, tag in zip(simple.texts, simple.texts[1:], strict=False):
                if flag in ("-t", "--tag"):
                    self.built[tag] = simple.where()
            self._said(simple, "skipped", "`docker build` (an image built from a local checkout)")
        elif simple.kind == "docker-tag" and len(simple.texts) >= 4:
            self.aliases[simple.texts[-1]] = (simple.texts[-2], simple.where())
            self._said(simple, "skipped", f"`docker tag` (noted: {simple.texts[-1]} is {simple.texts[-2]})")
        else:
            why = "shell syntax" if simple.kind == "control" else "not a serving or benchmark command"
            self._said(simple, "skipped", f"{text} ({why})")

    def _docker_run(self, simple: Simple) -> None:
        raw = " ".join(simple.command.post.clean[simple.command.first - 1 : simple.command.last])
        engine = _engine_of(simple.texts, raw)
        if engine is not None:
            self.servers.append(_Server(simple, "engine", engine.name))
            return
        try:
            run = parse_run_words(self._resolved(simple), source=simple.command.post.name)
        except InputError as err:
            self.servers.append(_Server(simple, "broken", error=err))
            return
        role, words, notes = _container_role(run, self.options.kind, simple.where())
        if role == "bench":
            client = client_of(python_program(words))
            assert client is not None
            self.client_runs.append((simple, client, words))
        elif role == "shell":
            self.containers.append(_Container(simple, run))
            shown = f"{run.image} {' '.join(run.command)}".strip()
            self._said(simple, "read", f"`docker run {shown}` (an interactive container; bare commands after it run "
                       "inside it)")  # fmt: skip
        elif role == "job":
            shown = shell_value(" ".join(words))[:40]
            self._said(simple, "skipped", f"`docker run {run.image}` (runs `{shown}`, not a server)")
        elif role == "no-program":
            error = InputError(
                f"{simple.where()}: {run.image} has no server entrypoint: the words after it ({' '.join(words[:4])} …) "
                f"run as its command; add the server program, e.g. `python3 -m sglang.launch_server --model-path …`"
            )
            self.servers.append(_Server(simple, "broken", error=error))
        else:
            kind = _kind_of(run, words, self.options.kind)
            self.servers.append(_Server(simple, role, kind, run=run, words=words, notes=notes))

    def _container_before(self, simple: Simple) -> _Container | None:
        post = simple.command.post
        before = [
            c for c in self.containers if c.simple.command.post is post and c.simple.first_line < simple.first_line
        ]
        return before[-1] if before else None

    def _resolved(self, simple: Simple) -> list[Word]:
        """The command's words with the `$NAME`s the post sets written out (a note per name)."""
        scope = Scope.before(self.simples, simple)
        out = []
        for word in simple.words:
            text, used, left = scope.resolve(word.text, where=f"{simple.command.post.name}:{word.line}")
            for name in used:
                definition = scope.definitions[name]
                value = shell_value(definition.value)
                self.notes.append(
                    f"{simple.command.post.name}:{word.line}: ${name} is the post's {name}={value} "
                    f"(line {definition.line})"
                )
            for name in left:
                lines = self.unset.setdefault(name, [])
                if (simple.command.post.name, word.line) not in lines:
                    lines.append((simple.command.post.name, word.line))
            out.append(Word(text, word.line, word.column, word.quoted, word.is_operator))
        return out

    def _prose(self) -> None:
        """One line per file for what is neither a command nor a number read: prose, logs, output."""
        for post in self.posts:
            covered = {
                n for s in self.simples if s.command.post is post for n in range(s.command.first, s.command.last + 1)
            }
            prose = [n for n, line in enumerate(post.clean, 1) if line.strip() and n not in covered]
            if prose:
                what = f"{len(prose)} line(s) of prose, comments and output (printed results are read apart)"
                self.report.append(Report(f"{post.name}:{prose[0]}", "skipped", what))

    def _said(self, simple: Simple, action: str, what: str) -> None:
        self.report.append(Report(simple.span(), action, what))

    # --- which command is the server ---

    def _choose(self) -> list[tuple[_Server, Recipe, list[str]]]:
        servers = self.servers
        for number, server in enumerate(servers, 1):
            server.number = number
        if self.options.pick is not None:
            if not 1 <= self.options.pick <= len(servers):
                listed = "; ".join(f"{n}: {s.where()}" for n, s in enumerate(servers, 1)) or "none"
                raise InputError(
                    f"--pick {self.options.pick}: the post has {len(servers)} serving command(s) ({listed})"
                )
            for number, server in enumerate(servers, 1):
                if number != self.options.pick:
                    self._said(server.simple, "skipped", f"serving command {number} (--pick {self.options.pick})")
            servers = [servers[self.options.pick - 1]]
        engines = [s for s in servers if s.role == "engine"]
        if engines:
            raise _engine_refusal(engines[0], servers)
        built: list[tuple[_Server, Recipe, list[str]]] = []
        errors: list[InputError] = []
        for server in servers:
            if server.role == "broken":
                errors.append(server.error)  # type: ignore[arg-type]
                continue
            try:
                built.append((server, *self._provisional(server)))
            except InputError as err:
                errors.append(err)
        if not built:
            if errors:
                raise errors[0]
            raise self._no_server()
        for server, error in zip([s for s in servers if s not in [b[0] for b in built]], errors, strict=False):
            self._said(server.simple, "skipped", f"a serving command that cannot be imported: {error.message}")
        chosen, self.join = _one_setup(built)
        return chosen

    def _no_server(self) -> InputError:
        names = ", ".join(p.name for p in self.posts)
        shells = list(self.containers)
        if shells:
            return InputError(
                f"{shells[0].simple.where()}: no serving command in {names}: the container runs "
                f"`{' '.join(shells[0].run.command) or 'its entrypoint'}` and the post does not say what runs in it; "
                "import the post that has the server command"
            )
        benches = bench_commands(self.simples) + self.client_runs
        if benches:
            return InputError(
                f"{benches[0][0].where()}: no serving command in {names}, only {len(benches)} benchmark command(s); "
                "import it together with the post that has the server (hgxkit recipe import SERVER.txt THIS.txt)"
            )
        return InputError(
            f"{names}: no serving command found (docker run, sglang serve, python -m sglang.launch_server, "
            "vllm serve); give the post that has it"
        )

    def _provisional(self, server: _Server) -> tuple[Recipe, list[str]]:
        """The recipe one serving command would be, before its model is placed; raise InputError if it cannot be."""
        simple = server.simple
        post = simple.command.post
        where = simple.where()
        notes = list(server.notes) + list(simple.notes)
        _placeholders(simple)
        if simple.in_block:
            raise InputError(f"{where}: the command runs inside an `{simple.in_block}` block; its words depend on "
                             "shell logic: give the command as it runs")  # fmt: skip
        words = self._resolved(simple)
        substitution = next((w for w in words if w.is_operator), None)
        if substitution is not None:
            raise InputError(
                f"{post.name}: line {substitution.line}, column {substitution.column}: {substitution.text!r} "
                "(a command substitution or subshell) is not imported; replace it by its value"
            )
        _windows_paths(simple)
        if server.run is None:
            run, kind = self._bare(server, [w.text for w in words], notes)
        else:
            run, kind = server.run, server.kind
            run = replace(run, command=tuple(server.words if server.words is not None else run.command))
            if simple.prefix:
                notes.append(f"{where}: {' '.join(w.text for w in simple.prefix)} before `docker run` only sets the "
                             "docker client's environment; dropped")  # fmt: skip
        run = self._image(run, simple, notes)
        kind = self.options.kind or kind or _detect(run, where)
        _hardware(server, run, Scope.before(self.simples, simple), self._prefix(simple))
        docker, command, grouping = scrub_run(run, kind, post.name, notes)
        recipe = Recipe(name="imported", image=ImageRef(run.image), docker=docker, server=command,
                        model=ModelSpec(repo_id=None), groups=grouping)  # fmt: skip
        _fits(recipe, server)
        return recipe, notes

    def _prefix(self, simple: Simple) -> dict[str, str]:
        return {w.text.split("=", 1)[0]: w.text.split("=", 1)[1] for w in simple.prefix}

    def _bare(self, server: _Server, words: list[str], notes: list[str]) -> tuple[ParsedRun, str]:
        simple = server.simple
        kind = self.options.kind or server.kind or DEFAULT_KIND
        image = self.options.image
        if image is None and server.context is not None:
            image = server.context.run.image
            notes.append(f"{simple.where()}: runs in the container started at {server.context.simple.where()}, "
                         f"so its image {image} is used")  # fmt: skip
        if image is None:
            image = KINDS[kind].default_image
            notes.append(f"{simple.where()}: a bare launch; the image is {kind}'s {image} (give --image REF to choose)")
        scope = Scope.before(self.simples, simple)
        environment = {name: d.value for name, d in scope.exported().items()}
        prefix = [f"{name}={value}" for name, value in self._prefix(simple).items()]
        run, more = docker_run_for(prefix, words, kind=KINDS[kind], image=image, environment=environment,
                                   where=simple.where())  # fmt: skip
        notes += more
        return run, kind

    def _image(self, run: ParsedRun, simple: Simple, notes: list[str]) -> ParsedRun:
        if self.options.image:
            if self.options.image != run.image:
                notes.append(f"{simple.where()}: --image {self.options.image} replaces the post's {run.image}")
            return replace(run, image=self.options.image)
        image = run.image
        if image in self.aliases:
            source, where = self.aliases[image]
            notes.append(f"{simple.where()}: {image} is `docker tag` of {source} ({where}); {source} is pulled")
            image = source
        if image in self.built:
            raise InputError(
                f"{simple.where()}: the image {image} is built by `docker build` ({self.built[image]}) from a source "
                "checkout; a node cannot pull it: give --image REF of a pullable image"
            )
        if "$" in image:
            raise InputError(f"{simple.where()}: the image {shell_value(image)} is a variable the post does not set; "
                             "give --image REF")  # fmt: skip
        return replace(run, image=image)

    # --- the recipe ---

    def _build(self, chosen: list[tuple[_Server, Recipe, list[str]]]) -> tuple[Recipe, str]:
        server, recipe, notes = chosen[0]
        where = server.where()
        self.notes += notes
        for other, _, _ in chosen:
            self._said(other.simple, "took", _took(other, recipe))
        if spans_nodes(recipe.server):
            joined = join_ranks([r.server for _, r, _ in chosen], where=where)
            recipe = replace(recipe, server=joined.server, groups=joined.groups)
            self.notes += joined.notes
        elif self.join == "groups":
            grouped = join_groups([r.docker for _, r, _ in chosen], where=where)
            recipe = replace(recipe, docker=grouped.docker, groups=grouped.groups)
            self.notes += grouped.notes
            if len({r.server.flag("--port") for _, r, _ in chosen}) > 1:
                self.notes.append(f"{where}: every group's server listens on {recipe.server.flag('--port')} in its own "
                                  "container; the groups' host ports differ")  # fmt: skip
        placed = place_model(recipe.docker, recipe.server, where=where, model_repo=self.options.model_repo,
                             revision=self.options.revision, models_dir=self.options.models_dir)  # fmt: skip
        self.notes += placed.notes
        server_command = _reachable(placed.docker, placed.server, where, self.notes)
        placed = replace(placed, server=server_command)
        groups = recipe.groups
        if groups is not None and groups.gpus_per_node is None and groups.size is not None:
            groups = replace(groups, gpus_per_node=HGX_GPUS)
            self.notes.append(f"{where}: groups.gpus_per_node is {HGX_GPUS} (an HGX-H200 node)")
        recipe = replace(
            recipe, docker=placed.docker, server=placed.server, model=placed.model, groups=groups,
            description=f"Imported by `hgxkit recipe import` from {', '.join(p.label for p in self.posts)}.",
            source=Source(notes=f"Serving command: {', '.join(s.simple.source() for s, _, _ in chosen)}."),
        )  # fmt: skip
        return recipe, chosen[0][0].simple.command.post.name

    def _benchmarks(self, recipe: Recipe, chosen: list[tuple[_Server, Recipe, list[str]]]) -> Recipe:
        original = chosen[0][1]
        served = {v for v in (recipe.server.flag("--served-model-name"), recipe.model.repo_id,
                              original.server.flag(original.server.server_kind.model_flag)) if v}  # fmt: skip
        values = {shell_value(u.value).lower() for u in recipe.server.uses() if u.value}
        listening = recipe.server.flag("--port") or str(recipe.server.server_kind.default_port)
        ports = {int(p) for p in [listening, *(m.host_port for m in recipe.docker.ports())] if p.isdigit()}
        benches = sorted(
            bench_commands(self.simples) + self.client_runs, key=lambda b: _report_order(Report(b[0].span(), "", ""))
        )
        found = benchmarks(self.posts, benches, served=served, values=values, ports=ports)
        self.notes += found.notes
        self.report += [Report(where, action, what) for where, action, what in found.report]
        return replace(recipe, matrix=found.matrix, reference=found.reference)


# What may differ between the commands of one setup: the ranks of a server over hosts, or its GPU groups.
_GROUP_DIFFERENCES = {("docker", "--gpus"), ("docker", "--publish"), ("server", "--port"), ("docker", "--name")}


def _one_setup(built: list[tuple[_Server, Recipe, list[str]]]) -> tuple[list[tuple[_Server, Recipe, list[str]]], str]:
    """The command(s) of one setup and how they join (`one`, `ranks` of a server over hosts, GPU `groups`);
    else a refusal naming what differs."""
    first = built[0]
    if len(built) == 1:
        return built, "one"
    multinode = all(spans_nodes(r.server) for _, r, _ in built)
    kind = first[1].server.server_kind
    allowed = (
        {("server", kind.rank_flag), ("docker", "--name"), *(("server", f) for f in kind.worker_flags)}
        if multinode
        else _GROUP_DIFFERENCES
    )
    kept = [first]
    for other in built[1:]:
        found = diff_recipes(first[1], other[1])
        differences = [d for d in found if (d.area, d.key) not in allowed]
        if differences or (not multinode and found and ("docker", "--gpus") not in {(d.area, d.key) for d in found}):
            raise _differ(built, first, other, differences or found)
        if not found or (multinode and rank_of(first[1].server) == rank_of(other[1].server)):
            other[2].append(f"{other[0].where()}: the same command as {first[0].where()}; taken once")
            continue
        kept.append(other)
    return kept, ("ranks" if multinode else "groups") if len(kept) > 1 else "one"


def _differ(built: list, first: tuple, other: tuple, differences: list[Difference]) -> InputError:
    a, b = _at(first[0], first[0]), _at(other[0], first[0])
    shown = "; ".join(f"{d.area} {d.key}: {d.a} ({a}) vs {d.b} ({b})" for d in differences[:2])
    more = f" and {len(differences) - 2} more" if len(differences) > 2 else ""
    listed = ", ".join(f"{s.number}: {_at(s, first[0])}" for s, _, _ in built)
    return InputError(
        f"{first[0].where()}: {len(built)} serving commands that are not one setup: they differ in {shown}{more}; "
        f"import one with --pick N ({listed})"
    )


def _at(server: _Server, near: _Server) -> str:
    """`line N` for a command of the same file as `near`, else `FILE:N`."""
    same = server.simple.command.post is near.simple.command.post
    return f"line {server.simple.first_line}" if same else server.where()


def _took(server: _Server, recipe: Recipe) -> str:
    image = f", {recipe.image.reference}" if server.run is not None else ""
    words = python_program(server.simple.texts)
    program = words[:3] if words[:2] == ["python3", "-m"] else words[:2]
    return f"`{' '.join(program)}` (the server, {recipe.server.server_kind.title}{image})"


def _container_role(run: ParsedRun, kind: str | None, where: str) -> tuple[str, list[str], list[str]]:
    """What a `docker run` runs: (server | bench | shell | job | unknown, the container command, notes)."""
    words = list(run.command)
    entrypoint = next(
        (u.value for e in run.entries for u in e.uses if canonical(u.option.name) == "--entrypoint"), None
    )
    if entrypoint is not None and posixpath.basename(shell_value(entrypoint)) in {
        posixpath.basename(s) for s in _SHELLS
    }:
        words = [entrypoint, *words]
    if words and words[0] in _SHELLS:
        if len(words) == 1 or words[1:] in (["-l"], ["-i"], ["-il"]):
            return "shell", words, []
        if words[1] == "-c" and len(words) == 3:
            inner = _inner_command(words[2])
            if inner is not None:
                note = f"{where}: `{words[0]} -c '…'` unwrapped: the container runs the server directly"
                return "server", inner, [note]
            if re.search(r"serve|launch_server|api_server", words[2]):
                return "server", words, []  # a compound command around the server: kept as written
        return "job", words, []
    program = python_program(words)
    if client_of(program):
        return "bench", words, []
    if any(k.launches(program) for k in KINDS.values()):
        return "server", words, []
    image_kind = kind or _image_kind(run.image)
    if image_kind is not None and (KINDS[image_kind].image_entrypoint or not words):
        return "server", words, []
    if image_kind is not None and words and words[0].startswith("-"):
        return "no-program", words, []
    return "unknown", words, []


def _inner_command(text: str) -> list[str] | None:
    """The words of `bash -c 'TEXT'` when TEXT is one plain server launch, else None."""
    try:
        words = split_words(shell_value(text))
    except InputError:
        return None
    if any(w.is_operator for w in words) or not words:
        return None
    texts = [w.text for w in words]
    return texts if any(k.launches(python_program(texts)) for k in KINDS.values()) else None


def _detect(run: ParsedRun, where: str) -> str:
    try:
        return detect_kind(run.image, python_program(list(run.command))).name
    except InputError as err:
        if "is not supported" in err.message:
            raise InputError(f"{where}: {err.message}") from None
        raise InputError(
            f"{where}: cannot tell which server {run.image} runs; pass --kind sglang or --kind vllm"
        ) from None


def _image_kind(image: str) -> str | None:
    try:
        return detect_kind(image, ()).name
    except InputError:
        return None


def _kind_of(run: ParsedRun, words: list[str], kind: str | None) -> str | None:
    if kind:
        return kind
    try:
        return detect_kind(run.image, python_program(words)).name
    except InputError:
        return None


def _engine_of(words: list[str], raw: str) -> UnsupportedKind | None:
    """The unsupported engine a `docker run` starts, by its image, its program or its tell-tale names."""
    for other in UNSUPPORTED:
        if any(image_matches(word, other.images) for word in words):
            return other
    program = unsupported_program(words)
    if program is not None:
        return program
    return next((other for other in UNSUPPORTED if other.hinted_by(raw)), None)


def _engine_refusal(engine: _Server, servers: list[_Server]) -> InputError:
    other = next(o for o in UNSUPPORTED if o.name == engine.kind)
    supported = " and ".join(k.title for k in KINDS.values())
    also = [s for s in servers if s is not engine and s.role != "engine"]
    tail = (
        f"; the post also launches {len(also)} other server(s) ({', '.join(s.where() for s in also)})" if also else ""
    )
    return InputError(
        f"{engine.where()}: {other.title} ({other.name}) is not supported: hgxkit serves {supported}{tail}"
    )


def _placeholders(simple: Simple) -> None:
    """Refuse a `<name>` placeholder the command would run with (one standing for a secret is fine: the secret
    is taken from the environment anyway)."""
    words = simple.words
    for index, word in enumerate(words):
        if word.is_operator and word.text == "<" and index + 2 < len(words) and words[index + 2].text.startswith(">"):
            found = (word.line, word.column, f"<{words[index + 1].text}>")
        elif not word.is_operator and PLACEHOLDER.search(word.text):
            name = word.text.split("=", 1)[0] if "=" in word.text else ""
            flag = words[index - 1].text if index else ""
            if is_secret_name(name) or is_secret_flag(flag):
                continue
            found = (word.line, word.column, PLACEHOLDER.search(word.text).group())  # type: ignore[union-attr]
        else:
            continue
        raise InputError(f"{simple.command.post.name}: line {found[0]}, column {found[1]}: {found[2]} is a "
                         "placeholder; write its value")  # fmt: skip


def _hardware(server: _Server, run: ParsedRun, scope: Scope, prefix: dict[str, str]) -> None:
    """Refuse setups for accelerators other than NVIDIA's (AMD ROCm, Huawei Ascend), naming what shows it."""
    where = server.where()
    context = server.context.run if server.context else None
    images = [run.image] + ([context.image] if context else [])
    for image in images:
        if "rocm" in image.lower():
            raise InputError(f"{where}: {image} is an AMD ROCm image; hgxkit serves NVIDIA HGX-H200 nodes")
        if "ascend" in image.lower():
            raise InputError(f"{where}: {image} is a Huawei Ascend image; hgxkit serves NVIDIA HGX-H200 nodes")
    for parsed in [run] + ([context] if context else []):
        for entry in parsed.entries:
            for use in entry.uses:
                if canonical(use.option.name) == "--device" and (use.value or "").startswith(("/dev/kfd", "/dev/dri")):
                    raise InputError(f"{where}: --device {use.value} is an AMD GPU device; hgxkit serves NVIDIA "
                                     "HGX-H200 nodes")  # fmt: skip
    names = [*scope.exported(), *prefix, *(v.split("=", 1)[0] for v in _env_values(run))]
    for name in names:
        if _AMD_ENV.match(name):
            raise InputError(f"{where}: {name} is an AMD ROCm setting; hgxkit serves NVIDIA HGX-H200 nodes")
        if _ASCEND_ENV.match(name):
            raise InputError(f"{where}: {name} is a Huawei Ascend (HCCL) setting; hgxkit serves NVIDIA HGX-H200 nodes")


def _env_values(run: ParsedRun) -> list[str]:
    return [u.value or "" for e in run.entries for u in e.uses if canonical(u.option.name) == "--env"]


def _windows_paths(simple: Simple) -> None:
    post = simple.command.post
    for offset, line in enumerate(post.clean[simple.command.first - 1 : simple.command.last]):
        match = _WINDOWS_MOUNT.search(line)
        if match:
            raise InputError(
                f"{post.name}: line {simple.command.first + offset}, column {match.start(1) + 1}: {match.group(1)} "
                "is a Windows path; hgxkit runs Linux nodes: mount the Linux directory that holds the model"
            )


def _fits(recipe: Recipe, server: _Server) -> None:
    """Refuse a server that needs more GPUs than its hosts have, or vLLM data parallelism spread by hand."""
    kind = recipe.server.server_kind
    where = server.where()
    flags = {use.name for use in recipe.server.uses()}
    if flags & set(kind.hand_spread_flags):
        used = ", ".join(f for f in kind.hand_spread_flags if f in flags)
        raise InputError(f"{where}: {used}: {kind.title} data parallelism spread over hosts by hand is not imported; "
                         f"a server over several hosts is imported from its {'/'.join(kind.multinode_flags)} "
                         "form")  # fmt: skip
    total = parallel_size(recipe.server, where)
    if total > HGX_GPUS and not spans_nodes(recipe.server):  # over nodes, `join_ranks` checks each host's share
        flag = _flag_word(server, kind)
        at = f"{server.simple.command.post.name}: line {flag.line}, column {flag.column}" if flag else where
        raise InputError(
            f"{at}: tp x pp x dp = {total} GPUs, but an HGX-H200 node has {HGX_GPUS} and the command runs on one "
            f"node: spread it with --nnodes {-(-total // HGX_GPUS)} and --node-rank (a Ray cluster is not imported)"
        )


def _flag_word(server: _Server, kind: ServerKind) -> Word | None:
    """The word of the post that sets the parallel size (to point at it)."""
    wanted = {kind.tp_flag, kind.pp_flag, kind.dp_flag}
    return next((w for w in server.simple.words if kind.canonical_flag(w.text.split("=")[0]) in wanted), None)


def _name(recipe: Recipe) -> str:
    groups = recipe.groups
    candidate = (groups.name_template or "").replace("{{group}}", "") if groups else ""
    candidate = candidate or (recipe.docker.last("--name") or "")
    model = recipe.model.repo_id or recipe.model.local_dir
    if not candidate and model:
        parts = model.rstrip("/").split("/")
        # a snapshot directory is named by its commit: the model's name is the directory above it
        candidate = parts[-2] if len(parts) > 1 and re.fullmatch(r"[0-9a-f]{12,}", parts[-1]) else parts[-1]
    if not candidate:
        candidate = recipe.image.reference.split("@")[0].rsplit("/", 1)[-1].replace(":", "-")
    slug = re.sub(r"[^a-z0-9._-]+", "-", shell_value(candidate).lower()).strip("-._")
    return slug or "imported"


def _reachable(docker: DockerSpec, server: ServerCommand, where: str, notes: list[str]) -> ServerCommand:
    """The server with `--host 0.0.0.0` where its engine listens on loopback by default (SGLang) inside a
    container whose port is published: as posted, the published port reaches nothing in the container (the
    server never answers, and the deploy would wait for it). Where the host side listens is hgxkit's choice
    (`bind_address`, loopback unless set), not the container's."""
    kind = server.server_kind
    if server.has("--host") or not is_loopback(kind.default_host):
        return server
    if not docker.ports() or docker.last("--network") == "host":
        return server
    notes.append(f"{where}: --host 0.0.0.0 added: {kind.title} listens on {kind.default_host} by default, which "
                 "the container's published port cannot reach (the host side binds per bind_address)")  # fmt: skip
    return ServerCommand(server.program, (*server.args, ("--host", "0.0.0.0")), server.kind)


def _report_order(report: Report) -> tuple[str, int]:
    name, _, lines = report.where.rpartition(":")
    return name, int(lines.split("-")[0]) if lines.split("-")[0].isdigit() else 0
