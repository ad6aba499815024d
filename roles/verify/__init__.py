"""Verify and reproduce: health, one real generation, SGLang's own benchmark client inside each serving
container, gates, and an archive with the host fingerprint on the controller (a copy stays on the host).

Example (deploys/reproduce.py, or deploys/verify.py alone):
    from roles.verify import verify
    verify()
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from io import StringIO
from pathlib import Path

from pyinfra import host
from pyinfra.api import Host, deploy
from pyinfra.api.output import echo
from pyinfra.operations import python

from hgxkit.errors import InputError
from hgxkit.hostcmd import HostRunner, argv, script
from hgxkit.monitoring.readback import (
    STEP_S,
    duration_s,
    gpu_csv,
    gpu_query,
    local_url,
    metrics_text,
    parse_matrix,
    query_window,
    samples_command,
    server_query,
)
from hgxkit.monitoring.scrape import choose_monitoring_host
from hgxkit.node.driver import driver_gate
from hgxkit.node.facts_apt import InstalledPackages
from hgxkit.node.facts_files import FileText, JsonFile
from hgxkit.node.facts_gpu import NvidiaSmi
from hgxkit.node.health import GpuHealthReport, gpu_health_report
from hgxkit.problems import refuse
from hgxkit.recipe.dump import dump_recipe
from hgxkit.recipe.pd import group_server, is_prefill_decode, pd_router_problem, side
from hgxkit.recipe.spec import Recipe
from hgxkit.results.archive import run_id_for, write_run
from hgxkit.results.fingerprint import Fingerprint
from hgxkit.results.report import run_markdown
from hgxkit.results.summary import CellResult, RunSummary
from hgxkit.runfailure import RunFailure, escape_control
from hgxkit.secrets import redact
from hgxkit.serving.containers import ApiKeyFiles, ContainerSpec, container_specs
from hgxkit.serving.groupcmd import rank_status_command
from hgxkit.serving.image import RECORD_NAME, image_to_run, recorded_digest
from hgxkit.serving.multinode import NodeGroup, failed_ranks, parse_rank_health
from hgxkit.serving.nodegroups import group_for, member_host, run_problems, share_for, spanning_recipe
from hgxkit.serving.probes import http_request, json_body, parse_response
from hgxkit.serving.router import choose_router_host
from hgxkit.serving.steps import judged_for
from hgxkit.verify.collect import collect_fingerprint
from hgxkit.verify.envreport import read_env_report, report_folder, start_env_report
from hgxkit.verify.plan import Cell, bench_knob, cells_from_output, gates, plan_cells, through_router
from hgxkit.verify.script import CLIENT_START_FILE, bench_script, parse_progress, wait_for_progress
from roles.verify.defaults import DEFAULTS, VerifyKnobs

UNIT = "hgxkit-verify"


@deploy("hgxkit verify", data_defaults=DEFAULTS)
def verify() -> None:
    """Benchmark the serving groups and archive the run (fails on a gate, after archiving)."""
    mode = VerifyKnobs.from_host(host).bench
    if mode not in ("smoke", "full", "none"):
        refuse(f"verify refused on {host.name}", [f"bench={mode!r}: use smoke, full or none (e.g. --data bench=full)"])
    client_process = VerifyKnobs.from_host(host).verify_client_process
    if client_process not in ("per_container", "per_cell"):
        refuse(
            f"verify refused on {host.name}",
            [
                f"verify_client_process={client_process!r}: use per_container or per_cell "
                "(e.g. --data verify_client_process=per_cell)"
            ],
        )
    recipe = judged_for(host).recipe
    group, problems = group_for(host)  # a server spanning nodes: verified from its head, every rank checked
    refuse(f"verify cannot place the multi-node group on {host.name}", problems)
    if group is not None:
        refuse(f"verify cannot check the multi-node group on {host.name}", run_problems(host, group))
        if host.name != group.head.host:
            return  # rank >= 1 serves no API: the head's verify checks this host's rank and fingerprints it
        recipe = spanning_recipe(host)
    total = VerifyKnobs.from_host(host).serve_total_gpus
    gpus = int(total) if total is not None else _smi_gpus(host)
    share, problems = share_for(host, gpus)
    refuse(f"verify cannot place {recipe.name}'s groups on {host.name}", problems)
    if share is not None and is_prefill_decode(recipe, gpus) and _router_host() != host.name:
        return  # a split laid over hosts is verified through the router from its host, which reaches every share
    python.call(
        name=f"Verify {recipe.name} ({mode} benchmark) and archive the run",
        function=_verify,
        recipe=recipe,
        mode=mode,
        group=group,
        router_port=_split_router_port(recipe),
        first_group=share.first_group if share is not None else 0,
    )


def _smi_gpus(h: Host) -> int | None:
    return len(h.get_fact(NvidiaSmi).gpus) or None


def _router_host() -> str | None:
    """The host that runs the router (None when none does)."""
    hosts = list(host.inventory)
    candidates = [h.name for h in hosts if VerifyKnobs.from_host(h).router]
    return choose_router_host(VerifyKnobs.from_host(host).router_host, candidates, [h.name for h in hosts])[0]


def _split_router_port(recipe: Recipe) -> int | None:
    """The router's port when the recipe splits prefill and decode over its groups (None when it does not):
    neither side answers a request alone, so the cells and the chat completion go through the router, which must
    run on this host (the clients reach it over 127.0.0.1)."""
    knobs = VerifyKnobs.from_host(host)
    total = knobs.serve_total_gpus
    if not is_prefill_decode(recipe, int(total) if total is not None else None):
        return None
    heading = f"verify refused on {host.name}"
    refuse(heading, [] if knobs.router else [pd_router_problem(recipe)])
    hosts = list(host.inventory)
    candidates = [h.name for h in hosts if VerifyKnobs.from_host(h).router]
    chosen, error = choose_router_host(knobs.router_host, candidates, [h.name for h in hosts])
    if not error and chosen != host.name:
        error = f"the router runs on {chosen}, and a prefill/decode split is benchmarked through it from its own host"
        error += f": run the router on {host.name} (router_host)"
    refuse(heading, [error] if error else [])
    return int(knobs.router_port)


def _specs(
    recipe: Recipe, key_file: str | None, group: NodeGroup | None = None, h: Host | None = None, first_group: int = 0
) -> tuple[list[ContainerSpec], str, int | None]:
    """The serving containers as the serving role started them on `h` (default this host), the digest they
    run, and the node's GPUs; for a multi-node group, `h`'s rank's container."""
    h = h or host
    state_dir = VerifyKnobs.from_host(h).serve_state_dir
    digest = recorded_digest(h.get_fact(JsonFile, path=f"{state_dir}/{RECORD_NAME}"), recipe.image.reference)
    if not digest:
        refuse(
            f"verify refused on {h.name}",
            [
                f"{recipe.name} is not served yet (no {state_dir}/{RECORD_NAME} for {recipe.image.reference}); "
                "run deploys/reproduce.py first"
            ],
        )
    total = VerifyKnobs.from_host(h).serve_total_gpus
    gpus = int(total) if total is not None else (len(h.get_fact(NvidiaSmi).gpus) or None)
    keys = ApiKeyFiles.beside(key_file) if key_file else None
    member = group.member(h.name) if group else None
    specs = container_specs(
        recipe,
        total_gpus=gpus,
        bind_address="127.0.0.1",
        api_key=keys,
        image=image_to_run(recipe.image.reference, digest),
        rank=member.rank if member else None,
        head=group.head.address if group else None,
        first_group=first_group,
    )
    return specs, digest, gpus


def _rank_failures(group: NodeGroup, name: str) -> list[str]:
    """Every rank whose container is not running, naming its host (rank 0 alone may still answer health for
    a while after another rank died)."""
    health = [
        parse_rank_health(m.host, m.rank, HostRunner(member_host(host, m.host))(rank_status_command(name)))
        for m in group.members
    ]
    return failed_ranks(health)


def _probe(run: HostRunner, recipe: Recipe, spec: ContainerSpec, key_file: str | None, chat: bool = True) -> str | None:
    """Wait (up to verify_ready_timeout, printing progress) until the group answers its health check — a server
    warming up after a restart answers 503 for a while — then (`chat`) send one real chat completion; what is
    wrong (None when the group serves)."""
    kind = recipe.server.server_kind
    base = spec.health_url.rsplit("/", 1)[0]
    who = f"group {spec.group} ({spec.name})"
    return _wait_ready(run, f"{base}{kind.ready_path}", who) or (
        _chat(run, recipe, base, who, key_file) if chat else None
    )


def _wait_ready(run: HostRunner, url: str, who: str) -> str | None:
    """Poll `url` until it answers 200 (None) or verify_ready_timeout passes (what it answered)."""
    timeout = float(VerifyKnobs.from_host(host).verify_ready_timeout)
    start = time.monotonic()
    while True:
        status, _ = parse_response(run(http_request(url, timeout_s=30)))
        elapsed = time.monotonic() - start
        if status == 200:
            return None
        answer = f"{url.rsplit('/', 1)[-1]} answered {status or 'nothing'}"
        if elapsed > timeout:
            return f"{who}: {answer} for {elapsed:.0f} s"
        echo(f"[{host.name}] {who}: {answer}; waiting ({elapsed:.0f} s)")
        time.sleep(float(VerifyKnobs.from_host(host).verify_poll))


def _chat(run: HostRunner, recipe: Recipe, base: str, who: str, key_file: str | None) -> str | None:
    """One real chat completion at `base`; what is wrong (None when it answers)."""
    models = json_body(run(http_request(f"{base}/v1/models", key_file=key_file))).get("data") or [{}]
    body = {
        "model": models[0].get("id") or recipe.server.flag("--served-model-name") or "default",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    chat = f"{base}/v1/chat/completions"
    status, text = parse_response(run(http_request(chat, body=body, key_file=key_file)))
    if status != 200 or '"choices"' not in text:
        return f"{who}: a chat completion failed ({status or 'no answer'})"
    return None


def _verify(
    recipe: Recipe, mode: str, group: NodeGroup | None = None, router_port: int | None = None, first_group: int = 0
) -> None:
    """Check every group serves, benchmark the planned cells, fingerprint the node(s), judge the gates and archive
    the run; a failed gate stops the run only once it is archived. With `router_port` (a prefill/decode split)
    the chat completion and the cells go through the router."""
    run = HostRunner(host)
    took = _Stopwatch()
    key_file = _api_key_file(host)
    specs, digest, total = _specs(recipe, key_file, group, first_group=first_group)
    _refuse_unless_serving(run, recipe, specs, key_file, group, router_port)
    took.lap("health and a chat completion")

    run_tag = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    workdir = f"{VerifyKnobs.from_host(host).verify_workdir}/{run_tag}_{recipe.name}"
    by_group = {s.group: s for s in specs}
    monitored = bool(VerifyKnobs.from_host(host).monitoring)
    cells = _plan_run_cells(recipe, mode, specs, by_group, monitored, router_port)
    texts, client_logs = _benchmark(run, cells, by_group, monitored, workdir, key_file, run_tag, took)
    kind = recipe.server.server_kind
    env_report = _start_env_report(run, kind.env_report, specs[0].name)
    health = gpu_health_report(host.get_fact, expected_gpus=total)
    server_info = _server_info(run, recipe, specs[0], key_file)
    fingerprint = _node_fingerprint(recipe, specs, digest, server_info, health, group)
    member_runs = _member_fingerprints(recipe, group, server_info) if group else {}
    took.lap("fingerprint")
    members = {name: fp for name, (fp, _) in member_runs.items()}
    results, missing = cells_from_output(
        cells,
        texts,
        simulated=fingerprint.simulated,
        telemetry_source="prometheus" if monitored else "sampled",
        client_logs=client_logs,
    )
    failed_gates = _failed_gates(recipe, mode, results, missing, group, specs[0].name, health, member_runs, total)
    summary = RunSummary(
        run_id=run_id_for(host.name, run_tag, recipe.name),
        host=host.name,
        recipe=recipe.name,
        time=run_tag,
        simulated=fingerprint.simulated,
        tool=kind.client,
        tool_version=server_info.get("version"),
        cells=results,
        gates=failed_gates,
        bench=mode,
    )
    took.lap("statistics and gates")
    fingerprint = replace(fingerprint, server_env_report=_read_env_report(run, env_report, specs[0].name))
    took.lap(f"the engine's environment report ({env_report or 'none'}; waited for)")
    path = _archive(run, recipe, summary, fingerprint, members, cells, texts, key_file, workdir, took)
    echo(f"[{host.name}] verify took {took.total():.1f} s: {took.summary()}")
    echo(
        f"[{host.name}] run archived in {path} (hgxkit results show {summary.run_id}; report: {path}/report.html)"
        + ("  SIMULATED" if summary.simulated else "")
    )
    if failed_gates:
        refuse(f"verify gates failed on {host.name} (the run is archived in {path})", failed_gates)


def _api_key_file(h: Host) -> str | None:
    """The API key file the serving role wrote on `h`, or None when the groups take no key."""
    knobs = VerifyKnobs.from_host(h)
    return str(knobs.serve_api_key_file) if knobs.api_key == "auto" else None


def _server_info(run: HostRunner, recipe: Recipe, spec: ContainerSpec, key_file: str | None) -> dict:
    """What the server says it is (its kind's info endpoint, /version when it names none), with the kind."""
    kind = recipe.server.server_kind
    info_url = spec.health_url.rsplit("/", 1)[0] + (kind.info_path or "/version")
    return {"kind": kind.name, **json_body(run(http_request(info_url, key_file=key_file)))}


def _node_fingerprint(
    recipe: Recipe,
    specs: list[ContainerSpec],
    digest: str,
    server_info: dict,
    health: GpuHealthReport,
    group: NodeGroup | None,
) -> Fingerprint:
    """This node's fingerprint: everything read from it that can change a result (rank 0's for a group)."""
    return collect_fingerprint(
        host.get_fact,
        system_name=host.name,
        recipe=recipe,
        rendered=[s.shell() for s in specs],
        image=recipe.image.reference,
        image_digest=digest,
        server_info=server_info,
        model_record=_model_record(recipe),
        gpu_health=health.to_json(),
        number_of_nodes=len(group.members) if group else 1,
        node_group=_topology(group),
    )


def _refuse_unless_serving(
    run: HostRunner,
    recipe: Recipe,
    specs: list[ContainerSpec],
    key_file: str | None,
    group: NodeGroup | None,
    router_port: int | None = None,
) -> None:
    """Stop the run unless every rank of a multi-node group is up and every group answers health and one chat
    completion (a split's groups answer health, and the chat completion goes through the router): a benchmark of a
    broken group would measure nothing."""
    if group is not None:
        broken = _rank_failures(group, specs[0].name)
        if broken:
            refuse(
                f"verify failed on {host.name}: the multi-node group {specs[0].name} ({group.label()}) is not "
                "whole; rerun deploys/reproduce.py to start it again",
                broken,
            )
    problems = [p for p in (_probe(run, recipe, spec, key_file, chat=router_port is None) for spec in specs) if p]
    if router_port is not None and not problems:
        base, who = f"http://127.0.0.1:{router_port}", f"the router (port {router_port})"
        problems = [p for p in (_wait_ready(run, f"{base}/readiness", who),) if p]
        problems = problems or [p for p in (_chat(run, recipe, base, who, key_file),) if p]
    refuse(f"verify failed on {host.name}", problems)


def _plan_run_cells(
    recipe: Recipe,
    mode: str,
    specs: list[ContainerSpec],
    by_group: dict[int, ContainerSpec],
    monitored: bool,
    router_port: int | None = None,
) -> list[Cell]:
    """The benchmark cells of `mode` for every group; without monitoring each cell samples its group's /metrics
    and GPUs while it runs (with monitoring, Prometheus is read afterwards instead). A prefill/decode split's
    cells (`router_port`) are one set, sent to the router by the client in the first decode group's container
    (the host's network), whose telemetry they sample: the decode group makes every token after the first."""
    try:
        out_len = bench_knob("bench_output_len", VerifyKnobs.from_host(host).bench_output_len)
        repeats = bench_knob("bench_repeats", VerifyKnobs.from_host(host).bench_repeats)
    except InputError as err:
        refuse(f"verify refused on {host.name}", [err.message])
        raise
    targets = [(s.group, s.name) for s in specs]
    if router_port is not None:
        # The decode's telemetry, where this host has one; else (a split laid over hosts) the client runs beside
        # this host's side and samples it.
        decode = [t for t in targets if side(group_server(recipe, t[0])) == "decode"]
        targets = (decode or targets)[:1]
    cells = plan_cells(recipe, mode, targets, out_len, repeats, port=router_port)  # type: ignore[arg-type]
    if router_port is not None:
        cells = through_router(cells)
    if monitored:
        return cells
    return [
        replace(c, metrics_url=_metrics_url(recipe, by_group[c.group]), gpus=tuple(by_group[c.group].gpus))
        for c in cells
    ]


def _benchmark(
    run: HostRunner,
    cells: list[Cell],
    by_group: dict[int, ContainerSpec],
    monitored: bool,
    workdir: str,
    key_file: str | None,
    run_tag: str,
    took: _Stopwatch,
) -> tuple[dict[str, str], dict[str, str]]:
    """Run the cells in a root-only workdir on the host and bring back their output files' texts and the client
    logs of cells with none; with monitoring, each cell's telemetry is read from Prometheus afterwards."""
    run(
        script(
            "umask 077 && mkdir -p {dir} && chmod 700 {parent} {dir}",
            dir=workdir,
            parent=str(VerifyKnobs.from_host(host).verify_workdir),
        )
    )
    texts, client_logs = _run_detached(run, cells, workdir, key_file, run_tag) if cells else ({}, {})
    took.lap(f"benchmark ({len(cells)} cells; the clients' start-up {_client_startup_s(texts):.1f} s of it)")
    if monitored and cells:
        texts.update(_prometheus_telemetry(cells, texts, by_group))
        took.lap("telemetry from Prometheus")
    return texts, client_logs


def _failed_gates(
    recipe: Recipe,
    mode: str,
    results: list[CellResult],
    missing: list[str],
    group: NodeGroup | None,
    container: str,
    health: GpuHealthReport,
    member_runs: dict,
    total: int | None,
) -> list[str]:
    """What fails the run: cells without results, the recipe's gates on the results, a rank that died while the
    benchmark ran, and (verify_gates) the bring-up gates and GPU health of every node again."""
    failed = missing + gates(recipe, results, mode)  # type: ignore[arg-type]
    if group is not None:  # a rank that died while the benchmark ran
        failed += _rank_failures(group, container)
    if VerifyKnobs.from_host(host).verify_gates:
        failed += [str(p) for p in health.problems()]
        for name, (_, member_health) in member_runs.items():
            failed += [f"{name}: {p}" for p in member_health.problems()]
        failed += [
            str(p)
            for p in driver_gate(
                host.get_fact,
                expected_version=None,
                expected_gpus=total,
                fabric_package="nvidia-fabricmanager",
                driver_package=_driver_package(),
            )
        ]
    return failed


def _archive(
    run: HostRunner,
    recipe: Recipe,
    summary: RunSummary,
    fingerprint: Fingerprint,
    members: dict[str, Fingerprint],
    cells: list[Cell],
    texts: dict[str, str],
    key_file: str | None,
    workdir: str,
    took: _Stopwatch,
) -> Path:
    """Write the run (summary, fingerprint, raw client output, telemetry, report) into the controller's results
    and leave its scrubbed copy in the host's workdir; where the run was archived."""
    report = run_markdown(summary, fingerprint, members=members)
    telemetry_names = {name for cell in cells for name in cell.telemetry_files}
    raw = {name: text for name, text in texts.items() if name not in telemetry_names and name != CLIENT_START_FILE}
    telemetry = {name: text for name, text in texts.items() if name in telemetry_names and text.strip()}
    path = write_run(
        Path(VerifyKnobs.from_host(host).results_dir),
        summary,
        fingerprint,
        raw,
        report,
        _secrets(run, key_file),
        telemetry=telemetry,
        html=True,
        reference=recipe.reference,
        members=members,
        recipe_yaml=dump_recipe(recipe),
    )
    took.lap("report and archive")
    _keep_copy_on_host(run, workdir, path, raw)
    took.lap("copy on the host")
    return path


def _client_startup_s(texts: dict[str, str]) -> float:
    """Seconds the client processes took to start and import their client (the host script's record)."""
    total = 0.0
    for line in texts.get(CLIENT_START_FILE, "").splitlines():
        try:
            start, ready = (float(word) for word in line.split())
        except ValueError:
            continue
        total += max(ready - start, 0.0)
    return total


class _Stopwatch:
    """Seconds per step of a verify run, for the line that says where its time went."""

    def __init__(self) -> None:
        self.start = self.last = time.monotonic()
        self.steps: list[tuple[str, float]] = []

    def lap(self, step: str) -> None:
        now = time.monotonic()
        self.steps.append((step, now - self.last))
        self.last = now

    def total(self) -> float:
        return self.last - self.start

    def summary(self) -> str:
        return ", ".join(f"{step} {seconds:.1f} s" for step, seconds in self.steps)


def _topology(group: NodeGroup | None) -> dict:
    """Which host had which rank, at which address, for the fingerprint ({} on one node)."""
    if group is None:
        return {}
    ranks = [{"rank": m.rank, "host": m.host, "address": m.address} for m in group.members]
    return {"nodes": len(group.members), "dist_port": group.dist_port, "ranks": ranks}


def _member_fingerprints(recipe: Recipe, group: NodeGroup, server_info: dict) -> dict:
    """The fingerprint and GPU health of every rank >= 1's host (rank 0's are the run's own), by host name."""
    out = {}
    for member in group.members[1:]:
        h = member_host(host, member.host)
        specs, digest, total = _specs(recipe, _api_key_file(h), group, h)
        info = {
            "kind": server_info.get("kind"),
            "version": server_info.get("version"),
            "node_rank": member.rank,
            "simulated": server_info.get("simulated"),
        }
        health = gpu_health_report(h.get_fact, expected_gpus=total)
        fingerprint = collect_fingerprint(
            h.get_fact,
            system_name=member.host,
            recipe=recipe,
            rendered=[s.shell() for s in specs],
            image=recipe.image.reference,
            image_digest=digest,
            server_info=info,
            model_record=_model_record(recipe, h),
            gpu_health=health.to_json(),
            number_of_nodes=len(group.members),
            node_group=_topology(group),
        )
        out[member.host] = (fingerprint, health)
    return out


def _prometheus_telemetry(cells: list[Cell], texts: dict[str, str], by_group: dict[int, ContainerSpec]) -> dict:
    """Each recorded cell's /metrics series and GPU rows, read from Prometheus' raw samples of its window, as the
    files the samplers would have written (hgxkit/monitoring/readback.py); a cell Prometheus cannot answer for
    keeps none (its results still count)."""
    monitors = [h.name for h in host.inventory if VerifyKnobs.from_host(h).monitoring]
    chosen, error = choose_monitoring_host(
        VerifyKnobs.from_host(host).monitoring_host, monitors, [h.name for h in host.inventory]
    )
    if chosen is None:
        echo(f"[{host.name}] no telemetry: {error or 'no monitoring host in the inventory'}")
        return {}
    monitor = host.inventory.get_host(chosen)
    setting = VerifyKnobs.from_host(monitor).prometheus_scrape_interval
    try:
        interval = duration_s(str(setting))
    except ValueError as err:
        echo(f"[{host.name}] no telemetry: {err}")
        return {}
    if interval > STEP_S:
        echo(
            f"[{host.name}] Prometheus scrapes every {setting}: the per-cell telemetry read from it is coarser "
            "than verify's 1 s sampling (prometheus_scrape_interval: 1s gives the same resolution)"
        )
    base = local_url(
        str(VerifyKnobs.from_host(monitor).prometheus_bind_address), int(VerifyKnobs.from_host(monitor).prometheus_port)
    )
    windows = {}
    for cell in (c for c in cells if c.record):
        stamps = [float(t) for t in texts.get(cell.telemetry_files[2], "").split() if t.replace(".", "", 1).isdigit()]
        if len(stamps) > 1:
            windows[id(cell)] = query_window(stamps[0], stamps[-1], interval)
    if not windows:
        return {}
    # Prometheus must have scraped past the last window's end before it is asked about it.
    time.sleep(min(max(0.0, max(end for _, end in windows.values()) + interval - time.time()), 2 * interval + 5))
    run = HostRunner(monitor)
    out: dict[str, str] = {}
    for cell in (c for c in cells if c.record and id(c) in windows):
        start, end = windows[id(cell)]
        metrics_file, gpu_file, _ = cell.telemetry_files
        spec = by_group[cell.group]
        group = spec.rendered.name or f"group-{spec.group}"  # the `group` label of its scrape target
        for name, query, convert in (
            (metrics_file, server_query(host.name, group), metrics_text),
            (gpu_file, gpu_query(host.name, tuple(spec.gpus)), gpu_csv),
        ):
            answer = "\n".join(run(samples_command(base, query, start, end)))
            try:
                out[name] = convert(parse_matrix(answer, source=f"Prometheus on {chosen}, {name}"))
            except ValueError as err:
                echo(f"[{host.name}] {err}")
    return out


def _metrics_url(recipe: Recipe, spec: ContainerSpec) -> str | None:
    """The group's /metrics as the node reaches it (SGLang serves it only with --enable-metrics)."""
    kind = recipe.server.server_kind
    if kind.metrics_flag and not recipe.server.has(kind.metrics_flag):
        return None
    return spec.health_url.rsplit("/", 1)[0] + kind.metrics_path


def _env_report_folder() -> str:
    return report_folder(str(VerifyKnobs.from_host(host).verify_workdir))


def _start_env_report(run: HostRunner, words: tuple[str, ...], container: str) -> str | None:
    """`kept` (made for this container by an earlier verify), `making` (a unit on the host makes it while the
    controller works on the results; hgxkit/verify/envreport.py) or None (the kind has none, or no container)."""
    if not words:
        return None
    said = run(start_env_report(words, container, _env_report_folder()))
    return said[-1] if said and said[-1] in ("kept", "making") else None


def _read_env_report(run: HostRunner, state: str | None, container: str) -> str | None:
    if state is None:
        return None
    return redact("\n".join(run(read_env_report(container, _env_report_folder())))) or None


def _driver_package() -> str:
    installed = host.get_fact(InstalledPackages, patterns="nvidia-open* cuda-drivers* nvidia-driver")
    return sorted(installed)[0] if installed else "nvidia-open"


def _model_record(recipe: Recipe, h: Host | None = None) -> dict:
    record: dict = {"repo_id": recipe.model.repo_id, "revision": recipe.model.revision}
    if recipe.model.local_dir:
        manifest = (h or host).get_fact(FileText, path=f"{recipe.model.local_dir}/.hgxkit-manifest.json")
        if manifest and manifest.strip():
            record["manifest_hash"] = "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
            try:
                data = json.loads(manifest)
                record["commit"] = data.get("commit") or data.get("revision_commit")
            except json.JSONDecodeError:
                pass
    return record


def _secrets(run: HostRunner, key_file: str | None) -> list[str]:
    found = [os.environ.get(name, "") for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY")]
    if key_file:
        found += run(argv("cat", key_file))
    return [s for s in found if s]


def _run_detached(
    run: HostRunner, cells: list[Cell], workdir: str, key_file: str | None, run_tag: str
) -> tuple[dict[str, str], dict[str, str]]:
    """Start (or attach to) the detached benchmark unit and wait for it, printing progress; the result files'
    texts, and the client log's last lines (redacted, control characters escaped) of each cell with none."""
    current = f"{VerifyKnobs.from_host(host).verify_workdir}/current"
    active, _ = run.status(argv("systemctl", "is-active", "--quiet", UNIT))
    if active:
        workdir = "".join(run(script("cat {file} 2>/dev/null || true", file=current))) or workdir
        echo(f"[{host.name}] attaching to the benchmark already running in {workdir}")
    else:
        run(script("mkdir -p {dir} && echo {dir} > {current}", dir=workdir, current=current))
        text = bench_script(
            cells,
            workdir=workdir,
            api_key_file=key_file,
            run_tag=run_tag,
            client_process=VerifyKnobs.from_host(host).verify_client_process,
        )
        host.put_file(StringIO(text), f"{workdir}/run.sh")
        run(
            script(
                "systemctl reset-failed {unit} >/dev/null 2>&1; "
                "systemd-run --unit {unit} --collect --quiet /bin/sh {sh}",
                unit=UNIT,
                sh=f"{workdir}/run.sh",
            )
        )
    start = time.monotonic()
    timeout = float(VerifyKnobs.from_host(host).verify_timeout)
    seen, last = "", ""
    while True:
        # One call waits on the node (up to verify_poll s) until the progress file changes or the status appears,
        # so each report reaches the controller within a fraction of a second, not at the next fixed poll.
        lines = run(wait_for_progress(workdir, seen, float(VerifyKnobs.from_host(host).verify_poll)))
        before = seen
        seen, status, progress = parse_progress(lines)
        if not status and seen == before and not run.status(argv("systemctl", "is-active", "--quiet", UNIT))[0]:
            # A quiet poll and no unit: it died without a status (the node rebooted, it was stopped), so waiting
            # would last verify_timeout. Read once more: the unit may have written its status and exited between.
            seen, status, progress = parse_progress(run(wait_for_progress(workdir, seen, 0)))
            if not status:
                raise RunFailure(
                    f"the benchmark unit {UNIT} ended without finishing (was the node rebooted?)",
                    f"its partial output stays in {workdir}",
                    "rerun verify to start it again",
                )
        if progress and progress != last:
            echo(f"[{host.name}] benchmark: {escape_control(redact(progress))} ({time.monotonic() - start:.0f} s)")
            last = progress
        if status:
            break
        if time.monotonic() - start > timeout:
            raise RunFailure(
                f"the benchmark did not finish within {timeout:.0f} s",
                f"it keeps running as unit {UNIT} (journalctl -u {UNIT})",
                "rerun verify to attach",
            )
    names = [name for cell in cells for name in (cell.file, *cell.telemetry_files)] + [CLIENT_START_FILE]
    texts = _fetch_results(run, workdir, names)
    logs = {}
    for cell in cells:
        if not texts.get(cell.file, "").strip():
            log = run(script("tail -n 5 {f} 2>/dev/null || true", f=f"{workdir}/{cell.file}.log"))
            shown = escape_control(redact(" | ".join(log)[-400:]))  # the client prints what the server answered
            echo(f"[{host.name}] {cell.file}: no result; client log: {shown}")
            logs[cell.file] = "\n".join(escape_control(redact(line.rstrip())) for line in log)  # Docker's \r too
    return texts, logs


def _fetch_results(run: HostRunner, workdir: str, names: list[str]) -> dict[str, str]:
    """Every result file of the run in ONE transfer (a root-only tar beside the workdir, deleted after)."""
    bundle = f"{workdir}.results.tar"
    run(
        script(
            "umask 077 && tar -C {dir} -cf {tar} --ignore-failed-read -- {names} 2>/dev/null; true",
            dir=workdir,
            tar=bundle,
            names=names,
        )
    )
    with tempfile.TemporaryDirectory(prefix="hgxkit-verify-") as tmp:
        local = Path(tmp) / "results.tar"
        try:
            host.get_file(bundle, str(local))
        finally:
            run(argv("rm", "-f", bundle))
        texts = dict.fromkeys(names, "")
        if local.exists() and local.stat().st_size:
            with tarfile.open(local) as tar:
                for member in tar.getmembers():
                    wanted = member.name.removeprefix("./")
                    if member.isfile() and wanted in texts:
                        data = tar.extractfile(member)
                        texts[wanted] = data.read().decode(errors="replace") if data else ""
    return texts


def _keep_copy_on_host(run: HostRunner, workdir: str, archived: Path, raw: dict[str, str]) -> None:
    """The host keeps what the controller archived: scrubbed summary, fingerprint and report, and the raw
    client output replaced by its scrubbed copy (the client writes server_info, with its api_key, into it).
    In ONE transfer: a tar of those files (root-only modes), unpacked over the workdir, deleted after."""
    names = [(archived / name, name) for name in ("summary.json", "fingerprint.json", "report.md")]
    names += [(archived / "raw" / name, name) for name in raw if (archived / "raw" / name).exists()]

    def root_only(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mode, info.uid, info.gid, info.uname, info.gname = 0o600, 0, 0, "root", "root"
        return info

    with tempfile.TemporaryDirectory(prefix="hgxkit-verify-") as tmp:
        bundle = Path(tmp) / "copy.tar"
        with tarfile.open(bundle, "w") as tar:
            for path, name in names:
                tar.add(path, arcname=name, filter=root_only)
        remote = f"{workdir}.copy.tar"
        host.put_file(str(bundle), remote)
        run(
            script(
                "umask 077 && tar -C {dir} --no-same-owner -xf {tar}; rc=$?; rm -f {tar}; exit $rc",
                dir=workdir,
                tar=remote,
            )
        )
