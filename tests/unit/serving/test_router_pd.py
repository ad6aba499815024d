"""The router in front of a one-node prefill/decode split (hgxkit/serving/router.py): SGLang's `--pd-disaggregation`
with `--prefill URL BOOTSTRAP_PORT` and `--decode URL` in place of the worker list, vLLM's `--vllm-pd-disaggregation`
with `--prefill URL` (no bootstrap port) and `--kv-connector nixl`, each read back by the real router's own parser
(sglang-router 0.3.2, vllm-router 0.1.17) where it is installed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from hgxkit.kinds.base import PDRouter
from hgxkit.kinds.sglang import SGLANG
from hgxkit.kinds.vllm import VLLM
from hgxkit.recipe.pd import pd_key_problem
from hgxkit.recipe.read import load_recipe
from hgxkit.serving.router import Side, WorkerHost, group_sides, router_spec, worker_sides, worker_urls

ROOT = Path(__file__).resolve().parents[3]
PD = ROOT / "tests" / "fixtures" / "pd" / "dspark-pd-one-node.yaml"
VLLM_PD = ROOT / "tests" / "fixtures" / "pd" / "vllm-pd-one-node.yaml"
MARLIN = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"
URLS = ["http://127.0.0.1:5000", "http://127.0.0.1:5001"]
SIDES: list[Side | None] = [Side("prefill", 8998), Side("decode")]
assert SGLANG.prefill_decode is not None and VLLM.prefill_decode is not None
SGLANG_PD, VLLM_PD_ROUTER = SGLANG.prefill_decode.router, VLLM.prefill_decode.router


IMAGE = "lmsysorg/sgl-model-gateway:latest"


def spec(policy: str, sides: list[Side | None] | None, pd: PDRouter | None, image: str | None = IMAGE) -> list[str]:
    options = {"name": "m-router", "policy": policy, "bind_address": "127.0.0.1", "port": 30000, "api_key_file": None}
    return router_spec(URLS, image=image, sides=sides, pd=pd, **options).argv  # type: ignore[arg-type]


def server_args(
    policy: str = "cache_aware", sides: list[Side | None] | None = SIDES, pd: PDRouter = SGLANG_PD
) -> list[str]:
    """The router's own arguments: the words after the image and the program's (the first is the entrypoint)."""
    argv = spec(policy, sides, pd)
    launch = pd.launch if sides and any(sides) else ("python3", "-m", "sglang_router.launch_router")
    assert argv[argv.index("--entrypoint") + 1] == launch[0]
    return argv[argv.index(IMAGE) + len(launch) :]


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


def test_a_vllm_split_is_fronted_by_vllm_router_without_bootstrap_ports() -> None:
    assert group_sides(load_recipe(VLLM_PD), [0, 1]) == (Side("prefill"), Side("decode"))
    sides: list[Side | None] = [Side("prefill"), Side("decode")]
    args = server_args("round_robin", sides, VLLM_PD_ROUTER)
    assert args[:7] == [
        "--vllm-pd-disaggregation",
        "--prefill",
        URLS[0],
        "--decode",
        URLS[1],
        "--policy",
        "round_robin",
    ]
    assert args[7:9] == ["--kv-connector", "nixl"] and args[9:] == server_args()[8:]


def test_a_split_whose_kind_names_no_router_is_refused() -> None:
    with pytest.raises(ValueError, match="the groups' kind names no router"):
        spec("cache_aware", SIDES, None)


def test_the_real_vllm_router_reads_the_arguments_as_a_split(vllm_router_python: str) -> None:
    code = (
        "import json, sys; from vllm_router.launch_router import parse_router_args as p; a = p(sys.argv[1:]); "
        "print(json.dumps([a.vllm_pd_disaggregation, a.prefill_urls, a.decode_urls, a.policy, a.kv_connector]))"
    )
    args = server_args("round_robin", [Side("prefill"), Side("decode")], VLLM_PD_ROUTER)
    answer = subprocess.run([vllm_router_python, "-c", code, *args], capture_output=True, text=True, check=True)
    assert json.loads(answer.stdout) == [
        True,
        [["http://127.0.0.1:5000", None]],
        ["http://127.0.0.1:5001"],
        "round_robin",
        "nixl",
    ]


def test_a_vllm_split_runs_vllm_router_from_its_own_image_unless_the_knob_names_one() -> None:
    sides: list[Side | None] = [Side("prefill"), Side("decode")]
    argv = spec("round_robin", sides, VLLM_PD_ROUTER, image=None)
    i = argv.index("vllm/vllm-router:v0.1.17")
    assert argv[i - 2 : i] == ["--entrypoint", "vllm-router"] and argv[i + 1] == "--vllm-pd-disaggregation"
    assert "my/router:1" in spec("round_robin", sides, VLLM_PD_ROUTER, image="my/router:1")
    sglang = spec("cache_aware", SIDES, SGLANG_PD, image=None)
    assert sglang[sglang.index(IMAGE) + 1 : sglang.index(IMAGE) + 3] == ["-m", "sglang_router.launch_router"]


def test_a_keyed_split_is_refused_where_its_router_checks_no_clients_key() -> None:
    problem = pd_key_problem(load_recipe(VLLM_PD))
    assert problem is not None and problem.code == "pd-router-key"
    assert "vllm-router 0.1.17 checks no client's API key" in problem.found and "without api_key" in problem.remedy
    assert pd_key_problem(load_recipe(PD)) is None  # sglang-router takes --api-key and checks it


@pytest.mark.parametrize(
    ("pd", "sides", "module", "fixture"),
    [
        (SGLANG_PD, SIDES, "sglang_router", "router_python"),
        (VLLM_PD_ROUTER, [Side("prefill"), Side("decode")], "vllm_router", "vllm_router_python"),
    ],
)
def test_a_split_shuns_a_failed_worker_for_the_knobs_seconds_not_the_routers_minute(
    pd: PDRouter, sides: list[Side | None], module: str, fixture: str, request: pytest.FixtureRequest
) -> None:
    """A failing decode opens the prefill's circuit too (sglang-router 0.3.2, measured), so the reopen time is how
    long the whole split answers 503 after a replaced side is back; only PD mode gets the flag."""
    options = {
        "name": "m-router",
        "policy": "round_robin",
        "bind_address": "127.0.0.1",
        "port": 30000,
        "api_key_file": None,
    }
    argv = router_spec(URLS, image=IMAGE, sides=sides, pd=pd, circuit_reopen_s=5, **options).argv  # type: ignore[arg-type]
    assert argv[argv.index("--cb-timeout-duration-secs") + 1] == "5"
    plain = router_spec(URLS, image=IMAGE, circuit_reopen_s=5, **options).argv  # type: ignore[arg-type]
    assert "--cb-timeout-duration-secs" not in plain
    args = argv[argv.index(IMAGE) + len(pd.launch) :]
    code = (
        f"import sys; from {module}.launch_router import parse_router_args as p; "
        "print(p(sys.argv[1:]).cb_timeout_duration_secs)"
    )
    python = request.getfixturevalue(fixture)
    answer = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, check=True)
    assert answer.stdout.strip() == "5"
