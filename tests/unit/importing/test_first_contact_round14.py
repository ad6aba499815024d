"""Classes of import failure found by reading posts 267-274 first (round 14): a page's line that joined several
(`export A=1 export B=2 vllm serve \\ $M \\ …`) read as one export of every word, so its launch, and the other
accelerator its variables showed, were never seen; an exported `NAME=$(…)` whose command nests parentheses two
deep (jq's `select(startswith(…))`) skipped as unreadable, so the launch after it was imported at exit 0 without
the variable; and a model given as the script's `$1` refused with a word on a sourced file that cannot set it."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal  # the same helpers: import a post, its one-line refusal

FLATTENED = 'export TP=1 export MODEL_ID="org/m" vllm serve \\ $MODEL_ID \\ --port 8000 \\ --tensor-parallel $TP\n'


def test_exports_joined_with_their_launch_on_one_line_are_read_apart() -> None:
    outcome = _import(f"Launch it:\n{FLATTENED}", "post.md")
    assert outcome.recipe.server.has("--tensor-parallel")
    assert any("read apart" in note for note in outcome.notes)


def test_a_joined_line_that_exports_rocm_settings_is_refused_for_rocm() -> None:
    post = f"Six times an H100's memory:\nexport VLLM_ROCM_USE_AITER=1 {FLATTENED}"
    assert "VLLM_ROCM_USE_AITER is AMD ROCm" in _refusal(post, "post.md")


def test_an_exported_substitution_with_nested_parentheses_is_named() -> None:
    post = 'export IP="$(ip -j a | jq -r \'.[] | select(startswith("10."))\')"\nvllm serve org/m --port 8000\n'
    assert "(the value of IP, exported" in _refusal(post)


def test_an_export_the_scan_cannot_read_refuses_the_launch_after_it() -> None:
    refusal = _refusal("export IP=\"$(echo ')')\"\nvllm serve org/m --port 8000\n")
    assert refusal.startswith("post.sh:1: an `export` the import cannot read")
    assert "launch at post.sh:2" in refusal


def test_an_export_after_the_launch_is_skipped() -> None:
    assert _import("vllm serve org/m --port 8000\nexport IP=\"$(echo ')')\"\n").recipe.server.kind == "vllm"


def test_a_model_given_as_the_scripts_argument_is_named_so() -> None:
    refusal = _refusal("source .venv/bin/activate\nvllm serve $1 --port 8000\n")
    assert "the model '$1' is argument 1 of the script, which the post does not give" in refusal
    assert "sources" not in refusal
