"""Classes of import failure found by reading held-out posts 353-360 first (round 25): a bare launch's host
install variables (PATH, LD_LIBRARY_PATH, VIRTUAL_ENV) passed into the container, where the image's own paths differ
(a systemd unit's `Environment=` lines, post 354, read as a shell's exports); Docker Model Runner's `docker model …`
(360) and a Ray Serve application in Python (356) refused as 'no serving command found' without naming them."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

LAUNCH = "export {name}={value}\nexport VLLM_LOGGING_LEVEL=DEBUG\nvllm serve org/m --port 8000\n"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PATH", "/usr/local/cuda/bin:/root/vllm/env/bin:/usr/bin"),
        ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64"),
        ("VIRTUAL_ENV", "/root/vllm/env"),
        ("PYTHONPATH", "/home/me/sglang/python"),
    ],
)
def test_a_host_install_variable_stays_on_the_host(name: str, value: str) -> None:
    outcome = _import(LAUNCH.format(name=name, value=value))
    words = outcome.recipe.docker.words()
    assert f"{name}={value}" not in " ".join(words) and "VLLM_LOGGING_LEVEL=DEBUG" in " ".join(words)
    assert any(f"{name}={value} from the shell is left out" in note for note in outcome.notes)


@pytest.mark.parametrize(
    "post",
    ["```bash\ndocker model run hf.co/org/m\n```\n", "- `docker model install-runner --backend vllm --gpu cuda`\n"],
)
def test_docker_model_runner_is_named(post: str) -> None:
    message = _refusal(post)
    assert "Docker Model Runner (docker-model-runner) is not supported yet" in message
    assert "no serving command of the engine's own" in message


def test_a_ray_serve_application_is_named_at_its_import() -> None:
    post = "```python\nimport os\nfrom ray import serve\nfrom ray.serve.llm import LLMConfig\nserve.run(app)\n```\n"
    assert _refusal(post).startswith("post.sh:3: a Ray Serve application starts the engine from its Python code")


def test_a_ray_import_without_serve_is_no_ray_serve() -> None:
    assert "no serving command found" in _refusal("```python\nfrom ray import data\n```\n")


UNIT = """My service:
```ini
[Unit]
Description=vLLM
After=network.target

[Service]
Environment="VLLM_LOGGING_LEVEL=DEBUG" "PATH=/opt/env/bin:/usr/bin"
WorkingDirectory=/srv/llm
ExecStartPre=-/usr/bin/docker rm -f llm
ExecStart={exec}
Restart=always

[Install]
WantedBy=multi-user.target
```
"""


def test_a_systemd_unit_is_read_as_the_shell_lines_it_runs() -> None:
    outcome = _import(UNIT.format(exec="/opt/env/bin/vllm serve org/m --port 8000 \\\n  --max-model-len 4096"))
    words = " ".join(outcome.recipe.docker.words())
    assert outcome.recipe.server.flag("--max-model-len") == "4096" and outcome.recipe.model.repo_id == "org/m"
    assert "VLLM_LOGGING_LEVEL=DEBUG" in words and "PATH=" not in words and "Restart" not in words
    assert any("a systemd unit: read as the shell lines it runs" in note for note in outcome.notes)


def test_a_unit_that_runs_docker_is_that_docker_run() -> None:
    run = "-/usr/bin/docker run --rm --gpus all -p 8000:8000 vllm/vllm-openai:v0.33.0 --model org/m"
    outcome = _import(UNIT.format(exec=run))
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.33.0"
    assert "llm" not in outcome.recipe.docker.words()  # ExecStartPre's `docker rm -f llm` set aside


def test_a_unit_that_starts_nothing_is_left_as_it_is() -> None:
    post = "[Unit]\nDescription=x\n\n[Service]\nType=oneshot\n"
    assert "no serving command found" in _refusal(post)
