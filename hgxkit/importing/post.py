"""Read a whole post and find its shell commands: prose, Markdown fences, inline code, quoted replies and
prompts are set aside; each command is lexed the way a POSIX shell would, with its place in the file.

What is not shell is blanked out in a copy of each line, so columns stay those of the file: a fence line,
a `> ` quote (or a PS2 `> ` continuation), the backticks and prose around inline code, and a prompt
(`$ `, `$cmd`, `[root@node1 ~]# `, `(env) user@host:~/dir$ `, `host:~/dir$ `, `PS C:\\…> `, and `# ` when the
block has no other command, so that `# node 1` stays a comment; never in a shell script, whose `#` is a
comment), and in a ```diff fence the `+` of an added line and every removed line (the file after the change is
read). A line starts a command when its first word (after `NAME=value` prefixes, `sudo` and `nohup`) is a
program people post; an unescaped newline ends it, a trailing backslash or an open quote continues it. The
repairs the corpus needs are notes, never silent: a backslash followed by spaces at a line's end, and a blank
line between continuation lines.

Example:
    >>> post = read_post("post.md", "Run it:\\n```bash\\n# node 1\\n$ docker run img \\\\\\n  serve\\n```\\nThen go.")
    >>> [(c.first, c.last, [w.text for w in c.words]) for c in find_commands(post)]
    [(4, 5, ['docker', 'run', 'img', 'serve'])]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath

from hgxkit.errors import InputError
from hgxkit.importing.makefile import make_lines
from hgxkit.importing.python_strings import launches_in_python
from hgxkit.importing.quadlet import quadlet_lines
from hgxkit.importing.systemd_unit import unit_lines
from hgxkit.importing.workflow import workflow_lines
from hgxkit.kinds import KINDS, UNSUPPORTED, kind_programs
from hgxkit.recipe.shellwords import Word, split_words

# First words of the commands people post around a serving setup (with every server kind's, `kind_programs`);
# any other line is prose or output.
PROGRAMS = frozenset(
    {
        "docker",
        "podman",
        "nerdctl",
        "runai",
        "apptainer",
        "singularity",
        "sudo",
        "nohup",
        "genai-perf",
        "aiperf",
        "trtllm-serve",
        "text-generation-launcher",
        "ollama",
        "llama-server",
        "lmdeploy",
        "trl",
        "swift",
        "llamafactory-cli",
        "axolotl",
        "lm_eval",
        "curl",
        "wget",
        "pip",
        "pip3",
        "uv",
        "conda",
        "git",
        "cd",
        "mkdir",
        "chmod",
        "export",
        "source",
        "bash",
        "sh",
        "nvidia-smi",
        "ray",
        "timeout",
        "for",
        "while",
        "until",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "do",
        "done",
        "case",
        "esac",
        "echo",
        "cat",
        "ls",
        "tee",
        "sleep",
        "huggingface-cli",
        "hf",
        "kubectl",
        "ifconfig",
        "apt",
        "apt-get",
        "modelscope",
        "torchrun",
        "accelerate",
        "srun",
    }
)
# Shell keywords that open a clause, and what shows a line starting with one is shell, not an English sentence:
# `;`, a test (`[`, `((`), a variable, `do`/`then`, or `for NAME in`.
_CLAUSES = frozenset({"for", "while", "until", "if", "elif", "select"})
_CLAUSE_SYNTAX = re.compile(r";|\[|\(\(|\$|\bdo\b|\bthen\b|^[A-Za-z_]\w* in\b|^(?:true|false|:)\b|\|")
PYTHON_RE = re.compile(r"^(?:\S*/)?python[0-9.]*$")
ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_QUOTE_PREFIX = re.compile(r"^[ \t]*(?:>[ \t]?)+")
FENCE_RE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
# The info strings of a fence that shows a change as a unified diff (`+` added, `-` removed, ` ` context lines).
_DIFF_FENCES = frozenset({"diff", "patch"})
_DIFF_NOTE = "a diff's added lines are read as the file has them after the change (removed lines set aside)"
_PROMPTS = (
    re.compile(r"\$[ \t]+"),  # `$ docker run …`
    # `$docker run …`, the prompt glued on by a docs page's copy button; not `$VENV/bin/vllm`, a variable's path
    re.compile(r"\$(?=[A-Za-z_./])(?![A-Za-z_]\w*/)"),
    re.compile(r"\[[^\]\n]*\][#$][ \t]+"),  # `[root@node1 ~]# `
    re.compile(r"(?:\([^)\s]+\)[ \t]+)?[\w.-]+@[\w.-]+(?::\S*)?[#$][ \t]+"),  # `(env) user@host:~/dir(main)$ `
    re.compile(r"[\w.-]+:[~/]\S*[#$][ \t]+"),  # `host:~/dir$ `
    re.compile(r"PS [A-Za-z]:\\[^>\n]*>[ \t]+"),  # PowerShell `PS C:\Users\me> `
    re.compile(r"![ \t]*"),  # a notebook cell's shell escape: `!nohup vllm serve … &`, `!pip install …`
)
# Prompts that name a user, host or folder: nothing but a shell prints them, so any command may follow (`source …`)
_HOST_PROMPTS = _PROMPTS[2:6]
_SHELL_WORD = re.compile(r"[A-Za-z_./~]")
_ROOT_PROMPT = re.compile(r"#[ \t]+")
# Inline code that only names a program (`vllm serve`, `docker run`): prose about it, no command of the post's
_NAMED_PROGRAM = re.compile(r"(?:python[\d.]* -m [\w.]+|[A-Za-z][\w.-]*(?: [a-z][\w-]*)?)\Z")
_SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
# A line that continues (ends in a backslash) and holds a launch, but does not start like a command.
_LAUNCH_TOKEN = re.compile(
    r"(?:^|\s|/)(?:vllm serve|sglang serve)\b|(?:^|\s)(?:docker run|-m sglang\.launch_server|-m vllm\.entrypoints)\b"
)


def _cut(post: str, line: int, text: str) -> str:
    """The refusal of a command whose last line ends with a backslash where the post ends."""
    return (
        f"{post}: line {line}, column {len(text.rstrip())}: the command's last line ends with a backslash and the "
        "post ends there, so the copy stops inside the command (what follows the backslash is not in it); give the "
        "whole command"
    )


def _hunk_cut(post: str, line: int, text: str) -> str:
    """The refusal of a command whose last line ends with a backslash where a diff's hunk ends."""
    return (
        f"{post}: line {line}, column {len(text.rstrip())}: the command's last line ends with a backslash where the "
        "diff's hunk ends, so the copy stops inside the command (the rest of the file is not in the post); give the "
        "whole command"
    )


def _hunk_ends(post: PostFile, index: int) -> bool:
    """True when line `index` (0-based) and the rest of its diff fence hold nothing of the file after the change
    (removed lines only): a command continued onto them goes on past the hunk."""
    fence = post.fences[index - 1]
    if not fence or not _in_diff(post, fence):
        return False
    rest = [post.clean[k] for k in range(index, len(post.clean)) if post.fences[k] == fence]
    return not any(line.strip() for line in rest)


def _in_diff(post: PostFile, fence: int) -> bool:
    """True when code fence number `fence` of the post is a diff (its opening line's info string) or a fence a
    diff adds (`+```bash` in a change to a Markdown page, which the hunk may cut open)."""
    opening = post.lines[post.fences.index(fence)].lstrip("> ")
    found = FENCE_RE.match(opening)
    return (found is not None and found.group(3).strip().lower() in _DIFF_FENCES) or bool(
        re.match(r"\+[ \t]*(?:`{3,}|~{3,})", opening)
    )


# A file whose last byte is the backslash (no newline after it) is whole where a copy cut there has a line break:
# bash reads the end of the file and runs the command as it stands (dash passes a last argument `\`).
_FILE_ENDS_ON_BACKSLASH = (
    "{post}:{line}: the file ends on a backslash with no newline after it; bash runs the command as it stands (sh "
    "would pass `\\` as a last argument): read as bash reads it (if your copy stopped there, give the whole command)"
)
_TRAILING_SPACE_BACKSLASH = re.compile(r"\\[ \t]+$")
# `a \ b` inside a line: a command whose line breaks were lost (the lexer reads each as a continuation).
_COLLAPSED = re.compile(r"\s\\[ \t]+(?=-|\w)")
MAX_COMMAND_LINES = 400
# A post shows a setup in a few commands; thousands are a script or a log (and would make import slow).
MAX_COMMANDS = 1000


@dataclass(frozen=True)
class PostFile:
    """One input file: its lines, and the same lines with everything that is not shell blanked out."""

    name: str  # as given, for messages
    label: str  # the file's name, for `sources` in a recipe
    lines: tuple[str, ...]
    clean: tuple[str, ...]
    notes: tuple[tuple[int, str], ...] = ()  # (line, what was removed) for prompts and the like
    fences: tuple[int, ...] = ()  # per line: the Markdown code fence it is in (0: none)
    written: tuple[str, ...] = ()  # the lines as the post wrote them, where typography was undone in `lines`


@dataclass(frozen=True)
class Command:
    """One command line of a post (possibly `a && b | c`), lexed, with its file lines and repairs."""

    post: PostFile
    first: int  # 1-based file lines
    last: int
    words: tuple[Word, ...]
    error: InputError | None = None
    notes: tuple[str, ...] = field(default=())
    # (line, column, text) of the line right after it that reads as its continuation (see `_unended`)
    unended: tuple[int, int, str] | None = None
    # the refusal to give if it is taken: its last line continues past the end of the post (a copy cut inside it)
    cut: str | None = None
    # its last line ends with a backslash where its fence ends: whole as far as the post shows, set aside where
    # another serving command is complete (a hunk or an excerpt that stops inside the command)
    fence_cut: bool = False

    def where(self) -> str:
        span = f"{self.first}" if self.first == self.last else f"{self.first}-{self.last}"
        return f"{self.post.name}:{span}"


def read_post(name: str, text: str) -> PostFile:
    """Split a post into lines and blank out what is not shell (see the module docstring)."""
    lines = tuple(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    cleaner = _Cleaner(lines, script=lines[0].startswith("#!") or name.endswith(_SCRIPT_SUFFIXES))
    shell = cleaner.run()
    clean, python = launches_in_python(lines, cleaner.fences, shell)
    notes = (*cleaner.notes, *python)
    return PostFile(name, PurePath(name).name, lines, tuple(clean), notes, tuple(cleaner.fences))


@dataclass(frozen=True)
class EnvOptions:
    """What `env -u NAME … -C DIR …` before a program says: the names it unsets, the directory it runs the program
    in (None: not given), and the index of the word after its options."""

    unsets: tuple[str, ...]
    directory: str | None
    end: int


def env_options(texts: Sequence[str], index: int) -> EnvOptions | None:
    """The `-u NAME` (`--unset NAME`, `--unset=NAME`, `-uNAME`) and `-C DIR` (`--chdir DIR`, `--chdir=DIR`,
    `-CDIR`) options of the `env` at `index`; None where it has none first or nothing follows them."""
    names: list[str] = []
    directory: str | None = None
    at = index + 1
    while at < len(texts):
        text = texts[at]
        option, equals, glued = text.partition("=")
        if option in ("-u", "--unset", "-C", "--chdir") and (equals or at + 1 < len(texts)):
            value = glued if equals else texts[at + 1]
            at += 1 if equals else 2
        elif text[:2] in ("-u", "-C") and len(text) > 2 and not text.startswith("--"):
            option, value = text[:2], text[2:]
            at += 1
        else:
            break
        if option in ("-u", "--unset"):
            names.append(value)
        else:
            directory = value
    found = names or directory is not None
    return EnvOptions(tuple(names), directory, at) if found and at < len(texts) else None


# Words after a program that are a label, not arguments: no option among them, and the last a word with a colon
# (a page's bullets run together: `Entry command:` / `vllm serve - Execution command template:`; a report's
# `vllm serve command:` above its fence). A program's subcommand comes first, so one word before the label will do.
_LABEL_AFTER = re.compile(r"^(?:(?:[^-\s]\S*|-)\s+)+[A-Za-z]+:$")


# Programs that run a command in an environment of their own (a project's, a tool's, a conda environment), each
# with its options that take a value (`uv run --with vllm`, `conda run -n vllm`, `pixi run -e cuda`); the rest are
# switches or `--opt=value`. Per runner: `-n` is a conda environment's name but uv's --no-cache.
_UV_VALUES = frozenset(
    {
        *("--with", "--with-editable", "--with-requirements", "--python", "-p", "--project", "--directory", "--from"),
        *("--package", "--extra", "--group", "--env-file", "--index", "--default-index", "--index-url"),
        *("--extra-index-url", "-f", "--find-links", "--prerelease", "--resolution"),
    }
)
_CONDA_VALUES = frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})
_RUNNERS: tuple[tuple[tuple[str, ...], frozenset[str]], ...] = (
    *((runner, _UV_VALUES) for runner in (("uv", "run"), ("uvx",), ("uv", "tool", "run"))),
    (("pixi", "run"), frozenset({"-e", "--environment", "--manifest-path"})),
    (("poetry", "run"), frozenset({"-P", "--project", "-C", "--directory"})),
    *((runner, frozenset()) for runner in (("pdm", "run"), ("hatch", "run"), ("pipenv", "run"), ("rye", "run"))),
    *((runner, _CONDA_VALUES) for runner in (("conda", "run"), ("mamba", "run"), ("micromamba", "run"))),
)
UV_MODULE = ("-m", "--module")  # `uv run -m MODULE`: `python -m MODULE` in uv's environment


def runner_end(words: Sequence[str], index: int) -> int:
    """Past an environment runner and its options at `index` (`uv run --with vllm`, `conda run -n vllm`,
    `pixi run`: each runs the command in an environment of its own), where a program follows; else `index`."""
    found = next(((r, v) for r, v in _RUNNERS if tuple(words[index : index + len(r)]) == r), None)
    if found is None:
        return index
    runner, values = found
    end = index + len(runner)
    while end < len(words) and words[end].startswith("-") and words[end] not in ("--", *UV_MODULE):
        end += 2 if words[end] in values else 1
    end += end < len(words) and words[end] == "--"
    return end if end < len(words) else index


# `NAME="--a --b 1"` (`export`, `local` or `readonly` before it): one assignment of a quoted value, however many words
# the value holds (a whitespace split would take its second word for the program).
_QUOTED_ASSIGNMENT = re.compile(
    r"""^\s*(?:(?:export|local|readonly)\s+)?[A-Za-z_]\w*=(?:"[^"\\`]*"|'[^']*')\s*(?:;\s*)?(?:#.*)?$"""
)


# The programs of the engines hgxkit names but does not deploy (`aphrodite run`, `xinference-local`): refused by name.
_OTHER_ENGINES = frozenset(p[0] for other in UNSUPPORTED for p in other.programs if not p[0].startswith("python"))


def is_command_start(text: str) -> bool:
    """True when `text` begins like a command people post (see `PROGRAMS`)."""
    if _QUOTED_ASSIGNMENT.match(text):
        return True
    words = text.split()
    comment = next((i for i, word in enumerate(words) if word.startswith("#")), None)
    words = words[:comment]  # `BACKEND="mooncake" # nixl | mooncake`: the shell stops reading at the comment
    continued = bool(words) and words[-1] == "\\"
    if continued:
        words.pop()  # `NAME=value \`: an environment prefix continued on the next line
    index = 0
    while index < len(words) and (
        ASSIGNMENT_RE.match(words[index])
        or words[index] in ("sudo", "-E", "nohup", "env", "exec")
        or (words[index] in ("-i", "--ignore-environment") and index and words[index - 1] == "env")
    ):
        given = env_options(words, index) if words[index] == "env" else None
        index = given.end if given else index + 1
    launcher, index = index, runner_end(words, index)
    if index == len(words):  # `model=org/name` on its own line, or `nohup env \` before the rest of a command
        return index > 0 and (ASSIGNMENT_RE.match(words[0]) is not None or continued)
    program = words[index]
    if program in UV_MODULE:  # `uv run -m MODULE` (a line starting `-m` is no command)
        return index > launcher
    if program in _CLAUSES and not _CLAUSE_SYNTAX.search(" ".join(words[index + 1 :])):
        return False  # "while I tried …", "if you want …": prose that starts with a shell keyword
    if _LABEL_AFTER.match(" ".join(words[index + 1 :])):
        return False  # "vllm serve - Execution command template:": a bullet's label after a program's name
    return (
        program in PROGRAMS
        or program.rsplit("/", 1)[-1] in kind_programs()  # `$VENV/bin/vllm`: a virtualenv's launcher
        or program in _OTHER_ENGINES
        or bool(PYTHON_RE.match(program))
        or program.endswith(".sh")
    )


def _redirection_continues(previous: str) -> bool:
    """True when a line starting with `>` after `previous` is the rest of a shell command: `previous` continues
    with a backslash and is itself neither quoted (`> ` reply) nor prompted (`$ `, whose continuation lines get
    PS2's `> `)."""
    stripped = previous.strip()
    return stripped.endswith("\\") and not _QUOTE_PREFIX.match(previous) and not stripped.startswith("$")


def _ps2_starts(line: str, following: str) -> bool:
    """True when `line` after an unprompted `cmd \\` is PS2's `> ` (the prompt a terminal prints before each
    continuation line) before the command's next words: `line` continues with a backslash and `following` starts
    with `>` too, or its words start a program (`> vllm serve \\`). A redirection ends the command instead
    (`> out.log 2>&1 &`) and names a file, never a program."""
    body = line.lstrip()[1:]
    if not body.startswith((" ", "\t")):
        return False
    continues = line.rstrip().endswith("\\")
    return (continues and following.lstrip().startswith(">")) or is_command_start(body.strip())


# `: "${NAME:=value}"` (one or more, quoted or not): the idiom that sets NAME where the shell has it unset.
_DEFAULT_SET = re.compile(r"""^[ \t]*:((?:[ \t]+(["']?)\$\{[A-Za-z_]\w*:?=[^{}$'"\\`\s()|&;<>]*\}\2)+)[ \t]*$""")
_DEFAULT_SET_ONE = re.compile(r"""(["']?)\$\{([A-Za-z_]\w*):?=([^}]*)\}\1""")
_DEFAULT_SET_NOTE = '`: "${NAME:=value}"` read as `NAME=${NAME:-value}` (it sets NAME where it is unset)'


_NUMBERED_NOTE = "the line numbers a paste site or an editor's copy put before each line blanked"
# A line number before a line's text: `  1. `, `12: `, `3) `, `4 | `, `5\t`.
_LINE_NUMBER = re.compile(r"^[ \t]*(\d{1,5})(?:[.:)][ \t]|[ \t]*\|[ \t]?|\t)")


def _numbered(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[int]]:
    """`lines` with the numbers of a numbered copy blanked (columns kept): runs of at least three lines numbered
    one after another (n, n+1, n+2 …), as Pastebin or an editor's gutter shows a file; and the first line of each.

    >>> _numbered(("  1. $ vllm serve m \\\\", "  2.   --tp 8", "  3. INFO ready", "4. prose"))[0][:2]
    ('     $ vllm serve m \\\\', '       --tp 8')
    """
    out, firsts = list(lines), []
    numbers = [int(m.group(1)) if (m := _LINE_NUMBER.match(line)) else None for line in lines]
    start = 0
    while start < len(lines):
        end = start
        while end + 1 < len(lines) and numbers[start] is not None and numbers[end + 1] == numbers[end] + 1:
            end += 1
        if end - start >= 2:
            for index in range(start, end + 1):
                cut = _LINE_NUMBER.match(lines[index]).end()  # type: ignore[union-attr]
                out[index] = " " * cut + lines[index][cut:]
            firsts.append(start + 1)
        start = end + 1
    return tuple(out), firsts


def _default_sets(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[int]]:
    """`lines` with each `: "${NAME:=value}"` line written as the assignment it makes, and the lines written.

    >>> _default_sets((': "${TP:=1}" ${PORT:=8000}', "vllm serve m"))
    (('TP=${TP:-1} PORT=${PORT:-8000}', 'vllm serve m'), [1])
    """
    out, changed = list(lines), []
    for index, line in enumerate(lines):
        found = _DEFAULT_SET.match(line)
        if found:
            out[index] = " ".join(f"{m[2]}=${{{m[2]}:-{m[3]}}}" for m in _DEFAULT_SET_ONE.finditer(found.group(1)))
            changed.append(index + 1)
    return tuple(out), changed


class _Cleaner:
    """One pass over a post's lines: fences, quotes, inline code and prompts blanked, columns kept."""

    def __init__(self, lines: tuple[str, ...], script: bool = False) -> None:
        self.lines = lines
        self.script = script  # a shell script, where `# cmd` is a comment: its shell reads no prompts
        self.notes: list[tuple[int, str]] = []
        self.block: list[int] = []  # block id per line: a fence, or a paragraph between blank lines
        self.fences: list[int] = []  # fence id per line, 0 outside fences

    def run(self) -> list[str]:
        self.lines, opened = _markdown_diffs(self.lines)
        self.notes += [(line, _MARKDOWN_DIFF_NOTE) for line in opened]
        self.lines, quadlets = quadlet_lines(self.lines)
        self.notes += quadlets
        self.lines, units = unit_lines(self.lines)
        self.notes += units
        self.lines, workflow = workflow_lines(self.lines)
        self.notes += workflow
        self.lines, made = make_lines(self.lines)
        self.notes += made
        self.lines, numbered = _numbered(self.lines)
        self.notes += [(line, _NUMBERED_NOTE) for line in numbered]
        self.lines, set_lines = _default_sets(self.lines)
        self.notes += [(line, _DEFAULT_SET_NOTE) for line in set_lines]
        self.lines, continued = _powershell_continuations(self.lines)
        self.notes += [(line, _POWERSHELL_NOTE) for line in continued[:1]]
        self.lines, continued = _powershell_continuations(self.lines, _CMD_END, "^")
        self.notes += [(line, _CMD_NOTE) for line in continued[:1]]
        clean: list[str] = []
        in_fence = diff = False
        span_open = False
        block = 0
        root_candidates: list[int] = []
        ps2 = False  # the previous line was a PS2 continuation that continues
        for index, line in enumerate(self.lines):
            quoted = _QUOTE_PREFIX.match(line)
            previous = self.lines[index - 1] if index else ""
            following = self.lines[index + 1] if index + 1 < len(self.lines) else ""
            if quoted and (ps2 or (_redirection_continues(previous) and _ps2_starts(line, following))):
                ps2 = line.rstrip().endswith("\\")
                self.notes.append((index + 1, "PS2 prompt '>' removed (a continuation line as a terminal shows it)"))
            elif quoted and _redirection_continues(previous):
                quoted = None  # `cmd \` then `  > out.log 2>&1 &`: the command's redirection, not a quote or PS2
            else:
                ps2 = False
            text = _blank(line, 0, quoted.end() if quoted else 0)
            fence = FENCE_RE.match(text)
            if fence and "```" not in fence.group(3):
                in_fence = not in_fence
                diff = in_fence and fence.group(3).strip().lower() in _DIFF_FENCES
                block += 1
                clean.append(" " * len(line))
                self.block.append(block)
                self.fences.append(block if in_fence else 0)
                continue
            if fence:  # ```cmd …``` on one line: inline code written with fences
                start = fence.end(2)
                close = text.index("```", start)
                text = _blank(_blank(text, 0, start), close, len(text))
            elif not in_fence and ("`" in text or span_open) and not self._script_comment(text):
                text, span_open = self._inline_code(text, span_open)
            elif in_fence and diff:
                text = self._diff_line(index, text, quoted.end() if quoted else 0)
            elif not in_fence and (lead := _launch_after_label(text)):
                text = _blank(text, 0, lead)
                self.notes.append((index + 1, "the prose before the launch on its line left out"))
            if not text.strip() and not in_fence:
                block += 1
            text = self._prompt(index, text, root_candidates)
            clean.append(text)
            self.block.append(block)
            self.fences.append(block if in_fence else 0)
        self._root_prompts(clean, root_candidates)
        return clean

    def _inline_code(self, text: str, span_open: bool) -> tuple[str, bool]:
        """Keep the command inside `inline code`, blank the prose around it; a span may go on over lines."""
        if span_open:
            close = text.find("`")
            return (text, True) if close < 0 else (_blank(text, close, len(text)), False)
        start = text.find("`")
        while start >= 0:
            body = text[start + 1 :].lstrip("`")
            ticks = len(text[start:]) - len(text[start:].lstrip("`"))
            close = text.find("`" * ticks, start + ticks)
            named = close >= 0 and _NAMED_PROGRAM.match(text[start + ticks : close].strip())
            if not named and (is_command_start(body) or is_command_start(body[_prompt_length(body) :])):
                if close < 0:
                    return _blank(text, 0, start + ticks), True
                return _blank(_blank(text, close, len(text)), 0, start + ticks), False
            start = text.find("`", text.find("`", start + 1) + 1) if text.find("`", start + 1) >= 0 else -1
        return text, False

    def _prompt(self, index: int, text: str, root_candidates: list[int]) -> str:
        """Blank a prompt before a command; remember `# cmd` lines, decided once the block is known."""
        body = text.lstrip()
        offset = len(text) - len(body)
        for prompt in _PROMPTS:
            match = prompt.match(body)
            rest = body[match.end() :] if match else ""
            if match and (is_command_start(rest) or (prompt in _HOST_PROMPTS and _SHELL_WORD.match(rest))):
                shown = match.group().strip()
                what = "a notebook's shell escape" if shown == "!" else "prompt"
                self.notes.append((index + 1, f"{what} {shown!r} removed"))
                return _blank(text, offset, offset + match.end())
        if body.startswith("$") and self._prompted_continuation(index):
            self.notes.append((index + 1, "prompt '$' removed (a page that prompts each line of a command)"))
            return _blank(text, offset, offset + 1)
        root = _ROOT_PROMPT.match(body)
        if root and is_command_start(body[root.end() :]):
            root_candidates.append(index)
        return text

    def _prompted_continuation(self, index: int) -> bool:
        """`$ ` before a continuation line of a command whose first line had its `$ ` prompt removed (a docs page
        that prints a prompt on every line: `$ bash run.sh \\` / `$     vllm/vllm-openai \\`)."""
        if index == 0 or not self.lines[index - 1].rstrip().endswith("\\"):
            return False
        if not re.match(r"\s*\$[ \t]", self.lines[index]):
            return False
        return any(line == index and what.startswith("prompt '$' removed") for line, what in self.notes)

    def _diff_line(self, index: int, text: str, start: int) -> str:
        """A line of a ```diff fence as the file it changes has it after the change: an added line without its
        `+`, a context line as it is (its leading space is white space to a shell); a removed line, a hunk header,
        a file header or `\\ No newline at end of file` is blanked."""
        marker = text[start : start + 1]
        if marker == "+" and not text.startswith("+++", start):
            if not any(n[1] == _DIFF_NOTE for n in self.notes):
                self.notes.append((index + 1, _DIFF_NOTE))
            return _blank(text, start, start + 1)
        if marker in ("-", "@", "+", "\\"):
            return _blank(text, 0, len(text))
        return text

    def _script_comment(self, text: str) -> bool:
        """A script's comment line: its shell reads nothing in it, `inline code` included."""
        return self.script and text.lstrip().startswith("#")

    def _commented_out(self, index: int) -> bool:
        """`# cmd \\` followed by `#   --flag …`: a command commented out line by line (a root shell's
        continuation lines would have no `#`; PS2 gives `> `)."""
        following = self.lines[index + 1].strip() if index + 1 < len(self.lines) else ""
        return self.lines[index].rstrip().endswith("\\") and following.startswith("#")

    def _shell_only(self, clean: list[str]) -> bool:
        """A post of nothing but shell (commands, their continuation lines, `#` lines; no fence, no prose) with a
        command that is not a `# cmd` line is a script without its `#!` line: its shell reads no prompts, so its
        `# cmd` lines are commented out."""
        if any(self.fences):
            return False
        commands = 0
        for index, text in enumerate(clean):
            body = text.strip()
            if not body or body.startswith("#"):
                continue
            builtin = body.split()[0] in _SCRIPT_BUILTINS  # `set -x` starts no program a post pastes, but is a script's
            if not (builtin or is_command_start(body) or (index and clean[index - 1].rstrip().endswith("\\"))):
                return False
            commands += 1
        return commands > 0

    def _root_prompts(self, clean: list[str], candidates: list[int]) -> None:
        """`# cmd` is a root prompt only where its block (in a post with no fence: the post) has no other command and
        it is not a command commented out line by line (else it is a comment)."""
        chosen = set(candidates)
        if self.script or self._shell_only(clean):
            return
        commands: dict[int, int] = {}  # block -> command lines that are not `# cmd` lines
        for index, text in enumerate(clean):
            if index not in chosen and is_command_start(text.strip()):
                commands[self.block[index]] = commands.get(self.block[index], 0) + 1
        # with no fence, the post is one text: a command anywhere in it makes its `# cmd` lines a script's comments
        unfenced = not any(self.fences) and bool(commands)
        for index in candidates:
            if unfenced or commands.get(self.block[index]) or self._commented_out(index):
                continue
            text = clean[index]
            offset = len(text) - len(text.lstrip())
            end = offset + _ROOT_PROMPT.match(text[offset:]).end()  # type: ignore[union-attr]
            clean[index] = _blank(text, offset, end)
            self.notes.append((index + 1, "prompt '#' removed (a root shell: the block has no other command)"))


# Shell builtins that only a script's lines start with (no prose line starts `set -x`).
_SCRIPT_BUILTINS = frozenset({"set", "shopt", "trap", "ulimit", "umask", "unset", "wait", "pushd", "popd"})
# A prose lead-in that labels the command after it on the same line: `My command is …`, `Command: …` (not any
# colon: a log's `Example: sglang serve --model-path <model>` is a template, no command the post runs).
_LAUNCH_LABEL = re.compile(r"(?i)\b(?:command|cmd)(?:\s+(?:is|was))?\s*:?\s+$")
_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_]\w*=\S*")


def _launch_after_label(text: str) -> int:
    """The column where an engine's launch (with the `NAME=value` words before it) starts on a prose line that
    labels it (`My command is LMCACHE_CONFIG_FILE=x.yaml vllm serve M …`), else 0: prose that only mentions a
    program (`then use vllm serve to start it`) names no label right before the command.

    >>> _launch_after_label("My command is A=1 vllm serve org/m --port 8000")
    14
    >>> _launch_after_label("Then use vllm serve to start it"), _launch_after_label("vllm serve org/m")
    (0, 0)
    """
    for kind in KINDS.values():
        for program in kind.programs:
            found = re.search(rf"(?:^|\s){re.escape(' '.join(program))}\b", text)
            start = _assignments_before(text, found.end() - len(" ".join(program))) if found else 0
            if start and _LAUNCH_LABEL.search(text[:start]) and not is_command_start(text):
                return start
    return 0


def _assignments_before(text: str, at: int) -> int:
    """Where the `NAME=value` words right before column `at` start (`at` where there are none), walked back a word
    at a time: one pass over the line, where a pattern of repeated assignments searched from each position of a
    line of them would be quadratic.

    >>> _assignments_before("cmd is A=1 B=2 vllm", 15), _assignments_before("cmd is vllm", 7)
    (7, 7)
    """
    start = at
    for word in reversed(list(re.finditer(r"\S+", text[:at]))):
        if not _ASSIGNMENT_WORD.fullmatch(word.group()):
            break
        start = word.start()
    return start


def _prompt_length(text: str) -> int:
    """Length of the prompt `text` starts with (0 for none)."""
    for prompt in _PROMPTS:
        match = prompt.match(text)
        if match:
            return match.end()
    return 0


_MARKDOWN_DIFF_NOTE = (
    "a diff of a Markdown file (its added lines hold fences): read as the file has it after the change, its "
    "fences as fences (removed lines set aside)"
)


_POWERSHELL_NOTE = "PowerShell's line continuation (a backtick ending the line) read as a shell's backslash"
# A line that ends in PowerShell's continuation: white space, then one backtick, and no other backtick on the line.
_POWERSHELL_END = re.compile(r"^[^`]*\S[ \t]+`[ \t]*$")
_CMD_NOTE = "cmd.exe's line continuation (a caret ending the line) read as a shell's backslash"
# A line that ends in cmd.exe's continuation: white space, then one caret (`^lo,docker`, a value, has no space).
_CMD_END = re.compile(r"^.*\S[ \t]+\^[ \t]*$")


def _powershell_continuations(
    lines: tuple[str, ...], end: re.Pattern[str] = _POWERSHELL_END, mark: str = "`"
) -> tuple[tuple[str, ...], list[int]]:
    """`lines` with each run of PowerShell continuations (`docker run … `` then indented lines; cmd.exe's `^` with
    `end` and `mark`) ending in a backslash instead, where the run starts at a command and the next line goes on;
    the (1-based) lines changed.

    >>> new, changed = _powershell_continuations(("docker run --gpus all `", "  -p 8000:8000 img", "prose `x`"))
    >>> new[0], changed
    ('docker run --gpus all \\\\', [1])
    """
    out, changed, inside = list(lines), [], False
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        ends = end.match(line) and following.strip() and not following.lstrip().startswith(mark)
        if ends and (inside or is_command_start(line.strip())):
            at = line.rindex(mark)
            out[index] = line[:at] + "\\" + line[at + 1 :]
            changed.append(index + 1)
            inside = True
        else:
            inside = False
    return tuple(out), changed


def _markdown_diffs(lines: tuple[str, ...]) -> tuple[tuple[str, ...], list[int]]:
    """`lines` with each ```diff fence whose new side holds fences of its own (a change to a Markdown page, a
    review of a docs pull request) written as the page has it after the change, its own fence lines blanked, so the
    page's fences and prose are read as they are on the page; the (1-based) lines of the fences so rewritten. The
    diff's closing fence is kept where the hunk cuts a fence open, so that fence ends there.

    >>> new, opened = _markdown_diffs(("````diff", "+```bash", "+vllm serve m", "-old", "+```", "````", "Prose."))
    >>> [line.strip() for line in new], opened
    (['', '```bash', 'vllm serve m', '', '```', '', 'Prose.'], [1])
    """
    out, opened, index = list(lines), [], 0
    while index < len(lines):
        fence = FENCE_RE.match(lines[index])
        if not fence or "```" in fence.group(3) or fence.group(3).strip().lower() not in _DIFF_FENCES:
            index += 1
            continue
        close = next((j for j in range(index + 1, len(lines)) if FENCE_RE.match(lines[j])), len(lines))
        body = [_new_side(line) for line in lines[index + 1 : close]]
        inner = sum(1 for line in body if FENCE_RE.match(line))
        if inner:
            out[index + 1 : close] = body
            out[index] = " " * len(lines[index])
            if inner % 2 == 0 and close < len(lines):
                out[close] = " " * len(lines[close])
            opened.append(index + 1)
        index = close + 1
    return tuple(out), opened


def _new_side(line: str) -> str:
    """A unified diff's line as the file has it after the change: an added line without its `+` (a space in its
    place, so columns stay), a context line as it is, anything else blank."""
    if line.startswith("+") and not line.startswith("+++"):
        return " " + line[1:]
    if line.startswith(" ") or not line:
        return line
    return " " * len(line)


def _blank(text: str, start: int, end: int) -> str:
    """`text` with characters start..end replaced by spaces (tabs kept, so columns stay the file's)."""
    return text[:start] + "".join(c if c == "\t" else " " for c in text[start:end]) + text[end:]


# A diff's hunk header (`@@ -56,7 +56,7 @@ python -m sglang.launch_server \`): the line after it is its label, as
# a page showing a change prints it, not a command that starts there.
_HUNK_HEADER = re.compile(r"^\s*@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def find_commands(post: PostFile) -> list[Command]:
    """Every command of a post, in order, each lexed with file positions (a lexing error is kept, not raised)."""
    commands: list[Command] = []
    index = 0
    clean = post.clean
    while index < len(clean):
        if len(commands) > MAX_COMMANDS:
            raise InputError(f"{post.name}: more than {MAX_COMMANDS} commands; give the part of the post with a setup")
        text = clean[index].strip()
        if is_command_start(text):
            command, index = _gather(post, index)
            if command.error is None and index < len(clean):
                command = replace(command, unended=_unended(post, command, index))
            commands.append(command)
            continue
        line = _TRAILING_SPACE_BACKSLASH.sub("\\\\", clean[index])
        if _LAUNCH_TOKEN.search(line) and _scan_line(line, None)[1] and not _HUNK_HEADER.match(line):
            commands.append(_broken_start(post, index))
        index += 1
    return commands


def _gather(post: PostFile, start: int) -> tuple[Command, int]:
    """The command starting at line `start`: its lines up to the newline a shell would end it at."""
    clean = post.clean
    parts: list[str] = []
    notes: list[str] = []
    quote: str | None = None
    cut = None
    fence_cut = False
    index = start
    while index < len(clean) and index - start < MAX_COMMAND_LINES:
        line = clean[index]
        if quote is None and _TRAILING_SPACE_BACKSLASH.search(line):
            notes.append(
                f"{post.name}:{index + 1}: a backslash followed by spaces ends the line; a shell would end the command "
                "there (and pass a space as an argument): read as a line continuation"
            )
            line = line.rstrip(" \t")
        parts.append(line)
        quote, continued = _scan_line(line, quote)
        index += 1
        if index >= len(clean) or (continued and quote is None and not any(r.strip() for r in post.lines[index:])):
            cut = _cut(post.name, index, line) if continued and quote is None else None
            if cut and index == len(post.lines):
                cut = None
                notes.append(_FILE_ENDS_ON_BACKSLASH.format(post=post.name, line=index))
            break
        if continued and quote is None and _hunk_ends(post, index):
            cut = _hunk_cut(post.name, index, line)
            break
        following = clean[index]
        if quote is not None:
            if not following.strip() or FENCE_RE.match(post.lines[index].lstrip("> ")):
                break  # the quote never closes within the block: the lexer reports where it opened
            continue
        if not continued:
            break
        if post.fences[index - 1] and post.fences[index] != post.fences[index - 1]:
            if _in_diff(post, post.fences[index - 1]):  # a hunk is a piece of a file: the command goes on past it
                cut = _hunk_cut(post.name, index, line)
            else:
                fence_cut = True  # its fence ends after the backslash: nothing outside the fence continues it
            break
        if not following.strip() and index + 1 < len(clean) and clean[index + 1][:1] in (" ", "\t", "-"):
            notes.append(
                f"{post.name}:{index + 1}: a blank line inside the continued command; a shell would end the command "
                "there: read as one command"
            )
            parts.append("")
            index += 1
    collapsed = [n for n, part in enumerate(parts) if _COLLAPSED.search(part)]
    if collapsed:
        notes.append(
            f"{post.name}:{start + collapsed[0] + 1}: `\\ ` between words read as line continuations (the post lost "
            "its line breaks; a shell would pass each as an argument made of a space)"
        )
    try:
        words = tuple(split_words("\n".join(parts), source=post.name, first_line=start + 1, defaults=True))
        error = None
    except InputError as err:
        words, error = (), err
    return Command(post, start + 1, start + len(parts), words, error, tuple(notes), cut=cut, fence_cut=fence_cut), index


def _unended(post: PostFile, command: Command, index: int) -> tuple[int, int, str] | None:
    """The line right after `command` (which ended without a backslash) when it reads as that command's
    continuation, so a backslash was probably lost: it starts with a `--flag`/`-f`, or is indented deeper than
    the command's first line, or is one word that does not start a command, continued by its own backslash
    (`lmsysorg/sglang:latest \\`), or is the rest of a line a terminal wrapped (`_wrapped`). Blank lines,
    fences and comments end a command for certain, but in a command double-spaced by its page (a blank line read
    between its continuation lines) the line after a blank one is the one that may continue it."""
    spaced = any(not post.clean[n].strip() for n in range(command.first, command.last))
    if spaced and not post.clean[index].strip() and index + 1 < len(post.clean):
        index += 1
    text = post.clean[index]
    body = text.strip()
    if not body or body.startswith("#") or post.fences[index] != post.fences[command.first - 1]:
        return None
    if any(line == index + 1 and what.startswith("prompt ") for line, what in post.notes):
        return None  # a shell printed its prompt before the line: the command before it had ended
    last, cleaned = post.lines[command.last - 1], post.clean[command.last - 1]
    if not post.fences[command.first - 1] and "`" in last[len(cleaned) - len(cleaned.lstrip()) :]:
        return None  # inline code ends where its backticks close: the next line is the sentence's, not the command's
    first = post.clean[command.first - 1]
    deeper = len(text) - len(text.lstrip()) > len(first) - len(first.lstrip())
    flag = re.match(r"--?[A-Za-z]", body) is not None
    # one word alone on its line, continued (an image, a value): an argument, not a program of its own
    continued = not is_command_start(body) and _scan_line(body, None)[1] and len(body[:-1].split()) == 1
    if not (flag or deeper or continued or _wrapped(last, text) or _export_tail(post, command, index)):
        return None
    return index + 1, len(text) - len(text.lstrip()) + 1, body.split()[0]


def _export_tail(post: PostFile, command: Command, index: int) -> bool:
    """Whether the lines from `index` read as more names of the `export` that `command` is: `NAME=value` words
    only, continued by backslashes to a line that runs no program (a comment, a blank line, more assignments).
    Apart from the export they are the shell's variables alone, which no launch after them gets."""
    words = [w.text for w in command.words]
    if words[:1] != ["export"] or not all(ASSIGNMENT_RE.match(w) for w in words[1:]):
        return False
    text = "\n".join(post.clean)
    while index < len(post.clean):
        line = post.clean[index].strip()
        body = line[:-1].split() if line.endswith("\\") else line.split()
        if not line or line.startswith("#"):
            return True
        if not all(ASSIGNMENT_RE.match(w) for w in body):
            return False
        if all(re.search(r"\$\{?" + w.split("=", 1)[0] + r"\b", text) for w in body):
            return False  # the script's own variables, read as `$NAME` where they are used: no lost export
        if not line.endswith("\\"):
            return True
        index += 1
    return True


_TERMINAL_WIDTH = 80  # a terminal wraps a line at its width, and none is narrower than this


def _wrapped(last: str, text: str) -> bool:
    """Whether `text` reads as the rest of a line a terminal wrapped at its width: the line before is that long
    and ends inside a word (no space), `text` starts in column 1 with no program of its own and holds a `--flag`
    further on (`… --sw` then `ap-space 8 --max-num-seqs=1`); or a number split at its point (`… 0` then `.9 …`) at any
    width."""
    # `… --gpu-memory-utilization 0` then `.9 --port 8001`: a number split at its point, whatever the width
    decimal = text[:1] == "." and text[1:2].isdigit() and last[-1:].isdigit()
    if not decimal and (len(last) < _TERMINAL_WIDTH or last[-1].isspace() or not text[:1].isalnum()):
        return False
    if is_command_start(text.strip()):
        return False
    return re.search(r"\s--[A-Za-z]", text) is not None


def _broken_start(post: PostFile, index: int) -> Command:
    line = post.clean[index]
    column = len(line) - len(line.lstrip()) + 1
    first = line.split()[0]
    where = f"{post.name}: line {index + 1}, column {column}"
    if index == 0 or not post.clean[index - 1].strip():  # nothing above it to have lost a backslash
        launch = _LAUNCH_TOKEN.search(line)
        before = " ".join(line[: launch.start() if launch else len(line)].split())
        error = InputError(
            f"{where}: the launch runs under `{before}`, a program hgxkit does not read; write the launch itself "
            "(the server's own command) to import it"
        )
    else:
        error = InputError(
            f"{where}: {first!r} starts this line, so a shell runs it as the command (the line before ends without "
            "a backslash: a value broken by a line wrap?); rejoin the lines"
        )
    return Command(post, index + 1, index + 1, (), error)


def _scan_line(line: str, quote: str | None) -> tuple[str | None, bool]:
    """The quote still open at the end of `line` (entered in `quote`), and whether a backslash continues it."""
    index, length, word_start = 0, len(line), True
    while index < length:
        char = line[index]
        if quote == "'":
            quote = None if char == "'" else quote
        elif char == "\\":
            if index + 1 >= length:
                return quote, True
            index += 1
        elif quote == '"':
            quote = None if char == '"' else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and word_start:
            return None, False  # a comment runs to the end of the line
        word_start = quote is None and char in " \t;&|()"
        index += 1
    return quote, False
