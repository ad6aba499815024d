"""The router's pure decisions (hgxkit/serving/router.py) and its image's inputs (hgxkit/sim/standin/router_image.py)."""

from __future__ import annotations

import pytest

from hgxkit.serving.rollout import RunningContainer
from hgxkit.serving.router import (
    KEY_IN_CONTAINER,
    ROUTER_LABEL,
    RouterAction,
    RouterSpec,
    Side,
    WorkerHost,
    choose_router_host,
    container_name,
    name_problem,
    needs_replacing,
    port_problem,
    remove_command,
    router_action,
    router_spec,
    worker_urls,
)
from hgxkit.serving.router import router_image as image_of
from hgxkit.sim.standin import KINDS, router_image
from hgxkit.sim.standin import image as stand_in
from roles.router.defaults import DEFAULTS

IMAGE = "lmsysorg/sgl-model-gateway:latest"


def spec(urls: list[str] | None = None, **kw: object) -> RouterSpec:
    args: dict[str, object] = {
        "name": container_name("m"),
        "image": IMAGE,
        "policy": "cache_aware",
        "bind_address": "127.0.0.1",
        "port": 30000,
        "api_key_file": None,
    }
    args.update(kw)
    return router_spec(urls or ["http://127.0.0.1:5000", "http://127.0.0.1:5001"], **args)  # type: ignore[arg-type]


def test_defaults_are_documented_and_off() -> None:
    import roles.router.defaults as module

    assert DEFAULTS["router"] is False and DEFAULTS["router_port"] == 30000
    assert DEFAULTS["router_policy"] == "cache_aware" and DEFAULTS["router_bind_address"] == "127.0.0.1"
    assert DEFAULTS["router_image"] is None  # the split's router's own image, else SGLang's (router_image)
    for key in DEFAULTS:
        assert f"\n{key} " in module.__doc__ or f"\n{key}\n" in module.__doc__, key


def test_router_host_is_explicit_or_first_with_router() -> None:
    assert choose_router_host(None, ["node2"], ["node1", "node2"]) == ("node2", "")
    assert choose_router_host("node1", ["node2"], ["node1", "node2"]) == ("node1", "")
    assert choose_router_host(None, [], ["node1"]) == (None, "")
    host, error = choose_router_host("gone", ["node1"], ["node1"])
    assert host is None and error.startswith("router_host gone is not in the inventory") and ": set" in error


def test_worker_urls_cover_every_group_of_every_host() -> None:
    hosts = [
        WorkerHost("node1", "node1.lan", "127.0.0.1", [5000, 5001]),
        WorkerHost("node2", "10.0.0.2", "0.0.0.0", [5000, 5001]),
        WorkerHost("node3", "fd00::3", "::", [5000]),
    ]
    urls, problems = worker_urls("node1", hosts)
    assert problems == []
    assert urls == [
        "http://127.0.0.1:5000",
        "http://127.0.0.1:5001",
        "http://10.0.0.2:5000",
        "http://10.0.0.2:5001",
        "http://[fd00::3]:5000",
    ]


def test_loopback_groups_on_another_host_are_refused() -> None:
    urls, problems = worker_urls(
        "node1", [WorkerHost("node1", "a", "127.0.0.1", [5000]), WorkerHost("node2", "b", "127.0.0.1", [5000])]
    )
    assert urls == ["http://127.0.0.1:5000"]
    assert [p.code for p in problems] == ["router-reach"]
    assert "node2 publishes its groups on 127.0.0.1 only" in str(problems[0])


def test_a_keyed_router_fronts_one_host_only() -> None:
    one = worker_urls("n1", [WorkerHost("n1", "a", "0.0.0.0", [5000], api_key=True)])
    assert one[1] == []
    two = worker_urls(
        "n1",
        [
            WorkerHost("n1", "a", "0.0.0.0", [5000], api_key=True),
            WorkerHost("n2", "b", "0.0.0.0", [5000], api_key=True),
        ],
    )
    assert [p.code for p in two[1]] == ["router-key"]
    assert [p.code for p in worker_urls("n1", [WorkerHost("n1", "a", "127.0.0.1", [])])[1]] == ["router-workers"]


def test_spec_runs_the_real_router_on_the_host_network() -> None:
    s = spec()
    assert s.argv[:5] == ["docker", "run", "-d", "--name", "m-router"]  # named as its groups, m-0, m-1
    assert f"{ROUTER_LABEL}=1" in s.argv and f"hgxkit.spec={s.spec_hash}" in s.argv
    assert "hgxkit.serve=1" not in s.argv  # the serving role must never remove it as a stale group
    i = s.argv.index(IMAGE)
    assert s.argv[i - 4 : i] == ["--restart", "unless-stopped", "--entrypoint", "python3"]
    assert s.argv[i + 1 :] == [
        "-m",
        "sglang_router.launch_router",
        "--worker-urls",
        "http://127.0.0.1:5000",
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
    assert "--network" in s.argv and s.argv[s.argv.index("--network") + 1] == "host"


def test_spec_hash_follows_the_spec() -> None:
    assert spec().spec_hash == spec().spec_hash
    assert spec().spec_hash != spec(policy="round_robin").spec_hash
    assert spec().spec_hash != spec(["http://127.0.0.1:5000"]).spec_hash
    assert spec().spec_hash != spec(port=30001).spec_hash
    with pytest.raises(ValueError, match="router_policy 'fastest' is not one of"):
        spec(policy="fastest")


def test_api_key_comes_from_a_mounted_file_never_the_command_line() -> None:
    s = spec(api_key_file="/etc/hgxkit/serve/api-key")
    assert f"/etc/hgxkit/serve/api-key:{KEY_IN_CONTAINER}:ro" in s.argv
    assert "--api-key" not in s.argv  # the launcher appends it inside the process, from the file
    launcher = s.argv[s.argv.index("-c") + 1]
    assert KEY_IN_CONTAINER in launcher and "'--api-key', key" in launcher
    assert "$(cat" not in str(s.command())


def test_shell_runs_by_digest_and_quotes() -> None:
    s = spec(api_key_file="/k")
    digest = "lmsysorg/sgl-model-gateway@sha256:" + "a" * 64
    line = str(s.command(digest))
    assert f" {digest} " in line and f" {IMAGE} " not in line
    assert "-c 'import runpy, sys;" in line


def test_needs_replacing_only_on_change() -> None:
    s = spec()
    assert needs_replacing(None, s)
    assert not needs_replacing(RunningContainer("m-router", "id", s.spec_hash, None, True), s)
    assert needs_replacing(RunningContainer("m-router", "id", s.spec_hash, None, False), s)
    assert needs_replacing(RunningContainer("m-router", "id", "other", None, True), s)


def running(name: str, spec_hash: str | None, up: bool = True) -> RunningContainer:
    return RunningContainer(name, f"id-{name}", spec_hash, None, up)


def test_the_router_action_retires_hgxkits_routers_under_other_names() -> None:
    """An earlier hgxkit named its router `sglang-router` whatever the engine: found by its label, it is removed
    (it holds the port) and the router starts under the recipe's name, even with the very same spec; once
    migrated, a re-run changes nothing."""
    s = spec()
    assert router_action([], s) == RouterAction((), True)
    assert router_action([running("sglang-router", s.spec_hash)], s) == RouterAction(("sglang-router",), True)
    migrated = [running("m-router", s.spec_hash)]
    assert router_action(migrated, s) == RouterAction((), False) and not router_action(migrated, s).changes
    both = [running("m-router", s.spec_hash), running("sglang-router", "old", up=False)]
    assert router_action(both, s) == RouterAction(("sglang-router",), False) and router_action(both, s).changes
    renamed = [running("old-recipe-router", s.spec_hash)]  # the recipe's name changed: its router goes too
    assert router_action(renamed, s) == RouterAction(("old-recipe-router",), True)
    assert router_action([running("m-router", "other")], s) == RouterAction((), True)


def test_the_routers_name_never_takes_a_container_that_is_not_hgxkits_router() -> None:
    s = spec()
    mine = [running("m-router", s.spec_hash)]
    assert name_problem(s, {"m-router": True, "x": False}, mine) is None
    assert name_problem(s, {"sglang-router": True}, [running("sglang-router", "h")]) is None
    foreign = name_problem(s, {"m-router": False}, [])
    assert foreign is not None and foreign.code == "router-name"
    assert "m-router is taken by a container hgxkit did not start" in foreign.message
    assert "docker rm -f m-router" in foreign.remedy and "name:" in foreign.remedy
    group = name_problem(s, {"m-router": True}, [])  # a post named a serving group so
    assert group is not None and "a serving group of hgxkit's" in group.message


def test_a_router_is_removed_only_when_it_carries_the_router_label(tmp_path) -> None:
    """The removal asks docker for the container's router label first: a container someone else named
    `sglang-router` stays."""
    import os
    import subprocess

    log = tmp_path / "calls"
    docker = tmp_path / "docker"
    docker.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        '[ "$1" = inspect ] && case "$4" in ours) echo 1;; theirs) echo;; *) exit 1;; esac\n'
        "exit 0\n"
    )
    docker.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    for name in ("ours", "theirs", "absent"):
        command = remove_command(name).get_raw_value()
        assert subprocess.run(["sh", "-c", command], env=env, check=False).returncode == 0, name
    removed = [line for line in log.read_text().splitlines() if line.startswith("rm ")]
    assert removed == ["rm -f ours"]


def test_router_image_builds_on_the_stand_in_base_with_the_pinned_router() -> None:
    assert router_image.REQUIREMENT == "sglang-router==0.3.2"
    assert router_image.image_tag().startswith("hgxkit-sim-router:")
    assert router_image.image_tag() == router_image.image_tag() == router_image.image_tag("sglang")
    assert f"'{router_image.REQUIREMENT}'" in router_image.DOCKERFILE
    assert "--cert ca-certificates.crt" in router_image.DOCKERFILE
    assert stand_in.check_tag(router_image.DEFAULT_TAGS[0]) == IMAGE


def test_each_router_has_its_own_image_with_its_own_pinned_wheel() -> None:
    vllm = router_image.ROUTERS["vllm"]
    assert vllm.requirement == "vllm-router==0.1.17" and f"'{vllm.requirement}'" in vllm.dockerfile()
    assert '["vllm-router", "--help"]' in vllm.dockerfile() and "import vllm_router.launch_router" in vllm.dockerfile()
    assert router_image.image_tag("vllm") != router_image.image_tag("sglang")
    assert set(router_image.ROUTERS) == set(KINDS)  # `hgxkit sim image build --router KIND`


def test_every_kinds_split_router_image_is_built_for_simulated_nodes() -> None:
    from hgxkit.kinds import KINDS as SERVER_KINDS

    built = {tag for one in router_image.ROUTERS.values() for tag in one.tags}
    for kind in SERVER_KINDS.values():
        if kind.prefill_decode is not None:
            image = kind.prefill_decode.router.image
            assert image is not None and stand_in.check_tag(image) in built, kind.name


def test_the_router_image_is_the_knob_else_the_splits_router_else_sglangs() -> None:
    from hgxkit.kinds.vllm import VLLM

    assert VLLM.prefill_decode is not None
    pd = VLLM.prefill_decode.router
    assert image_of(None, None) == IMAGE and image_of(None, pd) == "vllm/vllm-router:v0.1.17"
    assert image_of("my/router:1", pd) == "my/router:1"


def test_router_fact_parses_the_docker_listing() -> None:
    from hgxkit.serving.facts import RouterContainers

    fact = RouterContainers()
    # ps, id, name, state, then the labels serve, router, spec, group, port (hgxkit.serving.facts.all_containers)
    line = "ps\tc1\tsglang-router\trunning\t\t1\tabc123\t\t"
    assert fact.process([line]) == [RunningContainer("sglang-router", "c1", "abc123", None, True)]
    assert fact.process([line.replace("running", "exited")]) == [
        RunningContainer("sglang-router", "c1", "abc123", None, False)
    ]
    both = [line, "ps\tc2\tm-router\trunning\t\t1\tdef\t\t", "ps\tc3\tm-0\trunning\t1\t\th\t0\t5000"]
    assert [c.name for c in fact.process(both)] == ["m-router", "sglang-router"]  # every router, no group
    assert fact.process([]) == []
    assert fact.process(["ps\tc2\tm-0\trunning\t1\t\th\t0\t"]) == []  # a serving container is not the router
    command = str(fact.command())
    assert f'.Label "{ROUTER_LABEL}"' in command and "Config.Cmd" not in command and "Args" not in command


def test_a_router_port_a_group_holds_on_the_routers_host_is_refused_naming_a_free_one() -> None:
    """The router listens on the host's network beside the groups: a port one of them holds there (its server
    port or a prefill's bootstrap port) is refused before any change, with the first port after theirs as the
    remedy; the same port on another host is no clash."""
    prefill = WorkerHost("node1", "10.0.0.1", "0.0.0.0", [30000], sides=(Side("prefill", 8998),), shared=True)
    decode = WorkerHost("node2", "10.0.0.2", "0.0.0.0", [30001], sides=(Side("decode"),), shared=True)
    taken = port_problem("node1", [prefill, decode], 30000)
    assert taken is not None and taken.code == "router-port"
    assert taken.found == (
        "the router's port 30000 on node1 is a serving group's port there, so the router could not listen on it"
    )
    assert (
        taken.remedy == "give the router another port (--data router_port=30001), or move the groups (groups.port_base)"
    )
    bootstrap = port_problem("node1", [prefill, decode], 8998)
    assert bootstrap is not None and "is a prefill group's bootstrap port there" in bootstrap.found
    assert port_problem("node2", [prefill, decode], 30000) is None
    assert port_problem("node2", [prefill, decode], 30001) is not None
    assert port_problem("node1", [prefill, decode], 8000) is None
