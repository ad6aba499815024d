"""The server kinds (hgxkit/kinds): detection from program and image, refusals by name, flag spellings per
engine, what each kind brings, and the examples in their docstrings."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.kinds import KINDS, detect_kind, launcher_prefixes, legacy_version_keys, posted_clients, register_kind
from hgxkit.recipe.server_args import ServerCommand

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("image", "program", "kind"),
    [
        ("lmsysorg/sglang:dev-dspark", ("sglang", "serve"), "sglang"),
        ("lmsysorg/sglang:latest", ("python3", "-m", "sglang.launch_server"), "sglang"),
        ("anything:1", ("python", "-m", "sglang.launch_server"), "sglang"),
        ("vllm/vllm-openai:v0.9.2", (), "vllm"),
        ("vllm/vllm-openai@sha256:" + "a" * 64, (), "vllm"),
        ("my.registry:5000/vllm-fork:1", ("vllm", "serve"), "vllm"),
        ("nvcr.io/x/y:1", ("python3.12", "-m", "vllm.entrypoints.openai.api_server"), "vllm"),
    ],
)
def test_kind_is_detected_from_program_then_image(image: str, program: tuple[str, ...], kind: str) -> None:
    assert detect_kind(image, program).name == kind


@pytest.mark.parametrize(
    ("image", "program", "message"),
    [
        (
            "ghcr.io/huggingface/text-generation-inference:3.0",
            (),
            "Hugging Face TGI (text-generation-inference) (tgi) is not supported yet",
        ),
        ("nvcr.io/nim/meta/llama-3.1-8b-instruct:latest", (), "NVIDIA NIM (nim) is not supported yet"),
        ("ubuntu:24.04", ("trtllm-serve",), "TensorRT-LLM (trtllm) is not supported yet"),
        ("ollama/ollama", (), "Ollama (ollama) is not supported yet"),
        ("busybox:1", ("serve",), "cannot tell which server busybox:1 runs: set server.kind to one of sglang, vllm"),
    ],
)
def test_other_engines_are_refused_by_name(image: str, program: tuple[str, ...], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        detect_kind(image, program)


def test_explicit_kind_wins_and_unknown_kinds_are_refused() -> None:
    assert detect_kind("busybox:1", ("serve",), "vllm").name == "vllm"
    with pytest.raises(InputError, match=r"server\.kind 'tgi': use one of sglang, vllm"):
        detect_kind("lmsysorg/sglang:latest", (), "tgi")


def test_flags_are_read_as_each_engine_spells_them() -> None:
    vllm = ServerCommand.from_words(
        ["meta-llama/Llama-3.1-8B", "-tp", "4", "--enable_expert_parallel", "--max_model_len=8192"], kind="vllm"
    )
    assert vllm.flag("--tensor-parallel-size") == "4" and vllm.flag("-tp") == "4"
    assert vllm.has("--enable-expert-parallel") and vllm.flag("--max-model-len") == "8192"
    assert vllm.flag("--model") == "meta-llama/Llama-3.1-8B"  # the image's entrypoint is `vllm serve`
    sglang = ServerCommand.from_words(["sglang", "serve", "/model", "--tp", "8"], kind="sglang")
    assert sglang.flag("--tp-size") == "8" and sglang.flag("--model-path") == "/model"
    assert sglang.flag("-tp") is None  # not an SGLang spelling


def test_the_table_says_what_verify_and_serving_need() -> None:
    sglang, vllm = KINDS["sglang"], KINDS["vllm"]
    assert (sglang.default_port, sglang.health_path, sglang.client) == (
        30000,
        "/health_generate",
        "sglang.benchmark.serving",
    )
    assert (vllm.default_port, vllm.health_path, vllm.client) == (8000, "/health", "vllm bench serve")
    assert sglang.default_host == "127.0.0.1" and vllm.default_host == "0.0.0.0"
    assert sglang.flush_cache and not vllm.flush_cache
    assert vllm.api_key_env == "VLLM_API_KEY" and sglang.api_key_env is None


@pytest.mark.parametrize(
    "name",
    ["hgxkit.kinds", "hgxkit.kinds.base", "hgxkit.kinds.sglang", "hgxkit.kinds.vllm", "hgxkit.kinds.options"],
)
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_each_kind_brings_its_client_metrics_and_version_field() -> None:
    sglang, vllm = KINDS["sglang"], KINDS["vllm"]
    assert (sglang.bench.suffix, sglang.bench.lengths.fixed) == ("jsonl", 1.0)
    assert (vllm.bench.suffix, vllm.bench.lengths.fixed) == ("json", 0.0)
    assert sglang.metrics.running == "sglang:num_running_reqs" and vllm.metrics.drafts
    assert legacy_version_keys() == ("sglang_version",)
    assert [c.name for c in posted_clients()] == [
        "sglang.benchmark.serving",
        "vllm bench serve",
        "benchmark_serving.py",
    ]
    assert launcher_prefixes() == (("sglang", "serve"), ("vllm", "serve"))


def test_a_kind_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="already known"):
        register_kind(KINDS["vllm"])
