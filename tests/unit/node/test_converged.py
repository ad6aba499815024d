"""Bring-up's skip decision (hgxkit/node/converged.py): skipped only when the node state and what judges it
both match the record the last passed bring-up left; anything else, or recheck, runs every role."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hgxkit.hostcmd import text
from hgxkit.node.converged import (
    RECORD_MARK,
    NodeState,
    judged_by,
    parse_state,
    rerun_reason,
    skip_reason,
    source_files,
    state_command,
    verified_record,
)

STATE = ("3f2a-boot", "nvidia-open 580.105.08-1 hold ok installed", "docker.service enabled active", "xid 0")
NOW = datetime(2026, 12, 1, 6, 0, tzinfo=timezone.utc)


def output(state: tuple[str, ...], record: dict | None) -> list[str]:
    import json

    return [*state, RECORD_MARK, *([json.dumps(record)] if record else [])]


def test_an_unchanged_node_is_skipped_with_the_reason() -> None:
    record = verified_record(NodeState(STATE), "judge-1", now=NOW)
    state, parsed = parse_state(output(STATE, record))
    assert parsed == record and state.boot_id == "3f2a-boot"
    reason = skip_reason(state, "judge-1", parsed, recheck=False)
    assert reason is not None and "2026-12-01T06:00:00Z" in reason and "recheck=true" in reason


@pytest.mark.parametrize(
    "changed",
    [
        ("new-boot", *STATE[1:]),  # rebooted
        (STATE[0], "nvidia-open 580.95.05-1 hold ok installed", *STATE[2:]),  # another driver
        (STATE[0], "nvidia-open 580.105.08-1 install ok installed", *STATE[2:]),  # no longer held
        (*STATE[:2], "docker.service enabled inactive", STATE[3]),  # a unit stopped
        (*STATE[:3], "xid 1"),  # an XID event since
    ],
)
def test_any_change_of_what_bringup_judges_runs_it(changed: tuple[str, ...]) -> None:
    record = verified_record(NodeState(STATE), "judge-1", now=NOW)
    state, parsed = parse_state(output(changed, record))
    assert skip_reason(state, "judge-1", parsed, recheck=False) is None


@pytest.mark.parametrize(
    "changed,said",
    [
        (("new-boot", *STATE[1:]), "the boot changed"),
        ((STATE[0], "nvidia-open 580.95.05-1 hold ok installed", *STATE[2:]), "bring-up's packages changed"),
        ((*STATE, "/etc/docker/daemon.json 120 1.5 1.5"), "its managed files changed"),
        ((*STATE[:3], "xid 1"), "the XID count (was: xid 0; now: xid 1) changed"),
        ((*STATE, "Id=docker.service", "ActiveState=failed"), "its units changed"),
        ((*STATE, "gpus unknown (unknown): no output"), "the GPUs (now: gpus unknown (unknown): no output) changed"),
    ],
)
def test_a_run_that_checks_again_says_what_changed(changed: tuple[str, ...], said: str) -> None:
    record = verified_record(NodeState(STATE), "judge-1", now=NOW)
    reason = rerun_reason(NodeState(changed), "judge-1", record)
    assert reason == f"{said} since the checks passed at 2026-12-01T06:00:00Z"
    assert rerun_reason(NodeState(STATE), "judge-2", record).startswith("the knobs or hgxkit's checks changed")
    assert rerun_reason(NodeState(STATE), "judge-1", record) is None


def test_other_knobs_or_checks_recheck_or_no_record_run_it() -> None:
    record = verified_record(NodeState(STATE), "judge-1", now=NOW)
    state = NodeState(STATE)
    assert skip_reason(state, "judge-2", record, recheck=False) is None
    assert skip_reason(state, "judge-1", record, recheck=True) is None
    assert skip_reason(state, "judge-1", None, recheck=False) is None
    assert skip_reason(NodeState(()), "judge-1", verified_record(NodeState(()), "judge-1"), recheck=False) is None


def test_a_damaged_record_counts_as_none() -> None:
    state, record = parse_state([*STATE, RECORD_MARK, "{not json"])
    assert record is None and state.lines == STATE


def test_judged_by_follows_knob_values_and_source_text(tmp_path: Path) -> None:
    source = tmp_path / "role.py"
    source.write_text("CHECK = 1\n")
    first = judged_by({"nvidia_driver_version": "580.105.08"}, [source])
    assert judged_by({"nvidia_driver_version": "580.105.08"}, [source]) == first
    assert judged_by({"nvidia_driver_version": "580.95.05"}, [source]) != first
    source.write_text("CHECK = 2\n")
    assert judged_by({"nvidia_driver_version": "580.105.08"}, [source]) != first


def test_source_files_take_a_folder_as_its_python_files_and_a_file_as_itself(tmp_path: Path) -> None:
    (tmp_path / "role" / "sub").mkdir(parents=True)
    for name in ("role/__init__.py", "role/sub/defaults.py", "role/notes.txt", "deploy.py"):
        (tmp_path / name).write_text("x = 1\n")
    found = source_files([tmp_path / "role", tmp_path / "deploy.py"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "role/__init__.py",
        "role/sub/defaults.py",
        "deploy.py",
    ]


def test_the_state_command_quotes_the_record_path() -> None:
    command = text(state_command("/var/lib/hg xkit/node/bringup-verified.json"))
    assert "done < '/var/lib/hg xkit/node/bringup-verified.json'" in command
    assert "for f in '/var/lib/hg xkit/node/gpu-smoke.json'; do" in command


def test_the_gpus_come_from_the_runs_nvidia_smi_read_and_a_lost_gpu_changes_the_digest() -> None:
    from hgxkit.node.converged import with_gpus
    from hgxkit.node.facts_gpu import SmiResult
    from hgxkit.nvidia.smi import GpuInfo

    base = NodeState(lines=("boot-1",))
    gpus = [
        GpuInfo(index=i, name="H200", uuid=f"GPU-{i}", bus_id=f"0000:{i}:00.0", driver_version="580") for i in (0, 1)
    ]
    both = with_gpus(base, SmiResult(gpus=gpus))
    assert both.lines == ("boot-1", "gpu 0 GPU-0 0000:0:00.0", "gpu 1 GPU-1 0000:1:00.0")
    assert with_gpus(base, SmiResult(gpus=gpus[:1])).digest() != both.digest()
    failed = with_gpus(base, SmiResult(failure="no-driver", message="NVIDIA-SMI has failed"))
    assert failed.lines == ("boot-1", "gpus unknown (no-driver): NVIDIA-SMI has failed")
    assert "nvidia-smi" not in str(state_command("/var/lib/hgxkit/node/bringup-verified.json"))


def test_one_find_lists_the_managed_files_and_any_write_moves_their_lines(tmp_path: Path) -> None:
    """Metadata stands for the bytes only if every write shows: size, mtime, and ctime (a write that puts the
    same bytes back and restores the mtime still moves the ctime)."""
    import os
    import subprocess
    import time

    from hgxkit.node.converged import managed_files_command, parse_state

    (tmp_path / "a" / "sub").mkdir(parents=True)
    (tmp_path / "a" / "sub" / "z.list").write_text("deb x\n")
    (tmp_path / "a" / "b.conf").write_text("b\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "k.gpg").write_text("key\n")
    (tmp_path / "file-not-folder").write_text("f\n")  # where a folder belongs: not listed
    (tmp_path / "smoke.json").write_text("{}\n")
    dirs = [str(tmp_path / n) for n in ("c", "missing", "file-not-folder", "a")]
    files = [str(tmp_path / "smoke.json"), str(tmp_path / "absent.json"), str(tmp_path / "c")]

    def lines() -> list[str]:
        out = subprocess.run(
            ["sh", "-c", text(managed_files_command(dirs, files))], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        return list(parse_state(out)[0].lines)  # in find's order on the node, sorted as bring-up reads them

    first = lines()
    assert [line.split(" ")[0] for line in first] == sorted(
        str(tmp_path / rel) for rel in ("a/sub/z.list", "a/b.conf", "c/k.gpg", "smoke.json")
    )
    for line in first:
        path, size, mtime, ctime = line.split(" ")
        st = os.lstat(path)
        assert int(size) == st.st_size and abs(float(mtime) - st.st_mtime) < 1e-6
        assert abs(float(ctime) - st.st_ctime) < 1e-6
    assert lines() == first
    conf = tmp_path / "a" / "b.conf"
    before = os.stat(conf)
    time.sleep(0.02)
    conf.write_text("b\n")  # the same bytes again, the mtime put back: only the ctime tells
    os.utime(conf, ns=(before.st_atime_ns, before.st_mtime_ns))
    moved = lines()
    assert moved != first and [m for m, f in zip(moved, first, strict=True) if m != f] == [
        m for m in moved if m.startswith(str(conf))
    ]
    none = subprocess.run(
        ["sh", "-c", text(managed_files_command([str(tmp_path / "missing")]))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert none.stdout == ""


def test_one_systemctl_call_serves_bring_up_and_the_serving_roles_replace_units() -> None:
    """Bring-up's digest takes its four units (in their fixed order, nothing else); the serving role's
    ActiveUnits reads the same command's output, so a batched plan runs systemctl once."""
    from hgxkit.node.converged import UNIT_PATTERNS, UNITS, unit_blocks, units_command, with_units
    from hgxkit.node.facts_system import NodeUnits
    from hgxkit.serving.facts import ActiveUnits
    from hgxkit.serving.replace import UNIT_PREFIX

    assert UNIT_PREFIX + "*" in UNIT_PATTERNS
    command = text(units_command())
    assert text(ActiveUnits().command(prefix=UNIT_PREFIX)) == text(NodeUnits().command()) == command
    assert command.count("systemctl ") == 1 and "'hgxkit-serve-*'" in command
    assert "systemctl" not in text(state_command("/var/lib/hgxkit/node/bringup-verified.json"))
    printed = [
        "nvidia-dcgm.service          loaded inactive dead    NVIDIA DCGM service",
        "docker.service               loaded active   running Docker Application Container Engine",
        "hgxkit-serve-m-0.service     loaded activating start /usr/bin/docker start -a m-0",
        "hgxkit-serve-m-1.service     loaded failed   failed  /usr/bin/docker start -a m-1",
        "hgxkit-serve-x.scope         loaded active   running x",
    ]
    state = with_units(NodeState(("boot-1",)), unit_blocks(printed))
    assert state.lines == (
        "boot-1",
        "Id=docker.service",
        "LoadState=loaded",
        "ActiveState=active",
        "Id=nvidia-dcgm.service",
        "LoadState=loaded",
        "ActiveState=inactive",
    )
    assert UNITS[0] == "docker.service" and UNITS[2] == "nvidia-dcgm.service"
    assert ActiveUnits().process(printed) == ["hgxkit-serve-m-0.service"]
    assert ActiveUnits().process(["hgxkit-serve-a.service", ""]) == ["hgxkit-serve-a.service"]  # list-units
    assert "list-units" in text(ActiveUnits().command(prefix="other-"))
    lost = with_units(NodeState(("boot-1",)), unit_blocks(printed[1:]))  # dcgm no longer known at all
    assert lost.digest() != state.digest()
    masked = with_units(NodeState(("boot-1",)), unit_blocks([printed[0].replace("loaded", "masked"), *printed[1:]]))
    assert masked.digest() != state.digest()


def test_the_state_command_runs_and_starts_with_this_boots_id(tmp_path) -> None:
    """Run for real with sh: the boot id first (read by the shell, no `cat`), the record after the mark, read by
    the shell too (a record over several lines, the last without a newline, comes back whole); no record, None."""
    record = {"schema_version": 1, "state": "s" * 64, "judged_by": "j", "boot_id": "b", "verified_at": "t"}
    path = tmp_path / "node dir" / "bringup-verified.json"
    path.parent.mkdir()
    path.write_text(json.dumps(record, indent=1))
    ran = subprocess.run(["sh", "-c", text(state_command(str(path)))], capture_output=True, text=True, check=True)
    state, found = parse_state(ran.stdout.splitlines())
    assert state.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert found == record and any(line.startswith("xid ") for line in state.lines)
    path.unlink()
    ran = subprocess.run(["sh", "-c", text(state_command(str(path)))], capture_output=True, text=True, check=True)
    assert parse_state(ran.stdout.splitlines())[1] is None and ran.stderr == ""


def test_enablement_masks_and_drop_ins_of_bring_ups_units_are_read_from_their_files(tmp_path: Path) -> None:
    """`systemctl enable/disable/mask` and a drop-in change what the find prints (no UnitFileState asked of
    systemd); other units' files, and the unit folders' other entries, print nothing."""
    from hgxkit.node.converged import managed_files_command

    etc, managed = tmp_path / "etc-systemd", tmp_path / "etc-docker"
    (etc / "multi-user.target.wants").mkdir(parents=True)
    (etc / "multi-user.target.wants" / "docker.service").symlink_to("/lib/systemd/system/docker.service")
    (etc / "multi-user.target.wants" / "ssh.service").symlink_to("/lib/systemd/system/ssh.service")
    (etc / "other.service").write_text("[Unit]\n")
    managed.mkdir()
    (managed / "daemon.json").write_text("{}")

    def printed() -> list[str]:
        command = managed_files_command([str(managed)], [], ["docker.service"], unit_dirs=[str(etc)])
        ran = subprocess.run(["sh", "-c", text(command)], capture_output=True, text=True, check=True)
        return ran.stdout.splitlines()

    wants = str(etc / "multi-user.target.wants" / "docker.service")
    enabled = printed()
    assert [line.split()[:3] for line in enabled] == [
        [str(managed / "daemon.json"), "2", line.split()[2]] for line in enabled[:1]
    ] + [[wants, "l", "/lib/systemd/system/docker.service"]]
    (etc / "multi-user.target.wants" / "docker.service").unlink()  # systemctl disable
    disabled = printed()
    assert disabled == enabled[:1]
    (etc / "docker.service").symlink_to("/dev/null")  # systemctl mask
    (etc / "docker.service.d").mkdir()
    (etc / "docker.service.d" / "override.conf").write_text("[Service]\nExecStart=\n")
    masked = printed()
    assert [line.split()[:3] for line in masked[1:]] == [
        [str(etc / "docker.service"), "l", "/dev/null"],
        [str(etc / "docker.service.d" / "override.conf"), "f", str(len("[Service]\nExecStart=\n"))],
    ]
    assert not any("ssh.service" in line or "other.service" in line for line in enabled + masked)


def test_the_state_sorts_the_managed_files_and_keeps_every_other_line_in_place() -> None:
    """find prints a folder's files in directory order: the state sorts them, so the digest is the files' own."""
    from hgxkit.node.converged import parse_state

    out = ["boot-1", "docker.io 27.5 install ok installed", "/etc/b 1 2 3", "/etc/a 1 2 3", "xid 0"]
    assert parse_state(out)[0].lines == (out[0], out[1], "/etc/a 1 2 3", "/etc/b 1 2 3", "xid 0")
    assert parse_state(out)[0].digest() == parse_state([*out[:2], out[3], out[2], out[4]])[0].digest()
