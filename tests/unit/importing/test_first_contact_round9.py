"""Classes of import failure found by reading posts 225-234 first (round 9): bash's `$'…'` quoting read as a
literal `$` glued to the quoted value (a speculative config's JSON broken at exit 0), a bare launch's pulled image
ignored when hgxkit cannot tell which server it runs (the engine's default image taken at exit 0), `uv run`
before a launch not taken for a launch (and, found beside it, an `export` whose continuation backslash was lost
before more `NAME=value` lines, which left them unexported at exit 0), a post that ends inside a continued
command imported as if the command ended there, a Kubernetes env value from the pod's metadata that the command
never reads refused before anything the server needs, and a refusal naming a difference the import's own
translation made before the posted ones."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

from hgxkit.recipe.shellwords import split_words


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("""$'{"method": "mtp", "n": 3}'""", '{"method": "mtp", "n": 3}'),
        (r"$'a\tb'", "a\tb"),
        (r"$'it\'s'", "it's"),
        (r"$'\x41\101'", "AA"),
        (r"$'\z'", r"\z"),  # an escape bash does not know keeps its backslash
        ('$"hello"', "hello"),
    ],
)
def test_bash_quoting_with_a_dollar_is_read_as_bash_reads_it(written: str, value: str) -> None:
    assert [w.text for w in split_words(f"--x {written}")] == ["--x", value]


def test_an_ansi_c_quoted_value_reaches_the_recipe_without_its_dollar() -> None:
    post = """vllm serve org/m --speculative-config $'{"method": "mtp", "num_speculative_tokens": 3}'\n"""
    recipe = _import(post).recipe
    assert recipe.server.flag("--speculative-config") == '{"method": "mtp", "num_speculative_tokens": 3}'


PULLS = """docker pull someorg/model-vllm:v1-build
vllm serve org/m --port 8000
docker pull someorg/model-sglang:v1-build
"""


def test_a_bare_launch_runs_in_the_unknown_image_pulled_above_it() -> None:
    outcome = _import(PULLS)
    assert outcome.recipe.image.reference == "someorg/model-vllm:v1-build"
    assert any("the one the post pulls above it (post.sh:1)" in note for note in outcome.notes)


def test_a_pull_below_the_launch_is_never_its_image() -> None:
    post = "vllm serve org/m --port 8000\ndocker pull someorg/model-vllm:v1-build\n"
    assert _import(post).recipe.image.reference == "vllm/vllm-openai:latest"


def test_an_unknown_image_named_for_something_else_is_not_the_launchs() -> None:
    post = "docker pull ghcr.io/open-webui/open-webui:main\nvllm serve org/m --port 8000\n"
    assert _import(post).recipe.image.reference == "vllm/vllm-openai:latest"


def test_a_known_pull_still_wins_over_an_unknown_one() -> None:
    post = "docker pull vllm/vllm-openai:v0.9.0\ndocker pull someorg/other:v1\nvllm serve org/m\n"
    assert _import(post).recipe.image.reference == "vllm/vllm-openai:v0.9.0"


@pytest.mark.parametrize("uv", ["uv run", "uv run --no-sync", "uv run --frozen --"])
def test_uv_run_before_a_launch_is_dropped_with_a_note(uv: str) -> None:
    outcome = _import(f"{uv} vllm serve org/m --port 8001\n")
    assert outcome.recipe.server.flag("--port") == "8001"
    assert any(f"`{uv}` dropped (uv runs the command in an environment of its own" in n for n in outcome.notes)


def test_an_export_ended_by_a_comment_line_leaves_the_launch_after_it() -> None:
    post = 'export MODEL="org/m" \\\nA=1 \\\n#B=2 \\\nuv run vllm serve $MODEL --port 8000\n'
    outcome = _import(post)
    entries = [" ".join(e.words) for e in outcome.recipe.docker.entries]
    assert "-e A=1" in entries
    assert not any("B=2" in e for e in entries)


def test_an_export_whose_continuation_was_lost_before_more_names_is_refused() -> None:
    message = _refusal("export MODEL=org/m\nA=1 \\\n#B=2 \\\nvllm serve $MODEL\n")
    assert message.startswith("post.sh: line 2, column 1: 'A=1' follows the command at line 1")


def test_a_post_that_ends_inside_a_continued_command_is_refused() -> None:
    message = _refusal("docker run --gpus all vllm/vllm-openai:latest \\\n  org/m \\\n  --port 8000 \\\n\n")
    assert message.startswith("post.sh: line 3, column 15: the command's last line ends with a backslash and the post")


def test_a_backslash_before_a_closing_fence_keeps_its_reading() -> None:
    post = "```bash\nvllm serve org/m \\\n  --port 8001 \\\n```\n"
    assert _import(post, "post.md").recipe.server.flag("--port") == "8001"


MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: m
spec:
  template:
    spec:
      containers:
      - name: m
        image: vllm/vllm-openai:v0.9.0
        command: ["vllm", "serve", "org/m"]
        args: [{args}]
        env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        resources:
          limits:
            nvidia.com/gpu: 1
"""


def test_pod_metadata_the_command_never_reads_is_left_out_with_a_note() -> None:
    outcome = _import(MANIFEST.format(args='"--port", "8000"'), "deploy.yaml")
    assert any("env POD_NAME (the pod's metadata.name) left out" in note for note in outcome.notes)


def test_the_pods_address_under_a_name_no_program_reads_is_left_out_with_a_note() -> None:
    text = (
        MANIFEST.format(args='"--port", "8000"').replace("POD_NAME", "POD_IP").replace("metadata.name", "status.podIP")
    )
    outcome = _import(text, "deploy.yaml")
    assert any("env POD_IP (the pod's status.podIP) left out" in note for note in outcome.notes)
    engines = text.replace("POD_IP", "NCCL_SOCKET_ADDR")  # a library's own variable: it may reach peers with it
    assert "env NCCL_SOCKET_ADDR comes from fieldRef" in _refusal(engines, "deploy.yaml")


def test_pod_metadata_the_command_reads_is_still_refused() -> None:
    message = _refusal(MANIFEST.format(args='"--served-model-name", "$(POD_NAME)"'), "deploy.yaml")
    assert "env POD_NAME comes from fieldRef, which a docker host does not give" in message


def test_a_refusal_names_the_posted_differences_before_the_translations() -> None:
    post = (
        "vllm serve org/m --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-address 10.0.0.1 "
        "--data-parallel-rpc-port 13345\n"
        "vllm serve org/m --headless --data-parallel-size-local 2 --data-parallel-start-rank 2 "
        "--data-parallel-address 10.0.0.1 --data-parallel-rpc-port 13345\n"
    )
    message = _refusal(post)
    assert "they differ in server --data-parallel-size: 4 (line 1) vs (absent) (line 2)" in message
