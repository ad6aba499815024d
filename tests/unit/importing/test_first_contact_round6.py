"""Classes of import failure found by reading posts 183-192 first (issue 41, round 6): a command substitution in a
command's words (`-v $(pwd):/workspace`), compose's `${NAME:-default}` taken without a word, a lost backslash inside
a launch that `srun` wraps, a setup a post shows beside a launch that cannot be imported, a rank of a server over
nodes that cannot be read, `env -u NAME` before a launch, and (a known weak class) a line wrapped inside a flag
word."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

from hgxkit.importing.outcome import ImportRefused

RUN = "docker run --gpus all -v {mount}:/workspace -p 8000:8000 vllm/vllm-openai:v0.9.0 --model /workspace/m\n"


@pytest.mark.parametrize(
    ("mount", "shown"),
    [("$(pwd)", "`$(pwd)`"), ("`pwd`", "`pwd`"), ("$(git rev-parse --show-toplevel)", "`$(git rev-parse")],
)
def test_a_command_substitution_in_a_docker_run_is_named_as_written_with_the_option_it_is_the_value_of(
    mount: str, shown: str
) -> None:
    message = _refusal(RUN.format(mount=mount))
    assert message.startswith(f"post.sh: line 1, column 26: {shown}")
    assert "(the value of -v) is a command substitution" in message
    assert "write its value into the command" in message
    assert "$$(" not in message and "shell operator" not in message


def test_what_a_known_substitution_stands_for_is_said() -> None:
    assert "the directory the post is run from, which it does not say" in _refusal(RUN.format(mount="$(pwd)"))


def test_a_command_substitution_in_a_bare_launch_is_named_as_written_and_placed() -> None:
    with pytest.raises(ImportRefused) as caught:
        _import("vllm serve org/m --port 8000 --served-model-name $(hostname)\n")
    assert "`$(hostname)` (the value of --served-model-name) is a command substitution" in caught.value.message
    assert caught.value.place == ("post.sh", 1, 50)


COMPOSE = """services:
  llm:
    image: vllm/vllm-openai:v0.9.0
    command: --model ${MODEL:-org/m} --tensor-parallel-size ${TP:-2} --max-num-seqs ${TP:-2}
    ports: ["8000:8000"]
    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: 2, capabilities: [gpu]}]}}}
"""


def test_a_compose_default_the_import_takes_is_a_note_once_per_variable() -> None:
    outcome = _import(COMPOSE, "compose.yaml")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    said = [n for n in outcome.notes if "is not set by the post, so its default" in n]
    assert len(said) == 2
    assert any("${TP} is not set by the post, so its default '2' is taken" in n for n in said)
    assert all("compose takes" in n and "from the shell or the project's .env first" in n for n in said)


SRUN = "srun -p gpu --gres=gpu:2 -n1 \\\nvllm serve org/m \\\n    --port 8001 \\\n    --max-model-len 4096{lost}\n    --tensor-parallel-size 2\n"


def test_a_lost_backslash_inside_a_launch_srun_runs_is_refused_as_anywhere_else() -> None:
    assert _import(SRUN.format(lost=" \\")).recipe.server.flag("--tensor-parallel-size") == "2"
    message = _refusal(SRUN.format(lost=""))
    assert "line 5, column 5: '--tensor-parallel-size' follows the command at line 1" in message
    assert "a continuation backslash may be missing" in message


ALTERNATIVES = """Single node

python3 -m sglang.launch_server --model-path org/m --tp 8

Two nodes

python3 -m sglang.launch_server --model-path org/m --tp 16
"""


def test_a_setup_shown_beside_a_launch_that_cannot_be_imported_is_picked_by_the_user_not_guessed() -> None:
    message = _refusal(ALTERNATIVES, "p.md")
    assert message.startswith("p.md: line 7, column 52: tp x pp x dp = 16 GPUs")
    assert "so serving command 2 (p.md:7) cannot be imported, and the post shows another setup beside it" in message
    assert message.endswith("import that one with --pick N (1: p.md:3)")
    assert _import(ALTERNATIVES, "p.md", pick=1).recipe.server.flag("--tp") == "8"


def test_a_broken_command_that_only_mentions_a_server_is_still_set_aside() -> None:
    post = "```\nvllm serve org/m --port 8000\n```\n\nThen `docker run --gpus all <image> |` fails.\n"
    assert _import(post, "p.md").recipe.server.flag("--port") == "8000"


RANKS = """# node 1
python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 0
# node 2
python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 1 \\
  --host $(hostname -i)
"""


def test_a_rank_the_import_cannot_read_refuses_the_server_over_nodes_never_rank_0_for_both() -> None:
    message = _refusal(RANKS)
    assert "`$(hostname -i)` (the value of --host) is a command substitution" in message
    assert "rank(s) 1 run the same command" not in message


@pytest.mark.parametrize(
    ("prefix", "said"),
    [
        ("env -u CUDA_VISIBLE_DEVICES", "`env -u CUDA_VISIBLE_DEVICES` dropped (the launch runs without"),
        ("env --unset=NCCL_DEBUG -u HF_HUB_OFFLINE", "`env -u NCCL_DEBUG -u HF_HUB_OFFLINE` dropped"),
        ("nohup env -uNCCL_DEBUG", "`env -u NCCL_DEBUG` dropped"),
    ],
)
def test_env_unset_before_a_launch_is_dropped_with_a_note(prefix: str, said: str) -> None:
    outcome = _import(f"{prefix} vllm serve org/m --port 8000\n")
    assert outcome.recipe.server.flag("--port") == "8000"
    assert any(said in note for note in outcome.notes)


def test_env_unset_undoes_the_posts_own_assignment_before_it() -> None:
    outcome = _import("CUDA_VISIBLE_DEVICES=0 env -u CUDA_VISIBLE_DEVICES vllm serve org/m --port 8000\n")
    assert "--gpus all" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert any("the post's CUDA_VISIBLE_DEVICES=0 before it is dropped with it" in n for n in outcome.notes)


@pytest.mark.parametrize(
    ("post", "said"),
    [
        (
            "vllm serve org/m --port 8000 --s\nerved-model-name qwen --max-model-len 4096\n",
            "line 1, column 30: `--s` ends the command and line 2 starts with `erved-model-name`: a wrap split "
            "`--served-model-name`",
        ),
        (  # a prefix the parser would take as the whole option: without the check, the rest would be lost
            "python3 -m sglang.launch_server --model-path org/m --mem-fraction-st\natic 0.8 --port 30001\n",
            "`--mem-fraction-st` ends the command and line 2 starts with `atic`: a wrap split `--mem-fraction-static`",
        ),
        (
            "docker run --gpus all vllm/vllm-openai:v0.9.0 --model org/m --max-model-l\nen 4096 --port 8001\n",
            "a wrap split `--max-model-len`, and a shell runs the rest apart; rejoin lines 1-2",
        ),
    ],
)
def test_a_line_wrapped_inside_a_flag_word_is_refused_naming_the_whole_flag(post: str, said: str) -> None:
    assert said in _refusal(post)


def test_a_whole_flag_at_a_lines_end_is_not_taken_for_a_wrap() -> None:
    post = "vllm serve org/m --port 8000 --trust-remote-code\nserved by a single H100.\n"
    assert _import(post, "p.md").recipe.server.has("--trust-remote-code")


@pytest.mark.parametrize("tasks", ["-n1", "-n 1", "--ntasks=1"])
def test_srun_of_one_task_is_said_to_run_the_launch_once(tasks: str) -> None:
    outcome = _import(f"srun -p gpu --gres=gpu:2 {tasks} vllm serve org/m --tensor-parallel-size 2\n")
    assert any("`srun -n 1` runs the command once, on a node of the job" in note for note in outcome.notes)
    outcome = _import("srun --ntasks-per-node=1 vllm serve org/m --tensor-parallel-size 2\n")
    assert any("`srun` runs the command as one task per node" in note for note in outcome.notes)


@pytest.mark.parametrize("flag", ["--chat-template ./tpl/t.jinja", "--chat-template=./tpl/t.jinja"])
def test_a_file_a_bare_launch_names_relative_to_the_shells_directory_is_refused_without_a_cd(flag: str) -> None:
    message = _refusal(f"vllm serve org/m --port 8000 {flag}\n")
    assert "--chat-template ./tpl/t.jinja names a file relative to the directory the post runs in" in message
    assert "write the file's absolute path" in message


def test_a_cd_before_the_launch_gives_its_relative_files_directory_and_they_are_mounted() -> None:
    outcome = _import("cd /opt/app\nvllm serve org/m --port 8000 --chat-template ../tpl/t.jinja\n")
    assert outcome.recipe.server.flag("--chat-template") == "/opt/tpl/t.jinja"
    assert "-v /opt/tpl/t.jinja:/opt/tpl/t.jinja:ro" in [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert any(
        "--chat-template ../tpl/t.jinja is /opt/tpl/t.jinja (the post's `cd` at post.sh:1)" in n for n in outcome.notes
    )


def test_env_chdir_before_a_launch_makes_its_relative_paths_the_directorys() -> None:
    outcome = _import("env -C /opt/app vllm serve org/m --port 8000 --chat-template=./tpl/t.jinja\n")
    assert outcome.recipe.server.flag("--chat-template") == "/opt/app/tpl/t.jinja"
    assert any(
        "`env -C /opt/app` dropped (the launch ran in /opt/app; its relative paths are" in n for n in outcome.notes
    )


def test_env_chdir_to_a_directory_the_post_does_not_say_leaves_relative_paths_refused() -> None:
    message = _refusal("env --chdir=$WORK vllm serve org/m --port 8000 --chat-template ./t.jinja\n")
    assert "--chat-template ./t.jinja names a file relative to the directory the post runs in" in message
