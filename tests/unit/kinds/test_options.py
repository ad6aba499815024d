"""SGLang's flags are judged by SGLang 0.5.23's option table, as its real parser judges them."""

from __future__ import annotations

import pytest

from hgxkit.kinds.options import SGLANG_OPTIONS
from hgxkit.kinds.sglang import SGLANG

LATEST = "lmsysorg/sglang:latest"


def test_an_unknown_flag_on_latest_is_refused_with_the_version_and_the_nearest_option() -> None:
    assert SGLANG.unknown_flags(["--model-path", "--mem-fraction-statics", "--tp"], LATEST) == (
        "--mem-fraction-statics",
        "`--mem-fraction-statics` is not an option of SGLang 0.5.23 (the image lmsysorg/sglang:latest; the server "
        "exits with `unrecognized arguments`; the nearest option is `--mem-fraction-static`): remove it, or pin an "
        "image that has it (import with --image REF)",
    )


def test_several_unknown_flags_are_named_together_each_with_its_nearest_option() -> None:
    refused = SGLANG.unknown_flags(["--enable-torch-compiled", "--zzz=1", "--mem-fraction-statics=0.8"], LATEST)
    assert refused == (
        "--enable-torch-compiled",
        "`--enable-torch-compiled`, `--zzz`, `--mem-fraction-statics` are not options of SGLang 0.5.23 (the image "
        "lmsysorg/sglang:latest; the server exits with `unrecognized arguments`; the nearest options are "
        "`--enable-torch-compile` for `--enable-torch-compiled`, `--mem-fraction-static` for "
        "`--mem-fraction-statics`): remove them, or pin an image that has them (import with --image REF)",
    )


def test_the_same_flag_on_another_version_is_only_said_to_be_unchecked() -> None:
    image = "lmsysorg/sglang:v0.4.9"
    assert SGLANG.unknown_flags(["--mem-fraction-statics"], image) is None
    assert SGLANG.unchecked_flag("--mem-fraction-statics=0.8", image) == (
        "`--mem-fraction-statics` was not checked: SGLang 0.5.23 has no such option, and the image "
        "lmsysorg/sglang:v0.4.9 runs another SGLang, whose options hgxkit does not have"
    )
    assert SGLANG.unchecked_flag("--cuda-graph-max-bs", image) == (
        "`--cuda-graph-max-bs` was not checked: SGLang 0.5.23 finds it ambiguous (it could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill), and the image lmsysorg/sglang:v0.4.9 runs "
        "another SGLang, whose options hgxkit does not have"
    )
    assert SGLANG.unchecked_flag("--mem-fraction-static", image) is None
    assert SGLANG.unchecked_flag("--mem-fraction-statics", LATEST) is None  # judged, not noted


@pytest.mark.parametrize("flag", ["--tp", "--tp=4", "--speculative-algo", "--mem-fraction", "--model", "--ep"])
def test_a_prefix_of_one_option_is_that_option(flag: str) -> None:
    assert SGLANG_OPTIONS.unknown_option(flag) is None
    assert SGLANG.unknown_flags([flag], LATEST) is None


@pytest.mark.parametrize(
    ("flag", "candidates"),
    [
        ("--pp", "--pp-async-batch-depth, --pp-max-micro-batch-size, --pp-size"),
        ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
    ],
)
def test_a_prefix_of_several_options_is_refused_naming_them(flag: str, candidates: str) -> None:
    for image in (LATEST, "lmsysorg/sglang:v0.5.23-cu129", "docker.io/lmsysorg/sglang"):
        assert SGLANG.refuses_flag(flag, image) is None  # the table judges these images, not the hand rule
        assert SGLANG.unknown_flags([f"{flag}=2"], image) == (
            flag,
            f"`{flag}` is not an option of SGLang 0.5.23 (the image {image}; {flag} is ambiguous: it could match "
            f"{candidates}): remove it, or pin an image that has it (import with --image REF)",
        )


def test_cuda_graph_max_bs_is_refused_by_hand_on_images_newer_than_the_table() -> None:
    reason = SGLANG.refuses_flag("--cuda-graph-max-bs", "lmsysorg/sglang:v0.5.24")
    assert reason is not None and reason.startswith("--cuda-graph-max-bs is ambiguous in SGLang >= 0.5.23")
    assert SGLANG.unknown_flags(["--cuda-graph-max-bs"], "lmsysorg/sglang:v0.5.24") is None
    assert SGLANG.refuses_flag("--cuda-graph-max-bs", "lmsysorg/sglang:v0.5.2") is None


@pytest.mark.parametrize("image", [LATEST, "lmsysorg/sglang:v0.5.23", "lmsysorg/sglang:v0.4.9", "myorg/sglang:x"])
def test_an_underscore_spelling_is_refused_on_every_image(image: str) -> None:
    reason = SGLANG.refuses_flag("--max_running_requests", image)
    assert reason is not None and reason.startswith(
        "--max_running_requests: SGLang's argument parser does not turn underscores into dashes"
    )


@pytest.mark.parametrize(
    ("image", "applies"),
    [
        (LATEST, True),
        ("lmsysorg/sglang", True),
        ("docker.io/lmsysorg/sglang:v0.5.23-cu129", True),
        ("lmsysorg/sglang:0.5.23", True),
        ("lmsysorg/sglang:v0.5.22", False),
        ("lmsysorg/sglang:v0.5.24", False),
        ("lmsysorg/sglang:v0.5", False),
        ("lmsysorg/sglang:dev", False),
        ("lmsysorg/sglang@sha256:" + "1" * 64, False),
        ("myorg/sglang:latest", False),
    ],
)
def test_the_table_judges_only_images_that_run_0_5_23(image: str, applies: bool) -> None:
    assert SGLANG_OPTIONS.applies(image) is applies


@pytest.mark.parametrize(
    ("word", "whole"),
    [("--mem-fraction-static", True), ("--mem-fraction-st", False), ("--mem_fraction_static", False), ("-tp", False)],
)
def test_an_option_in_full_is_told_from_a_prefix_of_one(word: str, whole: bool) -> None:
    # SGLang's parser takes no underscore spelling; a prefix is an option to the parser, not to a wrapped line
    assert SGLANG.is_option is not None and SGLANG.is_option(word) is whole
