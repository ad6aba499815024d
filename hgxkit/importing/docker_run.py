"""Turn a posted `docker run` command into a `Recipe`: placeholders become groups, secrets become references.

Forum posts write one command for several containers with `X` placeholders: `--name model-X`,
`--gpus '"device=X,X,X,X"'`, `-p 500X:30000`. The importer turns them into `{{name}}`, `{{gpus}}` and
`{{port}}` with a grouping (group size = number of X, port base = the port with X as 0). Credentials never
reach the recipe: `-e HF_TOKEN=hf_…` or `-e HTTP_PROXY=http://u:pw@proxy` becomes `-e HF_TOKEN` /
`-e HTTP_PROXY` (Docker then reads the whole value from the environment), `--api-key KEY` becomes
`--api-key {{env:SGLANG_API_KEY}}`, and a credential anywhere else (a `hf_…` token in a label, a URL password
in a server flag, `HF_TOKEN=…` inside `sh -c '…'`) becomes an `{{env:NAME}}` reference: `URL_PASSWORD` for a
password in a URL, the variable `hgxkit.secrets` names for each other form. Every form is one of
`hgxkit.secrets.SECRET_PATTERNS`, the patterns the log and archive scrubber masks.

As a source format of a post (`DOCKER_RUN`, see `formats`), a `docker run` is a server kept as written, a
benchmark client, an interactive container (or one that idles: `sleep infinity`, `tail -f /dev/null`) later
bare commands run in, or a job that is set aside;
`DOCKER_IMAGES` notes the images `docker build` makes (refused: a node cannot pull them) and `docker tag` names.

Example:
    >>> recipe = import_docker_run("docker run -d --name m-X --gpus '\\"device=X,X\\"' -p 500X:80 img serve")
    >>> recipe.groups.size, recipe.groups.port_base, recipe.groups.name_template
    (2, 5000, 'm-{{group}}')
"""

from __future__ import annotations

import itertools
import posixpath
import re
from dataclasses import replace

from hgxkit.errors import InputError
from hgxkit.importing.bench_clients import client_of
from hgxkit.importing.commands import Simple, exec_command, unsupported_program
from hgxkit.importing.outcome import ImportOutcome, LineAccount, finish
from hgxkit.importing.reading import Candidate, Container, Reading
from hgxkit.importing.substitutions import substituted_word
from hgxkit.importing.variables import Scope
from hgxkit.importing.vllm_multinode import ray_container, rendered_head
from hgxkit.kinds import (
    DEFAULT_KIND,
    KINDS,
    UNSUPPORTED,
    ServerKind,
    UnsupportedKind,
    detect_kind,
    image_matches,
    program_of,
    python_program,
)
from hgxkit.recipe.docker_options import canonical
from hgxkit.recipe.docker_parse import (
    OptionEntry,
    OptionUse,
    ParsedRun,
    parse_docker_run,
    parse_option_words,
    parse_run_words,
)
from hgxkit.recipe.read import MAX_RECIPE_BYTES
from hgxkit.recipe.server_args import ServerCommand, is_flag
from hgxkit.recipe.shellwords import shell_value, split_words
from hgxkit.recipe.spec import DockerSpec, Grouping, ImageRef, ModelSpec, Recipe, Source, parse_publish
from hgxkit.secrets import (
    SecretSpan,
    find_secrets,
    flag_env_name,
    has_secret,
    is_secret_flag,
    is_secret_name,
    replace_secrets,
)

_NAME_X = re.compile(r"(?<![A-Za-z0-9])X(?![A-Za-z0-9])")
_PORT_X = re.compile(r"^(\d*)X$")
_ENV_REFERENCE = re.compile(
    r"^(\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)|\{\{env:[A-Za-z_][A-Za-z0-9_]*\}\})$"
)


def import_docker_run(text: str, **options: str | None) -> Recipe:
    """Parse `text` (one `docker run …`) into a recipe; raise `InputError` on malformed input.

    Takes the keyword options of `import_with_notes` (name, source, model_repo, revision).
    """
    return import_with_notes(text, **options).recipe  # type: ignore[arg-type]


def import_with_notes(
    text: str,
    *,
    name: str | None = None,
    source: str = "<input>",
    model_repo: str | None = None,
    revision: str = "main",
) -> ImportOutcome:
    """One `docker run` command, exactly as written (no translation, no model placement: see
    `hgxkit.importing.importer` for whole posts), with notes on secrets removed and inputs left on the host."""
    if len(text) > MAX_RECIPE_BYTES:
        raise InputError(
            f"{source}: longer than {MAX_RECIPE_BYTES >> 10} KiB; paste one `docker run …` command, not a log"
        )
    run = parse_docker_run(text, source=source)
    notes: list[str] = []
    kind = _detected_kind(run)
    docker, server, grouping = scrub_run(run, kind, source, notes)
    recipe = Recipe(
        name=_recipe_name(name, grouping, docker, run.image),
        description="Imported from a posted `docker run` command.",
        image=ImageRef(run.image),
        docker=docker,
        server=server,
        model=_model_from(docker, server, model_repo, revision),
        source=Source(),
        groups=grouping,
    )
    lines = tuple(
        LineAccount(source, number, line, "taken", "image, docker, server")
        if line.strip()
        else LineAccount(source, number, line, "set aside", why="a blank line")
        for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1)
    )
    return finish(recipe, notes, source, lines=lines)


def _detected_kind(run: ParsedRun) -> str:
    """The server kind of a single command; SGLang when nothing tells (the command is kept as written)."""
    try:
        return detect_kind(run.image, python_program(list(run.command))).name
    except InputError as err:
        if "is not supported" in err.message:
            raise
        return DEFAULT_KIND


def scrub_run(
    run: ParsedRun, kind: str, source: str, notes: list[str]
) -> tuple[DockerSpec, ServerCommand, Grouping | None]:
    """Docker options and server command of `run` with secrets made references and `X` placeholders made groups."""
    entries = [_scrub_entry(entry, notes) for entry in run.entries]
    entries, grouping = _apply_placeholders(entries, source)
    docker = DockerSpec(run.invocation, tuple(entries))
    server = ServerCommand.from_words(_scrub_server_words(list(run.command), notes, KINDS[kind]), kind)
    return docker, server, grouping


def _replace_value(entry: OptionEntry, use_index: int, new_value: str) -> OptionEntry:
    """Rewrite one option's value inside its entry; the value always ends the entry's last word."""
    old = entry.uses[use_index].value or ""
    last = entry.words[-1]
    if not last.endswith(old):  # pragma: no cover - guarded by the parser's construction of entries
        raise AssertionError(f"value {old!r} is not at the end of {last!r}")
    words = (*entry.words[:-1], last[: len(last) - len(old)] + new_value)
    uses = list(entry.uses)
    uses[use_index] = OptionUse(uses[use_index].option, new_value)
    return OptionEntry(words, tuple(uses))


def _scrub_entry(entry: OptionEntry, notes: list[str]) -> OptionEntry:
    for index, use in enumerate(entry.uses):
        value = use.value or ""
        if canonical(use.option.name) == "--env":
            key, has_equals, val = value.partition("=")
            is_secret = has_equals and (is_secret_name(key) or has_secret(val))
            if is_secret and not _ENV_REFERENCE.match(val):
                # The whole value comes from the environment: part of it is a credential (a token, a
                # password inside a proxy URL), and Docker's `-e NAME` is the form that keeps it out.
                notes.append(f"-e {key}: secret value removed; it is taken from the environment at run time")
                entry = _replace_value(entry, index, key)
                continue
        spans = find_secrets(value)
        if spans:
            entry = _replace_value(entry, index, _reference_secrets(value, spans, notes))
    return entry


def _reference_secrets(text: str, spans: list[SecretSpan], notes: list[str]) -> str:
    """`text` with each credential replaced by `{{env:NAME}}`, one note per replacement."""

    def to_ref(span: SecretSpan) -> str:
        notes.append(
            f"a credential ({span.kind}) was replaced by {{{{env:{span.env_name}}}}}; export {span.env_name} to run"
        )
        return f"{{{{env:{span.env_name}}}}}"

    return replace_secrets(text, spans, to_ref)


def _scrub_server_words(words: list[str], notes: list[str], kind: ServerKind) -> list[str]:
    out: list[str] = []
    pending_flag: str | None = None
    for word in words:
        if pending_flag is not None and not is_flag(word):
            out.append(word if _ENV_REFERENCE.match(word) else _secret_flag_ref(pending_flag, notes, kind))
            pending_flag = None
            continue
        pending_flag = None
        flag, has_equals, value = word.partition("=")
        if is_flag(word) and is_secret_flag(flag):
            if has_equals:
                keep = _ENV_REFERENCE.match(value)
                out.append(word if keep else f"{flag}={_secret_flag_ref(flag, notes, kind)}")
            else:
                out.append(word)
                pending_flag = flag
            continue
        spans = find_secrets(word)
        out.append(_reference_secrets(word, spans, notes) if spans else word)
    return out


def _secret_flag_ref(flag: str, notes: list[str], kind: ServerKind) -> str:
    # Named for the engine: vLLM reads its key from VLLM_API_KEY; SGLang reads none, SGLANG_… by convention.
    env_name = flag_env_name(flag, kind.name.upper())
    # the flag ends the clause: a word after it would read as its value to the note's own masking
    notes.append(f"a secret value removed from {flag}; it is taken from ${env_name} at run time")
    return f"{{{{env:{env_name}}}}}"


def _apply_placeholders(entries: list[OptionEntry], source: str) -> tuple[list[OptionEntry], Grouping | None]:
    """Replace `X` placeholders in --name, --gpus and -p by `{{name}}`, `{{gpus}}`, `{{port}}`."""
    found_name = found_gpus = found_port = None
    for entry_index, entry in enumerate(entries):
        for use_index, use in enumerate(entry.uses):
            option = canonical(use.option.name)
            value = use.value or ""
            if option == "--name" and "X" in value:
                found_name = (entry_index, use_index, value)
            elif option == "--gpus" and "X" in value:
                found_gpus = (entry_index, use_index, value)
            elif option == "--publish" and "X" in parse_publish(value).host_port:
                if found_port is not None:
                    raise InputError(
                        f"{source}: -p {value}: only one published port may carry the X placeholder; "
                        "publish the others without X"
                    )
                found_port = (entry_index, use_index, value)
    if not (found_name or found_gpus or found_port):
        return entries, None
    if found_gpus is None:
        raise InputError(
            f"{source}: placeholder counts disagree: X in --name/-p but none in --gpus; "
            "write --gpus '\"device=X,X,X,X\"' with one X per GPU of a group"
        )
    group_size = _gpu_placeholder_count(found_gpus[2], source)
    entry_index, use_index, value = found_gpus
    new_gpus = re.sub(r"X(,X)*", "{{gpus}}", value, count=1)
    entries[entry_index] = _replace_value(entries[entry_index], use_index, new_gpus)
    name_template = None
    if found_name is None:
        _refuse_fixed(entries, "--name", source, "container names would collide; write the name with an X")
    else:
        entry_index, use_index, value = found_name
        if len(_NAME_X.findall(value)) != 1:
            raise InputError(
                f"{source}: --name {value}: placeholder counts disagree: the name needs exactly one "
                "standalone X (e.g. model-X)"
            )
        name_template = _NAME_X.sub("{{group}}", value)
        entries[entry_index] = _replace_value(entries[entry_index], use_index, "{{name}}")
    port_base = None
    if found_port is None:
        _refuse_fixed(entries, "--publish", source, "every group would publish the same host port; write 500X")
    else:
        entry_index, use_index, value = found_port
        mapping = parse_publish(value)
        match = _PORT_X.match(mapping.host_port)
        if not match:
            raise InputError(f"{source}: -p {value}: the X placeholder must be the last digit of the host port (500X)")
        port_base = int((match.group(1) or "") + "0")
        new_value = value.replace(mapping.host_port + ":", "{{port}}:", 1)
        entries[entry_index] = _replace_value(entries[entry_index], use_index, new_value)
    return entries, Grouping(size=group_size, port_base=port_base, name_template=name_template)


def _gpu_placeholder_count(value: str, source: str) -> int:
    spec = value.strip('"').strip("'")
    devices = spec.split("device=", 1)[1] if "device=" in spec else spec
    items = [item.strip() for item in devices.split(",")]
    if any(item != "X" for item in items):
        raise InputError(
            f"{source}: --gpus {value}: placeholder counts disagree: mix of X and GPU ids; "
            "use only X (one per GPU of a group) or only ids"
        )
    return len(items)


def _refuse_fixed(entries: list[OptionEntry], option: str, source: str, why: str) -> None:
    for entry in entries:
        for use in entry.uses:
            if canonical(use.option.name) != option:
                continue
            if option == "--publish" and not parse_publish(use.value or "").host_port:
                continue
            raise InputError(f"{source}: {option} {use.value}: placeholder counts disagree: {why}")


def _model_from(docker: DockerSpec, server: ServerCommand, model_repo: str | None, revision: str) -> ModelSpec:
    model_path = server.flag("--model-path")
    if model_path and not model_path.startswith("/"):
        return ModelSpec(repo_id=model_repo or model_path, revision=revision)
    local_dir = mount_point = None
    if model_path:
        for mount in docker.mounts():
            target = mount.target.rstrip("/")
            if target and (model_path == target or model_path.startswith(target + "/")):
                mount_point = model_path
                local_dir = mount.source + model_path[len(target) :] if mount.source.startswith("/") else None
    return ModelSpec(repo_id=model_repo, revision=revision, local_dir=local_dir, mount_point=mount_point)


def _recipe_name(name: str | None, grouping: Grouping | None, docker: DockerSpec, image: str) -> str:
    if name:
        return name
    candidate = None
    if grouping and grouping.name_template:
        candidate = grouping.name_template.replace("{{group}}", "")
    elif docker.last("--name"):
        candidate = docker.last("--name")
    if not candidate:
        candidate = image.split("@")[0].rsplit("/", 1)[-1].replace(":", "-")
    slug = re.sub(r"[^a-z0-9._-]+", "-", candidate.lower()).strip("-._")
    return slug or "imported"


# --- the format: a post's `docker run` (and the `docker build`/`docker tag` that make its image) ---

_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh"})
# A container kept alive doing nothing, for `docker exec` or the bare commands a post runs in it next: a shell too.
_IDLE = frozenset({("sleep", "infinity"), ("sleep", "inf"), ("tail", "-f", "/dev/null")})


class DockerRun:
    """`docker run …`: a server kept as written, a benchmark client, a shell later commands run in, or a job."""

    name = "docker run"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "docker-run" or (simple.kind == "docker-exec" and _exec_launch(simple) is not None)

    def take(self, simple: Simple, reading: Reading) -> None:
        if simple.kind == "docker-exec":
            _take_exec(simple, reading)
            return
        companion = next((w for w in simple.texts[2:] if image_matches(w, _COMPANIONS)), None)
        if companion is not None:  # read before its values: a UI's placeholders are not the server's to fill
            reading.said(simple, "skipped", f"`docker run {companion}` (a client of the server, not a server)")
            return
        raw = " ".join(simple.command.post.clean[simple.command.first - 1 : simple.command.last])
        engine = _engine_of(simple.texts, raw)
        if engine is not None and not engine.hardware:
            reading.servers.append(Candidate(simple, "engine", engine.name))
            return
        words = reading.resolved(simple)
        substituted = substituted_word(simple, words)
        if substituted is not None:
            reading.servers.append(Candidate(simple, "broken", error=substituted))
            return
        try:
            run = parse_run_words(words, source=simple.command.post.name)
        except InputError as err:
            reading.servers.append(Candidate(simple, "broken", error=err))
            return
        role, words, notes = _container_role(run, reading.kind, simple.where())
        if engine is not None and role not in ("shell", "job", "bench"):
            # another accelerator's server; its shell container is read (`foreign_hardware` names it if nothing runs)
            reading.servers.append(Candidate(simple, "engine", engine.name))
            return
        if role == "check":
            shown = " ".join(words[:2])
            reading.said(simple, "skipped", f"`docker run {run.image} {shown} …` (a one-off command in the image)")
        elif role == "bench":
            client = client_of(python_program(words))
            assert client is not None
            reading.benches.append((simple, client, words))
        elif role == "shell":
            reading.containers.append(Container(simple, run))
            idle = tuple(words) in _IDLE
            shown = f"{run.image} {' '.join(words if idle else run.command)}".strip()
            what = "a container that idles" if idle else "an interactive container"
            reading.said(simple, "read", f"`docker run {shown}` ({what}; bare commands after it run inside it)")
        elif role == "job" and (rendered := rendered_head(simple, run, words)) is not None:
            node, launch = rendered
            reading.cluster.append(node)
            reading.said(
                simple, "read", f"`docker run {run.image}` (hgxkit's Ray head, then the server)", "groups, docker"
            )
            kind = _kind_of(run, launch, reading.kind)
            server = replace(run, entries=(), command=tuple(launch))  # its options are the head's container's
            reading.servers.append(Candidate(simple, "server", kind, run=server, words=launch, on_ray=True))
        elif role == "job" and (node := ray_container(simple, run, words)) is not None:
            reading.cluster.append(node)  # a Ray cluster's container (see vllm_multinode)
            reading.said(simple, "read", f"`docker run {run.image}` (a Ray {node.role} container)", "groups, docker")
        elif role == "job":
            shown = shell_value(" ".join(words))[:40]
            if (reading.kind or _image_kind(run.image)) is not None:  # the launch may be inside what it runs
                reading.scripted.append((simple.where(), run.image, shell_value(" ".join(words))))
            reading.said(simple, "skipped", f"`docker run {run.image}` (runs `{shown}`, not a server)")
        elif role == "no-program":
            error = InputError(
                f"{simple.where()}: {run.image} has no server entrypoint: the words after it ({' '.join(words[:4])} …) "
                f"run as its command; add the server program, e.g. `python3 -m sglang.launch_server --model-path …`"
            )
            reading.servers.append(Candidate(simple, "broken", error=error))
        else:
            if _entrypoint(run) is not None:
                try:
                    run, words, notes = _launch_as_program(run, reading.kind, simple.where())
                except InputError as err:
                    reading.servers.append(Candidate(simple, "broken", error=err))
                    return
            else:
                words, notes = _past_image_entrypoint(run, words, simple.where())
            kind = _kind_of(run, words, reading.kind)
            reading.servers.append(Candidate(simple, role, kind, run=run, words=words, notes=notes))


# Images that posts run beside a server as its clients (chat UIs, an OpenAI-compatible proxy): never a server.
_COMPANIONS = (
    "ghcr.io/open-webui/open-webui",
    "open-webui/open-webui",
    "ghcr.io/berriai/litellm",
    "berriai/litellm",
)


def _exec_launch(simple: Simple) -> list[str] | None:
    """The server launch `docker exec [OPTIONS] CONTAINER LAUNCH…` runs, if it runs one."""
    inner = exec_command(simple.texts[2:] if simple.texts[1] == "exec" else simple.texts[3:])
    return inner if inner and any(k.launches(python_program(inner)) for k in KINDS.values()) else None


def _take_exec(simple: Simple, reading: Reading) -> None:
    """`docker exec … CONTAINER LAUNCH` into a container the post started with no program (`docker run -itd
    IMAGE`): one container whose program is the launch, the run's options and mounts kept; its `-e` options
    join the run's. A container the post does not start is a refusal: its options are unknown."""
    args = simple.texts[2:] if simple.texts[1] == "exec" else simple.texts[3:]
    launch = _exec_launch(simple)
    assert launch is not None
    target = args[len(args) - len(launch) - 1]
    named = [c for c in reading.containers if _name_of(c.run) == target] if target else []
    container = named[-1] if named else None
    if container is None:
        error = InputError(
            f"{simple.where()}: `docker exec {target}` runs the server in a container the post does not start (no "
            f"`docker run --name {target}` before it); give the post with its `docker run`"
        )
        reading.servers.append(Candidate(simple, "broken", error=error))
        return
    env = [args[i + 1] for i, a in enumerate(args[: -len(launch) - 1]) if a in ("-e", "--env")]
    env += [a.split("=", 1)[1] for a in args[: -len(launch) - 1] if a.startswith(("-e=", "--env="))]
    run = container.run
    if env:
        extra = parse_option_words([w for value in env for w in ("-e", value)], source=simple.where())
        run = replace(run, entries=(*run.entries, *extra))
    note = (
        f"{simple.where()}: the server runs by `docker exec` in the container started at "
        f"{container.simple.where()}: one container whose program is the launch, with that run's options"
        + (f" and the exec's -e {', '.join(env)}" if env else "")
    )
    kind = _kind_of(run, launch, reading.kind)
    reading.containers.remove(container)  # it is the server's container now, not a shell later commands run in
    reading.said(
        container.simple, "took", "`docker run` (the container the `docker exec` server runs in)", "image, docker"
    )
    reading.servers.append(Candidate(simple, "server", kind, run=run, context=container, words=launch, notes=[note]))


class DockerImages:
    """`docker build` (an image a node cannot pull), `docker tag` (another name for a pullable image) and
    `docker pull` (the image the post chose, which a bare launch runs in)."""

    name = "docker build/tag"

    def claims(self, simple: Simple) -> bool:
        texts = simple.texts
        pull = simple.kind == "docker" and texts[1:2] == ["pull"] and len(texts) > 2
        return pull or simple.kind == "docker-build" or (simple.kind == "docker-tag" and len(texts) >= 4)

    def take(self, simple: Simple, reading: Reading) -> None:
        if simple.kind == "docker":  # `docker pull [OPTIONS] IMAGE`: the image a bare launch may run in
            image = simple.texts[-1]
            lines = simple.command.post.lines[: simple.command.first - 1]
            above = lines[-1].strip() if lines and lines[-1].strip().startswith("#") else ""
            reading.pulled.append((image, simple.where(), above))
            reading.said(simple, "read", f"`docker pull {image}` (the post's image for a bare launch)")
        elif simple.kind == "docker-build":
            scope = Scope.before(reading.simples, simple)  # `-t $REPO:$TAG`: the tag the post's variables give
            texts = [scope.resolve(text, where=simple.where())[0] for text in simple.texts]
            for flag, tag in itertools.pairwise(texts):
                if flag in ("-t", "--tag"):
                    reading.built[tag] = simple.where()
            for word in texts:
                if word.startswith(("-t=", "--tag=")):
                    reading.built[word.split("=", 1)[1]] = simple.where()
            reading.said(simple, "skipped", "`docker build` (an image built from a local checkout)")
        else:
            reading.aliases[simple.texts[-1]] = (simple.texts[-2], simple.where())
            reading.said(simple, "skipped", f"`docker tag` (noted: {simple.texts[-1]} is {simple.texts[-2]})")


DOCKER_RUN = DockerRun()
DOCKER_IMAGES = DockerImages()


def container_program(run: ParsedRun) -> list[str]:
    """What the container runs: its `--entrypoint` (when given) with the command after the image."""
    entrypoint = _entrypoint(run)
    return [shell_value(entrypoint), *run.command] if entrypoint else list(run.command)


def _entrypoint(run: ParsedRun) -> str | None:
    """The value of the run's `--entrypoint`, if it has one."""
    return next((u.value for e in run.entries for u in e.uses if canonical(u.option.name) == "--entrypoint"), None)


def _launch_as_program(run: ParsedRun, kind: str | None, where: str) -> tuple[ParsedRun, list[str], list[str]]:
    """A server `docker run --entrypoint EP IMAGE ARGS…` as what Docker runs: EP with ARGS. When that is one
    plain server launch (`--entrypoint /bin/sh IMAGE -c "vllm serve M"`, `--entrypoint vllm IMAGE serve M`), the
    launch is the container's program and `--entrypoint` goes: the image's own entrypoint when the launch starts
    with it (vLLM's `vllm serve`: the container gets its arguments), else an image without one (SGLang's) runs
    the launch as its command. A module launch the image's entrypoint is not (`--entrypoint python3 IMAGE -m
    vllm.entrypoints.openai.api_server …`, older vLLM images' own entrypoint) keeps `--entrypoint` with the
    interpreter: the recipe runs what the post runs. Anything else (a script around the server, a launch of
    another program) is refused naming `--entrypoint`: kept, the recipe would run something other than it shows."""
    entrypoint = shell_value(_entrypoint(run) or "")
    full = [entrypoint, *run.command] if entrypoint else list(run.command)  # `--entrypoint ""`: none, the command runs
    written = entrypoint or '""'
    notes: list[str] = []
    if posixpath.basename(entrypoint) in {posixpath.basename(s) for s in _SHELLS}:
        inner = _inner_command(full[2]) if len(full) == 3 and full[1] == "-c" else None
        if inner is None:
            raise InputError(
                f"{where}: `--entrypoint {written}` runs a script around the server ({' '.join(full)[:60]!r}), not "
                "one server launch: give the launch as the container's command, without --entrypoint"
            )
        full = inner
    launched = next((k for k in KINDS.values() if k.launches(python_program(full))), None)
    image_kind = kind or _image_kind(run.image)
    prefix = list(KINDS[image_kind].image_entrypoint) if image_kind in KINDS else []
    shown = " ".join(full)[:60]
    if launched is None:
        raise InputError(
            f"{where}: `--entrypoint {written}` makes the container run `{shown}`, not a server launch hgxkit "
            "reads: give the launch as the container's command, without --entrypoint"
        )
    if prefix and full[: len(prefix)] != prefix and _module_launch(full):
        return _kept_interpreter(run, full, written, prefix, where)
    if prefix and full[: len(prefix)] != prefix:
        raise InputError(
            f"{where}: `--entrypoint {written}` replaces the image's entrypoint `{' '.join(prefix)}` "
            f"to run `{shown}`; a recipe keeps the image's: give the launch as `{' '.join(prefix)}`'s "
            "arguments, without --entrypoint"
        )
    entries = tuple(e for e in run.entries if not any(canonical(u.option.name) == "--entrypoint" for u in e.uses))
    notes.append(
        f"{where}: `--entrypoint {written}` dropped: the container runs the launch `{shown}` as its "
        "program, as Docker would"
    )
    if prefix:
        notes.append(f"{where}: `{' '.join(prefix)}` is the image's entrypoint; the container gets its arguments")
        full = full[len(prefix) :]
    return replace(run, entries=entries), full, notes


_INTERPRETER = re.compile(r"python(?:3(?:\.\d+)?)?")


def _module_launch(full: list[str]) -> bool:
    """True for `python3 -m MODULE …` (any interpreter spelling, no interpreter options) of a kind's launch."""
    return len(full) > 2 and _INTERPRETER.fullmatch(posixpath.basename(full[0])) is not None and full[1] == "-m"


def _kept_interpreter(
    run: ParsedRun, full: list[str], written: str, prefix: list[str], where: str
) -> tuple[ParsedRun, list[str], list[str]]:
    """The container of `--entrypoint python3 IMAGE -m MODULE ARGS…` as posted (or of a shell entrypoint whose `-c`
    runs that one launch, its interpreter made the entrypoint): the module is not the image's entrypoint, and
    vLLM's `vllm serve` is a launcher of its own (API server count, headless ranks, a positional model)."""
    notes = []
    interpreter = full[0]
    if shell_value(written) != interpreter:
        entries = tuple(_with_entrypoint(e, interpreter) for e in run.entries)
        run = replace(run, entries=entries)
        notes.append(
            f"{where}: `--entrypoint {written}` became `--entrypoint {interpreter}` with `{' '.join(full[1:3])} …` as "
            "its arguments: the container runs the same one command"
        )
    notes.append(
        f"{where}: `--entrypoint {interpreter}` kept: the container runs `{' '.join(full[:3])} …` as posted, whichever "
        f"entrypoint the image has (`{' '.join(prefix)}` in today's images, another launcher)"
    )
    return run, full[1:], notes


def _with_entrypoint(entry: OptionEntry, program: str) -> OptionEntry:
    for index, use in enumerate(entry.uses):
        if canonical(use.option.name) == "--entrypoint":
            return entry.with_value(index, program)
    return entry


def _past_image_entrypoint(run: ParsedRun, words: list[str], where: str) -> tuple[list[str], list[str]]:
    """A launch program written after an image whose entrypoint already is the launch (`vllm/vllm-openai …
    vllm serve M`): Docker gives it to the entrypoint as arguments, which the engine refuses (`vllm serve vllm
    serve M`: unrecognized arguments); what the poster means is the entrypoint with the program's arguments."""
    program = python_program(words)
    for kind in KINDS.values():
        if kind.image_entrypoint and image_matches(run.image, kind.images) and kind.launches(program):
            launch = program_of(program, kind.programs + kind.deprecated_programs)
            assert launch is not None
            runs = " ".join(kind.image_entrypoint)
            note = (
                f"{where}: `{' '.join(launch)}` after {run.image} dropped: the image's entrypoint is already `{runs}`, "
                f"which would read those words as its arguments and stop (unrecognized arguments)"
            )
            return list(program[len(launch) :]), [note]
    return words, []


def _container_role(run: ParsedRun, kind: str | None, where: str) -> tuple[str, list[str], list[str]]:
    """What a `docker run` runs: (server | bench | check | shell | job | unknown, the container command, notes)."""
    words = list(run.command)
    entrypoint = _entrypoint(run)
    program = [shell_value(entrypoint), *words] if entrypoint else words
    if program and (posixpath.basename(program[0]), *program[1:]) in _IDLE:
        return "shell", program, []
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
    if not words and _detached_terminal(run) and (kind or _image_kind(run.image)) not in _ENTRYPOINT_KINDS:
        return "shell", words, []  # `docker run -itd IMAGE`: kept for `docker exec`/a terminal; serves nothing itself
    program = python_program(words)
    if client_of(program):
        return "bench", words, []
    if any(k.launches(program) for k in KINDS.values()):
        return "server", words, []
    if program[:2] == ["python3", "-c"] or program[:1] == ["nvidia-smi"]:
        return "check", words, []  # a one-off look inside the image (`python3 -c "import torch…"`)
    image_kind = kind or _image_kind(run.image)
    if image_kind is not None and (KINDS[image_kind].image_entrypoint or not words):
        return "server", words, []
    if image_kind is not None and words and words[0].startswith("-"):
        return "no-program", words, []
    return "unknown", words, []


def _name_of(run: ParsedRun) -> str | None:
    return next((u.value for e in run.entries for u in e.uses if canonical(u.option.name) == "--name"), None)


_ENTRYPOINT_KINDS = frozenset(name for name, k in KINDS.items() if k.image_entrypoint)


def _detached_terminal(run: ParsedRun) -> bool:
    """True for `docker run -itd`/`-dt` (a detached container kept alive by its terminal) and `-it` (a terminal
    for the person): a container for commands run in it later, not a server."""
    used = {canonical(u.option.name) for e in run.entries for u in e.uses}
    return "--tty" in used and ("--detach" in used or "--interactive" in used)


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


def foreign_hardware(container: Container) -> UnsupportedKind | None:
    """The accelerator other than NVIDIA's (AMD ROCm, Huawei Ascend) a container is set up for, if any."""
    simple = container.simple
    raw = " ".join(simple.command.post.clean[simple.command.first - 1 : simple.command.last])
    engine = _engine_of(simple.texts, raw)
    return engine if engine is not None and engine.hardware else None


def _engine_of(words: list[str], raw: str) -> UnsupportedKind | None:
    """The unsupported engine a `docker run` starts, by its image, its program or its tell-tale names."""
    for other in UNSUPPORTED:
        if any(image_matches(word, other.images) for word in words):
            return other
    program = unsupported_program(words)
    if program is not None:
        return program
    return next((other for other in UNSUPPORTED if other.hinted_by(raw)), None)
