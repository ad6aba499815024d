"""Fixtures for end-to-end tests on simulated HGX-H200 nodes (`hgxkit sim`), reached with pyinfra over @ssh.

    def test_something(sim_nodes, pyinfra_on):
        nodes = sim_nodes(2)                       # cluster "e2e-<suffix>" with node1, node2, for this file
        run = pyinfra_on(nodes)                    # a connected pyinfra State for those nodes
        out = run.shell("nvidia-smi -L")           # {"node1": CommandResult, "node2": ...}

Without a Docker engine these tests skip, except under CI=true where they fail.
Every cluster a test asks for is named `<base>-<session suffix>` (sim_steps.cluster_name: $HGXKIT_SIM_TEST_SUFFIX,
else one made per session), recorded in the session's lock file before it starts, and removed (`hgxkit sim
down`) when the test file that started it is done. A session killed before that leaves its lock file: the next
session removes the clusters it lists (sim_steps.TestSession), never those of a live session, the demo's or anyone
else's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from sim_steps import TestSession, cluster_name, session_suffix

from hgxkit.errors import HgxkitError
from hgxkit.sim import nodes as simnodes
from hgxkit.sim.nodes import NodeInfo
from hgxkit.sim.paths import state_dir

session_suffix()  # fixed now, before any test module computes its cluster names


def _require_docker() -> None:
    try:
        simnodes.client()
    except HgxkitError as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {err.message}")
        pytest.skip(err.message)


@pytest.fixture(scope="session")
def sim_session(request: pytest.FixtureRequest) -> Iterator[TestSession]:
    """This session's lock and cluster list; on first use, removes what killed test sessions left running."""
    _require_docker()
    session = TestSession(state_dir() / "test-sessions", session_suffix())
    left = session.acquire()
    for cluster in left:  # a dead session that had our suffix (set by hand)
        simnodes.down(cluster)
    for path, clusters in session.dead_sessions():
        removed = [c for c in clusters if simnodes.down(c).containers]
        if removed:  # said on the terminal, past pytest's output capture
            capture = request.config.pluginmanager.get_plugin("capturemanager")
            with capture.global_and_fixture_disabled():
                print(f"\nremoved the clusters a killed test session left running ({path.name}): {', '.join(removed)}")
    yield session
    session.release()


_started: dict[tuple[str, int, int, int], list[NodeInfo]] = {}  # (cluster, n, gpus, memory_gib): its nodes


@pytest.fixture(autouse=True, scope="module")
def _down_the_files_clusters() -> Iterator[None]:
    """The clusters a test file started are removed when the file is done: left up, their idle nodes and
    stand-ins spend the CPU and memory the session's later files need."""
    before = set(_started)
    yield
    for key in set(_started) - before:
        simnodes.down(key[0])
        del _started[key]


@pytest.fixture(scope="session")
def sim_nodes(sim_session: TestSession) -> Iterator[Callable[..., list[NodeInfo]]]:
    """Factory: `sim_nodes(n, gpus=8, cluster=cluster_name("e2e"), memory_gib=2048)` starts n nodes, once per test
    file."""
    started = _started

    def get(n: int = 2, gpus: int = 8, cluster: str | None = None, memory_gib: int = 2048) -> list[NodeInfo]:
        cluster = cluster or cluster_name("e2e")
        key = (cluster, n, gpus, memory_gib)
        if key not in started:
            if any(k[0] == cluster for k in started):
                raise AssertionError(f"cluster {cluster!r} already started with other settings; use another name")
            sim_session.claim(cluster)
            simnodes.down(cluster)  # leftovers of an interrupted run with the same suffix
            started[key] = simnodes.up(n, gpus=gpus, memory_gib=memory_gib, cluster=cluster)
        return started[key]

    yield get
    for cluster, *_ in started:
        simnodes.down(cluster)


@dataclass(frozen=True)
class CommandResult:
    ok: bool
    stdout: str
    stderr: str


class PyinfraRun:
    """pyinfra API over @ssh to some simulated nodes: shell commands, facts, and one-off operations."""

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.hosts = [
            (
                n.name,
                {
                    "ssh_hostname": n.host,
                    "ssh_port": n.port,
                    "ssh_user": n.user,
                    "ssh_key": n.key,
                    "ssh_strict_host_key_checking": "off",
                    "ssh_known_hosts_file": "/dev/null",
                },
            )
            for n in nodes
        ]
        self.state = self._connect()

    def _connect(self):  # -> pyinfra.api.State
        from pyinfra.api import Config, Inventory, State
        from pyinfra.api.connect import connect_all

        state = State(inventory=Inventory((self.hosts, {})), config=Config(CONNECT_TIMEOUT=10))
        connect_all(state)
        missing = [h.name for h in state.inventory if not h.connected]
        assert not missing, f"pyinfra @ssh could not connect to {missing}"
        return state

    def op(self, func: Callable[..., object], **kwargs: object) -> dict[str, object]:
        """Run one pyinfra operation on every node in a fresh State; return {node: OperationMeta}.

        The long-lived State used by `shell`/`fact` reconnects afterwards (an operation may reboot nodes).
        """
        from pyinfra.api.connect import disconnect_all
        from pyinfra.api.operation import add_op
        from pyinfra.api.operations import run_ops

        state = self._connect()
        metas = add_op(state, func, **kwargs)
        run_ops(state)
        disconnect_all(state)
        self.close()
        self.state = self._connect()
        return {h.name: m for h, m in metas.items()}

    def shell(self, command: str) -> dict[str, CommandResult]:
        """Run a shell command on every node via pyinfra's SSH connector; errors are returned."""
        from pyinfra.api import StringCommand

        out = {}
        for host in self.state.inventory:
            ok, output = host.run_shell_command(StringCommand(command))
            out[host.name] = CommandResult(ok, output.stdout, output.stderr)
        return out

    def fact(self, fact_cls: type, **kwargs: object) -> dict[str, object]:
        from pyinfra.api.facts import get_facts

        return {h.name: v for h, v in get_facts(self.state, fact_cls, kwargs=kwargs or None).items()}

    def close(self) -> None:
        from pyinfra.api.connect import disconnect_all

        disconnect_all(self.state)


@pytest.fixture(scope="session")
def pyinfra_on() -> Iterator[Callable[[list[NodeInfo]], PyinfraRun]]:
    """Factory: `pyinfra_on(nodes)` gives a connected PyinfraRun (closed at session end)."""
    runs: list[PyinfraRun] = []

    def make(nodes: list[NodeInfo]) -> PyinfraRun:
        run = PyinfraRun(nodes)
        runs.append(run)
        return run

    yield make
    for r in runs:
        r.close()
