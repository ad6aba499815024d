"""A stand-in built for an image of another engine version takes the flags its option table cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.sim.standin import image
from hgxkit.sim.standin.common import options
from hgxkit.sim.standin.vllm.args import parse_serve


def test_the_tables_version_refuses_what_it_cannot_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "STANDS_FOR", tmp_path / "missing")
    with pytest.raises(SystemExit):
        parse_serve(["/models/m", "--enable-reasoning", "--max-num-seqs", "8"])


def test_another_versions_stand_in_takes_them_unread_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "stands-for").write_text("vllm/vllm-openai:v0.7.2\n")
    monkeypatch.setattr(options, "STANDS_FOR", tmp_path / "stands-for")
    ns, warnings = parse_serve(["/models/m", "--enable-reasoning", "--max-num-seqs", "8", "--no-such", "x"])
    assert ns.max_num_seqs == 8
    assert "SIMULATED: vllm/vllm-openai:v0.7.2 runs another vLLM; --enable-reasoning is taken unread" in warnings
    assert "SIMULATED: vllm/vllm-openai:v0.7.2 runs another vLLM; --no-such is taken unread" in warnings


def test_an_image_stands_for_another_version_only_when_its_tag_names_one() -> None:
    assert image.stands_for("lmsysorg/sglang:v0.5.12-cu130", "sglang") == "lmsysorg/sglang:v0.5.12-cu130"
    assert image.stands_for("lmsysorg/sglang:v0.5.23-cu129", "sglang") == ""
    assert image.stands_for("vllm/vllm-openai:latest", "vllm") == ""
    tags = {image.image_tag("", "sglang", image.stands_for(t, "sglang")) for t in ("lmsysorg/sglang:v0.5.12", "x:1")}
    assert len(tags) == 2  # another version's stand-in is an image of its own


def test_an_unread_flag_takes_its_value_along_and_leaves_the_next_flag() -> None:
    rows = [(("--tp-size",), (), "tp", "store", "int", None, None, 1, None, ())]
    argv = ["--old", "--other", "v", "--tp", "8", "--x=1", "--last"]
    assert options.without_unread(argv, rows) == (["--tp", "8"], ["--old", "--other", "--x", "--last"])
