"""Classes of import failure found by reading held-out posts 441-448 first (round 36), each imported wrong at exit 0:
the poster's GPU UUIDs kept as the node's GPUs (448); a download folder (`--download-dir /workspace`) mounted from
the node, and the release the prose names not said (445)."""

from __future__ import annotations

from test_first_contact_round5 import _import

UUIDS = "GPU-8cba8394-b5d6-1e92-6658-bb6efc08abff,GPU-c05c3905-fdd9-34a3-f6c0-1437beb91c7d"


def test_gpus_named_by_the_poster_s_uuids_are_the_node_s_first_ones() -> None:
    post = f"docker run --runtime nvidia -e NVIDIA_VISIBLE_DEVICES={UUIDS} vllm/vllm-openai:v0.33.0 --model org/m\n"
    outcome = _import(post)
    words = " ".join(outcome.recipe.docker.words())
    assert "NVIDIA_VISIBLE_DEVICES=0,1" in words and "GPU-" not in words
    assert any("are the poster's machine's, by UUID; the node's first 2" in note for note in outcome.notes)


def test_a_gpus_device_list_of_uuids_is_the_node_s_first_ones() -> None:
    post = f"docker run --gpus '\"device={UUIDS}\"' vllm/vllm-openai:v0.33.0 --model org/m\n"
    assert '"device=0,1"' in _import(post).recipe.docker.words()


def test_a_download_folder_is_the_container_s_own_and_the_prose_s_release_is_said() -> None:
    post = "I run vllm 0.8.5.post1 on an H100.\n\n```\nvllm serve org/m --download-dir /workspace --port 8000\n```\n"
    outcome = _import(post, "post.md")
    assert "/workspace:/workspace" not in " ".join(outcome.recipe.docker.words())
    assert outcome.recipe.server.flag("--download-dir") == "/workspace"
    assert any("--download-dir /workspace is where the server would download" in n for n in outcome.notes)
    assert any("import with --image vllm/vllm-openai:v0.8.5.post1" in n for n in outcome.notes)
