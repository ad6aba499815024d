"""How often `results compare` calls a 10% throughput change real, and a 0% change real, on simulated runs.

    python bench/stats_power.py [--trials 1000] [--repeats N] [--latency-trials 200]

Each trial simulates two runs of one full-bench cell (the post's 5000 x 10, 30 prompts, 512 output tokens)
with the default repeats (`FULL_REPEATS`, hgxkit/verify/plan.py), B's throughput changed by +10% or by 0%,
builds the two `CellResult`s and asks the comparison's own row function (`compare_metric`) for the output
throughput row's verdict; it prints how often the verdict is "real" for both changes.

The runs are modelled on the SGLang/vLLM stand-in (hgxkit/sim/standin/common/engine.py): TTFT = 215 ms +
8.4 us per input token (+ a wait for the serialised prefill lane at concurrency > 1); each decode step takes
12 ms + 0.2 ms per other running request and emits 1 + Binomial(k-1, p) tokens (DSPARK: k = 6, mean accept
length 5.3); a request ends at 512 tokens. The stand-in's own run-to-run noise is the accept-length draws and
the host's timer jitter, far below a real engine's, so each run also gets a run-level timing factor
(log-normal) with a coefficient of variation (CV) from published figures:

- 2.5%: SGLang's largest CV of output throughput over identical fixed-seed runs (0.11-2.54% over concurrency
  1-32; vLLM 0.36-0.64% at concurrency >= 8), vllm-project/vllm#53436 — the headline ("stable runs");
- 5%: the edge of AIPerf's "excellent" band (ai-dynamo/aiperf docs/tutorials/multi-run-confidence.md);
- 10%: vLLM's speculative-decoding jitter at concurrency 1-4 (7.5-19.7%, vllm#53436): no affordable
  number of repeats decides a 10% change there, and the bench shows it.

Also printed: the power of Welch's t test by repeats and CV (analytic, the table in plan.py), and, over
fewer trials, how often the TTFT mean row (a hierarchical bootstrap, repeats then requests) calls a 0%
change real — its false-positive rate with few repeats.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hgxkit.results.compare import compare_metric
from hgxkit.results.summary import CellResult, RepeatResult
from hgxkit.verify.plan import FULL_REPEATS

INPUT_LEN, CONCURRENCY, PROMPTS, OUTPUT_LEN = 5000, 10, 30, 512
TTFT_BASE_MS, PREFILL_US_PER_TOKEN, STEP_MS, STEP_MS_PER_RUNNING = 215.0, 8.4, 12.0, 0.2
DRAFT_K, ACCEPT_MEAN = 6, 5.3
HEADLINE_CV = 0.025
CVS = (0.0, 0.025, 0.05, 0.10)


def simulate_run(rng: np.random.Generator, cv: float, speedup: float) -> tuple[float, list[float]]:
    """One client run of the cell: its output throughput (tok/s) and per-request TTFTs (ms)."""
    prefill = PREFILL_US_PER_TOKEN * INPUT_LEN / 1000.0
    waits = rng.uniform(0, CONCURRENCY - 1, size=PROMPTS) * prefill  # the serialised prefill lane
    ttft = TTFT_BASE_MS + prefill + waits
    p = (ACCEPT_MEAN - 1.0) / (DRAFT_K - 1)
    draws = 1 + rng.binomial(DRAFT_K - 1, p, size=(PROMPTS, OUTPUT_LEN))
    steps = np.argmax(np.cumsum(draws, axis=1) >= OUTPUT_LEN - 1, axis=1) + 1  # the first chunk is one token
    step_ms = STEP_MS + STEP_MS_PER_RUNNING * (CONCURRENCY - 1)
    # The run-level timing factor (the host's, the engine's): one log-normal draw with the given CV per run.
    factor = rng.lognormal(-0.5 * np.log1p(cv**2), np.sqrt(np.log1p(cv**2))) if cv else 1.0
    factor *= 1.0 + rng.normal(0, 0.001)  # the stand-in's timer jitter
    ttft, e2e = ttft * factor / speedup, (ttft + steps * step_ms) * factor / speedup
    duration_s = float(np.sum(e2e)) / CONCURRENCY / 1000.0  # closed loop: CONCURRENCY requests in flight
    return PROMPTS * OUTPUT_LEN / duration_s, list(ttft)


def cell(runs: list[tuple[float, list[float]]]) -> CellResult:
    repeats = [
        RepeatResult(
            output_throughput=tput,
            ttft_mean_ms=float(np.mean(t)),
            index=i,
            completed=PROMPTS,
            requests_with_samples=len(t),
        )
        for i, (tput, t) in enumerate(runs)
    ]
    ttfts = [v for _, t in runs for v in t]
    return CellResult(
        output_throughput=float(np.mean([r.output_throughput for r in repeats])),
        ttft_mean_ms=float(np.mean(ttfts)),
        input_len=INPUT_LEN,
        concurrency=CONCURRENCY,
        num_prompts=PROMPTS,
        completed=PROMPTS * len(runs),
        failed=0,
        ttfts_ms=ttfts,
        repeats=repeats,
    )


def real_rate(metric: str, trials: int, repeats: int, cv: float, speedup: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    real = 0
    for _ in range(trials):
        a = cell([simulate_run(rng, cv, 1.0) for _ in range(repeats)])
        b = cell([simulate_run(rng, cv, speedup) for _ in range(repeats)])
        real += compare_metric(a, b, metric, "A", "B").kind == "real"
    return real / trials


def analytic_power(repeats: int, cv: float, change: float = 0.10) -> float:
    """Welch t (equal n, equal variance: df 2n-2) power on log throughput, two-sided alpha 0.05."""
    from scipy import stats

    d = np.log1p(change) / np.sqrt(np.log1p(cv**2))
    df, ncp = 2 * repeats - 2, d * np.sqrt(repeats / 2)
    crit = stats.t.ppf(0.975, df)
    return float(1 - stats.nct.cdf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=1000, help="simulated comparisons per rate (1000)")
    parser.add_argument("--repeats", type=int, default=FULL_REPEATS, help=f"repeats per run ({FULL_REPEATS})")
    parser.add_argument("--latency-trials", type=int, default=200, help="trials for the TTFT row's rate (200)")
    args = parser.parse_args()
    t0 = time.monotonic()
    print(
        f"cell {INPUT_LEN}x{CONCURRENCY}, {PROMPTS} prompts, {OUTPUT_LEN} output tokens; repeats per run: "
        f"{args.repeats} (bench=full default {FULL_REPEATS}); {args.trials} trials per rate"
    )
    for cv in CVS:
        hit = real_rate("output_throughput", args.trials, args.repeats, cv, 1.10, seed=1)
        false = real_rate("output_throughput", args.trials, args.repeats, cv, 1.00, seed=2)
        label = "stand-in noise only" if cv == 0 else f"run-to-run CV {cv * 100:g}%"
        head = "  <- headline (published SGLang noise)" if cv == HEADLINE_CV else ""
        print(
            f"output throughput, {label}: real for +10% in {hit * 100:.1f}% of trials, "
            f"real for 0% in {false * 100:.1f}% (repeats {args.repeats}){head}"
        )
    print("Welch t power for +10% (analytic), by repeats:", end="")
    for cv in (0.025, 0.04, 0.05, 0.10):
        powers = "  ".join(f"n={n} {analytic_power(n, cv):.2f}" for n in (3, 4, 5, 6, 8))
        print(f"\n  CV {cv * 100:g}%: {powers}", end="")
    print()
    fp = real_rate("ttft_mean_ms", args.latency_trials, args.repeats, HEADLINE_CV, 1.00, seed=3)
    hit = real_rate("ttft_mean_ms", args.latency_trials, args.repeats, HEADLINE_CV, 1.10, seed=4)
    print(
        f"TTFT mean (hierarchical bootstrap), run-to-run CV {HEADLINE_CV * 100:g}%: real for a 10% change in "
        f"{hit * 100:.1f}%, for 0% in {fp * 100:.1f}% of {args.latency_trials} trials (repeats {args.repeats})"
    )
    print(f"took {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
