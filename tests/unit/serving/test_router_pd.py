"""The router in front of a one-node prefill/decode split (hgxkit/serving/router.py): `--pd-disaggregation` with
`--prefill URL BOOTSTRAP_PORT` and `--decode URL` in place of the worker list, read back by the real router's own
parser (sglang-router 0.3.2) where it is installed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hgxkit.recipe.read import load_recipe
from hgxkit.serving.router import Side, WorkerHost, group_sides, router_spec, worker_sides, worker_urls

ROOT = Path(__file__).resolve().parents[3]
PD = ROOT / "tests" / "fixtures" / "pd" / "dspark-pd-one-node.yaml"
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
URLS = ["http://127.0.0.1:5000", "http://127.0.0.1:5001"]
SIDES: list[Side | None] = [Side("prefill", 8998), Side("decode")]


def server_args(policy: str = "cache_aware", sides: list[Side | None] | None = SIDES) -> list[str]:
    spec = router_spec(
        URLS,
        image="lmsysorg/sgl-model-gateway:latest",
        policy=policy,
        bind_address="127.0.0.1",
        port=30000,
        api_key_file=None,
        sides=sides,
    )
    return spec.argv[spec.argv.index("sglang_router.launch_router") + 1 :]


def test_each_group_of_the_recipe_is_its_side_with_the_prefills_bootstrap_port() -> None:
    assert group_sides(load_recipe(PD), [0, 1]) == (Side("prefill", 8998), Side("decode"))
    assert group_sides(load_recipe(MARLIN), [0, 1]) == (None, None)


def test_a_split_is_fronted_in_pd_mode_instead_of_a_worker_list() -> None:
    assert server_args() == [
        "--pd-disaggregation",
        "--prefill",
        "http://127.0.0.1:5000",
        "8998",
        "--decode",
        "http://127.0.0.1:5001",
        "--policy",
        "cache_aware",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--prometheus-host",
        "127.0.0.1",
    ]
    assert server_args(sides=None)[:3] == ["--worker-urls", *URLS]
    assert server_args(sides=[None, None])[:3] == ["--worker-urls", *URLS]


def test_the_sides_follow_the_urls_of_the_hosts_the_router_reaches() -> None:
    hosts = [WorkerHost("n1", "10.0.0.1", "127.0.0.1", [5000, 5001], sides=(Side("prefill", 8998), Side("decode")))]
    assert worker_urls("n1", hosts)[0] == URLS
    assert worker_sides("n1", hosts) == SIDES


@pytest.mark.parametrize(
    ("policy", "sides", "message"),
    [
        ("bucket", SIDES, "router_policy bucket is not a policy the router takes for both prefill and decode groups"),
        ("cache_aware", [Side("prefill", 8998), None], "cannot mix: run one router per kind of group"),
        ("cache_aware", [Side("prefill", 8998), Side("prefill", 8999)], "one side of a prefill/decode split alone"),
    ],
)
def test_what_the_router_cannot_front_in_pd_mode_is_refused(policy: str, sides: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        server_args(policy, sides)


def test_the_real_router_reads_the_arguments_as_a_split(router_python: str) -> None:
    python = router_python
    code = (
        "import json, sys; from sglang_router.launch_router import parse_router_args as p; a = p(sys.argv[1:]); "
        "print(json.dumps([a.pd_disaggregation, a.prefill_urls, a.decode_urls, a.policy]))"
    )
    answer = subprocess.run([python, "-c", code, *server_args()], capture_output=True, text=True, check=True)
    assert json.loads(answer.stdout) == [
        True,
        [["http://127.0.0.1:5000", 8998]],
        ["http://127.0.0.1:5001"],
        "cache_aware",
    ]
