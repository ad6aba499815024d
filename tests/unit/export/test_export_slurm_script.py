"""The Slurm export's sbatch script, where a line is a promise: what it says it does not carry; the job's name
and GPUs; every container it starts has the name its trap stops and its smoke cell runs in, and the labels hgxkit
finds it by; every node reaches the head; the smoke cell is the recipe's; the API key's file is written private on
each node and mounted where `--config` reads it; the batch step waits for the servers, and gives up if they stop."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from test_export import RECIPES, RUN, _allowances
from test_export_key import POST as KEY_POST

from hgxkit.export.common import KEY_CONFIG_IN_CONTAINER, ExportOptions
from hgxkit.export.registry import export_recipe
from hgxkit.export.slurm import OUTPUT_DIR
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.recipe.judge import Allowances, judge
from hgxkit.recipe.read import parse_recipe_text
from hgxkit.serving.containers import GROUP_LABEL, MANAGED_LABEL, RANK_LABEL, RECIPE_LABEL

ROOT = Path(__file__).resolve().parents[3]


def _script(key: str) -> tuple[str, str]:
    """(the recipe's name, its sbatch script)."""
    recipe = RECIPES[key]()
    (script,) = export_recipe(judge(recipe, _allowances(key)), "slurm", ExportOptions(run_id=RUN)).files.values()
    return recipe.name, script


def _docker_runs(script: str) -> list[list[str]]:
    """The words of each `docker run` the nodes start, without the trailing `&`."""
    runs = [shlex.split(line) for line in script.splitlines() if line.lstrip().startswith("docker run ")]
    return [words[: words.index("&")] for words in runs]


def _values(words: list[str], flag: str) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words) if word == flag]


def test_a_restart_policy_is_said_not_carried_because_slurm_requeues_the_job() -> None:
    exported = export_recipe(judge(RECIPES["marlin"](), Allowances()), "slurm", ExportOptions())
    assert exported.not_carried == ["--restart: Slurm requeues a job, not a container (sbatch --requeue)"]
    exported = export_recipe(judge(RECIPES["vllm"](), Allowances()), "slurm", ExportOptions())
    assert exported.not_carried == []


# recipe -> each docker run's (name, group, rank label); sglang-two-node's recipe names its container
# sglang_multinode1, which the export replaces with its own name.
STARTED = {
    "marlin": [("deepseek-v4-flash-0", "0", None), ("deepseek-v4-flash-1", "1", None)],
    "sglang-two-node": [("sglang-multinode1-0", "0", "0"), ("sglang-multinode1-0", "0", "${SLURM_NODEID}")],
}


@pytest.mark.parametrize("key", sorted(STARTED))
def test_every_container_started_has_the_name_its_trap_stops_and_its_smoke_cell_runs_in_and_hgxkits_labels(
    key: str,
) -> None:
    recipe, script = _script(key)
    runs = _docker_runs(script)
    stopped = re.findall(r"^  names\+=\((\S+)\)$", script, re.M)
    smoked = re.findall(r"^ *docker exec -e HF_HUB_OFFLINE=1 (\S+) ", script, re.M)  # one per client module
    started = []
    for words in runs:
        (name,) = _values(words, "--name")
        labels = dict(label.split("=", 1) for label in _values(words, "--label"))
        assert (labels[MANAGED_LABEL], labels[RECIPE_LABEL]) == ("1", recipe)
        started.append((name, labels[GROUP_LABEL], labels.get(RANK_LABEL)))
    assert started == STARTED[key]
    assert sorted(stopped) == sorted(set(smoked)) == sorted({name for name, _, _ in started})


@pytest.mark.parametrize(
    ("key", "flag", "head"),
    [
        ("sglang-two-node", "--dist-init-addr", "${HGXKIT_HEAD}:20000"),
        ("vllm-two-node", "--master-addr", "${HGXKIT_HEAD}"),
    ],
)
def test_the_head_and_every_worker_reach_the_head_at_the_jobs_first_node(key: str, flag: str, head: str) -> None:
    _, script = _script(key)
    assert [_values(words, flag) for words in _docker_runs(script)] == [[head], [head]]


def test_the_smoke_cell_run_is_the_recipes_smoke_cell_not_its_first_matrix_cell() -> None:
    _, script = _script("marlin")  # its smoke: 3 prompts at concurrency 1; its first warmup run: 2 prompts
    smoke = [line for line in script.splitlines() if "docker exec -e HF_HUB_OFFLINE=1" in line]
    assert len(smoke) == 4  # two groups, each with the kind's two client modules
    assert all(" --num-prompts 3 --max-concurrency 1 " in line for line in smoke)
    assert sorted({line.split("--output-file ")[1].split()[0] for line in smoke}) == [
        f"{OUTPUT_DIR}/g0_smoke.jsonl",
        f"{OUTPUT_DIR}/g1_smoke.jsonl",
    ]


def test_each_groups_wait_says_the_recipes_smoke_cell_follows_with_the_kinds_client() -> None:
    """A plain script's groups each run their own smoke cell (a split's sides say theirs goes through the router:
    test_export_pd.py), and the client it names is the kind's."""
    _, script = _script("marlin")
    assert [line for line in script.splitlines() if line.startswith("# group ")] == [
        f"# group {g}: wait until deepseek-v4-flash-{g} can generate, then the recipe's smoke cell with "
        "sglang.benchmark.serving"
        for g in (0, 1)
    ]


def test_a_plain_smoke_cell_goes_to_its_groups_port_and_lets_the_server_name_its_tokenizer() -> None:
    """Only a split's cell, sent to the router (which does not say the tokenizer's path), names the tokenizer
    (test_export_pd.py); SGLang's client asks the group it measures."""
    _, script = _script("marlin")
    smoke = [line for line in script.splitlines() if "docker exec -e HF_HUB_OFFLINE=1" in line]
    assert len(smoke) == 4 and all(" --host 127.0.0.1 --port 30000 " in line for line in smoke)
    assert not any("--tokenizer" in line for line in smoke)


def test_every_rank_publishes_its_ports_at_the_bind_address_never_on_every_interface() -> None:
    """The worker's `docker run` gets the judged bind address as the head's does (a `-p` without one would
    publish on every interface)."""
    text = (ROOT / "tests/fixtures/export/vllm-two-node.yaml").read_text()
    recipe = parse_recipe_text(text.replace("  - --network host\n", "  - --network host\n  - -p 8000:8000\n"))
    allowances = Allowances(docker_options=("--network=host",), api_key="auto", bind_address="10.0.0.5")
    (script,) = export_recipe(judge(recipe, allowances), "slurm", ExportOptions()).files.values()
    published = [_values(words, "-p") + _values(words, "--publish") for words in _docker_runs(script)]
    assert published == [["10.0.0.5:8000:8000"], ["10.0.0.5:8000:8000"]]


# Records each call in $LOG; for `docker run`, in $LOG.key, the key file it mounts where --config reads it: its text
# and modes (apart: the batch step's own calls run meanwhile).
DOCKER = f"""#!/bin/bash
printf '%s\\n' "docker $*" >> "$LOG"
[ "$1" = run ] || exit 0
for a; do case "$a" in *":{KEY_CONFIG_IN_CONTAINER}:ro") src="${{a%%:*}}" ;; esac; done
cat "$src" >> "$LOG.key"
stat -c %a "$(dirname "$src")" "$src" >> "$LOG.key"
"""


def test_each_node_writes_the_key_file_in_a_private_directory_and_mounts_it_where_config_reads_it(
    tmp_path: Path,
) -> None:
    recipe = import_post([("post.txt", KEY_POST)], ImportOptions(model_repo="org/m")).recipe
    (script,) = export_recipe(judge(recipe), "slurm", ExportOptions()).files.values()
    (tmp_path / "job.sbatch").write_text(script)
    (tmp_path / "secrets.env").write_text("SGLANG_API_KEY=k'ey $x\n")
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    (tmp_path / "tmp").mkdir()
    stand_ins = {
        "docker": DOCKER,
        "scontrol": "#!/bin/sh\necho node1\n",
        "srun": '#!/bin/bash\nfor a; do last="$a"; done\nSLURM_NODEID=0 bash -c "$last"\n',
        "curl": "#!/bin/sh\nexit 0\n",
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "LOG": str(log),
        "TMPDIR": str(tmp_path / "tmp"),
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_SUBMIT_DIR": str(tmp_path),
    }
    done = subprocess.run(["bash", str(tmp_path / "job.sbatch")], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    calls = log.read_text().splitlines()
    (run,) = [call for call in calls if call.startswith("docker run ")]
    assert run.endswith(f" --config {KEY_CONFIG_IN_CONTAINER}")
    assert (tmp_path / "calls.log.key").read_text().splitlines() == ["api-key: 'k''ey $x'", "700", "600"]
    assert "docker stop m-0" in calls and "docker rm m-0" in calls  # the task's trap, when it ends


def test_the_job_and_its_file_are_named_with_what_sbatch_and_a_path_take_and_ask_for_the_gpus_the_recipe_pins() -> None:
    post = KEY_POST.replace("--gpus all", "--gpus '\"device=2,3\"'").replace(
        " --api-key {{env:SGLANG_API_KEY}}", " --tp 2"
    )
    recipe = replace(
        import_post([("post.txt", post)], ImportOptions(model_repo="org/m")).recipe, name="Qwen3 235B/FP8:v2"
    )
    exported = export_recipe(judge(recipe), "slurm", ExportOptions())
    ((name, script),) = exported.files.items()
    assert name == "Qwen3-235B-FP8-v2.sbatch"
    assert [line for line in script.splitlines() if line.startswith(("#SBATCH --job-name", "#SBATCH --gpus"))] == [
        "#SBATCH --job-name=Qwen3-235B-FP8-v2",
        "#SBATCH --gpus-per-node=2",  # the two GPUs the recipe pins, not the node's eight
    ]


def _stand_ins(bin_dir: Path, tools: dict[str, str]) -> None:
    bin_dir.mkdir()
    for name, body in tools.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)


@pytest.mark.parametrize("servers", ["come up on the third try", "stop first"])
def test_the_batch_step_waits_for_the_servers_and_gives_up_when_they_stop_first(servers: str, tmp_path: Path) -> None:
    """The batch step's wait with stand-ins: curl fails until its third call; srun (the servers) runs until then,
    or ends at once; sleep only records that it was asked."""
    _, script = _script("vllm")
    (tmp_path / "job.sbatch").write_text(script)
    gate, log = tmp_path / "gate", tmp_path / "calls.log"
    os.mkfifo(gate)
    up = servers == "come up on the third try"
    _stand_ins(
        tmp_path / "bin",
        {
            "docker": '#!/bin/sh\necho "docker $1" >> "$LOG"\n',
            "scontrol": "#!/bin/sh\necho node1\n",
            # the servers run until the gate opens (the third curl), or stop at once
            "srun": f'#!/bin/sh\necho srun >> "$LOG"\n{"cat " + str(gate) + " >/dev/null" if up else "exit 3"}\n',
            # healthy on the third try, or never when the servers stop: the step must see them gone, however late
            # the scheduler lets the stopped srun exit
            "curl": '#!/bin/sh\necho curl >> "$LOG"\n'
            + (f'[ "$(grep -c curl "$LOG")" -ge 3 ] || exit 22\necho open > {gate}\n' if up else "exit 22\n"),
            "sleep": '#!/bin/sh\necho "sleep $*" >> "$LOG"\n',
        },
    )
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "LOG": str(log), "SLURM_JOB_NODELIST": "node1"}
    env |= {"SLURM_JOB_NUM_NODES": "1", "SLURM_SUBMIT_DIR": str(tmp_path)}
    done = subprocess.run(["bash", str(tmp_path / "job.sbatch")], env=env, capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines()
    assert calls.count("srun") == 1
    calls.remove("srun")  # started in the background: when it logs among the others is the scheduler's
    if up:
        assert (done.returncode, done.stderr) == (0, "")
        assert calls == ["curl", "sleep 10", "curl", "sleep 10", "curl", "docker exec", "docker exec"], calls
    else:
        assert (done.returncode, done.stderr) == (1, "the servers stopped before they were healthy\n")
        assert "docker exec" not in calls
