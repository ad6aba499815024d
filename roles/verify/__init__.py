"""Verify and reproduce: health, one real generation, SGLang's own benchmark client inside each serving
container, gates, and an archive with the host fingerprint on the controller (a copy stays on the host).

Example (deploys/dspark.py, or deploys/verify.py alone):
    from roles.verify import verify
    verify()
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from io import StringIO
from pathlib import Path

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.api.exceptions import DeployError
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.driver_gate import Runner, driver_gate, run_on
from hgxkit.errors import HgxkitError
from hgxkit.gpu_health import gpu_health_report
from hgxkit.recipe.loader import load_recipe
from hgxkit.recipe.model import Recipe
from hgxkit.results.archive import run_id_for, write_run
from hgxkit.results.report import run_markdown
from hgxkit.results.summary import RunSummary
from hgxkit.serve import by_digest, container_specs
from hgxkit.verify import bench_script, cells_from_jsonl, collect_fingerprint, gates, plan_cells
from roles.verify.defaults import DEFAULTS

SERVE_DEFAULTS = {"serve_state_dir": "/var/lib/hgxkit/serve", "serve_api_key_file": "/etc/hgxkit/serve/api-key"}


@deploy("hgxkit verify", data_defaults={**SERVE_DEFAULTS, **DEFAULTS})
def verify() -> None:
    """Benchmark the serving groups and archive the run (fails on a gate, after archiving)."""
    mode = host.data.get("bench")
    if mode not in ("smoke", "full", "none"):
        raise DeployError(f"bench={mode!r}: use smoke, full or none (e.g. --data bench=full)")
    client_process = host.data.get("verify_client_process")
    if client_process not in ("per_container", "per_cell"):
        raise DeployError(
            f"verify_client_process={client_process!r}: use per_container or per_cell "
            "(e.g. --data verify_client_process=per_cell)"
        )
    try:
        recipe = load_recipe(host.data.get("recipe") or "recipes/deepseek-v4-flash-dspark-marlin.yaml")
    except HgxkitError as err:
        raise DeployError(err.message) from None
    python.call(
        name=f"Verify {recipe.name} ({mode} benchmark) and archive the run",
        function=_verify,
        recipe_path=recipe.path,
        mode=mode,
    )


def _read_json(run: Runner, path: str) -> dict:
    text = "\n".join(run(f"cat {path} 2>/dev/null || true"))
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _curl(run: Runner, url: str, key_file: str | None, body: dict | None = None) -> list[str]:
    # The header reaches curl on stdin (printf is a shell builtin), so the key is never in a process's argv.
    feed = f"printf 'Authorization: Bearer %s\\n' \"$(cat {key_file})\" | " if key_file else ""
    auth = "-H @-" if key_file else ""
    data = f"-H 'Content-Type: application/json' -d '{json.dumps(body)}'" if body is not None else ""
    return run(f"{feed}curl -sS -m 120 {auth} {data} -w '\\n%{{http_code}}' {url} 2>&1 || true")


def _verify(recipe_path: str, mode: str) -> None:
    run = run_on(host)
    recipe = load_recipe(recipe_path)
    key_file = host.data.get("serve_api_key_file") if host.data.get("api_key") == "auto" else None
    state = _read_json(run, f"{host.data.get('serve_state_dir')}/image.json")
    digest = state.get("digest")
    if not digest:
        raise DeployError(
            f"{host.name}: nothing is served yet (no {host.data.get('serve_state_dir')}/image.json); "
            "run deploys/dspark.py first"
        )
    total = len([line for line in run("nvidia-smi -L 2>/dev/null || true") if line.startswith("GPU ")]) or None
    specs = container_specs(
        recipe,
        total_gpus=total,
        bind_address="127.0.0.1",
        api_key=bool(key_file),
        image=by_digest(recipe.image.reference, digest),
    )
    problems: list[str] = []
    for spec in specs:
        health = _curl(run, f"http://127.0.0.1:{spec.port}/health", None)
        if not health or health[-1] != "200":
            problems.append(f"group {spec.group} ({spec.name}): /health answered {health[-1:] or 'nothing'}")
            continue
        body = {
            "model": recipe.server.flag("--served-model-name") or "default",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "Say hello."}],
        }
        answer = _curl(run, f"http://127.0.0.1:{spec.port}/v1/chat/completions", key_file, body)
        if not answer or answer[-1] != "200" or '"choices"' not in "".join(answer[:-1]):
            problems.append(f"group {spec.group} ({spec.name}): a chat completion failed ({answer[-1:]})")
    if problems:
        raise DeployError(f"verify failed on {host.name}:\n" + "\n".join(f"  - {p}" for p in problems))

    run_tag = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    workdir = f"{host.data.get('verify_workdir')}/{run_tag}_{recipe.name}"
    out_len = host.data.get("bench_output_len")
    cells = plan_cells(recipe, mode, [(s.group, s.name) for s in specs], int(out_len) if out_len else None)  # type: ignore[arg-type]
    texts: dict[str, str] = {}
    run(f"mkdir -p {workdir}")
    if cells:
        texts = _run_detached(run, cells, workdir, key_file, run_tag)
    results, missing = cells_from_jsonl(cells, texts)
    failed_gates = missing + gates(recipe, results, mode)  # type: ignore[arg-type]
    health = gpu_health_report(run, expected_gpus=total)
    if host.data.get("verify_gates"):
        failed_gates += [str(p) for p in health.problems()]
        driver_pkg = _driver_package(run)
        failed_gates += [
            str(p)
            for p in driver_gate(
                run,
                expected_version=None,
                expected_gpus=total,
                fabric_package="nvidia-fabricmanager",
                driver_package=driver_pkg,
            )
        ]
    server_info = _json_body(_curl(run, f"http://127.0.0.1:{specs[0].port}/server_info", key_file))
    model_record = _model_record(run, recipe)
    fingerprint = collect_fingerprint(
        run,
        system_name=host.name,
        recipe=recipe,
        rendered=[s.shell() for s in specs],
        image=recipe.image.reference,
        image_digest=digest,
        server_info=server_info,
        model_record=model_record,
        gpu_health=health.to_json(),
    )
    summary = RunSummary(
        run_id=run_id_for(host.name, run_tag, recipe.name),
        host=host.name,
        recipe=recipe.name,
        time=run_tag,
        simulated=fingerprint.simulated,
        tool="sglang.benchmark.serving",
        tool_version=server_info.get("version"),
        cells=results,
        gates=failed_gates,
        bench=mode,
    )
    secrets = _secrets(run, key_file)
    report = run_markdown(summary, fingerprint)
    raw = {name: text for name, text in texts.items()}
    path = write_run(Path(host.data.get("results_dir")), summary, fingerprint, raw, report, secrets)
    _keep_copy_on_host(workdir, path)
    echo(
        f"[{host.name}] run archived in {path} (hgxkit results show {summary.run_id})"
        + ("  SIMULATED" if summary.simulated else "")
    )
    if failed_gates:
        raise DeployError(
            f"verify gates failed on {host.name} (the run is archived in {path}):\n"
            + "\n".join(f"  - {g}" for g in failed_gates)
        )


def _json_body(lines: list[str]) -> dict:
    """The JSON body of a `_curl` answer (its last line is the HTTP status); {} when it is not JSON."""
    try:
        data = json.loads("\n".join(lines[:-1]) or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _driver_package(run: Runner) -> str:
    names = run("dpkg-query -W -f='${Package}\\n' 'nvidia-open*' 'cuda-drivers*' nvidia-driver 2>/dev/null || true")
    return names[0] if names else "nvidia-open"


def _model_record(run: Runner, recipe: Recipe) -> dict:
    record = {"repo_id": recipe.model.repo_id, "revision": recipe.model.revision}
    if recipe.model.local_dir:
        manifest = "\n".join(run(f"cat {recipe.model.local_dir}/.hgxkit-manifest.json 2>/dev/null || true"))
        if manifest.strip():
            import hashlib

            record["manifest_hash"] = "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
            try:
                data = json.loads(manifest)
                record["commit"] = data.get("commit") or data.get("revision_commit")
            except json.JSONDecodeError:
                pass
    return record


def _secrets(run: Runner, key_file: str | None) -> list[str]:
    import os

    found = [os.environ.get(name, "") for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY")]
    if key_file:
        found += run(f"cat {key_file} 2>/dev/null || true")
    return [s for s in found if s]


def _run_detached(run: Runner, cells: list, workdir: str, key_file: str | None, run_tag: str) -> dict[str, str]:
    """Start (or attach to) the detached benchmark unit and wait for it, printing progress."""
    unit = "hgxkit-verify"
    active = run(f"systemctl is-active {unit} 2>/dev/null || true")
    if active[-1:] == ["active"]:
        workdir = "".join(run(f"cat {host.data.get('verify_workdir')}/current 2>/dev/null")) or workdir
        echo(f"[{host.name}] attaching to the benchmark already running in {workdir}")
    else:
        run(f"mkdir -p {workdir} && echo {workdir} > {host.data.get('verify_workdir')}/current")
        host.put_file(
            StringIO(
                bench_script(
                    cells,
                    workdir=workdir,
                    api_key_file=key_file,
                    run_tag=run_tag,
                    client_process=host.data.get("verify_client_process"),
                )
            ),
            f"{workdir}/run.sh",
        )
        run(
            f"systemctl reset-failed {unit} >/dev/null 2>&1; "
            f"systemd-run --unit {unit} --collect --quiet /bin/sh {workdir}/run.sh"
        )
    start = time.monotonic()
    timeout = float(host.data.get("verify_timeout"))
    last = ""
    while True:
        status = run(f"cat {workdir}/status 2>/dev/null || true")
        progress = " ".join(run(f"cat {workdir}/progress 2>/dev/null || true"))
        if progress and progress != last:
            echo(f"[{host.name}] benchmark: {progress} ({time.monotonic() - start:.0f} s)")
            last = progress
        if status:
            break
        if time.monotonic() - start > timeout:
            raise DeployError(
                f"{host.name}: the benchmark did not finish within {timeout:.0f} s; it keeps running "
                f"as unit {unit} (journalctl -u {unit}); rerun verify to attach"
            )
        time.sleep(float(host.data.get("verify_poll")))
    texts = {}
    for cell in cells:
        texts[cell.file] = "\n".join(run(f"cat {workdir}/{cell.file} 2>/dev/null || true"))
        if not texts[cell.file].strip():
            log = run(f"tail -n 5 {workdir}/{cell.file}.log 2>/dev/null || true")
            echo(f"[{host.name}] {cell.file}: no result; client log: {' | '.join(log)[-400:]}")
    return texts


def _keep_copy_on_host(workdir: str, archived: Path) -> None:
    for name in ("summary.json", "fingerprint.json", "report.md"):
        host.put_file(str(archived / name), f"{workdir}/{name}")
