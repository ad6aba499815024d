"""Compare SGLang's real benchmark client's TTFT with the SGLang stand-in's ground truth (simulated server).

For each concurrency (default 1, 5, 10, 20) at 5000 input tokens it runs
``python -m sglang.benchmark.serving --backend sglang --dataset-name random-ids …`` from the client venv
(see ``hgxkit/sim/standin/sglang/install_client.sh``) against one stand-in started with the forum's flags, and
prints one line per concurrency: client mean/P99 TTFT, ground-truth mean/P99 TTFT and their ratios. Ground
truth is the stand-in's own per-request log (``HGXKIT_SIM_TTFT_LOG``), warmups excluded.

With ``--node-cluster CLUSTER`` it measures inside a simulated node instead, exactly as the verify role will:
the client runs with ``docker exec`` in the serving container ``deepseek-v4-flash-0`` on node1 (started with the
seed's command, e.g. by tests/e2e/test_serving_stack.py's fixture or by hand), ground truth from its
``docker logs``.

Usage:
    .venv/bin/python bench/stub_fidelity.py --client-venv /opt/sglang-client-venv
    .venv/bin/python bench/stub_fidelity.py --node-cluster serve --concurrency 1 5
    HGXKIT_SGLANG_CLIENT_VENV=/opt/sglang-client-venv .venv/bin/python bench/stub_fidelity.py --concurrency 1 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def forum_flags() -> list[str]:
    """The post's server flags from the shipped recipe, without --model-path/--port (set here) and with the
    server on loopback."""
    from hgxkit.recipe.read import load_recipe

    recipe = load_recipe(ROOT / "recipes" / "deepseek-v4-flash-dspark-marlin.yaml")
    flags: list[str] = []
    for entry in recipe.server.args:
        if entry[0] in ("--model-path", "--port"):
            continue
        flags += ["--host", "127.0.0.1"] if entry[0] == "--host" else list(entry)
    return flags


@dataclass(frozen=True)
class FidelityLine:
    """One concurrency level: client vs ground-truth TTFT in milliseconds."""

    concurrency: int
    prompts: int
    client_mean_ms: float
    truth_mean_ms: float
    mean_ratio: float
    client_p99_ms: float
    truth_p99_ms: float
    p99_ratio: float
    accept_length: float | None


def p99(values: list[float]) -> float:
    """numpy's default (linear) percentile, as the client computes it."""
    return statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else values[0]


def _wait_health(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"stand-in at {url} did not become healthy")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(client_venv: Path, levels: list[int], input_len: int, output_len: int, per_level: int) -> list[FidelityLine]:
    from hgxkit.sim.hub.makerepo import RepoSpec, make_repo

    work = Path(tempfile.mkdtemp(prefix="stub-fidelity-"))
    model = make_repo(work / "hub", RepoSpec(repo_id="deepseek-ai/DeepSeek-V4-Flash-DSpark", total_bytes=1 << 20))
    model = model / "refs" / "main"
    truth_log = work / "truth.jsonl"
    port = _free_port()
    env = {
        **os.environ,
        "NVIDIA_VISIBLE_DEVICES": "0,1,2,3",
        "HGXKIT_SIM_HOST_MEM_GB": "2048",
        "HGXKIT_SIM_READY_DELAY_S": "0.5",
        "HGXKIT_SIM_TTFT_LOG": str(truth_log),
    }
    stub = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hgxkit.sim.standin.sglang",
            "serve",
            "--model-path",
            str(model),
            "--port",
            str(port),
            *forum_flags(),
        ],
        env=env,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=ROOT,
    )
    lines: list[FidelityLine] = []
    try:
        _wait_health(f"http://127.0.0.1:{port}")
        for c in levels:
            prompts = max(per_level * c, 10)  # the forum ran 10 prompts at concurrency 1
            out = work / f"c{c}.jsonl"
            cmd = [
                str(client_venv / "bin" / "python"),
                "-m",
                "sglang.benchmark.serving",
                "--backend",
                "sglang",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--dataset-name",
                "random-ids",
                "--random-input-len",
                str(input_len),
                "--random-output-len",
                str(output_len),
                "--random-range-ratio",
                "1.0",
                "--num-prompts",
                str(prompts),
                "--max-concurrency",
                str(c),
                "--warmup-requests",
                str(c),
                "--flush-cache",
                "--output-details",
                "--tokenizer",
                str(model),
                "--output-file",
                str(out),
            ]
            client_env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # no 30 s of Hub retries for the model name
            proc = subprocess.run(cmd, capture_output=True, text=True, env=client_env, timeout=900)
            if proc.returncode != 0:
                raise SystemExit(f"client failed at concurrency {c}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            row = json.loads(out.read_text().splitlines()[-1])
            truths = [json.loads(x)["hgxkit_sim_request"] for x in truth_log.read_text().splitlines()]
            lines.append(_line(c, prompts, row, truths))
            print(_format(lines[-1]), flush=True)
    finally:
        stub.terminate()
        stub.wait(timeout=10)
    return lines


def _line(c: int, prompts: int, row: dict, truths: list[dict]) -> FidelityLine:
    client = [t * 1000.0 for t in row["ttfts"]]
    truth = [t["ttft_ms"] for t in truths[-len(client) :]]  # the measured requests came last
    return FidelityLine(
        concurrency=c,
        prompts=prompts,
        client_mean_ms=round(statistics.mean(client), 2),
        truth_mean_ms=round(statistics.mean(truth), 2),
        mean_ratio=round(statistics.mean(client) / statistics.mean(truth), 4),
        client_p99_ms=round(p99(client), 2),
        truth_p99_ms=round(p99(truth), 2),
        p99_ratio=round(p99(client) / p99(truth), 4),
        accept_length=row.get("accept_length"),
    )


def run_in_node(
    cluster: str, levels: list[int], input_len: int, output_len: int, per_level: int, container: str
) -> list[FidelityLine]:
    """The client inside `container` on node1 of `cluster` (docker exec), truth from its docker logs."""

    def node(cmd: str) -> str:
        argv = [sys.executable, "-m", "hgxkit", "sim", "ssh", "node1", "--cluster", cluster, "--", cmd]
        res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
        if res.returncode != 0:
            raise SystemExit(f"on node1 of {cluster!r}: {cmd[:80]!r} failed: {(res.stdout + res.stderr)[-2000:]}")
        return res.stdout

    lines: list[FidelityLine] = []
    for c in levels:
        prompts = max(per_level * c, 10)
        out = f"/tmp/fidelity-c{c}.jsonl"
        node(
            f"docker exec -e HF_HUB_OFFLINE=1 {container} sh -c 'rm -f {out}; python3 -m sglang.benchmark.serving "
            f"--backend sglang --host 127.0.0.1 --port 30000 --dataset-name random-ids --random-input-len {input_len} "
            f"--random-output-len {output_len} --random-range-ratio 1.0 --num-prompts {prompts} --max-concurrency {c} "
            f"--warmup-requests {c} --flush-cache --output-details --output-file {out}' >/dev/null 2>&1"
        )
        row = json.loads(node(f"docker exec {container} cat {out}").splitlines()[-1])
        logs = node(f"docker logs {container} 2>/dev/null").splitlines()
        truths = [json.loads(x)["hgxkit_sim_request"] for x in logs if x.startswith('{"hgxkit_sim_request"')]
        lines.append(_line(c, prompts, row, truths))
        print(_format(lines[-1]), flush=True)
    return lines


def _format(line: FidelityLine) -> str:
    return (
        f"conc={line.concurrency:<3} prompts={line.prompts:<3} "
        f"TTFT mean client={line.client_mean_ms:8.2f} ms truth={line.truth_mean_ms:8.2f} ms "
        f"ratio={line.mean_ratio:.3f} | P99 client={line.client_p99_ms:8.2f} ms truth={line.truth_p99_ms:8.2f} ms "
        f"ratio={line.p99_ratio:.3f} | accept={line.accept_length}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--client-venv", type=Path, default=os.environ.get("HGXKIT_SGLANG_CLIENT_VENV"))
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 5, 10, 20])
    p.add_argument("--input-len", type=int, default=5000)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--prompts-per-concurrency", type=int, default=3, help="prompts = max(this × concurrency, 10)")
    p.add_argument("--json", type=Path, default=None, help="also write the lines as a JSON list")
    p.add_argument("--node-cluster", default=None, help="measure inside node1 of this simulated cluster instead")
    p.add_argument("--container", default="deepseek-v4-flash-0", help="serving container on the node")
    a = p.parse_args(argv)
    if a.client_venv is None and a.node_cluster is None:
        p.error("--client-venv (or HGXKIT_SGLANG_CLIENT_VENV) or --node-cluster is required")
    print("SIMULATED server (hgxkit SGLang stand-in); real client: sglang.benchmark.serving", flush=True)
    if a.node_cluster:
        lines = run_in_node(
            a.node_cluster, a.concurrency, a.input_len, a.output_len, a.prompts_per_concurrency, a.container
        )
    else:
        lines = run(Path(a.client_venv), a.concurrency, a.input_len, a.output_len, a.prompts_per_concurrency)
    if a.json:
        a.json.write_text(json.dumps([asdict(x) for x in lines], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
