"""End-to-end: a hostile serving image on a simulated node cannot make root write outside hgxkit's directories.

The image is the SGLang stand-in with an entrypoint that, once the server is up, plants symlinks in the model
directory the recipe mounts read-write (`-v /data/models/…:/model`) pointing at marker paths outside hgxkit's
own directories (/etc/cron.d, /root, /var/spool/cron, /etc), a `python3` first on PATH that prints hostile
`hgxkit-start <path>` lines before the benchmark client runs, and a `/metrics` with a cron line and a
logrotate stanza appended. After the model's re-sync (deploys/model.py) and verify (deploys/verify.py) on that
node, no marker exists and no file under /etc, /var/spool/cron or /root changed (sha256 of every file and the
target of every link, before and after), except the files hgxkit itself is expected to write (`EXPECTED`).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import docker
import pytest
from sim_steps import cluster_name, node_sh, run_deploy

from hgxkit.sim.standin import image as serving
from hgxkit.sim.standin import registry

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("hostile")
MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"
HOSTILE_IMAGE = "hgxkit-e2e/sglang-hostile:pwn"
MARKERS = ("/etc/cron.d/hgxkit-pwn", "/root/pwn", "/var/spool/cron/pwn", "/etc/pwn-target", "/etc/logrotate.d/pwn")
WATCHED = ("/etc", "/var/spool/cron", "/root")
# What a model re-sync and a verify run may change under WATCHED (hgxkit's own writes, and the system's).
EXPECTED = (
    "/etc/hgxkit/",  # hgxkit's node configuration
    "/root/.ansible/",  # not hgxkit's, listed so a pyinfra fact helper's cache does not read as a change
    "/root/.cache/",  # Python and client caches of root's processes
    "/etc/ld.so.cache",
)

# Planted 15 s after the container starts (the stand-in reads its model first), then the server runs on.
PLANT = r"""#!/bin/sh
plant() {
  sleep 15
  d=/model
  [ -d "$d" ] || exit 0
  for f in config.json tokenizer.json; do
    [ -e "$d/$f" ] && mv "$d/$f" "$d/$f.orig"
  done
  ln -sfn /etc/cron.d/hgxkit-pwn "$d/config.json"
  ln -sfn /root/pwn "$d/tokenizer.json"
  ln -sfn /root/pwn "$d/.hgxkit-manifest.json"
  rm -rf "$d/.cache"; ln -sfn /var/spool/cron "$d/.cache"
  shard=$(ls "$d" | grep '\.safetensors$' | head -1)
  [ -n "$shard" ] && { mv "$d/$shard" "$d/$shard.orig"; ln -sfn /etc/pwn-target "$d/$shard"; }
  ln -sfn /etc/logrotate.d "$d/hgxkit-telemetry"
  touch /tmp/hgxkit-e2e-planted
}
plant &
exec "$@"
"""

# Every `python3` the benchmark runs in the container says first where telemetry should go.
PYTHON = r"""#!/bin/sh
echo "hgxkit-start /etc/cron.d/hgxkit-pwn"
echo "hgxkit-start ../../../../../root/pwn"
echo "hgxkit-start /var/spool/cron/pwn"
echo "hgxkit-done /etc/logrotate.d/pwn"
exec /usr/bin/python3 "$@"
"""

# The stand-in's /metrics with a cron line and a logrotate stanza after its own lines.
METRICS_TAIL = r"""

_hgxkit_e2e_render = render


def render(*args, **kwargs):
    return _hgxkit_e2e_render(*args, **kwargs) + (
        "* * * * * root touch /root/pwn\n"
        "/var/log/*.log {\n  daily\n  postrotate\n    touch /etc/pwn-target\n  endscript\n}\n"
        "hgxkit-start /etc/cron.d/hgxkit-pwn\n"
        "\x1b]0;pwned\x07\n"
    )
"""

DOCKERFILE = """ARG BASE
FROM ${BASE}
COPY plant /usr/local/bin/hgxkit-plant
COPY python3 /usr/local/bin/python3
COPY metrics_tail.py /tmp/metrics_tail.py
RUN chmod 755 /usr/local/bin/hgxkit-plant /usr/local/bin/python3 && \
    cat /tmp/metrics_tail.py >> /opt/hgxkit-sim/hgxkit/sim/standin/sglang/metrics.py && rm /tmp/metrics_tail.py
ENTRYPOINT ["/usr/local/bin/hgxkit-plant"]
"""

SNAPSHOT = (
    "find " + " ".join(WATCHED) + " -xdev \\( -type f -o -type l \\) -print0 2>/dev/null | sort -z | "
    'while IFS= read -r -d \'\' p; do if [ -L "$p" ]; then echo "link $(readlink "$p") $p"; '
    'else echo "$(sha256sum < "$p" | cut -c1-64) $p"; fi; done'
)


def build_hostile_image() -> None:
    """The SGLang stand-in plus the planting entrypoint, the talking python3 and the hostile /metrics, pushed
    into the nodes' registry mirror as HOSTILE_IMAGE (never over the stand-in's own tags)."""
    client = docker.from_env()
    base = serving.ensure_image(client)
    with tempfile.TemporaryDirectory(prefix="hgxkit-e2e-hostile-") as ctx:
        for name, text in (("plant", PLANT), ("python3", PYTHON), ("metrics_tail.py", METRICS_TAIL)):
            (Path(ctx) / name).write_text(text)
        (Path(ctx) / "Dockerfile").write_text(DOCKERFILE)
        client.images.build(path=ctx, tag=HOSTILE_IMAGE, buildargs={"BASE": base}, rm=True, network_mode="none")
    registry.publish(client, [HOSTILE_IMAGE], force=True)


def snapshot() -> dict[str, str]:
    """path -> sha256 (or `link <target>`) of every file and link under WATCHED on the node."""
    lines = node_sh(CLUSTER, SNAPSHOT, timeout=600).splitlines()
    out = {}
    for line in lines:
        if line.startswith("link "):
            _, target, path = line.split(" ", 2)
            out[path] = f"link {target}"
        elif len(line) > 65:
            out[line[65:]] = line[:64]
    return out


def expected(path: str) -> bool:
    return any(path == e or (e.endswith("/") and path.startswith(e)) for e in EXPECTED)


@pytest.fixture(scope="module")
def hostile_served(sim_nodes, tmp_path_factory) -> str:
    """A node serving the marlin recipe from the hostile image, its links planted."""
    sim_nodes(1, cluster=CLUSTER, memory_gib=3072)
    build_hostile_image()
    recipe = tmp_path_factory.mktemp("recipes") / "hostile.yaml"
    text = (ROOT / MARLIN).read_text()
    assert (
        "  reference: lmsysorg/sglang:dev-dspark\n" in text
        and "-v /data/models/deepseek-v4-flash-dspark:/model\n" in text
    )
    text = text.replace("  reference: lmsysorg/sglang:dev-dspark\n", f"  reference: {HOSTILE_IMAGE}\n")
    recipe.write_text(text.replace("name: deepseek-v4-flash-dspark-", "name: hostile-", 1))
    first = run_deploy(CLUSTER, "deploys/dspark.py", "verify=false", f"recipe={recipe}")
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    deadline = time.monotonic() + 120
    while "planted" not in node_sh(
        CLUSTER,
        "docker exec $(docker ps -q --filter label=hgxkit.serve | head -1) "
        "sh -c 'ls /tmp/hgxkit-e2e-planted && echo planted'",
    ):
        assert time.monotonic() < deadline, "the hostile image never planted its links"
        time.sleep(3)
    return str(recipe)


def test_resync_and_verify_follow_no_link_a_container_planted(hostile_served: str) -> None:
    links = node_sh(CLUSTER, "find /data/models/deepseek-v4-flash-dspark -maxdepth 1 -type l | sort").split()
    assert "/data/models/deepseek-v4-flash-dspark/config.json" in links, links  # the plant worked
    before = snapshot()
    assert before and not [m for m in MARKERS if node_sh(CLUSTER, f"ls -d {m} 2>/dev/null").strip()]

    sync = run_deploy(CLUSTER, "deploys/model.py", f"recipe={hostile_served}")
    verify = run_deploy(CLUSTER, "deploys/verify.py", f"recipe={hostile_served}")
    outputs = sync.stdout + sync.stderr + verify.stdout + verify.stderr
    assert "\x1b]0;pwned" not in outputs  # the container's terminal escapes never reach the operator's terminal

    present = [m for m in MARKERS if node_sh(CLUSTER, f"ls -d {m} 2>/dev/null").strip()]
    after = snapshot()
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p) and not expected(p))
    print(
        f"\nre-sync rc {sync.returncode}, verify rc {verify.returncode}; {len(before)} files and links under "
        f"{', '.join(WATCHED)} compared; changed outside EXPECTED: {changed}; markers present: {present}"
    )
    assert present == []
    assert changed == []
