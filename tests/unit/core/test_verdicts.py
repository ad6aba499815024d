"""Remembered verdicts (hgxkit/verdicts.py): a recipe's credential scan and schema check pass once per text and
code, a failure is judged every time, and a cache folder another user could write is not believed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hgxkit import verdicts
from hgxkit.errors import InputError
from hgxkit.knobs import SEED_RECIPE
from hgxkit.recipe.read import load_recipe

ROOT = Path(__file__).resolve().parents[3]

# Loads a recipe in a fresh Python and says which judging libraries it had to import, and what it built.
_LOAD = """
import json, sys
from hgxkit.recipe.read import load_recipe
recipe = load_recipe(sys.argv[1])
print(json.dumps({"imported": sorted(m for m in ("detect_secrets", "jsonschema", "requests") if m in sys.modules),
                  "recipe": repr(recipe)}))
"""


def _load_fresh(path: Path | str, cache: Path, **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _LOAD, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, verdicts.CACHE_DIR_ENV: str(cache), **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(verdicts.CACHE_DIR_ENV, str(folder))
    monkeypatch.delenv(verdicts.SWITCH_ENV, raising=False)
    return folder


def _remembered(cache: Path) -> list[str]:
    folder = cache / "verdicts"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_second_load_of_the_same_recipe_imports_no_judge_and_builds_the_same(cache: Path) -> None:
    first = _load_fresh(SEED_RECIPE, cache)
    assert first["imported"] == ["detect_secrets", "jsonschema", "requests"]
    assert len(_remembered(cache)) == 1
    second = _load_fresh(SEED_RECIPE, cache)
    assert second["imported"] == []
    assert second["recipe"] == first["recipe"]
    off = _load_fresh(SEED_RECIPE, cache, **{verdicts.SWITCH_ENV: "off"})
    assert off["imported"] == ["detect_secrets", "jsonschema", "requests"]
    assert off["recipe"] == first["recipe"]


def test_another_text_is_judged_again_and_a_failure_is_never_remembered(cache: Path, tmp_path: Path) -> None:
    text = (ROOT / SEED_RECIPE).read_text()
    good = tmp_path / "good.yaml"
    good.write_text(text)
    load_recipe(good)
    passed = _remembered(cache)
    assert len(passed) == 1
    # The same recipe with a token written into its description: a different text, so scanned, and refused.
    leaked = tmp_path / "leaked.yaml"
    leaked.write_text(
        text.replace("  DeepSeek-V4-Flash with", "  token hf_" + "a1B2c3D4" * 5 + " DeepSeek-V4-Flash with", 1)
    )
    assert leaked.read_text() != text
    for _ in range(2):
        with pytest.raises(InputError, match="credential"):
            load_recipe(leaked)
    # A schema failure (an unknown key) is refused every time too, and neither is remembered.
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(text + "\nsurprise: 1\n")
    for _ in range(2):
        with pytest.raises(InputError, match="unknown key 'surprise'"):
            load_recipe(unknown)
    assert _remembered(cache) == passed


def test_the_key_follows_the_input_the_judging_code_and_the_libraries(tmp_path: Path) -> None:
    judge = tmp_path / "judge.py"
    judge.write_text("RULE = 1\n")
    verdicts._file_digest.cache_clear()
    base = verdicts.verdict_key("k", b"text", judges=[judge], libraries=["jsonschema"])
    assert verdicts.verdict_key("k", b"text", judges=[judge], libraries=["jsonschema"]) == base
    assert verdicts.verdict_key("k", b"text2", judges=[judge], libraries=["jsonschema"]) != base
    assert verdicts.verdict_key("other", b"text", judges=[judge], libraries=["jsonschema"]) != base
    assert verdicts.verdict_key("k", b"text", judges=[judge], libraries=["jsonschema", "PyYAML"]) != base
    judge.write_text("RULE = 2\n")
    verdicts._file_digest.cache_clear()  # a new process reads the file anew
    assert verdicts.verdict_key("k", b"text", judges=[judge], libraries=["jsonschema"]) != base


def test_a_folder_others_can_write_is_not_believed_nor_written(cache: Path) -> None:
    verdicts.remember("a" * 64)
    assert verdicts.remembered("a" * 64)
    folder = cache / "verdicts"
    assert (folder.stat().st_mode & 0o777, cache.stat().st_mode & 0o777) == (0o700, 0o700)
    folder.chmod(0o777)
    assert not verdicts.remembered("a" * 64)
    verdicts.remember("b" * 64)
    assert not (folder / ("b" * 64)).exists()
    folder.chmod(0o700)
    cache.chmod(0o775)  # the cache folder above, group-writable: someone else could swap `verdicts/`
    assert not verdicts.remembered("a" * 64)


@pytest.mark.skipif(
    os.geteuid() != 0 and os.environ.get("CI") != "true", reason="needs root to give the folder to another user"
)
def test_a_folder_another_user_owns_is_not_believed(cache: Path) -> None:
    verdicts.remember("a" * 64)
    os.chown(cache / "verdicts", 65534, 65534)
    assert not verdicts.remembered("a" * 64)


def test_switched_off_or_unwritable_the_checks_just_run(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(verdicts.SWITCH_ENV, "off")
    load_recipe(ROOT / SEED_RECIPE)
    assert not cache.exists()
    monkeypatch.delenv(verdicts.SWITCH_ENV)
    monkeypatch.setenv(verdicts.CACHE_DIR_ENV, "/proc/hgxkit-no-such-folder")
    assert load_recipe(ROOT / SEED_RECIPE).name


@pytest.mark.skipif(os.geteuid() != 0 and os.environ.get("CI") != "true", reason="needs root to own a home")
def test_root_makes_no_folder_in_a_home_another_user_owns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 65534, 65534)
    monkeypatch.delenv(verdicts.CACHE_DIR_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    verdicts.remember("a" * 64)
    assert list(home.iterdir()) == []
    assert load_recipe(ROOT / SEED_RECIPE).name
    assert list(home.iterdir()) == []


def test_a_built_output_is_believed_only_whole_and_in_a_folder_only_this_user_can_write(cache: Path) -> None:
    key = "b" * 64
    assert verdicts.remembered_output(key) is None
    verdicts.remember_output(key, b"#!/usr/bin/env python3\nprint('hi')\n")
    assert verdicts.remembered_output(key) == b"#!/usr/bin/env python3\nprint('hi')\n"
    kept = cache / "built" / key
    kept.write_bytes(kept.read_bytes()[:-3])  # cut short
    assert verdicts.remembered_output(key) is None
    verdicts.remember_output(key, b"x")
    assert verdicts.remembered_output(key) == b"x"
    (cache / "built").chmod(0o777)
    assert verdicts.remembered_output(key) is None


def test_the_downloader_is_built_once_and_then_read_as_the_same_bytes(cache: Path) -> None:
    from hgxkit.model import nodeprogram

    built = nodeprogram.build().encode("utf-8")
    assert nodeprogram._built() == built
    assert [p.name for p in (cache / "built").iterdir()] != []
    assert nodeprogram._built() == built
