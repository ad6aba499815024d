"""Shell steps the simulated-node e2e tests run on nodes with plain apt commands (no hgxkit roles)."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

REPO = "http://127.0.0.1:8081"

CUDA = f"{REPO}/cuda/debian12/x86_64"
NVCT = f"{REPO}/libnvidia-container"
ADD_REPOS = f"""set -e
curl -fsSL {CUDA}/hgxkit-sim.pub | gpg --batch --yes --dearmor -o /usr/share/keyrings/cuda.gpg
echo "deb [signed-by=/usr/share/keyrings/cuda.gpg] {CUDA}/ /" > /etc/apt/sources.list.d/cuda.list
curl -fsSL {NVCT}/gpgkey | gpg --batch --yes --dearmor -o /usr/share/keyrings/nv.gpg
echo "deb [signed-by=/usr/share/keyrings/nv.gpg] {NVCT}/stable/deb/amd64/ /" > /etc/apt/sources.list.d/nv.list
apt-get update -q -o Dir::Etc::sourcelist=- -o Dir::Etc::sourceparts=/etc/apt/sources.list.d
"""


def apt_install(*packages: str) -> str:
    """An apt-get install of exact package versions, allowing downgrades (for the mismatch tests)."""
    return (
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
        "-o Dpkg::Options::=--force-confold " + " ".join(packages)
    )


DRIVER_PACKAGES = (
    "nvidia-open",
    "nvidia-kernel-open-dkms",
    "nvidia-driver-cuda",
    "nvidia-smi",
    "libcuda1",
    "nvidia-persistenced",
    "libnvidia-ml1",
    "firmware-nvidia-gsp",
)


def driver_pins(version: str) -> list[str]:
    """Every package of the open driver pinned to `version` (apt would pull the newest deps otherwise)."""
    return [f"{p}={version}-1" for p in DRIVER_PACKAGES]


SUFFIX_ENV = "HGXKIT_SIM_TEST_SUFFIX"


def session_suffix() -> str:
    """This test session's cluster suffix: $HGXKIT_SIM_TEST_SUFFIX, else one made for the session (`t` and 6 hex
    digits), put into the environment so every module and subprocess of the session uses the same one."""
    if not os.environ.get(SUFFIX_ENV):
        os.environ[SUFFIX_ENV] = "t" + secrets.token_hex(3)
    return os.environ[SUFFIX_ENV]


def require(ok: bool, why: str) -> None:
    """Skip the test when `ok` is false, naming `why`; under CI=true fail instead (no silent skips in CI)."""
    if not ok:
        import pytest

        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)


def out(result) -> str:
    """A finished command's stdout and stderr, for assertions and failure messages."""
    return result.stdout + result.stderr


def hgxkit_cli(*args: str, timeout: int = 900):
    """`hgxkit ARGS…` from the repository root as a user runs it; the CompletedProcess, output captured."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-m", "hgxkit", *args]
    return subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=timeout, check=False)


def why_changed(result) -> str:
    """A re-run's failure message: what the run said about its plan (`[host] ...` lines before the first
    operation: why bring-up checked again) and the operations that changed something, with their hosts."""
    text = out(result)
    said = [line for line in text.split("--> Starting operation", 1)[0].splitlines() if line.strip().startswith("[")]
    changed, operation = [], ""
    for line in text.splitlines():
        if "--> Starting operation:" in line:
            operation = line.split(":", 1)[1].strip()
        elif line.strip().endswith("] Success"):
            changed.append(f"{operation}: {line.strip()}")
    return "\n".join([*said, "changed:", *changed])


def state_changes(before: dict[str, str], after: dict[str, str]) -> str:
    """The lines that differ between two per-node state listings, node by node, for an assertion message (a
    dict comparison shows only the first characters of each long listing)."""
    import difflib

    return "\n".join(
        f"{node}: {line}"
        for node in sorted(set(before) | set(after))
        for line in difflib.unified_diff(
            before.get(node, "").splitlines(), after.get(node, "").splitlines(), lineterm="", n=0
        )
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


def ssh_to(cluster: str, node: str, command: str) -> list[str]:
    """The `ssh` command line that logs into `node` of `cluster` and runs `command`: what `hgxkit sim ssh` execs,
    made in this process, where each `python -m hgxkit sim ssh` cost the machine about 0.4 s of CPU to start."""
    from hgxkit.sim import nodes

    found = [n for n in nodes.status(cluster) if n.name == node]
    if not found:
        raise NodeCommandError(f"no node {node} in cluster {cluster} (is it up?)")
    return nodes.ssh_argv(found[0], [command])


def cluster_name(base: str) -> str:
    """The cluster a test uses: `base-<session suffix>`, so two test sessions on one machine (a developer's, a CI
    clone's) and the demo's cluster never share simulated nodes, nor ports (`hgxkit sim up` picks free ones)."""
    return f"{base}-{session_suffix()}"


class TestSession:
    """This pytest session's claim on the clusters it starts, so a later session can clean up after a killed one.

    A lock file, `<state_dir>/test-sessions/<suffix>.lock`, held (flock) while the session lives, lists every
    cluster the session starts, written BEFORE the nodes start. A later session that can take another session's
    lock knows that session is gone (killed, crashed: the kernel drops a dead process's locks) and removes the
    clusters it listed. A held lock (a live session) and clusters no lock lists (the demo's, anyone's own) are
    never touched.
    """

    __test__ = False  # not a test class, despite its name

    def __init__(self, directory: Path, suffix: str) -> None:
        self.directory = directory
        self.suffix = suffix
        self.path = directory / f"{suffix}.lock"
        self._file = None

    def acquire(self) -> list[str]:
        """Take this session's lock; return the clusters a dead session with the same suffix left listed in it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise RuntimeError(
                f"{SUFFIX_ENV}={self.suffix} is in use by another live test session: unset it (each session then "
                "gets its own) or choose another"
            ) from None
        self._file = f
        left = _listed(f)
        f.truncate(0)
        f.write(json.dumps({"pid": os.getpid(), "started": time.time()}) + "\n")
        f.flush()
        return left

    def claim(self, cluster: str) -> None:
        """Record `cluster` as this session's (call before starting it: a kill during `up` must be cleaned too)."""
        assert self._file is not None, "acquire() first"
        self._file.write(json.dumps({"cluster": cluster}) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def release(self) -> None:
        """Done (every cluster removed): delete the lock file and let go of it."""
        if self._file is not None:
            self.path.unlink(missing_ok=True)
            self._file.close()
            self._file = None

    def dead_sessions(self) -> Iterator[tuple[Path, list[str]]]:
        """(lock file, listed clusters) of each other session that is gone, its lock held by us while we yield it;
        the file is deleted after the caller is done with it."""
        for path in sorted(self.directory.glob("*.lock")):
            if path == self.path:
                continue
            with path.open("a+") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live session
                yield path, _listed(f)
                path.unlink(missing_ok=True)


def _listed(f) -> list[str]:
    f.seek(0)
    clusters = []
    for line in f.read().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("cluster"), str):
            clusters.append(entry["cluster"])
    return clusters


def deploy_argv(deploy: str, *data: str, flags: tuple[str, ...] = ("-y",)) -> list[str]:
    """`pyinfra FLAGS inventories/sim.py <deploy> --data …` as a user types it."""
    import sys
    from pathlib import Path

    argv = [str(Path(sys.executable).parent / "pyinfra"), *flags, "inventories/sim.py", deploy]
    for item in data:
        argv += ["--data", item]
    return argv


def deploy_env(cluster: str, env: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "HGXKIT_SIM_CLUSTER": cluster, "PYINFRA_PROGRESS": "off", **(env or {})}


def run_deploy(
    cluster: str,
    deploy: str,
    *data: str,
    timeout: int = 1500,
    env: dict[str, str] | None = None,
    flags: tuple[str, ...] = ("-y",),
):
    """Run `pyinfra -y inventories/sim.py <deploy> --data …` as a user would; return the CompletedProcess."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        deploy_argv(deploy, *data, flags=flags),
        cwd=root,
        env=deploy_env(cluster, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class NodeCommandError(AssertionError):
    """A node command that did not run to its end over SSH, or did not answer as its caller requires."""


_RC_MARK = "__hgxkit_node_rc="


def node_sh(
    cluster: str,
    command: str,
    node: str = "node1",
    timeout: int = 300,
    *,
    answer: bool = False,
    check: bool = False,
) -> str:
    """stdout of `command` on a node, over a new SSH session (nodes may reboot between calls): the one way every
    e2e test runs a node command.

    It fails the test (NodeCommandError) when the command did not run to its end on the node (SSH could not
    connect, was refused, or dropped: the exit-status line the wrapper prints last never came back), with
    `check` when the command exited non-zero, and with `answer` when its stdout is empty, so a "nothing
    changed" comparison can never pass on two empty answers.
    """
    import re
    import subprocess

    wrapped = f"( {command}\n); echo {_RC_MARK}$? >&2"
    done = subprocess.run(ssh_to(cluster, node, wrapped), capture_output=True, text=True, timeout=timeout, check=False)
    marks = re.findall(rf"^{_RC_MARK}(\d+)$", done.stderr, re.M)
    where = f"{node} of {cluster}: {command[:160]!r}"
    if not marks:
        raise NodeCommandError(f"{where} did not complete over SSH (exit {done.returncode}): {done.stderr[-600:]}")
    if check and marks[-1] != "0":
        raise NodeCommandError(f"{where} exited {marks[-1]}: {done.stderr[-600:]}")
    if answer and not done.stdout.strip():
        raise NodeCommandError(f"{where} answered nothing (exit {marks[-1]}): {done.stderr[-600:]}")
    return done.stdout


# When the node's init started (field 22 of /proc/1/stat, in clock ticks since the host booted): a simulated node
# shares the host's kernel, so its boot is its init's start, not the kernel's boot id.
BOOT = "cut -d' ' -f22 /proc/1/stat"


def reboot_node(cluster: str, node: str = "node1", timeout: float = 300) -> None:
    """Reboot `node` and return once it has booted again (its init is a new one) with its engine up."""
    import subprocess

    booted = node_sh(cluster, BOOT, node, check=True).strip()
    subprocess.run(ssh_to(cluster, node, "systemctl reboot"), capture_output=True, timeout=60, check=False)
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = node_sh(cluster, f"{BOOT}; systemctl is-active docker", node, timeout=30).split()
            if len(answer) == 2 and answer[0] != booted and answer[1] == "active":
                return
        except (AssertionError, subprocess.TimeoutExpired):
            pass
        assert time.monotonic() < deadline, f"{node} did not come back from its reboot"
        time.sleep(1)  # the next look, not a wait for the event: the loop ends on the event itself


class Sample(NamedTuple):
    """One probe request on a node: when it started and ended (ns, the host's clock: simulated nodes share the
    kernel's), the port, `health` or `chat` (a real inference request), and the HTTP status (`000`: no answer)."""

    start: int
    end: int
    port: int
    kind: str
    code: str


def parse_samples(text: str) -> list[Sample]:
    """The probe's lines (`start end port kind code`) as samples; a torn or foreign line is skipped."""
    samples = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0].isdigit() and parts[1].isdigit() and parts[2].isdigit():
            samples.append(Sample(int(parts[0]), int(parts[1]), int(parts[2]), parts[3], parts[4]))
    return samples


def service_problems(samples: list[Sample], port: int, window: tuple[int, int], max_gap_s: float = 5.0) -> list[str]:
    """Why `port` was not shown serving without a break over `window` (ns): a health check or inference request
    in the window that failed, or, for each kind, samples that start after the window opens, end before it
    closes, or leave a gap longer than `max_gap_s` in it (a probe that died or stalled proves nothing)."""
    problems = []
    mine = [s for s in samples if s.port == port]
    failed = [s for s in mine if s.code != "200" and s.end >= window[0] and s.start <= window[1]]
    if failed:
        shown = ", ".join(f"{s.kind} {s.code} at {s.start / 1e9:.1f}" for s in failed[:8])
        problems.append(f"port {port}: {len(failed)} of {len(mine)} requests failed ({shown})")
    for kind in ("health", "chat"):
        spans = sorted((s.start, s.end) for s in mine if s.kind == kind)
        if not spans:
            problems.append(f"port {port}: no {kind} samples at all")
            continue
        if spans[0][0] > window[0]:
            problems.append(
                f"port {port}: {kind} samples start {(spans[0][0] - window[0]) / 1e9:.1f} s into the window"
            )
        reach = max(end for _, end in spans)
        if reach < window[1]:
            problems.append(
                f"port {port}: {kind} samples end {(window[1] - reach) / 1e9:.1f} s before the window closes"
            )
        covered = spans[0][1]
        for start, end in spans[1:]:
            # The part of the gap inside the window: a gap that opens before the window or closes after it counts.
            gap = min(start, window[1]) - max(covered, window[0])
            if gap > max_gap_s * 1e9:
                problems.append(f"port {port}: no {kind} sample for {gap / 1e9:.1f} s in the window")
            covered = max(covered, end)
    return problems


_PROBE = r"""stop=/tmp/hgxkit-probe-{tag}.stop; rm -f "$stop"
ns() {{ date +%s%N; }}
for p in {ports}; do
  ( while [ ! -e "$stop" ]; do t=$(ns)
      c=$(curl -s -o /dev/null -m {health_timeout} -w '%{{http_code}}' http://127.0.0.1:$p/health)
      echo "$t $(ns) $p health $c"; sleep 0.2; done ) &
  ( while [ ! -e "$stop" ]; do t=$(ns)
      r=$(curl -s -m 120 -w '\n%{{http_code}}' -H 'Content-Type: application/json' \
          -d '{{"model": "{model}", "max_tokens": {tokens}, "messages": [{{"role": "user", "content": "go on"}}]}}' \
          http://127.0.0.1:$p/v1/chat/completions)
      c=$(printf '%s\n' "$r" | tail -n 1)
      case "$r" in *'"choices"'*'"content"'*'"finish_reason"'*) ;; *) [ "$c" != 200 ] || c=200-but-no-completion ;; esac
      echo "$t $(ns) $p chat $c"; done ) &
done
wait
"""


class ServiceProbe:
    """Health checks and real inference requests (chat completions, one in flight per port at all times) sent
    to some ports of a node from the node itself, for as long as the `with` block runs. A completion counts only
    when its body is one (choices with content and a finish reason), whatever its status says.

        with ServiceProbe(cluster, [5001]) as probe:
            start = time.time_ns(); ...; end = time.time_ns()
        assert not service_problems(probe.samples, 5001, (start, end))
    """

    def __init__(
        self,
        cluster: str,
        ports: list[int],
        node: str = "node1",
        model: str = "deepseek-v4-flash",
        tokens: int = 24,
        health_timeout_s: int = 5,
    ) -> None:
        self.cluster, self.ports, self.node = cluster, ports, node
        self.tag = secrets.token_hex(4)
        self.script = _PROBE.format(
            tag=self.tag, ports=" ".join(map(str, ports)), model=model, tokens=tokens, health_timeout=health_timeout_s
        )
        self.lines: list[str] = []
        self._proc = None
        self._reader = None

    @property
    def samples(self) -> list[Sample]:
        return parse_samples("\n".join(self.lines))

    def __enter__(self) -> ServiceProbe:
        import subprocess
        import threading

        self._proc = subprocess.Popen(ssh_to(self.cluster, self.node, self.script), stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        self._reader = threading.Thread(target=lambda: self.lines.extend(self._proc.stdout), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 120
        while {(s.port, s.kind) for s in self.samples} != {(p, k) for p in self.ports for k in ("health", "chat")}:
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self._stop()
                raise AssertionError(f"the probe on {self.node} did not start answering: {self.lines[-5:]}")
            time.sleep(0.2)
        return self

    def _stop(self) -> None:
        node_sh(self.cluster, f"touch /tmp/hgxkit-probe-{self.tag}.stop", node=self.node)
        assert self._proc is not None and self._reader is not None
        try:
            self._proc.wait(timeout=150)
        except Exception:
            self._proc.kill()
            raise
        self._reader.join(timeout=30)
        node_sh(self.cluster, f"rm -f /tmp/hgxkit-probe-{self.tag}.stop", node=self.node)

    def __exit__(self, *exc: object) -> None:
        self._stop()


FAULT_HOOK = Path(__file__).resolve().parents[1] / "faults" / "hook"
PAUSED_MARK = "HGXKIT-FAULT-PAUSED"


class PausedDeploy:
    """A controller run (the pyinfra CLI, in its own process group) that stops itself (SIGSTOP) at a point of
    hgxkit's code chosen by tests/faults/hook; the test injects its fault there, then resumes or kills it."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        import subprocess
        import threading

        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        self.lines: list[str] = []
        self.paused = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(PAUSED_MARK):
                self.paused.set()

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_paused(self, timeout: float = 900) -> str:
        """Wait until the controller has stopped itself at the point; return what it printed until then."""
        deadline = time.monotonic() + timeout
        while not self.paused.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                if self.proc.poll() is None:
                    self.kill()
                self._reader.join(timeout=30)
                raise AssertionError(f"the controller never reached its pause point:\n{self.text[-4000:]}")
        while Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            time.sleep(0.05)
        return self.text

    def resume(self) -> None:
        import signal

        os.killpg(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the controller's whole process group (pyinfra and anything it started)."""
        import signal

        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        self._reader.join(timeout=30)

    def finish(self, timeout: float = 1500) -> int:
        """Wait for the resumed controller to end; its exit status."""
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=30)
        return rc


def paused_deploy(
    cluster: str, deploy: str, *data: str, at: str, env: dict[str, str] | None = None, flags: tuple[str, ...] = ("-y",)
) -> PausedDeploy:
    """Start `pyinfra -y inventories/sim.py <deploy>` that pauses at `at` (`module:function[:text in args]`)."""
    path = os.pathsep.join(p for p in (str(FAULT_HOOK), os.environ.get("PYTHONPATH", "")) if p)
    environ = deploy_env(cluster, {**(env or {}), "HGXKIT_FAULT_AT": at, "PYTHONPATH": path})
    return PausedDeploy(deploy_argv(deploy, *data, flags=flags), environ)
