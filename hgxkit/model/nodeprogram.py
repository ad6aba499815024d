"""The downloader as a node gets it: one file, hgxkit_fetch.py, built from the modules of hgxkit/model/fetch/.

The node runs one plain Python file (a pyinfra fact loads it as a module, and `program_sha` hashes it), so the
package is joined into one namespace by a rule that `build` checks, failing with one line naming the module:
- the modules go in the order of MODULES, each after every sibling it imports at run time (a sibling needed
  only for type hints is imported under `if TYPE_CHECKING:`), and every module but `__init__` and
  `__main__` is listed;
- a module's imports sit at its top: siblings by name (`from .partial import Partial`), the core only as
  `from hgxkit.model import core`, anything else from the standard library or huggingface_hub only;
- no two modules bind one top-level name to different things.
The file is: a shebang, the package's docstring, a line naming the sources, `from __future__ import
annotations`, the import of the core (model_core.py, uploaded beside it), then each module under a comment
naming it, without its docstring, its `__future__` import and its imports of siblings and of the core, and
last the call of `main`. Only the sources' text goes in (no time, no path, no version), so the same sources
give the same bytes: a second deploy uploads nothing, and `program_sha` (the node's stamp check) stays.

Example:
    from hgxkit.model import nodeprogram
    nodeprogram.uploads()        # {"hgxkit_fetch.py": b"#!/usr/bin/env python3...", "model_core.py": b"..."}
    nodeprogram.program_sha()    # what the node's `status` computes over those two files
"""

from __future__ import annotations

import ast
import functools
import hashlib
import sys
from pathlib import Path

from hgxkit.errors import HgxkitError
from hgxkit.model import core
from hgxkit.verdicts import remember_output, remembered_output, verdict_key

PACKAGE = Path(__file__).with_name("fetch")
PROGRAM_NAME = "hgxkit_fetch.py"  # the names the role uploads under, which the program imports and hashes
CORE_NAME = "model_core.py"
# Each module after the siblings it imports at run time; a new module goes into this list.
MODULES = (
    "errors",
    "retry",
    "localdir",
    "bundle",
    "filelist",
    "partial",
    "hubbodies",
    "fleetauth",
    "peerserve",
    "parent",
    "progress",
    "feed",
    "sync",
    "fleetserver",
    "status",
    "cli",
)
NODE_IMPORTS = frozenset(sys.stdlib_module_names) | {"huggingface_hub"}  # what the node's virtualenv holds
CORE_IMPORT = "from hgxkit.model import core"

_HEAD = '''#!/usr/bin/env python3
"""{doc}"""

# Built from hgxkit/model/fetch/ by hgxkit/model/nodeprogram.py: change those modules, not this file.

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import model_core as core  # type: ignore[import-not-found]  # next to this file on the host
except ImportError:  # pragma: no cover - in the repository
    from hgxkit.model import core
'''
_TAIL = '\n\nif __name__ == "__main__":\n    sys.exit(main())\n'


class ProgramRuleError(HgxkitError):
    """A module of hgxkit/model/fetch/ breaks the rule that joins them into one file (see the module docstring)."""


def build(package: Path = PACKAGE) -> str:
    """The program's text from the modules in `package`; the same sources give the same text."""
    present = {p.stem for p in package.glob("*.py")} - {"__init__", "__main__"}
    if present != set(MODULES):
        extra, missing = sorted(present - set(MODULES)), sorted(set(MODULES) - present)
        raise ProgramRuleError(
            f"{package}: modules {extra} are not in hgxkit/model/nodeprogram.py MODULES, {missing} are missing: "
            "list each module once, after the siblings it imports"
        )
    doc = ast.get_docstring(ast.parse(_read(package / "__init__.py")), clean=False) or ""
    bound: dict[str, tuple[str, str]] = {}  # top-level name -> (module, what binds it)
    sections = [_section(package / f"{name}.py", MODULES[:i], bound) for i, name in enumerate(MODULES)]
    return _HEAD.format(doc=doc) + "".join(sections) + _TAIL


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _section(path: Path, earlier: tuple[str, ...], bound: dict[str, tuple[str, str]]) -> str:
    """One module's text for the program: a comment naming it, its kept imports, then everything below them."""
    text = _read(path)
    tree = ast.parse(text, str(path))
    lines = text.splitlines(keepends=True)
    body = list(tree.body)
    cut = 0  # the last line of the docstring and the imports
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        cut = body.pop(0).end_lineno or 0
    imports = []
    for node in body:
        if not _is_import_block(node):
            break
        imports.append(node)
        cut = node.end_lineno or node.lineno
    kept = []
    for node in imports:
        if not _joined_away(node, path, earlier):
            _bind(node, path.stem, bound)
            kept.append("".join(lines[node.lineno - 1 : node.end_lineno]))
    for node in body[len(imports) :]:
        if _is_import_block(node):
            raise ProgramRuleError(f"{path}:{node.lineno}: an import below the first definition: move it to the top")
        _bind(node, path.stem, bound)
    rule = f"# -- hgxkit/model/fetch/{path.name} "
    parts = [rule + "-" * (119 - len(rule)), "".join(kept).rstrip("\n"), "".join(lines[cut:]).strip("\n")]
    return "\n\n" + "\n\n".join(part for part in parts if part) + "\n"


def _is_import_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.Import | ast.ImportFrom) or _is_type_checking(node)


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _joined_away(node: ast.stmt, path: Path, earlier: tuple[str, ...]) -> bool:
    """Whether `node` is an import the one namespace makes needless (checked against the rule), else whether
    it is a kept import of the standard library or huggingface_hub; a ProgramRuleError otherwise."""
    where = f"{path}:{node.lineno}"
    if _is_type_checking(node):
        assert isinstance(node, ast.If)
        if node.orelse or not all(isinstance(n, ast.ImportFrom) and n.level == 1 for n in node.body):
            raise ProgramRuleError(f"{where}: `if TYPE_CHECKING:` may hold only imports of siblings (`from .x import`)")
        for n in node.body:
            assert isinstance(n, ast.ImportFrom)
            if n.module not in MODULES:
                raise ProgramRuleError(f"{where}: `.{n.module}` is not a module in MODULES")
        return True
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return True
    if isinstance(node, ast.ImportFrom) and node.level:
        if node.level != 1 or node.module not in earlier:
            raise ProgramRuleError(
                f"{where}: imports `{'.' * node.level}{node.module or ''}` at run time, which is not before it in "
                "MODULES: reorder MODULES, or import it under `if TYPE_CHECKING:` if only type hints need it"
            )
        return True
    if ast.unparse(node) == CORE_IMPORT:
        return True
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [str(node.module)]  # type: ignore[attr-defined]
    foreign = sorted({n.split(".")[0] for n in names} - NODE_IMPORTS)
    if foreign:
        raise ProgramRuleError(
            f"{where}: imports {foreign}, which the node does not have: the program may import the standard "
            f"library, huggingface_hub and the core (`{CORE_IMPORT}`) only"
        )
    return False


def _bind(node: ast.stmt, module: str, bound: dict[str, tuple[str, str]]) -> None:
    """Record the top-level names `node` binds; two modules may share a name only through the same import."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        pairs = [_imported(node, alias) for alias in node.names]
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        pairs = [(node.name, f"{module}.{node.name}")]
    elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        pairs = [(n.id, f"{module}.{n.id}") for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    else:
        pairs = []
    for name, what in pairs:
        seen = bound.setdefault(name, (module, what))
        if seen[1] != what:
            raise ProgramRuleError(
                f"hgxkit/model/fetch/{module}.py: `{name}` is also bound in {seen[0]}.py ({seen[1]}): the program "
                "is one namespace, rename one"
            )


def _imported(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, str]:
    """The name an import binds and what to: `import urllib.request` binds `urllib` to urllib."""
    if isinstance(node, ast.ImportFrom):
        return alias.asname or alias.name, f"import {node.module}.{alias.name}"
    if alias.asname:
        return alias.asname, f"import {alias.name}"
    return alias.name.split(".")[0], f"import {alias.name.split('.')[0]}"


@functools.cache
def uploads() -> dict[str, bytes]:
    """What the role uploads to model_lib_dir, under the names the program imports and hashes them by (the
    program first: `program_sha` hashes them in this order)."""
    return {PROGRAM_NAME: _built(), CORE_NAME: Path(core.__file__).read_bytes()}


def _built() -> bytes:
    """`build()`'s program, remembered (hgxkit.verdicts) under its sources: every run of a deploy needs its hash,
    and joining the modules costs the controller ~15 ms of parsing for the same bytes each time."""
    sources = [Path(__file__), *sorted(PACKAGE.glob("*.py"))]
    try:
        key = verdict_key("nodeprogram", b"", judges=sources, libraries=())
    except OSError:  # a source unreadable (a zipped install): build every time
        return build().encode("utf-8")
    program = remembered_output(key)
    if program is None:
        program = build().encode("utf-8")
        remember_output(key, program)
    return program


def program_sha(files: dict[str, bytes] | None = None) -> str:
    """The downloader's version as the program computes it on the node (hgxkit.model.fetch.status.program_sha):
    sha256 over the sha256 of each upload."""
    h = hashlib.sha256()
    for content in (files or uploads()).values():
        h.update(hashlib.sha256(content).digest())
    return h.hexdigest()


def write(directory: Path) -> Path:
    """The uploads written into `directory` as the role lays them out on a node; the program's path."""
    for name, content in uploads().items():
        (directory / name).write_bytes(content)
    return directory / PROGRAM_NAME
