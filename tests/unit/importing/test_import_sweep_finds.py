"""Import bugs found while making imported posts deployable: a `docker run --entrypoint` in front of
a server launch becomes what Docker runs (the launch as the container's program, a module launch with its
interpreter kept as the entrypoint) or is refused naming `--entrypoint`; a variable a post sets in one fence reaches every later fence, in document order, as a reader
pasting the fences into one shell would; a continuation line `> out.log 2>&1 &` is the command's redirection,
not a quoted reply or a PS2 prompt (it became a server argument)."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.render import render_recipe

VLLM = "vllm/vllm-openai:v0.9.0"


def _argv(post: str, **options: object) -> list[str]:
    (group,) = render_recipe(import_post([("p.md", post)], ImportOptions(**options)).recipe)  # type: ignore[arg-type]
    return group.shell_argv


def _refusal(post: str) -> str:
    with pytest.raises(InputError) as caught:
        import_post([("p.md", post)])
    return caught.value.message


# --- `--entrypoint` ---


def test_a_shell_entrypoint_running_vllm_serve_becomes_the_images_own_entrypoint() -> None:
    post = f'docker run --gpus all -p 8000:8000 --entrypoint /bin/sh {VLLM} -c "vllm serve Qwen/Qwen3-8B --port 8000"\n'
    outcome = import_post([("p.md", post)])
    (group,) = render_recipe(outcome.recipe)
    assert group.shell_argv == [
        "docker",
        "run",
        "--gpus",
        "all",
        "-p",
        "8000:8000",
        "-v",
        "/data/models/Qwen3-8B:/models/Qwen3-8B:ro",
        VLLM,
        "/models/Qwen3-8B",
        "--port",
        "8000",
        "--served-model-name",
        "Qwen/Qwen3-8B",
    ]
    assert (
        "p.md:1: `--entrypoint /bin/sh` dropped: the container runs the launch `vllm serve Qwen/Qwen3-8B --port "
        "8000` as its program, as Docker would" in outcome.notes
    )


def test_an_entrypoint_naming_the_launch_program_is_the_same_container() -> None:
    post = f"docker run --gpus all -p 8000:8000 --entrypoint vllm {VLLM} serve Qwen/Qwen3-8B --port 8000\n"
    assert "--entrypoint" not in _argv(post)
    assert _argv(post)[-5:] == ["/models/Qwen3-8B", "--port", "8000", "--served-model-name", "Qwen/Qwen3-8B"]


def test_a_bash_entrypoint_in_an_image_without_one_runs_the_launch_as_the_command() -> None:
    post = (
        "docker run --gpus all -p 30000:30000 --entrypoint /bin/bash lmsysorg/sglang:v0.5.2 "
        '-c "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 0.0.0.0"\n'
    )
    argv = _argv(post)
    assert "--entrypoint" not in argv
    assert argv[argv.index("lmsysorg/sglang:v0.5.2") + 1 :][:5] == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/Qwen3-8B",
    ]


def test_a_script_behind_a_shell_entrypoint_is_refused_naming_it() -> None:
    post = f'docker run --gpus all -p 8000:8000 --entrypoint /bin/sh {VLLM} -c "pip install x && vllm serve org/m"\n'
    assert _refusal(post) == (
        "p.md:1: `--entrypoint /bin/sh` runs a script around the server ('/bin/sh -c pip install x && vllm serve "
        "org/m'), not one server launch: give the launch as the container's command, without --entrypoint"
    )


def test_a_module_launch_the_images_entrypoint_is_not_keeps_its_interpreter_as_the_entrypoint() -> None:
    # `python3 -m vllm.entrypoints.openai.api_server` is older images' own entrypoint and another launcher than
    # today's `vllm serve`: the recipe runs the module as posted, the shell around its one command dropped.
    post = (
        f"docker run --gpus all -p 8000:8000 --entrypoint /bin/sh {VLLM} "
        '-c "python3 -m vllm.entrypoints.openai.api_server --model org/m"\n'
    )
    argv = _argv(post)
    assert argv[argv.index("--entrypoint") : argv.index("--entrypoint") + 2] == ["--entrypoint", "python3"]
    assert argv[argv.index(VLLM) + 1 :][:4] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "/models/m"]
    # the module's arguments are judged by vLLM's option table, as `vllm serve`'s are
    posted = "docker run --gpus all --entrypoint python3 -p 8000:8000 vllm/vllm-openai:v0.33.0 -m " + (
        "vllm.entrypoints.openai.api_server --model org/m --bogus-flag\n"
    )
    assert "`--bogus-flag` is not an option of vLLM" in _refusal(posted)


# --- variables carry over from fence to fence ---

FENCES = """Set the model once:
```bash
export MODEL=Qwen/Qwen3-8B
vllm serve $MODEL --port 8000
```
Then benchmark it:
```bash
vllm bench serve --model $MODEL --dataset-name random --random-input-len 100 --random-output-len 10 --num-prompts 10
```
"""


def test_a_variable_set_in_one_fence_reaches_a_benchmark_in_a_later_one() -> None:
    outcome = import_post([("p.md", FENCES)], ImportOptions(image=VLLM))
    assert outcome.recipe.matrix is not None
    (cell,) = outcome.recipe.matrix.cells()
    assert (cell.input_len, cell.output_len, cell.num_prompts) == (100, 10, 10)


def test_a_variable_set_in_a_fence_with_a_server_reaches_a_server_in_a_later_fence() -> None:
    post = f"```bash\nexport MODEL=Qwen/Qwen3-8B\nvllm serve $MODEL\n```\n```bash\ndocker run --gpus all {VLLM} --model $MODEL\n```\n"
    recipe = import_post([("p.md", post)], ImportOptions(pick=2)).recipe
    assert recipe.model.repo_id == "Qwen/Qwen3-8B"
    assert recipe.server.flag("--model") == "/models/Qwen3-8B"


def test_a_later_definition_replaces_an_earlier_one_for_the_commands_after_it() -> None:
    post = (
        f"```bash\nMODEL=org/a\ndocker run --gpus all {VLLM} --model $MODEL\n```\n"
        f"```bash\nMODEL=org/b\ndocker run --gpus all {VLLM} --model $MODEL\n```\n"
    )
    assert import_post([("p.md", post)], ImportOptions(pick=1)).recipe.model.repo_id == "org/a"
    assert import_post([("p.md", post)], ImportOptions(pick=2)).recipe.model.repo_id == "org/b"


def test_an_empty_entrypoint_runs_the_command_as_the_program() -> None:
    post = (
        'docker run --gpus all -p 30000:30000 --entrypoint "" lmsysorg/sglang:latest '
        "python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --host 0.0.0.0 --port 30000\n"
    )
    outcome = import_post([("p.md", post)])
    argv = render_recipe(outcome.recipe)[0].shell_argv
    assert "--entrypoint" not in argv
    assert argv[argv.index("lmsysorg/sglang:latest") + 1 :][:3] == ["python3", "-m", "sglang.launch_server"]
    assert (
        'p.md:1: `--entrypoint ""` dropped: the container runs the launch `python3 -m sglang.launch_server '
        "--model-path Qwen/Qwen2.5-7B` as its program, as Docker would" in outcome.notes
    )


# --- `cmd \` then `    > out.log 2>&1 &` ---

REDIRECTED = """export NCCL_SOCKET_IFNAME=lo

CUDA_VISIBLE_DEVICES=0 \\
vllm serve /srv/models/Qwen3-1.7B \\
    --port 8888 \\
    > ./logs/model_output.log 2>&1 &
"""


def test_a_redirection_on_a_continuation_line_is_dropped_not_an_argument() -> None:
    outcome = import_post([("p.sh", REDIRECTED)], ImportOptions(image=VLLM))
    assert outcome.recipe.server.words() == ["--model", "/srv/models/Qwen3-1.7B", "--port", "8888"]
    assert (
        "p.sh:6: redirection `>./logs/model_output.log` dropped (the server's output goes to docker logs)"
        in outcome.notes
    )


def test_ps2_and_quoted_continuation_lines_still_lose_their_marker() -> None:
    ps2 = f"$ docker run --gpus all \\\n> -p 8000:8000 {VLLM} \\\n> --model /m\n"
    quoted = f"> docker run --gpus all \\\n> -p 8000:8000 {VLLM} --model org/m\n"
    assert "-p 8000:8000" in " ".join(_argv(ps2, model_repo="org/m"))
    assert "-p 8000:8000" in " ".join(_argv(quoted))


def test_a_launch_variable_set_without_export_right_above_a_launch_is_refused() -> None:
    lost = REDIRECTED.replace("CUDA_VISIBLE_DEVICES=0 \\\n", "CUDA_VISIBLE_DEVICES=0\n")
    with pytest.raises(InputError) as caught:
        import_post([("p.sh", lost)], ImportOptions(image=VLLM))
    assert caught.value.message == (
        "p.sh: line 3, column 1: CUDA_VISIBLE_DEVICES=0 is set without export right above the launch at line 4, so "
        "the server would not see it; a continuation backslash may be missing (end the line with `\\`, or write "
        "`export CUDA_VISIBLE_DEVICES=…`)"
    )
    exported = lost.replace("CUDA_VISIBLE_DEVICES=0\n", "export CUDA_VISIBLE_DEVICES=0\n")
    assert "--gpus" in _argv(exported, image=VLLM)


def test_a_command_commented_out_line_by_line_is_a_comment_not_a_root_prompt() -> None:
    post = (
        "# python -m sglang.launch_server \\\n#     --model-path org/old \\\n#     --port 30003\n\n"
        "python -m sglang.launch_server --model org/new --port 30004\n"
    )
    outcome = import_post([("p.sh", post)], ImportOptions(image="lmsysorg/sglang:v0.5.2"))
    assert outcome.recipe.model.repo_id == "org/new"
    assert not [n for n in outcome.notes if "prompt '#' removed" in n]
    root = "# python -m sglang.launch_server --model org/m --port 30004\n"  # a root shell's prompt
    assert import_post([("p.txt", root)], ImportOptions(image="lmsysorg/sglang:v0.5.2")).recipe.model.repo_id == "org/m"
