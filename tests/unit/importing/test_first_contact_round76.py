"""Classes of import failure found by reading held-out posts 551-757 again: a whole script file whose last byte is a
continuation backslash refused as a copy cut inside the command (551, 680, 683), vLLM's refusal of float16 for
Gemma 2 and 3 not told (683), and `/dev/dri` named where the same line's `/dev/kfd` is the AMD sign (756)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

from hgxkit.recipe.engine_start import engine_refusal


def test_a_file_whose_last_byte_is_a_backslash_is_whole() -> None:
    outcome = _import("vllm serve org/m \\\n    --max-model-len 8192 \\")
    assert outcome.recipe.server.flag("--max-model-len") == "8192"
    assert any("ends on a backslash with no newline after it" in note for note in outcome.notes)


def test_a_backslash_before_the_post_s_last_newline_is_still_a_cut() -> None:
    assert "the copy stops inside the command" in _refusal("vllm serve org/m \\\n    --max-model-len 8192 \\\n")


@pytest.mark.parametrize("model", ["google/gemma-2-9b-it", "google/gemma-3-27b-it", "google/gemma-3-1b-it"])
@pytest.mark.parametrize("dtype", ["half", "float16", "=half"])
def test_vllm_refuses_float16_for_gemma_2_and_3(model: str, dtype: str) -> None:
    flag = f"--dtype{dtype}" if dtype.startswith("=") else f"--dtype {dtype}"
    refusal = _refusal(f"vllm serve {model} {flag}\n")
    assert "vLLM refuses float16" in refusal and "--dtype bfloat16" in refusal


@pytest.mark.parametrize(
    "command",
    [
        "vllm serve google/gemma-3n-E4B-it --dtype half",  # another model type, which takes float16
        "vllm serve google/gemma-2-9b-it --dtype bfloat16",
        "vllm serve meta-llama/Llama-3.1-8B --dtype half",
        "python3 -m sglang.launch_server --model-path google/gemma-2-9b-it --dtype half",  # SGLang has no such check
    ],
)
def test_float16_is_refused_only_where_vllm_refuses_it(command: str) -> None:
    assert engine_refusal(_import(command + "\n").recipe) is None


def test_a_line_with_dri_and_kfd_names_kfd() -> None:
    refusal = _refusal("docker run --device /dev/dri --device /dev/kfd rocm/vllm:latest vllm serve org/m\n")
    assert "/dev/kfd is AMD ROCm" in refusal


RUNTIME = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-runtime
spec:
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:v0.9.0
      args: ["--model=/mnt/models", "--port=8080", "--max-model-len=4096"]
"""
SERVICE = """---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: m
spec:
  predictor:
    model:
      modelFormat: {{name: vLLM}}
      runtime: vllm-runtime
      storageUri: {uri}
      resources:
        limits: {{nvidia.com/gpu: "1"}}
"""


def test_a_kserve_runtime_alone_names_the_inferenceservice_it_needs() -> None:
    refusal = _refusal(RUNTIME, name="runtime.yaml")
    assert "is a KServe runtime" in refusal and "/mnt/models" in refusal and "InferenceService" in refusal


def test_a_hub_storage_uri_is_the_model_the_runtime_serves() -> None:
    outcome = _import(RUNTIME + SERVICE.format(uri="hf://org/m"), name="isvc.yaml")
    assert outcome.recipe.model.repo_id == "org/m"
    assert outcome.recipe.server.flag("--max-model-len") == "4096"


def test_another_storage_uri_is_named_with_model_repo() -> None:
    refusal = _refusal(RUNTIME + SERVICE.format(uri="oci://registry.example/modelcar:1.5"), name="isvc.yaml")
    assert "is fetched from oci:// storage" in refusal and "--model-repo" in refusal


FENCED_DOCKERFILE = """Build this:

```dockerfile
FROM vllm/vllm-openai:v0.9.0
ENV MODEL_NAME org/m
ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server --model $MODEL_NAME --max-model-len 4096
```
"""


def test_a_dockerfile_in_a_fence_that_only_starts_its_image_is_its_launch() -> None:
    outcome = _import(FENCED_DOCKERFILE, name="post.md")
    assert outcome.recipe.model.repo_id == "org/m" and outcome.recipe.image.reference == "vllm/vllm-openai:v0.9.0"


def test_a_fenced_dockerfile_that_builds_is_still_refused_as_a_build() -> None:
    post = FENCED_DOCKERFILE.replace("ENV MODEL_NAME", "RUN pip install x\nENV MODEL_NAME")
    assert "it builds an image of its own (RUN, COPY)" in _refusal(post, name="post.md")


def test_an_unset_variable_in_the_server_s_words_is_refused_at_the_post_s_line() -> None:
    refusal = _refusal("export MODEL=org/m\n\nvllm serve $MODEL $EXTRA_ARGS\n")
    assert refusal.startswith("post.sh:3: $EXTRA_ARGS is not set by the post, so")


def test_one_image_pulled_twice_is_one_image() -> None:
    post = "docker pull vllm/vllm-openai:v0.9.0\ndocker pull vllm/vllm-openai:v0.9.0\nvllm serve org/m\n"
    assert _import(post).recipe.image.reference == "vllm/vllm-openai:v0.9.0"


@pytest.mark.parametrize(
    ("post", "said"),
    [
        (  # a --pick between engines says which runs which
            "vllm serve org/m --port 8000\n\npython3 -m sglang.launch_server --model-path org/m --port 30000\n",
            "--pick N (1: line 1 vLLM, 2: line 3 SGLang)",
        ),
        (  # an engine hgxkit does not deploy is refused with the way out
            "docker run --gpus all -p 11434:11434 ollama/ollama\n",
            "hgxkit serves SGLang and vLLM; import a post that launches one of them",
        ),
        ("python3 -m fastchat.serve.vllm_worker --model-path org/m\n", "FastChat's vLLM worker"),
        ("nohup /opt/conda/bin/python3 -m fastchat.serve.controller &\n", "FastChat's vLLM worker"),
        ("aphrodite run org/m --port 2242\n", "Aphrodite Engine"),
        ("xinference-local --host 0.0.0.0 --port 9997\n", "Xinference"),
        ("docker run --gpus all ghcr.io/theroyallab/tabbyapi:latest\n", "TabbyAPI"),
    ],
)
def test_a_refusal_among_engines_or_wrappers_names_them_and_the_way_out(post: str, said: str) -> None:
    assert said in _refusal(post)


def test_a_bentoml_service_is_named() -> None:
    service = "import bentoml\n\n@bentoml.service(resources={'gpu': 1})\nclass VLLM:\n    pass\n"
    assert "a BentoML service builds the engine in Python" in _refusal(service, name="service.py")


def test_a_setting_left_unexported_right_above_a_bare_launch_is_refused() -> None:
    refusal = _refusal("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve org/m --max-model-len 8192\n")
    assert refusal.startswith("post.sh: line 1, column 1: VLLM_ALLOW_LONG_MAX_MODEL_LEN is set without `export`")
    assert "a continuation backslash may be missing" in refusal


# Settings the launch gets (exported, continued, `set -a`), reads itself, or that a container would not get anyway.
GETS_IT = (
    "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve org/m\n",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 \\\nvllm serve org/m\n",
    "set -a\nVLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve org/m\n",
    "CUDA_DEVICES=0,1\nvllm serve org/m --port 8000 # on $CUDA_DEVICES\n",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\ndocker run --gpus all vllm/vllm-openai:v0.9.0 --model org/m\n",
)


@pytest.mark.parametrize("post", GETS_IT)
def test_a_setting_the_launch_gets_or_reads_is_no_lost_backslash(post: str) -> None:
    assert _import(post).recipe.model.repo_id == "org/m"


def test_a_block_opened_in_one_fence_does_not_hold_another_fence_s_launch() -> None:
    post = "```python\nfor r in (p, d):\n    print(r)\n```\n\n```bash\nvllm serve org/m --port 8000\n```\n"
    assert _import(post, name="post.md").recipe.model.repo_id == "org/m"


def test_a_jinja_template_that_builds_the_launch_from_values_is_named() -> None:
    template = (
        "{% set c1 = tpl.add_container(values.consts.vllm_container_name, values.vllm.image) %}\n"
        '{% set cmd = namespace(x=["--model", values.vllm.model_name]) %}\n'
        "{% do c1.set_command(cmd.x) %}\n"
    )
    refusal = _refusal(template, name="app.txt")
    assert "app.txt:1: `{% set c1 = " in refusal and "is a Jinja template's statement" in refusal


def test_a_number_split_at_its_point_is_a_wrap_not_prose() -> None:
    refusal = _refusal("vllm serve org/m --gpu-memory-utilization 0\n.9 --max-model-len=17370 --port 8001\n")
    assert refusal.startswith("post.sh: line 2, column 1: '.9' follows the command at line 1")


@pytest.mark.parametrize(
    "post",
    [
        # the hunk ends on the launch's backslash
        "```diff\n@@ -1,3 +1,3 @@\n vllm serve org/m \\\n-  --port 8000 \\\n+  --port 8001 \\\n```\n",
        # the launch continues into a removed line and the post ends
        "```diff\n+export X=1\n exec vllm serve \\\n-  org/m \\\n",
        # a page's fence added by the diff, cut open where the hunk ends
        "````diff\n+```bash\n+vllm serve org/m \\\n````\n",
    ],
)
def test_a_launch_continued_past_a_diff_s_hunk_is_a_cut_copy(post: str) -> None:
    assert "ends with a backslash where the diff's hunk ends" in _refusal(post, name="post.md")
