"""A server that takes its API key only as a flag (SGLang) gets it in every export from the engine's own secret
store, as its `--config` file: the key is never a word of the server's command line, which every user of a node
can read in /proc."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from test_export import _compose_config, _validate_k8s
from test_export_secrets import created_and_read

from hgxkit.export.common import KEY_CONFIG_IN_CONTAINER, ExportOptions
from hgxkit.export.registry import EXPORTERS, export_recipe, write_export
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.judge import judge

POST = (
    "docker run --gpus all -p 30000:30000 -v /data/models/m:/models/m:ro lmsysorg/sglang:v0.5.23 "
    "python3 -m sglang.launch_server --model-path /models/m --host 0.0.0.0 --port 30000 --api-key {{env:SGLANG_API_KEY}}"
)


def hostile_key(marker: Path) -> str:
    """What a key may hold that a shell or YAML would read otherwise (a shell that ran it writes `marker`)."""
    return f"k'ey\"$(touch {marker})`touch {marker}`\\n: #"


# Every target, and Slurm's other runtime (enroot + pyxis) as a target of its own.
TARGETS = [*sorted(EXPORTERS), "slurm-pyxis"]


def _export(target: str, tmp_path: Path) -> Path:
    recipe = import_post([("post.txt", POST)], ImportOptions(model_repo="org/m")).recipe
    engine, _, runtime = target.partition("-")
    exported = export_recipe(judge(recipe), engine, ExportOptions(slurm_runtime=runtime or "docker"))
    write_export(exported, tmp_path)
    return tmp_path


def _words(out: Path) -> list[str]:
    """Every word the export's files hand a process (comments and the example files left out)."""
    lines = [
        line
        for path in sorted(out.iterdir())
        if not path.name.endswith(".example")
        for line in path.read_text().splitlines()
        if not line.lstrip().startswith("#")
    ]
    words = " ".join(lines).replace("'", " ").replace('"', " ").split()
    return [word for word in words if word != "-"]  # YAML's list marks


@pytest.mark.parametrize("target", TARGETS)
def test_the_key_is_the_servers_config_file_never_a_word_of_its_command_line(target: str, tmp_path: Path) -> None:
    words = _words(_export(target, tmp_path))
    assert "--api-key" not in words and "${SGLANG_API_KEY}" not in words and "$(SGLANG_API_KEY)" not in words
    at = words.index("--config")
    assert words[at + 1] == KEY_CONFIG_IN_CONTAINER


def test_compose_mounts_the_key_file_from_its_secrets(tmp_path: Path) -> None:
    out = _export("compose", tmp_path)
    (out / "api-key.yaml").write_text("api-key: x\n")
    config = _compose_config(out, "compose.yaml")
    (service,) = config["services"].values()
    assert service["secrets"] == [{"source": "api-key", "target": KEY_CONFIG_IN_CONTAINER}]
    assert config["secrets"]["api-key"]["file"].endswith("api-key.yaml")
    example = (out / "api-key.yaml.example").read_text()
    assert yaml.safe_load(example) == {"api-key": ""}  # the shape the server's --config reads, the key left out
    assert "(chmod 600)" in example and "never from its command line" in example


def test_the_kubernetes_header_creates_the_key_file_the_pod_mounts(tmp_path: Path) -> None:
    text = (_export("k8s", tmp_path) / "kubernetes.yaml").read_text()
    created, read = created_and_read(text)
    assert created == read and read[1] == {"api-key.yaml"}
    assert "\n# api-key.yaml: `api-key: KEY`, the server's --config (its key never on a command line)\n" in text


def test_kubernetes_mounts_the_key_file_from_the_secret(tmp_path: Path) -> None:
    out = _export("k8s", tmp_path)
    documents = list(yaml.safe_load_all((out / "kubernetes.yaml").read_text()))
    for document in documents:
        _validate_k8s(document)
    pod = documents[0]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["items"] == [{"key": "api-key.yaml", "path": "api-key.yaml"}]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert (mount["mountPath"], mount["readOnly"]) == (KEY_CONFIG_IN_CONTAINER, True)


@pytest.mark.parametrize("target", ["skypilot", "slurm", "slurm-pyxis"])
def test_the_script_writes_the_key_file_private_and_exact_with_builtins_only(target: str, tmp_path: Path) -> None:
    out = _export(target, tmp_path / "out")
    text = "".join(p.read_text() for p in sorted(out.iterdir()))
    (line,) = [line.strip() for line in text.splitlines() if "umask 077 && printf" in line]
    key_file = tmp_path / "key" / "api-key.yaml"
    key_file.parent.mkdir()
    line = line.replace(KEY_CONFIG_IN_CONTAINER, str(key_file)).replace('"$HGXKIT_KEY_DIR/', f'"{key_file.parent}/')
    key, marker = hostile_key(tmp_path / "ran"), tmp_path / "ran"
    done = subprocess.run(["bash", "-c", line], env={"SGLANG_API_KEY": key}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(key_file.read_text()) == {"api-key": key}
    assert key_file.stat().st_mode & 0o777 == 0o600 and not marker.exists()


def test_a_skypilot_task_asks_for_the_key_at_launch_and_writes_its_file_before_the_server_starts(
    tmp_path: Path,
) -> None:
    (task,) = (yaml.safe_load(path.read_text()) for path in _export("skypilot", tmp_path).glob("*.yaml"))
    assert task["secrets"] == {"SGLANG_API_KEY": None}
    lines = task["run"].splitlines()
    assert lines[:2] == ["set -euo pipefail", "mkdir -p /run/hgxkit"]
    assert lines[2].endswith(f"> {KEY_CONFIG_IN_CONTAINER})") and lines[3].startswith("exec ")
