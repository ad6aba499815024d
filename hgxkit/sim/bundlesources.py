"""Bundle sources for simulated nodes (simulated): the sim's apt repositories, Hub and registry mirror are
served on each node's loopback only, so create reads this machine's copies of them instead: the built
repositories as file:// URLs, the Hub store served on a free local port, the registry storage by Debian's
docker-registry, read-only, on a free local port. What lands in the bundle is byte for byte what the nodes see.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hgxkit.bundle.create import Sources, apt_wanted
from hgxkit.errors import HgxkitError


@contextlib.contextmanager
def sim_sources(knobs: Mapping[str, Any]) -> Iterator[Sources]:
    """Sources read from this machine's sim state, for as long as the context lasts."""
    from hgxkit.sim import aptrepo, hubrepos
    from hgxkit.sim.hub.server import make_server
    from hgxkit.sim.paths import state_dir
    from hgxkit.sim.standin import registry

    repos = aptrepo.build_repo(state_dir() / "repos").root
    cuda, toolkit = apt_wanted(knobs, "debian12")
    apt = {
        "nvidia": (
            f"file://{repos}/cuda/debian12/x86_64/",
            f"file://{repos}/cuda/debian12/x86_64/{aptrepo.KEY_NAME}",
            cuda,
        ),
        "nvidia-container": (
            f"file://{repos}/libnvidia-container/stable/deb/amd64/",
            f"file://{repos}/libnvidia-container/gpgkey",
            toolkit,
        ),
    }
    binary = shutil.which("docker-registry")
    if binary is None:
        raise HgxkitError("docker-registry not found: apt-get install docker-registry (`hgxkit sim host setup`)")
    hub = make_server(hubrepos.build_hub_store(state_dir() / "hub"), "127.0.0.1", 0)
    thread = threading.Thread(target=hub.serve_forever, daemon=True)
    thread.start()
    port = registry._free_port()
    with tempfile.TemporaryDirectory(prefix="hgxkit-bundle-registry-") as tmp:
        cfg = Path(tmp) / "config.yml"
        cfg.write_text(registry.CONFIG.format(root=registry.storage_dir(), port=port, readonly="true"))
        proc = subprocess.Popen([binary, "serve", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            registry._wait_v2(port, proc)
            yield Sources(
                apt=apt,
                hub=f"http://127.0.0.1:{hub.server_address[1]}",
                registry=f"http://127.0.0.1:{port}",
                wheel_requirements=[str(knobs.get("model_hf_hub_requirement"))],
                notes=["simulated: packages, image and model are the sim's stand-ins"],
            )
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            hub.shutdown()
            hub.server_close()
