"""vLLM over hosts imported as one multi-node group: on a Ray cluster (run_cluster.sh, `ray start`, a `docker run
… -c "ray start …"`) and with vLLM's own data parallelism over hosts; rendered per host; awkward posts refused
by name (hgxkit/importing/vllm_multinode.py, hgxkit/recipe/nodes.py)."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.recipe.render import render_recipe

HEAD = "bash run_cluster.sh vllm/vllm-openai 10.0.0.1 --head /data/hf -e VLLM_HOST_IP=10.0.0.1\n"
WORKER = "bash run_cluster.sh vllm/vllm-openai 10.0.0.1 --worker /data/hf -e VLLM_HOST_IP={ip}\n"
SERVE = "vllm serve org/m --tensor-parallel-size {tp} --pipeline-parallel-size {pp}\n"
DP = (
    "vllm serve org/m --data-parallel-size 16 --data-parallel-size-local 8 --data-parallel-address {head} "
    "--data-parallel-rpc-port 13345{more}\n"
)
RANK1 = " --headless --data-parallel-start-rank 8"


def imported(text: str, **options: object) -> ImportOutcome:
    return import_post([("p.md", text)], ImportOptions(**options))  # type: ignore[arg-type]


def refusal(text: str, **options: object) -> str:
    with pytest.raises(InputError) as caught:
        imported(text, **options)
    return caught.value.message


def argv(outcome: ImportOutcome, rank: int) -> list[str]:
    (group,) = render_recipe(outcome.recipe, rank=rank, head="node1")
    return group.shell_argv


# --- Ray ---


def test_run_cluster_head_and_worker_then_serve_is_one_group_over_two_hosts() -> None:
    outcome = imported(HEAD + WORKER.format(ip="10.0.0.2") + SERVE.format(tp=8, pp=2))
    recipe = outcome.recipe
    assert recipe.image.reference == "vllm/vllm-openai"
    assert (recipe.groups.size, recipe.groups.nodes, recipe.groups.dist_port) == (8, 2, 6379)
    assert argv(outcome, 0) == [
        "docker",
        "run",
        "--entrypoint",
        "/bin/bash",
        "--network",
        "host",
        "--shm-size",
        "10.24g",
        "--gpus",
        "all",
        "-v",
        "/data/models/m:/models/m:ro",
        "vllm/vllm-openai",
        "-c",
        'ray start --head --node-ip-address=node1 --port=6379 && exec "$@"',
        "ray-head",
        "vllm",
        "serve",
        "--model",
        "/models/m",
        "--tensor-parallel-size",
        "8",
        "--pipeline-parallel-size",
        "2",
        "--distributed-executor-backend",
        "ray",
        "--served-model-name",
        "org/m",
    ]
    assert argv(outcome, 1)[-3:] == ["vllm/vllm-openai", "-c", "exec ray start --block --address=node1:6379"]
    assert (
        "p.md:1: -e VLLM_HOST_IP=10.0.0.1 is this host's own address; dropped (Ray uses each host's address on "
        "the host network)" in outcome.notes
    )
    assert (
        "p.md:3: --distributed-executor-backend ray added: the server spans the Ray cluster's 2 hosts (vLLM picks "
        "Ray there anyway; said so that every host's part is known)"
    ) in outcome.notes
    took = [(r.where, r.action, r.what) for r in outcome.report if r.action in ("read", "took")]
    assert took == [
        ("p.md:1", "read", "Ray head (port 6379)"),
        ("p.md:2", "read", "Ray worker (the head at 10.0.0.1:6379)"),
        ("p.md:3", "took", "`vllm serve` (the server, vLLM)"),
    ]


def test_bare_ray_start_on_a_port_of_its_own() -> None:
    post = (
        "ray start --head --port=6380 --num-gpus=8\nray start --block --address=10.0.0.1:6380 --num-gpus=8\n"
        "vllm serve org/m -tp 8 -pp 2\n"
    )
    outcome = imported(post)
    recipe = outcome.recipe
    assert (recipe.groups.size, recipe.groups.nodes, recipe.groups.dist_port) == (8, 2, 6380)
    words = [w for entry in recipe.docker.entries for w in entry.words]
    assert words[:4] == ["--entrypoint", "/bin/bash", "--network", "host"] and "-p" not in words
    assert argv(outcome, 1)[-2:] == ["-c", "exec ray start --block --address=node1:6380"]


def test_a_docker_run_of_ray_start_is_the_clusters_container() -> None:
    run = (
        "docker run -d --gpus all --ipc=host --network=host --shm-size 10.24g -v /srv/hf:/srv/hf "
        '--entrypoint /bin/bash -e VLLM_HOST_IP={ip} --name ray_{role} vllm/vllm-openai:v0.9.0 -c "{cmd}"\n'
    )
    post = (
        run.format(ip="192.168.0.1", role="head", cmd="ray start --block --head --port=6379")
        + run.format(ip="192.168.0.2", role="worker", cmd="ray start --block --address=192.168.0.1:6379")
        + "docker exec -it ray_head bash\n"
        + "python3 -m vllm.entrypoints.openai.api_server --model /srv/hf/m -tp 8 -pp 2 "
        "--distributed-executor-backend ray\n"
    )
    outcome = imported(post)
    recipe = outcome.recipe
    assert recipe.image.reference == "vllm/vllm-openai:v0.9.0"
    assert " ".join(w for e in recipe.docker.entries for w in e.words) == (
        "-d --gpus all --ipc=host --network=host --shm-size 10.24g -v /srv/hf:/srv/hf --entrypoint /bin/bash "
        "--name ray_head"
    )
    assert (recipe.groups.nodes, recipe.groups.size) == (2, 8)


@pytest.mark.parametrize(
    ("post", "message"),
    [
        pytest.param(
            HEAD.replace("10.0.0.1 --head", "$(hostname -I) --head")
            + WORKER.format(ip="10.0.0.2")
            + SERVE.format(tp=8, pp=2),
            "p.md: line 1, column 38: '$(' (a command substitution) in a Ray start is not imported; write the head's "
            "address: hgxkit gives it again per deploy",
            id="head-address-from-a-substitution",
        ),
        pytest.param(
            HEAD + WORKER.format(ip="10.0.0.2") + SERVE.format(tp=4, pp=3),
            "p.md:3: tp x pp x dp = 12 GPUs, but the post's Ray cluster is 2 host(s) (1 head, 1 worker(s)) of 8 GPUs = "
            "16; Ray would place the workers where it likes: make tp x pp = 16, or start 2 hosts",
            id="tp-x-pp-not-the-clusters-gpus",
        ),
        pytest.param(
            HEAD + WORKER.format(ip="10.0.0.2") + WORKER.format(ip="10.0.0.3") + SERVE.format(tp=8, pp=2),
            "p.md:4: tp x pp x dp = 16 GPUs, but the post's Ray cluster is 3 host(s) (1 head, 2 worker(s)) of 8 GPUs = "
            "24; Ray would place the workers where it likes: make tp x pp = 24, or start 2 hosts",
            id="worker-count-mismatch",
        ),
        pytest.param(
            WORKER.format(ip="10.0.0.2") + SERVE.format(tp=8, pp=2),
            "p.md:1: the post starts Ray worker(s) but no head (`--head`); give the head's command",
            id="workers-without-a-head",
        ),
        pytest.param(
            HEAD + SERVE.format(tp=8, pp=2),
            "p.md:1: a Ray head but no worker (`--worker`, `ray start --address=…`); a group over one host needs no "
            "Ray cluster: import the server alone",
            id="a-head-without-workers",
        ),
        pytest.param(
            "ray start --head --num-gpus=4\nray start --address=10.0.0.1:6379 --num-gpus=4\n"
            + SERVE.format(tp=4, pp=2),
            "p.md:1: the Ray head gives 4 GPU(s) (--num-gpus); a Ray cluster here takes whole HGX-H200 nodes (8 GPUs "
            "each, one Ray node per host): drop --num-gpus, or serve a smaller group without Ray",
            id="hosts-of-part-of-a-node",
        ),
        pytest.param(
            "ray start --head\nray start --address=\n" + SERVE.format(tp=8, pp=2),
            "p.md:2: `ray start` without --head or --address=HEAD:PORT; write which it is",
            id="an-empty-worker-address",
        ),
        pytest.param(
            "bash run_cluster.sh vllm/vllm-openai 10.0.0.1 --leader /data/hf\n" + SERVE.format(tp=8, pp=2),
            "p.md:1: run_cluster.sh takes IMAGE HEAD_IP --head|--worker PATH_TO_HF_HOME [docker options]; the post "
            "gives vllm/vllm-openai 10.0.0.1 --leader /data/hf",
            id="run-cluster-without-its-role",
        ),
        pytest.param(
            HEAD
            + WORKER.format(ip="10.0.0.2")
            + SERVE.format(tp=8, pp=2).replace("\n", " --distributed-executor-backend mp\n"),
            "p.md:3: --distributed-executor-backend mp on a Ray cluster; a group over hosts runs on Ray here",
            id="another-backend-on-a-ray-cluster",
        ),
    ],
)
def test_awkward_ray_posts_are_refused_by_name(post: str, message: str) -> None:
    assert refusal(post) == message


# --- data parallelism over hosts ---


def test_dp_ranks_over_two_hosts_are_one_group_and_each_host_gets_its_start_rank() -> None:
    outcome = imported(DP.format(head="10.0.0.1", more="") + DP.format(head="10.0.0.1", more=RANK1))
    recipe = outcome.recipe
    assert (recipe.groups.size, recipe.groups.nodes, recipe.groups.dist_port) == (8, 2, 13345)
    server = [
        "--model",
        "/models/m",
        "--data-parallel-size",
        "16",
        "--data-parallel-size-local",
        "8",
        "--data-parallel-address",
        "node1",
        "--data-parallel-rpc-port",
        "13345",
        "--served-model-name",
        "org/m",
    ]
    head, other = argv(outcome, 0), argv(outcome, 1)
    assert head[head.index("vllm/vllm-openai:latest") + 1 :] == server
    assert other[other.index("vllm/vllm-openai:latest") + 1 :] == [
        *server,
        "--headless",
        "--data-parallel-start-rank",
        "8",
    ]
    assert "--network=host" in head and "-p" not in head
    assert (
        "p.md:1: --data-parallel-size 16 over 2 hosts, 8 rank(s) each; the head address 10.0.0.1 is the poster's "
        "network; it is given per deploy ({{head}})"
    ) in outcome.notes


def test_a_head_address_spelt_differently_per_host_is_one_group() -> None:
    outcome = imported(DP.format(head="10.0.0.1", more="") + DP.format(head="node0", more=RANK1))
    assert outcome.recipe.groups.nodes == 2


def test_a_head_address_with_a_default_the_post_leaves_unset_is_the_default() -> None:
    dp = imported(DP.format(head="${IP:-10.0.0.1}", more="") + DP.format(head="${IP:-10.0.0.1}", more=RANK1))
    assert dp.recipe.groups.nodes == 2
    assert (
        "p.md:1: the post does not set IP, so its default 10.0.0.1 is taken (a shell that has IP set would use that)"
        in dp.notes
    )
    ray = imported(
        "ray start --head --port=6379\nray start --address=${HEAD:-10.0.0.1}:6379\n" + SERVE.format(tp=8, pp=2)
    )
    assert ray.recipe.groups.nodes == 2


def test_an_unset_rpc_port_variable_takes_vllms_default() -> None:
    post = DP.format(head="$MASTER_IP", more="").replace("13345", "$PORT")
    outcome = imported(post)
    assert outcome.recipe.groups.dist_port == 29550
    assert not [n for n in outcome.notes if "$MASTER_IP is not set" in n]  # the word is given per deploy


@pytest.mark.parametrize(
    ("post", "message"),
    [
        pytest.param(
            DP.format(head="10.0.0.1:13345", more=""),
            "p.md:1: --data-parallel-address '10.0.0.1:13345' is not a host name or address (a shell expression the "
            "import cannot read); write the head's address: hgxkit gives it again per deploy",
            id="head-address-with-a-port",
        ),
        pytest.param(
            DP.format(head="10.0.0.1", more="")
            + DP.format(head="10.0.0.1", more=" --headless --data-parallel-start-rank 4"),
            "p.md:1: --data-parallel-start-rank 4 is not a multiple of --data-parallel-size-local 8 below "
            "--data-parallel-size 16; host k starts at rank k x 8",
            id="start-rank-between-hosts",
        ),
        pytest.param(
            "vllm serve org/m --data-parallel-size 6 --data-parallel-size-local 4 --data-parallel-address 10.0.0.1\n",
            "p.md:1: --data-parallel-size 6 is not a multiple of --data-parallel-size-local 4: every host of a group "
            "runs the same share of the ranks",
            id="uneven-shares",
        ),
        pytest.param(
            "vllm serve org/m --data-parallel-size 4 --data-parallel-size-local 0 --data-parallel-address 10.0.0.1\n",
            "p.md:1: --data-parallel-size-local 0 (a host that runs only the API server) is not imported: every host "
            "of a group runs the same share of the 4 ranks",
            id="an-api-server-only-head",
        ),
        pytest.param(
            "vllm serve org/m --data-parallel-size 4 --data-parallel-size-local 2\n",
            "p.md:1: data parallelism over 2 hosts needs --data-parallel-address (the head's address every host "
            "reaches)",
            id="no-head-address",
        ),
        pytest.param(
            "vllm serve org/m -tp 8 -dp 4 -dpl 2 -dpa 10.0.0.1\n",
            "p.md:1: 2 local rank(s) x tp x pp = 16 GPUs per host; an HGX-H200 node has 8",
            id="more-gpus-per-host-than-a-node",
        ),
    ],
)
def test_awkward_dp_posts_are_refused_by_name(post: str, message: str) -> None:
    assert refusal(post) == message
