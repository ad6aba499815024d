"""The Slurm export under enroot + pyxis (`--slurm-runtime pyxis`, hgxkit/export/slurm_pyxis.py).

No pyxis runs here: Slurm with the pyxis plugin and enroot is not something a test machine or a simulated node has.
The generated script is checked three ways instead: `bash -n` and shellcheck on the script and on the scripts its
here-documents hold (what each node runs in its container, the smoke cell); and a run of the whole script under
bash with a stand-in `srun` on PATH that checks the options pyxis would get (`--container-image` the recipe's
image in enroot's form, `--container-mounts` of host paths with the model read-only, `--container-env` of names
only, each set in srun's environment, and no secret's value in any word), then plays each node: it runs the node
script as rank 0 and as every other rank, and the smoke cell, with stand-ins for the servers and the client that
record what they were started with.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_export import RECIPES, ROOT, RUN, _export, _tool

from hgxkit.cli.export import SLURM_RUNTIMES
from hgxkit.errors import InputError
from hgxkit.export.common import ExportOptions
from hgxkit.export.registry import export_recipe
from hgxkit.export.slurm import RUNTIMES
from hgxkit.export.slurm_pyxis import pyxis_image
from hgxkit.recipe.judge import Allowances, judge
from hgxkit.recipe.read import parse_recipe_text

SECRET = "s3cr3t-value-never-on-a-command-line"

# srun as pyxis would see it: checks the container options, records the call, then runs the command as each
# node's task (the step over the job's nodes) or once on the head (`--overlap`: the smoke cell).
SRUN = r"""#!/usr/bin/python3
import os, re, subprocess, sys
args = sys.argv[1:]
split = next(i for i, a in enumerate(args) if not a.startswith("-"))
options, command = args[:split], args[split:]
def fail(why):
    sys.exit(f"srun stand-in: {why}: {args}")
values = dict(o[2:].split("=", 1) if "=" in o else (o[2:], "") for o in options)
if values.get("container-image") != os.environ["EXPECT_IMAGE"]:
    fail(f"--container-image {values.get('container-image')} is not {os.environ['EXPECT_IMAGE']}")
for mount in filter(None, values.get("container-mounts", "").split(",")):
    source, target, *flags = mount.split(":")
    if not source.startswith("/") or not target.startswith("/") or flags not in ([], ["ro"]):
        fail(f"mount {mount} is not HOST_PATH:PATH[:ro]")
    if source == os.environ["MODEL_DIR"] and flags != ["ro"]:
        fail(f"the model {mount} is not read-only")
names = values.get("container-env", "")
if names and not re.fullmatch(r"[A-Za-z_]\w*(,[A-Za-z_]\w*)*", names):
    fail(f"--container-env={names} is not names only")
for name in filter(None, names.split(",")):
    if name not in os.environ:
        fail(f"--container-env names {name}, which srun's environment does not have")
if any(os.environ["SECRET"] in a for a in args):
    fail("a secret's value is on the command line")
if "no-container-mount-home" not in values:
    fail("the user's home would be mounted")
with open(os.environ["LOG"], "a") as log:
    print("srun", *options, "--", command[0], file=log)  # one line: the script itself is what runs next
ranks = [0] if "overlap" in values else range(int(os.environ["SLURM_JOB_NUM_NODES"]))
for rank in ranks:
    done = subprocess.run(command, env={**os.environ, "SLURM_NODEID": str(rank)})
    if done.returncode:
        sys.exit(done.returncode)
"""

# A server or client program: records its words, its GPUs and whether the secret reached it, and exits.
PROGRAM = """#!/bin/bash
printf '%s rank=%s gpus=%s secret=%s\\n' "$(basename "$0") $*" "${SLURM_NODEID:-}" "${CUDA_VISIBLE_DEVICES:-}" \
  "$([ "${HF_TOKEN:-}" = "$SECRET" ] && echo yes || echo no)" >> "$LOG"
"""
# python3 in the container: `-c "import M"` finds the client modules in $HAS; `-m …` runs the client.
PYTHON = """#!/bin/bash
if [ "$1" = -c ]; then for m in $HAS; do [ "$2" = "import $m" ] && exit 0; done; exit 1; fi
printf 'python3 %s offline=%s\\n' "$*" "${HF_HUB_OFFLINE:-}" >> "$LOG"
"""


def _pyxis(key: str, tmp_path: Path) -> Path:
    (script,) = _export(key, "slurm", tmp_path, slurm_runtime="pyxis").glob("*.sbatch")
    return script


def _heredocs(text: str) -> dict[str, str]:
    """Each here-document's delimiter -> its text (the last of each)."""
    return dict(re.findall(r"<<'(\w+)'\n(.*?)\n\1\n", text, flags=re.S))


@pytest.mark.parametrize("key", sorted(RECIPES))
def test_a_pyxis_script_and_what_it_runs_in_each_container_pass_bash_n_and_shellcheck(key: str, tmp_path: Path) -> None:
    script = _pyxis(key, tmp_path)
    parts = {"job": script, **{name: tmp_path / f"{name}.sh" for name in _heredocs(script.read_text())}}
    for name, body in _heredocs(script.read_text()).items():
        parts[name].write_text("#!/bin/bash\n" + body + "\n")
    assert set(parts) == {"job", "HGXKIT_NODE", "HGXKIT_SMOKE"}
    for path in parts.values():
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, path.name
        checked = subprocess.run([_tool("shellcheck"), "-S", "warning", str(path)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout


def _run(key: str, tmp_path: Path, has: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    script = _pyxis(key, tmp_path / "out")
    recipe = RECIPES[key]()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "srun").write_text(SRUN)
    (bin_dir / "scontrol").write_text("#!/bin/sh\necho node1; echo node2\n")
    (bin_dir / "curl").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "python3").write_text(PYTHON)
    for program in ("sglang", "vllm", "ray"):
        (bin_dir / program).write_text(PROGRAM)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    # every value the recipe takes from the environment, from the job's secrets file
    names = ["HF_TOKEN", *(n for n in ("VLLM_API_KEY",) if recipe.server.server_kind.api_key_env == n)]
    (tmp_path / "secrets.env").write_text("# the job's secrets\n" + "".join(f"{n}={SECRET}\n" for n in names))
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_JOB_NUM_NODES": str(recipe.node_count()),
        "SLURM_JOB_ID": "42",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "LOG": str(log),
        "SECRET": SECRET,
        "HAS": has,
        "EXPECT_IMAGE": pyxis_image(recipe.image.pinned()),
        "MODEL_DIR": recipe.model.local_dir or "",
    }
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)
    return done, log.read_text().splitlines() if log.exists() else []


def test_under_pyxis_each_group_serves_on_its_gpus_and_port_and_the_secret_is_on_no_command_line(
    tmp_path: Path,
) -> None:
    done, calls = _run("marlin", tmp_path, has="sglang.bench_serving")
    assert done.returncode == 0, done.stderr
    steps = sorted((c for c in calls if c.startswith("srun ")), key=lambda c: "--overlap" in c)  # concurrent
    assert len(steps) == 3 and "--overlap" not in steps[0] and all("--overlap" in s for s in steps[1:])
    assert "--container-mounts=/data/models/deepseek-v4-flash-dspark:/model:ro " in steps[0]
    servers = sorted(c for c in calls if c.startswith("sglang serve"))
    assert [re.search(r"--host (\S+) --port (\d+)", s).groups() for s in servers] == [  # type: ignore[union-attr]
        ("127.0.0.1", "5000"),
        ("127.0.0.1", "5001"),
    ]
    assert [s.rsplit(" gpus=", 1)[1].split()[0] for s in servers] == ["0,1,2,3", "4,5,6,7"]
    # the client verify would fall back to, offline, against each group's own port, its output in the submit dir
    clients = [c for c in calls if c.startswith("python3 -m")]
    assert [re.search(r"-m (\S+) .*--port (\d+)", c).groups() for c in clients] == [  # type: ignore[union-attr]
        ("sglang.bench_serving", "5000"),
        ("sglang.bench_serving", "5001"),
    ]
    assert all(c.endswith("offline=1") for c in clients)
    assert (tmp_path / "hgxkit-verify-42").is_dir()


def test_under_pyxis_a_group_over_two_nodes_starts_the_head_and_a_headless_worker(tmp_path: Path) -> None:
    done, calls = _run("vllm-dp-two-node", tmp_path, has="")
    assert done.returncode == 0, done.stderr
    (step, smoke) = sorted((c for c in calls if c.startswith("srun ")), key=lambda c: "--overlap" in c)
    assert "--container-env=VLLM_API_KEY" in step and "--gpus-per-node=8" in step and "--overlap" in smoke
    servers = [c for c in calls if c.startswith("vllm serve")]
    assert len(servers) == 2 and "--headless" not in servers[0] and " rank=0 " in servers[0]
    assert "--headless --data-parallel-start-rank 8 rank=1 " in servers[1]
    assert all("--data-parallel-address node1 " in s for s in servers)  # the job's first node
    assert "no benchmark client of vLLM in vllm/vllm-openai:latest: the smoke cell was not run" in done.stderr


def test_under_pyxis_the_secrets_reach_every_rank_through_the_environment(tmp_path: Path) -> None:
    done, calls = _run("vllm-two-node", tmp_path, has="vllm.entrypoints.cli.main")
    assert done.returncode == 0, done.stderr
    servers = [c for c in calls if c.startswith("vllm serve")]
    assert [s.endswith("secret=yes") for s in servers] == [True, True]  # HF_TOKEN, from the secrets file
    assert "--container-env=HF_TOKEN,VLLM_API_KEY" in next(c for c in calls if c.startswith("srun --nodes"))
    assert any(c.startswith("python3 -m vllm.entrypoints.cli.main bench serve") for c in calls)


def test_the_srun_stand_in_refuses_what_pyxis_must_not_get(tmp_path: Path) -> None:
    """The stand-in's checks bite: a secret's value on the command line, a writable model, a value in
    --container-env."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(SRUN)
    (bin_dir / "srun").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "EXPECT_IMAGE": "img:1",
        "MODEL_DIR": "/m",
        "SECRET": SECRET,
        "LOG": str(tmp_path / "log"),
        "SLURM_JOB_NUM_NODES": "1",
        "HF_TOKEN": "x",
    }
    good = ["--container-image=img:1", "--container-mounts=/m:/model:ro", "--no-container-mount-home"]
    cases = {
        "a secret's value is on the command line": [*good, "--container-env=HF_TOKEN", "echo", SECRET],
        "the model /m:/model is not read-only": [
            "--container-image=img:1",
            "--container-mounts=/m:/model",
            "--no-container-mount-home",
            "true",
        ],
        "is not names only": [*good, f"--container-env=HF_TOKEN={SECRET[:3]}", "true"],
        "which srun's environment does not have": [*good, "--container-env=NOT_SET", "true"],
    }
    srun = shutil.which("srun", path=str(bin_dir))
    assert srun is not None
    for why, args in cases.items():
        done = subprocess.run([srun, *args], env=env, capture_output=True, text=True)
        assert done.returncode != 0 and why in done.stderr, (why, done.stderr)
    assert subprocess.run([srun, *good, "--container-env=HF_TOKEN", "true"], env=env).returncode == 0


def test_the_runtime_is_chosen_by_name_and_docker_stays_the_default(tmp_path: Path) -> None:
    assert tuple(RUNTIMES) == SLURM_RUNTIMES  # the CLI's choices, kept without loading the exporters
    (docker,) = _export("marlin", "slurm", tmp_path / "docker").glob("*.sbatch")
    assert "docker run" in docker.read_text() and "--container-image" not in docker.read_text()
    judged = judge(RECIPES["marlin"](), Allowances())
    with pytest.raises(InputError, match="--slurm-runtime podman: one of docker, pyxis"):
        export_recipe(judged, "slurm", ExportOptions(slurm_runtime="podman"))


def test_a_registrys_host_is_written_as_enroot_names_it() -> None:
    assert pyxis_image("nvcr.io/nvidia/pytorch:24.01-py3") == "nvcr.io#nvidia/pytorch:24.01-py3"
    assert pyxis_image("localhost:5000/m@sha256:" + "1" * 64) == "localhost:5000#m@sha256:" + "1" * 64
    assert pyxis_image("vllm/vllm-openai@sha256:" + "1" * 64) == "vllm/vllm-openai@sha256:" + "1" * 64
    assert pyxis_image("ubuntu") == "ubuntu"


def test_a_mount_with_a_comma_is_refused_because_pyxis_would_read_two(tmp_path: Path) -> None:
    """`-v '/data/a,/etc:/etc:/model'` is one mount to Docker and the judgement; to pyxis, two: /etc would be in."""
    text = (ROOT / "tests/fixtures/export/vllm-two-node.yaml").read_text()
    recipe = parse_recipe_text(
        text.replace("  - --ipc host\n", "  - --ipc host\n  - -v '/data/models/Qwen3-235B-A22B/a,/etc:/cache:ro'\n")
    )
    judged = judge(recipe, Allowances(docker_options=("--network=host", "nested-mount"), api_key="auto"))
    with pytest.raises(
        InputError,
        match=r"the mount '/data/models/Qwen3-235B-A22B/a,/etc:/cache:ro' has a comma, which pyxis reads as two",
    ):
        export_recipe(judged, "slurm", ExportOptions(run_id=RUN, slurm_runtime="pyxis"))
