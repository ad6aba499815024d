"""`hgxkit sim host setup` against a fake machine: files under a fake root, commands recorded, never executed.

Each test builds the machine a user might have (fresh Debian as root, a used one, no root, Fedora, rootless
Docker, a dead lxcfs...) and checks what host setup would run there, what it prints, and its exit status.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hgxkit.cli import main
from hgxkit.sim import host
from hgxkit.sim.host import TOOLS, System

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
UBUNTU = 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nID=ubuntu\nID_LIKE=debian\n'
FEDORA = 'PRETTY_NAME="Fedora Linux 40 (Server Edition)"\nID=fedora\n'
ALL_COMMANDS = {t.command for t in TOOLS} | {"dockerd", "docker"}
PACKAGE_OF = {t.command: t.package for t in TOOLS} | {"dockerd": "docker.io", "docker": "docker.io"}


class FakeMachine(System):
    """A machine under `root`: installed commands, a Docker engine that answers or not, lxcfs's mount.

    apt-get install adds the packages' commands; spawning dockerd or lxcfs (or `systemctl start`) starts them.
    Every command is recorded in `ran` (argv, env) and `spawned`; nothing is executed.
    """

    def __init__(
        self,
        root: Path,
        *,
        os_release: str = DEBIAN,
        commands: set[str] | None = None,
        euid: int = 0,
        engine: str = "ok",
        lxcfs: str = "ok",
        systemd: bool = False,
        ensurepip: bool = True,
        no_candidate: set[str] | None = None,
        engines: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        (root / "etc").mkdir(parents=True, exist_ok=True)
        (root / "etc" / "os-release").write_text(os_release)
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc" / "mounts").write_text("proc /proc proc rw 0 0\n")
        if systemd:
            (root / "run" / "systemd" / "system").mkdir(parents=True)
        self.commands = set(ALL_COMMANDS if commands is None else commands)
        self._euid = euid
        self.engines = {"unix:///var/run/docker.sock": engine, **(engines or {})}
        self.lxcfs = lxcfs  # ok | stale | absent
        self.ensurepip = ensurepip
        self.no_candidate = no_candidate or set()
        self.ran: list[tuple[list[str], dict[str, str] | None]] = []
        self.spawned: list[list[str]] = []
        self.slept = 0.0
        if lxcfs == "stale":
            (root / "proc" / "mounts").write_text("lxcfs /var/lib/lxcfs fuse.lxcfs rw 0 0\n")

    def which(self, command: str) -> str | None:
        return f"/usr/bin/{command}" if command in self.commands else None

    def read(self, path: str) -> str:
        if path == host.LXCFS_UPTIME:
            if self.lxcfs == "stale":
                raise OSError(errno.ENOTCONN, "Transport endpoint is not connected")
            if self.lxcfs != "ok":
                raise FileNotFoundError(errno.ENOENT, "No such file or directory")
            return "12.0 10.0\n"
        return (self.root / path.lstrip("/")).read_text()

    def exists(self, path: str) -> bool:
        return (self.root / path.lstrip("/")).exists()

    def euid(self) -> int:
        return self._euid

    def has_module(self, name: str) -> bool:
        return self.ensurepip if name == "ensurepip" else True

    def ping(self, address: str) -> str:
        return self.engines.get(address, "down")

    def run(self, argv, env=None):
        argv = list(argv)
        self.ran.append((argv, env))
        if argv[:2] == ["apt-cache", "policy"]:
            out = ""
            for pkg in argv[2:]:
                candidate = "(none)" if pkg in self.no_candidate else "1.0-1"
                out += f"{pkg}:\n  Installed: (none)\n  Candidate: {candidate}\n  Version table:\n"
            return 0, out
        if argv[:2] == ["apt-get", "install"]:
            packages = {a for a in argv[2:] if not a.startswith("-")}
            self.commands |= {c for c, p in PACKAGE_OF.items() if p in packages}
            self.ensurepip |= any(p.endswith("-venv") for p in packages)
            if "lxcfs" in packages and self.exists("/run/systemd/system"):
                self.lxcfs = "ok"  # the package's service starts it under systemd
            return 0, ""
        if argv[:2] == ["systemctl", "start"]:
            self._start(argv[2])
            return 0, ""
        if argv[0] in ("fusermount", "umount"):
            self.lxcfs = "absent"
            return 0, ""
        return 0, ""

    def spawn(self, argv, log):
        self.spawned.append(list(argv))
        self._start("docker" if argv[0] == "dockerd" else argv[0])

    def _start(self, what: str) -> None:
        if what == "docker" and "dockerd" in self.commands:
            self.engines["unix:///var/run/docker.sock"] = "ok"
        if what == "lxcfs" and "lxcfs" in self.commands and self.lxcfs == "absent":
            self.lxcfs = "ok"

    def sleep(self, seconds: float) -> None:
        self.slept += seconds

    def argvs(self) -> list[list[str]]:
        return [argv for argv, _ in self.ran]


def setup(machine: FakeMachine, purpose: str = "demo", env: dict[str, str] | None = None, dry_run: bool = False):
    lines: list[str] = []
    code = host.setup(purpose, system=machine, say=lines.append, env=env or {}, dry_run=dry_run)
    return code, lines


def test_a_ready_machine_is_left_alone_silently(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path)
    assert setup(machine, "all") == (0, [])
    assert machine.ran == [] and machine.spawned == []


def test_a_fresh_debian_machine_as_root_gets_everything(tmp_path: Path) -> None:
    machine = FakeMachine(
        tmp_path, commands={"tar", "dpkg-deb", "python3.11"}, engine="down", lxcfs="absent", ensurepip=False
    )
    code, lines = setup(machine, "demo")
    assert code == 0, lines
    venv = f"python{sys.version_info[0]}.{sys.version_info[1]}-venv"
    wanted = ["apt-utils", "docker-registry", "gpg", "gpgv", "lxcfs", "mmdebstrap", venv, "docker.io"]
    assert machine.argvs() == [
        ["apt-get", "update", "-qq"],
        ["apt-cache", "policy", *wanted],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *wanted],
        ["mkdir", "-p", "/var/lib/lxcfs"],
    ]
    for _argv, env in machine.ran[:1] + machine.ran[2:3]:
        assert env == {"DEBIAN_FRONTEND": "noninteractive", "NEEDRESTART_MODE": "l", "NEEDRESTART_SUSPEND": "1"}
    assert machine.spawned == [["dockerd"], ["lxcfs", "/var/lib/lxcfs"]]
    assert [line.split(" (")[0] for line in lines] == [
        f"hgxkit host: installed {' '.join(wanted)}",
        "hgxkit host: started dockerd",
        "hgxkit host: started lxcfs on /var/lib/lxcfs",
    ]
    assert setup(machine, "demo") == (0, [])  # the second run is a no-op


def test_test_purpose_adds_the_test_tools_but_not_the_client_python(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, commands=ALL_COMMANDS - {"vagrant", "chromium", "ssh", "python3.11"})
    code, lines = setup(machine, "test")
    assert code == 0
    assert machine.argvs()[2] == [
        "apt-get",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "chromium",
        "openssh-client",
        "vagrant",
    ]
    assert lines[0].startswith("hgxkit host: installed chromium openssh-client vagrant")


def test_a_running_engine_is_never_restarted_nor_docker_io_installed(tmp_path: Path) -> None:
    # A used machine: dockerd runs (from Docker CE, say: no `docker` CLI from Debian), lxcfs runs, one tool missing.
    machine = FakeMachine(tmp_path, commands=ALL_COMMANDS - {"docker", "dockerd", "mmdebstrap"}, systemd=True)
    code, lines = setup(machine, "demo")
    assert code == 0 and lines[0].startswith("hgxkit host: installed mmdebstrap (")
    assert machine.argvs()[2] == ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "mmdebstrap"]
    assert not any("docker" in " ".join(argv) for argv in machine.argvs())
    assert not any(argv[0] == "systemctl" for argv in machine.argvs()) and machine.spawned == []
    assert machine.ran[2][1]["NEEDRESTART_MODE"] == "l"  # needrestart lists services, never restarts them


def test_under_systemd_the_services_are_started_not_spawned(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, engine="down", lxcfs="absent", systemd=True)
    code, lines = setup(machine)
    assert code == 0
    assert machine.argvs() == [["systemctl", "start", "docker"], ["systemctl", "start", "lxcfs"]]
    assert machine.spawned == []
    assert lines == [
        "hgxkit host: started dockerd (unix:///var/run/docker.sock answers)",
        "hgxkit host: started lxcfs on /var/lib/lxcfs",
    ]


def test_a_dead_lxcfs_mount_is_unmounted_before_lxcfs_starts(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, lxcfs="stale", commands=ALL_COMMANDS | {"umount"})  # no fusermount: Debian 12
    code, lines = setup(machine)
    assert code == 0
    assert machine.argvs() == [["umount", "-l", "/var/lib/lxcfs"], ["mkdir", "-p", "/var/lib/lxcfs"]]
    assert machine.spawned == [["lxcfs", "/var/lib/lxcfs"]]
    assert lines == [
        "hgxkit host: unmounted the stale lxcfs mount at /var/lib/lxcfs (its lxcfs had died)",
        "hgxkit host: started lxcfs on /var/lib/lxcfs",
    ]


def test_a_dead_lxcfs_mount_that_will_not_unmount_stops_there(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, lxcfs="stale", commands=ALL_COMMANDS | {"fusermount3", "umount"})
    machine.run = lambda argv, env=None: (machine.ran.append((list(argv), env)), (32, "busy"))[1]  # type: ignore[method-assign]
    code, lines = setup(machine)
    assert code == 1 and machine.spawned == []
    assert machine.argvs() == [["fusermount3", "-u", "-z", "/var/lib/lxcfs"], ["umount", "-l", "/var/lib/lxcfs"]]
    assert lines == [
        "hgxkit host: error: the stale lxcfs mount at /var/lib/lxcfs would not unmount: run `umount -l /var/lib/lxcfs`"
    ]


def test_not_root_gets_one_line_with_the_command(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, euid=1000, commands=ALL_COMMANDS - {"lxcfs"}, lxcfs="absent")
    code, lines = setup(machine)
    assert (code, machine.ran, machine.spawned) == (1, [], [])
    assert lines == [
        "hgxkit host: error: missing packages lxcfs; lxcfs (not running), and only root can set that up: run "
        "`sudo python3 -m hgxkit.sim.host setup --for demo` in this checkout"
    ]


def test_for_test_only_warns_unless_ci(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, euid=1000, engine="down")
    code, lines = setup(machine, "test")
    assert code == 0 and machine.ran == []
    assert lines[0].startswith("hgxkit host: warning: missing a Docker engine on unix:///var/run/docker.sock")
    assert lines[-1] == "hgxkit host: the end-to-end tests will skip until this is fixed (under CI=true they fail)"
    code, lines = setup(machine, "test", env={"CI": "true"})
    assert code == 1 and lines[0].startswith("hgxkit host: error: ")


def test_another_distribution_is_told_what_to_install(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, os_release=FEDORA, commands=ALL_COMMANDS - {"mmdebstrap", "docker-registry"})
    code, lines = setup(machine)
    assert (code, machine.ran) == (1, [])
    assert lines == [
        "hgxkit host: error: Fedora Linux 40 (Server Edition) is not Debian or Ubuntu, so hgxkit cannot set it "
        "up: install what provides mmdebstrap, docker-registry with its package manager, start dockerd and "
        "`lxcfs /var/lib/lxcfs` as root, then rerun"
    ]


@pytest.mark.parametrize(
    ("docker_host", "message"),
    [
        (
            "unix:///run/user/1000/docker.sock",
            "no rootless Docker engine answers at unix:///run/user/1000/docker.sock: run `systemctl --user start docker`",
        ),
        (
            "unix:///home/me/.docker/desktop/docker.sock",
            "Docker Desktop does not answer at unix:///home/me/.docker/desktop/docker.sock: start Docker Desktop, or "
            "`unset DOCKER_HOST`",
        ),
        (
            "tcp://10.1.2.3:2376",
            "DOCKER_HOST=tcp://10.1.2.3:2376 is another machine's engine, but simulated nodes bind-mount files from "
            "this one: run `unset DOCKER_HOST` (a local engine), then rerun",
        ),
    ],
)
def test_an_engine_it_may_not_touch_gets_one_line(tmp_path: Path, docker_host: str, message: str) -> None:
    # The system socket is down and dockerd is not installed, but DOCKER_HOST names another engine: leave it be.
    machine = FakeMachine(tmp_path, commands=ALL_COMMANDS - {"dockerd", "docker"}, engine="down")
    code, lines = setup(machine, env={"DOCKER_HOST": docker_host})
    assert (code, machine.ran, machine.spawned) == (1, [], [])
    assert lines == [f"hgxkit host: error: {message}"]


def test_a_remote_engine_is_refused_even_when_it_answers(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, engines={"tcp://10.1.2.3:2376": "ok"})
    code, lines = setup(machine, env={"DOCKER_HOST": "tcp://10.1.2.3:2376"})
    assert code == 1 and "is another machine's engine" in lines[0]


def test_a_package_the_archive_lacks_is_named_and_the_rest_installed(tmp_path: Path) -> None:
    machine = FakeMachine(
        tmp_path, os_release=UBUNTU, commands=ALL_COMMANDS - {"chromium", "vagrant"}, no_candidate={"chromium"}
    )
    code, lines = setup(machine, "test", env={"CI": "true"})
    assert code == 1
    assert machine.argvs()[2] == ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "vagrant"]
    assert lines[0].startswith("hgxkit host: installed vagrant (")
    assert lines[1] == (
        "hgxkit host: error: chromium: no such package in this machine's apt sources "
        "(Ubuntu 24.04.1 LTS); install it another way, then rerun"
    )


def test_dry_run_says_what_it_would_do_and_does_nothing(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, commands=ALL_COMMANDS - {"dockerd", "docker", "gpg"}, engine="down", lxcfs="stale")
    code, lines = setup(machine, dry_run=True)
    assert (code, machine.ran, machine.spawned) == (0, [], [])
    assert lines == [
        "hgxkit host: would install gpg docker.io (apt-get, NEEDRESTART_MODE=l)",
        "hgxkit host: would start dockerd",
        "hgxkit host: would unmount the stale lxcfs mount at /var/lib/lxcfs",
        "hgxkit host: would start lxcfs on /var/lib/lxcfs",
    ]


def test_a_dockerd_that_never_answers_is_reported_with_its_log(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path, engine="down")
    machine._start = lambda what: None  # type: ignore[method-assign]
    code, lines = setup(machine)
    assert code == 1 and machine.slept >= 60
    assert lines == ["hgxkit host: error: dockerd did not answer within 60 s: see /var/log/hgxkit-dockerd.log"]


def test_host_setup_is_the_one_sim_command_without_the_extra_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """How the CLI wraps its handlers; a real install without the extra: tests/unit/project/test_controller_install.py."""
    from hgxkit.sim import cli as sim_cli

    monkeypatch.setattr(sim_cli, "sim_extra_missing", lambda: ["docker"])
    monkeypatch.setattr(host, "System", lambda: FakeMachine(tmp_path))
    assert main(["sim", "host", "setup", "--for", "test"]) == 0
    capsys.readouterr()
    assert main(["sim", "status"]) == 2  # every other `hgxkit sim` command needs the Docker SDK
    err = capsys.readouterr().err
    assert err.startswith("hgxkit: error: `hgxkit sim` needs docker (the 'sim' extra, not installed): pip install ")
    assert err.count("\n") == 1


def test_the_cli_runs_host_setup_without_docker_installed_and_refuses_the_rest(tmp_path: Path) -> None:
    """The Docker SDK really absent (not a patched lookup): this environment's site-packages rebuilt without
    `docker`, Python started with -S so nothing else is on the path; `host setup` runs, `sim status` refuses."""
    import site

    bare = tmp_path / "site-packages"
    bare.mkdir()
    (packages,) = [p for p in map(Path, site.getsitepackages()) if p.is_dir() and (p / "pyinfra").exists()]
    for entry in packages.iterdir():
        if entry.name != "docker" and not entry.name.startswith("docker-"):
            (bare / entry.name).symlink_to(entry)
    root = Path(__file__).resolve().parents[3]

    def python(*args: str, where: Path = bare) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{where}", "CI": ""}
        return subprocess.run([sys.executable, "-S", *args], cwd=tmp_path, env=env, capture_output=True, text=True)

    gone = python("-c", "import docker")
    assert gone.returncode == 1 and gone.stderr.endswith("ModuleNotFoundError: No module named 'docker'\n")
    found = python("-c", "import hgxkit, pyinfra; print(hgxkit.__file__)")
    assert found.stdout == f"{root}/hgxkit/__init__.py\n", found.stderr
    setup = python("-m", "hgxkit", "sim", "host", "setup", "--for", "test", "--dry-run")
    with_docker = python("-m", "hgxkit", "sim", "host", "setup", "--for", "test", "--dry-run", where=packages)
    assert (setup.returncode, setup.stdout, setup.stderr) == (
        with_docker.returncode,
        with_docker.stdout,
        with_docker.stderr,
    )
    assert "Traceback" not in setup.stderr
    status = python("-m", "hgxkit", "sim", "status")
    assert status.returncode == 2, status.stderr
    assert status.stderr.startswith("hgxkit: error: `hgxkit sim` needs docker (the 'sim' extra, not installed): ")
    assert status.stderr.count("\n") == 1


def test_the_module_runs_on_the_standard_library_alone() -> None:
    """`make` runs `python3 -m hgxkit.sim.host` before .venv exists: it must import nothing outside the stdlib."""
    code = (
        "import sys; import hgxkit.sim.host; "
        "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names) - {'hgxkit', '__main__'}))"
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_classify_engine() -> None:
    assert host.classify_engine("unix:///run/docker.sock") == ("unix:///run/docker.sock", "system")
    assert host.classify_engine("tcp://127.0.0.1:2375")[1] == "local-tcp"
    assert host.classify_engine("ssh://me@builder")[1] == "remote"
    assert host.classify_engine("unix:///srv/engine.sock")[1] == "other"


def _inotify(machine: FakeMachine, instances: str, watches: str) -> None:
    folder = machine.root / "proc" / "sys" / "fs" / "inotify"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "max_user_instances").write_text(instances)
    (folder / "max_user_watches").write_text(watches)


def test_inotify_limits_below_what_many_nodes_need_are_raised_never_lowered(tmp_path: Path) -> None:
    low = FakeMachine(tmp_path / "low")
    _inotify(low, "128\n", "192530\n")
    assert setup(low, "all") == (
        0,
        [
            "hgxkit host: raised fs.inotify.max_user_instances=1024, "
            "fs.inotify.max_user_watches=524288 (many simulated nodes run out of the "
            "defaults)"
        ],
    )
    assert low.argvs() == [["sysctl", "-w", "fs.inotify.max_user_instances=1024", "fs.inotify.max_user_watches=524288"]]
    high = FakeMachine(tmp_path / "high")
    _inotify(high, "8192\n", "192530\n")  # one already higher: only the other is raised
    assert setup(high, "all")[0] == 0 and high.argvs() == [["sysctl", "-w", "fs.inotify.max_user_watches=524288"]]
    unreadable = FakeMachine(tmp_path / "unreadable")  # no /proc/sys there: nothing to judge, nothing done
    assert setup(unreadable, "all") == (0, []) and unreadable.argvs() == []
    user = FakeMachine(tmp_path / "user", euid=1000)
    _inotify(user, "128\n", "8192\n")
    assert setup(user, "all") == (0, []) and user.argvs() == []
    dry = FakeMachine(tmp_path / "dry")
    _inotify(dry, "128\n", "524288\n")
    assert (
        setup(dry, "all", dry_run=True)
        == (0, ["hgxkit host: would raise fs.inotify.max_user_instances=1024 (sysctl -w)"])
        and dry.argvs() == []
    )


def test_a_read_only_proc_sys_is_said_and_setup_goes_on(tmp_path: Path) -> None:
    class ReadOnly(FakeMachine):
        def run(self, argv, env=None):
            if list(argv)[:1] == ["sysctl"]:
                self.ran.append((list(argv), env))
                return 255, "sysctl: permission denied on key fs.inotify.max_user_instances\n"
            return super().run(argv, env)

    machine = ReadOnly(tmp_path)
    _inotify(machine, "128\n", "524288\n")
    code, lines = setup(machine, "all")
    assert code == 0 and lines == [
        "hgxkit host: could not raise fs.inotify.max_user_instances=1024 (sysctl: "
        "permission denied on key fs.inotify.max_user_instances): more than ~15 "
        "simulated nodes at once may fail to start"
    ]
