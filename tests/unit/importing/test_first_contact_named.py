"""Classes of import failure found by reading new posts first (tests/fixtures/posts 124-130, formats e04-e06 and
h03-h04): a container that idles and the launch run in it, an image given by its ID, a command whose lines lost
their backslashes that is for another engine or accelerator, a dstack file's engine or platform behind its setup
steps, a values file of a Helm chart hgxkit has no reader for, and a lost backslash in a double-spaced command;
then from posts 131-139 and formats h05-h06: a command shown for Ascend only by vllm-ascend's config keys, a value
hidden as a run of x, a KubeRay RayService, KubeAI's models catalog."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome


def _import(text: str, name: str = "post.md", **options: object) -> ImportOutcome:
    return import_post([(name, text)], ImportOptions(**options))  # type: ignore[arg-type]


def _refusal(text: str, name: str = "post.md") -> str:
    with pytest.raises(InputError) as caught:
        _import(text, name)
    assert "\n" not in caught.value.message
    return caught.value.message


LAUNCH = "python3 -m sglang.launch_server --model-path org/m --tp 2\n"


@pytest.mark.parametrize(
    "container",
    [
        "docker run -d --gpus all --entrypoint sleep lmsysorg/sglang:v0.5.4 infinity",
        'docker run -d --gpus all --entrypoint "sleep" lmsysorg/sglang:v0.5.4 infinity',
        "docker run -d --gpus all lmsysorg/sglang:v0.5.4 sleep infinity",
        "docker run -d --gpus all lmsysorg/sglang:v0.5.4 tail -f /dev/null",
    ],
)
def test_a_launch_after_a_container_that_idles_runs_in_its_image(container: str) -> None:
    outcome = _import(f"{container}\n{LAUNCH}")
    assert outcome.recipe.image.reference == "lmsysorg/sglang:v0.5.4"  # not the engine's default image
    assert any("runs in the container started at post.md:1" in note for note in outcome.notes)


def test_an_image_given_by_its_id_is_refused_naming_it() -> None:
    post = f"docker run -d --gpus all --entrypoint sleep 65be730e0d41 infinity\n{LAUNCH}"
    assert "the image 65be730e0d41 is a local image ID" in _refusal(post)
    assert "sha256:" + "ab" * 32 in _refusal(f"docker run --gpus all sha256:{'ab' * 32} {LAUNCH}")
    recipe = _import(post, image="lmsysorg/sglang:v0.4.6.post4-cu124").recipe  # the way out the refusal gives
    assert recipe.image.reference == "lmsysorg/sglang:v0.4.6.post4-cu124"


@pytest.mark.parametrize(
    ("lines", "named"),
    [
        (["docker run -it --rm", "--gpus all", "-e NGC_API_KEY", "nvcr.io/nim/meta/llama3-8b-instruct:1.0.0"], "NIM"),
        (["docker run -it --rm", "--device=/dev/kfd --device=/dev/dri", "rocm/vllm:latest vllm serve org/m"], "ROCm"),
    ],
)
def test_a_command_that_lost_its_backslashes_is_named_by_what_it_runs(lines: list[str], named: str) -> None:
    message = _refusal("My command is\n\n" + "\n".join(lines) + "\n\nand it fails.\n")
    assert named in message and "backslash may be missing" not in message


def test_a_command_that_lost_its_backslashes_for_a_served_engine_still_says_so() -> None:
    message = _refusal("docker run -it --rm\n--gpus all\nvllm/vllm-openai:latest --model org/m\n")
    assert "a continuation backslash may be missing" in message


DSTACK = """type: service
image: {image}
commands:
  - pip install hf_transfer
  - huggingface-cli download org/m --local-dir m
  - {launch}
port: 8000
resources:
  gpu: {gpu}
"""


@pytest.mark.parametrize(
    ("image", "launch", "gpu", "named"),
    [
        ("dstackai/tensorrt_llm:1", "trtllm-serve m --tp_size 8", "8:H200", "TensorRT-LLM (trtllm) is not supported"),
        ("nvcr.io/nvidia/pytorch:25.01-py3", "trtllm-serve m --tp_size 8", "8:H200", "TensorRT-LLM"),
        ("vllm/vllm-openai:latest", "vllm serve org/m --port 8000", "v5litepod-4", "is Google TPU"),
    ],
)
def test_a_dstack_file_names_its_engine_or_platform_before_counting_commands(
    image: str, launch: str, gpu: str, named: str
) -> None:
    text = DSTACK.format(image=image, launch=launch, gpu=gpu)
    message = _refusal(text, "serve.dstack.yml")
    assert named in message and "commands" not in message.split(": ", 2)[1]


VALUES = """modelName: org/m
replicaCount: 1
extraArgs: ["--tp", "8"]
resources:
  limits:
    nvidia.com/gpu: "8"
"""


def test_a_values_file_of_an_unknown_chart_is_named_with_helm_template_as_the_way_out() -> None:
    message = _refusal(VALUES, "values.yaml")
    assert message.startswith("values.yaml:1: a Helm values file of a chart hgxkit has no reader for (modelName")
    assert "helm template RELEASE CHART -f values.yaml" in message


def test_a_lost_backslash_in_a_double_spaced_command_is_refused_not_dropped() -> None:
    spaced = (
        "docker run \\\n\n  --gpus all \\\n\n  vllm/vllm-openai:latest \\\n\n  --model org/m\n\n  --enforce-eager\n"
    )
    assert "'--enforce-eager' follows the command" in _refusal(spaced)
    whole = spaced.replace("org/m\n", "org/m \\\n")
    assert _import(whole).recipe.server.has("--enforce-eager")


@pytest.mark.parametrize(
    "option",
    [
        """--additional-config '{"ascend_compilation_config": {"fuse_norm_quant": false}}'""",
        """--additional-config '{"torchair_graph_config": {"enabled": true}}'""",
        "--device npu",
    ],
)
def test_a_command_shown_for_ascend_only_by_its_config_keys_is_refused_by_name(option: str) -> None:
    message = _refusal(f"vllm serve org/m \\\n  --tensor-parallel-size 2 \\\n  {option}\n")
    assert message.startswith("post.md:3: ") and "Huawei Ascend" in message


@pytest.mark.parametrize("value", ["xxxxxxx", "XXXX", "x.x.x.x"])
def test_a_value_the_poster_hid_as_a_run_of_x_is_refused_with_fill_as_the_way_out(value: str) -> None:
    post = f"sglang serve --tp-size 2 --model-path org/m --host {value} --port 40040\n"
    message = _refusal(post)
    assert f"line 1, column 52: {value} is a placeholder (the value of --host)" in message
    assert f"--fill '{value}=VALUE'" in message
    recipe = _import(post, fill=((value, "0.0.0.0"),)).recipe  # the way out the refusal gives
    assert recipe.server.flag("--host") == "0.0.0.0"


RAY_SERVICE = """```
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: llama-3-8b
spec:
  serveConfigV2: |
    applications:
    - name: llm
      import_path:  ray-operator.config.samples.vllm.serve:model
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray-ml:2.33.0.914af0-py311
```
"""


def test_a_ray_service_is_refused_as_a_ray_serve_application_naming_its_import_path() -> None:
    message = _refusal(RAY_SERVICE)
    assert message.startswith("post.md:2: RayService llama-3-8b: a Ray Serve application")
    assert "import_path ray-operator.config.samples.vllm.serve:model" in message


def test_a_kubeai_models_catalog_is_named_as_helm_values_before_a_cpu_entry_in_it() -> None:
    catalog = (
        "catalog:\n  llama-cpu:\n    enabled: false\n    url: hf://org/m\n    engine: VLLM\n"
        '    resourceProfile: cpu:6\n    env:\n      VLLM_CPU_KVCACHE_SPACE: "4"\n'
    )
    message = _refusal(catalog, "values.yaml")
    assert message.startswith("values.yaml:1: a Helm values file of the KubeAI models chart (catalog)")
    assert "helm template RELEASE kubeai/models -f values.yaml" in message
