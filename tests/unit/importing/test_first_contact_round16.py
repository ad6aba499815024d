"""Classes of import failure found by reading held-out posts 283-290 first (round 16): a bare launch (run on the
host, translated into a container) whose flag names a file or folder to read inside its value — a LoRA adapter as
`NAME=/path` or JSON's "path", a draft model as `--speculative-config`'s "model" — passed to the container without
a mount (post 283), or written relative to the shell's directory (`NAME=./path`: from the post's `cd`, else a
note); and an exec-form `ENTRYPOINT [...]` of a server quoted alone, outside a Dockerfile, not read as
the launch, so the refusal said no command was found instead of what the launch lacks (post 289)."""

from __future__ import annotations

import pytest
from test_first_contact_round5 import _import, _refusal

from hgxkit.recipe.spec import parse_volume

BASE = "vllm serve /srv/models/base --enable-lora "


def _mounts(text: str, **options: object) -> dict[str, tuple[str, bool]]:
    """Container path -> (host path, read-only) of each bind mount of the imported recipe."""
    recipe = _import(text, **options).recipe
    found = {}
    for entry in recipe.docker.entries:
        for use in entry.uses:
            if use.option.name == "--volume":
                mount = parse_volume(use.value or "")
                found[mount.target] = (mount.source, mount.read_only)
    return found


def test_a_lora_adapter_named_as_name_equals_path_is_mounted_read_only_with_a_note() -> None:
    post = BASE + "--lora-modules bi-lora=/srv/saves/lora/checkpoint-1500/ --port 6006\n"
    outcome = _import(post)
    assert _mounts(post)["/srv/saves/lora/checkpoint-1500"] == ("/srv/saves/lora/checkpoint-1500", True)
    assert any(
        "/srv/saves/lora/checkpoint-1500 (named in --lora-modules's value) is mounted read-only" in note
        for note in outcome.notes
    )
    assert "bi-lora=/srv/saves/lora/checkpoint-1500/" in outcome.recipe.server.words()


def test_each_of_several_adapters_and_the_json_form_is_mounted() -> None:
    post = BASE + """--lora-modules a=/srv/a '{"name": "b", "path": "/srv/b", "base_model_name": "x"}'\n"""
    mounts = _mounts(post)
    assert mounts["/srv/a"] == ("/srv/a", True) and mounts["/srv/b"] == ("/srv/b", True)


def test_a_draft_model_a_json_config_names_is_mounted_but_not_its_other_strings() -> None:
    config = '{"model": "/srv/draft", "num_speculative_tokens": 3, "method": "/not/a/path"}'
    mounts = _mounts(f"vllm serve /srv/models/base --speculative-config '{config}'\n")
    assert mounts["/srv/draft"] == ("/srv/draft", True)
    assert "/not/a/path" not in mounts


def test_an_sglang_adapter_path_is_mounted() -> None:
    post = "python -m sglang.launch_server --model-path /srv/base --lora-paths a=/srv/lora/a --port 30000\n"
    assert _mounts(post)["/srv/lora/a"] == ("/srv/lora/a", True)


def test_a_named_path_is_normalised_so_dot_dot_does_not_escape_into_another_mount_name() -> None:
    mounts = _mounts(BASE + "--lora-modules a=/srv/saves/../../etc/lora\n")
    assert mounts["/etc/lora"] == ("/etc/lora", True)
    assert not any(".." in target or ".." in source for target, (source, _) in mounts.items())


def test_a_path_inside_a_mounted_folder_gets_no_mount_of_its_own() -> None:
    post = BASE + "--lora-modules a=/srv/models/base/adapters/a\n"
    outcome = _import(post)
    assert "/srv/models/base/adapters/a" not in _mounts(post)
    assert any("/srv/models/base/adapters/a (named in --lora-modules's value) is inside" in n for n in outcome.notes)


def test_a_lone_exec_form_entrypoint_of_a_server_is_read_as_the_launch_so_its_missing_model_is_said() -> None:
    post = (
        'It works for 1 gpu:\nENTRYPOINT [ "python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "8000" ]\n'
    )
    message = _refusal(post)
    assert "names no model" in message and "post.sh:2" in message


def test_a_lone_exec_form_entrypoint_with_a_model_imports_that_launch() -> None:
    post = 'ENTRYPOINT ["vllm", "serve", "org/m", "--port", "8001"]\n'
    outcome = _import(post)
    assert outcome.recipe.server.flag("--port") == "8001"
    assert any("an exec-form ENTRYPOINT of a server, read as its launch" in note for note in outcome.notes)


def test_a_relative_adapter_after_a_name_is_written_from_the_posts_cd_and_mounted() -> None:
    post = "cd /srv/work\n" + BASE + "--lora-modules a=./saves/a\n"
    outcome = _import(post)
    assert "a=/srv/work/saves/a" in outcome.recipe.server.words()
    assert _mounts(post)["/srv/work/saves/a"] == ("/srv/work/saves/a", True)


def test_a_relative_adapter_after_a_name_without_a_cd_is_named_in_a_note() -> None:
    outcome = _import(BASE + "--lora-modules a=../saves/a\n")
    assert any(
        "--lora-modules a=../saves/a names a file relative to the directory the post runs in" in note
        for note in outcome.notes
    )


@pytest.mark.parametrize("value", ["a=/data/x:/etc:rw", "/data/t:/etc/t.jinja"])
def test_a_path_holding_a_colon_is_refused_not_mounted(value: str) -> None:
    flag = "--lora-modules" if value.startswith("a=") else "--chat-template"
    refusal = _refusal(f'vllm serve /data/models/m --enable-lora {flag} "{value}"\n')
    assert "holds a colon, which a bind mount cannot carry" in refusal and "\n" not in refusal
