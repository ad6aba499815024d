"""The DCGM exporter stand-in (hgxkit/sim/standin/dcgm): the real exporter's names from the simulated GPUs, the
counters file honoured, an injected XID on its GPU, and exposition text Debian's promtool accepts."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hgxkit.monitoring.dcgm import FIELD_NAMES, counters_csv
from hgxkit.sim import aptrepo
from hgxkit.sim.hwfiles import NodeHardware
from hgxkit.sim.standin.dcgm import exporter
from hgxkit.sim.standin.dcgm import image as dcgm_image

FILES = Path(aptrepo.__file__).parent / "data" / "aptrepo" / "files"
NODE = Path(aptrepo.__file__).parent / "data" / "node"


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A booted simulated node's state in `tmp_path` (8 GPUs, driver 580.105.08); hwsim imported against it."""
    etc, run, versions = tmp_path / "etc", tmp_path / "run", tmp_path / "versions"
    (etc / "faults").mkdir(parents=True)
    versions.mkdir()
    (etc / "node.json").write_text(NodeHardware("node1").to_json())
    for pkg in ("nvidia-kernel-open-dkms", "libnvidia-ml1"):
        (versions / pkg).write_text("580.105.08\n")
    env = {
        "HGXKIT_SIM_ETC": str(etc),
        "HGXKIT_SIM_RUN": str(run),
        "HGXKIT_SIM_VERSIONS": str(versions),
        "HGXKIT_SIM_VISIBLE": str(tmp_path / "visible-gpus"),
        "HGXKIT_SIM_QUIET": "1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", str(NODE))
    subprocess.run([sys.executable, str(NODE / "hwsim.py"), "boot"], check=True, capture_output=True)
    monkeypatch.setattr(exporter, "HWSIM", str(NODE))
    monkeypatch.syspath_prepend(str(NODE))
    import hwsim  # type: ignore[import-not-found]

    importlib.reload(hwsim)
    return etc


def smi_rows() -> list[dict[str, str]]:
    src = (FILES / "nvidia-smi").read_text().replace("@VERSION@", "580.105.08")
    query = [f"--query-gpu={','.join(exporter.QUERY)}", "--format=csv,noheader,nounits"]
    done = subprocess.run(
        [sys.executable, "-c", src, *query], capture_output=True, text=True, check=True, env=dict(os.environ)
    )
    return exporter.parse_smi(done.stdout.splitlines())


def series(text: str, name: str) -> dict[str, float]:
    """{gpu: value} of metric `name` in exposition text."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('gpu="')[1].split('"')[0]] = float(value)
    return out


def test_every_field_of_hgxkits_counters_file_is_served_for_8_gpus(node: Path) -> None:
    counters = exporter.read_counters(counters_csv())
    assert [name for name, kind, _ in counters if kind != "label"] == list(FIELD_NAMES)
    xids, links = exporter.simulated_faults()
    text = exporter.render(counters, smi_rows(), xids, links, "node1")
    for name in FIELD_NAMES:
        assert len(series(text, name)) == 8, name
    assert series(text, "DCGM_FI_DEV_GPU_UTIL") == {str(i): 0.0 for i in range(8)}  # no server: idle
    assert series(text, "DCGM_FI_DEV_FB_FREE")["0"] == 143771.0
    assert series(text, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")["0"] == 1.0  # GpuIdle
    assert set(series(text, "DCGM_FI_DEV_XID_ERRORS").values()) == {0.0}
    line = next(x for x in text.splitlines() if x.startswith("DCGM_FI_DEV_GPU_TEMP{"))
    assert 'device="nvidia0",modelName="NVIDIA H200",Hostname="node1",DCGM_FI_DRIVER_VERSION="580.105.08"' in line
    assert line.endswith(',simulated="true"} 31')


def test_an_injected_xid_and_nvlink_fault_show_on_their_gpu(node: Path) -> None:
    (node / "faults" / "xid-79-gpu3").touch()
    (node / "faults" / "nvlink-degraded").touch()
    (node / "faults" / "xid-bogus").touch()  # not an XID switch: ignored
    xids, links = exporter.simulated_faults()
    counters = exporter.read_counters(counters_csv())
    text = exporter.render(counters, smi_rows(), xids, links, "node1")
    assert series(text, "DCGM_FI_DEV_XID_ERRORS") == {**{str(i): 0.0 for i in range(8)}, "3": 79.0}
    assert series(text, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL")["3"] == 17.0
    assert series(text, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL")["2"] == 0.0


def test_the_counters_file_chooses_the_fields(node: Path) -> None:
    counters = exporter.read_counters("# c\nDCGM_FI_DEV_GPU_UTIL, gauge, util\n\nDCGM_FI_DEV_XID_ERRORS, gauge, x\n")
    text = exporter.render(counters, smi_rows(), {}, {}, "n")
    assert [x for x in text.splitlines() if x.startswith("# TYPE")] == [
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
    ]
    assert "DCGM_FI_DRIVER_VERSION" not in text  # not asked for as a label


def test_promtool_accepts_the_exposition(node: Path, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing: apt-get install prometheus (hgxkit sim host setup --for test)")
        pytest.skip("promtool is missing: apt-get install prometheus")
    text = exporter.render(exporter.read_counters(counters_csv()), smi_rows(), {}, {}, "node1")
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    # It parses the text, then lints style: the real exporter's own names and labels (counters without `_total`,
    # `modelName`, `UUID`) are all it may complain about; a parse error would say "error while linting".
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines and "error" not in (done.stdout + done.stderr)
    allowed = (
        'should have "_total" suffix',
        "label names should be written in 'snake_case'",
        "metric name should not include type 'counter'",
    )  # DCGM_FI_DEV_PCIE_REPLAY_COUNTER
    assert all(any(a in x for a in allowed) for x in lines), lines


def test_image_runs_the_exporter_with_the_real_flags() -> None:
    assert dcgm_image.DEFAULT_TAGS == ("hgxkit-sim/dcgm-exporter:4.4.2-4.7.1-ubuntu22.04",)
    assert 'ENTRYPOINT ["python3", "/usr/local/bin/dcgm-exporter"]' in dcgm_image.DOCKERFILE
    assert dcgm_image.image_tag().startswith("hgxkit-sim-dcgm-exporter:")
