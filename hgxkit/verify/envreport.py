"""The serving engine's own environment report, made once per container and kept on the host.

`python3 -m sglang.check_env` (or `vllm collect-env`) imports torch and the engine and asks every GPU: 9-12 s
of a verify on a simulated node, every time, for a text that cannot change while the same container runs. So
the report is kept root-only on the host, under the verify work folder, headed by the container's ID, and a
later verify of the same container reads it back. A new container (a rollout, a restart with a new ID)
makes a new one.

When it has to be made, it is made by a transient unit started before the controller's own work on the run
(statistics, the archive) and read when the fingerprint needs it, so the two overlap; on a real node the
controller is another machine. Usage, at execute time:

    run(start_env_report(SGLANG.env_report, "dsv4-0", "/var/lib/hgxkit/verify/env-reports"))
    ...                                   # statistics, gates: the controller's work
    text = "\\n".join(run(read_env_report("dsv4-0", "/var/lib/hgxkit/verify/env-reports")))

The first line `start_env_report` prints says whether the kept report is used (`kept`) or a unit makes it
(`making`); `read_env_report` prints the report, or nothing when there is none for the running container.
A report that failed is shown (its output says why) and made again next time.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyinfra.api import StringCommand

from hgxkit.hostcmd import argv, script, text

REPORT_TIMEOUT_S = 120  # the engine's report; check_env takes 5-15 s
REPORT_LINES = 200  # the tail kept: the reports end with the GPU topology, which is what matters most


def report_folder(verify_workdir: str) -> str:
    """Where the reports are kept: under the verify role's root-only work folder (`verify_workdir`)."""
    return f"{verify_workdir}/env-reports"


def report_unit(container: str) -> str:
    """The transient unit that makes the report of `container` (one at a time per container name)."""
    return f"hgxkit-env-report-{container}.service"


def report_file(container: str, folder: str) -> str:
    return f"{folder}/{container}.txt"


def _maker(words: Sequence[str], container: str, folder: str) -> StringCommand:
    """The unit's program: run the report in the container, keep its last lines headed by the container's ID
    (`container ID` when it succeeded, `failed ID` when not), written whole or not at all."""
    return script(
        "umask 077 && mkdir -p {dir} && id=$(docker inspect -f '{{{{.Id}}}}' {name} 2>/dev/null) || exit 0; "
        "out=$(timeout {timeout} {cmd} 2>&1); rc=$?; "
        'if [ "$rc" = 0 ]; then head="container $id"; else head="failed $id"; fi; '
        '{{ printf "%s\\n" "$head"; printf "%s\\n" "$out" | tail -n {lines}; }} > {file}.tmp && mv {file}.tmp {file}',
        dir=folder,
        name=container,
        timeout=REPORT_TIMEOUT_S,
        cmd=argv("docker", "exec", container, *words),
        lines=REPORT_LINES,
        file=report_file(container, folder),
    )


def start_env_report(words: Sequence[str], container: str, folder: str) -> StringCommand:
    """Print `kept` when the report of the running `container` is on the host, else start the unit that makes
    it (unless one still runs) and print `making` (nothing is started for a container that is not there:
    `none`)."""
    return script(
        "id=$(docker inspect -f '{{{{.Id}}}}' {name} 2>/dev/null) || {{ echo none; exit 0; }}; "
        'if [ "$(head -n 1 {file} 2>/dev/null)" = "container $id" ]; then echo kept; exit 0; fi; '
        # Still running from a verify that was cut off: it writes the same file, so wait for that one.
        "if systemctl is-active --quiet {unit}; then echo making; exit 0; fi; "
        "systemctl reset-failed {unit} >/dev/null 2>&1; "
        "systemd-run --unit {unit} --collect --quiet /bin/sh -c {program} && echo making || echo none",
        name=container,
        file=report_file(container, folder),
        unit=report_unit(container),
        program=text(_maker(words, container, folder)),
    )


def read_env_report(container: str, folder: str, wait_s: int = REPORT_TIMEOUT_S + 15) -> StringCommand:
    """Wait (at most `wait_s`) for the unit making the report, then print the report of the running container;
    nothing when there is none (its container changed, or it could not be made)."""
    return script(
        "i=0; while systemctl is-active --quiet {unit} && [ $i -lt {ticks} ]; do sleep 0.2; i=$((i+1)); done; "
        "id=$(docker inspect -f '{{{{.Id}}}}' {name} 2>/dev/null) || exit 0; "
        'case "$(head -n 1 {file} 2>/dev/null)" in "container $id"|"failed $id") tail -n +2 {file};; esac',
        unit=report_unit(container),
        ticks=wait_s * 5,
        name=container,
        file=report_file(container, folder),
    )
