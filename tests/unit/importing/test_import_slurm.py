"""Slurm batch scripts imported (hgxkit.importing.slurm): the rank and the head read from Slurm's variables,
`srun` unwrapped, and each hostile or awkward case (a rank from an unknown variable, a head from an unreadable
expression, heterogeneous jobs, pyxis, tasks per node that make $SLURM_PROCID no node rank) refused by name.

The real published scripts are in tests/fixtures/posts/formats (b01…, index.yaml; test_post_formats.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome

FORMATS = Path(__file__).resolve().parents[2] / "fixtures" / "posts" / "formats"
HEADER = """#!/bin/bash
#SBATCH --job-name=serve
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
#SBATCH --time=01:00:00
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
"""
LAUNCH = "python3 -m sglang.launch_server --model-path org/m --tp 16 --nnodes 2 --dist-init-addr {head} --node-rank "
TEMPLATE = (
    "python3 -m sglang.launch_server --model-path /models/m --tp 16 --nnodes 2 --dist-init-addr "
    "{{head}}:{{dist_port}} --node-rank {{rank}} --served-model-name org/m"
)


def script(srun: str, rank: str = '"$SLURM_NODEID"', head: str = '"$HEAD:5000"', header: str = HEADER) -> str:
    return header + srun + LAUNCH.format(head=head) + rank + "\n"


def imported(text: str, **options: object) -> ImportOutcome:
    return import_post([("job.sbatch", text)], ImportOptions(**options))  # type: ignore[arg-type]


def refusal(text: str, **options: object) -> str:
    with pytest.raises(InputError) as caught:
        imported(text, **options)
    return caught.value.message


def shape(outcome: ImportOutcome) -> tuple[str, int, int, int]:
    groups = outcome.recipe.groups
    assert groups is not None
    return " ".join(outcome.recipe.server.words()), groups.size, groups.nodes, groups.dist_port


# --- what is read ---


@pytest.mark.parametrize("rank", ['"$SLURM_NODEID"', "${SLURM_NODEID}", "$SLURM_PROCID"])
def test_a_rank_held_in_a_slurm_variable_is_the_rank(rank: str) -> None:
    outcome = imported(script("srun ", rank))
    assert shape(outcome) == (TEMPLATE, 8, 2, 5000)
    name = rank.strip('"${}')
    assert (
        f"job.sbatch:7: --node-rank ${name} is the rank (rank 0 is the command taken; hgxkit gives each host its "
        "own rank)" in outcome.notes
    )
    # written on srun's own command line, the batch shell expands it once, for every task: said, not hidden
    assert any(
        f"as published, the batch shell expands ${name} before srun starts the tasks" in n for n in outcome.notes
    )


def test_srun_bash_c_reads_the_string_with_the_batch_shells_variables_and_the_escaped_rank() -> None:
    text = (
        HEADER
        + 'PORT=39877\nsrun --nodes=2 --ntasks-per-node=1 bash -c "'
        + LAUNCH.format(head="'$HEAD:5000'")
        + '\\$SLURM_PROCID --port $PORT"\n'
    )
    outcome = imported(text)
    assert shape(outcome) == (TEMPLATE.replace(" --served", " --port 39877 --served"), 8, 2, 5000)
    assert not any("as published" in n for n in outcome.notes)  # escaped: each task reads its own


def test_sbatch_lines_are_read_or_set_aside_each_with_its_reason() -> None:
    outcome = imported(script("srun --ntasks=2 --output=log-%n.txt "))
    fates = {a.line: (a.fate, a.why) for a in outcome.lines}
    assert fates[1] == ("set aside", "#!/bin/bash (the script's interpreter line)")
    assert fates[2] == (
        "set aside",
        "#SBATCH --job-name=serve (a scheduler setting; hgxkit deploys on the inventory's hosts)",
    )
    assert fates[3] == ("read", "#SBATCH --nodes=2 (the job's nodes: the group spans 2 hosts)")
    assert fates[4] == (
        "read",
        "#SBATCH --gpus-per-node=8 (GPUs per node: the server's parallel sizes give the group's)",
    )
    assert fates[6][0] == "read"
    assert fates[7][0] == "changed"


def test_the_batch_scripts_own_setup_is_set_aside_with_its_reason() -> None:
    header = HEADER.replace(
        "#SBATCH --time=01:00:00", "#SBATCH --time=01:00:00\nset -euo pipefail\nmodule load cuda/12.4"
    )
    fates = {a.line: (a.fate, a.why) for a in imported(script("srun ", header=header)).lines}
    assert fates[6] == ("set aside", "set -euo pipefail (shell options of the batch script)")
    assert fates[7] == (
        "set aside",
        "module load cuda/12.4 (an environment module of the cluster; the container brings its own)",
    )


def test_the_head_and_its_address_from_srun_hostname() -> None:
    header = HEADER + 'HEAD_IP=$(srun --nodes=1 --ntasks=1 -w "$HEAD" hostname --ip-address)\n'
    outcome = imported(script("srun ", head='"$HEAD_IP:5000"', header=header))
    assert shape(outcome)[0] == TEMPLATE


def test_node_count_from_slurm_is_the_sbatch_node_count() -> None:
    text = script("srun ").replace("--nnodes 2", '--nnodes "$SLURM_NNODES"')
    assert shape(imported(text)) == (TEMPLATE, 8, 2, 5000)


def test_a_docker_launch_under_srun_is_a_docker_run() -> None:
    outcome = imported(script("srun docker run --gpus all --network host --ipc host lmsysorg/sglang:v0.5.6 "))
    assert outcome.recipe.image.reference == "lmsysorg/sglang:v0.5.6"
    assert shape(outcome)[1:] == (8, 2, 5000)
    assert "--node-rank {{rank}}" in " ".join(outcome.recipe.server.words())


def test_head_and_worker_branches_of_a_rank_test_are_the_ranks() -> None:
    """`if [ "$SLURM_NODEID" = 0 ]; then HEAD; else WORKER; fi`: how hgxkit's own export gives each its command."""
    run = (
        "docker run --gpus all --network host vllm/vllm-openai:v0.9.0 org/m -tp 8 -pp 2 --nnodes 2 "
        '--master-addr "$HEAD" --node-rank "$SLURM_NODEID"'
    )
    text = HEADER + f'if [ "$SLURM_NODEID" = 0 ]; then\n  {run} &\nelse\n  {run} --headless &\nfi\n'
    outcome = imported(text)
    assert outcome.recipe.groups is not None and outcome.recipe.groups.nodes == 2
    assert (
        "job.sbatch:8: --node-rank $SLURM_NODEID is the rank (rank 0 is the command taken; hgxkit gives each "
        "host its own rank)" in outcome.notes
    )
    words = " ".join(outcome.recipe.server.words())
    assert "--node-rank {{rank}}" in words and "--headless" not in words  # the worker flag is rendered per rank


# --- what is refused, by name ---


def test_a_rank_from_a_variable_the_script_does_not_set_is_named() -> None:
    assert refusal(script("srun ", '"$RANK"')) == (
        "job.sbatch:7: --node-rank $RANK: the rank is a variable the post does not set, so its value is unknown; "
        "write each host's rank (in a Slurm script: $SLURM_NODEID)"
    )


def test_slurm_localid_is_no_node_rank() -> None:
    assert refusal(script("srun ", '"$SLURM_LOCALID"')) == (
        "job.sbatch: line 7, column 118: --node-rank $SLURM_LOCALID is not the node's rank (that is $SLURM_NODEID); "
        "write the rank as $SLURM_NODEID"
    )


def test_procid_with_several_tasks_per_node_counts_tasks() -> None:
    text = script("srun --ntasks-per-node=8 ", "$SLURM_PROCID")
    assert refusal(text) == (
        "job.sbatch: line 7, column 138: --node-rank $SLURM_PROCID with 8 tasks per node counts "
        "tasks, not nodes; the node rank is $SLURM_NODEID"
    )


@pytest.mark.parametrize(
    "line",
    [
        'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | tail -n 1)',  # the last node, not the first
        "HEAD=$(getent hosts node-a | awk '{print $1}')",
        "HEAD=`hostname`",
    ],
)
def test_a_head_from_an_unreadable_expression_is_refused_naming_its_line(line: str) -> None:
    header = HEADER.replace(HEADER.splitlines()[-1], line)
    written = line.partition("=")[2]  # named as written, never its words taken as commands of the post
    shown = f"`{written}`" if written.startswith("$(") else f"`{written.strip('`')}` (in backticks)"
    assert refusal(script("srun ", header=header)) == (
        f"job.sbatch:7: $HEAD is set by the command substitution {shown} (job.sbatch:6), so the command has no single "
        "value for it; write the value into the command"
    )


def test_a_heterogeneous_job_is_refused() -> None:
    header = HEADER.replace("#SBATCH --time=01:00:00", "#SBATCH hetjob\n#SBATCH --nodes=1")
    assert refusal(script("srun ", header=header)) == (
        "job.sbatch: line 5: #SBATCH hetjob: a heterogeneous job (components with their own nodes) is not imported; "
        "give the job of the serving group alone"
    )


def test_a_heterogeneous_step_is_refused() -> None:
    text = script("srun --het-group=0 ").rstrip("\n") + " : --het-group=1 hostname\n"
    assert refusal(text) == (
        "job.sbatch:7: `srun … : …` runs a heterogeneous step (components with their own "
        "options); give the serving group's srun alone"
    )


def test_a_pyxis_container_image_runs_the_launch_in_that_image_its_mounts_the_hosts_paths() -> None:
    srun = "srun --container-image=nvcr.io#lmsysorg/sglang:v0.5.6 --container-mounts=/lustre/m:/models "
    outcome = imported(script(srun).replace("--model-path org/m", "--model-path /models/llama"))
    assert outcome.recipe.image.reference == "nvcr.io/lmsysorg/sglang:v0.5.6"
    assert outcome.recipe.server.flag("--model-path") == "/lustre/m/llama"
    assert any("(enroot + pyxis) runs it in that image" in note for note in outcome.notes)
    assert any(
        "/models/llama is the host's /lustre/m/llama (--container-mounts /lustre/m:/models)" in note
        for note in outcome.notes
    )


def test_a_pyxis_image_file_is_refused_naming_it() -> None:
    message = refusal(script("srun --container-image=/scratch/sglang.sqsh "))
    assert "/scratch/sglang.sqsh is a local pyxis image, which a node cannot pull" in message


def test_the_jobs_nodes_and_the_servers_must_agree() -> None:
    text = script("srun ", header=HEADER.replace("--nodes=2", "--nodes=4"))
    assert refusal(text) == (
        "job.sbatch:7: --nnodes 2 but #SBATCH --nodes=4: the job's nodes and the server's differ; make them one count"
    )


def test_the_engines_own_slurm_example_names_its_model_placeholder() -> None:
    """SGLang's multi-node doc (b01): its Slurm job (the 4th serving command) writes `model=MODEL_PATH`."""
    name = "b01-sglang-docs-multi-node-slurm.md"
    text = (FORMATS / name).read_text()
    with pytest.raises(InputError) as caught:
        import_post([(name, text)], ImportOptions(pick=4))
    assert caught.value.message == (
        f"{name}:78: --model-path MODEL_PATH is a placeholder (a name to fill in, not a model; the post writes it at "
        "line 63); write the model's repository or path there, or give it: --fill 'MODEL_PATH=VALUE'"
    )
    recipe = import_post([(name, text)], ImportOptions(pick=4, model_repo="meta-llama/Llama-3.1-405B")).recipe
    assert recipe.groups is not None and (recipe.groups.nodes, recipe.groups.size) == (2, 8)


def test_a_script_with_no_slurm_in_it_is_read_as_before() -> None:
    outcome = imported("vllm serve org/m --port 8001\n", image="vllm/vllm-openai:v0.9.0")
    assert not any("srun" in n or "#SBATCH" in n for n in outcome.notes)
