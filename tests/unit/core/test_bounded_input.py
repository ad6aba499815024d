"""Text a user hands hgxkit is bounded and read safely: regular files only, size checked
before reading, a trailing backslash is a one-line error, names with `$…$` do not crash the plots, and the
report's CSP runs no script."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_results import make_run

from hgxkit.errors import InputError
from hgxkit.recipe.read import load_recipe
from hgxkit.recipe.shellwords import split_words
from hgxkit.results.html_report import CSP
from hgxkit.results.plots import figure_svg, ttft_figure
from hgxkit.results.summary import RunSummary
from hgxkit.textinput import MAX_TEXT_BYTES, read_text_file, read_text_stream

ROOT = Path(__file__).resolve().parents[3]


def _import(path: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hgxkit", "recipe", "import", path, "-o", os.devnull],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@pytest.mark.parametrize(("path", "kind"), [("/dev/zero", "a character device"), ("/tmp", "a directory")])
def test_devices_and_directories_are_refused_before_reading(path: str, kind: str) -> None:
    with pytest.raises(InputError) as err:
        read_text_file(path)
    assert str(err.value) == f"{path}: not a regular file ({kind}); save the text to a file"


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "post"
    os.mkfifo(fifo)
    start = time.monotonic()
    result = _import(str(fifo))
    assert time.monotonic() - start < 30
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"hgxkit: error: {fifo}: not a regular file (a FIFO); save the text to a file"
    ]
    assert "Traceback" not in result.stderr


def test_dev_zero_through_the_cli_is_one_line_and_exit_2() -> None:
    result = _import("/dev/zero")
    assert (result.returncode, result.stderr.strip().count("\n"), "Traceback" in result.stderr) == (2, 0, False)
    assert "not a regular file (a character device)" in result.stderr


def test_a_file_over_the_limit_is_refused_by_its_size(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * (MAX_TEXT_BYTES + 1))
    with pytest.raises(InputError, match=r"big.txt: larger than 4 MiB"):
        read_text_file(str(big))
    with pytest.raises(InputError, match=r"<stdin>: larger than 4 MiB"):
        read_text_stream("<stdin>", io.BytesIO(b"a" * (MAX_TEXT_BYTES + 1)))
    assert read_text_stream("<stdin>", io.BytesIO(b"docker run x")) == "docker run x"


def test_not_utf8_and_missing_files_are_one_line(tmp_path: Path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9")
    with pytest.raises(InputError, match=r"latin.txt: not UTF-8 text"):
        read_text_file(str(latin))
    with pytest.raises(InputError, match=r"nope.txt: cannot read: No such file or directory"):
        read_text_file(str(tmp_path / "nope.txt"))


def test_a_trailing_backslash_is_a_one_line_error_with_its_place() -> None:
    with pytest.raises(InputError) as err:
        split_words("docker run img serve --tp 4\\", source="post.txt")
    assert str(err.value).startswith("post.txt: line 1, column 28: the text ends with a backslash")
    assert [w.text for w in split_words("a \\")] == ["a"]  # a lone backslash after a word is a separator


def test_a_recipe_option_ending_in_a_backslash_names_file_key_and_line(tmp_path: Path) -> None:
    text = (ROOT / "recipes/deepseek-v4-flash-dspark-marlin.yaml").read_text().replace("  - -d\n", "  - -d\\\n", 1)
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_recipe(path)
    line = text.splitlines().index("  - -d\\") + 1
    assert str(err.value).startswith(f"{path}: docker.options[0] (line {line}): line 1, column 3: the text ends")


def test_tex_in_a_recipe_name_is_drawn_as_text(tmp_path: Path) -> None:
    run = make_run(tmp_path, "node1", "20260101T000000Z", "r")
    summary = RunSummary.from_json(json.loads((run / "summary.json").read_text()))
    svg = figure_svg(ttft_figure([(r"a$\frac{b$", summary), ("$x^$", summary)]))
    assert "<svg" in svg


def test_the_report_runs_no_script() -> None:
    assert "script-src" not in CSP and "default-src 'none'" in CSP
