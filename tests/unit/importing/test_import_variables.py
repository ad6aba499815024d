"""A post's shell variables read as a shell reads them (hgxkit/importing/variables.py): a value is expanded when it
is set, `${NAME:-word}` takes its word where the post leaves NAME unset, a name set after the command is unset
there (and the refusal or note says where the post sets it), and the files of one import are one shell session,
so a variable set in one rank's script reaches another's."""

from __future__ import annotations

import pytest

from hgxkit.errors import InputError
from hgxkit.importing.importer import ImportOptions, import_post
from hgxkit.importing.outcome import ImportOutcome

VLLM = "vllm/vllm-openai:v0.9.0"
RUN = f"docker run --gpus all -p 8000:8000 {{options}} {VLLM} --model org/m\n"


def imported(*files: tuple[str, str], **options: object) -> ImportOutcome:
    return import_post(list(files), ImportOptions(**options))  # type: ignore[arg-type]


def refusal(*files: tuple[str, str]) -> str:
    with pytest.raises(InputError) as caught:
        imported(*files)
    return caught.value.message


def options(outcome: ImportOutcome) -> list[str]:
    return [" ".join(entry.words) for entry in outcome.recipe.docker.entries]


def test_a_value_set_from_another_variable_holds_its_value_when_set() -> None:
    post = "export WORK=/scratch/me\nexport DATA=$WORK/data\nexport WORK=/elsewhere\n"
    outcome = imported(("p.sh", post + RUN.format(options="-v $DATA:/data")))
    assert "-v /scratch/me/data:/data" in options(outcome)
    assert "p.sh:4: $DATA is the post's DATA=/scratch/me/data (line 2, written $WORK/data)" in outcome.notes


def test_a_bare_launchs_environment_holds_the_expanded_values() -> None:
    post = "export WORK=/scratch/me\nexport RUN_DIR=$WORK/run\nvllm serve org/m\n"
    assert "-e RUN_DIR=/scratch/me/run" in options(imported(("p.sh", post), image=VLLM))


@pytest.mark.parametrize(
    ("before", "word", "mounted"),
    [
        pytest.param("", "${CACHE:-/srv/cache}", "/srv/cache", id="unset-takes-the-default"),
        pytest.param("CACHE=/data/c\n", "${CACHE:-/srv/cache}", "/data/c", id="set-keeps-its-value"),
        pytest.param("CACHE=\n", "${CACHE:-/srv/cache}", "/srv/cache", id="empty-takes-the-colon-default"),
        pytest.param("W=/w\n", "${CACHE:-$W/cache}", "/w/cache", id="the-default-expands-a-variable"),
    ],
)
def test_a_default_expansion_is_what_a_shell_gives(before: str, word: str, mounted: str) -> None:
    outcome = imported(("p.sh", before + RUN.format(options=f"-v {word}:/root/.cache/vllm")))
    assert f"-v {mounted}:/root/.cache/vllm" in options(outcome)


def test_an_unset_credential_with_a_default_stays_the_hosts_secret() -> None:
    outcome = imported(("p.sh", RUN.format(options="-e HF_TOKEN=${HF_TOKEN:-}")))
    assert "-e HF_TOKEN" in options(outcome)


def test_a_value_expanded_from_a_definition_in_a_block_is_refused_naming_the_block() -> None:
    post = "if [ -d /scratch ]; then\n  WORK=/scratch\nfi\nDATA=$WORK/data\n" + RUN.format(options="-v $DATA:/data")
    assert refusal(("p.sh", post)) == (
        "p.sh:5: $WORK is set inside an `if` block (p.sh:2) ($DATA is set from it), so the command has no single "
        "value for it; write the value into the command"
    )


def test_a_variable_set_after_the_command_is_unset_there_and_the_note_says_where() -> None:
    post = RUN.format(options="-v $DATA:/data") + "DATA=/srv/data\n"
    assert refusal(("p.sh", post)).startswith(
        "p.sh:1: $DATA is read before the post sets it (at line 2, after the command), so the server would get "
        "whatever the host's shell has for it"
    )
    # a refusal that names the name says where the post sets it (corpus 103: the model)
    post = "vllm serve $MODEL_ID\nexport MODEL_ID=org/m\n"
    assert refusal(("p.sh", post)).endswith(
        "; the post sets MODEL_ID at line 2, after the command, so a shell reads it unset there: set it before"
    )


def test_a_doubling_chain_of_values_is_refused_naming_the_line() -> None:
    chain = "A0=xxxxxxxx\n" + "".join(f"A{n}=$A{n - 1}$A{n - 1}\n" for n in range(1, 14))
    message = refusal(("p.sh", chain + RUN.format(options="-v $A13:/data")))
    assert message == "p.sh:12: $A11 expands to more than 8192 characters; write its value"


SGLANG = (
    "python3 -m sglang.launch_server --model-path org/m --tp 16 --dist-init-addr $HEAD_IP:5000 --nnodes 2 "
    "--node-rank {rank}\n"
)


def test_a_variable_set_in_one_ranks_script_reaches_the_next_scripts_rank() -> None:
    head = ("head.sh", "export HEAD_IP=10.0.0.1\n" + SGLANG.format(rank=0))
    worker = ("worker.sh", SGLANG.format(rank=1))
    outcome = imported(head, worker)
    assert outcome.recipe.groups.nodes == 2
    assert (
        "worker.sh:1: $HEAD_IP is the post's HEAD_IP=10.0.0.1 (head.sh:1, an earlier file of the import)"
        in outcome.notes
    )


def test_a_later_files_variable_does_not_reach_an_earlier_file() -> None:
    worker = ("worker.sh", SGLANG.format(rank=1))
    head = ("head.sh", "export HEAD_IP=10.0.0.1\n" + SGLANG.format(rank=0))
    assert "they differ in" in refusal(worker, head)
