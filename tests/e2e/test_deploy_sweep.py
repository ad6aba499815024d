"""End-to-end: imported means deployable, on a sample of the corpus (the whole corpus is
`python bench/deploy_sweep.py`, `make sweep`).

One simulated node (cluster "sweep-<suffix>"), brought up with deploys/bringup.py; for each sampled post,
imported unedited, the serving role's container with the simulated stand-in in place of the post's image and
nothing else changed starts and answers its health endpoint (hgxkit.sim.sweep.deploy). The sample is chosen for
what a real HGX node allows and a simulated one must allow too: SGLang with `--ulimit memlock=-1 --ulimit
stack=…` and a large `--shm-size` (085, and SGLang's own compose file c01 with the host network), `--privileged`
with `--network=host` (002), vLLM with `--runtime nvidia` and a secret in its env file (007), a `--mount
type=bind` of a host path the node lacks (the unit example of test_sweep_sim), and SGLang with tp 1 given `--gpus
all` (013: it starts on the first GPU, as SGLang does). About 2 minutes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sim_steps import cluster_name

from hgxkit.hostcmd import argv
from hgxkit.sim.sweep import Case, SweepNodes, deploy

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "importing"))

SAMPLE = (
    "002-sglang-dsv3-readme-docker-pull-run.txt",
    "007-vllm-docs-v042-docker-dollar-prompt.txt",
    "013-sglang-ghio-backend-quickstart-python-m-then-curl.txt",
    "085-sglang-issue-h200-dsv32-docker-prose-starts-with-while.txt",
    "c01-sglang-docker-compose.yaml",
)
MOUNT = """```
docker run --gpus '"device=2"' --ipc=host --ulimit memlock=-1 --ulimit nofile=1048576:1048576 -p 30000:30000 \\
  --mount type=bind,source=/mnt/sweep-e2e,target=/mnt lmsysorg/sglang:latest \\
  python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0 --port 30000
```
"""


@pytest.fixture(scope="module")
def nodes(sim_nodes) -> SweepNodes:
    cluster = cluster_name("sweep")
    sim_nodes(1, cluster=cluster)
    swept = SweepNodes.up(cluster, count=1)
    swept.bring_up()
    swept.pull_standins()
    return swept


def _sample() -> list[Case]:
    import deploy_sweep

    cases = {case.name: case for case in deploy_sweep.corpus_cases()}
    return [cases[name] for name in SAMPLE]


def test_the_sample_of_the_corpus_starts_and_answers_health(nodes: SweepNodes) -> None:
    results = [deploy(nodes, case) for case in _sample()]
    assert [r.line() for r in results if not r.ok] == []
    assert [r.containers for r in results] == [1, 1, 1, 1, 1]


def test_a_memlock_unlimited_container_starts_and_says_what_the_node_fitted(nodes: SweepNodes) -> None:
    result = deploy(nodes, Case("mount.md", MOUNT))
    assert result.ok, result.line()
    code, out = nodes.sh(
        0,
        argv(
            "docker",
            "run",
            "--rm",
            "--ulimit",
            "memlock=-1",
            "--ulimit",
            "stack=67108864",
            "--privileged",
            "--ipc=host",
            "--network=host",
            "--shm-size",
            "64g",
            "lmsysorg/sglang:hgxkit-sweep",
            "sh",
            "-c",
            "echo $HGXKIT_SIM_CLAMPED",
        ),
    )
    assert code == 0, out
    clamped = out.strip()
    assert clamped == "" or clamped.startswith("memlock=-1:-1>"), clamped  # the CI machine: memlock=-1:-1>8388608:…
