"""List functions longer than a limit (default 80 lines) outside the simulator: `python tools/long_functions.py`."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("hgxkit", "roles", "deploys")


def long_functions(limit: int = 80, root: Path = ROOT) -> list[tuple[int, str]]:
    """(lines, `path:line name`) of each function over `limit` lines, the simulator excepted, longest first."""
    found = []
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            if path.is_relative_to(root / "hgxkit" / "sim"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > limit:
                        found.append((lines, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


if __name__ == "__main__":
    for lines, where in long_functions(int(sys.argv[1]) if len(sys.argv) > 1 else 80):
        print(f"{lines:5d}  {where}")
