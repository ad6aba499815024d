"""The simulated scheduler shared by the SGLang and vLLM stand-ins: latency model, admission, accept length,
statistics (simulated).

Latency model (all simulated; environment variables, read once at start; the same for both stand-ins):

| Variable | Default | Meaning |
|---|---|---|
| ``HGXKIT_SIM_READY_DELAY_S`` | 2.0 | seconds from start until ready ("fired up") |
| ``HGXKIT_SIM_TTFT_BASE_MS`` | 215 | fixed part of TTFT per request (scheduling, first step) |
| ``HGXKIT_SIM_PREFILL_US_PER_TOKEN`` | 8.4 | prefill cost per input token; prefills run one at a time |
| ``HGXKIT_SIM_DECODE_STEP_MS`` | 12 | one decode (draft + verify) step |
| ``HGXKIT_SIM_DECODE_MS_PER_RUNNING`` | 0.2 | extra step time per running request (batching) |
| ``HGXKIT_SIM_ACCEPT_MEAN`` | 5.3 for DSPARK, 2.0 other spec, 1.0 none | mean accepted tokens per step |
| ``HGXKIT_SIM_SEED`` | ``--random-seed`` / ``--seed`` | seed of the accept-length draws |
| ``HGXKIT_SIM_TTFT_LOG`` | (stdout) | file for one JSON line of ground truth per request |

TTFT = queueing (while ``running ≥ --max-running-requests``) + waiting for the prefill lane (prefills are
serialised, as one GPU batch at a time) + base + per-token prefill × input tokens. The first chunk carries
one token; every later step emits ``1 + Binomial(k−1, p)`` tokens, ``k`` = draft tokens (block size + 1),
``p = (mean−1)/(k−1)``, so the mean accept length is the configured one (for vLLM, ``k`` =
``num_speculative_tokens`` + 1: the drafts plus the bonus token). The defaults are fitted to the
forum's Marlin figures at 5000 input tokens (TTFT mean 260 ms at concurrency 1, 330 at 5, 661 at 20). Without
``--speculative-algorithm`` (SGLang) / ``--speculative-config`` (vLLM) every step emits exactly one token
and the accept length is 1.0.

Example:
    >>> m = LatencyModel.from_env({}, spec_algorithm=None, num_draft_tokens=None)
    >>> m.accept_mean, round(m.prefill_s(5000), 3)
    (1.0, 0.042)
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import IO, Any

TTFT_BUCKETS = (
    0.1,
    0.2,
    0.3,
    0.4,
    0.5,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    120.0,
)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 60, 120, 300, 600, 1200)


@dataclass(frozen=True)
class LatencyModel:
    """Parameters of the simulated timings (see the module doc)."""

    ready_delay_s: float = 2.0
    ttft_base_ms: float = 215.0
    prefill_us_per_token: float = 8.4
    decode_step_ms: float = 12.0
    decode_ms_per_running: float = 0.2
    accept_mean: float = 1.0
    num_draft_tokens: int = 1
    seed: int = 42

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], spec_algorithm: str | None, num_draft_tokens: int | None, seed: int = 42
    ) -> LatencyModel:
        def num(name: str, default: float) -> float:
            value = env.get(name, "").strip()
            return float(value) if value else default

        k = int(num_draft_tokens or 1) if spec_algorithm else 1
        default_mean = 1.0 if not spec_algorithm else (5.3 if spec_algorithm == "DSPARK" else 2.0)
        mean = num("HGXKIT_SIM_ACCEPT_MEAN", default_mean) if spec_algorithm else 1.0
        return cls(
            ready_delay_s=num("HGXKIT_SIM_READY_DELAY_S", 2.0),
            ttft_base_ms=num("HGXKIT_SIM_TTFT_BASE_MS", 215.0),
            prefill_us_per_token=num("HGXKIT_SIM_PREFILL_US_PER_TOKEN", 8.4),
            decode_step_ms=num("HGXKIT_SIM_DECODE_STEP_MS", 12.0),
            decode_ms_per_running=num("HGXKIT_SIM_DECODE_MS_PER_RUNNING", 0.2),
            accept_mean=min(max(mean, 1.0), float(k)),
            num_draft_tokens=k,
            seed=int(num("HGXKIT_SIM_SEED", seed)),
        )

    def prefill_s(self, input_tokens: int) -> float:
        return self.prefill_us_per_token * input_tokens / 1e6

    def step_s(self, running: int) -> float:
        return (self.decode_step_ms + self.decode_ms_per_running * max(running - 1, 0)) / 1000.0


@dataclass
class Histogram:
    """A Prometheus histogram (cumulative buckets are computed when rendering)."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        self.total += value
        self.n += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break


@dataclass(frozen=True)
class RequestTruth:
    """Ground truth of one request, logged as a JSON line (`"simulated": true`)."""

    rid: str
    endpoint: str
    input_tokens: int
    output_tokens: int
    queue_ms: float
    prefill_wait_ms: float
    ttft_ms: float
    e2e_ms: float
    steps: int
    accept_length: float
    received_at: float
    bootstrap_room: int | None = None  # prefill/decode disaggregation: the room the request's KV moved through
    simulated: bool = True


class Engine:
    """Shared state of the simulated scheduler; request handler threads call `admit`/`prefill`/`step`."""

    def __init__(self, model: LatencyModel, max_running: int, log: IO[str] | None = None) -> None:
        self.model = model
        self.max_running = max_running
        self._cond = threading.Condition()
        self._prefill_lock = threading.Lock()
        self._rng = random.Random(model.seed)
        self._log = log or sys.stdout
        self._log_lock = threading.Lock()
        self.running = 0
        self.queued = 0
        self.ready = False
        # accept-length statistics since start or the last /flush_cache
        self.accept_tokens = 0
        self.accept_steps = 0
        # lifetime counters for /metrics
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_total = 0
        self.verify_calls_total = 0
        # vLLM-style speculative-decoding counters (lifetime): drafts = verify steps, draft tokens = k − 1
        # per step, accepted = accepted drafts (the bonus token not counted), per position a prefix count.
        self.spec_draft_tokens_total = 0
        self.spec_accepted_tokens_total = 0
        self.spec_accepted_per_pos = [0] * max(model.num_draft_tokens - 1, 0)
        self.ttft_hist = Histogram(TTFT_BUCKETS)
        self.itl_hist = Histogram(ITL_BUCKETS)
        self.e2e_hist = Histogram(E2E_BUCKETS)
        self.queue_hist = Histogram(TTFT_BUCKETS)
        self.last_gen_throughput = 0.0
        self.truths: list[RequestTruth] = []

    # -- accept length -----------------------------------------------------------------------------------

    def draw_accept(self) -> int:
        k = self.model.num_draft_tokens
        if k <= 1:
            return 1
        p = (self.model.accept_mean - 1.0) / (k - 1)
        with self._cond:
            return 1 + sum(1 for _ in range(k - 1) if self._rng.random() < p)

    @property
    def avg_spec_accept_length(self) -> float:
        with self._cond:
            return self.accept_tokens / self.accept_steps if self.accept_steps else 1.0

    def flush(self, timeout_s: float) -> bool:
        """Reset the accept-length statistics once idle (False if still busy after `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.running or self.queued:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self.accept_tokens = 0
            self.accept_steps = 0
            return True

    # -- request life cycle ----------------------------------------------------------------------------

    def admit(self) -> float:
        """Wait for a running slot; returns seconds spent queued."""
        t0 = time.monotonic()
        with self._cond:
            self.queued += 1
            while self.running >= self.max_running:
                self._cond.wait()
            self.queued -= 1
            self.running += 1
        return time.monotonic() - t0

    def release(self) -> None:
        with self._cond:
            self.running -= 1
            self._cond.notify_all()

    def prefill(self, input_tokens: int) -> float:
        """Run the simulated prefill; returns seconds waited for the prefill lane."""
        t0 = time.monotonic()
        with self._prefill_lock:
            waited = time.monotonic() - t0
            time.sleep(self.model.prefill_s(input_tokens))
        time.sleep(self.model.ttft_base_ms / 1000.0)
        return waited

    def step(self) -> int:
        """One decode step: sleep, then return how many tokens it accepted (≥ 1)."""
        with self._cond:
            running = self.running
        time.sleep(self.model.step_s(running))
        accepted = self.draw_accept()
        with self._cond:
            self.accept_tokens += accepted
            self.accept_steps += 1
            self.verify_calls_total += 1
            if self.spec_accepted_per_pos:
                self.spec_draft_tokens_total += len(self.spec_accepted_per_pos)
                self.spec_accepted_tokens_total += accepted - 1
                for pos in range(accepted - 1):  # accepted drafts are always a prefix of the draft
                    self.spec_accepted_per_pos[pos] += 1
        return accepted

    def record(self, truth: RequestTruth, itls: list[float]) -> None:
        with self._cond:
            self.prompt_tokens_total += truth.input_tokens
            self.generation_tokens_total += truth.output_tokens
            self.requests_total += 1
            self.ttft_hist.observe(truth.ttft_ms / 1000.0)
            self.e2e_hist.observe(truth.e2e_ms / 1000.0)
            self.queue_hist.observe(truth.queue_ms / 1000.0)
            for gap in itls:
                self.itl_hist.observe(gap)
            decode_s = (truth.e2e_ms - truth.ttft_ms) / 1000.0
            if decode_s > 0:
                self.last_gen_throughput = truth.output_tokens / decode_s
            self.truths.append(truth)
            del self.truths[:-100000]
        line = json.dumps({"hgxkit_sim_request": asdict(truth)})
        with self._log_lock:
            self._log.write(line + "\n")
            self._log.flush()

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            return {"running": self.running, "queued": self.queued}


LOAD_DIR = "/run/hgxkit-sim/gpu-load"  # mounted read-write into GPU containers by the simulated hook


def report_gpu_load(engine: Engine, environ: Mapping[str, str], load_dir: str = LOAD_DIR, every_s: float = 0.5) -> bool:
    """Tell the node's simulated nvidia-smi how busy this server's GPUs are (SIMULATED telemetry): a thread
    writes `<load_dir>/gpu<i>` ("<running> <queued> <unix time>") for each GPU in NVIDIA_VISIBLE_DEVICES.
    Does nothing (False) outside a simulated node, where the directory is not mounted."""
    gpus = [g for g in environ.get("NVIDIA_VISIBLE_DEVICES", "").split(",") if g.strip().isdigit()]
    if not gpus or not os.path.isdir(load_dir):
        return False

    def loop() -> None:
        while True:
            line = f"{engine.running} {engine.queued} {time.time():.3f}\n"
            for gpu in gpus:
                path = os.path.join(load_dir, f"gpu{gpu.strip()}")
                with contextlib.suppress(OSError):
                    with open(path + ".tmp", "w") as f:
                        f.write(line)
                    os.replace(path + ".tmp", path)
            time.sleep(every_s)

    threading.Thread(target=loop, name="hgxkit-sim-gpu-load", daemon=True).start()
    return True
