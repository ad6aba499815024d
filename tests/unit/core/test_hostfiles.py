"""Files hgxkit writes on a host (hgxkit/hostfiles.py): the command run by the node's shell (`sh`, dash on Debian,
and bash), here on local files: the content exactly, the mode asked for whatever the umask, the old file replaced
whole, and a symlink left at the temporary name never followed."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import StringCommand

from hgxkit.hostcmd import text
from hgxkit.hostfiles import put_text, write_command, write_text

SHELLS = ("sh", "bash")
CONTENT = '{"exec-opts": ["native.cgroupdriver=cgroupfs"]}\n  indented \\ line\n'


def write(
    shell: str, path: Path | str, content: str, mode: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the write command (with its default mode unless `mode`) as a node's shell would."""
    command = write_command(str(path)) if mode is None else write_command(str(path), mode)
    return subprocess.run(
        [shell, "-c", text(command)], input=content, text=True, capture_output=True, timeout=30, check=False, cwd=cwd
    )


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_written_file_has_the_exact_content_and_mode_0644_that_others_read(shell: str, tmp_path: Path) -> None:
    target = tmp_path / "etc-docker" / "daemon.json"
    done = write(shell, target, CONTENT)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == CONTENT
    assert mode_of(target) == 0o644  # dockerd and the next run read it; the command's umask 077 would give 0600
    assert mode_of(target.parent) == 0o700  # a directory it creates is made under umask 077
    assert sorted(p.name for p in target.parent.iterdir()) == ["daemon.json"]  # no temporary file left


@pytest.mark.parametrize(("mode", "expected"), [("0600", 0o600), ("0640", 0o640), ("0755", 0o755)])
def test_a_written_file_has_the_mode_asked_for(mode: str, expected: int, tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    assert write("sh", target, "{}\n", mode).returncode == 0
    assert mode_of(target) == expected


def test_an_existing_file_is_replaced_whole_by_a_new_inode(tmp_path: Path) -> None:
    target = tmp_path / "image.json"
    target.write_text("old content that is longer than the new one\n")
    target.chmod(0o600)
    old_inode = target.stat().st_ino
    assert write("sh", target, "new\n").returncode == 0
    assert target.read_text() == "new\n" and mode_of(target) == 0o644
    assert target.stat().st_ino != old_inode  # renamed over, never rewritten in place (a reader sees old or new)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_symlink_at_the_temporary_name_is_never_followed(shell: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    target = tmp_path / "daemon.json"
    link = tmp_path / "daemon.json.hgxkit-tmp"
    link.symlink_to(victim)
    assert write(shell, target, CONTENT).returncode == 0
    assert victim.read_text() == "precious\n" and mode_of(victim) == 0o600  # neither written nor chmod-ed
    assert target.read_text() == CONTENT and not target.is_symlink() and mode_of(target) == 0o644
    assert not os.path.lexists(link)


def test_a_dangling_symlink_at_the_temporary_name_creates_nothing_where_it_points(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "created-by-the-link"
    elsewhere.parent.mkdir()
    target = tmp_path / "daemon.json"
    (tmp_path / "daemon.json.hgxkit-tmp").symlink_to(elsewhere)
    assert write("sh", target, CONTENT).returncode == 0
    assert not os.path.lexists(elsewhere) and target.read_text() == CONTENT


def test_a_failed_write_leaves_the_old_file_in_place(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old\n")
    blocker = tmp_path / "record.json.hgxkit-tmp"
    blocker.mkdir()  # rm -f cannot remove a directory: the write stops before the rename
    (blocker / "keep").write_text("")
    assert write("sh", target, "new\n").returncode != 0
    assert target.read_text() == "old\n"


@pytest.mark.parametrize("mode", ["644", "00644", "0648", "06X4", "u+rw", ""])
def test_a_mode_is_four_octal_digits(mode: str) -> None:
    with pytest.raises(ValueError) as info:
        write_command("/etc/x", mode)
    assert str(info.value) == f"file mode {mode!r}: use four octal digits, e.g. 0644"


def test_a_path_without_a_directory_makes_no_directory(tmp_path: Path) -> None:
    assert write("sh", "record.json", "{}\n", cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_put_text_plans_nothing_when_the_content_is_already_there() -> None:
    # Only trailing newlines may differ: the FileText fact drops the last one.
    assert put_text(name="n", path="/etc/x", text="a\nb\n", current="a\nb") is None
    assert put_text(name="n", path="/etc/x", text="a\nb", current="a\nb\n\n") is None


@pytest.mark.parametrize(
    ("new", "current"),
    [("a\n", None), ("a\n", "a \n"), ("a \n", "a"), ("abX\n", "ab"), ("ab\n", "abX"), ("a\nb\n", "a\n")],
    ids=["no file", "a blank less", "a blank more", "a letter more", "a letter less", "a line more"],
)
def test_put_text_plans_one_write_of_the_new_text_when_it_differs(
    new: str, current: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    planned: list[dict[str, Any]] = []
    monkeypatch.setattr("hgxkit.hostfiles.server.shell", lambda **kwargs: planned.append(kwargs) or "operation")
    assert put_text(name="Docker daemon.json", path="/etc/docker/daemon.json", text=new, current=current) == "operation"
    (call,) = planned
    assert set(call) == {"name", "commands", "_stdin"}
    assert (call["name"], call["_stdin"]) == ("Docker daemon.json", new)
    assert [text(c) for c in call["commands"]] == [text(write_command("/etc/docker/daemon.json", "0644"))]
    put_text(name="n", path="/etc/x", text=new, current=current, mode="0600")
    assert [text(c) for c in planned[-1]["commands"]] == [text(write_command("/etc/x", "0600"))]


class LocalRunner:
    """HostRunner's `status` on this machine: the command through `sh -c`, stdin as given."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def status(self, command: StringCommand, **arguments: Any) -> tuple[bool, list[str]]:
        self.calls.append(arguments)
        done = subprocess.run(
            ["sh", "-c", text(command)], input=arguments["_stdin"], text=True, capture_output=True, check=False
        )
        return done.returncode == 0, done.stdout.splitlines()


def test_write_text_writes_through_the_host_runner_and_says_whether_it_worked(tmp_path: Path) -> None:
    run = LocalRunner()
    target = tmp_path / "serve" / "image.json"
    assert write_text(run, str(target), CONTENT, mode="0600") is True  # type: ignore[arg-type]
    assert target.read_text() == CONTENT and mode_of(target) == 0o600
    assert run.calls == [{"_stdin": CONTENT}]
    (tmp_path / "file").write_text("")
    assert write_text(run, str(tmp_path / "file" / "x.json"), "{}") is False  # type: ignore[arg-type]


def test_a_program_a_host_runs_is_its_modules_source_read_not_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from hgxkit.hostfiles import program_text

    (tmp_path / "hostprog.py").write_text("print('é')\nimport sys\n", encoding="utf-8")
    (tmp_path / "namespace").mkdir()  # a package without a file of its own
    monkeypatch.syspath_prepend(str(tmp_path))
    assert program_text("hostprog") == "print('é')\nimport sys\n"
    assert "hostprog" not in sys.modules
    # read as UTF-8 whatever the controller's locale: here plain C, neither coerced nor in Python's UTF-8 mode
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    probe = "from hgxkit.hostfiles import program_text; print(ascii(program_text('hostprog')))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, ascii("print('é')\nimport sys\n") + "\n"), done.stderr
    for missing in ("hostprog_absent", "namespace"):
        with pytest.raises(ModuleNotFoundError, match=missing):
            program_text(missing)
