"""Every export passes each secret to the container and never writes its value anywhere: Slurm's `docker run -e
NAME` on every container it starts (under enroot + pyxis, `--container-env=NAME`), compose's `environment` names (valued from `docker-compose up`'s own
environment), Kubernetes' `secretKeyRef`, SkyPilot's `secrets:` (given at launch). The values are known here (set in the environment the export runs in), so any file that
held one would be found."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from test_export import RECIPES as EXPORTED
from test_export import _allowances

from hgxkit.export.common import ExportOptions
from hgxkit.export.registry import EXPORTERS, export_recipe, write_export
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.judge import Allowances, judge
from hgxkit.recipe.read import load_recipe, parse_recipe_text

ROOT = Path(__file__).resolve().parents[3]
# Values no pattern would mark as secret: only their names say so.
VALUES = {
    "HF_TOKEN": "Zx81kPqR5tYw3mNb7VcL2dFa",
    "VLLM_API_KEY": "Hj4sT9uE6oWq1rXy8zKp5LmN",
    "LWS_TOKEN": "Qe7nVb2XcR9sLw4KpT6yMu3D",
}
KEYED = Allowances(api_key="auto", bind_address="10.1.2.3")  # beyond loopback: the server must take its key
# recipe -> (how it is made, the allowances it is judged under, the names it takes from the environment)
RECIPES = {
    # two nodes on the host network; HF_TOKEN from `-e 'HF_TOKEN={{env:HF_TOKEN}}'`, the key from api_key: auto
    "vllm-two-node": (
        lambda: load_recipe(str(ROOT / "tests" / "fixtures" / "export" / "vllm-two-node.yaml")),
        replace(KEYED, docker_options=("--network=host",)),
        ["HF_TOKEN", "VLLM_API_KEY"],
    ),
    "vllm": (lambda: _post("008"), KEYED, ["VLLM_API_KEY"]),  # one node, the model as the entrypoint's argument
    # the user's own LWS_TOKEN, named like the variables a LeaderWorkerSet's controller sets (and a Secret must not)
    "lws-token-two-node": (
        lambda: _with_secret("LWS_TOKEN"),
        replace(KEYED, docker_options=("--network=host",), env_allowlist=("HF_TOKEN", "VLLM_API_KEY", "LWS_TOKEN")),
        ["HF_TOKEN", "LWS_TOKEN", "VLLM_API_KEY"],
    ),
}


def _with_secret(name: str):
    """The two-node vLLM recipe with one more secret from the environment, `-e 'NAME={{env:NAME}}'`."""
    text = (ROOT / "tests" / "fixtures" / "export" / "vllm-two-node.yaml").read_text()
    hf = "  - -e 'HF_TOKEN={{env:HF_TOKEN}}'\n"
    assert hf in text
    return parse_recipe_text(text.replace(hf, hf + f"  - -e '{name}={{{{env:{name}}}}}'\n"))


def _post(number: str):
    path = next((ROOT / "tests" / "fixtures" / "posts").glob(f"{number}-*.txt"))
    return import_post([(path.name, path.read_text())], ImportOptions()).recipe


@pytest.fixture(autouse=True)
def secrets_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in VALUES.items():
        monkeypatch.setenv(name, value)


def export(key: str, target: str, out: Path) -> Path:
    """The export to `target` (`slurm-pyxis`: Slurm under enroot + pyxis) written into `out`."""
    make, allowances, _ = RECIPES[key]
    engine, _, runtime = target.partition("-")
    options = ExportOptions(run_id="20261201-120000-ab12", slurm_runtime=runtime or "docker")
    write_export(export_recipe(judge(make(), allowances), engine, options), out)
    return out


def secret_names(key: str) -> list[str]:
    return RECIPES[key][2]


@pytest.mark.parametrize("target", [*sorted(EXPORTERS), "slurm-pyxis"])
@pytest.mark.parametrize("key", sorted(RECIPES))
def test_no_export_writes_a_secrets_value_anywhere(key: str, target: str, tmp_path: Path) -> None:
    out = export(key, target, tmp_path)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files
    leaked = [(p.name, n) for p in files for n, v in VALUES.items() if v.encode() in p.read_bytes()]
    assert leaked == []


def docker_runs(script: str) -> list[list[str]]:
    """The words of every `docker run` in the sbatch script, up to the end of that command."""
    runs = []
    for line in script.splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["docker", "run"]:
            runs.append(words[: words.index("&")] if "&" in words else words)
    return runs


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_slurm_passes_each_secret_to_every_container_by_name_only(key: str, tmp_path: Path) -> None:
    (script,) = [p.read_text() for p in export(key, "slurm", tmp_path).glob("*.sbatch")]
    runs = docker_runs(script)
    assert len(runs) == (2 if key.endswith("two-node") else 1)  # the head and the worker of a two-node group
    names = secret_names(key)
    for words in runs:
        passed = [words[i + 1] for i, w in enumerate(words) if w == "-e"]
        assert [n for n in names if n not in passed] == []  # each secret: `-e NAME`, from the task's environment
        assert [p for p in passed if p.partition("=")[0] in VALUES and "=" in p] == []  # never `-e NAME=value`
    assert 'done < "$HGXKIT_SECRETS_FILE"' in script  # the task's environment is filled from the secrets file


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_slurm_under_pyxis_names_each_secret_for_the_container(key: str, tmp_path: Path) -> None:
    (script,) = [p.read_text() for p in export(key, "slurm-pyxis", tmp_path).glob("*.sbatch")]
    (step,) = [line for line in script.splitlines() if line.startswith("srun --nodes=")]
    (names,) = [w.removeprefix("--container-env=") for w in step.split() if w.startswith("--container-env=")]
    assert names.split(",") == secret_names(key)  # names only: the values come from srun's environment
    assert 'done < "$HGXKIT_SECRETS_FILE"' in script


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_compose_passes_each_secret_from_the_environment_of_compose_up(key: str, tmp_path: Path) -> None:
    out = export(key, "compose", tmp_path)
    names = secret_names(key)
    for path in sorted(out.glob("compose*.yaml")):
        for service in yaml.safe_load(path.read_text())["services"].values():
            environment = service.get("environment") or {}
            assert {n: environment.get(n, "missing") for n in names} == dict.fromkeys(names)  # names, no values


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_kubernetes_passes_each_secret_as_a_secret_key_ref(key: str, tmp_path: Path) -> None:
    text = (export(key, "k8s", tmp_path) / "kubernetes.yaml").read_text()
    documents = list(yaml.safe_load_all(text))
    # the Secret the header tells the user to create is the one every reference reads
    created = re.search(r"^# secrets: kubectl create secret generic (\S+) ", text, re.M)
    pods = []
    for document in documents:
        spec = document["spec"]
        if document["kind"] == "Deployment":
            pods.append(spec["template"]["spec"])
        elif document["kind"] == "LeaderWorkerSet":
            template = spec["leaderWorkerTemplate"]
            pods += [template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]]
    assert pods
    for pod in pods:
        for container in pod["containers"]:
            env = {e["name"]: e for e in container.get("env", [])}
            for name in secret_names(key):
                assert "value" not in env[name]
                assert env[name]["valueFrom"]["secretKeyRef"]["key"] == name
                assert created is not None and env[name]["valueFrom"]["secretKeyRef"]["name"] == created.group(1)


def created_and_read(text: str) -> tuple[tuple[str, set[str]], tuple[str, set[str]]]:
    """(the Secret the manifest's `# secrets:` command creates, its keys) and (the Secret its pods read, the keys
    they read: environment references and mounted items)."""
    line = next(line for line in text.splitlines() if line.startswith("# secrets: "))
    words = shlex.split(line.removeprefix("# secrets: "))
    assert words[:4] == ["kubectl", "create", "secret", "generic"]
    created = {
        w.split("=", 1)[1].partition("=")[0] for w in words[5:] if w.startswith(("--from-literal=", "--from-file="))
    }
    read: set[tuple[str, str]] = set()
    for document in yaml.safe_load_all(text):
        for pod in _pod_specs(document):
            for container in pod["containers"]:
                for env in container.get("env", []):
                    ref = env.get("valueFrom", {}).get("secretKeyRef")
                    read |= {(ref["name"], ref["key"])} if ref else set()
            for volume in pod.get("volumes", []):
                source = volume.get("secret")
                read |= {(source["secretName"], item["key"]) for item in source.get("items", [])} if source else set()
    names = {name for name, _ in read}
    assert len(names) == 1, names
    return (words[4], created), (names.pop(), {key for _, key in read})


def _pod_specs(document: dict) -> list[dict]:
    spec = document["spec"]
    if document["kind"] == "Deployment":
        return [spec["template"]["spec"]]
    if document["kind"] == "LeaderWorkerSet":
        template = spec["leaderWorkerTemplate"]
        return [template["leaderTemplate"]["spec"], template["workerTemplate"]["spec"]]
    return []


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_the_secret_the_kubernetes_header_creates_holds_every_key_the_pods_read(key: str, tmp_path: Path) -> None:
    text = (export(key, "k8s", tmp_path) / "kubernetes.yaml").read_text()
    assert "# secrets: kubectl create secret generic " in text
    created, read = created_and_read(text)
    assert created == read and read[1] == set(secret_names(key))


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_skypilot_asks_for_each_secret_at_launch(key: str, tmp_path: Path) -> None:
    for path in sorted(export(key, "skypilot", tmp_path).glob("skypilot-*.yaml")):
        task = yaml.safe_load(path.read_text())
        assert {n: task["secrets"][n] for n in secret_names(key)} == dict.fromkeys(secret_names(key))  # null
        assert [n for n in secret_names(key) if n in (task.get("envs") or {})] == []


def test_each_slurm_task_fills_the_secrets_from_the_file_literally_and_docker_gets_them_by_name(
    tmp_path: Path,
) -> None:
    """Run the sbatch script with stand-ins for srun (both nodes in turn), scontrol, curl and docker: each node's
    `docker run` finds every secret in its environment as the secrets file wrote it, and on no command line."""
    (script,) = export("vllm-two-node", "slurm", tmp_path / "out").glob("*.sbatch")
    # Values unlike the ones the export saw, with what a shell would expand, split or unquote; the last line has
    # no newline, and comments and blank lines are skipped.
    token, key = "Zq 7$HOME `id` 'x\" \\n*", "Wv3=Lm;Np"
    secrets = tmp_path / "site.env"
    secrets.write_text(f"# the site's secrets\n\nHF_TOKEN={token}\n#VLLM_API_KEY=commented\nVLLM_API_KEY={key}")
    bin_dir, log = tmp_path / "bin", tmp_path / "docker.log"
    bin_dir.mkdir()
    stand_ins = {
        # a run's call and the environment it found in one write: the nodes' calls interleave with the batch step's
        "docker": f'#!/bin/bash\n[ "$1" = run ] || {{ printf "%s\\n" "docker $*" >> {log}; exit 0; }}\n'
        f'printf "%s\\nenv %s|%s\\n" "docker $*" "$HF_TOKEN" "$VLLM_API_KEY" >> {log}\n',
        "scontrol": "#!/bin/sh\necho node1; echo node2\n",
        "srun": f'#!/bin/bash\nprintf "%s\\n" "srun $*" >> {log}\nfor a; do last="$a"; done\n'
        'for node in 0 1; do SLURM_NODEID=$node bash -c "$last"; done\n',
        "curl": "#!/bin/sh\nexit 0\n",
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_JOB_NUM_NODES": "2",
        "HGXKIT_SECRETS_FILE": str(secrets),
    }
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    calls = log.read_text().splitlines()
    runs = [i for i, call in enumerate(calls) if call.startswith("docker run ")]
    assert len(runs) == 2 and all(calls[i + 1] == f"env {token}|{key}" for i in runs), calls
    commands = [call for call in calls if not call.startswith("env ")]
    assert [c for c in commands if token in c or key in c or "Zq" in c] == []
    assert all(" -e HF_TOKEN -e VLLM_API_KEY " in calls[i] for i in runs)
    assert all(" --master-addr node1 " in calls[i] for i in runs)  # the head the batch step found, exported


def test_every_nodes_compose_file_asks_for_every_secret_the_recipe_reads() -> None:
    """A Ray worker's node runs `ray start`, not the server, yet its compose file asks for the server's secrets as
    the head's does: one environment serves every node, as one sbatch or one SkyPilot task asks for them once."""
    text = dump_recipe(EXPORTED["vllm-ray-two-node"]())
    recipe = parse_recipe_text(text.replace("\n  args:\n", "\n  args:\n  - --hf-token '{{env:HF_TOKEN}}'\n", 1))
    exported = export_recipe(judge(recipe, _allowances("vllm-ray-two-node")), "compose", ExportOptions())
    asked = "# secrets from the environment of docker-compose up: export VLLM_API_KEY HF_TOKEN"
    files = {name: asked in text.splitlines() for name, text in exported.files.items()}
    assert files == {"compose.yaml": True, "compose.rank-1.yaml": True}
