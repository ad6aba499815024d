"""hgxkit.hostcmd: every value quoted, slots checked, host runs with the host's connector arguments only."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State, StringCommand
from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS

from hgxkit.hostcmd import HostRunner, SecretLines, argv, script, small_file, text, variable

HOSTILE = "x;touch /tmp/p $(id) `id` 'q'"


def test_argv_quotes_every_word_and_numbers() -> None:
    cmd = argv("docker", "rm", HOSTILE, 3, 1.5)
    assert text(cmd) == "docker rm 'x;touch /tmp/p $(id) `id` '\"'\"'q'\"'\"'' 3 1.5"
    assert str(argv()) == ""


@pytest.mark.parametrize("word", [True, None, b"x", ["a"], object()])
def test_argv_refuses_what_is_not_a_word(word: object) -> None:
    with pytest.raises(TypeError, match=f"^argv words are strings or numbers, not {type(word).__name__}$"):
        argv("echo", word)  # type: ignore[arg-type]


def test_script_quotes_values_joins_lists_and_inserts_commands() -> None:
    cmd = script("{a} {b} | {c} {{x}}", a=HOSTILE, b=["p q", 2, 0.5], c=argv("wc", "-l"))
    assert text(cmd) == "'x;touch /tmp/p $(id) `id` '\"'\"'q'\"'\"'' 'p q' 2 0.5 | wc -l {x}"
    assert text(script("plain")) == "plain"
    assert text(script("{n}", n=7)) == "7"
    assert text(script("{n}", n=())) == ""


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{a!r}", "script slot {a}: use plain {name} slots only"),
        ("{a:>3}", "script slot {a}: use plain {name} slots only"),
        ("{0}", "script slot {0}: use plain {name} slots only"),
        ("{a.b}", "script slot {a.b}: use plain {name} slots only"),
    ],
)
def test_script_takes_plain_slots_only(template: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        script(template, a="v")
    assert str(info.value) == message


def test_script_slot_without_value_and_value_without_slot() -> None:
    with pytest.raises(KeyError) as info:
        script("{a} {b}", a="1")
    assert info.value.args == ("script slot {b} has no value",)
    with pytest.raises(KeyError) as info:
        script("{a}", a="1", z="2", y="3")
    assert info.value.args == ("script values without a slot: y, z",)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "script values are words, word lists or commands, not bool"),
        (None, "script values are words, word lists or commands, not NoneType"),
        ({"k": 1}, "script values are words, word lists or commands, not dict"),
        (["ok", True], "script list items are words, not bool"),
        (("ok", None), "script list items are words, not NoneType"),
    ],
)
def test_script_refuses_what_is_not_a_word(value: object, message: str) -> None:
    with pytest.raises(TypeError) as info:
        script("{v}", v=value)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_variable_names_only() -> None:
    assert text(script('{v}=1; echo "${v}"', v=variable("_A9"))) == '_A9=1; echo "$_A9"'
    assert text(variable("gpu_count")) == "gpu_count"
    for bad in ["9a", "a-b", "a b", "", "a;id", "A\n"]:
        with pytest.raises(ValueError) as info:
            variable(bad)
        assert str(info.value) == f"{bad!r} is not a shell variable name"


class FakeHost:
    """A pyinfra host (real inventory data and state) whose `run_shell_command` records what it receives."""

    def __init__(self, ok: Any, lines: Any, data: dict[str, Any] | None = None) -> None:
        inventory = Inventory(([("h200-1", data or {})], {}))
        State(inventory=inventory, config=Config())
        self.host = inventory.get_host("h200-1")
        self.state = self.host.state
        self.ok, self.lines = ok, lines
        self.calls: list[tuple[StringCommand, dict[str, Any]]] = []

    def run_shell_command(self, command: StringCommand, **kwargs: Any) -> tuple[Any, Any]:
        self.calls.append((command, kwargs))
        return self.ok, SimpleNamespace(stdout_lines=self.lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.host, name)


def test_host_runner_returns_status_and_lines_and_passes_connector_arguments() -> None:
    host = FakeHost(1, ("a", "b"), {"_sudo_user": "svc"})
    run = HostRunner(host)
    cmd = argv("nvidia-smi", "-L")
    ok, lines = run.status(cmd, _sudo=True)
    assert (ok, lines) == (True, ["a", "b"])
    assert type(ok) is bool and type(lines) is list
    sent, kwargs = host.calls[0]
    assert sent is cmd
    assert (kwargs["_sudo"], kwargs["_sudo_user"]) == (True, "svc")  # the call's and the inventory's
    assert "_serial" not in kwargs and "_ignore_errors" not in kwargs  # operation-only arguments stay out
    assert set(kwargs) <= set(CONNECTOR_ARGUMENT_KEYS) and kwargs == run.connector_arguments(_sudo=True)
    host.ok = 0
    assert run(cmd, _sudo=True) == ["a", "b"]
    assert host.calls[-1][1]["_sudo"] is True  # the call's connector arguments reach the host
    assert run.status(cmd) == (False, ["a", "b"])


def test_host_runner_refuses_a_plain_string() -> None:
    host = FakeHost(True, [])
    with pytest.raises(TypeError) as info:
        HostRunner(host).status("docker ps")  # type: ignore[arg-type]
    assert str(info.value) == "host commands are built with hgxkit.hostcmd.argv() or script(), never from a str"
    assert host.calls == []


def test_secret_lines_print_as_stars_but_carry_the_value() -> None:
    lines = SecretLines(["hf_xyz"])
    assert (str(lines), repr(lines), f"{lines}", f"{lines!r}") == ("***", "***", "***", "***")
    assert list(lines) == ["hf_xyz"]


# Backslashes (a Windows path, an escaped quote, one at the end of a line), indentation by spaces and tabs, trailing
# blanks, an empty line, a line that is only blanks, and no newline at the end.
AWKWARD = 'C:\\models\\x\n  \t indented \\"quoted\\"   \n\n   \nends with a backslash \\\n\tlast, no newline  '


@pytest.mark.parametrize("shell", ["sh", "bash"])
@pytest.mark.parametrize("content", [AWKWARD, "one line\n", "", "\\\n"])
def test_small_file_prints_the_file_exactly_with_a_newline_after_the_last_line(
    shell: str, content: str, tmp_path: Path
) -> None:
    path = tmp_path / "record 'with' spaces.json"
    path.write_text(content)
    done = subprocess.run([shell, "-c", text(small_file(str(path)))], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert done.stdout == (content if content.endswith("\n") or not content else content + "\n")


def test_small_file_of_a_missing_file_prints_nothing_and_fails(tmp_path: Path) -> None:
    done = subprocess.run(["sh", "-c", text(small_file(str(tmp_path / "missing")))], capture_output=True, text=True)
    assert done.returncode != 0 and done.stdout == ""
