"""A one-node prefill/decode split exported: to compose (its two groups and the kind's router in PD mode, checked
by docker-compose's own parser and imported back), and refused by name where the target writes no router."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from test_export import RUN, _compose_config, _renders, _tool

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.export.common import ExportOptions, export_groups
from hgxkit.export.pd_router import split_router
from hgxkit.export.registry import EXPORTERS, SPLIT_TARGETS, export_recipe, write_export
from hgxkit.recipe.judge import Allowances, judge
from hgxkit.recipe.read import load_recipe, parse_recipe_text

ROOT = Path(__file__).resolve().parents[3]
SPLITS = {
    "sglang": ROOT / "tests/fixtures/pd/dspark-pd-one-node.yaml",
    "vllm": ROOT / "tests/fixtures/pd/vllm-pd-one-node.yaml",
}
# What the deploy runs a split under (docs/serving.md): the groups on the host's network.
HOST_NETWORK = Allowances(docker_options=("--network=host",))
POLICY = ("--policy", "cache_aware")
LISTEN = ("--host", "127.0.0.1", "--port", "30000", "--prometheus-host", "127.0.0.1")
# The router each kind's split gets: (image, entrypoint, the first words of its command, what follows the URLs).
ROUTERS = {
    "sglang": (
        "lmsysorg/sgl-model-gateway:latest",
        ["python3"],
        ["-m", "sglang_router.launch_router", "--pd-disaggregation"],
        ["--prefill", "http://127.0.0.1:5000", "8998", "--decode", "http://127.0.0.1:5001", *POLICY],
    ),
    "vllm": (
        "vllm/vllm-router:v0.1.17",
        ["vllm-router"],
        ["--vllm-pd-disaggregation"],
        ["--prefill", "http://127.0.0.1:8100", "--decode", "http://127.0.0.1:8101", *POLICY, "--kv-connector", "nixl"],
    ),
}


def _compose(kind: str, tmp_path: Path, allowances: Allowances = HOST_NETWORK) -> Path:
    judged = judge(load_recipe(str(SPLITS[kind])), allowances)
    write_export(export_recipe(judged, "compose", ExportOptions(run_id=RUN)), tmp_path)
    return tmp_path


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_a_split_is_two_groups_and_the_router_started_once_both_are_healthy(kind: str, tmp_path: Path) -> None:
    out = _compose(kind, tmp_path)
    check = subprocess.run(
        [_tool("docker-compose"), "-f", "compose.yaml", "config", "-q"], cwd=out, capture_output=True
    )
    assert check.returncode == 0, check.stderr
    services = _compose_config(out, "compose.yaml")["services"]
    prefill, decode = (name for name in services if name != "router")
    gpus = [services[n]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] for n in (prefill, decode)]
    assert gpus == [["0", "1", "2", "3"], ["4", "5", "6", "7"]]
    recipe = load_recipe(str(SPLITS[kind]))
    for index, name in enumerate((prefill, decode)):
        assert services[name]["network_mode"] == "host" and "ports" not in services[name]
        own = [word for entry in recipe.groups.server_args[index] for word in entry]
        assert services[name]["command"][-len(own) :] == own  # the side's own flags, after the server's
        assert "healthcheck" in services[name]
    image, entrypoint, program, workers = ROUTERS[kind]
    recipe_labels = {k: v for k, v in services[prefill]["labels"].items() if k.endswith(("/recipe", "/recipe-hash"))}
    assert services["router"] == {
        "image": image,
        "entrypoint": entrypoint,
        "command": [*program, *workers, *LISTEN],
        "network_mode": "host",
        "restart": "unless-stopped",  # as the groups: docker starts it again with them
        "depends_on": {n: {"condition": "service_healthy"} for n in (prefill, decode)},
        "labels": {"hgxkit.io/router": "prefill-decode", **recipe_labels},
    }
    text = (out / "compose.yaml").read_text()
    assert "# prefill/decode split: send requests to the router, http://127.0.0.1:30000 (the groups alone fail)" in text


def test_a_keyless_router_gets_groups_without_the_kinds_key_and_says_so() -> None:
    exported = export_recipe(judge(load_recipe(str(SPLITS["vllm"])), HOST_NETWORK), "compose", ExportOptions())
    services = yaml.safe_load(exported.files["compose.yaml"])["services"]
    assert all("VLLM_API_KEY" not in str(service.get("environment")) for service in services.values())
    assert exported.not_carried == [
        "VLLM_API_KEY: a split's groups serve without a key behind its router, which takes none in an export",
        "vllm/vllm-router:v0.1.17: the router's image by its tag (the deploy runs the digest it pulled)",
        "network_mode host: each group's port is the host's; --bind applies to the router alone",
    ]


def test_the_router_beyond_loopback_needs_allow_unauthenticated(tmp_path: Path) -> None:
    # vLLM's key comes from the environment, so the judgement lets its groups bind beyond loopback with a key; the
    # exported router takes none.
    keyed = Allowances(docker_options=("--network=host",), api_key="auto", bind_address="0.0.0.0")
    with pytest.raises(InputError) as caught:
        _compose("vllm", tmp_path, keyed)
    assert caught.value.message.endswith(
        "\n  - [pd-export-exposure] the router would listen on 0.0.0.0 and takes no API key in an export; bind it on "
        "loopback (--bind 127.0.0.1), or pass --allow-unauthenticated on a trusted network"
    )
    open_ = Allowances(docker_options=("--network=host",), unauthenticated=True, bind_address="0.0.0.0")
    router = _compose_config(_compose("sglang", tmp_path, open_), "compose.yaml")["services"]["router"]
    assert router["command"][-5:-2] == ["0.0.0.0", "--port", "30000"]


def test_a_keyed_split_and_a_group_on_the_routers_port_are_refused_by_name() -> None:
    text = SPLITS["sglang"].read_text()
    keyed = parse_recipe_text(
        text.replace("  - --enable-metrics\n", "  - --enable-metrics\n  - --api-key '{{env:SGLANG_API_KEY}}'\n")
    )
    with pytest.raises(InputError) as caught:
        export_recipe(judge(keyed, HOST_NETWORK), "compose", ExportOptions())
    assert caught.value.message.endswith(
        "\n  - [pd-export-key] deepseek-v4-flash-pd-0 takes an API key (--api-key), which the exported router would "
        "need on its command line to send on; serve the split without --api-key, its router on loopback"
    )
    clash = parse_recipe_text(text.replace("port_base: 5000", "port_base: 29999"))
    with pytest.raises(InputError) as caught:
        export_recipe(judge(clash, HOST_NETWORK), "compose", ExportOptions())
    assert caught.value.message.endswith(
        "\n  - [pd-export-port] the router's port 30000 is deepseek-v4-flash-pd-1's; move the group (port_base)"
    )


@pytest.mark.parametrize("target", sorted(set(EXPORTERS) - set(SPLIT_TARGETS)))
def test_a_target_that_writes_no_router_refuses_a_split_by_name(target: str) -> None:
    judged = judge(load_recipe(str(SPLITS["sglang"])), HOST_NETWORK)
    with pytest.raises(
        InputError, match=f"a prefill/decode split is not exported to {target} .*export it --to compose"
    ):
        export_recipe(judged, target, ExportOptions())


@pytest.mark.parametrize("target,file", [("compose", "compose.yaml"), ("slurm", "*.sbatch")])
@pytest.mark.parametrize("kind", ["sglang", "vllm"])
def test_the_export_imports_back_to_the_same_split(kind: str, target: str, file: str, tmp_path: Path, capsys) -> None:
    judged = judge(load_recipe(str(SPLITS[kind])), HOST_NETWORK)
    write_export(export_recipe(judged, target, ExportOptions(run_id=RUN)), tmp_path / "out")
    (exported,) = (tmp_path / "out").glob(file)
    back_path = tmp_path / "back.yaml"
    assert main(["recipe", "import", str(exported), "-o", str(back_path)]) == 0, capsys.readouterr().err
    recipe, back = load_recipe(str(SPLITS[kind])), load_recipe(str(back_path))
    assert _renders(back) == _renders(recipe)  # the router is not a group: it comes from `--data router=true`
    assert back.groups.server_args == recipe.groups.server_args
    judge(back, HOST_NETWORK)  # the same split, deployable under the same allowances


# --- Slurm ------------------------------------------------------------------------------------------------


def _sbatch(kind: str, tmp_path: Path, **options) -> Path:
    judged = judge(load_recipe(str(SPLITS[kind])), HOST_NETWORK)
    write_export(export_recipe(judged, "slurm", ExportOptions(run_id=RUN, **options)), tmp_path)
    (script,) = tmp_path.glob("*.sbatch")
    return script


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_a_split_sbatch_passes_bash_n_and_shellcheck(kind: str, tmp_path: Path) -> None:
    script = _sbatch(kind, tmp_path)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True).returncode == 0
    checked = subprocess.run([_tool("shellcheck"), "-S", "warning", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_the_sbatch_starts_both_sides_then_the_router_and_benchmarks_through_it(kind: str, tmp_path: Path) -> None:
    """Run the script with stand-ins for docker, srun, scontrol and curl: the two sides start in the node's task,
    the router in its own step once both answer, the smoke cell goes to the router from the decode's container,
    and every container is stopped and removed when its step ends."""
    script = _sbatch(kind, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "docker $*" >> {log}\n')
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho node1\n")
    (bin_dir / "srun").write_text(f'#!/bin/bash\nfor a; do last="$a"; done\necho "srun $*" >> {log}\nbash -c "$last"\n')
    (bin_dir / "curl").write_text(f'#!/bin/sh\nfor a; do last="$a"; done\necho "curl $last" >> {log}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_SUBMIT_DIR": str(tmp_path),
    }
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    image, entrypoint, program, workers = ROUTERS[kind]
    router = next(i for i, c in enumerate(calls) if c.startswith("docker run") and f" {image} " in c)
    assert calls[router].endswith(" ".join([image, *program, *workers, *LISTEN]))
    assert f"--network host --entrypoint {entrypoint[0]} {image}" in calls[router]
    assert "--label=hgxkit.router=1" in calls[router]  # not hgxkit.serve: a deploy never takes it for a group
    health = [i for i, c in enumerate(calls) if c.startswith("curl") and not c.endswith("/readiness")]
    ready = next(i for i, c in enumerate(calls) if c == "curl http://127.0.0.1:30000/readiness")
    srun_router = next(i for i, c in enumerate(calls) if c.startswith("srun --overlap") and "serve_router" in c)
    bench_at = [i for i, c in enumerate(calls) if c.startswith("docker exec -e HF_HUB_OFFLINE=1")]
    # the batch step's own calls are in order; the steps' (background) calls only after what started them
    assert len(health) == 2 and max(health) < srun_router < router and max(health) < ready < min(bench_at)
    bench = [calls[i] for i in bench_at]
    decode = load_recipe(str(SPLITS[kind])).groups.name_template.replace("{{group}}", "1")
    assert len(bench) == 1 and bench[0].startswith(f"docker exec -e HF_HUB_OFFLINE=1 {decode} ")
    to_router = ("--base-url http://127.0.0.1:30000 ", "--host 127.0.0.1 --port 30000 ")  # vLLM's client, SGLang's
    assert any(words in bench[0] for words in to_router) and "--tokenizer /model" in bench[0]
    name = f"{load_recipe(str(SPLITS[kind])).name}-router"
    assert f"docker stop {name}" in calls and f"docker rm {name}" in calls
    assert calls[router].startswith(f"docker run --name {name} --label=hgxkit.router=1 ")  # the name it stops
    # The router's step lasts as long as its container, and the batch step asks for readiness every 10 s.
    text = script.read_text()
    assert "\n  wait\n}\nexport -f serve_router\n" in text
    assert 'the router stopped before it was ready" >&2; exit 1; }\n  sleep 10\ndone\n' in text


def test_a_split_under_pyxis_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"not exported with --slurm-runtime pyxis .*Docker only"):
        _sbatch("sglang", tmp_path, slurm_runtime="pyxis")


def test_a_split_under_pyxis_is_refused_naming_the_runtime_that_exports_it(tmp_path: Path) -> None:
    with pytest.raises(InputError) as refused:
        _sbatch("sglang", tmp_path, slurm_runtime="pyxis")
    assert str(refused.value) == (
        "deepseek-v4-flash-pd-one-node: a prefill/decode split is not exported with --slurm-runtime pyxis (its "
        "router in PD mode is written for Docker only); export it with --slurm-runtime docker"
    )


@pytest.mark.parametrize("kind", sorted(SPLITS))
def test_an_sbatch_of_a_split_says_each_sides_smoke_cell_goes_through_the_router_and_its_image_by_tag(
    kind: str,
) -> None:
    """Each side's wait says no smoke cell of its own follows (a plain group's names the kind's client:
    test_export_slurm_script.py), and the export says the router's image runs by its tag, as compose's does."""
    exported = export_recipe(judge(load_recipe(str(SPLITS[kind])), HOST_NETWORK), "slurm", ExportOptions(run_id=RUN))
    (script,) = exported.files.values()
    name = load_recipe(str(SPLITS[kind])).groups.name_template
    assert [line for line in script.splitlines() if line.startswith("# group ")] == [
        f"# group {g}: wait until {name.replace('{{group}}', str(g))} can generate, (one side of the split: the "
        "smoke cell goes through the router)"
        for g in (0, 1)
    ]
    image = ROUTERS[kind][0]
    assert f"{image}: the router's image by its tag (the deploy runs the digest it pulled)" in exported.not_carried


@pytest.mark.parametrize("target", SPLIT_TARGETS)
def test_an_export_finds_a_split_among_the_groups_it_exports_at_its_own_gpu_count(target: str) -> None:
    """A recipe one group of which does both phases on its own 4-GPU node, but which on the 8 GPUs the export
    plans for makes a decode side beside it: the export sees that side (and refuses the mix by name), never
    writing a decode group without the router that is the only way to reach it. (Listening beyond loopback
    without a key, as Kubernetes' sides must, so that the mix is the one refusal.)"""
    text = SPLITS["sglang"].read_text().replace("gpus_per_node: 8", "gpus_per_node: 4")
    text = text.replace("--host 127.0.0.1", "--host 0.0.0.0")
    recipe = parse_recipe_text(text.replace("  - - --disaggregation-mode prefill\n", "  - []\n"))
    judged = judge(recipe, replace(HOST_NETWORK, unauthenticated=True))
    written = export_recipe(judged, target, ExportOptions(total_gpus=4)).files.values()
    assert "--disaggregation-mode" not in "".join(written)  # one group, serving both phases
    with pytest.raises(InputError) as caught:
        export_recipe(judged, target, ExportOptions(total_gpus=8))
    assert caught.value.message == (
        "deepseek-v4-flash-pd-one-node: the router would front prefill/decode groups and groups that serve both "
        "phases, which it cannot mix: run one router per kind of group (router_host)"
    )


def test_the_kinds_key_is_dropped_with_a_note_only_where_a_group_passes_it_on() -> None:
    from dataclasses import replace

    from hgxkit.export.common import export_groups
    from hgxkit.export.pd_router import keyless_groups

    keyed = export_groups(judge(load_recipe(str(SPLITS["vllm"])), HOST_NETWORK).recipe, ExportOptions())
    name = keyed[0].kind.api_key_env
    assert name
    groups = [
        replace(
            g, containers=[replace(c, secret_env=tuple(n for n in c.secret_env if n != name)) for c in g.containers]
        )
        for g in keyed
    ]
    assert keyless_groups(groups) == (groups, [])  # no group passes the key on: nothing dropped, no note


def test_a_routers_labels_name_its_recipe_in_full_or_as_kubernetes_takes_a_label() -> None:
    from hgxkit.export.common import provenance
    from hgxkit.export.pd_router import router_labels

    origin = provenance(judge(load_recipe(str(SPLITS["sglang"])), HOST_NETWORK), ExportOptions(run_id=RUN))
    full, short = router_labels(origin), router_labels(origin, short=True)
    key = "hgxkit.io/recipe-hash"
    assert full[key] == origin.annotations()[key] and short[key] == origin.labels()[key] and full[key] != short[key]


def test_the_router_refuses_groups_that_span_nodes_or_one_that_takes_its_name() -> None:
    # `split_router` takes the groups an export writes; the recipe check refuses a split whose groups span nodes and
    # a group's name always holds its index, so these groups are made by hand: the router's own refusals, whole.
    judged = judge(load_recipe(str(SPLITS["sglang"])), HOST_NETWORK)
    prefill, decode = export_groups(judged.recipe, ExportOptions())
    head = "deepseek-v4-flash-pd-one-node: the split's router cannot be exported:\n  - "
    with pytest.raises(InputError) as caught:
        split_router(judged, [replace(prefill, nodes=2), decode])
    assert caught.value.message == head + "[pd-export-nodes] a group spans nodes; export a split on one node"
    with pytest.raises(InputError) as caught:
        split_router(judged, [prefill, replace(decode, name="router")])
    assert caught.value.message == head + "[pd-export-name] a group is named router, the router's; rename it"
