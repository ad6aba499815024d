"""vLLM-style statistics of the stand-in's simulated engine: vLLM 0.33's histogram buckets and per-request phases.

`VllmEngine` is the shared `Engine` (same latency model, same ground-truth log) that also keeps what vLLM's
Prometheus logger exports: phase histograms with vLLM's default buckets, token-count histograms, finished
requests by reason, and the KV cache use. All values are SIMULATED.

Example:
    >>> import io
    >>> from hgxkit.sim.standin.common.engine import LatencyModel
    >>> engine = VllmEngine(LatencyModel(), max_running=4, log=io.StringIO(), kv_tokens=1000)
    >>> engine.hist["time_to_first_token_seconds"].buckets[:3]
    (0.001, 0.005, 0.01)
"""

from __future__ import annotations

import threading
import time
from typing import IO

from hgxkit.sim.standin.common.engine import Engine, Histogram, LatencyModel, RequestTruth

# vLLM 0.33's default bucket families (vllm/v1/metrics/buckets.py), as numbers.
REQUEST_LATENCY = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
TIME_TO_FIRST_TOKEN = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
INTER_TOKEN_LATENCY = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)


def request_token_buckets(max_model_len: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, … up to `max_model_len` (vLLM's 1-2-5 series for token counts)."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return tuple(out)
            out.append(float(value))
        exponent += 1


HISTOGRAMS = {
    "time_to_first_token_seconds": ("Histogram of time to first token in seconds.", TIME_TO_FIRST_TOKEN),
    "inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.", INTER_TOKEN_LATENCY),
    "request_time_per_output_token_seconds": (
        "Histogram of time_per_output_token_seconds per request.",
        INTER_TOKEN_LATENCY,
    ),
    "e2e_request_latency_seconds": ("Histogram of e2e request latency in seconds.", REQUEST_LATENCY),
    "request_queue_time_seconds": ("Histogram of time spent in WAITING phase for request.", REQUEST_LATENCY),
    "request_inference_time_seconds": ("Histogram of time spent in RUNNING phase for request.", REQUEST_LATENCY),
    "request_prefill_time_seconds": ("Histogram of time spent in PREFILL phase for request.", REQUEST_LATENCY),
    "request_decode_time_seconds": ("Histogram of time spent in DECODE phase for request.", REQUEST_LATENCY),
}
TOKEN_HISTOGRAMS = {
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
}


class VllmEngine(Engine):
    """The shared engine plus vLLM's statistics (see the module doc)."""

    def __init__(
        self,
        model: LatencyModel,
        max_running: int,
        log: IO[str] | None = None,
        kv_tokens: int = 1 << 20,
        max_model_len: int = 8192,
    ) -> None:
        super().__init__(model, max_running, log)
        self.kv_tokens = max(kv_tokens, 1)
        self.hist = {name: Histogram(buckets) for name, (_, buckets) in HISTOGRAMS.items()}
        token_buckets = request_token_buckets(max_model_len)
        self.token_hist = {name: Histogram(token_buckets) for name in TOKEN_HISTOGRAMS}
        self.finished: dict[str, int] = {"stop": 0, "length": 0, "abort": 0, "error": 0, "repetition": 0}
        self.created = time.time()
        self._tokens_in_use = 0
        self._usage_lock = threading.Lock()

    def hold_tokens(self, n: int) -> None:
        """KV tokens a running request holds (prompt + generated so far); negative to give them back."""
        with self._usage_lock:
            self._tokens_in_use = max(self._tokens_in_use + n, 0)

    @property
    def kv_cache_usage(self) -> float:
        with self._usage_lock:
            return min(self._tokens_in_use / self.kv_tokens, 1.0)

    def finish(self, reason: str) -> None:
        with self._cond:
            self.finished[reason] = self.finished.get(reason, 0) + 1

    def record(self, truth: RequestTruth, itls: list[float]) -> None:
        super().record(truth, itls)
        ttft = truth.ttft_ms / 1000.0
        e2e = truth.e2e_ms / 1000.0
        queue = truth.queue_ms / 1000.0
        with self._cond:
            self.hist["time_to_first_token_seconds"].observe(ttft)
            for gap in itls:
                self.hist["inter_token_latency_seconds"].observe(gap)
            if truth.output_tokens > 1:
                self.hist["request_time_per_output_token_seconds"].observe((e2e - ttft) / (truth.output_tokens - 1))
            self.hist["e2e_request_latency_seconds"].observe(e2e)
            self.hist["request_queue_time_seconds"].observe(queue)
            self.hist["request_inference_time_seconds"].observe(max(e2e - queue, 0.0))
            self.hist["request_prefill_time_seconds"].observe(max(ttft - queue, 0.0))
            self.hist["request_decode_time_seconds"].observe(max(e2e - ttft, 0.0))
            self.token_hist["request_prompt_tokens"].observe(truth.input_tokens)
            self.token_hist["request_generation_tokens"].observe(truth.output_tokens)
