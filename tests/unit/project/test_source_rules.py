"""Rules the source itself must keep, checked by reading it (ast), so a change that breaks one fails here:

- every host command is built in one place (hgxkit/hostcmd.py): no shell command is assembled by string
  formatting (f-string, `%`, `.format`, `+`) from a value, and every `script()` template is a literal;
- no module under roles/ imports another role; no module under hgxkit/ imports roles (the library never reaches
  up); no import circle anywhere in hgxkit/ or roles/, counting imports inside functions, `importlib` imports,
  and a package's `__init__` importing its own submodules like any other edge;
- every import goes to the same floor or one below (`FLOORS`): the simulator is the top floor of the library,
  and only the command line's registration imports it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Where host commands are built from values: the one quoting place.
HELPER = ROOT / "hgxkit" / "hostcmd.py"
# Programs a host command starts with; a formatted string that starts like this is a shell command.
SHELL_WORDS = [
    "apt-get",
    "apt-mark",
    "bash",
    "cat",
    "cd",
    "chmod",
    "cp",
    "curl",
    "dcgmi",
    "df",
    "docker",
    "dpkg",
    "dpkg-query",
    "echo",
    "export",
    "flock",
    "for",
    "grep",
    "head",
    "if",
    "journalctl",
    "ln",
    "mkdir",
    "mount",
    "mv",
    "nsenter",
    "nvidia-ctk",
    "nvidia-smi",
    "pip",
    "printf",
    "python",
    "python3",
    "rm",
    "sh",
    "snap",
    "ss",
    "ssh-keygen",
    "stat",
    "systemctl",
    "systemd-run",
    "tail",
    "test",
    "touch",
    "umask",
]
SHELL_START = re.compile(r"^\s*(?:" + "|".join(re.escape(w) for w in SHELL_WORDS) + r")(?:\s|$)")
COMMAND_CALLS = {"run", "status", "run_shell_command", "StringCommand", "shell"}
# Strings passed to these are messages for people (errors, problems, log lines), not commands.
MESSAGE_CALLS = {
    "Problem",
    "DeployError",
    "HgxkitError",
    "InputError",
    "ValueError",
    "TypeError",
    "KeyError",
    "RuntimeError",
    "FetchError",
    "AssertionError",
    "SystemExit",
    "echo",
    "log",
    "print",
    "info",
    "warning",
    "error",
    "debug",
    "fail",
}


@functools.cache
def _parse(text: str, name: str) -> ast.Module:
    return ast.parse(text, name)


def parsed(path: Path) -> ast.Module:
    """`path`'s syntax tree, parsed once per text in a test process: several rules walk every file (read only)."""
    return _parse(path.read_text(), str(path))


def sources() -> Iterator[Path]:
    for top in ("hgxkit", "roles", "deploys"):
        yield from sorted((ROOT / top).rglob("*.py"))


def literal_start(node: ast.expr) -> str | None:
    """The literal text a formatted string starts with, when the node builds a string from parts."""
    if isinstance(node, ast.JoinedStr):
        first = node.values[0] if node.values else None
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        left = node.left
        while isinstance(left, ast.BinOp):
            left = left.left
        if isinstance(left, ast.Constant) and isinstance(left.value, str):
            return left.value
        return literal_start(left) if isinstance(left, ast.JoinedStr) else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return node.func.value.value
    return None


def has_value(node: ast.expr) -> bool:
    """True when a formatted string takes a value (a name, call, attribute…), not only constants."""
    return any(
        not isinstance(n, ast.Constant)
        for n in ast.walk(node)
        if isinstance(n, ast.expr)
        and n is not node
        and not isinstance(n, ast.JoinedStr | ast.FormattedValue | ast.BinOp)
    )


def in_message(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True when `node` is (part of) an argument of a call that takes a message for people."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            return name in MESSAGE_CALLS
        if isinstance(node, ast.stmt):
            return False
    return False


def formatted_shell_commands(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, why) for each shell command assembled by formatting, and each non-literal script template."""
    found = []
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if (
                name == "script"
                and node.args
                and not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))
            ):
                found.append((node.lineno, "script() template is not a literal"))
            if name in COMMAND_CALLS:
                for arg in [*node.args, *(k.value for k in node.keywords if k.arg in (None, "commands"))]:
                    items = arg.elts if isinstance(arg, ast.List | ast.Tuple) else [arg]
                    for item in items:
                        if literal_start(item) is not None and has_value(item):
                            found.append((item.lineno, f"{name}() gets a formatted string"))
        start = literal_start(node) if isinstance(node, ast.expr) else None
        if start is not None and SHELL_START.match(start) and has_value(node) and not in_message(node, parents):
            found.append((node.lineno, f"formatted shell command {start.strip()[:30]!r}…"))
    return sorted(set(found))


def test_host_commands_are_never_assembled_by_string_formatting() -> None:
    offenders = []
    for path in sources():
        if path == HELPER:
            continue
        for line, why in formatted_shell_commands(parsed(path)):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert not offenders, "build host commands with hgxkit.hostcmd.argv/script:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "code",
    [
        'run(f"docker rm -f {name}")',
        'host.run_shell_command("docker stop " + name)',
        'server.shell(commands=[f"mkdir -p {path}"])',
        'cmd = "cat {}".format(path)',
        'line = "test -f %s" % path',
        "run(script(template, path=p))",
        'run(script("docker logs " + name))',
    ],
)
def test_the_rule_catches_a_formatted_command_put_back(code: str) -> None:
    assert formatted_shell_commands(ast.parse(code)), code


@pytest.mark.parametrize(
    "code",
    [
        'run(argv("docker", "rm", "-f", name))',
        'run(script("test -f {path} && echo yes", path=p))',
        'raise DeployError(f"{host.name}: `docker pull {ref}` gave no digest")',
        'echo(f"[{host.name}] group {n} is serving")',
        'problems.append(Problem("gpus", f"nvidia-smi fails ({smi.failure})", "run bring-up"))',
        'run(script("docker info --format {f}", f="{{json .}}"))',
    ],
)
def test_the_rule_lets_quoted_commands_and_messages_pass(code: str) -> None:
    assert formatted_shell_commands(ast.parse(code)) == [], code


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for top in ("hgxkit", "roles") for p in sorted((root / top).rglob("*.py"))}


IMPORT_CALLS = {"import_module", "__import__"}


def imported_names(path: Path, modules: Collection[str] = (), root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, dotted name) for everything `path` imports: at module level or inside a function alike, and through
    `importlib.import_module`/`__import__` (a formatted name gives its literal start, e.g. "roles.").

    `from pkg import name` names `pkg.name` when that is a module in `modules`, else `pkg` (the module that
    defines `name`): a submodule importing names back from its package's `__init__` is an edge to it.
    """
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                found.append((node.lineno, f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base))
        elif isinstance(node, ast.Call) and node.args:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[0]
            if name in IMPORT_CALLS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
            elif name in IMPORT_CALLS and (start := literal_start(first)):
                found.append((node.lineno, start))
    return found


def imports_of(path: Path, modules: Collection[str], root: Path = ROOT) -> set[str]:
    """Project modules `path` imports (see `imported_names`), each resolved to the module file that holds it."""
    here = module_name(path, root)
    found = set()
    for _, target in imported_names(path, modules, root):
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != here:
            found.add(target)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {name: imports_of(path, modules, root) for name, path in modules.items()}


def test_no_role_imports_another_role() -> None:
    bad = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module.startswith("roles.")
        for target in targets
        if target.startswith("roles.") and target.split(".")[1] != module.split(".")[1]
    ]
    assert not bad, "roles call hgxkit, never each other:\n" + "\n".join(bad)


def library_imports_of_roles(root: Path = ROOT) -> list[str]:
    """`file:line: name` for each import of `roles` (in any form) by a module under hgxkit/."""
    modules = project_modules(root)
    return [
        f"{path.relative_to(root)}:{line}: imports {name}"
        for path in sorted((root / "hgxkit").rglob("*.py"))
        for line, name in imported_names(path, modules, root)
        if name == "roles" or name.startswith("roles.")
    ]


def test_no_library_module_imports_roles() -> None:
    found = library_imports_of_roles()
    assert not found, "hgxkit is the library roles call; a deploy hands it what it needs:\n" + "\n".join(found)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


# Circles allowed: none. An import inside a function counts too (a role importing a module that imports the role
# back); helpers two modules share belong in the library (the serve role's are in hgxkit/serving/steps.py).
KNOWN_CIRCLES: list[list[str]] = []


def test_no_import_circle_in_hgxkit_or_roles() -> None:
    found = cycles(import_graph())
    assert found == KNOWN_CIRCLES, "import circles (expected only KNOWN_CIRCLES):\n" + "\n".join(
        " <-> ".join(group) for group in found
    )


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_circle_through_a_function_level_import_and_a_package_init_is_found(tmp_path: Path) -> None:
    """Today's serve-role shape: `__init__` imports its submodule inside a function, which imports names back."""
    root = write_tree(
        tmp_path,
        {
            "hgxkit/__init__.py": "",
            "roles/__init__.py": "",
            "roles/serve/__init__.py": "def _pull():\n    pass\n\n\ndef serve():\n    from roles.serve.group import go\n    go()\n",
            "roles/serve/group.py": "from roles.serve import _pull\n",
            "roles/serve/defaults.py": "DEFAULTS = {}\n",
            "roles/other/__init__.py": "from roles.other import defaults\nfrom .defaults import DEFAULTS\n",
            "roles/other/defaults.py": "DEFAULTS = {}\n",
        },
    )
    graph = import_graph(root)
    assert graph["roles.serve"] == {"roles.serve.group"} and graph["roles.serve.group"] == {"roles.serve"}
    assert graph["roles.other"] == {"roles.other.defaults"}  # a submodule imported by name is that submodule
    assert cycles(graph) == [["roles.serve", "roles.serve.group"]]


@pytest.mark.parametrize(
    "code",
    [
        "import roles.docker",
        "from roles.docker.defaults import DEFAULTS",
        "def knobs():\n    from roles import preflight\n    return preflight",
        "import importlib\nDEFAULTS = importlib.import_module('roles.docker.defaults').DEFAULTS",
        "from importlib import import_module\ndef knobs(role):\n    return import_module(f'roles.{role}.defaults')",
        "mod = __import__('roles')",
    ],
)
def test_the_library_rule_catches_every_form_of_importing_roles(tmp_path: Path, code: str) -> None:
    root = write_tree(tmp_path, {"hgxkit/__init__.py": "", "hgxkit/node/bringup.py": code, "roles/__init__.py": ""})
    found = library_imports_of_roles(root)
    assert len(found) == 1 and found[0].startswith("hgxkit/node/bringup.py:"), (code, found)


def test_the_library_rule_lets_other_names_pass(tmp_path: Path) -> None:
    code = "import rolesets\nfrom hgxkit import roles_table\nname = 'roles.docker'\n"
    root = write_tree(tmp_path, {"hgxkit/__init__.py": "", "hgxkit/x.py": code, "roles/__init__.py": ""})
    assert library_imports_of_roles(root) == []


# The floors of hgxkit and roles, bottom first: a module imports its own floor or the ones below, never above.
FLOORS: list[tuple[str, ...]] = [
    # facts with no feature behind them: errors, host commands, the engines' option tables, nvidia-smi's output
    ("hgxkit", "hgxkit.engines", "hgxkit.nvidia"),
    ("hgxkit.results",),  # benchmark records, statistics, archives, reports
    ("hgxkit.kinds",),  # server kinds: how each engine is launched, benchmarked and scraped
    ("hgxkit.recipe",),  # the recipe: model, checks, render
    ("hgxkit.importing", "hgxkit.model"),
    ("hgxkit.node",),
    ("hgxkit.serving",),
    ("hgxkit.verify",),
    ("hgxkit.export",),
    ("hgxkit.monitoring", "hgxkit.bundle"),
    ("hgxkit.cli", "hgxkit.__main__"),
    ("hgxkit.sim",),  # the test bench: reads the library, which never reads it
    ("roles",),
]
# The one import up the floors: the command line registers `hgxkit sim`.
REGISTRATIONS = {("hgxkit.cli", "hgxkit.sim.cli")}


def floor_of(module: str) -> int:
    """The floor of `module`: the one whose longest name is a prefix of it."""
    best, floor = -1, 0
    for number, names in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best:
                best, floor = len(name), number
    return floor


def imports_up(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if floor_of(target) > floor_of(module) and (module, target) not in REGISTRATIONS
    ]


def test_no_import_runs_up_the_floors() -> None:
    found = imports_up(import_graph())
    assert not found, "imports that run up FLOORS:\n" + "\n".join(found)


def simulator_importers(root: Path = ROOT) -> list[str]:
    """`file:line: name` for each import of the simulator from outside it (deploys and inventories included)."""
    modules = project_modules(root)
    found = []
    for top in ("hgxkit", "roles", "deploys", "inventories"):
        for path in sorted((root / top).rglob("*.py")):
            here = module_name(path, root)
            if here == "hgxkit.sim" or here.startswith("hgxkit.sim."):
                continue
            for line, name in imported_names(path, modules, root):
                simulator = name == "hgxkit.sim" or name.startswith("hgxkit.sim.")
                if simulator and (here, name) not in REGISTRATIONS:
                    found.append(f"{path.relative_to(root)}:{line}: imports {name}")
    return found


def test_only_the_command_line_registration_imports_the_simulator() -> None:
    found = simulator_importers()
    assert not found, "the simulator reads the library, never the other way:\n" + "\n".join(found)


def test_the_simulator_rule_catches_a_deploy_that_imports_it(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "hgxkit/__init__.py": "",
            "hgxkit/cli/__init__.py": "def parser():\n    from hgxkit.sim import cli\n",
            "hgxkit/sim/__init__.py": "",
            "hgxkit/sim/cli.py": "",
            "roles/__init__.py": "",
            "deploys/demo.py": "from hgxkit.sim.nodes import up\n",
        },
    )
    assert simulator_importers(root) == ["deploys/demo.py:1: imports hgxkit.sim.nodes"]


def test_the_floor_rule_catches_an_import_up() -> None:
    graph = {"hgxkit.kinds.vllm": {"hgxkit.sim.standin.vllm.args"}, "hgxkit.recipe.read": {"hgxkit.kinds"}}
    assert imports_up(graph) == ["hgxkit.kinds.vllm (floor 2) imports hgxkit.sim.standin.vllm.args (floor 11)"]
    assert imports_up({"hgxkit.cli": {"hgxkit.sim.cli"}, "hgxkit.cli.bundle": {"hgxkit.sim.bundlesources"}}) == [
        "hgxkit.cli.bundle (floor 10) imports hgxkit.sim.bundlesources (floor 11)"
    ]
