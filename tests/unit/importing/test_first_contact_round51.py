"""Classes of import failure found by reading held-out posts 558-573 first (rounds 51 and 52): a Jinja template
(an Ansible role's launcher script, unit file or compose file) read as shell or YAML, its `{% if %}` lines taken
for lost backslashes and its placeholders for words (559-562, 565); a notebook cell's `!` shell escape before
`vllm serve`, which hid the launch or read as a wrapped line (570, 571)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal


@pytest.mark.parametrize(
    ("post", "named"),
    [
        (
            "python3 -m vllm.entrypoints.openai.api_server \\\n  --model {{ VLLM_MODEL }} \\\n"
            "{% if tp %}\n  --tensor-parallel-size {{ tp }} \\\n{% endif %}\n  --port 8000\n",
            "{{ VLLM_MODEL }}",
        ),
        (
            "[Service]\nExecStart=/opt/v/bin/vllm serve {{ vllm_model }} --port {{ vllm_port | default(8000) }}\n",
            "{{ vllm_model }}",
        ),
        ("services:\n  vllm:\n    image: {{ vllm_image }}\n    command: --model {{ model }}\n", "{{ vllm_image }}"),
        (
            "- name: serve\n  community.docker.docker_container:\n    image: vllm/vllm-openai\n"
            '    command: "{{ LLM_ARGS }}"\n',
            "{{ LLM_ARGS }}",
        ),
    ],
)
def test_a_jinja_template_is_named_with_its_placeholder(post: str, named: str) -> None:
    refusal = _refusal(post, "post.md")
    assert f"`{named}` is a template's placeholder" in refusal and "render it" in refusal


def test_a_chat_template_or_a_go_template_beside_a_launch_is_no_jinja_template() -> None:
    post = (
        "```bash\nvllm serve org/m --port 8000\n```\n\n```jinja\n"
        "{% for message in messages %}{{ message['content'] }}{% endfor %}\n```\n\n"
        "```bash\ndocker inspect --format '{{json .Config.Cmd}}' x\n```\n"
    )
    assert _import(post).recipe.server.flag("--port") == "8000"


def test_another_accelerator_is_named_before_the_template() -> None:
    post = "docker run -e ASCEND_RT_VISIBLE_DEVICES=0 quay.io/ascend/vllm-ascend:v0.9.1 vllm serve {{ model }}\n"
    assert "Ascend" in _refusal(post, "post.md")


@pytest.mark.parametrize("cell", ["!nohup vllm serve org/m --port 8001 &\n", "! vllm serve org/m --port 8001\n"])
def test_a_notebook_cell_s_shell_escape_is_read_as_a_prompt(cell: str) -> None:
    outcome = _import(f"# the server\n{cell}\n!curl http://localhost:8001/v1/models\n")
    assert outcome.recipe.server.flag("--port") == "8001"
    assert any("a notebook's shell escape '!' removed" in note for note in outcome.notes)


def test_a_notebook_escape_in_a_python_fence_continues_its_launch() -> None:
    post = "```python\n!pip install x\n# start\n!nohup vllm serve \\\n    --model org/m \\\n    --port 5001 &\n```\n"
    assert _import(post).recipe.server.flag("--port") == "5001"


def test_a_github_actions_expression_is_named_as_one() -> None:
    post = "steps:\n  - name: serve\n    run: |\n      vllm serve ${{ inputs.model }} --port 8000\n"
    assert "'${{ inputs.model }}' at line 4, column 18 is a GitHub Actions expression" in _refusal(post, "post.md")


@pytest.mark.parametrize(
    "build", ["VLLM_TARGET_DEVICE=cpu pip install -e .", "uv pip install vllm --torch-backend cpu"]
)
def test_vllm_s_cpu_build_is_named_as_cpu_only(build: str) -> None:
    assert "is CPU only" in _refusal(f"{build}\nvllm serve org/m --port 8000\n", "post.md")


def test_a_launch_list_of_python_values_names_them() -> None:
    post = (
        "import subprocess\n\ndef launch(model='/data/m', port=7000):\n"
        '    cmd = ["vllm", "serve", model, "--port", str(port)]\n    return subprocess.Popen(cmd)\n'
    )
    assert "post.md:4: the launch is a Python list whose `model`, `str(port)` the program computes" in _refusal(
        post, "post.md"
    )


def test_a_python_file_s_launch_list_is_read_without_a_fence() -> None:
    post = 'import subprocess\n\nsubprocess.Popen(["vllm", "serve", "org/m", "--port", "8002"])\n'
    assert _import(post).recipe.server.flag("--port") == "8002"


WORKFLOW = """name: t
on: push
jobs:
  test:
    runs-on: ubuntu-latest
    env:
      MODEL: org/m
    steps:
      - uses: actions/checkout@v4
      - name: Serve
        run: |
          vllm serve org/m \\
            --port 8000 &

          sleep 60
"""


def test_a_workflow_s_run_scripts_are_read_as_shell() -> None:
    outcome = _import(WORKFLOW, "vllm.yml")
    assert outcome.recipe.server.flag("--port") == "8000"
    assert any("a GitHub Actions workflow: its steps' run: scripts read as the shell" in n for n in outcome.notes)


def test_a_launch_under_a_program_hgxkit_does_not_read_is_named_as_such() -> None:
    post = WORKFLOW.replace("vllm serve org/m", "nohup gpurun -- vllm serve org/m")
    message = _refusal(post, "vllm.yml")
    assert "the launch runs under `nohup gpurun --`, a program hgxkit does not read" in message
