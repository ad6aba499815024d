"""A prefill/decode split's cells are planned for the router's port: each group's own `--port {{port}}` is no port
a client could reach the split at."""

from __future__ import annotations

from pathlib import Path

from hgxkit.recipe.read import load_recipe
from hgxkit.verify.plan import plan_cells

PD = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "pd" / "dspark-pd-one-node.yaml"


def test_the_split_is_measured_at_the_router_from_one_group() -> None:
    cells = plan_cells(load_recipe(PD), "smoke", [(1, "deepseek-v4-flash-pd-1")], port=30000)
    assert [(c.group, c.container, c.port, c.input_len, c.concurrency) for c in cells] == [
        (1, "deepseek-v4-flash-pd-1", 30000, 1000, 1)
    ]
