"""Classes of import failure found by reading new posts first (tests/fixtures/posts 107-122): a value after a
switch, a terminal-wrapped line, a page quoting YAML that does not parse, an image word a damaged copy left."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post


def _import(text: str, name: str = "post.md"):
    return import_post([(name, text)], ImportOptions())


@pytest.mark.parametrize(
    ("command", "value"),
    [
        ("vllm serve org/model --tensor-parallel-size 2 --enforce_eager true", "true"),
        ("python3 -m sglang.launch_server --model-path org/model --enable-metrics yes", "yes"),
    ],
)
def test_a_value_after_a_switch_is_refused_naming_it(command: str, value: str) -> None:
    with pytest.raises(InputError) as caught:
        _import(f"```\n{command}\n```\n")
    assert f"so `{value}` after it is a positional argument" in caught.value.message


def test_a_switch_followed_by_a_flag_imports() -> None:
    recipe = _import("```\nvllm serve org/model --enforce-eager --port 8011\n```\n").recipe
    assert recipe.server.has("--enforce-eager") and recipe.server.flag("--port") == "8011"


WIDE = "vllm serve org/model --tensor-parallel-size 2 --gpu-memory-utilization 0.95 --max-model-len 8192 --sw"


def test_a_terminal_wrapped_line_is_refused_not_dropped() -> None:
    with pytest.raises(InputError) as caught:
        _import(f"```\n{WIDE}\nap-space 8 --max-num-seqs=1\n```\n")
    assert "line 3, column 1: 'ap-space' follows the command at line 2" in caught.value.message
    assert "a line wrap split a word" in caught.value.message


def test_prose_after_a_short_command_is_not_a_wrapped_line() -> None:
    recipe = _import("vllm serve org/model --port 8011\nThen add --tensor-parallel-size 2 for two GPUs.\n").recipe
    assert recipe.server.flag("--port") == "8011"


def test_a_page_quoting_yaml_that_does_not_parse_is_read_as_text() -> None:
    page = (
        "Reference Implementation\nversion: '3'\n\ntasks:\n  run:\n    cmds:\n      - |\n"
        "        docker run --gpus all -p 8000:8000 vllm/vllm-openai:latest --model org/model\n"
    )
    recipe = _import(page, "page.txt").recipe
    assert recipe.image.reference == "vllm/vllm-openai:latest"


def test_a_yaml_file_that_does_not_parse_is_still_refused_as_yaml() -> None:
    with pytest.raises(InputError, match="not valid YAML"):
        _import("services:\n  a:\n\timage: x\n", "compose.yaml")


UNFENCED = (
    "My log:\n```text\nok\n```\nI start it with:\nversion: '3.9'\nservices:\n  vllm:\n"
    "    image: vllm/vllm-openai:latest\n    command: --model org/model\n{deploy}\nand it fails.\n"
)


def test_a_compose_file_pasted_between_prose_with_no_fence_is_read_as_yaml() -> None:
    recipe = _import(UNFENCED.format(deploy="    ports:\n      - '8000:8000'")).recipe
    assert recipe.image.reference == "vllm/vllm-openai:latest" and recipe.model.repo_id == "org/model"
    with pytest.raises(InputError, match=r"post\.md: line 13, column 6: not valid YAML"):
        _import(UNFENCED.format(deploy="    ports:\n      - '8000:8000'\n     deploy:\n      x: 1"))


def test_an_image_word_no_image_name_starts_like_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        _import("docker run ++name vllm --gpus all vllm/vllm-openai:latest --model org/model\n", "page.txt")
    assert "'++name' stands where docker reads the image" in caught.value.message


def test_a_services_heading_over_prose_is_no_compose_file() -> None:
    post = "Our services:\nservices:\n  - a chat UI\n  - an API: {x\n\n```\ndocker run --gpus all vllm/vllm-openai:latest --model org/model\n```\n"
    assert _import(post).recipe.image.reference == "vllm/vllm-openai:latest"


def test_a_launch_inside_a_programs_string_literals_is_named_as_such() -> None:
    post = 'Mine:\n```\nimport subprocess\ncmd = (\n    "nohup vllm serve org/m "\n    "--tp 2"\n  # "x"\n```\n'
    with pytest.raises(InputError, match=r"post\.md:5: .* the launch is in a program's string literals"):
        _import(post)  # no Python (the parenthesis is never closed): the line is named
    with pytest.raises(InputError, match="no serving command found"):
        _import('Mine:\n```\nprint("hello")\n```\n')


@pytest.mark.parametrize(
    "code",
    [
        'cmd = (\n    "nohup vllm serve org/model "\n    "--tensor-parallel-size 2 > log.txt 2>&1 &"\n)',
        'subprocess.run(["vllm", "serve", "org/model", "--tensor-parallel-size", "2"])',
    ],
)
def test_a_launch_a_python_fence_builds_from_strings_is_read_as_that_command(code: str) -> None:
    outcome = _import(f"Mine:\n```python\nimport subprocess\n{code}\n```\n")
    assert outcome.recipe.model.repo_id == "org/model" and outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any("Python string literals" in note for note in outcome.notes)


@pytest.mark.parametrize("nested", ["[" * 100000 + "]" * 100000, "-" * 200000 + "1"])
def test_a_python_fence_nested_past_the_parsers_limits_is_read_as_text(nested: str) -> None:
    with pytest.raises(InputError, match="no serving command found"):
        _import(f"Mine:\n```python\nx = {nested}\n```\n")


@pytest.mark.parametrize(("host", "kept"), [("192.168.66.15", False), ("0.0.0.0", True), ("127.0.0.1", False)])
def test_a_bare_launch_on_an_address_of_the_posts_host_listens_on_every_interface(host: str, kept: bool) -> None:
    outcome = _import(f"python3 -m sglang.launch_server --model-path org/model --host {host} --port 8000\n")
    assert outcome.recipe.server.flag("--host") == "0.0.0.0"
    assert kept or any(f"--host {host} became 0.0.0.0" in note for note in outcome.notes)


UI = (
    "docker run -d -p 3000:8080 --env=OPENAI_API_BASE_URL=http://<your-ip>:8000/v1 ghcr.io/open-webui/open-webui:main\n"
)


def test_a_chat_uis_docker_run_is_a_client_set_aside_before_its_placeholders() -> None:
    with pytest.raises(InputError, match="no serving command found"):
        _import(UI)
    outcome = _import("vllm serve org/model --port 8000\n" + UI)
    assert outcome.recipe.model.repo_id == "org/model"


@pytest.mark.parametrize(
    "line", ["My command is A=1 vllm serve org/model --port 8000", "Command: vllm serve org/model --port 8000"]
)
def test_a_launch_a_prose_line_labels_is_read_from_the_launch(line: str) -> None:
    assert _import(f"Hello.\n{line}\nError message:\n").recipe.model.repo_id == "org/model"


def test_prose_that_only_mentions_a_launch_program_is_no_command() -> None:
    with pytest.raises(InputError, match="no serving command found"):
        _import("Then use vllm serve to start it.\n")
