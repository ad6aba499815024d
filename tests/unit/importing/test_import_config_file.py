"""A server's `--config FILE`: read from the YAML the post shows, refused naming the file where it shows none."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

from hgxkit.importing.config_files import config_flags

SHOWN = """```yaml
# serve.yaml
model: org/m
port: 9000
tensor-parallel-size: 2
max-model-len: 8192
```

```bash
vllm serve --config serve.yaml {rest}
```
"""


def _server(outcome: object) -> str:
    return " ".join(outcome.recipe.server.words())  # type: ignore[attr-defined]


def test_the_file_the_post_shows_becomes_the_command_s_flags() -> None:
    outcome = _import(SHOWN.format(rest=""), "post.md")
    server = _server(outcome)
    assert "--config" not in server
    assert "--port 9000" in server and "--tensor-parallel-size 2" in server and "--max-model-len 8192" in server
    assert outcome.recipe.model.repo_id == "org/m"
    assert any("`--config serve.yaml` read from the file the post shows (post.md:2)" in n for n in outcome.notes)


def test_the_command_line_wins_over_the_file() -> None:
    server = _server(_import(SHOWN.format(rest="--max-model-len 4096"), "post.md"))
    assert "--max-model-len 4096" in server and "8192" not in server


def test_a_positional_model_wins_over_the_file_s_model() -> None:
    outcome = _import(SHOWN.format(rest="").replace("vllm serve --config", "vllm serve org/other --config"), "p.md")
    assert outcome.recipe.model.repo_id == "org/other"


@pytest.mark.parametrize(
    "shown",
    [
        "`serve.yaml`\n```\nmodel: org/m\nport: 9000\n```\n",
        "Save it as serve.yaml:\n```yaml\nmodel: org/m\nport: 9000\n```\n",
        "```bash\ncat > serve.yaml <<EOF\nmodel: org/m\nport: 9000\nEOF\n```\n",
    ],
)
def test_a_file_is_named_by_the_line_above_its_fence_or_by_the_here_document(shown: str) -> None:
    outcome = _import(shown + "```bash\nvllm serve --config serve.yaml\n```\n", "post.md")
    assert "--port 9000" in _server(outcome) and outcome.recipe.model.repo_id == "org/m"


def test_a_file_the_post_does_not_show_is_refused_by_name() -> None:
    message = _refusal("python3 -m sglang.launch_server --config my_config.yaml\n")
    assert "`--config my_config.yaml` names a file the post does not show" in message
    assert "paste the file's YAML" in message


def test_a_file_a_mount_brings_into_the_container_is_left_to_it() -> None:
    post = "docker run --gpus all -v /srv/c:/cfg vllm/vllm-openai:v0.33.0 --model org/m --config /cfg/serve.yaml\n"
    assert "--config /cfg/serve.yaml" in _server(_import(post))


def test_a_bare_launch_s_host_file_by_an_absolute_path_is_left_to_its_mount() -> None:
    outcome = _import("vllm serve org/m --config /srv/v/serve.yaml\n")
    assert "/srv/v/serve.yaml" in " ".join(outcome.recipe.docker.words() + outcome.recipe.server.words())


def test_a_bare_launch_s_relative_file_is_refused() -> None:
    assert "`--config ./serve.yaml` names a file" in _refusal("vllm serve org/m --config ./serve.yaml\n")


def test_a_file_named_only_by_a_mount_elsewhere_is_still_refused() -> None:
    post = "docker run --gpus all -v /srv/c:/cfg vllm/vllm-openai:v0.33.0 --model org/m --config /etc/serve.yaml\n"
    assert "`--config /etc/serve.yaml` names a file the post does not show" in _refusal(post)


def test_values_are_read_as_the_engine_reads_them() -> None:
    data = {
        "enforce-eager": True,
        "enable-prefix-caching": False,
        "disable-log-stats": False,
        "api-key": None,
        "lora-modules": ["a=/l/a", "b=/l/b"],
        "compilation-config": {"level": 3},
    }
    assert config_flags(data, "vllm") == [
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "--lora-modules",
        "a=/l/a",
        "b=/l/b",
        "--compilation-config",
        '{"level":3}',
    ]


def test_a_launch_a_sentence_gives_as_an_example_is_set_aside_beside_a_whole_setup() -> None:
    post = SHOWN.format(rest="") + "\nThe command line wins, e.g. `vllm serve SOME_MODEL --config serve.yaml`.\n"
    outcome = _import(post, "post.md")
    assert outcome.recipe.model.repo_id == "org/m"
    assert any("an example a sentence gives" in r.what for r in outcome.report)


def test_a_sentence_s_launch_with_a_placeholder_alone_is_still_refused() -> None:
    assert "SOME_MODEL is a placeholder" in _refusal("Run `vllm serve SOME_MODEL --port 8000` to start.\n", "p.md")
