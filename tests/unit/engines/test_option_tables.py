"""The engines' option tables are what the real engines' parsers give: regenerated from the client store's sglang
and vllm and compared byte for byte (skipped without the store, failing under CI=true)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hgxkit.engines.sglang_serve import REQUIRED, SGLANG_VERSION
from hgxkit.engines.sglang_serve import SERVE_OPTIONS as SGLANG_ROWS
from hgxkit.engines.vllm_serve import SERVE_OPTIONS as VLLM_ROWS
from hgxkit.engines.vllm_serve import VLLM_VERSION
from hgxkit.kinds.options import SGLANG_OPTIONS, VLLM_OPTIONS, OptionTable

ROOT = Path(__file__).resolve().parents[3]
TABLES = {"sglang": ROOT / "hgxkit/engines/sglang_serve.py", "vllm": ROOT / "hgxkit/engines/vllm_serve.py"}


@pytest.mark.pins
@pytest.mark.parametrize("engine", sorted(TABLES))
def test_the_committed_table_is_what_the_real_engines_parser_gives(
    engine: str, client_python: Callable[[str], Path]
) -> None:
    python = client_python(engine)
    generated = subprocess.run(
        [str(python), "tools/gen_engine_options.py", engine], cwd=ROOT, capture_output=True, timeout=300
    )
    assert generated.returncode == 0, generated.stderr.decode(errors="replace")[-3000:]
    assert generated.stdout == TABLES[engine].read_bytes(), (
        f"{TABLES[engine].relative_to(ROOT)} is not what {engine}'s parser gives: "
        f"{python} tools/gen_engine_options.py {engine} > {TABLES[engine].relative_to(ROOT)}"
    )


@pytest.mark.parametrize(
    ("table", "version", "rows"),
    [(SGLANG_OPTIONS, SGLANG_VERSION, SGLANG_ROWS), (VLLM_OPTIONS, VLLM_VERSION, VLLM_ROWS)],
    ids=["sglang", "vllm"],
)
def test_each_table_judges_the_version_it_was_read_from(table: OptionTable, version: str, rows: tuple) -> None:
    assert tuple(int(part) for part in version.split("."))[: len(table.version)] == table.version
    assert table.rows() is rows


def test_the_sglang_table_is_sglang_0_5_23s_server_parser() -> None:
    assert SGLANG_VERSION == "0.5.23" and len(SGLANG_ROWS) > 500
    rows = {row[2]: row for row in SGLANG_ROWS}
    assert rows["model_path"][:2] == (("--model-path", "--model"), ()) and REQUIRED == ("model_path",)
    assert rows["tp_size"][0] == ("--tp-size", "--tensor-parallel-size")
    assert rows["enable_hierarchical_cache"][0] == ("--enable-hierarchical-cache", "--enable-hicache")
    assert {"cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill"} <= set(rows)
    assert "cuda_graph_max_bs" not in rows
