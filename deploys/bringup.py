"""Bring a fresh HGX-H200 node up to running GPU containers: preflight, driver + fabric manager, Docker,
container toolkit, GPU health. Idempotent: a second run reports no change.

    pyinfra -y inventories/h200.py deploys/bringup.py
    pyinfra -y inventories/sim.py deploys/bringup.py          # simulated nodes (`hgxkit sim up`)
    pyinfra inventories/h200.py deploys/bringup.py --dry      # the plan, changing nothing
    pyinfra -y inventories/h200.py deploys/bringup.py --data recheck=true   # every check, even if unchanged

A node unchanged since its last bring-up passed (same boot, packages, managed files, units, GPUs, XID count,
knobs and checks: hgxkit/node/converged.py) is not checked again; the run says so. Every knob is in
roles/<role>/defaults.py (shared ones in hgxkit/knobs.py); set them in the inventory (or `--data key=value`).
deploys/reproduce.py and deploys/dspark.py include this file.
"""

from pathlib import Path

from pyinfra import host
from pyinfra.api.output import echo
from pyinfra.operations import python

import hgxkit.node.bringup
import hgxkit.nvidia.smi
import roles.container_toolkit.defaults
import roles.docker.defaults
import roles.gpu_health.defaults
import roles.nvidia_driver.defaults
import roles.preflight.defaults
from hgxkit.hostlock import hold_host_lock
from hgxkit.node.bringup import bringup_skip, plan_reads, record_bringup
from hgxkit.planfacts import prefetch
from hgxkit.runfailure import install as answer_failures
from roles import check_knob_names
from roles.container_toolkit import container_toolkit
from roles.docker import docker_engine
from roles.gpu_health import gpu_health
from roles.nvidia_driver import nvidia_driver
from roles.preflight import preflight

# What judges the node (hgxkit/node/converged.py): the knobs these roles read, and the code that checks (the
# roles, hgxkit's node and nvidia packages, this file). A change in either (an upgraded hgxkit) re-runs every role.
ROLE_DEFAULTS = (
    roles.preflight.defaults,
    roles.nvidia_driver.defaults,
    roles.docker.defaults,
    roles.container_toolkit.defaults,
    roles.gpu_health.defaults,
)
BRINGUP_KNOBS = sorted({name for defaults in ROLE_DEFAULTS for name in defaults.DEFAULTS})
JUDGING_SOURCES = [
    *(Path(defaults.__file__).resolve().parent for defaults in ROLE_DEFAULTS),
    Path(hgxkit.node.bringup.__file__).resolve().parent,  # hgxkit/node
    Path(hgxkit.nvidia.smi.__file__).resolve().parent,  # hgxkit/nvidia
    Path(__file__).resolve(),
]

answer_failures()  # hgxkit's errors end the run as one block per host, not a traceback
check_knob_names(  # a misspelt or ill-typed knob stops the run here, before any role changes anything
    host,
    roles.preflight.defaults.PreflightKnobs,
    roles.nvidia_driver.defaults.NvidiaDriverKnobs,
    roles.docker.defaults.DockerKnobs,
    roles.container_toolkit.defaults.ContainerToolkitKnobs,
    roles.gpu_health.defaults.GpuHealthKnobs,
)
hold_host_lock(host, plan_reads(host))  # one hgxkit run per node at a time; the reads on the lock's channel

prefetch(host, plan_reads(host))  # what the lock's channel did not read (nothing, normally)
skip = bringup_skip(host, knob_names=BRINGUP_KNOBS, sources=JUDGING_SOURCES)
if skip.reason:
    echo(f"[{host.name}] {skip.reason}")
else:
    if skip.rerun:
        echo(f"[{host.name}] bring-up checks everything: {skip.rerun}")
    preflight()
    nvidia_driver()
    docker_engine()
    container_toolkit()
    gpu_health()
    if skip.record_needed:  # runs only when every role and gate above passed
        python.call(name="Record the verified bring-up", function=lambda: record_bringup(host, skip.judged))
