"""The `hgxkit recipe` CLI: exit codes, output shapes, help with examples, and no secret in any output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.recipe.read import load_recipe
from hgxkit.recipe.render import render_recipe

ROOT = Path(__file__).resolve().parents[3]
MARLIN = str(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
FLASHINFER = str(ROOT / "recipes" / "deepseek-v4-flash-dspark-flashinfer.yaml")
SEED = ROOT / "tests" / "fixtures" / "seed-docker-run.txt"

SECRETS = {
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "HUGGING_FACE_HUB_TOKEN": "hub-token-value-1234567",
    "MY_API_KEY": "plain-api-key-value-98765",
    "WANDB_TOKEN": "wandb-token-value-55555",
    "api_key_flag": "sk-proj-ZyXwVuTsRqPoNmLkJiHgFe98765",
    "label": "hf_LabelTokenValueAbCdEfGhIjKlMnOp",
}
SECRET_CMD = (
    f"docker run -d -e HF_TOKEN={SECRETS['HF_TOKEN']} --env HUGGING_FACE_HUB_TOKEN={SECRETS['HUGGING_FACE_HUB_TOKEN']} "
    f"-e MY_API_KEY={SECRETS['MY_API_KEY']} --env=WANDB_TOKEN={SECRETS['WANDB_TOKEN']} "
    f"-l token={SECRETS['label']} -p 127.0.0.1:30000:30000 lmsysorg/sglang:latest sglang serve "
    f"--model-path org/model --host 0.0.0.0 --api-key {SECRETS['api_key_flag']}"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_render_json_shape_for_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "recipe", "render", MARLIN, "--gpus", "8", "--format", "json")
    assert code == 0
    groups = json.loads(out)
    assert [{k: g[k] for k in ("group", "name", "gpus", "port")} for g in groups] == [
        {"group": 0, "name": "deepseek-v4-flash-0", "gpus": [0, 1, 2, 3], "port": 5000},
        {"group": 1, "name": "deepseek-v4-flash-1", "gpus": [4, 5, 6, 7], "port": 5001},
    ]
    assert groups[1]["argv"][:9] == [
        "docker",
        "run",
        "-d",
        "--name",
        "deepseek-v4-flash-1",
        "--restart",
        "unless-stopped",
        "--gpus",
        '"device=4,5,6,7"',
    ]


def test_render_explicit_groups(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "recipe", "render", MARLIN, "--groups", "4,5,6,7;0,1,2,3", "--format", "json")
    assert code == 0
    assert [(g["gpus"], g["port"]) for g in json.loads(out)] == [([4, 5, 6, 7], 5000), ([0, 1, 2, 3], 5001)]


def test_render_shell_output_is_what_the_json_argv_says(capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    _, shell_out, _ = run(capsys, "recipe", "render", MARLIN, "--gpus", "8")
    _, json_out, _ = run(capsys, "recipe", "render", MARLIN, "--gpus", "8", "--format", "json")
    commands = [c for c in shell_out.split("# group ") if c]
    split = [shlex.split(c.split("\n", 1)[1].replace("\\\n", "")) for c in commands]
    assert split == [g["argv"] for g in json.loads(json_out)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["recipe", "render", MARLIN, "--gpus", "6"], "6 GPUs do not divide into groups of 4"),
        (["recipe", "render", MARLIN, "--groups", "0,1,2,3;3,4,5,6"], "groups 0 and 1 overlap on GPU 3"),
        (["recipe", "render", MARLIN, "--groups", "0,a"], "group 0 has 'a', not a GPU id"),
        (["recipe", "render", "nope.yaml"], "nope.yaml: no such recipe file"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1


def test_check_exit_status_follows_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "recipe", "check", MARLIN, "--gpus", "8")
    assert code == 0
    assert "0 error(s), 3 warning(s)" in out
    code, out, _ = run(capsys, "recipe", "check", MARLIN, "--gpus", "6", "--json")
    assert code == 1
    document = json.loads(out)
    assert (document["schema_version"], document["ok"], document["errors"], document["warnings"]) == (1, False, 1, 3)
    assert [f["code"] for f in document["findings"] if f["level"] == "error"] == ["gpu-count"]
    # the node's allowances, as flags: beyond loopback needs a key, or the allowance that says otherwise
    code, out, _ = run(capsys, "recipe", "check", MARLIN, "--gpus", "8", "--bind", "0.0.0.0")
    assert code == 1 and "error [exposure] bind_address 0.0.0.0 publishes the API" in out
    assert run(capsys, "recipe", "check", MARLIN, "--gpus", "8", "--bind", "0.0.0.0", "--api-key", "auto")[0] == 0


def test_diff_of_the_shipped_recipes_prints_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "recipe", "diff", MARLIN, FLASHINFER)
    assert code == 0
    assert out.splitlines() == ["server --moe-runner-backend: marlin -> flashinfer_mxfp4"]


def test_import_seed_writes_a_recipe_that_renders_the_post(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "r.yaml"
    code, _, err = run(capsys, "recipe", "import", str(SEED), "--name", "seed", "-o", str(out_file))
    assert code == 0
    assert "wrote" in err and "groups of 4 GPUs" in err
    assert render_recipe(load_recipe(out_file), total_gpus=8)[1].name == "deepseek-v4-flash-1"
    code, _, err = run(capsys, "recipe", "import", str(SEED), "-o", str(out_file))
    assert code == 2
    assert "already exists; pass --force" in err


def test_import_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # A post must say which server runs and which model (`img:1 serve` said neither): whole-post import.
    post = "docker run --rm lmsysorg/sglang:v0.5.23 sglang serve --model-path org/model --tp 2\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(post.encode())))
    code, out, _ = run(capsys, "recipe", "import", "-", "--name", "piped")
    assert code == 0
    assert "name: piped" in out and "- --tp 2" in out


def test_import_error_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("docker run --gpuz all img")
    code, _, err = run(capsys, "recipe", "import", str(bad))
    assert code == 2
    assert (
        err == f"hgxkit: error: {bad}: token 3 '--gpuz' (line 1, column 12): unknown docker run option; "
        "check its spelling against `docker run --help`\n"
    )


@pytest.mark.parametrize("command", ["import", "render", "check", "diff", "schema"])
def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["recipe", command, "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out and "hgxkit recipe" in out


def test_no_secret_reaches_any_file_or_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = tmp_path / "post.txt"
    source.write_text(SECRET_CMD)
    out_file = tmp_path / "out" / "recipe.yaml"
    outputs = []
    code, out, err = run(capsys, "recipe", "import", str(source), "--name", "s", "-o", str(out_file))
    assert code == 0
    outputs += [out, err]
    for argv in (
        ["recipe", "render", str(out_file)],
        ["recipe", "render", str(out_file), "--format", "json"],
        ["recipe", "check", str(out_file), "--json"],
        ["recipe", "check", str(out_file)],
        ["recipe", "diff", str(out_file), MARLIN],
    ):
        _, out, err = run(capsys, *argv)
        outputs += [out, err]
    bad = tmp_path / "bad.txt"
    bad.write_text(SECRET_CMD.replace("-e HF_TOKEN=", "-Z HF_TOKEN="))
    code, out, err = run(capsys, "recipe", "import", str(bad))
    assert code == 2
    outputs += [out, err]
    written = [p.read_text() for p in tmp_path.rglob("*") if p.is_file() and p not in (source, bad)]
    assert written, "the import wrote its recipe"
    for secret in SECRETS.values():
        for text in written + outputs:
            assert secret not in text


def test_secrets_become_references_that_resolve_only_when_asked(tmp_path: Path) -> None:
    from hgxkit.importing.docker_run import import_docker_run

    recipe = import_docker_run(SECRET_CMD)
    assert [e.name for e in recipe.docker.env() if e.value is None] == [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "MY_API_KEY",
        "WANDB_TOKEN",
    ]
    assert recipe.env_refs() == ["HF_TOKEN", "SGLANG_API_KEY"]
    (shown,) = render_recipe(recipe)
    assert "--api-key" in shown.argv and "${SGLANG_API_KEY}" in shown.argv
    (resolved,) = render_recipe(recipe, secrets="resolve", environ={"SGLANG_API_KEY": "k1", "HF_TOKEN": "t1"})
    assert resolved.argv[resolved.argv.index("--api-key") + 1] == "k1"
    assert "token=t1" in resolved.argv
