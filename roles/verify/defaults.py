"""Knobs of the verify role (inventory data overrides each; `--data bench=full` for one run).


Shared knobs read here (hgxkit/knobs.py): recipe, serve_total_gpus, api_key, serve_state_dir (the digest the
serving role runs), serve_api_key_file; monitoring, monitoring_host, and the monitoring host's prometheus_port,
prometheus_bind_address and prometheus_scrape_interval (telemetry from Prometheus); router, router_host and
router_port (a prefill/decode split is benchmarked through the router).
"""

from __future__ import annotations

from dataclasses import dataclass

from hgxkit.knobs import Knobs, declare, shared


@dataclass(frozen=True)
class VerifyKnobs(Knobs):
    """The verify role's knobs (inventory data or `--data key=value` overrides each)."""

    recipe: str = shared("recipe")
    serve_total_gpus: int | None = shared("serve_total_gpus")
    api_key: str | None = shared("api_key")
    serve_state_dir: str = shared("serve_state_dir")
    serve_api_key_file: str = shared("serve_api_key_file")
    monitoring: bool = shared("monitoring")
    monitoring_host: str | None = shared("monitoring_host")
    prometheus_port: int = shared("prometheus_port")
    prometheus_bind_address: str = shared("prometheus_bind_address")
    prometheus_scrape_interval: str = shared("prometheus_scrape_interval")
    router: bool = shared("router")
    router_host: str | None = shared("router_host")
    router_port: int = shared("router_port")
    bench: str = declare(
        "smoke",
        '"smoke" (default: the recipe\'s smoke cell, one input length at concurrency 1, a few prompts), "full" (the '
        "recipe's whole matrix: the post's 5000/10000/20000 input x concurrency 1/5/10/20), or \"none\" (health, one "
        "generation and the gates; no benchmark).",
    )
    bench_output_len: int | None = declare(None, "output tokens per request; None: the recipe matrix's output_len.")
    bench_repeats: int | None = declare(
        None,
        "client runs per cell (each kept; the repeat is the unit of intervals and of run-vs-run tests); None: 1 for "
        "smoke, 5 for full (FULL_REPEATS in hgxkit/verify/plan.py: enough to decide a 10% throughput change at "
        "run-to-run noise up to ~4.5% CV). While each cell runs, the server's /metrics and the group's GPUs "
        "(nvidia-smi) are sampled every second and archived with the run (telemetry/), summarised per cell. With "
        "`monitoring: true` nothing is sampled: after the cells, each one's window is read from Prometheus on the "
        "monitoring host (its serving group's series and the DCGM exporter's fields of its GPUs) into the same files;"
        " the summary says which (telemetry.source: sampled|prometheus). Prometheus' scrape interval "
        "(prometheus_scrape_interval, roles/monitoring) is then the telemetry's resolution.",
    )
    results_dir: str = declare(
        "results",
        "where runs are archived on the controller: <results_dir>/<host>/<UTC time>_<recipe>/.",
    )
    verify_workdir: str = declare(
        "/var/lib/hgxkit/verify",
        "where the host keeps its copy of each run (raw JSONL, summary, fingerprint), root-only, and under "
        "env-reports/ the engine's environment report of each serving container, made once per container ID "
        "(hgxkit/verify/envreport.py); delete a file to have it made again.",
    )
    verify_timeout: float = declare(
        14400,
        "seconds the whole benchmark may take (it runs detached on the host and survives SSH drops).",
    )
    verify_poll: float = declare(
        5,
        "longest one progress check waits on the node while the benchmark runs (it returns as soon as the progress "
        "changes, so reports are prompt), and seconds between health probes.",
    )
    verify_ready_timeout: float = declare(
        600,
        " seconds a group may answer its health check with anything but 200 (a server warming up after a restart "
        "answers 503) before verify judges it failed.",
    )
    verify_gates: bool = declare(
        True,
        "run the bring-up gates (driver/fabric/NVLink, GPU health) again and fail the run on any.",
    )
    verify_client_process: str = declare(
        "per_container",
        ' "per_container" (default): one benchmark-client process per serving container runs all of its cells '
        "(SGLang's client, its command line unchanged, re-run in-process per cell), so torch and transformers are "
        'imported once per container, not once per cell; "per_cell": a fresh `python3 -m sglang.benchmark.serving …` '
        "for every cell, should a client version keep state from one in-process run to the next.",
    )


DEFAULTS = VerifyKnobs.defaults()
__doc__ = f"{__doc__}\n{VerifyKnobs.table()}\n"
