"""How `recipe import` reads a post: prompts, comments and fences, where a command ends, variables, the
translation of a bare launch, model placement, secrets per engine, joining commands, and one-line errors that
point at the culprit's line and column. The whole corpus is in test_post_corpus.py; these pin single rules."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.commands import simple_commands
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome
from hgxkit.importing.post import find_commands, read_post
from hgxkit.recipe.render import render_recipe

SGLANG = "lmsysorg/sglang:v0.5.23"


def run(text: str, **options: object) -> ImportOutcome:
    return import_post([("post.md", text)], ImportOptions(**options))  # type: ignore[arg-type]


def commands(text: str) -> list[list[str]]:
    return [[w.text for w in s.words] for s in simple_commands(find_commands(read_post("p", text)))]


@pytest.mark.parametrize(
    "line",
    [
        "$ docker run img serve",
        "$docker run img serve",
        "[root@node1 ~]# docker run img serve",
        "(env) arno@rippa:/nfs4/llm/h2ogpt(main)$ docker run img serve",
        "host:~/club-3090$ docker run img serve",
        "PS C:\\Users\\wuwen> docker run img serve",
        "> docker run img serve",
        "`docker run img serve` is what I ran",
        "```docker run img serve```",
    ],
)
def test_prompts_quotes_and_inline_code_are_set_aside(line: str) -> None:
    assert commands(line) == [["docker", "run", "img", "serve"]]


def test_a_comment_is_a_comment_and_a_root_prompt_only_alone() -> None:
    assert commands("# node 1\npython3 -m sglang.launch_server --tp 16") == [
        ["python3", "-m", "sglang.launch_server", "--tp", "16"]
    ]
    assert commands("# docker run img serve") == [["docker", "run", "img", "serve"]]
    assert commands("# docker run img serve\ndocker pull img") == [["docker", "pull", "img"]]


def test_in_a_shell_script_a_hash_line_is_always_a_comment() -> None:
    """A script's shell reads no prompt: `# python -m sglang.launch_server …` there is a launch left out, not a
    root shell's (LMBench's baseline keeps its real launch apart; taking the comment imported the wrong server)."""
    text = "# python -m sglang.launch_server --model-path org/m\n"
    for name, found in (("run.sh", []), ("job.slurm", []), ("notes.txt", [["python", "-m", "sglang.launch_server"]])):
        lexed = simple_commands(find_commands(read_post(name, text)))
        assert [s.texts[:3] for s in lexed] == found
    shebang = simple_commands(find_commands(read_post("run", "#!/bin/bash\n" + text)))
    assert shebang == []


def test_an_unescaped_newline_ends_the_command() -> None:
    text = "docker run -d --name s img serve --tp 8\ndocker logs -f s\ndocker run img2 x"
    assert commands(text) == [
        ["docker", "run", "-d", "--name", "s", "img", "serve", "--tp", "8"],
        ["docker", "logs", "-f", "s"],
        ["docker", "run", "img2", "x"],
    ]


def test_pipes_redirections_background_and_sudo_are_notes() -> None:
    simple = simple_commands(find_commands(read_post("p", "sudo vllm serve org/m 2>&1 | tee log &")))
    assert [w.text for w in simple[0].words] == ["vllm", "serve", "org/m"]
    assert simple[1].piped and simple[1].texts == ["tee", "log"]
    notes = " ".join(simple[0].notes + simple[1].notes)
    assert "`sudo` dropped" in notes and "redirection `>&1` dropped" in notes and "`&` (run in the background)" in notes
    simple = simple_commands(find_commands(read_post("p", "nohup python -m sglang.launch_server --model-path org/m &")))
    assert simple[0].texts[:3] == ["python", "-m", "sglang.launch_server"]
    assert (
        "p:1: `nohup` dropped (the container outlives the shell; its output is the container's log)" in simple[0].notes
    )


def test_a_tilde_mount_is_refused_at_its_word() -> None:
    post = f"docker run -v ~/.cache/hf-x:/cache {SGLANG} sglang serve --model-path org/m"
    with pytest.raises(InputError) as caught:
        run(post)
    assert caught.value.message == (
        "post.md: line 1, column 15: --volume ~/.cache/hf-x:/cache: the host side ~/.cache/hf-x is not a fixed "
        "directory (~ is the home of whoever runs the command, root when hgxkit deploys); write the absolute host "
        "directory"
    )


def test_variables_the_post_sets_are_resolved_and_the_others_refused_at_their_line() -> None:
    command = f"docker run -e HF_HOME -v $DATA/x:/x {SGLANG} sglang serve --model-path $model --port $PORT"
    result = run(f"model=org/Name-7B\nexport HF_HOME=/data/hf\nDATA=/srv PORT=8001\n{command}")
    assert result.recipe.server.flag("--model-path") == "/models/Name-7B"
    assert "$model is the post's model=org/Name-7B (line 1)" in " ".join(result.notes)
    with pytest.raises(InputError) as caught:
        run(f"model=org/Name-7B\n{command}")
    assert caught.value.message.startswith("post.md:2: $DATA is not set by the post, so the server would get whatever")


def test_a_bare_launch_becomes_a_docker_run() -> None:
    result = run(
        "CUDA_VISIBLE_DEVICES=1,2 SGLANG_X=1 python -m sglang.launch_server --model /data/m --tp 2 "
        "--port 8001 --host 127.0.0.1",
        image=SGLANG,
    )
    (group,) = render_recipe(result.recipe)
    assert group.argv == [
        "docker",
        "run",
        "--gpus",
        '"device=1,2"',
        "--ipc=host",
        "-p",
        "8001:8001",
        "-v",
        "/data/m:/data/m:ro",
        "-e",
        "SGLANG_X=1",
        SGLANG,
        "python3",
        "-m",
        "sglang.launch_server",
        "--model",
        "/data/m",
        "--tp",
        "2",
        "--port",
        "8001",
        "--host",
        "0.0.0.0",
    ]
    assert (result.recipe.model.local_dir, result.recipe.model.mount_point) == ("/data/m", "/data/m")
    notes = " ".join(result.notes)
    assert "--host 127.0.0.1 became 0.0.0.0" in notes and "python became the image's python3" in notes


def test_a_bare_launch_without_image_names_the_default() -> None:
    result = run("vllm serve org/Tiny-1B")
    assert result.recipe.image.reference == "vllm/vllm-openai:latest"
    assert any("the image is vllm's vllm/vllm-openai:latest (give --image REF" in n for n in result.notes)


def test_a_hub_model_is_placed_under_the_models_dir() -> None:
    result = run(
        f"docker run -p 30000:30000 -v ~/.cache/huggingface:/root/.cache/huggingface {SGLANG} "
        "sglang serve --model-path org/Name-7B --host 0.0.0.0",
        models_dir="/srv/models",
    )
    recipe = result.recipe
    assert (recipe.model.repo_id, recipe.model.local_dir, recipe.model.mount_point) == (
        "org/Name-7B",
        "/srv/models/Name-7B",
        "/models/Name-7B",
    )
    assert recipe.server.flag("--model-path") == "/models/Name-7B"
    assert recipe.server.flag("--served-model-name") == "org/Name-7B"
    assert recipe.docker.values("--volume") == ["/srv/models/Name-7B:/models/Name-7B:ro"]  # the HF cache is dropped
    assert any("~/.cache/huggingface:/root/.cache/huggingface is dropped" in n for n in result.notes)


def test_a_hub_model_given_with_an_equals_sign_is_placed() -> None:
    recipe = run(f"docker run {SGLANG} python3 -m sglang.launch_server --model-path=org/Name-7B --tp 2").recipe
    assert (recipe.model.repo_id, recipe.model.local_dir) == ("org/Name-7B", "/data/models/Name-7B")
    assert recipe.server.args[0] == ("--model-path=/models/Name-7B",)
    assert recipe.server.flag("--served-model-name") == "org/Name-7B"


def test_a_local_model_under_a_mounted_directory_stays_and_model_repo_names_it() -> None:
    post = f"docker run -v /data:/data {SGLANG} sglang serve --model-path /data/models/x"
    recipe = run(post, model_repo="org/X").recipe
    assert (recipe.model.repo_id, recipe.model.local_dir, recipe.model.mount_point) == (
        "org/X",
        "/data/models/x",
        "/data/models/x",
    )
    assert recipe.server.flag("--model-path") == "/data/models/x"


@pytest.mark.parametrize(
    ("post", "message"),
    [
        (
            f"docker run {SGLANG} sglang serve --tp 2",
            "names no model (--model-path) hgxkit can place; pass --model-repo",
        ),
        (
            f"docker run {SGLANG} sglang serve --model-path /m",
            "not inside a bind mount of a host directory; pass --model-repo",
        ),
        (f"docker run {SGLANG} sglang serve --model-path $M", "a variable the post does not set; pass --model-repo"),
    ],
)
def test_a_model_that_cannot_be_placed_is_one_error_naming_model_repo(post: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("$", r"\$")):
        run(post)


@pytest.mark.parametrize(
    ("post", "reference"),
    [
        ("vllm serve org/m --api-key Plain-Key-123", "--api-key={{env:VLLM_API_KEY}}"),
        (f"docker run {SGLANG} sglang serve --model-path org/m --api-key Plain-Key-123", "{{env:SGLANG_API_KEY}}"),
    ],
)
def test_an_api_key_becomes_the_engines_own_reference(post: str, reference: str) -> None:
    recipe = run(post).recipe
    words = " ".join(recipe.server.words())
    assert "Plain-Key-123" not in words and reference.split("=")[-1] in words


def test_errors_point_at_the_culprit_not_at_the_snippets_first_token() -> None:
    text = "I ran this:\n\n```\ndocker run --rm \\\n    --gpuz all \\\n    img serve\n```"
    with pytest.raises(InputError) as caught:
        run(text)
    assert caught.value.message.startswith("post.md: token 4 '--gpuz' (line 5, column 5): unknown docker run option")
    with pytest.raises(InputError, match=r"^post.md: line 1, column 26: I:\\m is a Windows path"):
        run(f"docker run --gpus all -v I:\\m:/models {SGLANG} sglang serve --model-path /models/x")
    with pytest.raises(
        InputError, match=r"^post.md: line 2, column 12: <model> is a placeholder \(an argument of vllm\); write"
    ):
        run("Try:\nvllm serve <model> --port 8000")


def test_an_environment_prefix_on_the_docker_client_is_dropped() -> None:
    result = run(f"CUDA_VISIBLE_DEVICES=0 docker run --gpus all {SGLANG} sglang serve --model-path org/m")
    assert any("before `docker run` only sets the docker client's environment; dropped" in n for n in result.notes)
    assert result.recipe.docker.env() == []


def test_commands_one_per_gpu_group_are_one_recipe() -> None:
    text = (
        "CUDA_VISIBLE_DEVICES=0,1,2,3 python3 -m sglang.launch_server --model-path org/m --tp 4 --port 30000\n"
        "CUDA_VISIBLE_DEVICES=4,5,6,7 python3 -m sglang.launch_server --model-path org/m --tp 4 --port 30001\n"
    )
    recipe = run(text, image=SGLANG).recipe
    assert (recipe.groups.explicit, recipe.groups.port_base) == (((0, 1, 2, 3), (4, 5, 6, 7)), 30000)
    groups = render_recipe(recipe)
    assert [(g.gpus, g.port) for g in groups] == [([0, 1, 2, 3], 30000), ([4, 5, 6, 7], 30001)]


def test_commands_that_differ_beyond_rank_gpus_port_or_name_are_refused_with_what_differs() -> None:
    text = (
        "python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 --node-rank 0 "
        "--dist-init-addr 10.0.0.1:5000\n"
        "python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 --node-rank 1 "
        "--dist-init-addr 10.0.0.1:5000 --mem-fraction-static 0.8\n"
    )
    with pytest.raises(InputError) as caught:
        run(text)
    message = caught.value.message
    assert "differ in server --mem-fraction-static: (absent) (line 1) vs 0.8 (line 2)" in message
    assert "import one with --pick N (1: line 1, 2: line 2)" in message
    assert run(text, pick=1).recipe.groups.nodes == 2


def test_one_ranks_command_derives_the_others() -> None:
    result = run(
        "python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 --node-rank 0 "
        "--dist-init-addr $HEAD:5000"
    )
    assert result.recipe.groups.nodes == 2
    assert any("rank(s) 1 run the same command with their own --node-rank" in n for n in result.notes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # A script or a log, not a post: thousands of commands are refused before any is read.
        ("# docker run img serve\n" * 20_000, "more than 1000 commands"),
        # A quote that never closes: where it opened.
        ("docker run 'x\n" + "y\n" * 20_000, "unbalanced single quote opened at line 1, column 12"),
        # Prose only.
        ("words and more words\n" * 10_000, "no serving command found"),
    ],
    ids=["many-commands", "open-quote", "prose"],
)
def test_large_hostile_posts_are_refused_fast(text: str, message: str) -> None:
    import time

    start = time.process_time()  # CPU, not wall: a blow-up shows in it, a loaded machine does not
    with pytest.raises(InputError, match=message):
        run(text[: 256 * 1024])
    assert time.process_time() - start < 5.0


def test_inline_code_in_a_scripts_comment_is_no_command() -> None:
    """In a shell script a `#` line is a comment whole: its `inline code` is prose for the reader (an exported
    sbatch says how `docker run -e NAME` passes secrets), never a command beside the script's launch; in a post
    the same line may show a command."""
    script = (
        "#!/bin/bash\n# each secret is passed with `docker run -e NAME`, never on a command line\nvllm serve org/m\n"
    )
    assert commands(script) == [["vllm", "serve", "org/m"]]
    assert [c[:2] for c in commands("Pass each with `docker run -e NAME`.\n")] == [["docker", "run"]]
    outcome = import_post([("job.sbatch", script)], ImportOptions())
    assert outcome.recipe.model is not None and outcome.recipe.model.repo_id == "org/m"
