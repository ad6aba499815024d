"""Classes of import failure found by reading held-out posts 369-376 first (round 27): a SkyPilot task's container
without the shared memory SkyPilot gives it (369, imported at exit 0 with Docker's 64 MB /dev/shm for TP 8); an
Ansible `docker_container` task whose folded `command:` alone was imported, its env, volumes and GPUs lost (372)."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal

TASK = """- hosts: gpu
  tasks:
    - name: Start the server
      community.docker.docker_container:
        name: llm
        image: vllm/vllm-openai:v0.33.0
        env:
          VLLM_LOGGING_LEVEL: DEBUG
        command: >
          vllm serve org/m
          --port 8000
"""


def test_an_ansible_docker_container_task_is_named() -> None:
    message = _refusal(TASK)
    assert message.startswith("post.sh:4: an Ansible docker_container task")
    assert "import the `docker run` or the compose service it stands for" in message


def test_a_command_after_the_task_at_the_margin_is_its_own() -> None:
    post = TASK.replace("          vllm serve org/m\n          --port 8000\n", "          sleep 1\n")
    post += "\nvllm serve org/m --port 8000\n"
    assert _import(post).recipe.server.flag("--port") == "8000"


def test_a_skypilot_task_gets_the_shared_memory_skypilot_gives_it() -> None:
    task = (
        "resources:\n  accelerators: H200:8\n  image_id: docker:vllm/vllm-openai:v0.33.0\n  ports: 8000\n"
        "run: |\n  vllm serve org/m --tensor-parallel-size 8 --port 8000\n"
    )
    outcome = _import(task, name="task.yaml")
    assert ("--ipc=host",) in [e.words for e in outcome.recipe.docker.entries]
    assert any("SkyPilot gives its container a /dev/shm" in note for note in outcome.notes)
