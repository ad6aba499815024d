"""Launchers that run a server like `docker run` or a bare launch does: podman and nerdctl (Docker's options, CDI
GPU devices), `uv run` with options that take a value, and a launch whose parallel sizes a config file may set."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize("cli", ["podman", "nerdctl", "sudo podman"])
def test_podman_and_nerdctl_run_are_read_as_docker_run(cli: str) -> None:
    outcome = _import(f"{cli} run --gpus all -p 8000:8000 vllm/vllm-openai:v0.33.0 --model org/m\n")
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.33.0"
    assert any(f"`{cli.split()[-1]} run` read as `docker run`" in note for note in outcome.notes)


@pytest.mark.parametrize(("device", "gpus"), [("nvidia.com/gpu=all", "all"), ("nvidia.com/gpu=0,1", '"device=0,1"')])
def test_a_cdi_gpu_device_is_dockers_gpus(device: str, gpus: str) -> None:
    for written in (f"--device {device}", f"--device={device}"):
        outcome = _import(f"podman run {written} vllm/vllm-openai:v0.33.0 --model org/m\n")
        assert gpus in outcome.recipe.docker.words()
        assert "--device" not in outcome.recipe.docker.words()


def test_another_podman_device_stays_a_device() -> None:
    outcome = _import("podman run --gpus all --device /dev/infiniband vllm/vllm-openai:v0.33.0 --model org/m\n")
    assert "--device" in " ".join(outcome.recipe.docker.words())


def test_uv_run_options_that_take_a_value_are_passed_over() -> None:
    outcome = _import("uv run --with vllm --python 3.12 vllm serve org/m --port 8080\n")
    assert outcome.recipe.server.flag("--port") == "8080"


def test_a_launch_with_a_config_file_is_not_said_to_use_some_gpus() -> None:
    outcome = _import("vllm serve org/m --config /srv/v/config.yaml\n")
    assert not any("the server uses" in note for note in outcome.notes)


def test_a_pyxis_shell_script_is_refused_by_name() -> None:
    post = (
        "#!/bin/bash\n#SBATCH --nodes=1\nsrun --container-image=vllm/vllm-openai:v0.33.0 bash -c 'vllm serve org/m'\n"
    )
    assert "runs a shell script in the container with enroot + pyxis" in _refusal(post, "job.sbatch")


def test_a_run_ai_submit_is_refused_by_name_with_the_way_out() -> None:
    message = _refusal("runai inference submit x -i vllm/vllm-openai:latest -g 1 -- --model org/m\n")
    assert "Run:ai's CLI (runai) is not supported" in message and "--image" in message
