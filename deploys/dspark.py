"""The forum post's setup, end to end: preflight -> bring-up -> model -> serve -> verify.

    pyinfra -y inventories/h200.py deploys/dspark.py
    pyinfra -y inventories/sim.py deploys/dspark.py                         # simulated node (`hgxkit sim up`)
    pyinfra -y inventories/sim.py deploys/dspark.py --data recipe=recipes/deepseek-v4-flash-dspark-flashinfer.yaml

Every knob is in roles/<role>/defaults.py; `--data verify=false` skips the verify step, `--data bench=full`
runs the recipe's whole benchmark matrix. Steps whose role has not landed yet are skipped with a notice.
"""

import importlib

from pyinfra import host
from pyinfra.api.output import echo

from roles.container_toolkit import container_toolkit
from roles.docker import docker_engine
from roles.gpu_health import gpu_health
from roles.nvidia_driver import nvidia_driver
from roles.preflight import preflight
from roles.sglang_serve import sglang_serve


def optional_role(module: str, function: str, why: str):
    """The role's deploy function, or None (with a notice) while the role does not exist yet."""
    try:
        return getattr(importlib.import_module(module), function)
    except ModuleNotFoundError:
        echo(f"[{host.name}] NOTICE: skipping {why}: {module} is not part of this hgxkit yet")
        return None


preflight()
nvidia_driver()
docker_engine()
container_toolkit()
gpu_health()
model = optional_role("roles.model", "model", "the model download")
if model:
    model()
sglang_serve()
if host.data.get("router"):  # `--data router=true`: one SGLang router fronting every group (roles/sglang_router)
    from roles.sglang_router import sglang_router

    sglang_router()
from roles.verify import verify  # noqa: E402 - after the optional roles above, in deploy order

if host.data.get("verify", True):  # `--data verify=false` serves without benchmarking
    verify()
