"""`hgxkit doctor INVENTORY`: read every host of a pyinfra inventory, in parallel, and say whether bring-up can run.

Read-only: only pyinfra facts run (hgxkit/node/facts_*.py), no operation. The verdict is hgxkit/node/doctor.py's.
Knobs are read as the roles read them: inventory or `--data`, else roles/<role>/defaults.py. The library never
imports roles, so deploys/doctor.py (in the checkout) hands `main` the roles' defaults. `hgxkit doctor` runs that
file from the checkout this package lives in, never from the current directory.

    hgxkit doctor inventories/h200.py
    HGXKIT_SIM_CLUSTER=demo hgxkit doctor inventories/sim.py --json
    hgxkit doctor inventories/h200.py --data models_dir=/mnt/nvme/models

Exit status: 0 when every host can be brought up (warnings allowed), 1 when one cannot, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hgxkit.cli.args import json_option
from hgxkit.errors import InputError

if TYPE_CHECKING:  # for annotations only: the node modules load when a doctor runs, not whenever `hgxkit` starts
    from hgxkit.node.doctor import DockerNow, DoctorPolicy, Reach
    from hgxkit.node.preflight import HostFacts, PreflightPolicy

REPO_ROOT = Path(__file__).resolve().parents[2]
HUB_URL = "https://huggingface.co"
NVIDIA_CONTAINER_REPO = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
NVIDIA_PACKAGE_GLOBS = "nvidia-* libnvidia-* cuda-drivers* datacenter-gpu-manager*"

Data = Callable[[str], Any]  # a knob's value on the host: inventory or --data, else the roles' default
Fact = Callable[..., Any]  # a fact read from the host, with sudo only where the user has it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The doctor's arguments (shared by `hgxkit doctor` and deploys/doctor.py)."""
    parser.add_argument("inventory", help="a pyinfra inventory file (e.g. inventories/h200.py)")
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override inventory data for every host, as pyinfra's --data",
    )
    json_option(parser, doctor_schema, "one document for every host (schema: hgxkit/node/schemas/doctor.schema.json)")


def doctor_schema() -> dict[str, Any]:
    """The JSON schema of `hgxkit doctor --json`."""
    return json.loads((Path(__file__).parents[1] / "node" / "schemas" / "doctor.schema.json").read_text())


def register(groups: argparse._SubParsersAction) -> None:
    """Add the `doctor` command."""
    parser = groups.add_parser(
        "doctor",
        help="check every host of an inventory before bring-up, changing nothing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(handler=_cmd_doctor)


def doctor_program() -> Path:
    """deploys/doctor.py of the checkout this package is in; never the current directory's, whose deploys/ may be
    anyone's."""
    program = REPO_ROOT / "deploys" / "doctor.py"
    if program.is_file() and (REPO_ROOT / "roles").is_dir():
        return program
    raise InputError(
        f"{program}: not found; hgxkit doctor reads the roles' knobs from the checkout hgxkit is installed from "
        "(deploys/doctor.py, roles/): install it with `pip install -e .` there, or run `python deploys/doctor.py "
        "INVENTORY` in the checkout"
    )


def _cmd_doctor(args: argparse.Namespace) -> int:
    argv = [args.inventory, *(f"--data={item}" for item in args.data), *(["--json"] if args.json else [])]
    program = doctor_program()
    if not args.json:  # the table streams as hosts answer
        return subprocess.run([sys.executable, str(program), *argv], check=False).returncode
    # One JSON document: passed through this process's stdout, so a caller that captures it gets it whole.
    done = subprocess.run([sys.executable, str(program), *argv], check=False, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(done.stdout)
    return done.returncode


def main(argv: list[str], defaults: Mapping[str, Any]) -> int:
    """deploys/doctor.py's entry: parse `argv`, diagnose every host with the roles' knob `defaults`, print."""
    from hgxkit.errors import HgxkitError
    from hgxkit.node.doctor import render_text, to_json

    parser = argparse.ArgumentParser(
        prog="hgxkit doctor", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        diagnoses = run_doctor(args.inventory, _parse_data(args.data), defaults)
    except HgxkitError as err:
        print(f"hgxkit: error: {err.message}", file=sys.stderr)
        return err.exit_code
    if args.json:
        print(json.dumps(to_json(diagnoses), indent=2))
    else:
        print("\n\n".join(render_text(d) for d in diagnoses))
        bad = [d.host for d in diagnoses if not d.ok]
        print(
            f"\ndoctor: {len(diagnoses) - len(bad)} of {len(diagnoses)} hosts ready for bring-up"
            + (f"; cannot be brought up: {', '.join(bad)}" if bad else "")
        )
    return 0 if all(d.ok for d in diagnoses) else 1


def _parse_data(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--data {item!r}: use KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def run_doctor(inventory: str, override: Mapping[str, Any], defaults: Mapping[str, Any]) -> list:  # -> [Diagnosis]
    """Connect to every host in parallel, read its facts and diagnose it (inventory order)."""
    if not Path(inventory).exists():
        raise InputError(f"{inventory}: no such inventory file")
    # pyinfra's CLI package patches the standard library for gevent when imported (as `pyinfra` does first):
    # the hosts' SSH sessions then run side by side.
    from pyinfra.api import Config, State
    from pyinfra.context import ctx_state
    from pyinfra_cli.inventory import make_inventory

    state = State()
    try:
        with ctx_state.use(state):  # pyinfra executes the inventory file with a state in context
            inv = make_inventory(inventory, override_data=dict(override), cwd=str(Path.cwd()))
    except Exception as err:  # pyinfra's own errors name the file; a bad inventory is bad input
        raise InputError(f"{inventory}: {err}") from None
    state.init(inv, Config(CONNECT_TIMEOUT=10))
    controller_epoch = time.time()
    hosts = list(inv)
    greenlets = [state.pool.spawn(_diagnose_host, state, h, defaults, controller_epoch) for h in hosts]
    results = [g.get() for g in greenlets]  # pyinfra's gevent pool: the hosts run in parallel
    for h in hosts:
        if h.connected:
            h.disconnect()
    return results


def _diagnose_host(state: Any, host: Any, defaults: Mapping[str, Any], controller_epoch: float):
    from pyinfra.context import ctx_host, ctx_state

    from hgxkit.node.doctor import diagnose, unreachable

    with ctx_state.use(state), ctx_host.use(host):
        try:
            host.connect(show_errors=False, raise_exceptions=True)
        except Exception as err:  # ConnectError and socket errors: the host is the answer, not a crash
            return unreachable(host.name, str(err.args[0] if err.args else err))
        try:
            facts, policy = _gather(host, defaults)
        except Exception as err:
            from hgxkit.node.doctor import Diagnosis
            from hgxkit.problems import Problem

            why = f"{type(err).__name__}: {err}"
            problem = Problem("facts", f"reading facts failed: {why}", "see `pyinfra -vv INVENTORY fact server.Os`")
            return Diagnosis(host.name, [("facts", why, False)], [], [problem])
        return diagnose(host.name, facts, policy, controller_epoch)


def _gather(host: Any, defaults: Mapping[str, Any]):
    """Read every fact the doctor judges, with sudo only where the user has it."""
    from hgxkit.node.doctor import DoctorFacts, docker_source_for
    from hgxkit.node.facts_doctor import ClockState, RunLockHolder, SudoState
    from hgxkit.node.facts_driver import NvidiaLoadedModule
    from hgxkit.node.facts_system import KernelRelease

    given = host.data.dict()

    def data(name: str) -> Any:  # as pyinfra's data_defaults: a key set to None (a check turned off) stays None
        return given[name] if name in given else defaults.get(name)

    sudo = host.get_fact(SudoState, _sudo=False)
    as_root = {} if sudo in ("root", "passwordless") else {"_sudo": False}

    def fact(cls: type, **kwargs: Any) -> Any:
        return host.get_fact(cls, **kwargs, **as_root)

    host_facts = _host_facts(fact, data)
    docker_source = docker_source_for(host_facts.os_id, str(data("docker_source")))
    recipe = _recipe(data("recipe"))
    reach = _reach(fact, data, host_facts, docker_source, recipe)
    fabric = _fabric(fact, data)
    epoch, synced = fact(ClockState)
    docker = _docker_now(fact)
    facts = DoctorFacts(
        user=str(host.data.get("ssh_user") or "root"),
        sudo=sudo,
        host=host_facts,
        kernel=fact(KernelRelease),
        loaded_driver=fact(NvidiaLoadedModule),
        docker=docker,
        node_epoch=epoch,
        ntp_synchronized=synced,
        reach=reach,
        fabric=fabric,
        lock_holder=fact(RunLockHolder),
    )
    return facts, _doctor_policy(data, docker_source, recipe)


def _preflight_policy(data: Data) -> PreflightPolicy:
    """What preflight requires of the host, from the knobs (a count set to None is not checked)."""
    from hgxkit.node.preflight import PreflightPolicy

    count = data("expected_gpu_count")
    switches = data("expected_nvswitch_count")
    return PreflightPolicy(
        expected_gpu_count=int(count) if count is not None else None,
        expected_gpu_device_ids=tuple(data("expected_gpu_device_ids")),
        expected_nvswitch_count=int(switches) if switches is not None else None,
        supported_arch=tuple(data("supported_arch")),
        allow_secure_boot=bool(data("allow_secure_boot")),
        required_cgroup_version=data("required_cgroup_version"),
        models_dir=str(data("models_dir")),
        min_free_disk_gb=float(data("min_free_disk_gb")),
        min_ram_gb=float(data("min_ram_gb")),
    )


def _host_facts(fact: Fact, data: Data) -> HostFacts:
    """What preflight reads from the host, with where each installed NVIDIA driver package came from."""
    from pyinfra.facts.server import Arch

    from hgxkit.node.driver import package_origin
    from hgxkit.node.facts_apt import InstalledPackages, PackagePolicies
    from hgxkit.node.facts_driver import NvidiaPci, SecureBootState
    from hgxkit.node.facts_system import CgroupVersion, FreeBytes, MemTotalBytes, OsRelease
    from hgxkit.node.preflight import HostFacts

    release = fact(OsRelease)
    repo_url = data("nvidia_repo_url")
    policies = fact(PackagePolicies, patterns=NVIDIA_PACKAGE_GLOBS)
    return HostFacts(
        os_id=release.get("ID"),
        os_version=release.get("VERSION_ID"),
        arch=fact(Arch),
        pci=fact(NvidiaPci),
        secure_boot=fact(SecureBootState),
        cgroup_version=fact(CgroupVersion),
        ram_bytes=fact(MemTotalBytes),
        models_dir_free_bytes=fact(FreeBytes, path=str(data("models_dir"))),
        nvidia_packages=fact(InstalledPackages, patterns=NVIDIA_PACKAGE_GLOBS),
        nvidia_package_origins={
            name: package_origin(text, repo_url)
            for name, text in policies.items()
            if not name.startswith(("nvidia-container", "libnvidia-container"))
        },
    )


def _reach(fact: Fact, data: Data, host_facts: HostFacts, docker_source: str, recipe: Any) -> list[Reach]:
    """Whether the host reaches each URL bring-up downloads from, the recipe's image registry included."""
    from hgxkit.node.doctor import Reach
    from hgxkit.node.driver import default_cuda_repo_url
    from hgxkit.node.facts_doctor import DockerMirrors, UrlStatus
    from hgxkit.node.preflight import distro_key

    distro = distro_key(host_facts.os_id, host_facts.os_version) or "ubuntu2404"
    urls = [
        ("NVIDIA repository", data("nvidia_repo_url") or default_cuda_repo_url(distro), True),
        ("container toolkit repository", data("nvidia_container_repo_url") or NVIDIA_CONTAINER_REPO, True),
        ("Hugging Face Hub", data("hf_endpoint") or HUB_URL, True),
    ]
    if docker_source == "docker-ce":
        urls.append(("Docker repository", data("docker_repo_url") or "https://download.docker.com/linux/ubuntu", True))
    for registry in _registry_urls(recipe, fact(DockerMirrors)):
        urls.append(("image registry", registry, True))
    return [Reach(purpose, url, *fact(UrlStatus, url=url), required=required) for purpose, url, required in urls]


def _fabric(fact: Fact, data: Data) -> tuple[str, list[str], list[str]] | None:
    """The `fabric_address` knob, what it resolves to and which of those the host owns (None: knob unset)."""
    from hgxkit.node.facts_doctor import FabricAddresses

    name = data("fabric_address")
    if not name:
        return None
    resolved, own = fact(FabricAddresses, address=str(name))
    return (str(name), resolved, own)


def _docker_now(fact: Fact) -> DockerNow:
    """The Docker engine the host has before bring-up: server version, Docker packages and the snap."""
    from hgxkit.node.doctor import DockerNow
    from hgxkit.node.facts_apt import InstalledPackages, SnapInstalled
    from hgxkit.node.facts_docker import DockerInfo

    return DockerNow(
        version=fact(DockerInfo).server_version,
        packages=fact(InstalledPackages, patterns="docker.io docker-ce containerd.io podman-docker"),
        snap=fact(SnapInstalled, snap="docker"),
    )


def _doctor_policy(data: Data, docker_source: str, recipe: Any) -> DoctorPolicy:
    """What the host must be and get: preflight's policy plus the RAM, driver and Docker the roles will want."""
    from hgxkit.node.doctor import DoctorPolicy

    return DoctorPolicy(
        preflight=_preflight_policy(data),
        xet_cache_gb=_xet_cache_gb(data),
        hicache_gb=_hicache_gb(recipe, data) if recipe else 0.0,
        ram_reserve_gb=float(data("serve_host_ram_reserve_gb")),
        driver_branch=str(data("nvidia_driver_branch")),
        driver_version=data("nvidia_driver_version"),
        docker_source=docker_source,
        allow_reboot=bool(data("allow_reboot")),
    )


def _xet_cache_gb(data: Data) -> float:
    """Disk hf_xet's chunk and shard caches take on the models disk (0: Xet is off, or they live elsewhere)."""
    if data("model_xet") and not data("model_xet_cache_dir"):
        return float(data("model_xet_chunk_cache_gb")) + float(data("model_xet_shard_cache_gb"))
    return 0.0


def _recipe(value: Any) -> Any:
    """The host's recipe, or None when it cannot be read (a recipe problem is the deploys' to report)."""
    from hgxkit.errors import HgxkitError
    from hgxkit.recipe.host_recipe import recipe_path
    from hgxkit.recipe.read import load_recipe

    try:
        return load_recipe(recipe_path(value))
    except (HgxkitError, OSError):
        return None


def _registry_urls(recipe: Any, mirrors: list[str]) -> list[str]:
    """Where the recipe's image comes from: Docker's configured mirrors for a Docker Hub image, else its
    registry's /v2/ endpoint (none without a recipe)."""
    if recipe is None:
        return []
    image = recipe.image.reference
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return [f"https://{first}/v2/"]
    return [m.rstrip("/") + "/v2/" for m in mirrors] or ["https://registry-1.docker.io/v2/"]


def _hicache_gb(recipe: Any, data: Any) -> float:
    """Host RAM the recipe's HiCache pools pin on this host (0 without HiCache)."""
    from hgxkit.serving.policy import H200_MEMORY_GB, hicache_need

    gpus = int(data("expected_gpu_count") or 8)
    size = recipe.groups.size if recipe.groups and recipe.groups.size else gpus
    need = hicache_need(
        recipe,
        groups=max(gpus // size, 1),
        gpu_memory_gb=H200_MEMORY_GB,
        weights_gb=float(data("serve_model_weights_gb")),
    )
    return need.total_gb
