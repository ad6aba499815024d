"""A prefill/decode split's cells are planned for the router's port: each group's own `--port {{port}}` is no port
a client could reach the split at."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.recipe.read import load_recipe
from hgxkit.verify.plan import plan_cells, through_router

PD = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "pd" / "dspark-pd-one-node.yaml"


def test_the_split_is_measured_at_the_router_from_one_group() -> None:
    cells = plan_cells(load_recipe(PD), "smoke", [(1, "deepseek-v4-flash-pd-1")], port=30000)
    assert [(c.group, c.container, c.port, c.input_len, c.concurrency) for c in cells] == [
        (1, "deepseek-v4-flash-pd-1", 30000, 1000, 1)
    ]


def test_groups_on_the_hosts_network_are_each_measured_at_their_own_port() -> None:
    recipe = load_recipe(PD)
    cells = plan_cells(recipe, "smoke", [(0, "pd-0"), (1, "pd-1")])
    assert [(c.group, c.port) for c in cells] == [(0, 5000), (1, 5001)]  # --port {{port}} from groups.port_base


def test_cells_through_the_router_name_the_tokenizer() -> None:
    """The router in PD mode gives the client no tokenizer path (/model_info): verify and the Slurm export name it."""
    (cell,) = through_router(plan_cells(load_recipe(PD), "smoke", [(1, "deepseek-v4-flash-pd-1")], port=30000))
    assert cell.extra_args[:2] == ("--tokenizer", "/model")


def test_no_export_writes_a_split_without_its_router() -> None:
    from hgxkit.errors import InputError
    from hgxkit.export.common import ExportOptions
    from hgxkit.export.registry import EXPORTERS, SPLIT_TARGETS, export_recipe
    from hgxkit.recipe.judge import Allowances, judge
    from hgxkit.recipe.read import parse_recipe_text

    # on the node's address, with no key: the trusted network every target that writes the router can reach it on
    split = parse_recipe_text(PD.read_text().replace("--host 127.0.0.1", "--host 0.0.0.0"))
    judged = judge(split, Allowances(docker_options=("--network=host",), unauthenticated=True))
    for target in EXPORTERS:
        if target in SPLIT_TARGETS:
            files = export_recipe(judged, target, ExportOptions()).files
            assert "--pd-disaggregation" in "".join(files.values()), target
            continue
        with pytest.raises(InputError, match=f"prefill/decode split is not exported to {target} "):
            export_recipe(judged, target, ExportOptions())
