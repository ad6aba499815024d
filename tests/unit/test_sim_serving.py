"""The simulated serving stack without a Docker engine: image inputs, shim overlay, hook, mirror config, client store."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from hgxkit.cli import main
from hgxkit.sim.standin import client_store as serving_client
from hgxkit.sim.standin import image as serving
from hgxkit.sim.standin import registry as serving_registry
from hgxkit.sim.standin.sglang.shim import default_stub_root, install_shim

DATA = Path(serving.__file__).parents[1] / "data"


def test_image_tag_is_a_stable_hash_that_a_variant_changes() -> None:
    tag = serving.image_tag()
    assert tag == serving.image_tag("") and tag.startswith("hgxkit-sim-sglang:") and len(tag.split(":")[1]) == 16
    assert serving.image_tag("rebuilt-1") != tag
    assert serving.base_tag().startswith("hgxkit-sim-sglang-base:")


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
    assert serve.returncode == 0 and serve.stdout.startswith("usage: launch_server.py")
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
    monkeypatch.setattr(hook, "mounts", lambda: [("/opt/hgxkit-sglang-client", "/opt/hgxkit-sglang-client")])
    monkeypatch.setattr(
        hook.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", "")
    )
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(json.dumps({"pid": 4242, "bundle": str(bundle)})))
    assert hook.main(["nvidia-container-runtime-hook", "prestart"]) == 0
    [cmd] = calls
    assert cmd[:6] == ["nsenter", "-t", "4242", "-m", "sh", "-c"]
    assert cmd[-2:] == ["/opt/hgxkit-sglang-client", f"{bundle}/rootfs/opt/hgxkit-sglang-client"]
    assert "remount,bind,ro" in cmd[6]


def test_hook_fails_with_one_line(tmp_path: Path, monkeypatch) -> None:
    hook = _hook()
    monkeypatch.setattr(
        hook.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 32, "", "mount: permission denied\n")
    )
    with pytest.raises(
        SystemExit, match=r"mounting /proc/meminfo at /r/proc/meminfo failed: mount: permission denied$"
    ):
        hook.bind(1, "/r/", "/proc/meminfo", "/proc/meminfo")


def test_hook_ignores_other_stages(monkeypatch) -> None:
    hook = _hook()
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("{}"))
    assert hook.main(["nvidia-container-runtime-hook", "poststop"]) == 0


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


def test_client_store_stamp(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HGXKIT_SIM_CLIENT_STORE", str(tmp_path))
    assert serving_client.store_path() == tmp_path and not serving_client.is_installed()
    probe = tmp_path / serving_client.PROBE
    probe.parent.mkdir(parents=True)
    probe.write_text("")
    assert not serving_client.is_installed()  # files without a stamp: a half-finished install
    serving_client.mark_installed(tmp_path)
    assert serving_client.is_installed()
    (tmp_path / serving_client.STAMP).write_text("0123456789abcdef\n")
    assert not serving_client.is_installed()  # other requirements: reinstall


def test_client_status_names_the_remedy(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HGXKIT_SIM_CLIENT_STORE", str(tmp_path))
    assert main(["sim", "client", "status"]) == 1
    assert f"no SGLang benchmark client in {tmp_path}: run `hgxkit sim client install`" in capsys.readouterr().err
