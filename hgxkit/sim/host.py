"""Make this machine able to run simulated nodes: the packages, a Docker engine and lxcfs (`hgxkit sim host setup`).

`make demo`, `make test` and `.ci/run` call it first, as `python3 -m hgxkit.sim.host setup` (this module needs
only the standard library, so it runs before `.venv` exists); `hgxkit sim host setup` is the same command.

On Debian or Ubuntu as root it
- installs the Debian packages that provide the missing commands (`apt-get install --no-install-recommends`,
  NEEDRESTART_MODE=l so needrestart never restarts a running service such as dockerd), `python3.X-venv` when
  `python3 -m venv` would fail, and `docker.io` only when no Docker engine answers and no `dockerd` is installed;
- starts `dockerd` when the system engine (/var/run/docker.sock) does not answer (`systemctl start docker`
  under systemd, else `dockerd` in the background, logging to /var/log/hgxkit-dockerd.log);
- starts `lxcfs /var/lib/lxcfs` when lxcfs's /proc/uptime cannot be read, first unmounting the FUSE mount a dead
  lxcfs leaves behind ("Transport endpoint is not connected");
- raises the kernel's inotify limits (`sysctl -w fs.inotify.max_user_instances=1024 …`) when they are lower: each
  simulated node's systemd, journald, dockerd and containerd hold about 8 inotify instances of root's, and the
  default 128 runs out near 15 nodes (a test run's three sessions start more), after which new and running
  nodes die at start in a loop ("is restarting"). The limit is the kernel's, not a node's: it is only raised.
It prints one line per thing it did, and nothing when everything is there (a few milliseconds).

It never restarts or reconfigures a running engine, and never touches an engine it does not own: rootless
Docker, Docker Desktop, an engine on another DOCKER_HOST. Then, as for a missing root or another distribution,
it prints one line saying what is missing and the exact command to run. `--for test` (what `make test` uses)
only warns about what is missing, since the end-to-end tests then skip, except under CI=true, where they fail.

Examples:
    python3 -m hgxkit.sim.host setup                  # what `make demo` runs (exit 1 while something is missing)
    hgxkit sim host setup --for test --dry-run        # what it would do for `make test`, doing nothing
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse

PREFIX = "hgxkit host:"
SYSTEM_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
LXCFS_DIR = "/var/lib/lxcfs"
LXCFS_UPTIME = f"{LXCFS_DIR}/proc/uptime"
DOCKERD_LOG = "/var/log/hgxkit-dockerd.log"
LXCFS_LOG = "/var/log/hgxkit-lxcfs.log"
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "NEEDRESTART_MODE": "l", "NEEDRESTART_SUSPEND": "1"}
PURPOSES = ("demo", "test", "all")
# sysctl -> the least the simulated nodes need (kind's own advice for many systemd-in-Docker nodes, which hit the
# same limits); only ever raised, never lowered.
INOTIFY_MIN = {"fs.inotify.max_user_instances": 1024, "fs.inotify.max_user_watches": 524288}


@dataclass(frozen=True)
class Tool:
    """A command the simulation runs on this machine, the Debian/Ubuntu package that provides it, and why."""

    command: str
    package: str
    why: str
    purposes: tuple[str, ...] = ("demo", "test")


TOOLS = (
    Tool("mmdebstrap", "mmdebstrap", "builds the node image"),
    Tool("lxcfs", "lxcfs", "gives each node its own /proc/uptime, so a reboot shows"),
    Tool("gpg", "gpg", "signs the simulated NVIDIA apt repositories"),
    Tool("gpgv", "gpgv", "checks those signatures"),
    Tool("apt-ftparchive", "apt-utils", "indexes the simulated apt repositories"),
    Tool("dpkg-deb", "dpkg", "builds the simulated NVIDIA packages"),
    Tool("tar", "tar", "packs the node image"),
    Tool("docker-registry", "docker-registry", "fills the nodes' registry mirror with the SGLang stand-in"),
    Tool("python3.11", "python3.11", "runs SGLang's benchmark client store (CPython 3.11)", ("demo",)),
    Tool("ssh", "openssh-client", "`hgxkit sim ssh`, how the end-to-end tests log into nodes", ("test",)),
    Tool("vagrant", "vagrant", "validates the Vagrantfile in its test", ("test",)),
    Tool("chromium", "chromium", "renders the HTML report in its tests", ("test",)),
    Tool("promtool", "prometheus", "checks the generated Prometheus configuration and alert rules", ("test",)),
    Tool("amtool", "prometheus-alertmanager", "checks the generated Alertmanager configuration", ("test",)),
    Tool("docker-compose", "docker-compose", "validates the compose export in its tests", ("test",)),
    Tool("shellcheck", "shellcheck", "checks the Slurm export in its tests", ("test",)),
    Tool("rsync", "rsync", "copies a bundle the way its tests copy one to a site", ("test",)),
    Tool("stress-ng", "stress-ng", "loads the host for `make soak` and the suite under stress", ("test",)),
)


class System:
    """The machine, as host setup reads and changes it. Tests pass a fake that records commands instead."""

    def which(self, command: str) -> str | None:
        return shutil.which(command)

    def read(self, path: str) -> str:
        """The file's text; OSError when it cannot be read (ENOTCONN for a dead FUSE mount)."""
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def euid(self) -> int:
        return os.geteuid()

    def has_module(self, name: str) -> bool:
        return importlib.util.find_spec(name) is not None

    def ping(self, address: str) -> str:
        """'ok', 'denied' (the socket refuses this user) or 'down' for a Docker API address (unix or tcp)."""
        url = urlparse(address)
        try:
            if url.scheme == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(3)
                sock.connect(url.path)
            else:
                sock = socket.create_connection((url.hostname or "127.0.0.1", url.port or 2375), timeout=3)
            with sock:
                sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
                reply = sock.recv(64)
        except PermissionError:
            return "denied"
        except OSError:
            return "down"
        return "ok" if reply.split(b" ", 2)[1:2] == [b"200"] else "down"

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str]:
        """(exit status, output) of a command; 127 when the program is not installed."""
        try:
            res = subprocess.run(list(argv), env={**os.environ, **(env or {})}, capture_output=True, text=True)
        except FileNotFoundError as err:
            return 127, str(err)
        return res.returncode, res.stdout + res.stderr

    def spawn(self, argv: Sequence[str], log: str) -> None:
        """Start a daemon in its own session, its output appended to `log`; it outlives this process."""
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "ab") as out:
            subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass(frozen=True)
class Engine:
    """The Docker engine the simulation would use: DOCKER_HOST, else the system socket (as the Docker SDK does)."""

    address: str
    kind: str  # system | rootless | desktop | local-tcp | remote | other
    state: str  # ok | denied | down | unknown

    @property
    def ours(self) -> bool:
        """True when host setup may start this engine: the system one, on this machine's default socket."""
        return self.kind == "system"


def classify_engine(docker_host: str | None) -> tuple[str, str]:
    """(address, kind) of the engine `docker_host` (the DOCKER_HOST value, or None) names.

    >>> classify_engine(None)
    ('unix:///var/run/docker.sock', 'system')
    >>> classify_engine("unix:///run/user/1000/docker.sock")[1]
    'rootless'
    >>> classify_engine("tcp://10.0.0.5:2376")[1]
    'remote'
    """
    address = docker_host or f"unix://{SYSTEM_SOCKETS[0]}"
    url = urlparse(address)
    if url.scheme == "unix":
        path = url.path
        if path in SYSTEM_SOCKETS:
            return address, "system"
        if path.startswith("/run/user/") or "rootless" in path:
            return address, "rootless"
        if "/.docker/" in path or "docker.raw.sock" in path:
            return address, "desktop"
        return address, "other"
    if url.scheme in ("tcp", "http", "https") and url.hostname in ("127.0.0.1", "localhost", "::1"):
        return address, "local-tcp"
    return address, "remote"


@dataclass(frozen=True)
class Facts:
    """What host setup found; everything `plan` decides from."""

    os_id: str  # "debian", "ubuntu", or another distribution's ID ("" when /etc/os-release is missing)
    os_name: str
    root: bool
    systemd: bool
    missing: tuple[Tool, ...]
    venv_package: str | None  # python3.X-venv when `python3 -m venv` would fail
    engine: Engine
    dockerd_installed: bool
    lxcfs: str  # ok | stale | absent
    sysctls: dict[str, int] = field(default_factory=dict)  # INOTIFY_MIN's keys that could be read -> now


def _sysctls(system: System) -> dict[str, int]:
    out = {}
    for key in INOTIFY_MIN:
        try:
            out[key] = int(system.read("/proc/sys/" + key.replace(".", "/")).strip())
        except (OSError, ValueError):
            continue
    return out


def _os_release(system: System) -> dict[str, str]:
    try:
        text = system.read("/etc/os-release")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"')
    return out


def _lxcfs_state(system: System) -> str:
    try:
        system.read(LXCFS_UPTIME)
        return "ok"
    except OSError as err:
        if err.errno == errno.ENOTCONN:
            return "stale"
    try:
        mounts = system.read("/proc/mounts")
    except OSError:
        mounts = ""
    return "stale" if any(line.split()[1:2] == [LXCFS_DIR] for line in mounts.splitlines()) else "absent"


def gather(system: System, purpose: str, env: dict[str, str] | None = None) -> Facts:
    """Look at the machine (reads only: files, PATH, the Docker socket)."""
    env = dict(os.environ) if env is None else env
    release = _os_release(system)
    ids = {release.get("ID", "")} | set(release.get("ID_LIKE", "").split())
    os_id = "debian" if "debian" in ids else "ubuntu" if "ubuntu" in ids else release.get("ID", "")
    if release.get("ID") == "ubuntu":
        os_id = "ubuntu"
    wanted = [t for t in TOOLS if purpose == "all" or purpose in t.purposes]
    missing = tuple(t for t in wanted if system.which(t.command) is None)
    venv = None if system.has_module("ensurepip") else f"python3.{sys.version_info[1]}-venv"  # Debian's name
    address, kind = classify_engine(env.get("DOCKER_HOST") or None)
    state = system.ping(address) if kind != "remote" or address.startswith(("tcp:", "http")) else "unknown"
    return Facts(
        os_id=os_id,
        os_name=release.get("PRETTY_NAME", release.get("ID", "this system")) or "this system",
        root=system.euid() == 0,
        systemd=system.exists("/run/systemd/system"),
        missing=missing,
        venv_package=venv,
        engine=Engine(address, kind, state),
        dockerd_installed=system.which("dockerd") is not None,
        lxcfs=_lxcfs_state(system),
        sysctls=_sysctls(system),
    )


@dataclass
class Plan:
    """What to do (actions, in order) and what host setup cannot do (problems: one line each, with the command)."""

    packages: list[str] = field(default_factory=list)
    start_dockerd: bool = False
    unmount_lxcfs: bool = False
    start_lxcfs: bool = False
    sysctls: list[str] = field(default_factory=list)  # `key=value` to raise
    problems: list[str] = field(default_factory=list)


def _engine_problem(engine: Engine) -> str | None:
    where = engine.address
    if engine.kind == "remote":
        return (
            f"DOCKER_HOST={where} is another machine's engine, but simulated nodes bind-mount files from this one: "
            "run `unset DOCKER_HOST` (a local engine), then rerun"
        )
    if engine.state == "ok":
        return None
    if engine.state == "denied":
        return f"the Docker engine at {where} refuses this user: run as root (`sudo make demo`) or join group docker"
    if engine.kind == "rootless":
        return f"no rootless Docker engine answers at {where}: run `systemctl --user start docker`"
    if engine.kind == "desktop":
        return f"Docker Desktop does not answer at {where}: start Docker Desktop, or `unset DOCKER_HOST`"
    if engine.kind in ("local-tcp", "other"):
        return f"no Docker engine answers at DOCKER_HOST={where}: start the engine serving it, or `unset DOCKER_HOST`"
    return None  # the system engine: ours to start (or a problem named by plan)


def plan(facts: Facts, purpose: str = "demo") -> Plan:
    """Decide what to do from the facts (pure: nothing is read or changed)."""
    p = Plan()
    debian = facts.os_id in ("debian", "ubuntu")
    engine = facts.engine
    system_down = engine.ours and engine.state == "down"
    packages = sorted({t.package for t in facts.missing})
    if facts.venv_package:
        packages.append(facts.venv_package)
    if system_down and not facts.dockerd_installed:
        packages.append("docker.io")
    problem = _engine_problem(engine)
    if problem:
        p.problems.append(problem)
    if debian and facts.root:
        p.packages = packages
        p.start_dockerd = system_down
        p.unmount_lxcfs = facts.lxcfs == "stale"
        p.start_lxcfs = facts.lxcfs != "ok"
        p.sysctls = [f"{k}={v}" for k, v in INOTIFY_MIN.items() if k in facts.sysctls and facts.sysctls[k] < v]
        return p
    missing = [f"packages {' '.join(packages)}"] if packages else []
    if system_down:
        missing.append(f"a Docker engine on {engine.address}")
    if facts.lxcfs != "ok":
        missing.append(f"lxcfs ({'a dead one left its mount' if facts.lxcfs == 'stale' else 'not running'})")
    if not missing:
        return p
    if debian:
        p.problems.append(
            f"missing {'; '.join(missing)}, and only root can set that up: run "
            f"`sudo python3 -m hgxkit.sim.host setup --for {purpose}` in this checkout"
        )
    else:
        commands = [t.command for t in facts.missing] + (["python3 -m venv"] if facts.venv_package else [])
        commands += ["dockerd"] if system_down else []
        commands += [] if facts.lxcfs == "ok" or "lxcfs" in commands else ["lxcfs"]
        p.problems.append(
            f"{facts.os_name} is not Debian or Ubuntu, so hgxkit cannot set it up: install what provides "
            f"{', '.join(commands)} with its package manager, start dockerd and `lxcfs {LXCFS_DIR}` as root, then rerun"
        )
    return p


def _candidates(system: System, packages: list[str]) -> tuple[list[str], list[str]]:
    """(installable, not installable) among `packages`, from `apt-cache policy` (after `apt-get update`)."""
    _code, out = system.run(["apt-cache", "policy", *packages])
    none: set[str] = set()
    current = None
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
        elif current and line.strip() == "Candidate: (none)":
            none.add(current)
    seen = set(out.split())
    none |= {p for p in packages if f"{p}:" not in seen}  # apt-cache prints nothing for unknown names
    return [p for p in packages if p not in none], [p for p in packages if p in none]


def _wait(system: System, check, seconds: float, step: float = 0.5) -> bool:
    for _ in range(int(seconds / step) + 1):
        if check():
            return True
        system.sleep(step)
    return False


def apply(p: Plan, facts: Facts, system: System, say=print) -> list[str]:
    """Carry out the plan, one line per thing done; return the problems left (the plan's and any new ones)."""
    problems = list(p.problems)
    if p.packages:
        started = time.monotonic()
        code, out = system.run(["apt-get", "update", "-qq"], env=APT_ENV)
        if code != 0:
            problems.append(f"the package lists could not be updated ({_tail(out)}): fix the apt sources, then rerun")
            return problems
        installable, unknown = _candidates(system, p.packages)
        if unknown:
            problems.append(
                f"{', '.join(unknown)}: no such package in this machine's apt sources ({facts.os_name}); install "
                "it another way, then rerun"
            )
        if installable:
            argv = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *installable]
            code, out = system.run(argv, env=APT_ENV)
            if code != 0:
                problems.append(
                    f"installing {' '.join(installable)} failed ({_tail(out)}): run `{' '.join(argv)}` to see why"
                )
                return problems
            say(f"{PREFIX} installed {' '.join(installable)} ({time.monotonic() - started:.0f} s)")
    if p.start_dockerd:
        engine = facts.engine
        if system.ping(engine.address) == "ok":
            pass  # the package's own service started it
        elif not (facts.systemd and system.run(["systemctl", "start", "docker"])[0] == 0):
            system.spawn(["dockerd"], DOCKERD_LOG)
        if system.ping(engine.address) != "ok" and not _wait(system, lambda: system.ping(engine.address) == "ok", 60):
            log = "journalctl -u docker" if facts.systemd else DOCKERD_LOG
            problems.append(f"dockerd did not answer within 60 s: see {log}")
        else:
            say(f"{PREFIX} started dockerd ({engine.address} answers)")
    if p.unmount_lxcfs:
        for argv in (
            ["fusermount3", "-u", "-z", LXCFS_DIR],
            ["fusermount", "-u", "-z", LXCFS_DIR],
            ["umount", "-l", LXCFS_DIR],
        ):
            if system.which(argv[0]) and system.run(argv)[0] == 0:
                say(f"{PREFIX} unmounted the stale lxcfs mount at {LXCFS_DIR} (its lxcfs had died)")
                break
        else:
            problems.append(f"the stale lxcfs mount at {LXCFS_DIR} would not unmount: run `umount -l {LXCFS_DIR}`")
            return problems
    if p.start_lxcfs:
        if _lxcfs_state(system) == "ok":
            pass  # the package's own service started it
        elif not (facts.systemd and system.run(["systemctl", "start", "lxcfs"])[0] == 0):
            system.run(["mkdir", "-p", LXCFS_DIR])
            system.spawn(["lxcfs", LXCFS_DIR], LXCFS_LOG)
        if _wait(system, lambda: _lxcfs_state(system) == "ok", 10, 0.2):
            say(f"{PREFIX} started lxcfs on {LXCFS_DIR}")
        else:
            problems.append(f"lxcfs did not start: see {LXCFS_LOG if not facts.systemd else 'journalctl -u lxcfs'}")
    if p.sysctls:
        code, out = system.run(["sysctl", "-w", *p.sysctls])
        if code == 0:
            say(f"{PREFIX} raised {', '.join(p.sysctls)} (many simulated nodes run out of the defaults)")
        else:  # a read-only /proc/sys (a container): few nodes still run; say so and go on
            say(
                f"{PREFIX} could not raise {', '.join(p.sysctls)} ({_tail(out)}): more than ~15 simulated nodes "
                "at once may fail to start"
            )
    return problems


def _tail(out: str) -> str:
    lines = [line for line in out.strip().splitlines() if line.strip()]
    return " | ".join(lines[-2:])[-200:] or "no output"


def setup(
    purpose: str = "demo",
    *,
    dry_run: bool = False,
    system: System | None = None,
    say=print,
    env: dict[str, str] | None = None,
) -> int:
    """Host setup for `purpose` (demo, test or all); the exit status: 1 while something `purpose` needs is missing
    (for `test`, only under CI=true: elsewhere the end-to-end tests skip instead)."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose {purpose!r}: use one of {PURPOSES}")
    env = dict(os.environ) if env is None else env
    system = system or System()
    facts = gather(system, purpose, env)
    todo = plan(facts, purpose)
    if dry_run:
        for line in describe(todo):
            say(f"{PREFIX} would {line}")
        problems = todo.problems
    else:
        problems = apply(todo, facts, system, say)
    strict = purpose != "test" or env.get("CI") == "true"
    for problem in problems:
        say(f"{PREFIX} {'error' if strict else 'warning'}: {problem}")
    if problems and not strict:
        say(f"{PREFIX} the end-to-end tests will skip until this is fixed (under CI=true they fail)")
    return 1 if problems and strict else 0


def describe(p: Plan) -> list[str]:
    """What the plan would do, one line per action (for --dry-run)."""
    lines = []
    if p.packages:
        lines.append(f"install {' '.join(p.packages)} (apt-get, NEEDRESTART_MODE=l)")
    if p.start_dockerd:
        lines.append("start dockerd")
    if p.unmount_lxcfs:
        lines.append(f"unmount the stale lxcfs mount at {LXCFS_DIR}")
    if p.start_lxcfs:
        lines.append(f"start lxcfs on {LXCFS_DIR}")
    if p.sysctls:
        lines.append(f"raise {', '.join(p.sysctls)} (sysctl -w)")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--for",
        dest="purpose",
        choices=PURPOSES,
        default="demo",
        help="what the machine is set up for: demo (default), test (also vagrant, chromium, ssh, promtool, amtool; "
        "only warns unless CI=true) or all",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what it would do, and do nothing")


def main(argv: Sequence[str] | None = None) -> int:
    """`python3 -m hgxkit.sim.host setup …`: the same as `hgxkit sim host setup …`, with the standard library only."""
    parser = argparse.ArgumentParser(
        prog="python3 -m hgxkit.sim.host", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="setup", required=True)
    add_arguments(sub.add_parser("setup", help="install and start what the simulated nodes need"))
    args = parser.parse_args(argv)
    return setup(args.purpose, dry_run=args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
