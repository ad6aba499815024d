"""hgxkit/serving/policy.py with exact values: who can reach the API (exposure, from the inventory and from the
recipe itself), HiCache's host RAM, and dangerous docker options turned into problems (against the mutants
`make mutation MODULES=exposure` found alive)."""

from __future__ import annotations

import doctest
from dataclasses import replace
from pathlib import Path

import pytest

from hgxkit.problems import Problem
from hgxkit.recipe.danger import PolicyContext
from hgxkit.recipe.exposure import exposure_problems, recipe_exposure_problems
from hgxkit.recipe.judge import argv_problems, docker_option_problems
from hgxkit.recipe.read import parse_recipe_text
from hgxkit.serving.policy import HostMemoryNeed, hicache_need, host_pools, memory_problems

EXPOSED = Problem(
    "exposure",
    "bind_address 0.0.0.0 publishes the API beyond this host without an API key",
    "set api_key: auto (a key is generated and kept root-only on the host), bind 127.0.0.1, "
    "or set allow_unauthenticated: true",
)


@pytest.mark.parametrize(
    ("bind", "key", "allow", "expected"),
    [
        ("0.0.0.0", None, False, [EXPOSED]),
        ("0.0.0.0", "auto", False, []),
        ("0.0.0.0", None, True, []),
        ("127.0.0.1", None, False, []),
        ("::1", None, False, []),
        (
            "0.0.0.0",
            "",
            False,
            [
                Problem(
                    "api_key",
                    "api_key is set to a value other than auto (0 characters, not shown)",
                    "set api_key: auto (a key is generated on the host, root-only) or remove it",
                )
            ],
        ),
        (
            "127.0.0.1",
            "sk-pasted",
            True,
            [
                Problem(
                    "api_key",
                    "api_key is set to a value other than auto (9 characters, not shown)",
                    "set api_key: auto (a key is generated on the host, root-only) or remove it",
                )
            ],
        ),
    ],
)
def test_exposure_from_the_inventory(bind: str, key: str | None, allow: bool, expected: list[Problem]) -> None:
    assert exposure_problems(bind, key, allow) == expected


RECIPE = """\
schema_version: 1
name: tiny
image:
  reference: img:1
docker:
  options:
  - --gpus all
{options}server:
  command: sglang serve
  args:
  - --tp 2
{args}model:
  repo_id: org/model
  revision: main
  local_dir: /data/models/tiny
  mount_point: /model
"""


def recipe(options: str = "", args: str = "", command: str = "sglang serve"):  # type: ignore[no-untyped-def]
    text = RECIPE.format(
        options="".join(f"  - {o}\n" for o in options.split("|") if o),
        args="".join(f"  - {a}\n" for a in args.split("|") if a),
    )
    return parse_recipe_text(text.replace("  command: sglang serve", f"  kind: sglang\n  command: {command}"))


PUBLISH_ALL = Problem(
    "exposure",
    "-P publishes every exposed port on every interface, whatever bind_address says",
    "publish the server's port with -p instead",
)


def on_every_interface(host: str, kind: str = "SGLang") -> Problem:
    return Problem(
        "exposure",
        f"--network host with the server listening on {host} (--host, or {kind}'s default) opens the API on every "
        "interface without an API key",
        "set api_key: auto, add --host 127.0.0.1 to the server, or set allow_unauthenticated: true",
    )


@pytest.mark.parametrize(
    ("options", "args", "expected"),
    [
        ("", "", []),
        ("-P", "", [PUBLISH_ALL]),
        ("--publish-all=true", "", [PUBLISH_ALL]),
        ("--publish-all=1", "", [PUBLISH_ALL]),
        ("--publish-all=false", "", []),
        ("--network host", "", []),  # SGLang's default --host is 127.0.0.1
        ("--network host", "--host 0.0.0.0", [on_every_interface("0.0.0.0")]),
        ("--network host", "--host 127.0.0.1", []),
        ("--network bridge", "--host 0.0.0.0", []),  # published ports go through bind_address
        ("-P|--network host", "--host 0.0.0.0", [PUBLISH_ALL, on_every_interface("0.0.0.0")]),
    ],
)
def test_exposure_the_recipe_causes(options: str, args: str, expected: list[Problem]) -> None:
    assert recipe_exposure_problems(recipe(options, args), api_key=None, allow_unauthenticated=False) == expected
    exposed = recipe(options, args)
    assert recipe_exposure_problems(exposed, api_key="auto", allow_unauthenticated=False) == expected[:1] * (
        PUBLISH_ALL in expected
    )  # a key answers for --network host, not for -P
    assert recipe_exposure_problems(exposed, api_key=None, allow_unauthenticated=True) == expected[:1] * (
        PUBLISH_ALL in expected
    )


def test_a_wrapped_server_command_under_host_network_is_unknown_exposure() -> None:
    wrapped = recipe("--network host", "", command="sh -c 'sglang serve --host $H'")
    problems = recipe_exposure_problems(wrapped, api_key=None, allow_unauthenticated=False)
    assert [(p.code, p.remedy) for p in problems] == [("exposure", "write the server's flags without a sh -c wrapper")]
    assert problems[0].found.endswith(", so who can reach the API is not known")


def test_hicache_host_ram_per_rank_from_the_flags() -> None:
    assert hicache_need(recipe(), groups=2, gpu_memory_gb=140, weights_gb=160) == HostMemoryNeed(0.0, 2, 2)
    sized = recipe(args="--enable-hierarchical-cache|--hicache-size 100")
    assert hicache_need(sized, groups=3, gpu_memory_gb=140, weights_gb=160) == HostMemoryNeed(100.0, 2, 3)
    zero = recipe(args="--enable-hierarchical-cache|--hicache-size 0")
    # --hicache-size 0 means "use the ratio": 2 x (140 x 0.88 - 160 / 2 - 4) = 2 x 39.2
    assert hicache_need(zero, groups=1, gpu_memory_gb=140, weights_gb=160).per_rank_gb == pytest.approx(78.4)
    tuned = recipe(args="--enable-hierarchical-cache|--mem-fraction-static 0.8|--hicache-ratio 3")
    assert hicache_need(tuned, groups=1, gpu_memory_gb=140, weights_gb=160).per_rank_gb == pytest.approx(3 * 28.0)
    tiny = recipe(args="--enable-hierarchical-cache")
    assert hicache_need(tiny, groups=1, gpu_memory_gb=10, weights_gb=160).per_rank_gb == 2.0  # at least 1 GB each
    need = HostMemoryNeed(100.0, 8, 2)
    assert need.total_gb == 1600.0


def test_hicache_refusal_only_when_the_pools_exceed_ram_less_the_reserve() -> None:
    need = HostMemoryNeed(100.0, 8, 2)  # 1600 GB
    gib = 1024**3
    assert memory_problems(need, 1664 * gib, 64) == []  # exactly fits
    assert memory_problems(need, None, 64) == []  # RAM unknown
    assert memory_problems(HostMemoryNeed(0.0, 8, 2), 1 * gib, 64) == []
    assert memory_problems(need, 1663 * gib, 64) == [
        Problem(
            "hicache-ram",
            "HiCache host pools need 1600 GB (100 GB x 8 ranks x 2 groups) but the host has 1663 GiB (64 kept for "
            "the OS)",
            "lower --hicache-ratio, set --hicache-size GB, or serve fewer groups",
        )
    ]


def test_dangerous_options_become_problems_unless_allowed() -> None:
    privileged = recipe("--privileged|-v /srv/x:/s")
    problem = Problem(
        "docker-option",
        "--privileged: gives the container every device and capability of the host",
        'remove it, or if you trust this recipe with that, set allow_docker_options: ["--privileged"] in the '
        "inventory (--allow-docker-option=--privileged for recipe check and export)",
    )
    assert docker_option_problems(privileged, [], PolicyContext(mount_roots=("/srv",))) == [problem]
    assert [p.found.split(":")[0] for p in docker_option_problems(privileged, [])] == [
        "--privileged",
        "--volume=/srv/x",
    ]
    assert docker_option_problems(privileged, ["privileges"], PolicyContext(mount_roots=("/srv",))) == []
    argv = ["docker", "run", "--privileged", "-v", "/srv/x:/s", "img"]
    assert argv_problems(argv, [], PolicyContext(mount_roots=("/srv",))) == [problem]
    assert [p.code for p in argv_problems(argv, [])] == ["docker-option", "docker-option"]
    assert argv_problems(argv, ["--privileged", "host-mount"]) == []


def test_hicache_without_tp_is_one_rank_and_an_empty_size_is_none() -> None:
    text = RECIPE.format(options="", args="  - --enable-hierarchical-cache\n").replace("  - --tp 2\n", "")
    one = parse_recipe_text(text)
    # 2 x (140 x 0.88 - 100 / 1 - 4) = 2 x 19.2: all the weights on the one rank
    assert hicache_need(one, groups=1, gpu_memory_gb=140, weights_gb=100).per_rank_gb == pytest.approx(38.4)
    empty = recipe(args="--enable-hierarchical-cache|--hicache-size=")
    assert hicache_need(empty, groups=1, gpu_memory_gb=140, weights_gb=160).per_rank_gb == 0.0


def test_host_pools_on_some_gpus_are_each_flags_arithmetic() -> None:
    """HiCache per rank; vLLM's --cpu-offload-gb per GPU, --kv-offloading-size a TP group's buffer; a value that is
    no number pins nothing (the server refuses it)."""
    hicache = recipe(args="--enable-hierarchical-cache|--hicache-size 100")
    assert host_pools(hicache, gpus=2, gpu_memory_gb=140, weights_gb=160) == [("HiCache 2 ranks x 100", 200.0)]
    assert host_pools(recipe(), gpus=2, gpu_memory_gb=140, weights_gb=160) == []
    text = RECIPE.format(options="", args="  - --cpu-offload-gb 10\n  - --kv-offloading-size 64\n")
    vllm = parse_recipe_text(text.replace("  command: sglang serve", "  kind: vllm\n  command: vllm serve"))
    vllm = replace(vllm, server=replace(vllm.server, args=(("--tensor-parallel-size", "2"), *vllm.server.args[1:])))
    assert host_pools(vllm, gpus=4, gpu_memory_gb=140, weights_gb=160) == [
        ("--cpu-offload-gb 10 x 4 GPUs", 40.0),
        ("--kv-offloading-size 64 x 4 GPUs / TP 2", 128.0),
    ]
    odd = replace(vllm, server=replace(vllm.server, args=(("--cpu-offload-gb", "lots"),)))
    assert host_pools(odd, gpus=4, gpu_memory_gb=140, weights_gb=160) == []
    # without a TP flag a group is one GPU; sums to the tenth of a GB (the arithmetic shown is the one applied)
    lone = replace(vllm, server=replace(vllm.server, args=(("--kv-offloading-size", "1.05"),)))
    assert host_pools(lone, gpus=1, gpu_memory_gb=140, weights_gb=160) == [
        ("--kv-offloading-size 1.05 x 1 GPUs / TP 1", 1.1)
    ]
    three = replace(
        vllm, server=replace(vllm.server, args=(("--tensor-parallel-size", "3"), ("--kv-offloading-size", "64")))
    )
    assert host_pools(three, gpus=4, gpu_memory_gb=140, weights_gb=160)[0][1] == 85.3
    odd_size = recipe(args="--enable-hierarchical-cache|--hicache-size 33.33")
    assert host_pools(odd_size, gpus=3, gpu_memory_gb=140, weights_gb=160) == [("HiCache 3 ranks x 33.3", 99.9)]


def test_docstring_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    import hgxkit.serving.policy as policy

    monkeypatch.chdir(Path(__file__).resolve().parents[3])  # the examples read recipes/… from the repository
    result = doctest.testmod(policy)
    assert (result.failed, result.attempted > 0) == (0, True)
