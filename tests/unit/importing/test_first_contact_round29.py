"""A class of import failure found by reading held-out posts 385-392 first (round 29): a Hugging Face cache mounted
beside a model that is the host's own folder was kept, and refused for its `~` (post 386; 044 likewise), though the
model is not served from it."""

from __future__ import annotations

from test_first_contact_round5 import _import

RUN = "docker run --gpus all -v /srv/m:/models/m -v {cache}:/root/.cache/huggingface vllm/vllm-openai:v0.33.0 {model}\n"


def test_a_cache_beside_a_local_model_folder_is_dropped_with_a_note() -> None:
    outcome = _import(RUN.format(cache="~/.cache/huggingface", model="--model /models/m"))
    words = " ".join(outcome.recipe.docker.words())
    assert "/srv/m:/models/m" in words and "/root/.cache/huggingface" not in words
    assert any("is dropped: the model is served from the host's folder" in note for note in outcome.notes)


def test_a_cache_that_holds_the_model_stays_mounted() -> None:
    post = (
        "docker run --gpus all -v /data/hf:/root/.cache/huggingface vllm/vllm-openai:v0.33.0 "
        "--model /root/.cache/huggingface/hub/models--org--m/snapshots/abc\n"
    )
    outcome = _import(post)
    assert "/data/hf:/root/.cache/huggingface" in " ".join(outcome.recipe.docker.words())
