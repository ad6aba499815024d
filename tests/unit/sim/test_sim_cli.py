"""`hgxkit sim` argument handling that needs no Docker engine."""

from __future__ import annotations

import pytest

from hgxkit.cli import build_parser, main
from hgxkit.sim.cli import _split_ssh_rest
from hgxkit.sim.image import base_tag, node_tag, packages


@pytest.mark.parametrize(
    ("argv", "cluster", "command"),
    [
        (["sim", "ssh", "node1"], "default", []),
        (["sim", "ssh", "node1", "--", "nvidia-smi", "-L"], "default", ["nvidia-smi", "-L"]),
        (["sim", "ssh", "node1", "--cluster", "e2e", "--", "ls", "-la"], "e2e", ["ls", "-la"]),
        (["sim", "ssh", "--cluster=e2e", "node2", "--", "true"], "e2e", ["true"]),
    ],
)
def test_ssh_arguments(argv, cluster, command, monkeypatch):
    monkeypatch.delenv("HGXKIT_SIM_CLUSTER", raising=False)
    args = build_parser().parse_args(argv)
    assert _split_ssh_rest(args) == command
    assert args.cluster == cluster


def test_up_rejects_bad_sizes_before_touching_docker(capsys):
    assert main(["sim", "up", "--gpus", "9"]) == 2
    assert "--gpus 9 is out of range" in capsys.readouterr().err
    assert main(["sim", "up", "--model-disk", "lots"]) == 2
    assert main(["sim", "down", "--cluster", "Bad_Name"]) == 2


def test_image_tags_hash_their_inputs():
    assert base_tag().startswith("hgxkit-sim-base:") and len(base_tag().split(":")[1]) == 16
    assert node_tag().startswith("hgxkit-sim-node:")
    assert {"systemd", "openssh-server", "docker.io", "pciutils", "docker-registry"} <= set(packages())
