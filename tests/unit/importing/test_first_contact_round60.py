"""Classes of import failure found by reading held-out posts 630-653 first (rounds 60-62): `uvx vllm serve`
(uv's tool runner) refused as a program hgxkit does not read, where `uv run` is read (647); an LSF job's
`--host "${VLLM_HOST}"` set by `$(hostname -i)` refused, and its `CUDA_VISIBLE_DEVICES=${GPUS}` prefix left for the
node's shell (636); `~` said as `$~`; a Podman Quadlet `.container` unit not read (639)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize("uv", ["uvx", "uvx --python 3.12", "uvx --from vllm==0.11.0", "uv tool run"])
def test_uv_s_tool_runner_before_a_launch_is_dropped_with_a_note(uv: str) -> None:
    outcome = _import(f"{uv} vllm serve org/m --port 8001 \\\n  --max-model-len 4096\n")
    assert outcome.recipe.server.flag("--port") == "8001"
    assert outcome.recipe.server.flag("--max-model-len") == "4096"
    assert any(
        f"`{uv}` dropped ({uv.split()[0]} runs the command in an environment of its own" in n for n in outcome.notes
    )


def test_a_listen_address_set_by_a_command_substitution_becomes_every_interface() -> None:
    post = 'HOST=$(hostname -i)\nPORT=8001\nvllm serve org/m --host "${HOST}" --port ${PORT}\n'
    outcome = _import(post)
    assert outcome.recipe.server.flag("--host") == "0.0.0.0"
    assert any("--host ${HOST} became 0.0.0.0 ($HOST is set by `$(hostname -i)`" in n for n in outcome.notes)


def test_a_substitution_elsewhere_than_the_listen_address_is_still_refused() -> None:
    message = _refusal("M=$(cat model.txt)\nvllm serve $M --host 0.0.0.0\n")
    assert "$M is set by the command substitution `$(cat model.txt)`" in message


def test_a_launch_s_environment_prefix_has_the_post_s_variables_written_out() -> None:
    outcome = _import('GPUS="2,3"\nCUDA_VISIBLE_DEVICES=${GPUS} vllm serve org/m --tensor-parallel-size 2\n')
    assert '--gpus "device=2,3"' in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert any("$GPUS is the post's GPUS=2,3" in n for n in outcome.notes)


def test_a_tilde_is_said_as_written() -> None:
    outcome = _import("source ~/.bashrc\ncd ~/work\nvllm serve org/m\n")
    said = [f"{r.action} {r.what}" for r in outcome.report]
    assert "skipped source ~/.bashrc (not a serving or benchmark command)" in said


QUADLET = """[Unit]
Description=vLLM server
After=network-online.target

[Container]
Image=docker.io/vllm/vllm-openai:v0.11.0
ContainerName=vllm
PublishPort=8000:8000
# the GPUs through CDI
AddDevice=nvidia.com/gpu=all
PodmanArgs=--ipc=host
Environment=VLLM_LOGGING_LEVEL=INFO
Secret=hf-token,type=env,target=HF_TOKEN
Exec=--model org/m --tensor-parallel-size 2

[Install]
WantedBy=default.target
"""


def test_a_podman_quadlet_unit_is_the_podman_run_it_stands_for() -> None:
    outcome = _import(QUADLET, "vllm.container")
    entries = [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert outcome.recipe.image.reference == "docker.io/vllm/vllm-openai:v0.11.0"
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert {"--gpus all", "--ipc=host", "-p 8000:8000", "-e VLLM_LOGGING_LEVEL=INFO", "-e HF_TOKEN"} <= set(entries)
    assert any("a Podman Quadlet unit" in n for n in outcome.notes)


def test_a_quadlet_unit_s_local_model_is_named() -> None:
    message = _refusal(QUADLET.replace("org/m", "Qwen3-8B-Q4_K_M"), "vllm.container")
    assert "the model 'Qwen3-8B-Q4_K_M' has no org" in message


@pytest.mark.parametrize(
    ("post", "named"),
    [
        (
            'job "vllm" {\n  group "g" {\n    task "t" {\n      driver = "docker"\n    }\n  }\n}\n',
            "a HashiCorp Nomad job",
        ),
        (
            '{ config, lib, ... }:\n{\n  options.services.vllm.enable = lib.mkEnableOption "vLLM";\n}\n',
            "a NixOS module",
        ),
        ('<?xml version="1.0"?>\n<Container version="2">\n  <Repository>vllm/vllm-openai</Repository>\n', "an Unraid"),
        ("#!/bin/bash\n#PBS -l select=2\n#PBS -q gpu\nmpiexec -n 8 python infer.py\n", "a PBS job script"),
        ("#!/bin/bash\n#BSUB -gpu num=2\npython infer.py\n", "an LSF job script"),
    ],
)
def test_a_format_hgxkit_does_not_read_is_named_when_nothing_serves(post: str, named: str) -> None:
    message = _refusal(post, "post.txt")
    assert "no serving command found" in message and f"it is {named}" in message


AKASH = """---
version: "2.0"
services:
  vllm:
    image: vllm/vllm-openai:v0.6.3
    expose:
      - port: 8000
        as: 8000
        to:
          - global: true
    command:
      - bash
      - "-c"
    args:
      - >-
        huggingface-cli download org/m && vllm serve org/m --max-model-len 8192
    env:
      - "HF_TOKEN=hf_FAKE-TOKEN-FOR-TESTS-NOT-REAL"
profiles:
  compute:
    vllm:
      resources:
        cpu:
          units: 8
        gpu:
          units: 2
          attributes:
            vendor:
              nvidia:
  placement:
    dcloud:
      pricing:
        vllm:
          denom: uakt
          amount: 1000
deployment:
  vllm:
    dcloud:
      count: 1
"""


def test_an_akash_sdl_is_read_as_the_pods_of_its_services() -> None:
    outcome = _import(AKASH, "deploy.yaml")
    entries = [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.6.3"
    assert outcome.recipe.server.flag("--max-model-len") == "8192"
    assert "--gpus 2" in entries and "-p 8000:8000" in entries
    assert any("`huggingface-cli download org/m` before it dropped" in n for n in outcome.notes)


def test_a_download_of_another_model_before_the_launch_is_said() -> None:
    outcome = _import(AKASH.replace("download org/m", "download org/other"), "deploy.yaml")
    assert any("org/other is not the model it serves" in n for n in outcome.notes)


APP = """properties:
  workloadProfileName: {profile}
  template:
    containers:
      - image: {image}
        name: vllm
        args:
          - --model
          - org/m
          - --port
          - "8000"
"""


def test_an_azure_container_app_is_its_containers_with_the_workload_profile_s_gpus() -> None:
    outcome = _import(APP.format(profile="NC48-A100", image="vllm/vllm-openai:latest"), "app.yaml")
    assert "--gpus 2" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert outcome.recipe.model.repo_id == "org/m"


@pytest.mark.parametrize(
    ("profile", "image", "named"),
    [
        ("NC24-A100", "${CONTAINER_IMAGE}", "${CONTAINER_IMAGE} is not set by the post"),
        ("${PROFILE}", "vllm/vllm-openai:latest", "${PROFILE} (workloadProfileName, which gives the app its GPUs)"),
    ],
)
def test_an_azure_container_app_template_s_variable_is_named(profile: str, image: str, named: str) -> None:
    assert named in _refusal(APP.format(profile=profile, image=image), "app.yaml")


def test_a_quadlet_value_whose_quotes_do_not_close_is_refused_where_the_unit_has_it() -> None:
    message = _refusal(QUADLET.replace("PodmanArgs=--ipc=host", 'PodmanArgs=--ipc "host'), "vllm.container")
    assert "vllm.container" in message and '--ipc "host' in message
