"""Classes of import failure found by reading held-out posts 425-432 first (round 34): a Baseten Truss config read
as prose (428); a Modal app and a Terraform configuration not named (429, 430); an engine hgxkit does not deploy,
first in a guide of several setups, refused with no way out (426)."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal

TRUSS = """model_name: m
base_image:
  image: lmsysorg/sglang:v0.5.6
docker_server:
  start_command: sh -c "python3 -m sglang.launch_server --model-path org/m --tp-size 8 --port 8000"
  readiness_endpoint: /health
  server_port: 8000
resources:
  accelerator: H100:8
environment_variables:
  SGLANG_X: "1"
secrets:
  hf_access_token: null
"""


def test_a_truss_config_is_its_start_command_in_its_base_image() -> None:
    outcome = _import(TRUSS, "config.yaml")
    recipe = outcome.recipe
    assert recipe.image.reference == "lmsysorg/sglang:v0.5.6"
    assert recipe.server.flag("--tp-size") == "8" and recipe.server.flag("--port") == "8000"
    words = recipe.docker.words()
    assert {"--gpus", "all", "--ipc=host", "8000:8000", "SGLANG_X=1"} <= set(words)
    assert any("a Truss config: model_name, readiness_endpoint set aside" in n for n in outcome.notes)


def test_a_truss_config_that_installs_into_its_image_is_refused() -> None:
    post = TRUSS.replace("model_name: m\n", "model_name: m\nbuild_commands:\n  - pip install flash-attn\n")
    assert "build_commands: installs into the Truss image" in _refusal(post, "config.yaml")


def test_a_truss_config_without_a_base_image_asks_for_one() -> None:
    post = TRUSS.replace("base_image:\n  image: lmsysorg/sglang:v0.5.6\n", "")
    assert "no base_image.image: Truss runs the command in its own image" in _refusal(post, "config.yaml")
    assert _import(post, "config.yaml", image="lmsysorg/sglang:v0.5.6").recipe.server.flag("--tp-size") == "8"


def test_a_modal_app_and_a_terraform_configuration_are_named() -> None:
    modal = "import modal\n\napp = modal.App('vllm')\ncmd = ['vllm', 'serve', 'org/m']\n"
    assert "app.py:1: a Modal app builds its container" in _refusal(modal, "app.py")
    hcl = 'locals {\n  name = "x"\n}\n\nresource "aws_ecs_task_definition" "vllm" {\n  family = "x"\n}\n'
    assert "main.tf:5: a Terraform configuration (HCL)" in _refusal(hcl, "main.tf")


def test_an_engine_hgxkit_does_not_serve_beside_others_offers_the_pick() -> None:
    post = "lmdeploy serve api_server org/m --tp 8\n\nvllm serve org/m --tensor-parallel-size 8\n"
    post += "\npython3 -m sglang.launch_server --model-path org/m --tp 8\n"
    message = _refusal(post)
    assert "import one with --pick N (2: line 3 vLLM, 3: line 5 SGLang)" in message
    assert message.endswith("; set aside, as hgxkit does not deploy it: LMDeploy (line 1)")
    assert _import(post, pick=2).recipe.server.flag("--tensor-parallel-size") == "8"


def test_the_one_launch_hgxkit_serves_beside_an_engine_it_does_not_is_taken() -> None:
    post = "lmdeploy serve api_server org/m --tp 8\n\nvllm serve org/m --tensor-parallel-size 8\n"
    assert _import(post).recipe.server.flag("--tensor-parallel-size") == "8"


SEED = "python3 -m vllm.entrypoints.openai.api_server --model ./m --chat-template ./m/chat_template.jinja --port 8000\n"


def test_a_file_of_a_relative_model_folder_waits_for_the_model_and_follows_it() -> None:
    assert "the model './m' is a local path" in _refusal(SEED)
    outcome = _import(SEED, model_repo="org/m")
    assert outcome.recipe.server.flag("--chat-template") == "/models/m/chat_template.jinja"
    assert any("--chat-template ./m/chat_template.jinja is in the model's folder" in n for n in outcome.notes)


def test_a_local_enroot_image_is_named_before_the_script_pyxis_runs() -> None:
    post = "#!/bin/bash\n#SBATCH --nodes=1\nsrun --container-image=/scratch/omni.sqsh bash -lc 'vllm serve /ckpt'\n"
    assert "/scratch/omni.sqsh is a local enroot image" in _refusal(post, "job.sbatch")
