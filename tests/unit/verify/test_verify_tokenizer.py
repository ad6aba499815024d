"""The tokenizer `hgxkit verify --endpoint` hands the benchmark client: never code from a stranger.

The real threat is shown first with SGLang's own client (the client store): it loads a tokenizer that names
code through `auto_map`, and the code runs. hgxkit's copy of the same directory loads without it running, and
`hgxkit verify --endpoint` against a stand-in server, with that directory as --tokenizer, runs SGLang's real
client to the end with the code never executed.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.errors import InputError
from hgxkit.verify.tokenizer import OFFLINE_ENV, copy_tokenizer, without_code

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml"

# Builds a small word-level tokenizer with the client store's `tokenizers`, and code the tokenizer names.
MAKE_EVIL = """
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers
folder, marker = Path(sys.argv[1]), sys.argv[2]
vocab = {"[UNK]": 0, **{f"t{i}": i + 1 for i in range(4000)}}
tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer.save(str(folder / "tokenizer.json"))
config = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "auto_map": {"AutoTokenizer": [None, "tokenization_evil.EvilTokenizer"]},
}
(folder / "tokenizer_config.json").write_text(json.dumps(config))
(folder / "tokenization_evil.py").write_text(
    f"from pathlib import Path\\nPath({marker!r}).write_text('ran')\\n"
    "from transformers import PreTrainedTokenizerFast\\n\\n\\nclass EvilTokenizer(PreTrainedTokenizerFast):\\n    pass\\n"
)
"""
LOAD = (
    "import sys\nfrom sglang.benchmark.utils import get_tokenizer\nprint(type(get_tokenizer(sys.argv[1])).__name__)\n"
)


@pytest.fixture()
def evil(tmp_path: Path, client_venv: Path) -> tuple[Path, Path]:
    """(a tokenizer directory whose auto_map names code, the file that code writes when it runs)."""
    folder, marker = tmp_path / "evil-tokenizer", tmp_path / "code-ran"
    folder.mkdir()
    subprocess.run([str(client_venv / "bin" / "python"), "-c", MAKE_EVIL, str(folder), str(marker)], check=True)
    return folder, marker


def load_with_sglangs_client(client_venv: Path, folder: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", **OFFLINE_ENV}
    done = subprocess.run(
        [str(client_venv / "bin" / "python"), "-c", LOAD, str(folder)],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder.parent,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_sglangs_client_runs_the_code_a_tokenizer_names_and_hgxkits_copy_does_not(
    tmp_path: Path, client_venv: Path, evil: tuple[Path, Path]
) -> None:
    folder, marker = evil
    copy = copy_tokenizer(str(folder), tmp_path / "copy")
    assert load_with_sglangs_client(client_venv, copy.path) != "EvilTokenizer"  # transformers own class
    assert not marker.exists()
    assert copy.left_out == ("tokenization_evil.py", "tokenizer_config.json: auto_map")
    # the threat is real: the directory as given runs its code in the client
    assert load_with_sglangs_client(client_venv, folder) == "EvilTokenizer"
    assert marker.read_text() == "ran"


def test_verify_against_an_endpoint_never_runs_the_tokenizers_code(
    tmp_path: Path, client_venv: Path, evil: tuple[Path, Path], start_stub, monkeypatch, capsys
) -> None:
    folder, marker = evil
    url, _ = start_stub("--tp-size", "1")
    monkeypatch.setenv("HGXKIT_SGLANG_CLIENT_VENV", str(client_venv))
    argv = ["verify", "--endpoint", url, "--recipe", str(RECIPE), "--results-dir", str(tmp_path / "results")]
    assert main([*argv, "--tokenizer", str(folder)]) == 0, capsys.readouterr().err
    assert not marker.exists()
    (run,) = (tmp_path / "results").glob("endpoint-127.0.0.1/*")
    assert [c["completed"] > 0 for c in json.loads((run / "summary.json").read_text())["cells"]] == [True]


def test_the_copy_keeps_data_and_leaves_out_code_and_pickles(tmp_path: Path) -> None:
    source = tmp_path / "tok"
    source.mkdir()
    (source / "tokenizer.json").write_text('{"model": {"type": "BPE"}}')
    (source / "config.json").write_text(json.dumps({"model_type": "x", "auto_map": {"AutoConfig": "c.C"}}))
    (source / "special_tokens_map.json").write_text('{"bos_token": "<s>"}')
    (source / "tokenizer.model").write_bytes(b"\x0a\x03abc")
    for code in ("tokenization_x.py", "pytorch_model.bin", "training_args.pt", "state.pkl"):
        (source / code).write_bytes(b"code")
    (source / "sub").mkdir()
    copy = copy_tokenizer(str(source), tmp_path / "copy")
    assert sorted(p.name for p in copy.path.iterdir()) == [
        "config.json",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer.model",
    ]
    assert json.loads((copy.path / "config.json").read_text()) == {"model_type": "x"}
    assert (copy.path / "tokenizer.json").read_bytes() == (source / "tokenizer.json").read_bytes()
    assert set(copy.left_out) == {
        "config.json: auto_map",
        "pytorch_model.bin",
        "state.pkl",
        "tokenization_x.py",
        "training_args.pt",
    }


def test_auto_map_goes_at_any_depth() -> None:
    nested = {"a": [{"auto_map": {"AutoTokenizer": "m.T"}, "keep": 1}], "processor": {"auto_map": "p.P"}}
    assert without_code(nested) == ({"a": [{"keep": 1}], "processor": {}}, True)
    assert without_code({"vocab": {"auto": 1}}) == ({"vocab": {"auto": 1}}, False)


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("deepseek-ai/DeepSeek-V3", r"^--tokenizer deepseek-ai/DeepSeek-V3: not a directory on this machine"),
        ("EMPTY", r"^--tokenizer .*: no tokenizer\.json, tokenizer_config\.json or tokenizer\.model in it"),
    ],
)
def test_a_tokenizer_that_is_not_a_local_directory_is_one_line(tmp_path: Path, given: str, error: str) -> None:
    if given == "EMPTY":
        given = str(tmp_path / "empty")
        Path(given).mkdir()
        (Path(given) / "model.py").write_text(textwrap.dedent("import os\n"))
    with pytest.raises(InputError, match=error):
        copy_tokenizer(given, tmp_path / "copy")


def test_the_model_id_an_endpoint_reports_is_never_loaded_as_a_tokenizer(
    tmp_path: Path, client_venv: Path, evil: tuple[Path, Path], start_stub, monkeypatch, capsys
) -> None:
    # The endpoint names a directory of this machine that carries code as its model: SGLang's client, left to
    # ask /v1/models for the model, loads it with trust_remote_code before it reads --tokenizer.
    folder, marker = evil
    safe = tmp_path / "safe"
    copy_tokenizer(str(folder), safe)
    url, _ = start_stub("--tp-size", "1", "--served-model-name", str(folder))
    monkeypatch.setenv("HGXKIT_SGLANG_CLIENT_VENV", str(client_venv))
    argv = ["verify", "--endpoint", url, "--recipe", str(RECIPE), "--results-dir", str(tmp_path / "results")]
    assert main([*argv, "--tokenizer", str(safe)]) == 0, capsys.readouterr().err
    assert not marker.exists()
