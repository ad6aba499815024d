"""The simulated serving stack without a Docker engine: image inputs, shim overlay, hook, mirror config, client store."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import yaml

from hgxkit.cli import main
from hgxkit.sim.standin import client_store as serving_client
from hgxkit.sim.standin import image as serving
from hgxkit.sim.standin import registry as serving_registry
from hgxkit.sim.standin.sglang.shim import default_stub_root, install_shim
from hgxkit.sim.standin.vllm import shim as vllm_shim

DATA = Path(serving.__file__).parents[1] / "data"


def test_image_tag_is_a_stable_hash_that_a_variant_changes() -> None:
    tag = serving.image_tag()
    assert tag == serving.image_tag("") and tag.startswith("hgxkit-sim-sglang:") and len(tag.split(":")[1]) == 16
    assert serving.image_tag("rebuilt-1") != tag
    assert serving.base_tag().startswith("hgxkit-sim-sglang-base:")
    vllm = serving.image_tag(kind="vllm")
    assert vllm.startswith("hgxkit-sim-vllm:") and vllm == serving.image_tag("", "vllm")
    assert serving.image_tag("rebuilt-1", "vllm") != vllm


def test_stand_in_images_copy_only_their_own_stand_in() -> None:
    sglang, vllm = serving._stub_files("sglang"), serving._stub_files("vllm")
    assert "hgxkit/sim/standin/common/engine.py" in sglang and "hgxkit/sim/standin/common/engine.py" in vllm
    assert not any("/vllm/" in f for f in sglang) and not any("/sglang/" in f for f in vllm)
    assert "hgxkit/sim/standin/vllm/launcher.py" in vllm


@pytest.mark.parametrize(
    ("ref", "kind"),
    [
        ("lmsysorg/sglang:dev-dspark", "sglang"),
        ("127.0.0.1:5000/lmsysorg/sglang:v0.5.23", "sglang"),
        ("vllm/vllm-openai:latest", "vllm"),
        ("vllm/vllm-openai", "vllm"),
        ("docker.io/vllm/vllm-openai:v0.33.0", "vllm"),
    ],
)
def test_kind_is_inferred_from_the_reference(ref: str, kind: str) -> None:
    assert serving.kind_for(ref) == kind
    assert serving.kind_for("myorg/anything:1", kind) == kind  # given: any reference


@pytest.mark.parametrize("ref", ["myorg/server:1", "vllm/other:1", "sglang:latest"])
def test_unknown_reference_needs_a_kind(ref: str) -> None:
    with pytest.raises(Exception, match=r"cannot tell which stand-in image .* pass --kind sglang or --kind vllm"):
        serving.kind_for(ref)


def test_image_build_refuses_unknown_kind_and_mixed_tags_before_docker(capsys) -> None:
    assert main(["sim", "image", "build", "--tag", "myorg/server:1"]) == 2
    assert "pass --kind sglang or --kind vllm" in capsys.readouterr().err
    assert main(["sim", "image", "build", "--tag", "lmsysorg/sglang:a", "--tag", "vllm/vllm-openai:a"]) == 2
    assert "need different stand-ins (sglang, vllm)" in capsys.readouterr().err


def test_vllm_dockerfile_matches_the_real_image_conventions() -> None:
    df = serving.VLLM_DOCKERFILE
    assert 'ENTRYPOINT ["vllm", "serve"]' in df and "\nCMD" not in df  # 0.33 era: args after the image = serve args
    assert "WORKDIR /vllm-workspace" in df and "SIMULATED" in df
    assert f"--overlay {serving.VLLM_CLIENT_SITE}" in df
    assert serving.CLIENT_SITE in df and serving.VLLM_CLIENT_SITE in df  # the .pth adds both store layers
    assert serving.VLLM_CLIENT_SITE.endswith("/" + serving_client.VLLM_SITE)


@pytest.mark.parametrize(
    ("tag", "normal"),
    [
        ("lmsysorg/sglang:dev-dspark", "lmsysorg/sglang:dev-dspark"),
        ("lmsysorg/sglang", "lmsysorg/sglang:latest"),
        ("127.0.0.1:5000/lmsysorg/sglang:v0.5.23", "127.0.0.1:5000/lmsysorg/sglang:v0.5.23"),
    ],
)
def test_check_tag_normalizes(tag: str, normal: str) -> None:
    assert serving.check_tag(tag) == normal


@pytest.mark.parametrize("tag", ["lmsysorg/sglang@sha256:00", "bad tag", ":x"])
def test_check_tag_rejects(tag: str) -> None:
    with pytest.raises(Exception, match="is invalid: use REPOSITORY"):
        serving.check_tag(tag)


def test_image_build_rejects_a_bad_tag_before_docker(capsys) -> None:
    assert main(["sim", "image", "build", "--tag", "a b"]) == 2
    assert "image tag 'a b' is invalid" in capsys.readouterr().err


def test_dockerfile_matches_the_real_image_conventions() -> None:
    df = serving.DOCKERFILE
    assert "WORKDIR /sgl-workspace/sglang" in df and "ENTRYPOINT" not in df
    assert f"--overlay {serving.CLIENT_SITE}" in df and "hgxkit-sglang-client.pth" in df
    assert "SIMULATED" in df


def _fake_real_sglang(root: Path) -> Path:
    site = root / "real-site"
    (site / "sglang" / "benchmark").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("import os\nREAL_INIT_RAN = True\n__version__ = 'real'\n")
    (site / "sglang" / "benchmark" / "__init__.py").write_text("")
    (site / "sglang" / "benchmark" / "serving.py").write_text(
        "import sglang\nprint('real client', sglang.REAL_INIT_RAN, sglang.__version__)\n"
    )
    return site


def test_overlay_shim_serves_with_the_stand_in_and_benchmarks_with_the_real_package(tmp_path: Path) -> None:
    real = _fake_real_sglang(tmp_path)
    site = tmp_path / "site"
    install_shim(site, default_stub_root(), tmp_path / "bin", python=sys.executable, overlay=real)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    bench = subprocess.run(
        [sys.executable, "-m", "sglang.benchmark.serving"], env=env, capture_output=True, text=True, check=False
    )
    assert bench.stdout.strip() == "real client True real"
    serve = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", "--help"], env=env, capture_output=True, text=True, check=False
    )
    assert serve.returncode == 0 and serve.stdout.startswith("usage: sglang serve")
    probe = "import sglang, sys; print(hasattr(sglang, 'REAL_INIT_RAN'), sglang.__version__)"
    assert subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
    ).stdout.split() == ["True", "real"]  # plain imports get the real package's __init__


def test_overlay_shim_without_the_store_still_serves(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_shim(site, default_stub_root(), None, overlay=tmp_path / "not-mounted")
    env = {"PYTHONPATH": str(site)}
    probe = "import sglang; print(sglang.__version__, len(sglang.__path__))"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0.5.23", "1"]


def test_vllm_pth_adds_both_store_layers_when_mounted(tmp_path: Path, monkeypatch) -> None:
    import site

    store = tmp_path / "store"
    line = serving.VLLM_PTH.replace(serving.CLIENT_MOUNT, str(store))
    pth_dir = tmp_path / "dist"
    pth_dir.mkdir()
    (pth_dir / "hgxkit-vllm-client.pth").write_text(line + "\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    site.addsitedir(str(pth_dir))  # nothing mounted: no error, nothing added
    assert not [p for p in sys.path if p.startswith(str(store))]
    for layer in (serving.CLIENT_SITE, serving.VLLM_CLIENT_SITE):
        Path(layer.replace(serving.CLIENT_MOUNT, str(store))).mkdir(parents=True)
    site.addpackage(str(pth_dir), "hgxkit-vllm-client.pth", set())
    assert [p for p in sys.path if p.startswith(str(store))] == [
        str(store / "lib/python3.11/site-packages"),
        str(store / "vllm-site"),
    ]


def _fake_real_vllm(root: Path) -> Path:
    """A stand-in for the store's vllm-site: a `vllm` whose CLI main prints what it was asked."""
    site = root / "vllm-site"
    (site / "vllm" / "entrypoints" / "cli").mkdir(parents=True)
    (site / "vllm" / "entrypoints" / "openai").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("REAL_INIT_RAN = True\n__version__ = '0.33.0-real'\n")
    (site / "vllm" / "entrypoints" / "__init__.py").write_text("")
    (site / "vllm" / "entrypoints" / "cli" / "__init__.py").write_text("")
    (site / "vllm" / "entrypoints" / "cli" / "helper.py").write_text("WHO = 'real helper'\n")
    (site / "vllm" / "entrypoints" / "cli" / "main.py").write_text(
        "import sys\nimport vllm\nfrom vllm.entrypoints.cli.helper import WHO\n"
        "if __name__ == '__main__':\n    print('real cli', vllm.REAL_INIT_RAN, WHO, ' '.join(sys.argv[1:]))\n"
    )
    (site / "vllm" / "entrypoints" / "openai" / "api_server.py").write_text("raise SystemExit('real api_server')\n")
    return site


def test_vllm_overlay_serves_with_the_stand_in_and_benchmarks_with_the_real_client(tmp_path: Path) -> None:
    real = _fake_real_vllm(tmp_path)
    site, bin_dir = tmp_path / "site", tmp_path / "bin"
    vllm_shim.install_shim(site, default_stub_root(), bin_dir, python=sys.executable, overlay=real.parent / real.name)
    env = {"PYTHONPATH": f"{site}:{real}", "PATH": "/usr/bin:/bin"}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*argv], env=env, capture_output=True, text=True, check=False, timeout=60)

    bench = run(str(bin_dir / "vllm"), "bench", "serve", "--num-prompts", "3")
    assert bench.stdout.strip() == "real cli True real helper bench serve --num-prompts 3", bench.stderr
    serve = run(str(bin_dir / "vllm"), "serve", "/nonexistent-model", "--bogus-flag")
    assert serve.returncode == 2 and "vllm: error: unrecognized arguments: --bogus-flag" in serve.stderr
    api = run(sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/nonexistent-model")
    assert (
        api.returncode == 1 and "Invalid repository ID or local directory specified: '/nonexistent-model'" in api.stderr
    )
    assert "real api_server" not in api.stderr
    version = run(str(bin_dir / "vllm"), "--version")
    assert version.stdout.strip() == "0.33.0"
    probe = "import vllm; print(vllm.REAL_INIT_RAN, vllm.__version__)"
    assert run(sys.executable, "-c", probe).stdout.split() == ["True", "0.33.0-real"]  # plain imports: real init


def test_vllm_overlay_without_the_store_serves_and_names_the_missing_client(tmp_path: Path) -> None:
    site, bin_dir = tmp_path / "site", tmp_path / "bin"
    vllm_shim.install_shim(site, default_stub_root(), bin_dir, python=sys.executable, overlay=tmp_path / "absent")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    bench = subprocess.run(
        [str(bin_dir / "vllm"), "bench", "serve"], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    assert (
        bench.returncode == 2 and "`vllm bench` needs the real vLLM client, which is not mounted here" in bench.stderr
    )
    probe = "import vllm; print(vllm.__version__, len(vllm.__path__))"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0.33.0", "1"]


def _hook() -> types.ModuleType:
    path = DATA / "aptrepo" / "files" / "nvidia-container-runtime-hook"
    loader = importlib.machinery.SourceFileLoader("sim_hook", str(path))
    spec = importlib.util.spec_from_loader("sim_hook", loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_hook_bind_mounts_into_the_container_rootfs(tmp_path: Path, monkeypatch) -> None:
    hook = _hook()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}}))
    calls: list[list[str]] = []
    monkeypatch.setattr(
        hook,
        "mounts",
        lambda: [
            ("/opt/hgxkit-sglang-client", "/opt/hgxkit-sglang-client", True),
            ("/run/hgxkit-sim/gpu-load", "/run/hgxkit-sim/gpu-load", False),
        ],
    )
    monkeypatch.setattr(hook, "userspace", lambda container_id, config: [])  # not a simulated node
    monkeypatch.setattr(
        hook.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", "")
    )
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(json.dumps({"pid": 4242, "bundle": str(bundle)})))
    assert hook.main(["nvidia-container-runtime-hook", "prestart"]) == 0
    [store, load] = calls
    assert store[:6] == ["nsenter", "-t", "4242", "-m", "sh", "-c"]
    assert store[-3:] == ["/opt/hgxkit-sglang-client", f"{bundle}/rootfs/opt/hgxkit-sglang-client", "ro"]
    assert "remount,bind,ro" in store[6]
    assert load[-3:] == ["/run/hgxkit-sim/gpu-load", f"{bundle}/rootfs/run/hgxkit-sim/gpu-load", "rw"]


def test_hook_injects_the_simulated_nvidia_smi_and_the_containers_gpus(tmp_path: Path, monkeypatch) -> None:
    """As the real hook injects the driver's userspace: nvidia-smi and the state it reads, read-only, and the
    container's NVIDIA_VISIBLE_DEVICES; a mount that cannot be made (a read-only root) does not fail the start."""
    hook = _hook()
    smi, lib = tmp_path / "nvidia-smi", tmp_path / "lib"
    smi.write_text("#!/usr/bin/python3\n")
    lib.mkdir()
    monkeypatch.setattr(hook, "USERSPACE", (str(smi), str(lib), str(tmp_path / "absent")))
    monkeypatch.setattr(hook, "VISIBLE_DIR", str(tmp_path / "visible"))
    monkeypatch.setattr(hook, "mounts", lambda: [])
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    env = ["PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=4,5,6,7"]
    (bundle / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}, "process": {"env": env}}))
    calls: list[list[str]] = []

    def run(cmd, **kw):
        calls.append(cmd)
        failed = cmd[-2].endswith("/usr/lib")  # the second mount fails
        return subprocess.CompletedProcess(cmd, 32 if failed else 0, "", "mount: read-only file system" * failed)

    monkeypatch.setattr(hook.subprocess, "run", run)
    state = {"pid": 7, "bundle": str(bundle), "id": "c0ffee"}
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(json.dumps(state)))
    assert hook.main(["nvidia-container-runtime-hook", "prestart"]) == 0
    assert [(c[-3], c[-2].removeprefix(f"{bundle}/rootfs"), c[-1]) for c in calls] == [
        (str(smi), str(smi), "ro"),
        (str(lib), str(lib), "ro"),
        (str(tmp_path / "visible" / "c0ffee"), "/run/hgxkit-sim-visible-gpus", "ro"),
    ]
    assert (tmp_path / "visible" / "c0ffee").read_text() == "4,5,6,7\n"


def test_hook_fails_with_one_line(tmp_path: Path, monkeypatch) -> None:
    hook = _hook()
    monkeypatch.setattr(
        hook.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 32, "", "mount: permission denied\n")
    )
    with pytest.raises(
        SystemExit, match=r"mounting /proc/meminfo at /r/proc/meminfo failed: mount: permission denied$"
    ):
        hook.bind(1, "/r/", "/proc/meminfo", "/proc/meminfo")


@pytest.mark.parametrize("client", ["lib/python3.11/site-packages/sglang", "vllm-site/vllm", None])
def test_hook_mounts_the_store_when_either_client_is_there(tmp_path: Path, monkeypatch, client: str | None) -> None:
    hook = _hook()
    store = tmp_path / "store"
    if client:
        (store / client).mkdir(parents=True)
    monkeypatch.setattr(hook, "CLIENT", str(store))
    monkeypatch.setattr(
        hook, "PROBES", tuple(str(store / p) for p in ("lib/python3.11/site-packages/sglang", "vllm-site/vllm"))
    )
    monkeypatch.setattr(hook.os.path, "isfile", lambda p: False)  # not a simulated node: no /proc/meminfo mount
    assert hook.mounts() == ([(str(store), str(store), True)] if client else [])


@pytest.mark.parametrize("stage", ["poststart", "poststop", "createRuntime", None])
def test_hook_ignores_other_stages(tmp_path: Path, monkeypatch, stage: str | None) -> None:
    """The state a prestart would mount from, at any other stage (or none): nothing is mounted, nothing run."""
    hook = _hook()
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}, "process": {"env": []}}))
    state = json.dumps({"pid": 4242, "bundle": str(bundle), "id": "c0ffee"})
    monkeypatch.setattr(hook, "mounts", lambda: [("/opt/hgxkit-sglang-client", "/opt/hgxkit-sglang-client", True)])
    monkeypatch.setattr(
        hook, "userspace", lambda container_id, config: [("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", True)]
    )
    calls: list[list[str]] = []
    monkeypatch.setattr(
        hook.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", "")
    )
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(state))
    assert hook.main(["nvidia-container-runtime-hook", *([stage] if stage else [])]) == 0
    assert calls == []
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(state))  # the same state at prestart mounts both
    assert hook.main(["nvidia-container-runtime-hook", "prestart"]) == 0
    assert [c[-2].removeprefix(f"{bundle}/rootfs") for c in calls] == [
        "/opt/hgxkit-sglang-client",
        "/usr/bin/nvidia-smi",
    ]


def test_node_docker_uses_the_mirror_and_the_registry_serves_it_read_only() -> None:
    daemon = json.loads((DATA / "rootfs" / "etc" / "docker" / "daemon.json").read_text())
    assert daemon == {"registry-mirrors": [serving_registry.MIRROR_URL]}
    cfg = yaml.safe_load((DATA / "rootfs" / "etc" / "docker" / "registry" / "config.yml").read_text())
    assert cfg["http"]["addr"] == f"127.0.0.1:{serving_registry.MIRROR_PORT}"
    assert cfg["storage"]["filesystem"]["rootdirectory"] == serving_registry.NODE_STORAGE
    assert cfg["storage"]["maintenance"]["readonly"]["enabled"] is True
    assert "auth" not in cfg  # Debian's default config asks for htpasswd
    dockerfile = (DATA / "image" / "Dockerfile").read_text()
    enable, mask = dockerfile.split("systemctl mask")
    assert "docker-registry.service" in enable and "docker-registry.service" not in mask


def _probe(store: Path, client: str) -> None:
    probe = store / serving_client.PROBES[client]
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text("")


def test_client_store_stamp(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HGXKIT_SIM_CLIENT_STORE", str(tmp_path))
    assert serving_client.store_path() == tmp_path and not serving_client.is_installed()
    assert serving_client.layers_to_install(tmp_path, ("vllm",)) == ["sglang", "vllm"]  # vLLM's needs SGLang's
    _probe(tmp_path, "sglang")
    serving_client.mark_installed(tmp_path, ("sglang",))
    assert serving_client.is_installed(clients=("sglang",)) and not serving_client.is_installed()
    assert serving_client.installed_clients() == ["sglang"]
    assert serving_client.layers_to_install(tmp_path) == ["vllm"]  # the demo's store: vLLM's layer added on top
    assert serving_client.layers_to_install(tmp_path, ("sglang",)) == []
    _probe(tmp_path, "vllm")
    assert not serving_client.is_installed()  # files without a stamp: a half-finished install
    serving_client.mark_installed(tmp_path, ("vllm",))
    assert serving_client.installed_clients() == ["sglang", "vllm"] and serving_client.is_installed()
    (tmp_path / serving_client.STAMP).write_text(
        "sglang 0123456789abcdef\n" + f"vllm {serving_client.layer_hash('vllm')}\n"
    )
    assert not serving_client.is_installed(clients=("sglang",))  # other requirements: reinstall
    assert serving_client.layers_to_install(tmp_path, ("vllm",)) == ["sglang", "vllm"]  # the layer under it too
    assert (
        serving_client.layer_hash("sglang") != serving_client.layer_hash("vllm") == serving_client.requirements_hash()
    )


def test_requirements_hash_covers_both_clients_and_the_script() -> None:
    names = {p.name for p in serving_client.REQUIREMENTS} | {serving_client.INSTALL_SCRIPT.name}
    assert names == {"client-requirements.txt", "install_clients.sh"} and len(serving_client.REQUIREMENTS) == 2
    pins = [line for line in serving_client.REQUIREMENTS[1].read_text().splitlines() if not line.startswith("#")]
    assert "vllm==0.33.0" in pins and not [p for p in pins if p.startswith("torch")]  # one torch for both clients


def test_client_status_names_the_remedy(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HGXKIT_SIM_CLIENT_STORE", str(tmp_path))
    assert main(["sim", "client", "status"]) == 1
    err = capsys.readouterr().err
    assert f"the client store {tmp_path} is not up to date (it holds no client): run `hgxkit sim client install`" in err
    _probe(tmp_path, "sglang")
    _probe(tmp_path, "vllm")
    serving_client.mark_installed(tmp_path)
    assert main(["sim", "client", "status"]) == 0
    assert capsys.readouterr().out.startswith(f"sglang and vllm benchmark clients in {tmp_path} (requirements ")


def test_a_store_stamped_whole_counts_as_both_layers(tmp_path: Path) -> None:
    for client in serving_client.CLIENTS:
        _probe(tmp_path, client)
    stamp = tmp_path / serving_client.STAMP
    stamp.write_text(serving_client._whole_store_hash() + "\n")
    assert serving_client.is_installed(tmp_path) and serving_client.layers_to_install(tmp_path) == []
    stamp.write_text("0123456789abcdef\n")  # stamped whole for other requirements
    assert serving_client.layers_to_install(tmp_path) == ["sglang", "vllm"]


FAKE_INSTALL = """#!/usr/bin/env bash
# Stands in for install_clients.sh: records the run, holds until the test lets it go, leaves each layer's probe.
store=$1; shift
echo "$*" >> "$store/../runs"
for _ in $(seq 600); do [[ -e $store/../go ]] && break; sleep 0.05; done
for layer in "$@"; do
    case $layer in
        sglang) mkdir -p "$store/lib/python3.11/site-packages/sglang/benchmark"; : > "$store/lib/python3.11/site-packages/sglang/benchmark/serving.py" ;;
        vllm) mkdir -p "$store/vllm-site/vllm/benchmarks"; : > "$store/vllm-site/vllm/benchmarks/serve.py" ;;
    esac
done
"""


def test_a_second_install_waits_for_the_one_under_way_and_installs_nothing(tmp_path: Path, monkeypatch) -> None:
    script = tmp_path / "install.sh"
    script.write_text(FAKE_INSTALL)
    monkeypatch.setattr(serving_client, "INSTALL_SCRIPT", script)
    store = tmp_path / "store"
    waiting = threading.Event()
    first: list[serving_client.ClientStore] = []
    worker = threading.Thread(target=lambda: first.append(serving_client.ensure_installed(store, lambda _: None)))
    worker.start()

    def said(line: str) -> None:
        if "another process has under way" in line:
            waiting.set()
            (tmp_path / "go").touch()

    runs = tmp_path / "runs"
    deadline = time.monotonic() + 60
    while not runs.exists() and time.monotonic() < deadline:  # the first's install has begun, under the lock
        time.sleep(0.02)
    # The first holds the lock until `go`; the second says it waits, which lets the first finish.
    second = serving_client.ensure_installed(store, said, clients=("sglang",))
    worker.join(timeout=60)
    assert waiting.is_set() and first[0].installed and not second.installed
    assert runs.read_text() == "sglang vllm\n"  # one install, both layers
    assert serving_client.is_installed(store)
