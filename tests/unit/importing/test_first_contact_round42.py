"""Classes of import failure found by reading held-out posts 489-496 first (round 42): a typographic dash inside an
`echo`'s quoted message refusing a whole script, a unit written by an unquoted here-document (`\\\\` at a line end,
`: "${NAME:=default}"` above it) misread (489), a Make value in shell quotes kept with its quotes (491), and a unit
whose ExecStart runs a script the post does not show answered with the generic refusal (496)."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal

SETUP = """set -euo pipefail
: "${TP_SIZE:=2}"
: "${MODEL:=org/m}"
echo "=== install the unit — then start it ==="
cat > /etc/systemd/system/vllm.service << SVC
[Service]
ExecStart=/usr/bin/docker run --rm --gpus all --ipc=host -p 8000:8000 \\\\
  vllm/vllm-openai:v0.33.0 \\\\
  --model $MODEL --tensor-parallel-size $TP_SIZE
[Install]
WantedBy=multi-user.target
SVC
"""


def test_a_unit_written_by_an_unquoted_heredoc_under_default_assignments() -> None:
    outcome = _import(SETUP, "setup.sh")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert outcome.recipe.model.repo_id == "org/m"
    assert any("an unquoted here-document writes the unit" in note for note in outcome.notes)
    assert any('`: "${NAME:=value}"` read as' in note for note in outcome.notes)


def test_a_default_assignment_keeps_an_earlier_value() -> None:
    post = "TP=4\n: ${TP:=2}\nvllm serve org/m --port 8000 --tensor-parallel-size $TP\n"
    assert _import(post).recipe.server.flag("--tensor-parallel-size") == "4"


def test_a_make_value_in_quotes_is_the_word_its_shell_reads() -> None:
    post = 'MODEL ?= "org/m"\n\nrun:\n\tvllm serve $(MODEL) --port 8000\n'
    assert _import(post, "Makefile").recipe.model.repo_id == "org/m"


def test_a_unit_that_runs_a_script_names_it() -> None:
    message = _refusal("[Service]\nExecStart=/home/me/start-vllm.sh\n[Install]\nWantedBy=default.target\n", "v.service")
    assert "runs the script `/home/me/start-vllm.sh`" in message
