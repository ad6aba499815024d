"""`hgxkit recipe import FILE…`: whole posts become one recipe, with the notes and an account of every line.

The post reader (`post`, `commands`, `variables`) finds the commands wherever they are; each is handed to the
first source format that claims it (`formats`: `docker run` kept as written, a bare launch translated, a
benchmark client command). Several serving commands become one recipe when they are the ranks of one server
over several hosts (`nodes`) or its GPU groups (`group_join`); commands that differ otherwise are refused,
saying what differs, until `--pick N` chooses one. Engines hgxkit does not serve are refused by name, and so
are setups it cannot reproduce on an HGX-H200 node (AMD ROCm, Ascend, Windows host paths, an image built from a
local checkout, more GPUs than the node has). The model is placed (`model_placement`), benchmark commands and
printed numbers become the matrix and the reference (`benchmarks`). Every change is a note; every refusal is
one line naming the file, line and column; what comes back is one `ImportOutcome` (`outcome`).

Example:
    >>> post = "Serve it:\\n\\n```\\n$ vllm serve org/Tiny-1B --port 8001 -tp 1\\n```\\n"
    >>> outcome = import_post([("post.md", post)], ImportOptions(image="vllm/vllm-openai:v0.33.0"))
    >>> recipe = outcome.recipe
    >>> recipe.server.kind, recipe.model.repo_id, [w for e in recipe.docker.entries for w in e.words][:4]
    ('vllm', 'org/Tiny-1B', ['--gpus', 'all', '--ipc=host', '-p'])
    >>> for line in outcome.report:
    ...     print(line.line())
    post.md:1: skipped 1 line(s) of prose, comments and output (printed results are read apart)
    post.md:4: took `vllm serve` (the server, vLLM)
    >>> print(outcome.lines[3].shown())
    post.md:4: changed -> image, docker, server, model (`vllm serve` (the server, vLLM))
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hgxkit.errors import InputError
from hgxkit.imageref import normalized, repository
from hgxkit.importing.bare_launch import bare_run
from hgxkit.importing.benchmarks import benchmarks
from hgxkit.importing.commands import PLACEHOLDER, Simple, simple_commands
from hgxkit.importing.config_files import configured
from hgxkit.importing.docker_run import container_program, foreign_hardware, scrub_run
from hgxkit.importing.dockerfile import as_shell
from hgxkit.importing.documents import read_documents
from hgxkit.importing.engine_refusal import disaggregation, split_refusal, transfer_refusal
from hgxkit.importing.fill import (
    BRACED,
    FILL_IN,
    NAMED_BLANK,
    SPACED_FOLDER,
    fill_hint,
    fill_posts,
    occurrences,
)
from hgxkit.importing.formats import DOCUMENT_FORMATS, SCRIPT_FORMATS, format_of
from hgxkit.importing.group_join import join_groups, uuid_devices, visible_devices_as_gpus
from hgxkit.importing.local_models import download_ties
from hgxkit.importing.model_placement import DEFAULT_MODELS_DIR, Placed, place_model
from hgxkit.importing.outcome import (
    ImportOutcome,
    ImportRefused,
    LineAccount,
    Report,
    account_lines,
    finish,
    place,
)
from hgxkit.importing.pd_hosts import join_hosts, over_hosts, posted_router
from hgxkit.importing.pd_join import (
    first_gpus_as_devices,
    join_sides,
    own_ports,
    router_port_note,
    side_flags,
)
from hgxkit.importing.pd_sides import either_roles, posted_routers, routed_sides, side_channel_ports
from hgxkit.importing.platform import (
    ForeignSetup,
    foreign_in,
    generation_note,
    message,
    refuse_foreign,
    shows_nvidia,
)
from hgxkit.importing.post import FENCE_RE, PostFile, find_commands, read_post
from hgxkit.importing.program_apps import app_refusal
from hgxkit.importing.python_strings import computed_launch
from hgxkit.importing.reading import Candidate, Reading, sourced_before
from hgxkit.importing.slurm import runs_under_slurm
from hgxkit.importing.substitutions import owner_of, substituted_word
from hgxkit.importing.templates import template_file, template_refusal
from hgxkit.importing.typography import normalise
from hgxkit.importing.unread_formats import unread_format
from hgxkit.importing.variables import Scope
from hgxkit.importing.vllm_multinode import RayNode, cluster_nodes, joins_a_placeholder_head, ray_group, ray_run
from hgxkit.importing.workdir import based_run, directory_before
from hgxkit.kinds import (
    DEFAULT_KIND,
    KINDS,
    UNSUPPORTED,
    ServerKind,
    UnsupportedKind,
    detect_kind,
    image_matches,
    image_names_kind,
    kind_named_like,
    program_of,
    python_program,
)
from hgxkit.netaddr import is_loopback
from hgxkit.recipe.diff import ABSENT, Difference, diff_recipes
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import ParsedRun, parse_option_words
from hgxkit.recipe.engine_start import engine_refusal, unchecked_flags
from hgxkit.recipe.groups import named_gpus
from hgxkit.recipe.matrix import BenchmarkMatrix
from hgxkit.recipe.nodes import (
    HGX_GPUS,
    join_ranks,
    parallel_size,
    rank_flags,
    rank_left_to_hosts,
    rank_of,
    spans_nodes,
)
from hgxkit.recipe.pd import is_side, shared_flags
from hgxkit.recipe.read import MAX_RECIPE_BYTES
from hgxkit.recipe.server_args import ServerCommand
from hgxkit.recipe.shellwords import Word, shell_value
from hgxkit.recipe.spec import DockerSpec, ImageRef, ModelSpec, Recipe, Source
from hgxkit.secrets import is_secret_flag, is_secret_name

# Signs of hardware hgxkit does not serve on: AMD ROCm and Huawei Ascend.
_AMD_ENV = re.compile(r"^(?:VLLM_ROCM_|HIP_|ROCR_|HSA_|ROCM_)")
_ASCEND_ENV = re.compile(r"^(?:HCCL_|ASCEND_)")
_EXPORT = re.compile(r"^\s*export\s+[A-Za-z_]\w*=.*(?:\$\(|`)")  # exports the output of a command substitution
_WINDOWS_MOUNT = re.compile(r"(?:-v|--volume|--mount)[=\s]+[\"']?(?:[^\s\"']*?(?:source|src)=)?([A-Za-z]:\\[^\s\"':]*)")
# A mount's host side the node's shell or working directory decides: `~`, `~/x`, `.`, `./x`, `../x`.
_RELATIVE_SOURCE = re.compile(r"(?:~|\.\.?|\$\{?(?:HOME|PWD)\}?)(?:/|$)")
# An image given by its ID (`docker images`' IMAGE ID, short or full, or its digest form): it names one host's copy.
_IMAGE_ID = re.compile(r"(?:sha256:)?(?:[0-9a-f]{12}|[0-9a-f]{64})")


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
    fill: tuple[tuple[str, str], ...] = ()  # (placeholder, value) pairs of `--fill` (see fill)


def import_post(files: Sequence[tuple[str, str]], options: ImportOptions | None = None) -> ImportOutcome:
    """Import one recipe from the posts `files` ((name, text) pairs, read in order); a refusal is an
    `ImportRefused` (an InputError) that holds its place and the account of the lines read."""
    options = options or ImportOptions()
    try:
        files, filled = fill_posts(files, options.fill)
        importer = _Importer(files, options)
    except InputError as err:  # refused while reading (a file too long, a document that cannot be read)
        raise _refused_unread(err.message, files) from None
    importer.notes[:0] = filled
    try:
        return importer.run()
    except ImportRefused:
        raise
    except InputError as err:
        report = sorted(dict.fromkeys(importer.report), key=_report_order)
        lines = account_lines(importer.posts, importer.simples, report, importer.notes)
        texts = {post.name: post.clean for post in importer.posts}  # columns of the command, not of its prompt
        raise ImportRefused(err.message + _set_later(err.message, importer.reading.later), lines, texts) from None


def _set_later(message: str, later: dict[str, str]) -> str:
    """Where the post sets a `$NAME` the refusal names, when that is after the command that reads it unset."""
    for name, at in later.items():
        if re.search(r"\$\{?" + name + r"\b", message):
            return f"; the post sets {name} at {at}, after the command, so a shell reads it unset there: set it before"
    return ""


Built = tuple[Candidate, Recipe, list[str]]  # a serving command, the recipe it would be, its notes


def _refused_unread(message: str, files: Sequence[tuple[str, str]]) -> ImportRefused:
    """A refusal made before the posts' commands were read: every line is set aside, saying so (the one the
    refusal names is `refused`), so `--explain` and `--json` still account for each."""
    why = f"not read: the import was refused first ({message})"
    lines = tuple(
        LineAccount(name, number, line, "set aside", why=why)
        for name, text in files
        for number, line in enumerate(text.split("\n"), 1)
    )
    return ImportRefused(message, lines, {name: tuple(text.split("\n")) for name, text in files})


class _Importer:
    def __init__(self, files: Sequence[tuple[str, str]], options: ImportOptions) -> None:
        self.options = options
        self.posts: list[PostFile] = []
        for name, text in files:
            if len(text) > MAX_RECIPE_BYTES:
                raise InputError(f"{name}: longer than {MAX_RECIPE_BYTES >> 10} KiB; give the post, not a log")
        # A template's refusal replaces whatever reading it as shell or YAML meets (its `{% if %}` lines read as lost
        # backslashes); the platform's, made once the commands are read, still comes first (`run`).
        self.template = next(filter(None, (template_refusal(name, text) for name, text in files)), None)
        try:
            self._read(files, options)
        except InputError:
            if self.template is None:
                raise
            raise InputError(self.template) from None

    def _read(self, files: Sequence[tuple[str, str]], options: ImportOptions) -> None:
        for name, text in files:
            shell, dockerfile = as_shell(name, text)  # a Dockerfile that only starts its base image: its launch
            normal, repaired = normalise(name, shell)  # typography first: it changes what the words are
            repaired = dockerfile + repaired
            post = read_post(name, normal)
            written = read_post(name, text).lines if repaired else ()
            self.posts.append(replace(post, notes=tuple(sorted(post.notes + tuple(repaired))), written=written))
        self.simples: list[Simple] = []
        for index, post in enumerate(self.posts):
            # a compose file or manifest (a whole file, a ```yaml fence) is its format's; the shell scan skips it
            post, documents = read_documents(post, DOCUMENT_FORMATS, options.image)
            self.posts[index] = post
            found = sorted(documents + simple_commands(find_commands(post)), key=lambda s: s.command.first)
            for script in SCRIPT_FORMATS:  # a Slurm script's `srun CMD` is CMD on each node
                found = script.rewrite(post, found)
            self.simples += found
        notes = [f"{p.name}:{line}: {what}" for p in self.posts for line, what in p.notes]
        self.reading = Reading(self.simples, options.kind, notes)
        self.notes = self.reading.notes  # one list: notes keep the order they were made in
        self.report = self.reading.report
        self.join = "one"  # how the serving commands join: one, ranks (over hosts), groups (of GPUs)
        self.picked_aside = ""  # the servers of an engine hgxkit does not deploy, said beside a choice (--pick)
        self.aside: list[str] = []  # parts of the post the recipe would hold, set aside (`ImportOutcome.set_aside`)
        # `export NAME=$(…)` lines the scan could not read: skipped, unless a launch follows (_unread_export)
        self.unread_exports: list[Simple] = []
        self.exported_name: str | None = None  # the recipe's name an hgxkit export's labels give

    def run(self) -> ImportOutcome:
        for post in self.posts:  # the platform before anything else: no later step can make it NVIDIA's
            shell = {
                n for s in self.simples if s.command.post is post for n in range(s.command.first, s.command.last + 1)
            }
            refuse_foreign(post.name, [line if n in shell else "" for n, line in enumerate(post.clean, 1)], post.lines)
        try:
            for simple in self.simples:
                self._consider(simple)
            chosen = self._choose()
        except ForeignSetup:  # the platform first, as the signs the commands show say it
            raise
        except InputError:
            if self.template is None:
                raise
            raise InputError(self.template) from None
        if self.template is not None:
            raise InputError(self.template)
        _unread_export(self.unread_exports, chosen[0][0].simple)
        recipe, where = self._build(chosen)
        cut = next((c.simple.command.cut for c, _, _ in chosen if c.simple.command.cut), None)
        if cut is not None:
            raise InputError(cut)
        for server, _, _ in chosen:
            _unexported_setting(server, self.simples)
        ansible = next(filter(None, (_ansible_task(c.simple) for c, _, _ in chosen)), None)
        if ansible is not None:
            raise InputError(ansible)
        # The engine's refusal first: it is what the post's own command meets, where `~` or `./` still worked
        # where the poster ran it.
        _engine_refuses(recipe, chosen[0][0], self.notes)
        _host_relative_mounts(recipe, chosen[0][0])
        recipe = self._benchmarks(recipe, chosen)
        recipe = replace(recipe, name=self.options.name or self.exported_name or _name(recipe))
        prose = self._prose()
        kept = " ".join(recipe.server.words() + recipe.docker.words())
        for name, places in self.reading.unset.items():
            if f"${name}" not in kept and f"${{{name}}}" not in kept:
                continue  # its word was replaced (a head address or port, given per deploy)
            shown = ", ".join(
                f"{file}:{line}" if i == 0 or file != places[0][0] else str(line)
                for i, (file, line) in enumerate(places)
            )
            later = self.reading.later.get(name)
            # Docker would get whatever the node's shell has for it, which no check here has seen
            unset = (
                f"is read before the post sets it (at {later}, after the command)"
                if later
                else "is not set by the post"
            )
            way = "set it before the command" if later else "set it in the post, or write the words it stands for"
            raise InputError(
                f"{shown}: ${name} {unset}, so the server would get whatever the host's shell has for it (nothing "
                f"where it is unset); {way}"
            )
        self.notes += [note for post in self.posts if (note := generation_note(post.name, post.lines))]
        report = tuple(sorted(dict.fromkeys(self.report), key=_report_order))
        outcome = finish(recipe, self.notes, where, report)
        lines = account_lines(self.posts, self.simples, [r for r in report if r not in prose], outcome.notes)
        return replace(outcome, lines=lines, set_aside=tuple(self.aside))

    # --- what each command is ---

    def _consider(self, simple: Simple) -> None:
        _unended(simple)
        if simple.kind == "broken":
            error = simple.error()
            assert error is not None
            text = " ".join(simple.command.post.clean[simple.command.first - 1 : simple.command.last])
            if re.search(r"docker run|\bserve\b|launch_server|api_server", text):  # `dstack server` serves nothing
                self.reading.servers.append(Candidate(simple, "broken", error=error))
            elif re.search(r"\bray start\b|\brun_cluster\.sh\b", text):  # a host of a Ray cluster: it counts
                self.reading.cluster.append(error)
                self._said(simple, "skipped", f"a Ray start that cannot be read ({error.message.split(': ', 1)[-1]})")
            else:
                self._said(simple, "skipped", f"an unreadable command ({error.message.split(': ', 1)[-1]})")
                if _EXPORT.match(text):
                    self.unread_exports.append(simple)
        elif simple.kind in ("assign", "export"):
            names = [w.text.split("=", 1)[0] for w in simple.words[simple.kind == "export" :]]
            self._said(simple, "read", f"variable(s) {', '.join(names)} (used where the post writes $NAME)")
            self.notes += [note for note in simple.notes if note not in self.notes]  # how a value was read
        elif simple.texts[:1] == ["cd"] and not simple.in_block:
            self._said(
                simple,
                "read",
                f"`{' '.join(simple.texts)}` (where the commands after it run: the base of their relative paths)",
            )
        elif simple.kind == "engine":
            self.reading.servers.append(Candidate(simple, "engine", simple.engine))
        elif (source := format_of(simple)) is not None:
            source.take(simple, self.reading)
        else:
            why = "shell syntax" if simple.kind == "control" else "not a serving or benchmark command"
            self._said(simple, "skipped", f"{' '.join(simple.texts[:3])} ({why})")

    def _prose(self) -> list[Report]:
        """One line per file for what is neither a command nor a number read: prose, logs, output."""
        said = []
        for post in self.posts:
            covered = {
                n for s in self.simples if s.command.post is post for n in range(s.command.first, s.command.last + 1)
            }
            prose = [n for n, line in enumerate(post.clean, 1) if line.strip() and n not in covered]
            if prose:
                what = f"{len(prose)} line(s) of prose, comments and output (printed results are read apart)"
                said.append(Report(f"{post.name}:{prose[0]}", "skipped", what))
        self.report += said
        return said

    def _said(self, simple: Simple, action: str, what: str, into: str = "") -> None:
        self.reading.said(simple, action, what, into)

    # --- which command is the server ---

    def _whole(self, servers: list[Candidate]) -> list[Candidate]:
        """`servers` without those whose copy stops inside the command (its last line continues past the post's
        end or its fence's), each said, where one other is whole."""
        cut = [s for s in servers if s.simple.command.cut or s.simple.command.fence_cut]
        if not cut or len(servers) - len(cut) != 1:  # several whole ones: the --pick list offers each
            return servers
        for server in cut:
            self._said(
                server.simple,
                "skipped",
                "a serving command whose copy stops inside it (its last line ends "
                "with a backslash where the post or its fence ends); the whole one is taken",
            )
        return [s for s in servers if not (s.simple.command.cut or s.simple.command.fence_cut)]

    def _choose(self) -> list[Built]:
        servers = [s for s in self.reading.servers if not _mention(s)] or self.reading.servers
        for mention in (s for s in self.reading.servers if s not in servers):
            self._said(mention.simple, "skipped", "a launch program named in a sentence, with nothing to serve")
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
        servers = self._whole(servers)
        if len(servers) == 1 and _bare_program(servers[0]):
            _platform(servers[0], Scope.before(self.simples, servers[0].simple), {})  # another accelerator first
            raise InputError(servers[0].simple.command.cut)  # nothing of the launch but its program: the cut first
        engines = [s for s in servers if s.role == "engine"]
        others = [s for s in servers if s.role != "engine"]
        hardware = [e for e in engines if _unsupported(e).hardware]
        if engines and others and hardware == engines:  # the post's alternative for another accelerator: set aside
            for engine in engines:
                self._said(engine.simple, "skipped", f"{_unsupported(engine).title}: the post's other accelerator")
            servers = others
        elif engines and any(o.role == "server" for o in others):  # the launches hgxkit can serve: among them
            for engine in engines:
                self._said(engine.simple, "skipped", f"{_unsupported(engine).title}: a server hgxkit does not deploy")
            servers = others
            aside = ", ".join(f"{_unsupported(e).title} ({_at(e, servers[0])})" for e in engines)
            self.picked_aside = f"; set aside, as hgxkit does not deploy it: {aside}"
        elif engines:
            raise _engine_refusal(engines[0], servers)
        built: list[Built] = []
        errors: list[InputError] = []
        for server in servers:
            if server.role in ("broken", "refused"):
                try:  # a `<placeholder>` a shell reads as a redirection is named as what it is
                    _platform(server, Scope.before(self.simples, server.simple), {})
                    _placeholders(server.simple, angled_only=True)
                    errors.append(server.error)  # type: ignore[arg-type]
                except InputError as err:
                    errors.append(err)
                continue
            try:
                built.append((server, *self._provisional(server)))
            except InputError as err:
                errors.append(err)
        if not built:
            errors.sort(key=lambda error: isinstance(error, ForeignSetup))  # an NVIDIA alternative's refusal first
            if errors:
                raise errors[0]
            raise self._no_server()
        taken = {id(b[0]) for b in built}  # by identity: comparing candidates by value made this quadratic
        skipped = list(zip([s for s in servers if id(s) not in taken], errors, strict=False))
        for server, error in (pair for pair in skipped if _example(*pair)):
            self._said(server.simple, "skipped", f"an example a sentence gives, beside a whole setup: {error.message}")
        skipped = [pair for pair in skipped if not _example(*pair)]
        routed = self._routed(built)
        if len(routed) > 1 and _split(routed):  # a model neither side can be served from, before they are compared
            self._placed(routed[0][1], routed[0][0], routed[0][0].where())
        chosen, self.join = self._hosted(routed) or _one_setup(routed, self.picked_aside)
        if skipped and any(recipe.node_count() > 1 for _, recipe, _ in chosen):
            # a server over nodes: the command it cannot read may be one of its ranks, which a recipe of the
            # others would replace by theirs; so it is refused, not set aside as another setup would be
            raise InputError(f"{skipped[0][1].message} (a serving command beside a server spanning nodes)")
        # a setup of its own: a server, a document's serving part, or a container whose image names an engine
        alternative = next(((s, e) for s, e in skipped if _another_setup(s, e)), None)
        if alternative is not None:
            raise _alternative_refused(alternative, [c for c, _, _ in chosen])
        for server, error in skipped:
            self._said(server.simple, "skipped", f"a serving command that cannot be imported: {error.message}")
        return chosen

    def _hosted(self, built: list[Built]) -> tuple[list[Built], str] | None:
        """The sides of a split each on a node of its own, listening everywhere, joined over hosts (pd_hosts)."""
        at = [_at(c, built[0][0]) for c, _, _ in built]
        commands = [(s.where(), s.texts) for s in self.simples]
        found = over_hosts([r for _, r, _ in built], at, built[0][0].where(), commands)
        if found is None:
            return None
        recipes, note = found
        built[0][2].append(note)
        return [(c, r, n) for (c, _, n), r in zip(built, recipes, strict=True)], "hosts"

    def _routed(self, built: list[Built]) -> list[Built]:
        """Commands that each leave their side to the router (vLLM's kv_both) with their side written as the post's
        router or proxy command sends them, with a note; InputError when nothing in the post tells them apart."""
        servers = [r.server for _, r, _ in built]
        if not either_roles(servers):
            return built
        split = servers[0].server_kind.prefill_decode
        assert split is not None
        routers = posted_routers([(s.where(), s.texts) for s in self.simples], split)
        at = [_at(c, built[0][0]) for c, _, _ in built]
        try:
            sides, note = routed_sides(servers, [_listening(r) for _, r, _ in built], routers, at)
        except InputError as err:
            raise InputError(f"{built[0][0].where()}: {err.message}") from None
        built[0][2].append(f"{built[0][0].where()}: {note}")
        return [(c, replace(r, server=side), n) for (c, r, n), side in zip(built, sides, strict=True)]

    def _no_server(self) -> InputError:
        names = ", ".join(p.name for p in self.posts)
        for post in self.posts:  # nothing serves: a platform named anywhere in the post says more than that
            if shows_nvidia(post.lines):  # unless the post also has an NVIDIA setup, which is the one judged
                continue
            for number, line in enumerate(post.clean, 1):
                found = foreign_in(line)
                if found is not None:
                    return ForeignSetup(message(f"{post.name}:{number}", found))
        shells = list(self.reading.containers)
        foreign = foreign_hardware(shells[0]) if shells else None
        if foreign is not None:
            return InputError(
                f"{shells[0].simple.where()}: {foreign.title} ({foreign.name}) is not supported: hgxkit "
                "serves NVIDIA HGX-H200 nodes"
            )
        if shells:
            program = " ".join(container_program(shells[0].run))
            runs = f"`{program}`" if program else "its image's entrypoint"
            return InputError(
                f"{shells[0].simple.where()}: no serving command in {names}: the container runs "
                f"{runs} and the post does not say what runs in it; "
                "import the post that has the server command"
            )
        if self.reading.scripted:
            where, image, program = self.reading.scripted[0]
            return InputError(
                f"{where}: no serving command in {names}: the container of {image} runs `{program}`, not a server "
                "launch, so the launch is inside what it runs, which the post does not show; import the post (or the "
                "script) that has the server command"
            )
        router = posted_router([(s.where(), s.texts) for s in self.simples])
        if router is not None:
            return InputError(
                f"{router}: no serving command in {names}, only a prefill/decode router command; import it together "
                "with the post that has the prefill and decode commands (the router is written from them: "
                "`--data router=true`)"
            )
        # plain client commands first, then those run with `docker run`
        benches = sorted(self.reading.benches, key=lambda b: b[0].kind == "docker-run")
        if benches:
            return InputError(
                f"{benches[0][0].where()}: no serving command in {names}, only {len(benches)} benchmark command(s); "
                "import it together with the post that has the server (hgxkit recipe import SERVER.txt THIS.txt)"
            )
        quoted = next(filter(None, (_quoted_launch(post) for post in self.posts)), None)
        if quoted is not None:
            return InputError(
                f"{quoted}: no serving command in {names} as a shell runs it: the launch is in a program's string "
                "literals (a Python `subprocess` command), which the import does not run; give the command as the "
                "shell runs it"
            )
        app = next(filter(None, (app_refusal(post.name, post.lines) for post in self.posts)), None)
        if app is not None:
            return InputError(app)
        computed = (computed_launch(p.name, p.lines, p.fences, p.clean) for p in self.posts)
        if (listed := next(filter(None, computed), None)) is not None:
            return InputError(listed)
        fragment = next(filter(None, (_image_first(post) for post in self.posts)), None)
        if fragment is not None:
            return InputError(fragment)
        unrun = next(filter(None, (_unrun_launch(post) for post in self.posts)), None)
        if unrun is not None:
            return InputError(unrun)
        scripts = [run for run in map(_script_run, self.simples) if run is not None]
        # a script named for a server (`run_vllm_server.sh`) before one that sets up or runs a client
        script = min(scripts, key=lambda run: not _SERVER_SCRIPT.search(run[1].rsplit("/", 1)[-1]), default=None)
        if script is not None:
            return InputError(
                f"{script[0]}: no serving command in {names}: it runs the script `{script[1]}`, whose commands it "
                "does not show; import the script (or the post that has the server command)"
            )
        return _nothing_found(names, self.posts)

    def _provisional(self, server: Candidate) -> tuple[Recipe, list[str]]:
        """The recipe one serving command would be, before its model is placed; raise InputError if it cannot be."""
        simple = server.simple
        post = simple.command.post
        where = simple.where()
        notes = list(server.notes) + list(simple.notes)
        _placeholders(simple, angled_only=True)
        words = self._plain_words(simple)
        _windows_paths(simple)
        _platform(server, Scope.before(self.simples, simple), simple.assignments)
        if server.run is None:
            texts = list(configured([w.text for w in words], server.kind or self.options.kind, post, where, notes))
            run, kind = bare_run(server, texts, notes, reading=self.reading, image=self.options.image)
        else:
            run, kind = server.run, server.kind
            command = server.words if server.words is not None else run.command
            run = replace(
                run, command=configured(command, self.options.kind or kind, post, where, notes, _targets(run))
            )
            if simple.prefix:
                notes.append(
                    f"{where}: {' '.join(w.text for w in simple.prefix)} before `docker run` only sets the "
                    "docker client's environment; dropped"
                )
        run = self._based(run, server, notes)
        cluster = self._cluster(server, kind or self.options.kind, notes)
        if cluster is not None:
            run = ray_run(run, cluster[0], where, notes)
        if server.run is not None and server.context is not None:  # `docker exec` into the post's `docker run -itd`
            _placeholders(server.context.simple)
        run = self._image(run, simple, notes, server.context.simple if server.context is not None else simple)
        kind = self.options.kind or kind or _detect(run, where, notes)
        _hardware(server, run, Scope.before(self.simples, simple), simple.assignments)
        docker, command, grouping = scrub_run(run, kind, post.name, notes)
        docker = _node_gpus(docker, where, notes)
        if grouping is None:
            docker = _shared_memory(_given_gpus(docker, where, notes), command, where, notes)
            docker = _own_network(docker, command, where, notes)
        recipe = Recipe(
            name="imported",
            image=ImageRef(run.image),
            docker=docker,
            server=command,
            model=ModelSpec(repo_id=None),
            groups=grouping,
        )
        ray = recipe.server.server_kind.ray
        if cluster is not None and ray is not None:
            for node in (cluster[0], *cluster[1]):
                if not joins_a_placeholder_head(node.simple):  # a worker's head address is written per deploy
                    _placeholders(node.simple)
            recipe = ray_group(recipe, ray, *cluster, where, notes)
        split = disaggregation(recipe.server)
        if split is not None:
            raise InputError(f"{_word_at(split.word, server)}: {split.reason}")
        try:
            recipe.server.parallel_size()
        except ValueError:
            _placeholders(simple)  # a size left to fill in (`--tp-size {tp_size}`) is named as what it is
            _sizes_known(recipe.server, server)
        _fits(recipe, server)
        _on_the_node(recipe, server)
        _placeholders(simple)  # `YOUR_…`, `/path/to/…`: after what the setup cannot be at all (hardware, size)
        if not self.options.model_repo:  # `--model-repo` names the model the placeholder stands for
            _model_placeholder(recipe.server, simple)
        return recipe, notes

    def _plain_words(self, simple: Simple) -> list[Word]:
        """The command's words with the post's variables written out; InputError where shell logic, a command
        substitution or another operator decides them."""
        if simple.in_block:
            raise InputError(
                f"{simple.where()}: the command runs inside an `{simple.in_block}` block; its words depend on "
                "shell logic: give the command as it runs"
            )
        words = self.reading.resolved(simple)
        substituted = substituted_word(simple, words)
        if substituted is not None:
            raise substituted
        substitution = next((w for w in words if w.is_operator), None)
        if substitution is not None:
            raise InputError(
                f"{simple.command.post.name}: line {substitution.line}, column {substitution.column}: "
                f"{substitution.text!r} (a subshell or another shell operator) is not imported; replace it by its value"
            )
        return words

    def _cluster(self, server: Candidate, kind: str | None, notes: list[str]) -> tuple[RayNode, list[RayNode]] | None:
        """The Ray cluster a bare launch runs on: the post starts one (see vllm_multinode) and the launch's kind
        runs on Ray; None otherwise. A bare `ray start --head` with no worker, no port for one to join at and no
        GPU count is one host's Ray, which the engine starts itself on its host when it finds none: set aside (a
        server larger than the host is refused as such)."""
        if not self.reading.cluster or (server.run is not None and not server.on_ray):
            return None
        if KINDS[kind or server.kind or DEFAULT_KIND].ray is None:
            return None
        head, workers = cluster_nodes(self.reading.cluster)
        joinable = any(w.partition("=")[0] in ("--port", "--node-ip-address") for w in head.simple.texts)
        if not workers and head.run is None and not head.rendered and head.gpus is None and not joinable:
            notes.append(
                f"{head.where()}: `ray start --head` with no worker is one host's Ray; set aside: the server starts "
                "its own on its host"
            )
            return None
        return head, workers

    def _image(self, run: ParsedRun, simple: Simple, notes: list[str], started: Simple) -> ParsedRun:
        """The image the server runs in; refused where a node cannot pull it, at the image's word in the command
        that starts the container (`started`, which for a launch run inside an idling container is that
        container's `docker run`)."""
        if self.options.image:
            if self.options.image != run.image:
                notes.append(f"{simple.where()}: --image {self.options.image} replaces the post's {run.image}")
            return replace(run, image=self.options.image)
        image = run.image
        aliases = {normalized(name): value for name, value in self.reading.aliases.items()}
        if normalized(image) in aliases:
            source, where = aliases[normalized(image)]
            notes.append(f"{simple.where()}: {image} is `docker tag` of {source} ({where}); {source} is pulled")
            image = source
        # an image the post builds before it runs it (a build shown after the run is an alternative to pulling)
        built = {
            normalized(name): (name, where) for name, where in self.reading.built.items() if self._before(where, simple)
        }
        if normalized(image) in built:
            name, at = built[normalized(image)]
            spelled = "" if name == image else f" (tagged {name})"
            raise InputError(
                f"{_image_at(run.image, started)}: the image {image} is built by `docker build` ({at}{spelled}) from "
                "a source checkout; a node cannot pull it: give --image REF of a pullable image"
            )
        if "$" in image:
            raise InputError(
                f"{_image_at(run.image, started)}: the image {shell_value(image)} is a variable the post does not set"
                f"{sourced_before(started)}; give --image REF"
            )
        if _IMAGE_ID.fullmatch(image):
            raise InputError(
                f"{_image_at(run.image, started)}: the image {image} is a local image ID (as `docker images` lists "
                "it), which a node cannot pull: give --image REF, the repository:tag that ID was pulled as"
            )
        repo = repository(image)
        if "/" not in repo and any(image_names_kind(image, kind) for kind in KINDS):  # `vllm-node-tf5:latest`
            raise InputError(
                f"{_image_at(run.image, started)}: the image {image} names an engine but no registry or namespace, "
                f"so a node would pull docker.io/library/{repo}, which is no engine's image: it is the name of a "
                "local build; give --image REF of a pullable image (push the build to a registry)"
            )
        return replace(run, image=image)

    def _based(self, run: ParsedRun, server: Candidate, notes: list[str]) -> ParsedRun:
        """A posted `docker run` (or the `docker run -itd` a `docker exec` server runs in) with its relative host
        paths written out from the directory the post's `cd` lines leave (see `workdir`)."""
        if server.run is None:
            return run  # a bare launch's `docker run` is hgxkit's own: every path in it is absolute
        started = server.context.simple if server.context is not None else server.simple
        cwd, cd_where = directory_before(self.simples, started)
        if cwd is None or cd_where is None:
            return run
        return based_run(run, cwd, cd_where, started.where(), notes)

    def _ranks(self, servers: list[ServerCommand], where: str) -> list[ServerCommand]:
        """The commands of a server over nodes, one posted for every host with its rank left to each host read as
        rank 0's (noted); not in a Slurm job's script, whose one command every node runs in the same environment."""
        scheduled = any(runs_under_slurm(post) for post in self.posts)
        left = rank_left_to_hosts(servers[0], where) if len(servers) == 1 and not scheduled else None
        if left is None:
            return servers
        self.notes.append(left[1])
        return [left[0]]

    def _before(self, where: str, simple: Simple) -> bool:
        """True when the command at `where` (FILE:LINE) comes before `simple` in the posts' order."""
        found = place(where)
        files = [post.name for post in self.posts]
        if found is None or found[0] not in files:
            return True
        here = (files.index(simple.command.post.name), simple.first_line)
        return (files.index(found[0]), found[1]) < here

    # --- the recipe ---

    def _build(self, chosen: list[Built]) -> tuple[Recipe, str]:
        server, recipe, notes = chosen[0]
        where = server.where()
        self.notes += notes
        for other, _, _ in chosen:
            self._said(other.simple, "took", _took(other, recipe), "image, docker, server, model")
        if spans_nodes(recipe.server):
            joined = join_ranks(self._ranks([r.server for _, r, _ in chosen], where), where=where)
            recipe = replace(recipe, server=joined.server, groups=joined.groups)
            self.notes += joined.notes
        elif self.join == "hosts":
            recipe, notes = join_hosts(recipe, [r for _, r, _ in chosen], where)
            self.notes += notes + router_port_note(recipe, where)
        elif self.join == "groups":
            split = _split(chosen)
            dockers = [r.docker for _, r, _ in chosen]
            channel = recipe.server.server_kind.prefill_decode
            if split and channel is not None and channel.side_channel is not None:
                at = [_at(c, chosen[0][0]) for c, _, _ in chosen]
                first, notes = side_channel_ports(dockers, [r.server for _, r, _ in chosen], at, where)
                dockers = [first, *dockers[1:]]
                self.notes += notes
            grouped = join_groups(dockers, where=where, sides=split)
            recipe = replace(recipe, docker=grouped.docker, groups=grouped.groups)
            self.notes += grouped.notes
            if split:
                recipe, notes = join_sides(recipe, [r.server for _, r, _ in chosen], where)
                notes += router_port_note(recipe, where)
            else:
                recipe, notes = own_ports(recipe, [r.server for _, r, _ in chosen], where, [])
            self.notes += notes
        exported = server.simple.exported
        if exported is not None:
            recipe = replace(recipe, image=exported.image_for(recipe.image.reference, where, self.notes))
        split = split_refusal(recipe)  # before the model is placed: a side alone serves nothing, whatever its model
        if split is not None:
            _engine_refuses(recipe, server, [])  # a flag the engine refuses first: the post's own server never started
            raise InputError(f"{_word_at(split.word, server)}: {split.reason}")
        placed = self._placed(recipe, server, where)
        self.notes += placed.notes
        server_command = _reachable(placed.docker, placed.server, where, self.notes)
        placed = replace(placed, server=server_command)
        groups = recipe.groups
        if groups is not None and groups.gpus_per_node is None and groups.size is not None:
            groups = replace(groups, gpus_per_node=HGX_GPUS)
            self.notes.append(f"{where}: groups.gpus_per_node is {HGX_GPUS} (an HGX-H200 node)")
        recipe = replace(
            recipe,
            docker=placed.docker,
            server=placed.server,
            model=placed.model,
            groups=groups,
            description=f"Imported by `hgxkit recipe import` from {', '.join(p.label for p in self.posts)}.",
            source=Source(
                notes=f"Serving command: {', '.join(s.simple.source() for s, _, _ in chosen)}."
                + (f" {exported.source_note()}" if exported is not None else "")
            ),
        )
        self.exported_name = exported.recipe if exported is not None else None
        return recipe, chosen[0][0].simple.command.post.name

    def _placed(self, recipe: Recipe, server: Candidate, where: str) -> Placed:
        """The recipe's model placed on the host (`place_model`), with the repo the options or the export name."""
        exported = server.simple.exported
        model_repo, revision = self.options.model_repo, self.options.revision
        if exported is not None and model_repo is None and exported.model_repo:  # the mounted model's, as exported
            model_repo, revision = exported.model_repo, exported.model_revision or revision
        if model_repo is None:
            _refuse_modelscope(recipe, server)
        return place_model(
            recipe.docker,
            recipe.server,
            where=where,
            model_repo=model_repo,
            revision=revision,
            models_dir=self.options.models_dir,
            ties=download_ties(line for post in self.posts for line in post.clean),
            unset_from=sourced_before(server.simple),
        )

    def _benchmarks(self, recipe: Recipe, chosen: list[Built]) -> Recipe:
        original = chosen[0][1]
        served = {
            v
            for v in (
                recipe.server.flag("--served-model-name"),
                recipe.model.repo_id,
                original.server.flag(original.server.server_kind.model_flag),
            )
            if v
        }
        values = {shell_value(u.value).lower() for u in recipe.server.uses() if u.value}
        listening = recipe.server.flag("--port") or str(recipe.server.server_kind.default_port)
        ports = {int(p) for p in [listening, *(m.host_port for m in recipe.docker.ports())] if p.isdigit()}
        benches = sorted(self.reading.benches, key=lambda b: _report_order(Report(b[0].span(), "", "")))
        aside = {id(bench[0]): why for bench in benches if (why := self._placeholder_of(bench[0])) is not None}
        taken = {id(c.simple) for c, _, _ in chosen}
        others = [
            s.simple
            for s in self.reading.servers
            if s.role in ("server", "engine") and id(s.simple) not in taken and not _mention(s)
        ]
        found = benchmarks(
            self.posts, benches, served=served, values=values, ports=ports, aside=aside, other_servers=others
        )
        self.notes += found.notes
        self.report += found.report
        self.aside += found.aside
        matrix = found.matrix and self._carried(found.matrix, recipe.server.server_kind)
        return replace(recipe, matrix=matrix, reference=found.reference)

    def _carried(self, matrix: BenchmarkMatrix, kind: ServerKind) -> BenchmarkMatrix:
        """The matrix with each cell's extra flags that the kind's own client (the one verify runs) takes; the
        others (another client's, or where a client connects or writes) dropped, each with a note."""
        cells = []
        for cell in matrix.cells():
            kept, dropped = split_extra_flags(cell.extra_args, kind.bench.extra_flags)
            if dropped:
                shown = ", ".join(f"`{' '.join(words)}`" for words in dropped)
                self.notes.append(
                    f"{cell.source or 'benchmark'}: {shown} dropped from cell {cell.id}: verify runs "
                    f"{kind.title}'s own client, and a cell adds only flags of it that shape the load"
                )
            cells.append(replace(cell, extra_args=kept))
        return replace(matrix, entries=tuple(cells))

    def _placeholder_of(self, simple: Simple) -> str | None:
        """Why a benchmark command with a placeholder argument, or whose next line reads as its lost continuation,
        is set aside (its cell would run the placeholder, or lack a word), said in a note and a report line; None
        for one without. The server is still imported."""
        try:
            _placeholders(simple)
            if simple.command.unended is not None:
                line, _, word = simple.command.unended
                raise InputError(
                    f"{simple.where()}: {word!r} at line {line} reads as its continuation, but the command ended "
                    f"at line {simple.command.last} without a backslash (a line wrap split a word?): rejoin the lines"
                )
        except InputError as err:
            what = err.message.split(": ", 1)[1]
            self.notes.append(f"{simple.where()}: benchmark command set aside: {what}")
            self._said(simple, "skipped", f"a benchmark command set aside ({what})")
            self.aside.append(f"{simple.where()}: the benchmark command: {what}")
            return what
        return None


# What may differ between the commands of one setup: the ranks of a server over hosts, or its GPU groups.
_GROUP_DIFFERENCES = {("docker", "--gpus"), ("docker", "--publish"), ("server", "--port"), ("docker", "--name")}


def split_extra_flags(words: Sequence[str], allowed: frozenset[str]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(the words of `allowed` flags with their values, the other flags with theirs) of a cell's extra args.

    Example:
        >>> split_extra_flags(["--ignore-eos", "--streaming", "--num-sessions", "4"], frozenset({"--ignore-eos"}))
        (('--ignore-eos',), [('--streaming',), ('--num-sessions', '4')])
    """
    groups: list[list[str]] = []
    for word in words:
        if (word.startswith("-") and not re.fullmatch(r"-[0-9.]+", word)) or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    kept = tuple(w for g in groups if g[0].partition("=")[0] in allowed for w in g)
    return kept, [tuple(g) for g in groups if g[0].partition("=")[0] not in allowed]


def _listening(recipe: Recipe) -> int:
    """The host port a posted server answers on (a router names it): the port published for its listening port,
    else the listening port itself (the host's network, or a bare launch)."""
    server = recipe.server
    listen = server.flag("--port") or str(server.server_kind.default_port)
    published = [m.host_port for m in recipe.docker.ports() if m.container_port == listen and m.host_port]
    port = published[0] if published else listen
    return int(port) if port.isascii() and port.isdigit() else 0


def _split(built: list[Built]) -> bool:
    """Whether the commands are sides of a prefill/decode split (one is a side: `hgxkit.recipe.pd.is_side`)."""
    return any(is_side(r.server) for _, r, _ in built)


def _transfers(*sides: Built) -> None:
    """Refuse sides of a split whose KV transfer hgxkit does not deploy before their other flags are compared: a
    backend that cannot run is the cause a user must hear, not a flag the sides merely differ in."""
    for side in sides:
        found = side[1].server.server_kind.disaggregation
        refusal = transfer_refusal(side[1].server, found[0]) if found else None
        if refusal is not None:
            raise InputError(f"{_word_at(refusal.word, side[0])}: {refusal.reason}")


def _side_differences(first: Built, differences: list[Difference]) -> list[Difference]:
    """The differences between a prefill command and a decode command that the recipe cannot hold: a server flag
    may be each group's own (`groups.server_args`), the side-channel variable each group's own value, except the
    flags hgxkit reads from server.args alone, refused by name."""
    kind = first[1].server.server_kind
    split = kind.prefill_decode
    channel = split.side_channel.env if split is not None and split.side_channel is not None else None
    shared = shared_flags(kind)
    for difference in differences:
        if difference.area == "server" and difference.key in shared:
            raise InputError(
                f"{first[0].where()}: the prefill and decode commands differ in {difference.key} ({difference.a} vs "
                f"{difference.b}), which hgxkit reads from server.args for every group; give both sides the same"
            )
    return [
        d
        for d in differences
        if not (d.area == "server" and d.key != "(program)") and not (d.area == "env" and d.key == channel)
    ]


def _one_setup(built: list[Built], aside: str = "") -> tuple[list[Built], str]:
    """The command(s) of one setup and how they join (`one`, `ranks` of a server over hosts, GPU `groups`);
    else a refusal naming what differs (`aside`: what the post launches that was set aside, said with it)."""
    first = built[0]
    if len(built) == 1:
        return built, "one"
    multinode = all(spans_nodes(r.server) for _, r, _ in built)
    if not multinode:
        built = _first_gpus(_visible_devices_as_gpus(built))
        first = built[0]
    ranks = {("docker", "--name"), *(("server", f) for f in rank_flags(first[1].server))}
    sides = {("server", flag) for flag in side_flags(first[1].server.server_kind)}
    allowed = ranks if multinode else _GROUP_DIFFERENCES | sides
    if multinode:
        _one_rank_per_host(built)
    kept = [first]
    for other in built[1:]:
        found = diff_recipes(first[1], other[1])
        heads = [moved for d in found if multinode and (moved := _head_moved(first[1], other[1], d))]
        listens = [d for d in found if multinode and _own_address(d)]
        head_only = [d for d in found if multinode and _head_only(first[1], other[1], d)]
        differences = [
            d
            for d in found
            if (d.area, d.key) not in allowed
            and not _head_moved(first[1], other[1], d)
            and d not in listens
            and d not in head_only
        ]
        keys = {(d.area, d.key) for d in found}
        if not multinode and keys & sides:
            _transfers(first, other)
            differences = _side_differences(first, differences)
        if not multinode and keys & sides and not differences and ("docker", "--gpus") not in keys:
            raise InputError(
                f"{first[0].where()}: the prefill and decode commands do not give each side GPUs of its own "
                "(--gpus '\"device=…\"'); hgxkit deploys a split as groups of one node's GPUs"
            )
        logging = [d for d in found if d.area == "env" and _DEBUG_ENV.fullmatch(d.key)]
        if logging and len(logging) == len(found):  # the same launch, run again to see more in its log
            names = ", ".join(d.key for d in logging)
            first[2].append(  # the taken command's notes: the others' are never shown
                f"{other[0].where()}: the same command as {first[0].where()} but for {names}, a logging setting; "
                f"taken once, as {first[0].where()} gives it"
            )
            continue
        if differences or (not multinode and found and ("docker", "--gpus") not in {(d.area, d.key) for d in found}):
            _unjoined_split(built)
            raise _differ(built, first, other, differences or found, aside)
        if not found or (multinode and rank_of(first[1].server) == rank_of(other[1].server)):
            other[2].append(f"{other[0].where()}: the same command as {first[0].where()}; taken once")
            continue
        for ours, theirs in heads:
            first[2].append(
                f"{first[0].where()}: the ranks name different head addresses ({ours} at {_at(first[0], first[0])}, "
                f"{theirs} at {_at(other[0], first[0])}): each names the head in its own command, which hgxkit writes "
                "per deploy from the inventory's head ({{head}}), so they are one server"
            )
        if head_only:
            first[2].append(
                f"{first[0].where()}: rank {rank_of(other[1].server)} ({_at(other[0], first[0])}) gives no "
                f"{' or '.join(d.key for d in head_only)}: only rank 0 serves HTTP, where rank 0's command says"
            )
        if listens:
            first[2].append(
                f"{first[0].where()}: the ranks listen on different addresses (--host {listens[0].a} at "
                f"{_at(first[0], first[0])}, {listens[0].b} at {_at(other[0], first[0])}), each its own node's: "
                "--host 0.0.0.0 (every address of the host), as hgxkit places the ranks on the inventory's hosts"
            )
        kept.append(other)
    if any("the ranks listen on different addresses" in note for note in first[2]):
        kept = [(c, _listen_everywhere(r), n) for c, r, n in kept]
    return kept, ("ranks" if multinode else "groups") if len(kept) > 1 else "one"


def _one_rank_per_host(built: list[Built]) -> None:
    """Refuse as many commands as the server has hosts, all with one rank: the post gives one per host, and the
    server waits for the ranks no host has (a command only shown twice is fewer than its hosts, or differs)."""
    server = built[0][1].server
    kind = server.server_kind
    nnodes = server.flag(kind.nnodes_flag) or ""
    rank = rank_of(server)
    if rank is None or not nnodes.isdigit() or len(built) != int(nnodes):
        return
    if any(rank_of(r.server) != rank or diff_recipes(built[0][1], r) for _, r, _ in built[1:]):
        return
    raise InputError(
        f"{built[0][0].where()}: the post's {len(built)} commands for one server over {nnodes} hosts all give "
        f"{kind.rank_flag} {rank}; each host needs its own rank (0 to {int(nnodes) - 1}): write each host's rank"
    )


def _first_gpus(built: list[Built]) -> list[Built]:
    """A split's sides that pick their GPUs by the kind's first-GPU flag, with each choice as its device list."""
    found = first_gpus_as_devices([r for _, r, _ in built], built[0][0].where())
    if found is None:
        return built
    recipes, note = found
    built[0][2].append(note)
    return [(c, r, n) for (c, _, n), r in zip(built, recipes, strict=True)]


def _visible_devices_as_gpus(built: list[Built]) -> list[Built]:
    """Commands that each give their container every GPU and choose theirs with `-e CUDA_VISIBLE_DEVICES=…`,
    different lists, with each choice written as `--gpus '"device=…"'` (the same GPUs; one note), so they join as
    GPU groups; the commands as they are otherwise."""
    written = [visible_devices_as_gpus(r.docker) for _, r, _ in built]
    found = [w for w in written if w is not None]
    if len(found) < len(built) or len({devices for _, devices in found}) < len(built):
        return built
    shown = "; ".join(
        f"{devices} ({_at(c, built[0][0])})" for (c, _, _), (_, devices) in zip(built, found, strict=True)
    )
    built[0][2].append(
        f"{built[0][0].where()}: --gpus all with -e CUDA_VISIBLE_DEVICES={shown} is --gpus '\"device=…\"' of each "
        "list: the same GPUs, given as the groups'"
    )
    return [(c, replace(r, docker=docker), n) for (c, r, n), (docker, _) in zip(built, found, strict=True)]


def _unjoined_split(built: list[Built]) -> None:
    """Refuse by name serving commands that are the sides of a prefill/decode split import does not join: each
    names a transfer backend of the kind's split in its backend flag (vLLM's NIXL docs give both sides
    `kv_role: kv_both` and leave the roles to the router or proxy, so the role cannot tell them apart)."""
    kind = built[0][1].server.server_kind
    split = kind.prefill_decode
    if split is None or split.imported:
        return
    backends = [split.backend(r.server.flag(split.backend_flag)) for _, r, _ in built]
    if not all(r.server.has(split.backend_flag) for _, r, _ in built) or not set(backends) <= set(split.backends):
        return
    listed = ", ".join(_at(c, built[0][0]) for c, _, _ in built)
    raise InputError(
        f"{built[0][0].where()}: {len(built)} serving commands ({listed}) that differ and each carry "
        f"{split.backend_flag} with {backends[0]}: the prefill and decode sides of {kind.title}'s prefill/decode "
        f"split; import does not join {kind.title}'s split yet: write its recipe with a group per side "
        "(groups.server_args, docs/serving.md), or import one side's command with --pick N"
    )


# Environment variables that change what a server logs, not what it serves: a post's copy of its launch with one more
# is the same setup (`NCCL_DEBUG=INFO vllm serve …` after the plain command).
_DEBUG_ENV = re.compile(
    r"NCCL_DEBUG(?:_SUBSYS|_FILE)?|[A-Z0-9_]*_LOG(?:GING)?_LEVEL|PYTHONFAULTHANDLER|RUST_LOG|RUST_BACKTRACE"
)


def _own_address(difference: Difference) -> bool:
    """True when two ranks differ only in the address their server listens on (`--host A` on one node, `--host B`
    on the other), each an IP address: a node's own, which no other host has."""
    if difference.area != "server" or difference.key != "--host":
        return False
    try:
        ipaddress.ip_address(difference.a), ipaddress.ip_address(difference.b)
    except ValueError:
        return False
    return True


def _head_only(first: Recipe, other: Recipe, difference: Difference) -> bool:
    """True when `difference` is a listening flag (`--host`, `--port`) that rank 0's command gives and a later
    rank's leaves out: only rank 0 serves HTTP (SGLang's ranks 1+ and vLLM's headless ones serve none)."""
    kind = first.server.server_kind
    listening = {kind.canonical_flag("--host"), kind.canonical_flag("--port")}
    return (
        difference.area == "server"
        and kind.canonical_flag(difference.key) in listening
        and difference.b == ABSENT
        and rank_of(first.server) == 0
        and (rank_of(other.server) or 0) > 0
    )


def _listen_everywhere(recipe: Recipe) -> Recipe:
    """The recipe with its server's `--host` value 0.0.0.0."""
    return replace(recipe, server=_listen_everywhere_on(recipe.server))


def _listen_everywhere_on(server: ServerCommand) -> ServerCommand:
    """The server with its `--host` value 0.0.0.0."""
    kind = server.server_kind
    args = tuple(
        (name, "0.0.0.0") if kind.canonical_flag(name := entry[0].partition("=")[0]) == "--host" else entry
        for entry in server.args
    )
    return ServerCommand(server.program, args, server.kind)


def _machine_address(host: str) -> bool:
    """True for one IP address of a machine: not loopback, not every interface (0.0.0.0, ::).

    >>> [_machine_address(h) for h in ("192.168.10.87", "[fd00::1]", "127.0.0.1", "0.0.0.0", "::", "node-a")]
    [True, True, False, False, False, False]
    """
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return not (address.is_loopback or address.is_unspecified)


def _head_moved(first: Recipe, other: Recipe, difference: Difference) -> tuple[str, str] | None:
    """(first's head address, other's) when `difference` is only the head's address in the two ranks' head flag
    (SGLang's `--dist-init-addr` host part, the same port; vLLM's `--master-addr`, `--data-parallel-address`);
    None for any other difference, a differing port included."""
    kind = first.server.server_kind
    heads = {kind.head_flag, kind.dp_hosts.head_flag if kind.dp_hosts else kind.head_flag}
    if difference.area != "server" or difference.key not in heads:
        return None
    ours, theirs = first.server.flag(difference.key), other.server.flag(difference.key)
    if ours is None or theirs is None:
        return None
    if difference.key == kind.head_flag and kind.head_port_flag is None:  # HOST:PORT in one value
        ours, _, our_port = ours.rpartition(":")
        theirs, _, their_port = theirs.rpartition(":")
        if not ours or not theirs or our_port != their_port:
            return None
    return ours, theirs


def _differ(built: list, first: tuple, other: tuple, differences: list[Difference], aside: str = "") -> InputError:
    setups = _rank_setups(built)
    if len(setups) < len(built) and len(setups) > 1:  # the ranks of one server are one choice, not a difference
        first, other = setups[0][0], setups[1][0]
        differences = diff_recipes(first[1], other[1])
    # the posted flags first: a server over hosts differs from a one-node one in options its translation adds
    differences = sorted(differences, key=lambda d: d.area != "server")
    a, b = _at(first[0], first[0]), _at(other[0], first[0])
    shown = "; ".join(f"{d.area} {d.key}: {d.a} ({a}) vs {d.b} ({b})" for d in differences[:2])
    more = f" and {len(differences) - 2} more" if len(differences) > 2 else ""
    engines = len({setup[0][1].server.server_kind.name for setup in setups}) > 1  # say which is which
    listed = ", ".join(_choice(setup, first[0], engines) for setup in setups)
    counted = f" ({len(setups)} setups)" if len(setups) < len(built) else ""
    return InputError(
        f"{first[0].where()}: {len(built)} serving commands{counted} that are not one setup: they differ in "
        f"{shown}{more}; import one with --pick N ({listed}){aside}"
    )


def _rank_setups(built: list[Built]) -> list[list[Built]]:
    """The commands grouped by setup: a command that differs from an earlier server over hosts only in what its
    ranks may differ in (rank flags, the head's or its own address) is that server's next rank."""
    setups: list[list[Built]] = []
    servers: list[list[Built]] = []  # the setups that are servers over hosts, which may have more ranks
    for command in built:
        for setup in servers:
            head = setup[0][1]
            if rank_of(head.server) == rank_of(command[1].server):
                continue
            ranks = {("docker", "--name"), *(("server", f) for f in rank_flags(head.server))}
            found = diff_recipes(head, command[1])
            if all(
                (d.area, d.key) in ranks
                or _head_moved(head, command[1], d)
                or _own_address(d)
                or _head_only(head, command[1], d)
                for d in found
            ):
                setup.append(command)
                break
        else:
            setups.append([command])
            if spans_nodes(command[1].server):
                servers.append(setups[-1])
    return setups


def _choice(setup: list[Built], near: Candidate, engine: bool = False) -> str:
    """One setup in a --pick list: a command's number and line, or the ranks of one server over hosts (any of
    their numbers picks the server); with `engine`, the engine each runs."""
    title = f" {setup[0][1].server.server_kind.title}" if engine else ""
    if len(setup) == 1:
        return f"{setup[0][0].number}: {_at(setup[0][0], near)}{title}"
    numbers = " or ".join(str(c.number) for c, _, _ in setup)
    lines = ", ".join(_at(c, near) for c, _, _ in setup)
    return f"{numbers}: {lines}, the ranks of one{title} server over {len(setup)} hosts"


def _at(server: Candidate, near: Candidate) -> str:
    """`line N` for a command of the same file as `near`, else `FILE:N`."""
    same = server.simple.command.post is near.simple.command.post
    return f"line {server.simple.first_line}" if same else server.where()


def _took(server: Candidate, recipe: Recipe) -> str:
    image = f", {recipe.image.reference}" if server.run is not None else ""
    words = [shell_value(word) for word in python_program(server.simple.texts)]
    program = words[:3] if words[:2] == ["python3", "-m"] else words[:2]
    return f"`{' '.join(program)}` (the server, {recipe.server.server_kind.title}{image})"


def _detect(run: ParsedRun, where: str, notes: list[str]) -> str:
    if not run.image[:1].isalnum():  # an image reference starts with a letter or digit
        raise InputError(
            f"{where}: {run.image!r} stands where docker reads the image, and no image name starts with "
            f"{run.image[0]!r} (docker exits: invalid reference format); a damaged copy (`++name` for `--name`)? "
            "give the command as its author wrote it"
        )
    try:
        return detect_kind(run.image, python_program(list(run.command))).name
    except InputError as err:
        if "is not supported" in err.message:
            raise InputError(f"{where}: {err.message}") from None
        named = kind_named_like(run.image)
        if named is not None:  # a rebuild or mirror that keeps the official image's name (lmcache/vllm-openai)
            notes.append(
                f"{where}: {run.image} is named as {named.title}'s own image is, so it is read as {named.title} "
                "(pass --kind to say otherwise)"
            )
            return named.name
        raise InputError(
            f"{where}: cannot tell which server {run.image} runs; pass --kind sglang or --kind vllm"
        ) from None


def _node_gpus(docker: DockerSpec, where: str, notes: list[str]) -> DockerSpec:
    """`docker` with GPUs named by the poster's machine's UUIDs named as the node's first ones (a note)."""
    by_uuid = uuid_devices(docker)
    if by_uuid is None:
        return docker
    notes.append(
        f"{where}: the GPUs {by_uuid[1]} are the poster's machine's, by UUID; the node's first "
        f"{by_uuid[1].count(',') + 1} are given in their place"
    )
    return by_uuid[0]


def _given_gpus(docker: DockerSpec, where: str, notes: list[str]) -> DockerSpec:
    """`docker` with `--gpus all` where the container asks for no GPU (no `--gpus`, NVIDIA runtime or NVIDIA
    device): the poster's Docker gave it every GPU by its default runtime, which a node's Docker does not, and a
    server of the kinds hgxkit deploys does not start without one. CUDA_VISIBLE_DEVICES, if set, still chooses."""
    runtime = (docker.last("--runtime") or "").lower()
    devices = [value or "" for value in docker.values("--device")]
    if any(shell_value(value or "").strip("\"'") == "0" for value in docker.values("--gpus")):
        raise InputError(
            f"{where}: --gpus 0 gives the container no GPU (Docker reads a bare number as how many GPUs); for GPU 0 "
            "write --gpus device=0, or --gpus 1 for any one GPU"
        )
    if docker.values("--gpus") or runtime == "nvidia" or any("nvidia" in d for d in devices):
        return docker
    notes.append(
        f"{where}: the container asks for no GPU (no --gpus, NVIDIA runtime or device): the post's Docker gave it "
        "the GPUs by its default runtime, which a node's does not; --gpus all added"
    )
    added = parse_option_words(["--gpus", "all"], source=where)
    return DockerSpec(docker.invocation, (*added, *docker.entries))


def _own_network(docker: DockerSpec, server: ServerCommand, where: str, notes: list[str]) -> DockerSpec:
    """`docker` without a `--network` of the poster's own (`docker network create bmk-net`), which a node does not
    have (Docker refuses to start the container), and with the server's port published where nothing is."""
    network = docker.last("--network")
    if network is None or network in ("host", "bridge", "none", "default") or network.startswith("container:"):
        return docker
    kept = [e for e in docker.entries if not any(canonical(u.option.name) == "--network" for u in e.uses)]
    port = server.flag("--port") or str(server.server_kind.default_port)
    published = ""
    if not docker.ports() and port.isdigit():
        kept += parse_option_words(["-p", f"{port}:{port}"], source=where)
        published = f"; -p {port}:{port} publishes the server's port, which the post's own containers reached there"
    notes.append(
        f"{where}: --network {network} dropped: a network of the poster's own, which a node does not have (Docker "
        f"would not start the container); it gets Docker's bridge{published}"
    )
    return DockerSpec(docker.invocation, tuple(kept))


def _shared_memory(docker: DockerSpec, server: ServerCommand, where: str, notes: list[str]) -> DockerSpec:
    """`docker` with `--ipc=host` where a server of several GPUs is left Docker's 64 MB of /dev/shm (no `--ipc`,
    no `--shm-size`), which NCCL between its ranks outgrows: the engines' docs give either."""
    try:
        several = server.parallel_size() > 1
    except ValueError:
        return docker
    if not several or docker.values("--ipc") or docker.values("--shm-size"):
        return docker
    notes.append(
        f"{where}: --ipc=host added: {server.parallel_size()} GPUs' ranks share memory through /dev/shm, and the "
        "container has Docker's 64 MB of it (no --ipc or --shm-size)"
    )
    return DockerSpec(docker.invocation, (*docker.entries, *parse_option_words(["--ipc=host"], source=where)))


_SERVER_SCRIPT = re.compile(r"(?i)vllm|sglang|serve")


def _script_run(simple: Simple) -> tuple[str, str] | None:
    """(where, script) of a command that runs a shell script (`exec /srv/start-vllm.sh`, `bash run.sh`), else None."""
    words = [w for w in simple.texts if w not in ("exec", "sudo", "nohup", "bash", "sh", "-x", "-e")]
    if words and words[0].endswith(".sh") and not words[0].startswith("-"):
        return simple.where(), words[0]
    return None


# What the engines, CUDA and their libraries read from the environment (`VLLM_ALLOW_LONG_MAX_MODEL_LEN`, `NCCL_*`).
_SERVER_SETTING = re.compile(
    r"(?:VLLM|SGLANG|NCCL|CUDA|HF|HUGGING_FACE|TORCH|PYTORCH|GLOO|NVIDIA|LMCACHE|UCX|NVSHMEM|OMP|TRITON|FLASHINFER)_\w+"
)


def _unexported_setting(server: Candidate, simples: list[Simple]) -> None:
    r"""Refuse a bare launch right under a line that only sets such a setting, without `export` and unread by the
    post: a shell gives the launch none of it, where a lost backslash would have (`NAME=value \` then the launch)."""
    command = server.simple.command
    if server.run is not None or re.search(r"(?m)^\s*set\s+-[a-z]*a", "\n".join(command.post.clean)):
        return  # a container gets its environment from -e, not its launching shell; `set -a` exports every one
    before = next((s for s in simples if s.command.post is command.post and s.command.last == command.first - 1), None)
    if before is None or before.kind != "assign":
        return
    text = "\n".join(command.post.clean)
    for word in before.words:
        name = word.text.split("=", 1)[0]
        if _SERVER_SETTING.fullmatch(name) and not re.search(rf"\$\{{?{name}\b", text):
            raise InputError(
                f"{command.post.name}: line {word.line}, column {word.column}: {name} is set without `export`, so the "
                f"launch on line {command.first} does not get it (a shell variable): a continuation backslash may be "
                f"missing (`{word.text} \\` before the launch puts it in its environment); add it, or export it"
            )


def _bare_program(server: Candidate) -> bool:
    """True for a bare launch cut right after its program (`python3 -m sglang.launch_server \\` where the post
    ends): every argument is past the cut, so whatever else the import could say of it is said of nothing."""
    if not server.simple.command.cut or server.run is not None or server.role in ("broken", "refused"):
        return False
    words = [w for w in server.simple.texts if "=" not in w or w.startswith("-")]  # past a `NAME=value` prefix
    return any(tuple(python_program(words)) == program for k in KINDS.values() for program in k.programs)


def _another_setup(server: Candidate, error: InputError) -> bool:
    """True for a serving command that is a setup of its own beside the one taken: not a container of unknown use,
    nor a part of a document for another accelerator (the post's alternative for it, set aside)."""
    if server.role == "refused":
        return not isinstance(error, ForeignSetup)
    return server.role == "server" or (server.role == "unknown" and server.kind is not None)


def _alternative_refused(alternative: tuple[Candidate, InputError], taken: list[Candidate]) -> InputError:
    """A post that shows a setup hgxkit reads beside a launch it cannot read: which one the user means is theirs
    to say, not the import's to guess from which one reads (the other may be the one they run)."""
    server, error = alternative
    picks = ", ".join(f"{c.number}: {c.where()}" for c in taken)
    return InputError(
        f"{error.message}; so serving command {server.number} ({server.where()}) cannot be imported, and the post "
        f"shows another setup beside it: import that one with --pick N ({picks})"
    )


def _unsupported(engine: Candidate) -> UnsupportedKind:
    return next(o for o in UNSUPPORTED if o.name == engine.kind)


def _engine_refusal(engine: Candidate, servers: list[Candidate]) -> InputError:
    other = _unsupported(engine)
    supported = "NVIDIA HGX-H200 nodes" if other.hardware else " and ".join(k.title for k in KINDS.values())
    also = [s for s in servers if s is not engine and s.role != "engine"]
    picks = ", ".join(f"{s.number}: {s.where()}" for s in also)
    tail = f"; the post also launches {len(also)} other server(s): import one with --pick N ({picks})" if also else ""
    if other.remedy:
        return InputError(f"{engine.where()}: {other.title} ({other.name}) is not supported yet: {other.remedy}{tail}")
    way = "import a post for NVIDIA GPUs" if other.hardware else "import a post that launches one of them"
    return InputError(
        f"{engine.where()}: {other.title} ({other.name}) is not supported: hgxkit serves {supported}"
        + (tail or f"; {way}")
    )


# Commands whose words become recipe fields: a lost line of theirs changes the recipe.
_TAKEN_KINDS = frozenset({"docker-run", "docker-exec", "server", "bench", "engine"})


def _unread_export(exports: Sequence[Simple], server: Simple) -> None:
    """Refuse a launch that an `export NAME=$(…)` the scan could not read comes before: its variable is in the
    launch's environment (`VLLM_HOST_IP`, `NCCL_SOCKET_IFNAME`), so a recipe without it is not what the post runs."""
    post = server.command.post
    before = [e for e in exports if e.command.post is post and e.command.last < server.command.first]
    if not before:
        return
    error = before[0].error()
    assert error is not None
    raise InputError(
        f"{before[0].where()}: an `export` the import cannot read ({error.message.split(': ', 1)[-1]}); its "
        f"variable is in the environment of the launch at {server.where()}: write its value, or drop the export"
    )


_STRING = re.compile(r"([\"'])((?:(?!\1).)*)\1")


def _quoted_launch(post: PostFile) -> str | None:
    """`FILE:LINE` of a fenced line whose string literal holds an engine's launch (`"nohup vllm serve org/m "` in a
    Python fence), where the shell scan finds nothing; None where there is none.

    >>> from hgxkit.importing.post import read_post
    >>> _quoted_launch(read_post("p.md", "```\\ncmd = (\\n    \\"nohup vllm serve org/m \\"\\n)\\n```\\n"))
    'p.md:3'
    """
    for number, line in enumerate(post.lines, 1):
        if not post.fences[number - 1]:
            continue
        for match in _STRING.finditer(line):
            words = match.group(2).split()
            if any(kind.launches(words[i:]) for kind in KINDS.values() for i in range(len(words))):
                return f"{post.name}:{number}"
    return None


# An Ansible task's Docker module: `docker_container:`, `community.docker.docker_container:`.
_ANSIBLE_DOCKER = re.compile(r"^(\s*)(?:community\.docker\.)?docker_container:\s*$")


def _ansible_task(simple: Simple) -> str | None:
    """The refusal of a server command that is the `command:` of an Ansible `docker_container` task: the task's
    other keys (image, env, volumes, device_requests, …) are the module's, which a shell reading of the command
    leaves out; None where the command is no such task's."""
    lines = simple.command.post.lines
    for number in range(simple.command.first, 0, -1):
        text = lines[number - 1]
        found = _ANSIBLE_DOCKER.match(text) if number < simple.command.first else None
        if found:
            return (
                f"{simple.command.post.name}:{number}: an Ansible docker_container task: its image, env, volumes and "
                "GPUs are the module's keys, which hgxkit does not read (its command alone would lose them); "
                "import the `docker run` or the compose service it stands for"
            )
        indent = len(text) - len(text.lstrip())
        if text.strip() and indent == 0 and not text.lstrip().startswith("#"):
            return None  # a line at the margin ends any task above
    return None


def _targets(run: ParsedRun) -> list[str]:
    """The container directories of `run`'s mounts (`-v`, `--mount`)."""
    return [m.target for m in DockerSpec(run.invocation, run.entries).mounts()]


class _Placeholder(InputError):
    """A command refused for a value left for the reader to fill in."""


def _mention(server: Candidate) -> bool:
    """A launch program a sentence names with nothing after it (`using `vllm serve` works`): inline code in a line
    of prose, its words the program alone."""
    simple = server.simple
    kind = KINDS.get(server.kind or "")
    words = [w.text for w in simple.words if not w.is_operator]
    program = program_of(words, kind.programs + kind.deprecated_programs) if kind is not None else None
    return program is not None and len(python_program(words)) == len(program) and _in_sentence(server)


def _example(server: Candidate, error: InputError) -> bool:
    """A launch a sentence gives as an example (`e.g. `vllm serve SOME_MODEL --config c.yaml``): inline code in a
    line of prose, refused for a placeholder, so it is no setup the post runs."""
    return isinstance(error, _Placeholder) and _in_sentence(server)


def _in_sentence(server: Candidate) -> bool:
    """True for a command that is inline code in one line of prose."""
    post, line = server.simple.command.post, server.simple.command.first
    prose = post.lines[line - 1].strip() != post.clean[line - 1].strip()
    return prose and server.simple.command.last == line


# An engine's launch program, and one glued to the word before it (`…GPU count.vllm serve <model>`): a page whose
# code and text ran together, where no command starts.
_LAUNCH = r"(?:vllm serve|sglang serve)\b|python3? -m (?:sglang\.launch_server|vllm\.entrypoints\.[\w.]+)"
_GLUED_LAUNCH = re.compile(r"(?<=[^\s/`'\"$({=])(" + _LAUNCH + ")")
_COMMENTED_LAUNCH = re.compile(r"^\s*#.*?\b(" + _LAUNCH + ")")
# A container's `command:` or `args:` list of server flags alone (`command: ["--model", "org/m", …]`).
_LIFTED = re.compile(r"^\s*(?:-\s*)?(command|args)\s*:\s*\[\s*[\"']?--[a-z]")
# (what shows a launch the shell runs nothing of, what it is, the way out), in the order they are told
# `vllm --model M …`: vLLM's CLI given options and no subcommand (`serve`) prints its usage and exits
_NO_SUBCOMMAND = re.compile(r"^\s*(?:\$\s+)?(?:\S*/)?(vllm)\s+--(?!version\b|help\b)[a-z]")
_UNRUN = (
    (
        _LIFTED,
        "`{}:` holds a container's server flags without its image or the rest of its compose file or manifest, so "
        "what runs them is not in the post",
        "give the whole file, or the `docker run` with its image",
    ),
    (
        _GLUED_LAUNCH,
        "`{}` stands glued to the text before it (a page whose code and prose ran together), so no command starts "
        "there",
        "give the command on a line of its own",
    ),
    (
        _COMMENTED_LAUNCH,
        "`{}` stands inside a comment (commented out, or a page whose line breaks were lost put it after the "
        "comment's text), so a shell runs nothing there",
        "give the command on a line of its own",
    ),
    (
        _NO_SUBCOMMAND,
        "`{}` is given options but no subcommand, so it prints its usage and exits: no server starts there",
        "write the launch as `vllm serve MODEL …`",
    ),
)


def _unrun_launch(post: PostFile) -> str | None:
    """The refusal of a launch the post shows but no shell runs (`_UNRUN`: a container's argument list lifted out of
    its file, a launch glued to prose, one in a comment line), where nothing serves; None where there is none.

    >>> from hgxkit.importing.post import read_post
    >>> _unrun_launch(read_post("p.md", "Set the count.vllm serve org/m --tp 2"))[:54]
    'p.md: line 1, column 15: `vllm serve` stands glued to '
    """
    imaged = any(re.match(r"\s*(?:-\s*)?image\s*:", line) for line in post.lines)  # the whole file: not lifted
    for sign, what, remedy in _UNRUN:
        if sign is _LIFTED and imaged:
            continue
        for number, line in enumerate(post.lines, 1):
            found = sign.search(line)
            if found:
                place = f"{post.name}: line {number}, column {found.start(1) + 1}"
                return f"{place}: {what.format(found.group(1))}; {remedy}"
    return None


def _nothing_found(names: str, posts: Sequence[PostFile]) -> InputError:
    """The refusal of posts with no serving command, naming the format they are where their shape shows it."""
    found = f"{names}: no serving command found (docker run, sglang serve, python -m sglang.launch_server, vllm serve)"
    template = next(((post, at) for post in posts if (at := template_file(post.lines))), None)
    if template is not None:
        post, (line, marker) = template
        return InputError(
            f"{post.name}:{line}: `{marker}` is a Jinja template's statement: the file is a template that builds the "
            "launch from its values, and holds no serving command as it stands; render it (the file the tool writes "
            "on the node) and import that"
        )
    shape = next(filter(None, (unread_format(post.lines) for post in posts)), None)
    if shape is None:
        return InputError(f"{found}; give the post that has it")
    what, way_out = shape
    return InputError(f"{found}; it is {what}: {way_out}")


def _image_first(post: PostFile) -> str | None:
    """The refusal of a fenced line that starts at an engine's image followed by its arguments (`vllm/vllm-openai:tag
    org/m --tensor-parallel-size 8`, a diff hunk's or an excerpt's piece of a `docker run`): the command and its
    options before the image are not in the post; None where there is none.

    >>> from hgxkit.importing.post import read_post
    >>> _image_first(read_post("p.md", "```\\n  vllm/vllm-openai:v1 org/m --port 1\\n```\\n"))[:47]
    'p.md: line 2, column 3: the command starts at t'
    """
    for number, line in enumerate(post.clean, 1):
        words = line.split()
        if not post.fences[number - 1] or len(words) < 2 or ":" not in words[0]:
            continue
        if any(image_matches(words[0], kind.images) for kind in KINDS.values()):
            return (
                f"{post.name}: line {number}, column {len(line) - len(line.lstrip()) + 1}: the command starts at the "
                f"image {words[0]}: the `docker run` and its options before it are not in the post (a piece of a "
                "command, as a diff hunk or an excerpt shows it); give the whole command"
            )
    return None


def _unended(simple: Simple) -> None:
    """Refuse a serving, docker or benchmark command whose next line reads as its continuation though the
    command ended without a backslash: a shell would run that line apart (or fail on it), and the import would
    keep the command without it. Not guessed: the poster rejoins the lines."""
    command = simple.command
    exported = [w.text for w in command.words[:1]] == ["export"]  # its variables reach the launch after it
    if command.unended is None or (simple.kind not in _TAKEN_KINDS and not exported):
        return
    if simple.kind == "bench":  # set aside with its numbers, the server still judged (`_placeholder_of`)
        return
    line, column, word = command.unended
    _named_apart(command.post, command.first, line)
    raise InputError(
        f"{command.post.name}: line {line}, column {column}: {word!r} follows the command at line {command.first} "
        f"(ended at line {command.last} without a trailing backslash): a continuation backslash may be missing "
        "(or a line wrap split a word); add it or rejoin the lines, or put a blank line between them if they are apart"
    )


def _named_apart(post: PostFile, first: int, orphan: int) -> None:
    """Refuse by name a command whose lines lost their backslashes (a rendered page's one option per line) when
    those lines show another accelerator or an engine hgxkit does not serve: what the post runs says more than the
    missing backslash, which fixing would only lead to the same refusal. The lines run from `first` to the blank
    line, fence or comment that ends the paragraph."""
    last = orphan
    while last < len(post.clean) and post.clean[last].strip() and post.fences[last] == post.fences[first - 1]:
        last += 1
    lines = post.clean[first - 1 : last]
    if not shows_nvidia(post.clean):
        for number, line in enumerate(lines, first):
            found = foreign_in(line)
            if found is not None:
                raise ForeignSetup(message(f"{post.name}:{number}", found))
    for number, line in enumerate(lines, first):
        other = next((o for o in UNSUPPORTED if not o.hardware and o.hinted_by(line)), None)
        if other is not None:
            served = other.remedy or f"hgxkit serves {' and '.join(k.title for k in KINDS.values())}"
            raise InputError(
                f"{post.name}:{number}: {other.title} ({other.name}) is not supported: {served} (lines {first}-"
                f"{last} are one command that lost its continuation backslashes)"
            )


def _placeholders(simple: Simple, *, angled_only: bool = False) -> None:
    """Refuse a placeholder in any argument the command would run with (a docker option, a server flag, a
    benchmark argument): `<name>` (also `<several words>`, which a shell reads as redirections), `YOUR_…`,
    `/path/to/…`; it names the placeholder and its flag. One standing for a secret is fine: the secret is
    taken from the environment anyway."""
    words = simple.words
    braced = None if angled_only else _braced(simple)
    if braced is not None:
        line, column, text = braced
        index = next((i for i, w in enumerate(words) if (w.line, w.column) >= (line, column)), len(words) - 1)
        raise _Placeholder(
            f"{simple.command.post.name}: line {line}, column {column}: {text} is a placeholder"
            f"{owner_of(words, index)}; {fill_hint(text)}"
        )
    for index, word in enumerate(words):
        if word.is_operator and word.text == "<":
            close = next((i for i in range(index + 1, len(words)) if words[i].is_operator), None)
            if close is None or not words[close].text.startswith(">") or close == index + 1:
                continue
            text = f"<{' '.join(w.text for w in words[index + 1 : close])}>"
            owner = words[index - 1].text if index else ""
            if owner.endswith("=") and is_secret_name(owner[:-1]):
                continue
        elif not word.is_operator and _placeholder_in(word.text, angled_only):
            name = word.text.split("=", 1)[0] if "=" in word.text else ""
            flag = words[index - 1].text if index else ""
            if is_secret_name(name) or is_secret_flag(flag) or is_secret_name(flag.lstrip("-").replace("-", "_")):
                continue
            text = (PLACEHOLDER.search(word.text) or FILL_IN.search(word.text)).group()  # type: ignore[union-attr]
        else:
            continue
        raise _Placeholder(
            f"{simple.command.post.name}: line {word.line}, column {word.column}: {text} is a "
            f"placeholder{owner_of(words, index)}; {fill_hint(text)}"
        )
    for flag, word in itertools.pairwise(words) if not angled_only else ():
        if not flag.is_operator and not word.is_operator and _named_after(flag.text, word.text):
            raise _Placeholder(
                f"{simple.command.post.name}: line {word.line}, column {word.column}: {word.text} is a placeholder "
                f"(the value of {flag.text} is the option's own name, left for the reader); write its value"
            )


def _named_after(flag: str, value: str) -> bool:
    """True for a value that is its flag's own name, or the end of it (`--model-path path`, `--port port`,
    `--served-model-name model_name`): a value a post leaves for the reader to fill in.

    >>> _named_after("--model-path", "path"), _named_after("--served-model-name", "model_name")
    (True, True)
    >>> _named_after("--served-model-name", "model"), _named_after("--dtype", "auto")
    (False, False)
    """
    if not flag.startswith("--") or "=" in flag or not re.fullmatch(r"[A-Za-z][A-Za-z_-]*", value):
        return False
    parts = flag[2:].lower().replace("_", "-").split("-")
    written = value.lower().replace("_", "-")
    return any(written == "-".join(parts[at:]) for at in range(len(parts)))


def _model_placeholder(server: ServerCommand, simple: Simple) -> None:
    """Refuse a model flag whose value is an upper-case placeholder name (a script's `model=MODEL_PATH`), naming
    the line that writes it and `--fill`."""
    flag = server.server_kind.model_flag
    value = server.flag(flag)
    if value is None or not NAMED_BLANK.fullmatch(value):
        return
    post = simple.command.post
    written = next((n for n, line in enumerate(post.clean, 1) if occurrences(value).search(line)), None)
    at = f"; the post writes it at line {written}" if written is not None else ""
    raise _Placeholder(
        f"{simple.where()}: {flag} {value} is a placeholder (a name to fill in, not a model{at}); write the model's "
        f"repository or path there, or give it: --fill '{value}=VALUE'"
    )


def _braced(simple: Simple) -> tuple[int, int, str] | None:
    """(line, column, text) of a `{your model directory}` or `/[model dir]/` placeholder in the command's lines (a
    shell splits it into words, so it is looked for in the line)."""
    command = simple.command
    for offset, line in enumerate(command.post.clean[command.first - 1 : command.last]):
        match = BRACED.search(line) or SPACED_FOLDER.search(line)
        if match:
            return command.first + offset, match.start() + 1, match.group()
    return None


def _placeholder_in(text: str, angled_only: bool) -> bool:
    return bool(PLACEHOLDER.search(text) or (not angled_only and FILL_IN.search(text)))


def _hardware(server: Candidate, run: ParsedRun, scope: Scope, prefix: dict[str, str]) -> None:
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
                    raise InputError(
                        f"{where}: --device {use.value} is an AMD GPU device; hgxkit serves NVIDIA HGX-H200 nodes"
                    )
    names = [*scope.exported(), *prefix, *(v.split("=", 1)[0] for v in _env_values(run))]
    for name in names:
        if _AMD_ENV.match(name):
            raise InputError(f"{where}: {name} is an AMD ROCm setting; hgxkit serves NVIDIA HGX-H200 nodes")
        if _ASCEND_ENV.match(name):
            raise InputError(f"{where}: {name} is a Huawei Ascend (HCCL) setting; hgxkit serves NVIDIA HGX-H200 nodes")


def _platform(server: Candidate, scope: Scope, prefix: dict[str, str]) -> None:
    """Refuse a serving command for another accelerator, by the words of its command, the command it runs in
    and the variables set before it (the posted image counts, whatever `--image` replaces it with)."""
    simples = [server.simple] + ([server.context.simple] if server.context else [])
    for simple in simples:
        post = simple.command.post
        for number in range(simple.command.first, simple.command.last + 1):
            found = foreign_in(post.clean[number - 1])
            if found is not None:
                raise ForeignSetup(message(f"{post.name}:{number}", found))
    for name in [*scope.exported(), *prefix]:
        found = foreign_in(name)
        if found is not None:
            raise ForeignSetup(message(server.where(), found))


def _engine_refuses(recipe: Recipe, server: Candidate, notes: list[str]) -> None:
    """Refuse, at the word of the post that causes it, what the engine itself would refuse at start-up; note the
    flags no option table of the image's version could judge."""
    wrapped = _wrapped_flag(server, recipe.server.server_kind)
    if wrapped is not None:
        raise InputError(wrapped)
    written = [w.text for w in server.simple.words if not w.is_operator]
    refusal = engine_refusal(recipe, written[-1] if written else None)
    if refusal is not None:
        raise InputError(f"{_word_at(refusal.word, server)}: the engine would refuse: {refusal.reason}")
    for unchecked in unchecked_flags(recipe):
        notes.append(f"{_word_at(unchecked.word, server)}: {unchecked.reason}")


# An engine's switch to download models from ModelScope instead of the Hugging Face Hub (vLLM's, SGLang's).
_MODELSCOPE = re.compile(r"[A-Z]+_USE_MODELSCOPE")


def _refuse_modelscope(recipe: Recipe, server: Candidate) -> None:
    """Refuse a model id the server would download from ModelScope (`VLLM_USE_MODELSCOPE=True`): hgxkit places
    models from the Hugging Face Hub, where the same id may be another model or none; --model-repo names the Hub's."""
    model = recipe.server.flag(recipe.server.server_kind.model_flag) or ""
    if not model or model.startswith(("/", ".", "$")):
        return  # a folder: read as it is, wherever it came from
    for setting in recipe.docker.env():
        if _MODELSCOPE.fullmatch(setting.name) and (setting.value or "").strip("'\"").lower() in ("1", "true", "yes"):
            raise InputError(
                f"{_word_at(setting.name, server)}: {setting.name}={setting.value}: the server downloads {model} from "
                "ModelScope, not the Hugging Face Hub that hgxkit places models from (the same id there may be "
                "another model, or none); pass --model-repo ORG/NAME naming the Hub repo of the same model"
            )


def _wrapped_flag(server: Candidate, kind: ServerKind) -> str | None:
    """The refusal of a command that ends in a piece of a flag where the next line starts with the rest of it
    (`--s` then `erved-model-name …`): a terminal or a page wrapped the line inside the word, so a shell ran the
    rest apart and the engine would get the piece (or take it as a prefix of another option); or where the post
    ends after it (`--disable-hybr`, an excerpt cut inside the word); None otherwise."""
    words = [w for w in server.simple.words if not w.is_operator]
    lines = server.simple.command.post.lines
    if not words or kind.is_option is None:
        return None
    last = words[-1]
    after = [line for line in lines[last.line :] if line.strip() and not FENCE_RE.match(line)]
    started = kind.option_started(last.text) if kind.option_started and not after else ()
    if started:
        options = ", ".join(f"`{name}`" for name in started[:3]) + (", …" if len(started) > 3 else "")
        return (
            f"{server.simple.command.post.name}: line {last.line}, column {last.column}: `{last.text}` ends the post "
            f"and is only the start of an option ({options}): the copy is cut inside it; give the whole command"
        )
    if last.line >= len(lines):
        return None
    rest = lines[last.line].split()
    if not rest or rest[0].startswith("-") or kind.is_option(last.text) or not kind.is_option(last.text + rest[0]):
        return None
    return (
        f"{server.simple.command.post.name}: line {last.line}, column {last.column}: `{last.text}` ends the command "
        f"and line {last.line + 1} starts with `{rest[0]}`: a wrap split `{last.text + rest[0]}`, and a shell runs "
        f"the rest apart; rejoin lines {last.line}-{last.line + 1}"
    )


def _image_at(image: str, started: Simple) -> str:
    """`post: line L, column C` of the image's word in the command that starts the container, else the command's
    place."""
    word = next((w for w in started.words if w.text == image and not w.is_operator), None)
    return f"{started.command.post.name}: line {word.line}, column {word.column}" if word else started.where()


def _word_at(text: str, server: Candidate) -> str:
    """`post: line L, column C` of the first word of the server's command that holds `text`."""
    word = next((w for w in server.simple.words if text in w.text), None)
    return f"{server.simple.command.post.name}: line {word.line}, column {word.column}" if word else server.where()


def _host_relative_mounts(recipe: Recipe, server: Candidate) -> None:
    """Refuse a bind mount whose host side is left to the node's shell or working directory (`~/…`, `./…`):
    the recipe does not load (`~`) or Docker 20.10 refuses it as a volume name (`./`), so it would not deploy."""
    for use in recipe.docker.uses():
        name = canonical(use.option.name)
        value = shell_value(use.value or "")  # an expanding `~` is kept as `$~`
        if name == "--volume":
            source = value.split(":", 1)[0]
        elif name == "--mount":
            fields = dict(f.partition("=")[::2] for f in value.split(","))
            source = fields.get("source") or fields.get("src") or ""
        else:
            continue
        if not _RELATIVE_SOURCE.match(source):
            continue
        word = next((w for w in server.simple.words if source in w.text), None)
        post = server.simple.command.post.name
        at = f"{post}: line {word.line}, column {word.column}" if word else server.where()
        home = re.match(r"~|\$\{?HOME\b", source)
        why = (
            f"{home.group().strip('{')} is the home of whoever runs the command, root when hgxkit deploys"
            if home
            else "a relative path depends on the directory the command runs in, and Docker 20.10 takes it "
            "for a volume name"
        )
        raise InputError(
            f"{at}: {name} {value}: the host side {source} is not a fixed directory ({why}); "
            "write the absolute host directory"
        )


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


def _fits(recipe: Recipe, server: Candidate) -> None:
    """Refuse a server that needs more GPUs than its hosts have, or vLLM data parallelism spread by hand."""
    kind = recipe.server.server_kind
    where = server.where()
    total = parallel_size(recipe.server, where)
    _hosts_known(recipe.server, server, total)
    # over nodes, `join_ranks` (or `ray_group`) checks each host's share
    if total > HGX_GPUS and not spans_nodes(recipe.server) and recipe.node_count() < 2:
        flag = _flag_word(server, kind)
        at = f"{server.simple.command.post.name}: line {flag.line}, column {flag.column}" if flag else where
        backend = kind.ray.backend if kind.ray is not None else ()
        if backend and recipe.server.flag(backend[0]) == backend[1]:
            raise InputError(
                f"{at}: tp x pp x dp = {total} GPUs on the Ray backend ({' '.join(backend)}): a Ray cluster of "
                f"{-(-total // HGX_GPUS)} hosts that the post never starts (no `ray start`); give its head's and "
                "workers' commands, or spread it with --nnodes and --node-rank"
            )
        raise InputError(
            f"{at}: tp x pp x dp = {total} GPUs, but an HGX-H200 node has {HGX_GPUS} and the command runs on one "
            f"node: spread it with --nnodes {-(-total // HGX_GPUS)} and --node-rank, or start a Ray cluster over the "
            "hosts"
        )


def _sizes_known(command: ServerCommand, server: Candidate) -> None:
    """Refuse a parallel size (`--tensor-parallel-size $TP`) left to a variable the post does not set, naming it as
    that (not as a value that is no whole number): the GPUs the server uses are unknown."""
    kind = command.server_kind
    for flag in (kind.tp_flag, kind.pp_flag, kind.dp_flag):
        value = command.flag(flag)
        if value is None or "$" not in value:
            continue
        raise InputError(
            f"{_value_at(server, flag, value)}: {flag} {value}: a variable the post does not set"
            f"{sourced_before(server.simple)}, so the GPUs the server uses are unknown; write its value in the post"
        )


def _value_at(server: Candidate, flag: str, value: str) -> str:
    """`FILE: line L, column C` of a flag's value as the post writes it (`--nnodes=$N`, or the word after
    `--nnodes`), not another word that holds the same text; the command's place where none is found."""
    word = next((w for w in server.simple.words if w.text in (value, f"{flag}={value}")), None)
    return f"{server.simple.command.post.name}: line {word.line}, column {word.column}" if word else server.where()


def _hosts_known(command: ServerCommand, server: Candidate, total: int) -> None:
    """Refuse a host count (`--nnodes $N`) left to a variable the post does not set: how many hosts the server
    spans, and so the GPUs each one runs, is unknown."""
    flag = command.server_kind.nnodes_flag
    value = command.flag(flag)
    if value is None or "$" not in value:
        return
    raise InputError(
        f"{_value_at(server, flag, value)}: {flag} {value}: the number of hosts is a variable the post does not set"
        f"{sourced_before(server.simple)}, so the GPUs each host runs (of tp x pp x dp = {total}) are unknown; "
        f"write the number of hosts"
    )


# How a post names the GPUs a server sees: an environment list or docker's device list.
_DEVICE_LIST = re.compile(r"(?:CUDA|NVIDIA)_VISIBLE_DEVICES=['\"]?([\d,]+)|device=([\d,]+)")


def _on_the_node(recipe: Recipe, server: Candidate) -> None:
    """Refuse a device list naming a GPU an HGX-H200 node does not have (posts from bigger boxes: GPU 8 of nine),
    pointing at the list as the post writes it; a deploy would fail at docker's device lookup."""
    listed = named_gpus(recipe.docker)
    beyond = sorted(i for i in listed if i >= HGX_GPUS)
    if not beyond:
        return
    post, at, shown = server.simple.command.post, server.where(), f'--gpus "device={",".join(map(str, listed))}"'
    for number in range(server.simple.command.first, server.simple.command.last + 1):
        match = _DEVICE_LIST.search(post.clean[number - 1])
        if match is not None:
            at, shown = f"{post.name}: line {number}, column {match.start() + 1}", match.group(0)
            break
    raise InputError(
        f"{at}: {shown} names GPU {', '.join(map(str, beyond))}, but an HGX-H200 node has {HGX_GPUS} "
        f"(0-{HGX_GPUS - 1}); name {len(listed)} GPU(s) the node has"
    )


def _flag_word(server: Candidate, kind: ServerKind) -> Word | None:
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
    posted = server.flag("--host")
    if posted is not None and _machine_address(posted):
        notes.append(
            f"{where}: --host {posted} became 0.0.0.0: an address of the post's machine, which the node does not have "
            "(the server could not listen on it)"
        )
        return _listen_everywhere_on(server)
    if server.has("--host") or not is_loopback(kind.default_host):
        return server
    if not docker.ports() or docker.last("--network") == "host":
        return server
    notes.append(
        f"{where}: --host 0.0.0.0 added: {kind.title} listens on {kind.default_host} by default, which "
        "the container's published port cannot reach (the host side binds per bind_address)"
    )
    return ServerCommand(server.program, (*server.args, ("--host", "0.0.0.0")), server.kind)


def _report_order(report: Report) -> tuple[str, int]:
    name, _, lines = report.where.rpartition(":")
    return name, int(lines.split("-")[0]) if lines.split("-")[0].isdigit() else 0
