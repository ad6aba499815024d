"""Classes of import failure found by reading posts 259-266 first (round 13): a script that writes its Kubernetes
manifest or compose file with a here-document (`cat <<EOF > app.yaml` … `EOF`, then `kubectl apply -f app.yaml`)
refused as 'no serving command found', the YAML never read; a manifest's container that asks for no GPU (a CPU
deployment) refused first for a `${NAME}` of its template, whose value would not change the hardware; and a script
published mid-merge (`<<<<<<< HEAD` … `=======` … `>>>>>>> sha` between two launches) refused for a continuation
backslash, never naming the conflict markers."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.2
        args: ["--model", "org/m", "--port", "8000"]
        resources:
          limits:
            nvidia.com/gpu: 2
"""


def test_a_manifest_written_by_a_heredoc_is_read_as_the_manifest() -> None:
    outcome = _import(f"set -e\ncat <<EOF >vllm.yaml\n{MANIFEST}EOF\n\nkubectl apply -f vllm.yaml\n")
    assert outcome.recipe.server.kind == "vllm"
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.10.2"


def test_a_heredoc_inside_a_shell_fence_is_read_too() -> None:
    post = f"Deploy it:\n\n```bash\nkubectl create namespace llm\nkubectl apply -f - <<'EOF'\n{MANIFEST}EOF\n```\n"
    assert _import(post, "post.md").recipe.image.reference == "vllm/vllm-openai:v0.10.2"


def test_a_compose_file_written_by_a_heredoc_is_read() -> None:
    compose = (
        "services:\n  llm:\n    image: vllm/vllm-openai:v0.10.2\n    command: --model org/m\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu]}]}}}\n"
    )
    outcome = _import(f"cat > docker-compose.yml <<EOF\n{compose}EOF\ndocker compose up -d\n")
    assert outcome.recipe.server.kind == "vllm"


def test_a_cpu_container_is_refused_for_its_hardware_before_its_template() -> None:
    cpu = MANIFEST.replace("vllm/vllm-openai:v0.10.2", "${ACCOUNT}.dkr.ecr.amazonaws.com/vllm:arm64")
    cpu = cpu.replace('args: ["--model", "org/m", "--port", "8000"]', 'command: ["/bin/sh", "-c", "vllm serve org/m"]')
    cpu = cpu.replace(
        "          limits:\n            nvidia.com/gpu: 2\n", "          requests:\n            cpu: 24\n"
    )
    refusal = _refusal(cpu, "vllm.yaml")
    assert "asks for no nvidia.com/gpu (a CPU deployment?)" in refusal
    assert "${ACCOUNT}" not in refusal


def test_a_template_variable_is_still_named_on_a_gpu_container() -> None:
    templated = MANIFEST.replace("vllm/vllm-openai:v0.10.2", "vllm/vllm-openai:${TAG}")
    assert "${TAG} is not set by the post" in _refusal(templated, "vllm.yaml")


CONFLICTED = """#!/bin/bash
<<<<<<< HEAD
vllm serve org/m \\
    --tensor-parallel-size 8 \\
=======
vllm serve org/m \\
    --tensor-parallel-size 4 \\
>>>>>>> 2965eaf (build: update CUDA)
    --port 8002
"""


def test_a_script_published_mid_merge_is_refused_naming_the_markers() -> None:
    refusal = _refusal(CONFLICTED)
    assert "post.sh:2: merge-conflict markers (`<<<<<<< HEAD`, `=======` at line 5" in refusal
    assert "resolve the conflict" in refusal


def test_a_heading_underlined_with_equals_signs_is_no_conflict() -> None:
    post = "Serving\n=======\n\nvllm serve org/m --port 8000\n"
    assert _import(post, "post.md").recipe.server.kind == "vllm"
