"""Slurm batch scripts: `#SBATCH` lines, `srun` launches, the rank and the head read from Slurm's variables.

A post is a Slurm script when it has an `#SBATCH` line or an `srun` command. Then, before the commands are
taken (`rewrite`, which `formats.SCRIPT_FORMATS` runs on a post's simple commands):
- each `#SBATCH` line is read (`--nodes`/`-N`, `--ntasks-per-node`, `--gpus-per-node`/`--gres=gpu:N`, `--gpus`/`-G`)
  or set aside with its reason (a scheduler setting: time, partition, log files); `#SBATCH hetjob` (a heterogeneous
  job) is refused by name;
- `srun [options] COMMAND` becomes COMMAND (one task per node runs it on every host of the group), and
  `srun … bash -c "COMMAND"` the command in the string (the batch shell's variables written out first); a Docker
  launch under srun is a `docker run` like any other. `srun --container-image IMAGE [--container-mounts SRC:DST]
  LAUNCH` (enroot + pyxis) is the launch in that image, each container path of the mounts written as the host's;
  pyxis running a shell script (`bash -c …`) is refused by name; an `srun … : …` heterogeneous step is refused;
- `NAME=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)` (also `hostname`, `$SLURM_NODELIST`,
  `-n1`/`-1`), and `NAME=$(srun … -w "$HEAD" hostname --ip-address)` for such a head, define the head: the job's
  first node (`slurm-head`, which `nodes.join_ranks` replaces by the head of each deploy); any other
  substitution that asks `scontrol` stays what it is, a value the import refuses where it is used;
- the GPUs each node of the job has (those lines) are the value of `$SLURM_GPUS_ON_NODE`/`$SLURM_GPUS_PER_NODE`
  given to a flag and of `NAME=$(nvidia-smi --list-gpus | wc -l)` (hgxkit.importing.substitutions), each a note;
  without such a line either is refused by name;
- `$SLURM_NODEID` (or `$SLURM_PROCID` with one task per node) as the value of the rank flag is the rank: the
  command taken is rank 0's, and hgxkit gives each host its own. `$SLURM_PROCID` with several tasks per node,
  `$SLURM_LOCALID`, and `$SLURM_NNODES`/`$SLURM_JOB_NUM_NODES` where the job's node count is not written are
  refused by name.

What is left of the script (module loads, waits, health loops, `echo`) is set aside line by line, each with its reason.

Example:
    >>> from hgxkit.importing.importer import import_post
    >>> script = ("#!/bin/bash\\n#SBATCH --nodes=2\\n#SBATCH --gpus-per-node=8\\n"
    ...           'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\\n'
    ...           "srun python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 "
    ...           '--node-rank "$SLURM_NODEID" --dist-init-addr "$HEAD:5000"\\n')
    >>> recipe = import_post([("job.sbatch", script)]).recipe
    >>> " ".join(recipe.server.words()[7:13]), recipe.groups.nodes, recipe.groups.size
    ('--nnodes 2 --node-rank {{rank}} --dist-init-addr {{head}}:{{dist_port}}', 2, 8)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hgxkit.errors import InputError
from hgxkit.importing.commands import ContainerExec, Simple, host_paths, simple_commands
from hgxkit.importing.post import Command, PostFile
from hgxkit.importing.reading import Reading
from hgxkit.importing.substitutions import counts_gpus, with_count
from hgxkit.importing.variables import Scope
from hgxkit.kinds import KINDS
from hgxkit.recipe.shellwords import Word, split_words

HEAD = "slurm-head"  # the job's first node in the imported command; `join_ranks` replaces it by each deploy's head
_DIRECTIVE = re.compile(r"^\s*#SBATCH\s+(.*?)\s*(?:#.*)?$")
_HEAD_SUB = re.compile(
    r"^\s*(?:export\s+)?(?P<name>[A-Za-z_]\w*)=\"?\$\(\s*scontrol\s+show\s+hostnames?\s+"
    r"(?P<q>[\"']?)\$\{?SLURM_(?:JOB_)?NODELIST\}?(?P=q)\s*\|\s*head\s+(?:-n\s*1|-1)\s*\)\"?\s*(?:#.*)?$"
)
_HEAD_IP = re.compile(
    r"^\s*(?:export\s+)?(?P<name>[A-Za-z_]\w*)=\"?\$\(\s*srun\s+(?:-{1,2}[\w-]+(?:=\S+)?\s+)*?"
    r"(?:-w|--nodelist)[=\s]+[\"']?\$\{?(?P<head>[A-Za-z_]\w*)\}?[\"']?\s+(?:-{1,2}[\w-]+(?:=\S+)?\s+)*"
    r"hostname\s+(?:--ip-address|-i|-I)\s*\)\"?\s*(?:#.*)?$"
)
_SUBSTITUTED = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=[\"']?(?:\$\(|`)")
# srun options that take a value as the next word (the rest are flags, or `--opt=value` in one word).
_SRUN_VALUES = frozenset(
    {
        "-N",
        "--nodes",
        "-n",
        "--ntasks",
        "--ntasks-per-node",
        "-w",
        "--nodelist",
        "-x",
        "--exclude",
        "-o",
        "--output",
        "-e",
        "--error",
        "-p",
        "--partition",
        "-c",
        "--cpus-per-task",
        "--mem",
        "--gpus",
        "-G",
        "--gres",
        "--gpus-per-node",
        "-J",
        "--job-name",
        "-t",
        "--time",
        "--export",
        "--mpi",
        "-A",
        "--account",
        "-q",
        "--qos",
        "--container-image",
        "--container-mounts",
        "--container-workdir",
        "--container-name",
        "--container-env",
        "--het-group",
        "-D",
        "--chdir",
        "--cpu-bind",
        "--gpu-bind",
        "--mem-per-gpu",
        "-i",
        "--input",
        "--distribution",
        "-m",
        "--reservation",
        "--constraint",
        "-C",
    }
)
_RANKS = ("SLURM_NODEID", "SLURM_PROCID")
_NODE_COUNTS = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES")
_GPU_COUNTS = ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE")  # what Slurm sets from the job's GPU request
_SLURM_VAR = re.compile(r"\$\{?(SLURM_[A-Z_]+)\}?")
_SHELLS = frozenset({"bash", "sh", "/bin/bash", "/bin/sh"})


@dataclass
class Directives:
    """What the `#SBATCH` lines of a script say (None: not written)."""

    nodes: int | None = None
    tasks_per_node: int | None = None
    gpus_per_node: int | None = None
    tasks: int | None = None
    gpus: int | None = None  # the job's GPUs (`--gpus`, `-G`), per node on a job of one node
    gpus_line: str = ""  # the `#SBATCH` line that gives the GPU count

    def node_gpus(self) -> int | None:
        """The GPUs each node of the job has: `--gpus-per-node`/`--gres`, or `--gpus` on a job of one node."""
        if self.gpus_per_node is not None:
            return self.gpus_per_node
        return self.gpus if (self.nodes or 1) == 1 else None


class _Slurm:
    """The Slurm script format: rewrites a script's commands (see the module docstring), then reports its
    directives as read or set aside."""

    name = "Slurm script"

    def claims(self, simple: Simple) -> bool:
        return simple.kind == "slurm"

    def take(self, simple: Simple, reading: Reading) -> None:
        action, _, what = simple.notes[0].partition(" ")
        reading.said(simple, action, what)

    def rewrite(self, post: PostFile, simples: list[Simple]) -> list[Simple]:
        """The post's simple commands with its Slurm parts read (see the module docstring); a post that is no
        Slurm script comes back as it was."""
        directives_at = [(n, m.group(1)) for n, line in enumerate(post.clean, 1) if (m := _DIRECTIVE.match(line))]
        sruns = [s for s in simples if s.words and s.words[0].text == "srun" and not s.words[0].is_operator]
        if not directives_at and not sruns:
            return simples
        directives = Directives()
        out: list[Simple] = [_directive(post, number, text, directives) for number, text in directives_at]
        heads = _heads(post)
        head_lines = {line for line, _, _ in heads}
        kept = [s for s in simples if s.command.first not in head_lines]
        for line, name, why in heads:
            word = Word(f"{name}={HEAD}", line, 1, False)
            note = f"{post.name}:{line}: ${name} is {why}: the job's first node, the group's head"
            kept.append(Simple(Command(post, line, line, (word,)), "assign", (word,), notes=(note,)))
        taken = {s.command.first for s in kept} | head_lines
        for line, name in _substituted(post):
            if line not in taken:  # no single value: a server that uses it is refused, naming this line
                word = Word(f"{name}=", line, 1, False)
                opening = Word("$(", line, len(name) + 2, False, True)
                kept.append(Simple(Command(post, line, line, (word,)), "assign", (word,), substitution=opening))
        for line, why in _script_lines(post):
            if line not in taken:
                kept.append(Simple(Command(post, line, line, ()), "slurm", (), notes=(f"skipped {why}",)))
        kept.sort(key=lambda s: s.command.first)
        kept = [_head_in_value(_gpu_count(s, directives), {name for _, name, _ in heads}) for s in kept]
        wrapped = {id(s) for s in sruns}
        for simple in kept:
            if id(simple) in wrapped:
                out += _unwrap(simple, kept, directives)
            else:
                out.append(simple)
        out = sorted(out, key=lambda s: s.command.first)
        branches = _rank_branches(out)
        return [_ranked(_unlabelled(s), directives, branches.get(id(s))) for s in out]


SLURM = _Slurm()

_SRUN_LINE = re.compile(r"^\s*srun\b")


def runs_under_slurm(post: PostFile) -> bool:
    """Whether the post is a Slurm script (an `#SBATCH` line or an `srun` command), whose one command every node
    of the job runs in the same environment."""
    return any(_DIRECTIVE.match(line) or _SRUN_LINE.match(line) for line in post.clean)


def _directive(post: PostFile, number: int, text: str, directives: Directives) -> Simple:
    """One `#SBATCH` line as a report-only simple command: `read …` or `skipped …` (its notes[0])."""
    words = text.split()
    if words and words[0] in ("hetjob", "packjob"):
        raise InputError(
            f"{post.name}: line {number}: #SBATCH {words[0]}: a heterogeneous job (components with "
            "their own nodes) is not imported; give the job of the serving group alone"
        )
    option, _, value = (words[0] if words else "").partition("=")
    if not value and len(words) > 1:
        value = words[1]
    read = None
    if option in ("--nodes", "-N") and value.isdigit():
        directives.nodes = int(value)
        read = f"read #SBATCH {text} (the job's nodes: the group spans {value} hosts)"
    elif option in ("--nodes", "-N"):
        raise InputError(f"{post.name}: line {number}: #SBATCH {text}: a node range; write the group's node count")
    elif option == "--ntasks-per-node" and value.isdigit():
        directives.tasks_per_node = int(value)
        read = f"read #SBATCH {text} (tasks per node)"
    elif option in ("--ntasks", "-n") and value.isdigit():
        directives.tasks = int(value)
        read = f"read #SBATCH {text} (tasks of the job)"
    elif option in ("--gpus-per-node", "--gres") and (gpus := re.fullmatch(r"(?:gpu:)?(?:[\w-]+:)?(\d+)", value)):
        directives.gpus_per_node, directives.gpus_line = int(gpus.group(1)), f"#SBATCH {text}"
        read = f"read #SBATCH {text} (GPUs per node: the server's parallel sizes give the group's)"
    elif option in ("--gpus", "-G") and (gpus := re.fullmatch(r"(?:[\w-]+:)?(\d+)", value)):
        directives.gpus, directives.gpus_line = int(gpus.group(1)), f"#SBATCH {text}"
        read = f"read #SBATCH {text} (the job's GPUs: the server's parallel sizes give the group's)"
    elif option == "--exclusive":
        read = f"read #SBATCH {text} (whole nodes: hgxkit's groups place the GPUs)"
    note = read or f"skipped #SBATCH {text} (a scheduler setting; hgxkit deploys on the inventory's hosts)"
    return Simple(Command(post, number, number, ()), "slurm", (), notes=(note,))


def _job_gpus(value: Word, name: str, directives: Directives, notes: list[str], said: str) -> Word:
    """`$SLURM_GPUS_ON_NODE` as a flag's value: the GPUs the `#SBATCH` lines give each node (a note); refused
    naming it where they give none, as Slurm's value is then the cluster's default, not the post's."""
    count = directives.node_gpus()
    if count is None:
        raise InputError(
            f"{said} ${name} is the GPU count Slurm gives the job, which no #SBATCH line of the script says "
            "(--gres=gpu:N or --gpus-per-node=N); write the value"
        )
    notes.append(f"{said} ${name} is {count} ({directives.gpus_line})")
    return replace(value, text=str(count))


def _gpu_count(simple: Simple, directives: Directives) -> Simple:
    """`TP=$(nvidia-smi --list-gpus | wc -l)` in a job whose `#SBATCH` lines give its GPUs: that count, which is
    what `nvidia-smi` lists inside the job; any other substitution stays one the import refuses where it is used."""
    count = directives.node_gpus()
    if count is None or not counts_gpus(simple):
        return simple
    return with_count(simple, count, f"the job is given ({directives.gpus_line})")


def _heads(post: PostFile) -> list[tuple[int, str, str]]:
    """(line, NAME, how) of the lines that set a variable to the job's first node (or its address)."""
    found: list[tuple[int, str, str]] = []
    names: set[str] = set()
    for number, line in enumerate(post.clean, 1):
        match = _HEAD_SUB.match(line)
        if match:
            found.append((number, match.group("name"), "`scontrol show hostnames … | head -n 1`"))
            names.add(match.group("name"))
            continue
        match = _HEAD_IP.match(line)
        if match and match.group("head") in names:
            found.append((number, match.group("name"), f"the address of ${match.group('head')}"))
            names.add(match.group("name"))
    return found


def _head_in_value(simple: Simple, names: set[str]) -> Simple:
    """An assignment whose value names a head variable (`ADDR="${HEAD_NODE}:8000"`) with the head written in: a
    variable's value is not expanded again where it is used."""
    if simple.kind not in ("assign", "export") or not names:
        return simple
    pattern = re.compile(
        r"\$(?:\{(" + "|".join(map(re.escape, names)) + r")\}|(" + "|".join(map(re.escape, names)) + r")\b)"
    )
    words = tuple(replace(w, text=pattern.sub(HEAD, w.text)) if "=" in w.text else w for w in simple.words)
    return simple if words == simple.words else replace(simple, words=words)


# Lines of a batch script that set up the cluster's shell, not the server: each set aside with its reason.
_SCRIPT_LINES = (
    (re.compile(r"^#!\S+"), "the script's interpreter line"),
    (re.compile(r"^(?:module|ml)\s+\S"), "an environment module of the cluster; the container brings its own"),
    (re.compile(r"^set\s+[-+]\w+"), "shell options of the batch script"),
)


def _script_lines(post: PostFile) -> list[tuple[int, str]]:
    """(line, why) of the batch script's own setup lines (`#!`, `module load`, `set -e`)."""
    found = []
    for number, line in enumerate(post.clean, 1):
        text = line.strip()
        why = next((what for pattern, what in _SCRIPT_LINES if pattern.match(text)), None)
        if why is not None:
            found.append((number, f"{text} ({why})"))
    return found


def _substituted(post: PostFile) -> list[tuple[int, str]]:
    """(line, NAME) of each `NAME=$(…)` line (the shell scan does not take them as commands): a value the import
    cannot know (another node's address, `scontrol … | tail -n 1`)."""
    return [(n, m.group(1)) for n, line in enumerate(post.clean, 1) if (m := _SUBSTITUTED.match(line))]


def _srun_split(words: Sequence[Word], where: str) -> tuple[dict[str, str], list[Word]]:
    """(srun's options, the command it runs)."""
    options: dict[str, str] = {}
    index = 1
    while index < len(words) and words[index].text.startswith("-") and not words[index].is_operator:
        name, equals, value = words[index].text.partition("=")
        if not equals and name in _SRUN_VALUES and index + 1 < len(words):
            index += 1
            value = words[index].text
        options[name] = value
        index += 1
    rest = list(words[index:])
    if any(w.text == ":" and not w.quoted for w in rest):
        raise InputError(
            f"{where}: `srun … : …` runs a heterogeneous step (components with their own options); "
            "give the serving group's srun alone"
        )
    return options, rest


def _task_count(options: dict[str, str]) -> int | None:
    """The tasks srun's `-n N` (`-nN`, `--ntasks=N`) asks for in all, or None where it does not say."""
    for name, value in options.items():
        if name in ("-n", "--ntasks"):
            written = value
        elif name.startswith("-n") and not name.startswith("--"):
            written = name[2:]  # `-n1`: the value glued to the option
        else:
            continue
        return int(written) if written.isdigit() else None
    return None


def _unwrap(simple: Simple, simples: list[Simple], directives: Directives) -> list[Simple]:
    """The simple command(s) `srun` runs, with a note; pyxis (`--container-image`) refused by name."""
    where = simple.where()
    options, rest = _srun_split(simple.words, where)
    image = options.get("--container-image")
    tasks = options.get("--ntasks-per-node")
    if tasks and tasks.isdigit():
        directives.tasks_per_node = int(tasks)
    if not rest:
        return [replace(simple, kind="other")]
    note = (
        f"{where}: `srun -n 1` runs the command once, on a node of the job; hgxkit runs it on the group's host"
        if _task_count(options) == 1
        else f"{where}: `srun` runs the command as one task per node; hgxkit runs it on every host of the group"
    )
    shell = rest[0].text in _SHELLS and len(rest) >= 3 and rest[1].text in ("-c", "-lc", "-l")
    if image is not None and shell and (image.startswith(("/", ".", "$")) or image.endswith(".sqsh")):
        raise InputError(
            f"{where}: srun --container-image {image} is a local enroot image (a squashfs file), which a node cannot "
            "pull: give --image REF, the registry image it was made from (and the server command pyxis runs)"
        )
    if image is not None and shell:
        raise InputError(
            f"{where}: srun --container-image {image} runs a shell script in the container with enroot + pyxis, "
            "which hgxkit does not import (it reads a launch pyxis runs directly); give the server command under "
            "srun, or write `docker run …` there"
        )
    early = _batch_expanded(rest[2].text if shell else " ".join(w.text for w in rest))
    if early:
        note += (
            f"; as published, the batch shell expands ${early} before srun starts the tasks, so every node would "
            f"get 0 (`srun bash -c '… ${early}'` reads each task's own); the recipe gives each host its rank"
        )
    if shell:
        try:
            rest = _inner(simple, rest, simples)
        except InputError as err:  # a string the import cannot read: a server in it is refused, else set aside
            return [replace(simple, kind="broken", command=replace(simple.command, error=err))]
    command = replace(simple.command, words=tuple(rest))  # its lines, notes and a lost backslash after it kept
    inner = [
        replace(s, prefix=simple.prefix + s.prefix, notes=(*s.notes, note), piped=simple.piped)
        for s in simple_commands([command])
    ]
    return inner if image is None else [_in_pyxis(s, simple, image, options) for s in inner]


def _in_pyxis(simple: Simple, srun: Simple, image: str, options: dict[str, str]) -> Simple:
    """A launch `srun --container-image IMAGE` runs (enroot + pyxis) as a launch in that image, each container path
    of its `--container-mounts SRC:DST` written as the host's (a note each); another command as it is."""
    if simple.kind != "server":
        return simple
    binds = [m.split(":")[:2] for m in options.get("--container-mounts", "").split(",") if m]
    notes = [f"{srun.where()}: `srun --container-image {image}` (enroot + pyxis) runs it in that image"]
    words = host_paths(list(simple.words), binds, srun.command.post.name, notes, "--container-mounts")
    word = next(w for w in srun.words if image in w.text)
    container = ContainerExec(replace(word, text=image), "pyxis")
    return replace(simple, words=tuple(words), notes=(*simple.notes, *notes), container=container)


def _batch_expanded(text: str) -> str | None:
    """The rank variable `text` expands in the batch shell (`$SLURM_NODEID`, not the literal `$$SLURM_NODEID` a
    `bash -c` string passes on to each task), or None."""
    found = [m.group(1) for m in _SLURM_VAR.finditer(re.sub(r"\$\$\w+", "", text)) if m.group(1) in _RANKS]
    return found[0] if found else None


def _inner(simple: Simple, rest: list[Word], simples: list[Simple]) -> list[Word]:
    """The words of `bash -c "STRING"` under srun: the batch shell's variables written out, then the string
    split as the task's shell splits it (a `\\$NAME` the task expands stays `$NAME`)."""
    string = rest[2] if rest[1].text != "-l" else rest[3] if len(rest) > 3 else rest[2]
    where = f"{simple.command.post.name}:{string.line}"
    scope = Scope.before(simples, simple)
    text, _, _ = scope.resolve(string.text, where=where)
    # The task's shell runs each line of the string as its own command (a `\\<newline>` inside double quotes
    # is gone by now): a line break left in it is a lost continuation backslash or a second command.
    body = [line.strip() for line in text.split("\n")]
    broken = next((n for n, line in enumerate(body[1:], 1) if line and body[n - 1]), None)
    if broken is not None:
        why = (
            "a continuation backslash may be missing"
            if body[broken].startswith("-")
            else "the string holds several commands; hgxkit imports one"
        )
        raise InputError(
            f"{simple.command.post.name}:{string.line + broken}: srun's `bash -c` string breaks its line before "
            f"{body[broken].split()[0]!r}: {why}; join the lines with `\\` or give the server command alone"
        )
    try:
        words = split_words(text.replace("$$", "$"), source=where, first_line=string.line)
    except InputError as err:
        raise InputError(f"{where}: srun's `bash -c` string: {err.message}") from None
    return [
        Word(w.text, w.line, w.column if w.line != string.line else string.column + w.column, w.quoted, w.is_operator)
        for w in words
    ]


_RANK_TEST = re.compile(r"^if \[\[? \$\{?SLURM_NODEID\}? (?:=|==|-eq) 0 \]\]?$")


def _rank_branches(simples: Sequence[Simple]) -> dict[int, int]:
    """id(simple) -> the rank it runs as, for the commands of `if [ "$SLURM_NODEID" = 0 ]; then A; else B; fi`:
    A is rank 0's, B the other ranks' (rank 1 stands for them). Such a branch is no shell logic the import must
    refuse: it is how a script gives the head and the workers their commands."""
    found: dict[int, int] = {}
    stack: list[int | None] = []  # per open `if`: the rank of the branch we are in (None: another test)
    for simple in simples:
        head = simple.texts[0] if simple.words else ""
        if head == "if":
            stack.append(0 if _RANK_TEST.match(" ".join(simple.texts)) else None)
        elif head in ("else", "elif") and stack and stack[-1] is not None:
            stack[-1] = 1 if head == "else" else None
        elif head == "fi" and stack:
            stack.pop()
        elif stack and stack[-1] is not None and simple.in_block == "if" and simple.kind not in ("control",):
            found[id(simple)] = stack[-1]
    return found


_HGXKIT_LABEL = re.compile(r"^hgxkit[.=]")


def _unlabelled(simple: Simple) -> Simple:
    """A `docker run` without hgxkit's own `--label hgxkit.…` options (an export's: a deploy writes its own)."""
    if simple.kind != "docker-run":
        return simple
    words = list(simple.words)
    kept: list[Word] = []
    index = 0
    while index < len(words):
        text = words[index].text
        if text == "--label" and index + 1 < len(words) and _HGXKIT_LABEL.match(words[index + 1].text):
            index += 2
            continue
        if text.startswith("--label=") and _HGXKIT_LABEL.match(text[len("--label=") :]):
            index += 1
            continue
        kept.append(words[index])
        index += 1
    if len(kept) == len(words):
        return simple
    note = f"{simple.where()}: hgxkit's own labels (--label hgxkit.…) dropped: a deploy labels its containers"
    return replace(simple, words=tuple(kept), notes=(*simple.notes, note))


def _ranked(simple: Simple, directives: Directives, branch: int | None = None) -> Simple:
    """A server command (bare or in a `docker run`) whose rank (or node count) is a Slurm variable, written as
    rank 0's (or, in the workers' branch of a rank test, rank 1's; see the module docstring); anything else as
    it is."""
    if branch is not None:
        simple = replace(simple, in_block=None)
    if simple.kind == "server" and simple.engine in KINDS:
        kinds = [KINDS[simple.engine]]
    elif simple.kind == "docker-run":
        kinds = list(KINDS.values())  # the server's flags follow the image: any kind's spelling
    else:
        return simple
    rank = branch or 0
    words = list(simple.words)
    notes = list(simple.notes)
    where = simple.command.post.name
    nodes: str | None = None
    for index, word in enumerate(words[:-1]):
        flag = word.text.split("=", 1)[0]
        is_rank = any(k.canonical_flag(flag) == k.rank_flag for k in kinds)
        is_nnodes = any(k.canonical_flag(flag) == k.nnodes_flag for k in kinds)
        value = words[index + 1]
        if is_nnodes:
            nodes = value.text
        match = re.fullmatch(r"\$\{?(SLURM_[A-Z_]+)\}?", value.text)
        if match is not None and match.group(1) in _GPU_COUNTS:
            words[index + 1] = _job_gpus(value, match.group(1), directives, notes, f"{where}:{value.line}: {flag}")
            continue
        if match is None or not (is_rank or is_nnodes):
            continue
        name = match.group(1)
        at = f"{where}: line {value.line}, column {value.column}"
        if is_rank:
            per_node = directives.tasks_per_node or 1
            if name == "SLURM_PROCID" and per_node > 1:
                raise InputError(
                    f"{at}: {flag} $SLURM_PROCID with {per_node} tasks per node counts tasks, not "
                    "nodes; the node rank is $SLURM_NODEID"
                )
            if name not in _RANKS:
                raise InputError(
                    f"{at}: {flag} ${name} is not the node's rank (that is $SLURM_NODEID); write "
                    "the rank as $SLURM_NODEID"
                )
            words[index + 1] = replace(value, text=str(rank))
            whose = "rank 0 is the command taken" if rank == 0 else "the workers' branch: rank 1 stands for them"
            notes.append(
                f"{where}:{value.line}: {flag} ${name} is the rank ({whose}; hgxkit gives each host its own rank)"
            )
        elif name in _NODE_COUNTS:
            if directives.nodes is None:
                raise InputError(f"{at}: {flag} ${name}: the script writes no #SBATCH --nodes; write the node count")
            nodes = str(directives.nodes)
            words[index + 1] = replace(value, text=nodes)
            notes.append(f"{where}:{value.line}: {flag} ${name} is #SBATCH --nodes={directives.nodes}")
    if directives.nodes is not None and nodes is not None and nodes.isdigit() and int(nodes) != directives.nodes:
        raise InputError(
            f"{simple.where()}: --nnodes {nodes} but #SBATCH --nodes={directives.nodes}: the job's "
            "nodes and the server's differ; make them one count"
        )
    if words == list(simple.words):
        return simple
    return replace(simple, words=tuple(words), notes=tuple(notes))
