"""End-to-end: a simulated node with no route out (only the controller's SSH answered; iptables inside the
node, kept across its reboots) converges from a bundle made by `hgxkit bundle create`: bring-up, model, serving,
verify and the archive; a re-run changes nothing; a bundle whose manifest was edited is refused before anything
is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from sim_steps import cluster_name, deploy_env, node_sh, out, run_deploy

from hgxkit.cli.bundle import create_schema

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = cluster_name("bundle")
MARLIN = "recipes/deepseek-v4-flash-dspark-marlin.yaml"

# The node's firewall: answers to the controller's SSH (inbound, so established), its own loopback and Docker's
# bridges; the sim's loopback mirrors (apt stand-in 8081, Hub 8088, registry mirror 15000) refused, every other
# destination dropped. A unit applies it at every boot (bring-up reboots the node).
FIREWALL = "\n".join(
    [
        "#!/bin/sh",
        "iptables -F OUTPUT",
        "iptables -A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
        "iptables -A OUTPUT -o lo -p tcp -m multiport --dports 8081,8088,15000 -j REJECT",
        "iptables -A OUTPUT -o lo -j ACCEPT",
        "iptables -A OUTPUT -o docker0 -j ACCEPT",
        "iptables -A OUTPUT -o br-+ -j ACCEPT",
        "iptables -A OUTPUT -j DROP",
        "",
    ]
)
UNIT = "\n".join(
    [
        "[Unit]",
        "Description=hgxkit e2e: this node has no route out (tests/e2e/test_bundle.py)",
        "After=network.target",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=/usr/local/sbin/hgxkit-e2e-airgap",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
)
AIRGAP = (
    f"set -e; printf %s '{FIREWALL}' > /usr/local/sbin/hgxkit-e2e-airgap; chmod 755 /usr/local/sbin/hgxkit-e2e-airgap; "
    f"printf %s '{UNIT}' > /etc/systemd/system/hgxkit-e2e-airgap.service; systemctl daemon-reload; "
    "systemctl enable --now hgxkit-e2e-airgap.service; echo airgapped"
)
MIRRORS = (
    "http://127.0.0.1:8081/cuda/debian12/x86_64/Release",
    "http://127.0.0.1:8088/api/models",
    "http://127.0.0.1:15000/v2/",
    "https://pypi.org/simple/",
    "https://deb.debian.org/debian/",
)
REACH = "; ".join(f"curl -sS -o /dev/null --max-time 5 {url} 2>/dev/null; echo {url} $?" for url in MIRRORS)


def grand_total(result: subprocess.CompletedProcess[str]) -> tuple[int, int, int, int]:
    match = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out(result))
    assert match, out(result)[-3000:]
    return tuple(0 if v == "-" else int(v) for v in match.groups())  # type: ignore[return-value]


@pytest.fixture(scope="module")
def airgapped(sim_nodes, tmp_path_factory):
    """A fresh node, cut off, deployed from a bundle made on this (connected) machine."""
    sim_nodes(1, cluster=CLUSTER, memory_gib=3072)  # the post's HiCache ratio on two TP4 groups needs ~2.5 TB
    work = tmp_path_factory.mktemp("bundle")
    bundle = work / "b"
    created = subprocess.run(
        [
            sys.executable,
            "-m",
            "hgxkit",
            "bundle",
            "create",
            "--recipe",
            MARLIN,
            "--inventory",
            "inventories/sim.py",
            "-o",
            str(bundle),
            "--key-home",
            str(work / "gnupg"),
            "--json",
        ],
        cwd=ROOT,
        env={**deploy_env(CLUSTER), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert created.returncode == 0, out(created)[-3000:]
    summary = json.loads(created.stdout.splitlines()[-1])  # progress goes to stderr with --json
    assert list(Draft202012Validator(create_schema()).iter_errors(summary)) == [], summary
    assert node_sh(CLUSTER, AIRGAP).strip().endswith("airgapped")
    results = work / "results"
    first = run_deploy(CLUSTER, "deploys/dspark.py", f"bundle={bundle}", f"results_dir={results}")
    return bundle, results, first


def test_the_node_reaches_no_mirror_and_nothing_outside(airgapped) -> None:
    reach = dict(line.rsplit(" ", 1) for line in node_sh(CLUSTER, REACH).splitlines())
    assert sorted(reach) == sorted(MIRRORS) and all(code != "0" for code in reach.values()), reach
    assert reach[MIRRORS[0]] == "7"  # the apt stand-in: connection refused


def test_a_cut_off_node_converges_from_the_bundle(airgapped) -> None:
    bundle, results, first = airgapped
    assert first.returncode == 0, out(first)[-6000:]
    doc = json.loads((bundle / "bundle.json").read_text())
    node_dir = f"/var/lib/hgxkit/bundle/{doc['bundle_sha256'][:16]}"
    assert f"Verify the bundle on the node before anything is installed from it ({node_dir})" in out(first)
    # apt read the bundle's signed repositories only: the pinned driver and toolkit came from there.
    policy = node_sh(CLUSTER, "apt-cache policy nvidia-open nvidia-container-toolkit")
    assert policy.count(f"file:{node_dir}/apt/") >= 2 and "127.0.0.1:8081" not in policy, policy
    # The image was loaded from the bundle and runs by its ID; the model is the bundle's commit.
    images = node_sh(
        CLUSTER, "docker inspect --format '{{.Image}}' $(docker ps -q --filter label=hgxkit.serve)"
    ).split()
    assert images == [doc["image"]["id"]] * 2, images
    manifest = json.loads(node_sh(CLUSTER, "cat /data/models/deepseek-v4-flash-dspark/.hgxkit-manifest.json"))
    assert (manifest["source"], manifest["commit"]) == ("bundle", doc["model"]["commit"])
    pip = node_sh(CLUSTER, "/opt/hgxkit/hf-venv/bin/pip list --format freeze | grep -i huggingface")
    assert pip.strip() == "huggingface_hub==2.4.0", pip
    # verify ran and the run is archived on the controller.
    archived = sorted(results.glob("node1/*_deepseek-v4-flash-dspark-marlin/fingerprint.json"))
    assert len(archived) == 1, sorted(results.rglob("*"))[:20]


def test_a_rerun_from_the_bundle_changes_nothing(airgapped) -> None:
    bundle, _, first = airgapped
    assert first.returncode == 0
    again = run_deploy(CLUSTER, "deploys/dspark.py", f"bundle={bundle}", "verify=false")
    assert again.returncode == 0, out(again)[-4000:]
    ops, changed, errors, unchanged = grand_total(again)
    assert (changed, errors) == (0, 0) and unchanged == ops


def test_a_bundle_whose_manifest_was_edited_is_refused_before_anything_is_installed(airgapped, tmp_path) -> None:
    bundle, _, _ = airgapped
    tampered = tmp_path / "tampered"
    shutil.copytree(bundle, tampered, copy_function=os.link)  # hard links: the original stays as it is
    doc = json.loads((bundle / "bundle.json").read_text())
    doc["artifacts"][0]["sha256"] = "0" * 64  # e.g. to match a swapped file, leaving bundle_sha256 as it was
    (tampered / "bundle.json").unlink()
    (tampered / "bundle.json").write_text(json.dumps(doc))
    before = node_sh(CLUSTER, "ls /var/lib/hgxkit/bundle; dpkg -l | md5sum")
    refused = run_deploy(CLUSTER, "deploys/dspark.py", f"bundle={tampered}", "verify=false")
    assert refused.returncode != 0
    assert "bundle.json: its bundle_sha256 does not match its content (edited after create?)" in out(refused)
    assert node_sh(CLUSTER, "ls /var/lib/hgxkit/bundle; dpkg -l | md5sum") == before
