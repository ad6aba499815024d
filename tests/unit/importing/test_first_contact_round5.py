"""Classes of import failure found by reading posts 153-161 first (issue 41, round 5): a variable set by a command
substitution (the GPU count `nvidia-smi` lists, in a Slurm job or not, in backticks too), `apptainer run` on an
image whose runscript is the server, a Kubernetes manifest written as a template, a command a page shows one option
per line, a broken command that only mentions a server, `env -i` before a launch, and (post 162) a Dockerfile that
only starts its base image, with `${NAME:+words}` for an option the post leaves unset; a `CID=$(docker run -d …)`."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome


def _import(text: str, name: str = "post.sh", **options: object) -> ImportOutcome:
    return import_post([(name, text)], ImportOptions(**options))  # type: ignore[arg-type]


def _refusal(text: str, name: str = "post.sh", **options: object) -> str:
    """The refusal of `text`, which is one line."""
    with pytest.raises(InputError, match=r"\A[^\n]*\Z") as caught:
        _import(text, name, **options)
    return caught.value.message


SERVE = "vllm serve org/m --port 8000 --tensor-parallel-size $TP\n"


@pytest.mark.parametrize(
    ("directives", "said"),
    [
        ("#SBATCH --nodes=1\n#SBATCH --gres=gpu:h100:2\n", "#SBATCH --gres=gpu:h100:2"),
        ("#SBATCH --gpus-per-node=2\n", "#SBATCH --gpus-per-node=2"),
        ("#SBATCH -N 1\n#SBATCH -G A100:2\n", "#SBATCH -G A100:2"),
    ],
)
def test_a_gpu_count_substitution_in_a_slurm_job_is_the_jobs_gpus(directives: str, said: str) -> None:
    outcome = _import("#!/bin/bash\n" + directives + "TP=$(nvidia-smi --list-gpus | wc -l)\n" + SERVE)
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any(f"counts the GPUs the job is given ({said})" in note for note in outcome.notes)


def test_the_gpu_count_nvidia_smi_query_gives_is_read_like_its_list() -> None:
    post = "#SBATCH --gpus-per-node=4\nTP=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)\n" + SERVE
    assert _import(post).recipe.server.flag("--tensor-parallel-size") == "4"


@pytest.mark.parametrize("variable", ["${SLURM_GPUS_ON_NODE}", "$SLURM_GPUS_PER_NODE"])
def test_slurms_gpu_count_variable_as_a_value_is_the_jobs_gpus_or_refused_by_name(variable: str) -> None:
    launch = f"vllm serve org/m --tensor-parallel-size {variable}\n"
    outcome = _import("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\n" + launch)
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "4"
    assert any("is 4 (#SBATCH --gres=gpu:4)" in note for note in outcome.notes)
    message = _refusal("#!/bin/bash\n#SBATCH --nodes=1\n" + launch)
    assert "is the GPU count Slurm gives the job, which no #SBATCH line of the script says" in message


def test_a_gpu_count_substitution_in_a_job_of_several_nodes_without_a_per_node_count_is_refused() -> None:
    post = "#SBATCH --nodes=2\n#SBATCH --gpus=16\nTP=$(nvidia-smi --list-gpus | wc -l)\n" + SERVE
    assert "set by the command substitution `$(nvidia-smi --list-gpus | wc -l)`" in _refusal(post)


@pytest.mark.parametrize(
    ("assignment", "shown"),
    [
        ("TP=$(nvidia-smi --list-gpus | wc -l)", "`$(nvidia-smi --list-gpus | wc -l)`"),
        ("TP=`nvidia-smi -L | wc -l`", "`nvidia-smi -L | wc -l` (in backticks)"),
        ("export TP=\"$(python3 -c 'print(8)')\"", "`$(python3 -c 'print(8)')`"),
    ],
)
def test_a_command_substitution_is_named_as_written_never_taken_as_a_value(assignment: str, shown: str) -> None:
    message = _refusal(assignment + "\n" + SERVE)
    assert f"$TP is set by the command substitution {shown}" in message
    assert "write the value into the command" in message


def test_a_pipe_inside_a_substitution_is_the_substitutions_not_two_commands_of_the_post() -> None:
    outcome = _import("N=$(nvidia-smi --list-gpus | wc -l)\nvllm serve org/m --port 8000\n")
    assert not any("nvidia-smi" in line.what or "wc" in line.what for line in outcome.report if line.action == "took")
    assert outcome.recipe.server.flag("--port") == "8000"


RUN = "apptainer run --nv --bind /scratch/hf:/root/.cache {image} --model org/m --tensor-parallel-size 2\n"


def test_apptainer_run_of_a_registry_image_runs_its_entrypoint_with_the_arguments() -> None:
    outcome = _import(RUN.format(image="docker://vllm/vllm-openai:v0.9.0"))
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.9.0"
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any("`apptainer run … docker://vllm/vllm-openai:v0.9.0` runs the image's server" in n for n in outcome.notes)


def test_apptainer_run_of_an_image_file_names_the_file_and_takes_the_image_given() -> None:
    post = RUN.format(image="/opt/images/vllm-0.8.5p1.sif")
    assert "the image /opt/images/vllm-0.8.5p1.sif is a local apptainer image" in _refusal(post)
    outcome = _import(post, image="vllm/vllm-openai:v0.8.5")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"


def test_singularity_run_with_a_launch_after_the_image_takes_the_launch() -> None:
    post = "singularity run --nv docker://lmsysorg/sglang:v0.5.3 python3 -m sglang.launch_server --model-path org/m\n"
    assert _import(post).recipe.image.reference == "lmsysorg/sglang:v0.5.3"


def test_apptainer_run_of_an_image_no_kind_holds_is_no_server() -> None:
    assert "no serving command found" in _refusal("apptainer run --nv /scratch/llm-api.sif --port 8000\n")


MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: m}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.9.0
        resources:
          limits:
            nvidia.com/gpu: {gpus}
        args: ["--model", "{model}", "--tensor-parallel-size", "2"]
"""


def test_a_kubernetes_template_variable_is_named_not_read_as_a_value() -> None:
    message = _refusal(MANIFEST.format(gpus='"${TP}"', model="org/m"), "m.yaml")
    assert message.startswith("m.yaml:12: ${TP} is not set by the post: the manifest is a template")
    assert "${MODEL} is not set by the post" in _refusal(MANIFEST.format(gpus=2, model="${MODEL}"), "m.yaml")
    assert _import(MANIFEST.format(gpus=2, model="org/m"), "m.yaml").recipe.server.flag("--tensor-parallel-size")


def test_a_command_written_one_option_per_line_is_read_as_one_command_with_a_note() -> None:
    outcome = _import("Run:\n\nvllm serve org/m\n--port 8000\n--tensor-parallel-size 2\n\nThen ask it.\n", "p.md")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any("lines 3-5 are one command written one option per line" in note for note in outcome.notes)


@pytest.mark.parametrize(
    "after",
    ["--port 8000\norg/other\n", "--port 8000\nthen it fails\n", "--port 8000 # the port\n"],
)
def test_lines_after_a_launch_that_are_not_all_options_still_refuse_the_missing_backslash(after: str) -> None:
    assert "a continuation backslash may be missing" in _refusal("vllm serve org/m\n" + after, "p.md")


def test_a_broken_command_that_only_mentions_a_server_is_not_taken_for_one() -> None:
    post = '```console\npip install "dstack[all]\ndstack server\n```\n\n```bash\nvllm serve org/m --port 8000\n```\n'
    assert _import(post, "p.md").recipe.server.flag("--port") == "8000"


def test_env_i_before_a_launch_gives_the_launch_its_variables_in_the_images_environment() -> None:
    outcome = _import("env -i NCCL_DEBUG=INFO vllm serve org/m --port 8001\n")
    assert outcome.recipe.server.flag("--port") == "8001"
    assert "-e NCCL_DEBUG=INFO" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert any("`env -i` dropped" in note for note in outcome.notes)


DOCKERFILE = "FROM vllm/vllm-openai:v0.9.0\nENV HF_HOME=/data/hf\nEXPOSE 8000\n{rest}"


@pytest.mark.parametrize(
    "entrypoint",
    [
        'ENTRYPOINT vllm serve ${MODEL:-org/m} \\\n    ${REVISION:+--revision "$REVISION"} --tensor-parallel-size 2\n',
        'ENTRYPOINT ["vllm", "serve", "org/m"]\nCMD ["--tensor-parallel-size", "2"]\n',
    ],
)
def test_a_dockerfile_that_only_starts_its_base_image_is_the_launch_in_that_image(entrypoint: str) -> None:
    outcome = _import(DOCKERFILE.format(rest=entrypoint), "Dockerfile")
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.9.0"
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert not outcome.recipe.server.has("--revision")
    assert "-e HF_HOME=/data/hf" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert any("ENTRYPOINT read as the launch" in note for note in outcome.notes)


@pytest.mark.parametrize(
    ("rest", "said"),
    [
        (
            "RUN pip install flash-attn\nENTRYPOINT vllm serve org/m\n",
            "Dockerfile:4: the Dockerfile changes its base image (RUN)",
        ),
        ("CMD vllm serve org/m\n", "Dockerfile:4: the Dockerfile gives no ENTRYPOINT"),
    ],
)
def test_a_dockerfile_whose_container_is_not_in_the_post_is_refused_naming_the_line(rest: str, said: str) -> None:
    assert _refusal(DOCKERFILE.format(rest=rest), "Dockerfile").startswith(said)


def test_an_alternate_expansion_whose_name_the_post_sets_is_refused() -> None:
    post = 'REVISION=abc\nvllm serve org/m ${REVISION:+--revision "$REVISION"}\n'
    assert "gives words because the post sets REVISION; write those words instead" in _refusal(post)


def test_a_docker_run_whose_container_id_a_variable_takes_is_the_posts_docker_run() -> None:
    post = "CID=$(docker run -d --gpus all -p 8000:8000 vllm/vllm-openai:v0.9.0 --model org/m)\ndocker logs -f $CID\n"
    outcome = _import(post)
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.9.0"
    assert any("`$(docker run …)` starts the container ($CID is only its ID)" in note for note in outcome.notes)
