"""What the engine itself would refuse is refused at import, by name, at the post's word."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

import pytest

from hgxkit.errors import InputError
from hgxkit.imageref import image_version
from hgxkit.importing.importer import import_post
from hgxkit.kinds.options import SGLANG_OPTIONS, VLLM_OPTIONS
from hgxkit.recipe.engine_start import engine_refusal
from hgxkit.sim.standin.sglang.args import build_parser as sglang_parser
from hgxkit.sim.standin.vllm import args as vargs

SGLANG = "docker run --gpus all -p 30000:30000 {image} python3 -m sglang.launch_server --model-path org/m {flags}"
VLLM = "docker run --gpus all -p 8000:8000 {env}{image} --model org/m {flags}"
table_applies, unknown_option = VLLM_OPTIONS.applies, VLLM_OPTIONS.unknown_option


def _refusal(text: str) -> str:
    with pytest.raises(InputError) as caught:
        import_post([("p.md", text)])
    return caught.value.message


def test_image_version_reads_the_tag() -> None:
    assert image_version("lmsysorg/sglang:v0.5.23-cu129") == (0, 5, 23)
    assert image_version("vllm/vllm-openai:v0.9.2") == (0, 9, 2)
    assert image_version("localhost:5000/sglang:0.4") == (0, 4)
    assert image_version("lmsysorg/sglang:latest") is None
    assert image_version("lmsysorg/sglang") is None
    assert image_version("lmsysorg/sglang:dev-dspark") is None


def test_an_underscore_flag_is_refused_for_sglang_and_taken_by_vllm() -> None:
    text = SGLANG.format(image="lmsysorg/sglang:v0.5.2", flags="--max_num_batched_tokens 4096")
    assert _refusal(text) == (
        "p.md: line 1, column 112: the engine would refuse: --max_num_batched_tokens: SGLang's argument parser "
        "does not turn underscores into dashes (vLLM's does) and has no --max_num_batched_tokens, so it exits "
        "with `unrecognized arguments`; write the SGLang flag (--max-num-batched-tokens if it has one) or drop it"
    )
    vllm = import_post([("p.md", VLLM.format(env="", image="vllm/vllm-openai:latest", flags="--max_num_seqs 8"))])
    assert vllm.recipe.server.kind == "vllm"


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("lmsysorg/sglang:latest", "`--cuda-graph-max-bs` is not an option of SGLang 0.5.23"),
        ("lmsysorg/sglang:v0.5.23", "`--cuda-graph-max-bs` is not an option of SGLang 0.5.23"),
        ("lmsysorg/sglang:v0.5.24", "--cuda-graph-max-bs is ambiguous in SGLang >= 0.5.23"),
        ("lmsysorg/sglang:v0.4.6.post1", None),
    ],
)
def test_cuda_graph_max_bs_is_refused_where_it_is_ambiguous(image: str, why: str | None) -> None:
    text = SGLANG.format(image=image, flags="--cuda-graph-max-bs 8")
    if why:
        message = _refusal(text)
        assert f"the engine would refuse: {why}" in message
        assert "it could match --cuda-graph-max-bs-decode" in message
    else:
        assert import_post([("p.md", text)]).recipe.server.flag("--cuda-graph-max-bs") == "8"
    decode = SGLANG.format(image=image, flags="--cuda-graph-max-bs-decode 8")
    assert import_post([("p.md", decode)]).recipe.server.flag("--cuda-graph-max-bs-decode") == "8"


def test_an_explicit_value_on_a_vllm_switch_is_refused_from_0_10() -> None:
    text = VLLM.format(env="", image="vllm/vllm-openai:v0.11.0", flags="--enable-chunked-prefill=False")
    assert _refusal(text).endswith(
        "the engine would refuse: --enable-chunked-prefill=False: vLLM >= 0.10 (vllm/vllm-openai:v0.11.0) parses "
        "--enable-chunked-prefill as a switch and exits with `ignored explicit argument 'False'`; write "
        "--no-enable-chunked-prefill"
    )
    old = VLLM.format(env="", image="vllm/vllm-openai:v0.6.3", flags="--enable-chunked-prefill=False")
    assert import_post([("p.md", old)]).recipe.server.has("--enable-chunked-prefill")


@pytest.mark.parametrize(
    ("value", "refused"),
    [("all", True), ("none", True), ("0,1", False), ("GPU-8f6e1a2b-0000-1111-2222-333344445555", False)],
)
def test_cuda_visible_devices_must_name_devices(value: str, refused: bool) -> None:
    text = VLLM.format(env=f"-e CUDA_VISIBLE_DEVICES={value} ", image="vllm/vllm-openai:latest", flags="")
    if refused:
        assert _refusal(text).startswith(
            f"p.md: line 1, column 39: the engine would refuse: CUDA_VISIBLE_DEVICES={value}: CUDA takes GPU "
            "ordinals or UUIDs and stops at the first invalid entry, so vLLM would see no GPU"
        )
    else:
        recipe = import_post([("p.md", text)]).recipe
        assert engine_refusal(recipe) is None


@pytest.mark.parametrize(
    ("mount", "column"),
    [
        ("-v ~/cache:/cache", 39),
        ("-v ./:/code", 39),
        ("-v ../x:/x", 39),
        ("--mount type=bind,source=./m,target=/m", 44),
    ],
)
def test_a_mount_left_to_the_nodes_shell_or_directory_is_refused_at_its_word(mount: str, column: int) -> None:
    text = f"docker run --gpus all -p 8000:8000 {mount} vllm/vllm-openai:latest --model org/m"
    message = _refusal(text)
    source = mount.split("source=")[-1].split(",")[0].removeprefix("-v ").split(":")[0]
    why = (
        "~ is the home of whoever runs the command, root when hgxkit deploys"
        if source.startswith("~")
        else (
            "a relative path depends on the directory the command runs in, and Docker 20.10 takes it for a volume name"
        )
    )
    option, value = mount.replace("-v ", "--volume ").split(" ", 1)
    assert message == (
        f"p.md: line 1, column {column}: {option} {value}: the host side {source} is not a fixed "
        f"directory ({why}); write the absolute host directory"
    )
    fixed = text.replace("~/", "/srv/").replace("../", "/srv/").replace("./", "/srv/")
    assert import_post([("p.md", fixed)]).recipe.server.kind == "vllm"


# --- vLLM 0.33's option table (hgxkit.kinds.options) ---


def _refused_by_name(parse: Callable[[list[str]], object], argv: list[str]) -> bool:
    """Whether a stand-in's parser refuses `argv` for a flag's name: unrecognized or ambiguous, not for a missing
    or bad value."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse(argv)
    except SystemExit:
        return "unrecognized arguments" in err.getvalue() or "ambiguous option" in err.getvalue()
    return False


def _standin_refuses(flag: str) -> bool:
    """Whether the vLLM stand-in's parser (vLLM 0.33's table, checked against the real parser in
    test_vllm_stub_args) refuses `flag` by its name."""
    return _refused_by_name(vargs.parse_serve, ["m", flag, *(["x"] if "." in flag else [])])


@pytest.mark.parametrize(
    ("flag", "refused"),
    [
        ("--log-requests", True),
        ("--num-scheduler-steps", True),
        ("--enable-reasoning", True),
        ("--enable", True),
        ("--enable-log-requests", False),
        ("--disable-log-requests", False),
        ("--max-model", False),
        ("--max_model_len", False),
        ("--tensor-parallel-size=2", False),
        ("--no-enable-prefix-caching", False),
        ("--speculative_config.method", False),
        ("--headless", False),
        ("-tp", False),
    ],
)
def test_the_flag_check_agrees_with_the_standins_033_parser(flag: str, refused: bool) -> None:
    assert (unknown_option(flag) is not None, _standin_refuses(flag)) == (refused, refused)


@pytest.mark.parametrize(
    ("image", "applies"),
    [
        ("vllm/vllm-openai:latest", True),
        ("vllm/vllm-openai", True),
        ("docker.io/vllm/vllm-openai:v0.33.1", True),
        ("vllm/vllm-openai:v0.9.2", False),
        ("vllm/vllm-openai:nightly", False),
        ("vllm/vllm-openai@sha256:" + "1" * 64, False),
        ("myorg/vllm:latest", False),
    ],
)
def test_the_033_table_judges_only_images_that_run_033(image: str, applies: bool) -> None:
    assert table_applies(image) is applies


def test_flags_vllm_033_lacks_are_refused_together_at_the_first_one() -> None:
    text = VLLM.format(env="", image="vllm/vllm-openai:latest", flags="--log-requests --num-scheduler-steps 8")
    assert _refusal(text) == (
        "p.md: line 1, column 74: the engine would refuse: `--log-requests`, `--num-scheduler-steps` are not options "
        "of vLLM 0.33 (the image vllm/vllm-openai:latest; `vllm serve` exits with `unrecognized arguments`; the "
        "nearest options are `--enable-log-requests` for `--log-requests`): remove them, or pin an image that has "
        "them (import with --image REF)"
    )
    # Not the post's last word: one that starts several options there is a cut copy (test_first_contact_round24).
    pinned = VLLM.format(env="", image="vllm/vllm-openai:v0.33.0", flags="--enable --port 8000")
    assert _refusal(pinned).startswith(
        "p.md: line 1, column 75: the engine would refuse: `--enable` is not an option of vLLM 0.33 (the image "
        "vllm/vllm-openai:v0.33.0; --enable is ambiguous: it could match --enable-auto-tool-choice, "
    )


def test_a_flag_033_lacks_on_another_version_is_imported_and_said_to_be_unchecked() -> None:
    text = VLLM.format(env="", image="vllm/vllm-openai:v0.7.2", flags="--enable-reasoning --reasoning-parser r1")
    outcome = import_post([("p.md", text)])
    assert outcome.recipe.server.has("--enable-reasoning")
    assert [n for n in outcome.notes if "checked" in n] == [
        "p.md: line 1, column 74: `--enable-reasoning` was not checked: vLLM 0.33 has no such option, and the image "
        "vllm/vllm-openai:v0.7.2 runs another vLLM, whose options hgxkit does not have"
    ]
    known = VLLM.format(env="", image="vllm/vllm-openai:v0.7.2", flags="--max-model-len 4096")
    assert [n for n in import_post([("p.md", known)]).notes if "checked" in n] == []


# --- SGLang 0.5.23's option table (hgxkit.kinds.options) ---


def test_a_misspelt_sglang_flag_on_latest_is_refused_at_import_with_the_nearest_option() -> None:
    text = SGLANG.format(image="lmsysorg/sglang:latest", flags="--tp 4 --mem-fraction-statics 0.8")
    assert _refusal(text) == (
        "p.md: line 1, column 119: the engine would refuse: `--mem-fraction-statics` is not an option of SGLang "
        "0.5.23 (the image lmsysorg/sglang:latest; the server exits with `unrecognized arguments`; the nearest "
        "option is `--mem-fraction-static`): remove it, or pin an image that has it (import with --image REF)"
    )
    fixed = text.replace("--mem-fraction-statics", "--mem-fraction-static")
    assert import_post([("p.md", fixed)]).recipe.server.flag("--mem-fraction-static") == "0.8"


def test_a_flag_0_5_23_lacks_on_another_sglang_is_imported_and_said_to_be_unchecked() -> None:
    text = SGLANG.format(image="lmsysorg/sglang:v0.4.9", flags="--tp 4 --mem-fraction-statics 0.8")
    outcome = import_post([("p.md", text)])
    assert outcome.recipe.server.has("--mem-fraction-statics")
    assert [n for n in outcome.notes if "checked" in n] == [
        "p.md: line 1, column 119: `--mem-fraction-statics` was not checked: SGLang 0.5.23 has no such option, and "
        "the image lmsysorg/sglang:v0.4.9 runs another SGLang, whose options hgxkit does not have"
    ]


def test_an_ambiguous_sglang_prefix_on_latest_is_refused_at_import_naming_the_options() -> None:
    text = SGLANG.format(image="lmsysorg/sglang:latest", flags="--tp 4 --pp 2")
    assert _refusal(text).endswith(
        "the engine would refuse: `--pp` is not an option of SGLang 0.5.23 (the image lmsysorg/sglang:latest; --pp "
        "is ambiguous: it could match --pp-async-batch-depth, --pp-max-micro-batch-size, --pp-size): remove it, or "
        "pin an image that has it (import with --image REF)"
    )


@pytest.mark.parametrize(
    ("flag", "refused"),
    [
        ("--mem-fraction-statics", True),
        ("--max_running_requests", True),
        ("--pp", True),
        ("--cuda-graph-max-bs", True),
        ("--stream-output", True),
        ("--keep-mm-feature-on-device", True),
        ("--enable", True),
        ("--cuda-graph-config.decode", True),
        ("--tp", False),
        ("--tp-size=2", False),
        ("--ep", False),
        ("--enable-dp-attention", False),
        ("--no-lora-strict-loading", False),
        ("--monokernel-backend", False),
    ],
)
def test_the_flag_check_agrees_with_the_sglang_standins_parser(flag: str, refused: bool) -> None:
    standin = _refused_by_name(sglang_parser("sglang").parse_args, ["--model-path", "/m", flag])
    assert (SGLANG_OPTIONS.unknown_option(flag) is not None, standin) == (refused, refused)


@pytest.mark.parametrize(
    ("image", "flags", "refused"),
    [
        ("vllm/vllm-openai:v0.11.0", "--middleware src.timing.log", True),
        ("vllm/vllm-openai:v0.11.0", "--logits-processors vllm.a:B app.proc:P", True),
        ("vllm/vllm-openai:v0.11.0", "--worker-extension-cls vllm.x.Ext --worker-cls auto", False),
        ("myorg/app:1 vllm serve", "--middleware src.timing.log", False),  # the post's own build may hold it
    ],
)
def test_an_import_path_into_the_posts_own_code_is_refused_on_the_engines_image(
    image: str, flags: str, refused: bool
) -> None:
    text = VLLM.format(env="", image=image, flags=flags)
    if not refused:
        assert import_post([("p.md", text)]).recipe is not None
        return
    message = _refusal(text)
    assert "an import path into" in message and "--image" in message and "\n" not in message, message


@pytest.mark.parametrize(
    ("template", "image", "flags", "why"),
    [
        (SGLANG, "lmsysorg/sglang:latest", "--port", "`--port` takes a value and the command gives none (it ends"),
        (
            SGLANG,
            "lmsysorg/sglang:latest",
            "--port --trust-remote-code",
            "`--port` takes a value and the command gives none (the next word, `--trust-remote-code`, is a flag)",
        ),
        (SGLANG, "lmsysorg/sglang:v0.4.9", "--port", "`--port` takes a value in SGLang 0.5.23 (the image"),
        (
            VLLM,
            "vllm/vllm-openai:latest",
            "--served-model-name",
            "`--served-model-name` takes a value and the command gives none (it ends there: the copy may be cut), so "
            "`vllm serve` exits with `expected at least one argument`",
        ),
        (
            SGLANG,
            "lmsysorg/sglang:latest",
            '--model-loader-extra-config {"a": 1,"b": 2}',
            "`--model-loader-extra-config` takes one value, but the shell splits this one into 3 words "
            "(`{a: 1,b: 2}` unquoted), so `1,b:` is a positional argument to the server, which exits on it; quote "
            "the JSON",
        ),
        (
            VLLM,
            "vllm/vllm-openai:latest",
            '--compilation-config {"mode": 3}',
            "`--compilation-config` takes one value, but the shell splits this one into 2 words",
        ),
        (SGLANG, "lmsysorg/sglang:latest", "--port 8000 extra", "`--port` takes one value, so `extra` after `8000`"),
        # vLLM takes a bare word as its positional model, which would replace the one --model names
        (VLLM, "vllm/vllm-openai:latest", "--port 8000 org/other", "`--port` takes one value, so `org/other` after"),
    ],
)
def test_a_flag_given_a_value_count_its_nargs_refuses_is_refused(
    template: str, image: str, flags: str, why: str
) -> None:
    message = _refusal(template.format(env="", image=image, flags=flags))
    assert f"the engine would refuse: {why}" in message


@pytest.mark.parametrize(
    ("template", "image", "flags"),
    [
        (SGLANG, "lmsysorg/sglang:latest", "--model-checksum"),  # nargs '?': its value is optional
        (SGLANG, "lmsysorg/sglang:latest", "--model-checksum --port 8000"),
        (SGLANG, "lmsysorg/sglang:latest", "--lora-paths"),  # nargs '*'
        (SGLANG, "lmsysorg/sglang:latest", "--port=8000"),
        (SGLANG, "lmsysorg/sglang:latest", """--model-loader-extra-config '{"a": 1, "b": 2}'"""),
        (SGLANG, "lmsysorg/sglang:v0.4.9", "--port --trust-remote-code"),  # another version: only a cut end is judged
        (VLLM, "vllm/vllm-openai:latest", "--hf-token"),  # nargs '?'
        (VLLM, "vllm/vllm-openai:latest", "--middleware vllm.a.b --middleware vllm.c.d"),  # append, twice
        (VLLM, "vllm/vllm-openai:latest", "--compilation-config.mode 3"),  # a dotted key, vLLM's own reading
        (VLLM, "vllm/vllm-openai:latest", "--served-model-name a b"),  # nargs '+'
    ],
)
def test_a_flag_given_a_value_count_its_nargs_takes_is_imported(template: str, image: str, flags: str) -> None:
    recipe = import_post([("p.md", template.format(env="", image=image, flags=flags))]).recipe
    kind = recipe.server.server_kind
    uses = [use.words for use in recipe.server.uses()]
    assert kind.value_count is not None
    assert kind.value_count(uses, recipe.image.reference, recipe.server.model_slot()) is None


def test_a_bare_word_after_the_positional_model_is_refused() -> None:
    assert "`--port` takes one value, so `extra` after `8000`" in _refusal("sglang serve org/m --port 8000 extra")
