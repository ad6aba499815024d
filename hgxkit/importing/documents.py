"""YAML documents in a post (a whole compose or manifest file, a ```yaml fence, a script's here-document that writes
one): found, loaded with line numbers, and handed to the document formats (`compose`, `kubernetes`) that turn them
into `docker run` commands.

A document format has a `name`, `claims_document(data)` (is this YAML mine?) and `simples(document)` (the
simple commands it stands for: one `docker run` per serving container, each word with the YAML line it came
from, and one set-aside entry per part that runs nothing). The lines of a claimed document are blanked from the
shell scan, so a `vllm serve` inside a manifest's `args` is read once, as the manifest says, not again as a bare
launch. A fence whose YAML does not parse, or that no format claims, stays with the shell scan; a whole `.yaml`
file that does not parse is refused naming the line.

Example:
    >>> from hgxkit.importing.post import read_post
    >>> post = read_post("p.md", "Run:\\n```yaml\\nservices:\\n  s:\\n    image: x\\n```\\n")
    >>> [(r.first, r.last, r.text) for r in yaml_regions(post)]
    [(3, 5, 'services:\\n  s:\\n    image: x')]
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import yaml

from hgxkit.errors import InputError
from hgxkit.importing.commands import Simple
from hgxkit.importing.docker_run import DOCKER_RUN
from hgxkit.importing.post import FENCE_RE, Command, PostFile
from hgxkit.importing.provenance import Exported
from hgxkit.importing.reading import Candidate, Reading
from hgxkit.importing.vllm_multinode import runs_rendered_head
from hgxkit.kinds import KINDS, UNSUPPORTED, detect_kind, python_program
from hgxkit.recipe.shellwords import Word, split_words

LINE = "__line__"  # the key under which a loaded mapping keeps its 1-based line (within the region)
LINES = "__lines__"  # key -> 1-based line of each key of a mapping
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_SNIFF = re.compile(r"^(?:services|apiVersion|kind|version)\s*:", re.MULTILINE)
_WHOLE_FILE = (".yaml", ".yml")
# A post with no fence whose first line (past blanks and comments) is a top-level `key:`: a YAML file pasted as it
# is (a SkyPilot task's `name:`), read whole when it loads and a format claims it, else as text.
_TOP_KEY = re.compile(r"\A(?:[ \t]*(?:#[^\n]*)?\n)*[A-Za-z_][\w-]*[ \t]*:(?:[ \t]|$)", re.MULTILINE)
# A script line of shell logic (a loop, a test, a branch): what a container's script runs depends on it.
_SHELL_LOGIC = re.compile(r"^\s*(?:while|until|if|for|case)\s")
_CONFLICT = re.compile(r"^(?:<{7}|={7}|>{7})(?:\s|$)")
# A shell line that opens a here-document (`cat <<EOF > f.yaml`, `kubectl apply -f - <<'EOF'`), not a comment or a
# merge-conflict marker (`<<<<<<< HEAD`): group 2 is its delimiter.
_HEREDOC_LINE = re.compile(r"^\s*[^\s<#][^<]*<<-?\s*(['\"]?)(\w+)\1")
# A line that is only a template's placeholder (`{region_block}`, `{{ .Values.x }}`, `{% if x %}`): a tool fills it in.
_TEMPLATE_LINE = re.compile(r"^\s*(\{[A-Za-z_]\w*\}|\{\{.*\}\}|\{%.*%\})\s*$")

# What a value of the wrong shape raises while a format reads it (a string where the spec has a mapping, …).
SHAPE_ERRORS = (KeyError, TypeError, AttributeError, ValueError, IndexError)

WordAt = tuple[str, int]  # a word's text (shellwords encoding: a literal `$` is `$$`) and its file line


@dataclass(frozen=True)
class Region:
    """A YAML text of a post: file lines first..last (the region's own lines, dedented)."""

    first: int
    last: int
    text: str
    whole: bool  # the whole file (a parse error refuses) rather than a fence (a parse error sets it aside)
    span: tuple[int, int]  # the lines to blank from the shell scan (a fence with its heredoc lines)


@dataclass(frozen=True)
class Document:
    """One YAML document of a region, loaded: mappings carry `LINE`/`LINES` (file lines)."""

    post: PostFile
    region: Region
    data: Any
    first: int
    last: int
    environment: dict[str, str]  # NAME=value lines of the post outside its YAML (a compose `.env`)
    image: str | None = None  # `--image`: the container a task without one of its own runs in

    def where(self, line: int | None = None) -> str:
        return f"{self.post.name}:{line or self.first}"


class DocumentFormat(Protocol):
    """A YAML source format: compose files, Kubernetes manifests."""

    name: str

    def claims_document(self, data: Any) -> bool:
        """True when the loaded YAML `data` is a document of this format."""
        ...

    def simples(self, documents: Sequence[Document]) -> list[Simple]:
        """The simple commands the claimed documents of one region stand for."""
        ...


def yaml_regions(post: PostFile) -> list[Region]:
    """The YAML texts of a post: the here-documents of YAML a script writes (`cat <<EOF > app.yaml`), else the
    whole file (a `.yaml` name, or a post that is nothing but YAML), else each fenced block that reads as YAML (the
    here-documents of a shell fence; a `kubectl apply -f - <<EOF` opening a YAML fence is left out)."""
    lines = post.lines
    fenced = any(post.fences)
    whole = "\n".join(lines)
    written = [] if fenced or post.label.endswith(_WHOLE_FILE) else _heredoc_regions(lines, range(len(lines)))
    if written:  # a script that writes its manifest: the here-documents are the YAML, not the whole script
        return written
    unfenced = [] if fenced else _unfenced_yaml(post)
    sniffed = _SNIFF.search(whole) and not unfenced  # prose around an unfenced file: the file alone
    if post.label.endswith(_WHOLE_FILE) or (not fenced and (sniffed or _TOP_KEY.match(whole))):
        last = len(lines)
        while last > 1 and not lines[last - 1].strip():
            last -= 1
        return [Region(1, last, "\n".join(lines[:last]), True, (1, last))]
    regions = []
    index = 0
    while index < len(lines):
        fence = post.fences[index]
        if not fence:
            index += 1
            continue
        start = index
        while index < len(lines) and post.fences[index] == fence:
            index += 1
        body = list(range(start + 1, index))  # 0-based lines inside the fence, after its opening line
        opening = FENCE_RE.match(lines[start].lstrip("> "))
        language = opening.group(3).strip().lower() if opening else ""
        written = _heredoc_regions(lines, body)  # a shell fence that writes its YAML: the here-documents
        region = None if written else _fence_region(lines, body, language, (start + 1, min(index + 1, len(lines))))
        regions += written or ([region] if region is not None else [])
    return sorted(regions + (unfenced or _unfenced_yaml(post)), key=lambda r: r.first)


# A key at the margin over indented lines, one of them an `image:` (compose services pasted without `services:`).
_SERVICES_FRAGMENT = re.compile(
    r"^[A-Za-z_][\w.-]*:[ \t]*(?:#.*)?\n(?:[ \t]*(?:#.*)?\n|[ \t]+\S.*\n)*?[ \t]+image:[ \t]*\S", re.M
)
_COMPOSE_TOP = re.compile(r"^services[ \t]*:[ \t]*(?:#.*)?$")
_SERVICE_IMAGE = re.compile(r"^[ \t]+(?:image|build)[ \t]*:", re.MULTILINE)
_DSTACK_TOP = re.compile(r"^type[ \t]*:[ \t]*(?:service|task)[ \t]*(?:#.*)?$")
_DSTACK_COMMANDS = re.compile(r"^commands[ \t]*:", re.MULTILINE)
_K8S_TOP = re.compile(r"^apiVersion[ \t]*:[ \t]*\S+[ \t]*(?:#.*)?$")
_K8S_WORKLOAD = re.compile(r"^kind[ \t]*:[ \t]*\S", re.MULTILINE)
_K8S_CONTAINERS = re.compile(r"^[ \t]+containers[ \t]*:", re.MULTILINE)
_KUSTOMIZATION = re.compile(r"^kind[ \t]*:[ \t]*Kustomization[ \t]*$", re.MULTILINE)
_YAML_KEY_LINE = re.compile(r"^(?:[A-Za-z_][\w-]*[ \t]*:(?:[ \t]|$)|[ \t#]|-[ \t]|$)")


def _unfenced_yaml(post: PostFile) -> list[Region]:
    """Compose files, dstack configurations and Kubernetes manifests pasted between a post's prose with no fence (a
    rendered page's code blocks lose theirs): from a `services:` line at the margin (its `version:` line above it,
    if any), a dstack `type: service|task` line or an `apiVersion:` line, to the last line before prose (a line
    that is neither indented, a comment, blank nor a top-level key), when a service in it names an `image` or
    `build`, the dstack file has `commands:`, or the manifest has a `kind:` with `containers:`; each read as a file
    is (a parse error refuses, naming its line).

    Example:
        >>> from hgxkit.importing.post import read_post
        >>> post = read_post("p.md", "Mine:\\n```\\nlog\\n```\\nservices:\\n  s:\\n    image: x\\n\\nIt fails.\\n")
        >>> [(r.first, r.last, r.text) for r in _unfenced_yaml(post)]
        [(5, 7, 'services:\\n  s:\\n    image: x')]
    """
    lines, regions = post.lines, []
    for index, line in enumerate(lines):
        compose, dstack, manifest = _COMPOSE_TOP.match(line), _DSTACK_TOP.match(line), _K8S_TOP.match(line)
        if post.fences[index] or not (compose or dstack or manifest):
            continue
        start = index - 1 if index and not post.fences[index - 1] and lines[index - 1].startswith("version") else index
        end = index + 1
        while end < len(lines) and not post.fences[end] and _YAML_KEY_LINE.match(lines[end]):
            end += 1
        while end > index + 1 and not lines[end - 1].strip():
            end -= 1
        text = "\n".join(lines[start:end])
        # a service that runs an image, or a dstack run: not a `services:` heading over a list, nor prose's `type:`
        if manifest:  # a workload, or a kustomization that changes one (named by the manifest reader)
            found = (_K8S_WORKLOAD.search(text) and _K8S_CONTAINERS.search(text)) or _KUSTOMIZATION.search(text)
        else:
            found = (_SERVICE_IMAGE if compose else _DSTACK_COMMANDS).search(text)
        if found:
            regions.append(Region(start + 1, end, text, True, (start + 1, end)))
    return regions


def _heredoc_regions(lines: Sequence[str], indices: Sequence[int]) -> list[Region]:
    """The YAML here-documents among `lines` at 0-based `indices`: a script that writes its manifest or compose
    file (`cat <<EOF > app.yaml` … `EOF`, then `kubectl apply -f app.yaml`) holds the YAML as the body; the
    opening and closing lines are blanked with it, the rest of the script stays with the shell scan.

    >>> script = ["set -e", "cat <<'EOF' > s.yaml", "  services:", "    s:", "      image: x", "EOF", "apply"]
    >>> [(r.first, r.last, r.text, r.span) for r in _heredoc_regions(script, range(len(script)))]
    [(3, 5, 'services:\\n  s:\\n    image: x', (2, 6))]
    """
    regions = []
    at = 0
    while at < len(indices):
        opening = _HEREDOC_LINE.match(lines[indices[at]])
        closing = None
        if opening:
            delimiter = opening.group(2)
            closing = next((j for j in range(at + 1, len(indices)) if lines[indices[j]].strip() == delimiter), None)
        if closing is None:
            at += 1
            continue
        body = list(indices[at + 1 : closing])
        text = textwrap.dedent("\n".join(lines[n] for n in body))
        if body and _SNIFF.search(text):
            regions.append(Region(body[0] + 1, body[-1] + 1, text, False, (indices[at] + 1, indices[closing] + 1)))
        at = closing + 1
    return regions


def _fence_region(lines: Sequence[str], body: list[int], language: str, span: tuple[int, int]) -> Region | None:
    if not body:
        return None
    first, last = body[0], body[-1]
    if _APPLY_LINE.match(lines[first]) and first < last:  # `kubectl apply -f app.yaml` typed above the file
        first += 1
    heredoc = _HEREDOC.search(lines[first])
    if heredoc and not lines[first].lstrip().startswith(("apiVersion", "services", "kind")):
        end = next((n for n in body if lines[n].strip() == heredoc.group(1)), last + 1)
        first, last = first + 1, end - 1
    if last < first:
        return None
    text = _dedent(lines[first : last + 1])
    if not (language in ("yaml", "yml") or _SNIFF.search(text) or _SERVICES_FRAGMENT.search(text)):
        return None
    return Region(first + 1, last + 1, text, False, span)


_APPLY_LINE = re.compile(r"^\s*(?:\$\s+)?(?:kubectl|oc)\s+(?:apply|create)\s+(?:\S+\s+)*-f\s+\S+\.ya?ml\s*$")


def _dedent(lines: Sequence[str]) -> str:
    """`lines` without the indent all their YAML lines share; a comment line (which YAML reads at any indent) does
    not hold it back, as a commented-out key at the margin would for `textwrap.dedent`.

    >>> _dedent(["  s:", "#  x: 1", "    image: i"]).splitlines()
    ['s:', '#  x: 1', '  image: i']
    """
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] if not line[:cut].strip() else line for line in lines)


class LinedList(list):  # type: ignore[type-arg]
    """A loaded YAML sequence that keeps the 1-based file line of each item (`lines`)."""

    lines: list[int]


class _LineLoader(yaml.SafeLoader):
    """The safe loader, with each mapping's line and its keys' lines kept, and each sequence item's line (for
    messages and the line account)."""

    offset = 0

    def construct_lined_seq(self, node: yaml.SequenceNode):  # type: ignore[no-untyped-def]
        data = LinedList()
        data.lines = [item.start_mark.line + 1 + self.offset for item in node.value]
        yield data
        data.extend(self.construct_sequence(node))

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:  # type: ignore[override]
        mapping = super().construct_mapping(node, deep=True)
        mapping[LINES] = {
            k.value: k.start_mark.line + 1 + self.offset for k, _ in node.value if isinstance(k, yaml.ScalarNode)
        }
        mapping[LINE] = node.start_mark.line + 1 + self.offset
        return mapping


_LineLoader.add_constructor("tag:yaml.org,2002:seq", _LineLoader.construct_lined_seq)


_FILE_HEADER = re.compile(r"^(?:# ?)?==> [^\n]{1,300} <==[ \t]*$", re.M)


def load_documents(post: PostFile, region: Region) -> list[Document]:
    """The documents of `region` (multi-document YAML), or InputError naming the line that does not parse."""

    class Loader(_LineLoader):
        offset = region.first - 1

    marker = next((n for n, line in enumerate(region.text.split("\n")) if _CONFLICT.match(line)), None)
    if marker is not None:
        raise InputError(
            f"{post.name}: line {region.first + marker}: a merge-conflict marker "
            f"({region.text.split(chr(10))[marker][:7]}): the file was published unresolved; give one "
            "side of the conflict"
        )

    # `==> path <==` (as `head`/`tail` print several files, or a commented copy of it) starts a file of its own
    text = _FILE_HEADER.sub("---", region.text)
    try:
        loaded = []
        for node in yaml.compose_all(text, Loader=Loader):
            if node is None or (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null") and not node.value):
                continue  # an empty document: a `---` (or a file's header) followed by comments only
            data = Loader("").construct_document(node)
            loaded.append((data, node.start_mark.line + region.first, node.end_mark.line + region.first))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = region.first + mark.line if mark is not None else region.first
        problem = getattr(err, "problem", None) or str(err).split("\n")[0]
        lines = region.text.split("\n")
        template = next((n for n, text in enumerate(lines) if _TEMPLATE_LINE.match(text)), None)
        if template is not None:
            raise InputError(
                f"{post.name}: line {region.first + template}: {lines[template].strip()} is a template's "
                "placeholder on a line of its own, so the file is a template a tool fills in, not YAML; give the "
                "file the tool renders"
            ) from None
        column = f", column {mark.column + 1}" if mark is not None and region.whole else ""
        raise InputError(
            f"{post.name}: line {line}{column}: not valid YAML ({problem}); give the file as published, "
            "without merge-conflict markers or tabs, each key indented as far as the others of its mapping"
        ) from None
    environment = _dotenv(post, region)
    # each document's lines run to the next one's (its `---` and comments included); the first takes the head
    starts = [region.first] + [first for _, first, _ in loaded[1:]]
    ends = [first - 1 for first in starts[1:]] + [region.last]
    return [
        Document(post, region, data, first, last, environment)
        for (data, _, _), first, last in zip(loaded, starts, ends, strict=True)
    ]


def _cut_manifest(post: PostFile, region: Region) -> bool:
    """True for a fence that opens as a manifest or compose file (`apiVersion:`, `services:` …, or a compose service
    pasted without `services:`) and runs, unclosed,
    to the post's end: an excerpt cut inside the file, whose parse error is the cut, not the file's."""
    rest = [line for line in post.lines[region.last :] if line.strip()]
    opens = _SNIFF.match(region.text.lstrip()) or _SERVICES_FRAGMENT.match(region.text.lstrip())
    return not region.whole and not rest and bool(post.fences[-1]) and bool(opens)


def _refuse_empty_end(post: PostFile, region: Region) -> None:
    """Refuse a manifest or compose file whose fence runs, unclosed, to the post's end on a key given no value
    (`resources:`): it parses, but the copy is cut where that key's value would follow."""
    if not _cut_manifest(post, region):
        return
    last = max(n for n in range(region.first, region.last + 1) if post.lines[n - 1].strip())
    if re.fullmatch(r"\s*(?:-\s+)?[\w.-]+:\s*", post.lines[last - 1]):
        raise _CutFile(
            f"{post.name}: line {last}, column {len(post.lines[last - 1].rstrip())}: the file's fence is not closed, "
            "and the post ends on a key with no value: the copy is cut; give the whole file"
        )


class _CutFile(InputError):
    """A file in a fence cut where the post ends, which parses: refused as cut, never read as the whole file."""


def _dotenv(post: PostFile, region: Region) -> dict[str, str]:
    """`NAME=value` lines of the post outside the region (a compose file's `.env`, shown next to it)."""
    found = {}
    for number, line in enumerate(post.lines, 1):
        if region.first <= number <= region.last:
            continue
        match = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=(\S*)\s*$", line)
        if match:
            found[match.group(1)] = match.group(2).strip("\"'")
    return found


def read_documents(
    post: PostFile, formats: Sequence[DocumentFormat], image: str | None = None
) -> tuple[PostFile, list[Simple]]:
    """The simple commands of the YAML documents a format claims, and the post with their lines blanked from
    the shell scan (a fence or file no format claims is left as it was). A format reads all its documents of
    the post at once: a KServe ServingRuntime in one fence serves the InferenceService of the next. `image` is
    `--image`, which a document that names no container (a SkyPilot task on the VM) runs in."""
    claimed: dict[int, list[Document]] = {}  # format index -> its documents, in the post's order
    blanked: set[int] = set()
    _refuse_flattened(post)
    _refuse_conflicted(post)
    for region in yaml_regions(post):
        try:
            documents = load_documents(post, region)
            _refuse_empty_end(post, region)
        except _CutFile:
            raise
        except InputError:
            # A file that starts as YAML is one that does not parse; prose around YAML-like lines (a page quoting
            # a Taskfile) is read as the text it is.
            if region.whole and (post.label.endswith(_WHOLE_FILE) or _SNIFF.match(region.text.lstrip())):
                raise
            if _cut_manifest(post, region):
                last = max(n for n in range(region.first, region.last + 1) if post.lines[n - 1].strip())
                raise InputError(  # named where the post stops
                    f"{post.name}: line {last}, column {len(post.lines[last - 1])}: the file's fence is not "
                    "closed, and the post ends inside it where it is not valid YAML: the copy is cut; give the "
                    "whole file"
                ) from None
            continue
        documents = [replace(d, image=image) for d in documents]
        for index, source in enumerate(formats):
            mine = [d for d in documents if source.claims_document(d.data)]
            if mine:
                claimed.setdefault(index, []).extend(mine)
                blanked.update(range(region.span[0], region.span[1] + 1))
                break
    simples: list[Simple] = []
    for index, documents in claimed.items():
        try:
            simples += formats[index].simples(documents)
        except SHAPE_ERRORS as err:
            raise as_input_error(err, f"{post.name}:{documents[0].first}", formats[index].name) from None
    if not blanked:
        return post, simples
    clean = tuple(" " * len(text) if n in blanked else text for n, text in enumerate(post.clean, 1))
    post = replace(post, clean=clean)
    simples = [replace(s, command=replace(s.command, post=post)) for s in simples]
    return post, simples


# A compose file's keys written at column 0: `services:`, a service's name, then its own keys (the page's copy
# dropped every indent, so YAML reads them as empty top-level keys and no format claims the file).
_SERVICES = re.compile(r"^services:[ \t]*$")
_SERVICE_KEYS = re.compile(r"^(?:image|build|command|entrypoint|deploy|ports|volumes|environment|runtime):")


def _refuse_flattened(post: PostFile) -> None:
    """Refuse a compose file whose indentation the copy lost, at its `services:` line: read as YAML its service is
    an empty key and its command another, so nothing would serve and the post would read as having no command."""
    lines = post.lines
    for index, line in enumerate(lines):
        if not _SERVICES.match(line):
            continue
        following = [text for text in lines[index + 1 : index + 12] if text.strip()]
        flat = [text for text in following if _SERVICE_KEYS.match(text)]
        if following and re.match(r"^[A-Za-z_][\w.-]*:[ \t]*$", following[0]) and len(flat) >= 2:
            raise InputError(
                f"{post.name}: line {index + 1}, column 1: `services:` has nothing indented under it: the next line, "
                f"`{following[0].strip()}`, and the service's keys ({', '.join(t.split(':')[0] for t in flat[:3])}) "
                "are all at column 0, so the compose file lost its indentation in this copy; give it as published"
            )


def _refuse_conflicted(post: PostFile) -> None:
    """Refuse a post published mid-merge, at its `<<<<<<<` line: between the markers are both sides of a conflict
    (two launches, or one launch's flags twice), so any command read from it is one the author never ran; a shell
    would run `<<<<<<< HEAD` as a redirection and fail. All three markers, in order, are needed: a Markdown heading
    is underlined with `=======`.

    >>> from hgxkit.importing.post import read_post
    >>> conflicted = "<<<<<<< HEAD\\nvllm serve a\\n=======\\nvllm serve b\\n>>>>>>> 1f\\n"
    >>> try:
    ...     _refuse_conflicted(read_post("s.sh", conflicted))
    ... except InputError as err:
    ...     print(err.message.split(": the file")[0])
    s.sh:1: merge-conflict markers (`<<<<<<< HEAD`, `=======` at line 3, `>>>>>>> 1f` at line 5)
    """
    markers = ("<" * 7, "=" * 7, ">" * 7)
    marks: list[int] = []
    for number, line in enumerate(post.lines, 1):
        if line.startswith(markers[len(marks)]) and _CONFLICT.match(line):
            marks.append(number)
        if len(marks) == len(markers):
            first, middle, last = (post.lines[n - 1].strip() for n in marks)
            raise InputError(
                f"{post.name}:{marks[0]}: merge-conflict markers (`{first}`, `{middle}` at line {marks[1]}, "
                f"`{last}` at line {marks[2]}): the file was published mid-merge, with both sides of a conflict in "
                "it; resolve the conflict and give the result"
            )


def document_simple(
    document: Document,
    kind: str,
    words: Sequence[WordAt],
    first: int,
    last: int,
    notes: Sequence[str] = (),
    exported: Exported | None = None,
) -> Simple:
    """A simple command for a part of a document: a `docker run` (words) or a part set aside (no words, the
    reason in `notes[0]`); `exported`: the hgxkit export labels it carries."""
    lexed = tuple(Word(text, line, 1, False) for text, line in words)
    return Simple(Command(document.post, first, last, lexed), kind, lexed, notes=tuple(notes), exported=exported)


def as_input_error(err: Exception, where: str, what: str) -> InputError:
    """`err` as the one-line refusal of a part at `where`: an InputError as it is, a shape error named."""
    if isinstance(err, InputError):
        return err
    detail = f"{type(err).__name__}: {err}"[:80]
    return InputError(f"{where}: a value of the wrong shape in this {what} ({detail}); give it as its spec writes it")


def refused(document: Document, kind: str, error: InputError, first: int, last: int) -> Simple:
    """A part of a document (lines first..last) that cannot be imported: a serving command that is refused unless
    another is taken."""
    return Simple(Command(document.post, first, last, (), error), kind, ())


def take_document(simple: Simple, reading: Reading) -> None:
    """A document format's `take`: a `docker run` is the docker run format's, a part set aside is reported,
    a part that cannot be imported is a serving command that is refused unless another is taken."""
    if simple.command.error is not None:  # a part the file says serves, refused: another setup beside the rest
        reading.servers.append(Candidate(simple, "refused", error=simple.command.error))
    elif not simple.words:
        reading.said(simple, "skipped", simple.notes[0])
    elif (engine := next((o for o in UNSUPPORTED if o.hinted_by(" ".join(simple.texts))), None)) is not None:
        # the docker run format reads hints in the post's own lines, which a document's are not
        reading.servers.append(Candidate(simple, "engine", engine.name))
    else:
        DOCKER_RUN.take(simple, reading)


def literal(value: Any) -> str:
    """A YAML scalar as a word's text: a literal dollar sign written `$$` (see hgxkit.recipe.shellwords)."""
    text = value if isinstance(value, str) else _scalar(value)
    return text.replace("$", "$$")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def shell_words(text: str, where: str) -> list[str]:
    """A command given as one string (compose's `command: serve --x`): split as compose does (shlex rules)."""
    try:
        return shlex.split(text)
    except ValueError as err:
        raise InputError(f"{where}: {text[:40]!r}: {err}; write the command as a list") from None


def container_command(
    image: str, entrypoint: list[str] | None, command: list[str], where: str
) -> tuple[str | None, list[str], list[str]]:
    """(`--entrypoint` value or None, the words after the image, notes) for a container that runs `entrypoint`
    (replacing the image's, None: the image's own) with `command`, as `docker run` writes it. A shell running one
    plain server launch (`sh -c "vllm serve M"`) runs the launch itself; a launch the image starts anyway (vLLM's
    `vllm serve` entrypoint) or one an image without an entrypoint runs (SGLang's) is the container's command."""
    if entrypoint is None:
        image_kind = _image_kind(image)
        prefix = list(image_kind.image_entrypoint) if image_kind is not None else []
        if prefix and command[:1] == prefix[-1:]:
            return (
                None,
                command[1:],
                [
                    f"{where}: `{prefix[-1]}` is written twice (the image's entrypoint is "
                    f"`{' '.join(prefix)}`); the second one is dropped"
                ],
            )
        if _is_shell(command) and _plain_shell_launch(command) is None:
            return container_command(image, command[:1], command[1:], where)  # refused: a script
        return None, command, []
    notes: list[str] = []
    full = [*entrypoint, *command]
    inner = _plain_shell_launch(full)
    if inner is not None:
        notes.append(f"{where}: `{full[0]} -c '…'` runs one server launch: the container runs it directly")
        full, download = inner
        if download:
            repo = download[2] if len(download) > 2 else ""
            other = "" if repo in full else f"; {repo or 'what it downloads'} is not the model it serves"
            notes.append(
                f"{where}: `{' '.join(download)}` before it dropped: hgxkit places the model the launch names "
                f"(downloaded and verified on the node before the server starts){other}"
            )
    elif runs_rendered_head(full):
        return full[0], full[1:], notes  # hgxkit's own Ray head and its server: a `docker run` reads them
    elif _is_shell(full):
        script = " ".join(full[2:]).replace("$$", "$")
        ray = " (a Ray cluster is not imported)" if re.search(r"\bray\b|multi-node-serving", script) else ""
        logic = next((ln.strip() for ln in script.split("\n") if _SHELL_LOGIC.match(ln)), None)
        shown = f"its `{logic}` decides what runs and when" if logic else _script_steps(script)
        raise InputError(
            f"{where}: `{full[0]} -c` runs a script, not one server command: {shown}{ray}; "
            "give the server command as the container's command"
        )
    launched = next((k for k in KINDS.values() if k.launches(python_program(full))), None)
    image_kind = _image_kind(image)
    if launched is not None and image_kind is launched:
        prefix = list(launched.image_entrypoint)
        if prefix and full[: len(prefix)] == prefix:
            notes.append(f"{where}: `{' '.join(prefix)}` is the image's entrypoint; the container gets its arguments")
            return None, full[len(prefix) :], notes
        if not prefix:
            return None, full, notes
    return full[0], full[1:], notes


def _script_steps(script: str) -> str:
    """What a container's script does besides the launch, for its refusal: its first command that is neither
    `set`, `echo` nor a comment (`sed -i …` patching the engine), else the script's start."""
    steps = [ln.strip() for ln in script.split("\n") if ln.strip() and not ln.strip().startswith("#")]
    doing = [ln for ln in steps if not re.match(r"(?:set|echo|printf)\b", ln)]
    if len(doing) > 1:
        return f"it runs `{doing[0][:60].rstrip(' &;')}` besides the launch"
    return repr(" ".join(steps)[:80])


def _is_shell(words: list[str]) -> bool:
    return len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("sh", "bash") and words[1] == "-c"


_DOWNLOAD = re.compile(r"(?:huggingface-cli|hf) download")  # a model download before a launch (`… && vllm serve`)


def _plain_shell_launch(words: list[str]) -> tuple[list[str], list[str]] | None:
    """(the launch words, a model download run before it) of `sh -c 'LAUNCH'` when LAUNCH is one plain server
    launch, or `sh -c 'huggingface-cli download REPO && LAUNCH'` (the download hgxkit's model role does, verified,
    before the server starts); else None."""
    if len(words) != 3 or words[0].rsplit("/", 1)[-1] not in ("sh", "bash") or words[1] != "-c":
        return None
    if "$" in words[2]:
        return None  # the container's shell expands it; as a command of its own it would be the host's
    try:
        lexed = split_words(words[2].replace("$$", "$"))
    except InputError:
        return None
    texts = [w.text for w in lexed]
    operators = [i for i, w in enumerate(lexed) if w.is_operator]
    download: list[str] = []
    if len(operators) == 1 and texts[operators[0]] == "&&" and _DOWNLOAD.fullmatch(" ".join(texts[:2])):
        download, texts = texts[: operators[0]], texts[operators[0] + 1 :]
    elif operators:
        return None
    return (texts, download) if texts and any(k.launches(python_program(texts)) for k in KINDS.values()) else None


def _image_kind(image: str) -> Any:
    try:
        return detect_kind(image, ())
    except InputError:
        return None
