"""End-to-end: a container that swaps a path it can write for a symlink gains nothing on a simulated node.

The seed recipe runs with one more mount, `-v <local_dir>/extra:/extra:ro`, inside its read-write model mount:
the policy refuses that (`nested-mount`), and the inventory allows it by name, so that what is left to prove is
the node's own check at the moment of use. The serving container replaces `/model/extra` with a link to `/`;
the next deploy, which must replace the container, is refused before the old container stops, the old one
serves on, and no container sees the host's root. Then a container with the models root mounted (the other
class) swaps `local_dir` itself for a link to /etc/cron.d; the model sync (root) stops with one line and
writes nothing there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_steps import cluster_name, node_sh, run_deploy

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("mountswap")
SEED = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
MODEL = "/data/models/deepseek-v4-flash-dspark"
MOUNT = f"  - -v {MODEL}:/model\n"
ALLOW = 'allow_docker_options=["nested-mount"]'
MARKER = "/root/hgxkit-e2e-host-marker"
SERVING = "docker ps -q --filter label=hgxkit.serve | head -1"
# Every container on the node that sees the host's root through /extra (none may).
LEAKS = f"for c in $(docker ps -q); do docker exec $c test -e /extra{MARKER} && echo LEAK $c; done; true"
READY = ".swap-watcher-ready"
# The simulated Hub's rate limit (`POST /_hubsim/faults`), about 1 MB/s per file
SLOW_HUB = "curl -sS -X POST -H 'Content-Type: application/json' -d '{\"rate_bps\": 1000000}' http://127.0.0.1:8088/_hubsim/faults"
CRON_LIST = (
    "find /etc/cron.d -xdev -print0 | sort -z | xargs -0 ls -ld --time-style=+%s; sha256sum /etc/cron.d/* || true"
)


def _recipe(directory: Path, file: str, extra: str) -> str:
    text = (ROOT / SEED).read_text()
    assert MOUNT in text
    text = text.replace(MOUNT, MOUNT + f"  - -v {MODEL}/extra:/extra:ro\n" + extra)
    path = directory / f"{file}.yaml"
    path.write_text(text.replace("name: deepseek-v4-flash-dspark-", "name: swap-", 1))
    return str(path)


@pytest.fixture(scope="module")
def recipes(sim_nodes, tmp_path_factory) -> tuple[str, str]:
    """(the recipe now serving on the node, the same with one more env var: a spec that needs a replace)."""
    sim_nodes(1, cluster=CLUSTER, memory_gib=3072)
    directory = tmp_path_factory.mktemp("recipes")
    first = _recipe(directory, "first", "")
    second = _recipe(directory, "second", "  - -e HGXKIT_E2E_SPEC=2\n")
    node_sh(CLUSTER, f"mkdir -p {MODEL}/extra && echo host > {MARKER}", check=True)
    done = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={first}", ALLOW)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return first, second


def test_a_mount_source_swapped_for_a_link_is_refused_at_the_next_start(recipes: tuple[str, str]) -> None:
    _, second = recipes
    before = node_sh(CLUSTER, SERVING).strip()
    assert before
    node_sh(CLUSTER, f"docker exec {before} sh -c 'mv /model/extra /model/extra.moved && ln -s / /model/extra'")
    assert node_sh(CLUSTER, f"readlink {MODEL}/extra").strip() == "/"  # the container's swap is on the host
    done = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={second}", ALLOW)
    output = done.stdout + done.stderr
    print(f"\nre-deploy rc {done.returncode}; leaks: {node_sh(CLUSTER, LEAKS).split()}")
    assert done.returncode != 0, output[-6000:]
    assert f"refused: the host path {MODEL}/extra cannot be used: {MODEL}/extra is a symbolic link" in output
    assert "the old container serves on" in output
    assert node_sh(CLUSTER, SERVING).strip() == before  # never stopped, never replaced
    assert "LEAK" not in node_sh(CLUSTER, LEAKS)


def test_a_local_dir_swapped_while_the_sync_runs_gets_nothing_written_through_it(recipes: tuple[str, str]) -> None:
    first, _ = recipes
    image = node_sh(CLUSTER, f"docker inspect -f '{{{{.Image}}}}' $({SERVING})").strip()
    # A container with the models root mounted waits until the sync is downloading (its partial directory
    # appears), then swaps local_dir for a link to /etc/cron.d: after every plan-time check has passed.
    name = Path(MODEL).name
    watch = (
        f"touch /models/{READY}; while [ ! -d /models/{name}/.cache/hgxkit/partial ]; do sleep 0.01; done; "
        f"mv /models/{name} /models/moved && ln -s /etc/cron.d /models/{name}"
    )
    node_sh(CLUSTER, f"docker run -d --rm -v /data/models:/models --entrypoint sh {image} -c '{watch}'", check=True)
    # the watcher is watching before the sync starts, and the file it fetches is half downloaded for seconds
    node_sh(CLUSTER, f"until [ -e /data/models/{READY} ]; do sleep 0.1; done; rm -f /data/models/{READY}", check=True)
    node_sh(CLUSTER, SLOW_HUB, check=True)
    node_sh(CLUSTER, f"cd {MODEL} && rm -f $(ls -S | grep safetensors | head -1)", check=True)  # a file to fetch
    before = node_sh(CLUSTER, CRON_LIST)
    try:
        done = run_deploy(CLUSTER, "deploys/model.py", f"recipe={first}", ALLOW)
    finally:
        node_sh(CLUSTER, SLOW_HUB.replace("1000000", "null"), check=True)
    output = done.stdout + done.stderr
    print(f"\nmodel sync rc {done.returncode}; local_dir is now {node_sh(CLUSTER, f'readlink {MODEL}').strip()!r}")
    assert node_sh(CLUSTER, f"readlink {MODEL}").strip() == "/etc/cron.d"  # the swap happened during the sync
    assert done.returncode != 0, output[-6000:]
    assert f"refusing {MODEL}: {MODEL} is a symbolic link or no directory" in output
    assert node_sh(CLUSTER, CRON_LIST) == before
