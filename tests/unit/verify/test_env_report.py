"""The engine's environment report is made once per container and read back: the scripts run in a real sh,
with `docker`, `systemd-run` and `systemctl` stood in on PATH (systemd-run runs the unit's program at once)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hgxkit.hostcmd import text
from hgxkit.kinds.sglang import SGLANG
from hgxkit.kinds.vllm import VLLM
from hgxkit.verify.envreport import read_env_report, report_unit, start_env_report

DOCKER = """#!/bin/sh
# docker inspect -f '{{.Id}}' NAME | docker exec NAME WORDS...
state={state}
case "$1" in
  inspect) [ -f "$state/id" ] || exit 1; cat "$state/id" ;;
  exec) shift; echo "$*" >> "$state/execs"; echo "Python: 3.12"; echo "container: $1"; [ -f "$state/fail" ] && exit 3; exit 0 ;;
esac
"""
SYSTEMD_RUN = """#!/bin/sh
while [ "$1" != /bin/sh ]; do echo "$1" >> {state}/units; shift; done
exec "$@"
"""


@pytest.fixture
def host(tmp_path: Path) -> dict:
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in {"docker": DOCKER, "systemd-run": SYSTEMD_RUN, "systemctl": "#!/bin/sh\nexit 3\n"}.items():
        (bin_dir / name).write_text(body.replace("{state}", str(state)))
        (bin_dir / name).chmod(0o755)
    (state / "id").write_text("a" * 64 + "\n")
    return {
        "env": {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        "state": state,
        "folder": str(tmp_path / "verify" / "env-reports"),
    }


def sh(host: dict, command) -> list[str]:
    done = subprocess.run(["sh", "-c", text(command)], env=host["env"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def execs(host: dict) -> list[str]:
    path = host["state"] / "execs"
    return path.read_text().splitlines() if path.exists() else []


def test_made_once_then_kept_for_the_same_container(host: dict) -> None:
    assert sh(host, start_env_report(SGLANG.env_report, "dsv4-0", host["folder"])) == ["making"]
    assert sh(host, read_env_report("dsv4-0", host["folder"])) == ["Python: 3.12", "container: dsv4-0"]
    assert execs(host) == ["dsv4-0 python3 -m sglang.check_env"]
    assert sh(host, start_env_report(SGLANG.env_report, "dsv4-0", host["folder"])) == ["kept"]
    assert sh(host, read_env_report("dsv4-0", host["folder"])) == ["Python: 3.12", "container: dsv4-0"]
    assert len(execs(host)) == 1  # the second verify ran nothing in the container
    assert (host["state"] / "units").read_text().split()[:2] == ["--unit", report_unit("dsv4-0")]
    report = Path(host["folder"]) / "dsv4-0.txt"
    assert oct(report.stat().st_mode & 0o777) == "0o600" and oct(report.parent.stat().st_mode & 0o777) == "0o700"


def test_a_new_container_makes_a_new_report_and_the_old_one_is_not_shown(host: dict) -> None:
    sh(host, start_env_report(VLLM.env_report, "qwen-0", host["folder"]))
    (host["state"] / "id").write_text("b" * 64 + "\n")  # a rollout replaced the container
    assert sh(host, read_env_report("qwen-0", host["folder"])) == []  # the kept one belongs to the old container
    assert sh(host, start_env_report(VLLM.env_report, "qwen-0", host["folder"])) == ["making"]
    assert execs(host) == ["qwen-0 vllm collect-env"] * 2


def test_a_failed_report_is_shown_and_made_again(host: dict) -> None:
    (host["state"] / "fail").write_text("")
    assert sh(host, start_env_report(SGLANG.env_report, "dsv4-0", host["folder"])) == ["making"]
    assert sh(host, read_env_report("dsv4-0", host["folder"])) == ["Python: 3.12", "container: dsv4-0"]
    assert sh(host, start_env_report(SGLANG.env_report, "dsv4-0", host["folder"])) == ["making"]


def test_no_container_no_report(host: dict) -> None:
    (host["state"] / "id").unlink()
    assert sh(host, start_env_report(SGLANG.env_report, "dsv4-0", host["folder"])) == ["none"]
    assert sh(host, read_env_report("dsv4-0", host["folder"])) == []
    assert execs(host) == []


def test_a_hostile_container_name_stays_one_word(host: dict, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    name = f"x;touch {marker};$(touch {marker})`touch {marker}`"
    sh(host, start_env_report(SGLANG.env_report, name, host["folder"]))
    sh(host, read_env_report(name, host["folder"]))
    assert not marker.exists()
    assert execs(host) == [f"{name} python3 -m sglang.check_env"]  # one word, as given


def test_a_unit_left_running_by_a_cut_off_verify_is_waited_for_not_started_again(host: dict) -> None:
    systemctl = Path(host["env"]["PATH"].split(":")[0]) / "systemctl"
    systemctl.write_text("#!/bin/sh\nexit 0\n")  # is-active: the earlier verify's unit still runs
    assert sh(host, start_env_report(SGLANG.env_report, "dsv4-0", host["folder"])) == ["making"]
    assert execs(host) == [] and not (host["state"] / "units").exists()
    assert sh(host, read_env_report("dsv4-0", host["folder"], wait_s=1)) == []  # gave up waiting: no report
