"""No engine branch outside the kinds: what differs by engine is asked of the kind (hgxkit/kinds), so no module
compares a value with an engine name or keys a table by one. The simulated engines (hgxkit/sim) are exempt:
they are the engines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ENGINES = frozenset({"sglang", "vllm"})
EXEMPT = (ROOT / "hgxkit" / "kinds", ROOT / "hgxkit" / "sim")


def _engine(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in ENGINES


def engine_branches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each comparison with an engine name, and each dict key or subscript that is one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                elements = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) else [operand]
                if any(_engine(e) for e in elements):
                    found.append((node.lineno, "compares with an engine name"))
                    break
        elif isinstance(node, ast.Dict) and any(_engine(key) for key in node.keys):
            found.append((node.lineno, "a table keyed by engine name"))
        elif isinstance(node, ast.Subscript) and _engine(node.slice):
            found.append((node.lineno, "looks up an engine by name"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith", "get")
            and any(_engine(arg) for arg in node.args[:1])
        ):
            found.append((node.lineno, f"{node.func.attr}() with an engine name"))
    return sorted(set(found))


def test_no_engine_branch_outside_the_kinds() -> None:
    offenders = []
    for top in ("hgxkit", "roles", "deploys"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if any(path.is_relative_to(exempt) for exempt in EXEMPT):
                continue
            for line, what in engine_branches(ast.parse(path.read_text(), str(path))):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not offenders, "ask the server kind (hgxkit/kinds) instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "code",
    [
        'if cell.kind == "vllm": pass',
        'x = "sglang" if kind != "sglang" else None',
        'ok = kind in ("sglang", "vllm")',
        'FIXED = {"sglang": 1.0, "vllm": 0.0}',
        'clients = CLIENTS["sglang"]',
        'posted = "vllm" if client.startswith("vllm") else other',
        'version = info.get("sglang")',
    ],
)
def test_the_rule_catches_an_engine_branch_put_back(code: str) -> None:
    assert engine_branches(ast.parse(code)), code


@pytest.mark.parametrize(
    "code",
    [
        "if kind.api_key_env: pass",
        'words = ["vllm", "serve", "m"]',  # a command line, not a branch
        "suffix = KINDS[cell.kind].bench.suffix",
        "kind = options.kind or DEFAULT_KIND",
    ],
)
def test_the_rule_lets_kind_questions_pass(code: str) -> None:
    assert engine_branches(ast.parse(code)) == [], code
