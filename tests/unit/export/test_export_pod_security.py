"""Kubernetes exports meet Pod Security Standards "baseline" wherever the recipe's judgement allowed nothing more:
the baseline controls (kubernetes.io/docs/concepts/security/pod-security-standards, v1.33) written as checks,
run on every pod spec an export makes. Where a setting needs more (a hostPath model, an allowed host network),
the export says which level in its notes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_export import RECIPES, RUN, _allowances, _export

from hgxkit.export.common import ExportOptions
from hgxkit.export.registry import export_recipe
from hgxkit.importing.docker_run import import_docker_run
from hgxkit.recipe.judge import Allowances, judge

# Capabilities baseline lets a container add, written from the standard here rather than imported from the
# export (hgxkit/export/kubernetes.py keeps its own): a wrong list there must not pass this check.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}


def baseline_violations(pod: dict) -> list[str]:
    """What of Pod Security baseline the pod spec breaks, one line per control."""
    found = [f"host namespace: {key}" for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    found += [f"hostPath volume {v['name']}" for v in pod.get("volumes", []) if "hostPath" in v]
    found += [
        f"sysctl {s['name']}"
        for s in pod.get("securityContext", {}).get("sysctls", [])
        if s["name"] not in SAFE_SYSCTLS
    ]
    if pod.get("securityContext", {}).get("seccompProfile", {}).get("type") == "Unconfined":
        found.append("seccomp Unconfined")
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        context = container.get("securityContext", {})
        if context.get("privileged"):
            found.append(f"{container['name']}: privileged")
        added = set(context.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES
        found += [f"{container['name']}: capability {cap}" for cap in sorted(added)]
        found += [f"{container['name']}: hostPort" for port in container.get("ports", []) if port.get("hostPort")]
        if context.get("procMount", "Default") != "Default":
            found.append(f"{container['name']}: procMount")
        if context.get("seccompProfile", {}).get("type") == "Unconfined":
            found.append(f"{container['name']}: seccomp Unconfined")
    return found


def pods(out: Path) -> list[dict]:
    specs = []
    for document in yaml.safe_load_all((out / "kubernetes.yaml").read_text()):
        if document["kind"] == "Deployment":
            specs.append(document["spec"]["template"]["spec"])
        elif document["kind"] == "LeaderWorkerSet":
            template = document["spec"]["leaderWorkerTemplate"]
            specs += [template[role]["spec"] for role in ("leaderTemplate", "workerTemplate")]
    return specs


def test_the_checks_find_what_baseline_forbids() -> None:
    pod = {
        "hostIPC": True,
        "volumes": [{"name": "m", "hostPath": {"path": "/"}}],
        "containers": [{"name": "s", "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}}],
    }
    assert baseline_violations(pod) == [
        "host namespace: hostIPC",
        "hostPath volume m",
        "s: privileged",
        "s: capability SYS_ADMIN",
    ]


@pytest.mark.parametrize("key", ["marlin", "flashinfer", "vllm"])
def test_a_single_node_export_meets_baseline_with_the_model_on_a_volume_claim(key: str, tmp_path: Path) -> None:
    out = _export(key, "k8s", tmp_path, model_pvc="models")
    assert [(i, baseline_violations(pod)) for i, pod in enumerate(pods(out)) if baseline_violations(pod)] == []


def test_a_hostpath_model_is_the_one_thing_that_needs_more_and_the_export_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hgxkit.cli import main

    recipe = str(Path(RECIPES["marlin"]().path))
    assert main(["recipe", "export", recipe, "--to", "k8s", "-o", str(tmp_path)]) == 0
    assert "needs: Pod Security: the model's hostPath needs level privileged" in capsys.readouterr().err
    assert {tuple(baseline_violations(pod)) for pod in pods(tmp_path)} == {("hostPath volume model",)}


def _named_by(violation: str) -> str:
    """The words of the export's `Pod Security:` note that name what `violation` needs."""
    if violation.startswith("host namespace: "):
        return violation.removeprefix("host namespace: ")
    if violation == "hostPath volume model":
        return "the model's hostPath"
    if violation.startswith("hostPath volume "):
        return "the hostPath volume(s)"
    if violation.endswith(": privileged"):
        return "a privileged container"
    return violation.rpartition(" ")[2]  # a capability, by name


@pytest.mark.parametrize("pvc", [None, "models"], ids=["hostpath", "pvc"])
@pytest.mark.parametrize("key", sorted(RECIPES))
def test_whatever_needs_more_than_baseline_the_export_names(key: str, pvc: str | None, tmp_path: Path) -> None:
    """Every baseline control a pod breaks (each allowed by the recipe's judgement: the host network, a privileged
    container, a host directory) is named in a `Pod Security:` note with the level it needs."""
    exported = export_recipe(judge(RECIPES[key](), _allowances(key)), "k8s", ExportOptions(run_id=RUN, model_pvc=pvc))
    (tmp_path / "kubernetes.yaml").write_text(exported.files["kubernetes.yaml"])
    notes = " | ".join(n for n in exported.needs if n.startswith("Pod Security: "))
    violations = {v for pod in pods(tmp_path) for v in baseline_violations(pod)}
    assert [v for v in sorted(violations) if _named_by(v) not in notes] == []
    assert bool(violations) == bool(notes)


def test_every_host_directory_beyond_the_model_is_named_in_one_note_and_the_model_in_its_own() -> None:
    post = (
        "docker run --gpus all -v /data/models/m:/m:ro -v /data/cache:/cache -v /srv/extra:/extra:ro "
        "lmsysorg/sglang:v0.5.23 python3 -m sglang.launch_server --model-path /m"
    )
    judged = judge(import_docker_run(post), Allowances(docker_options=("host-mount",)))
    assert export_recipe(judged, "k8s", ExportOptions()).needs == [
        "Pod Security: the hostPath volume(s) /data/cache, /srv/extra need level privileged",
        "Pod Security: the model's hostPath needs level privileged",
    ]
