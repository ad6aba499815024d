"""One hgxkit run per node at a time (hgxkit/hostlock.py): `hold_host_lock` against a lock another process holds
for real (flock on a local file), through a pyinfra host whose SSH client runs the holder here. The wait is
measured on a clock of the test's own, so nothing here depends on how busy the machine is."""

from __future__ import annotations

import io
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.exceptions import DeployError

from hgxkit import hostlock
from hgxkit.hostcmd import script, text
from hgxkit.hostlock import LOCK_FILE, holder_command

HOLDERS = "12345 Mon Dec  1 12:00:00 2026 python3 pyinfra -y inventories/h200.py deploys/reproduce.py"


class LocalChannel:
    """The part of a paramiko channel the holder uses: its exit status."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def recv_exit_status(self) -> int:
        return self.proc.wait(timeout=30)


class LocalClient:
    """An SSH client whose `exec_command` runs the command on this machine, with the node's /var/lib/hgxkit at
    `lock`'s directory."""

    def __init__(self, lock: Path) -> None:
        self.lock = lock
        self.procs: list[subprocess.Popen[str]] = []
        self.commands: list[str] = []

    def exec_command(self, command: str) -> tuple[Any, Any, Any]:
        self.commands.append(command)
        command = command.replace(LOCK_FILE.rsplit("/", 1)[0], str(self.lock.parent))
        proc = subprocess.Popen(
            ["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.procs.append(proc)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdout.channel = LocalChannel(proc)  # type: ignore[attr-defined]
        return proc.stdin, proc.stdout, None


class FakeClock:
    """time.monotonic and time.sleep for hostlock: sleeping advances the clock at once; `on_sleep` runs first."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep: Any = None

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if len(self.sleeps) >= 100:  # a wait that never ends would hang the test: stop it here instead
            raise AssertionError("hold_host_lock still waiting after 100 sleeps")
        self.sleeps.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep()
        self.now += seconds


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """A pyinfra host (@fake, whose commands answer the holders' listing) with a local SSH client and a fake clock."""
    lock = tmp_path / "var-lib-hgxkit" / "run.lock"
    data = {"fake_delay": 0, "fake_delay_jitter": 0, "fake_responses": {"for p in /proc": HOLDERS}}
    inventory = Inventory(([("@fake/h200-1", {**data, "host_lock_wait_s": 10})], {}))
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    host = inventory.get_host("@fake/h200-1")
    client = LocalClient(lock)
    host.connector.client = client
    clock = FakeClock()
    monkeypatch.setattr(hostlock, "time", clock)
    monkeypatch.setattr("sys.argv", ["pyinfra", "-y", "inventories/h200.py", "deploys/reproduce.py"])
    others: list[subprocess.Popen[str]] = []
    yield SimpleNamespace(host=host, client=client, clock=clock, lock=lock, others=others)
    hostlock._held.pop(hostlock._key(host), None)
    for proc in [*client.procs, *others]:
        if proc.poll() is None:
            proc.communicate("", timeout=30)


def other_run_holds(node: SimpleNamespace) -> subprocess.Popen[str]:
    """Another run's holder on the same node: it holds the lock until its stdin closes."""
    proc = subprocess.Popen(
        ["sh", "-c", text(holder_command(lock=str(node.lock)))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "hgxkit-locked"
    node.others.append(proc)
    return proc


def test_a_free_lock_is_held_until_the_run_ends(node: SimpleNamespace) -> None:
    hostlock.hold_host_lock(node.host)
    assert hostlock._held[hostlock._key(node.host)] is node.client.procs[0].stdin
    assert node.clock.sleeps == []
    busy = subprocess.run(
        ["sh", "-c", text(holder_command(lock=str(node.lock)))], input="", capture_output=True, text=True, timeout=30
    )
    assert busy.returncode == hostlock.BUSY  # held for real: another run cannot take it
    hostlock.hold_host_lock(node.host)  # once per run: no second holder
    assert len(node.client.procs) == 1


def test_a_busy_lock_is_never_taken_as_held_and_the_wait_ends_in_a_refusal_naming_the_holder(
    node: SimpleNamespace,
) -> None:
    other_run_holds(node)
    with pytest.raises(DeployError) as info:
        hostlock.hold_host_lock(node.host)
    assert str(info.value) == (
        f"@fake/h200-1: another hgxkit run holds {LOCK_FILE} (pid, start, command: {HOLDERS}); wait for it to finish, "
        "or stop it, then run again (host_lock_wait_s sets how long to wait)"
    )
    assert hostlock._key(node.host) not in hostlock._held
    # host_lock_wait_s is 10: tries at 0, 2, 4, 6, 8 and 10 s, then the refusal
    assert node.clock.sleeps == [2] * 5 and len(node.client.procs) == 6
    assert all(proc.wait(timeout=30) == hostlock.BUSY for proc in node.client.procs)


def test_a_wait_of_zero_tries_once(node: SimpleNamespace) -> None:
    node.host.data.host_lock_wait_s = 0
    other_run_holds(node)
    with pytest.raises(DeployError):
        hostlock.hold_host_lock(node.host)
    assert node.clock.sleeps == [] and len(node.client.procs) == 1


def test_a_lock_released_during_the_wait_is_taken(node: SimpleNamespace) -> None:
    other = other_run_holds(node)
    node.clock.on_sleep = lambda: len(node.clock.sleeps) == 2 and other.communicate("", timeout=30)
    hostlock.hold_host_lock(node.host)
    assert node.clock.sleeps == [2, 2] and len(node.client.procs) == 3
    assert hostlock._held[hostlock._key(node.host)] is node.client.procs[-1].stdin


def test_a_holder_that_fails_otherwise_is_refused_at_once_with_its_status(node: SimpleNamespace) -> None:
    node.lock.parent.mkdir()
    node.lock.mkdir()  # `exec 9>>` cannot open a directory: the shell's status, not flock's busy one
    with pytest.raises(DeployError) as info:
        hostlock.hold_host_lock(node.host)
    assert str(info.value).startswith(f"@fake/h200-1: could not take the hgxkit run lock {LOCK_FILE}: exit status 2")
    assert node.clock.sleeps == [] and hostlock._key(node.host) not in hostlock._held


def test_a_vanished_holder_and_a_long_command_line_are_named_in_few_words(node: SimpleNamespace) -> None:
    node.host.data.host_lock_wait_s = 0
    other_run_holds(node)
    node.host.connector.data["fake_responses"] = {"for p in /proc": ""}  # the holder exited in between
    with pytest.raises(DeployError, match=r"\(pid, start, command: a process that has exited by now\); wait"):
        hostlock.hold_host_lock(node.host)
    long = "12345 Mon Dec  1 12:00:00 2026 sh -c " + "x" * 5000
    node.host.connector.data["fake_responses"] = {"for p in /proc": [long, "23456 Mon Dec  1 12:01:00 2026 x"]}
    with pytest.raises(DeployError) as info:
        hostlock.hold_host_lock(node.host)
    assert f"(pid, start, command: {long[:200]}…); wait" in str(info.value)  # the oldest, cut at 200
    for size, shown in ((200, "x" * 200), (201, "x" * 200 + "…")):
        node.host.connector.data["fake_responses"] = {"for p in /proc": "x" * size}
        with pytest.raises(DeployError) as info:
            hostlock.hold_host_lock(node.host)
        assert f"(pid, start, command: {shown}); wait" in str(info.value)


def test_a_dry_run_on_a_node_without_the_lock_file_holds_nothing_and_creates_nothing(
    node: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["pyinfra", "--dry", "inventories/h200.py", "deploys/reproduce.py"])
    hostlock.hold_host_lock(node.host)
    assert not node.lock.parent.exists()  # a real run's holder would have made the directory and the file
    node.client.procs[0].communicate("", timeout=30)
    assert node.client.procs[0].returncode == 0


def test_a_connector_without_ssh_holds_no_lock(node: SimpleNamespace, caplog: pytest.LogCaptureFixture) -> None:
    del node.host.connector.client
    with caplog.at_level(logging.DEBUG, logger="pyinfra"):
        hostlock.hold_host_lock(node.host)
    assert hostlock._held[hostlock._key(node.host)] is None and node.client.procs == []
    assert "@fake/h200-1: no SSH connection, so no host lock (FakeConnector)" in caplog.messages


@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry run"])
def test_the_batched_reads_run_on_the_locks_channel_once_it_is_held(
    dry: bool, node: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    if dry:  # a node that has had a run: the dry run takes the lock too
        node.lock.parent.mkdir()
        node.lock.touch()
        monkeypatch.setattr("sys.argv", ["pyinfra", "--dry", "inventories/h200.py", "deploys/reproduce.py"])
    kept: list[list[str]] = []
    asked: list[tuple[object, object]] = []

    def prefetch_command(host: object, reads: object) -> tuple[object, object]:
        asked.append((host, reads))
        return script("echo {a}; echo {b}; echo", a="oneX", b="two  "), kept.append

    monkeypatch.setattr("hgxkit.planfacts.prefetch_command", prefetch_command)
    reads = [(object, {"path": "/etc/os-release"})]
    hostlock.hold_host_lock(node.host, reads)  # type: ignore[arg-type]
    assert asked == [(node.host, reads)]
    assert kept == [["oneX", "two  ", ""]]  # each line as printed, only the newline taken off
    assert hostlock._held[hostlock._key(node.host)] is node.client.procs[0].stdin
    busy = subprocess.run(
        ["sh", "-c", text(holder_command(lock=str(node.lock)))], input="", capture_output=True, text=True, timeout=30
    )
    assert busy.returncode == hostlock.BUSY  # the lock is held while the reads' answers are kept


def test_reads_that_break_off_are_logged_and_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    got: list[list[str]] = []
    with caplog.at_level(logging.DEBUG, logger="pyinfra"):
        hostlock._keep_reads(SimpleNamespace(name="h200-1"), Lines(["a\n"], EOFError("gone")), got.append)
    assert got == []
    assert caplog.messages == [
        "h200-1: the reads on the lock's channel gave no answer (gone); reading them on their own"
    ]


def test_the_holders_listing_names_the_process_that_has_the_lock_open(node: SimpleNamespace) -> None:
    other = other_run_holds(node)
    listing = subprocess.run(
        ["sh", "-c", text(hostlock.holders_command()).replace(LOCK_FILE, str(node.lock))],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    assert [line.split()[0] for line in listing] == [str(other.pid)]
    assert " sh -c { [ -d " in listing[0]  # its start time, then its command line (as wide as ps prints it)


class Lines:
    """A channel's stdout: `readline` gives each line, then "" (end of file), or raises `error` at the end."""

    def __init__(self, lines: list[str], error: Exception | None = None) -> None:
        self.lines, self.error = list(lines), error

    def readline(self) -> str:
        if self.lines:
            return self.lines.pop(0)
        if self.error is not None:
            raise self.error
        return ""


@pytest.mark.parametrize(
    ("lines", "error", "kept"),
    [
        (["a 1\n", "\n", f"{hostlock.PREFETCH_END}\n", "after\n"], None, [["a 1", ""]]),
        (["a 1\n"], None, []),  # the channel closed before the end mark: nothing kept
        (["a 1\n"], UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid"), []),
        (["a 1\n"], EOFError(), []),
    ],
    ids=["ended", "closed", "not utf-8", "eof"],
)
def test_the_reads_on_the_locks_channel_are_kept_only_when_they_end(
    lines: list[str], error: Exception | None, kept: list[list[str]]
) -> None:
    got: list[list[str]] = []
    hostlock._keep_reads(SimpleNamespace(name="h200-1"), Lines(lines, error), got.append)
    assert got == kept


def test_each_host_of_a_run_takes_its_own_lock_through_pyinfras_host_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deploy files hand `hold_host_lock` pyinfra's `host`: one proxy object for every host of the run. Each node
    must still take its own lock, not skip it because another node's is held."""
    from pyinfra import host as proxy
    from pyinfra.context import ctx_host

    data = {"fake_delay": 0, "fake_delay_jitter": 0, "host_lock_wait_s": 10}
    inventory = Inventory(([("@fake/a", data), ("@fake/b", data)], {}))
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    monkeypatch.setattr(hostlock, "time", FakeClock())
    clients = {}
    for name in ("a", "b"):
        real = inventory.get_host(f"@fake/{name}")
        clients[name] = real.connector.client = LocalClient(tmp_path / name / "run.lock")
        (tmp_path / name).mkdir()
    try:
        for name in ("a", "b"):
            with ctx_host.use(inventory.get_host(f"@fake/{name}")):
                hostlock.hold_host_lock(proxy)
        assert [len(clients[name].procs) for name in ("a", "b")] == [1, 1]
    finally:
        for name in ("a", "b"):
            hostlock._held.pop(hostlock._key(inventory.get_host(f"@fake/{name}")), None)
            for proc in clients[name].procs:
                proc.communicate("", timeout=30)


class ScriptedClient:
    """An SSH client that runs nothing: every command answers `output` and then exits with `status`."""

    def __init__(self, output: str, status: int = 0) -> None:
        self.output, self.status = output, status
        self.commands: list[str] = []

    def exec_command(self, command: str) -> tuple[Any, Any, Any]:
        self.commands.append(command)
        stdout = io.StringIO(self.output)
        stdout.channel = SimpleNamespace(recv_exit_status=lambda: self.status)  # type: ignore[attr-defined]
        return io.StringIO(), stdout, None


def _fake_host(name: str, data: dict[str, Any]) -> Any:
    inventory = Inventory(([(name, {"fake_delay": 0, "fake_delay_jitter": 0, "host_lock_wait_s": 10, **data})], {}))
    state = State(inventory=inventory, config=Config())
    connect_all(state)
    return inventory.get_host(name)


def test_two_runs_in_one_process_each_take_the_lock_of_their_own_node_of_one_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller that runs two deploys (a bench, a test session) holds each run's lock, even when both name
    their node alike: the lock is the run's, not the name's."""
    monkeypatch.setattr(hostlock, "time", FakeClock())
    hosts = [_fake_host("@fake/h200-1", {}) for _ in range(2)]
    clients = []
    for index, host in enumerate(hosts):
        clients.append(LocalClient(tmp_path / str(index) / "run.lock"))
        host.connector.client = clients[-1]
    try:
        for host in hosts:
            hostlock.hold_host_lock(host)
        assert [len(client.procs) for client in clients] == [1, 1]
    finally:
        for host, client in zip(hosts, clients, strict=True):
            hostlock._held.pop(hostlock._key(host), None)
            for proc in client.procs:
                proc.communicate("", timeout=30)


def test_the_holder_runs_the_way_the_node_runs_every_command_sudo_included(monkeypatch: pytest.MonkeyPatch) -> None:
    host = _fake_host("@fake/h200-1", {"_sudo": True})
    host.connector.client = client = ScriptedClient("hgxkit-locked\n")
    try:
        hostlock.hold_host_lock(host)
        (command,) = client.commands
        assert command.startswith("sudo ") and "flock -n" in command
        assert hostlock.PREFETCH_END not in command  # no reads asked: the holder runs none
    finally:
        hostlock._held.pop(hostlock._key(host), None)


def test_a_failing_holder_is_named_by_its_first_200_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    host = _fake_host("@fake/h200-1", {})
    host.connector.client = ScriptedClient("e" * 300 + "\n", status=3)
    with pytest.raises(DeployError) as info:
        hostlock.hold_host_lock(host)
    assert str(info.value).endswith(f"exit status 3 from flock: {'e' * 200}")


def test_a_node_not_yet_connected_is_connected_and_a_failed_connection_ends_the_run(
    node: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[object] = []

    def connect(raise_exceptions: object = False) -> None:
        asked.append(raise_exceptions)
        node.host.connected = True

    node.host.connected = False
    monkeypatch.setattr(node.host, "connect", connect)
    hostlock.hold_host_lock(node.host)
    assert asked == [True] and len(node.client.procs) == 1  # asked to raise: an unreachable node is no silent pass


def test_reads_on_the_locks_channel_that_are_not_text_are_logged_for_the_node(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    host = _fake_host("@fake/h200-1", {})
    bad = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")  # as paramiko's readline raises it
    host.connector.client = client = ScriptedClient("")
    client.exec_command = lambda command: (io.StringIO(), Lines(["hgxkit-locked\n", "a\n"], bad), None)
    kept: list[list[str]] = []
    monkeypatch.setattr("hgxkit.planfacts.prefetch_command", lambda host, reads: (script("echo a"), kept.append))
    try:
        with caplog.at_level(logging.DEBUG, logger="pyinfra"):
            hostlock.hold_host_lock(host, [(object, {})])  # type: ignore[list-item]
        assert kept == [] and hostlock._key(host) in hostlock._held  # held; the reads are read on their own
        assert any(
            m.startswith("@fake/h200-1: the reads on the lock's channel gave no answer") for m in caplog.messages
        )
    finally:
        hostlock._held.pop(hostlock._key(host), None)
