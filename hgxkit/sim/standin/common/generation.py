"""One simulated generation, shared by the stand-ins' endpoints: queue, prefill, then decode steps (simulated).

`run_request` drives the `Engine` for one request and yields a `Piece` per emitted chunk — the first token
right after the (simulated) prefill, then one piece per decode step with the tokens that step accepted — and
records the request's ground truth (`RequestTruth`) when it ends, also when the client disconnects. Output
text is drawn from the model's vocabulary (deterministic per request id), one word per token, so the
synthetic WordLevel tokenizer of `hgxkit.sim.hub` counts it exactly. Generation always runs to the requested
number of tokens (no EOS is simulated, as `ignore_eos` would).

Example:
    >>> from hgxkit.sim.standin.common.engine import Engine, LatencyModel
    >>> import io
    >>> engine = Engine(LatencyModel(ttft_base_ms=0, prefill_us_per_token=0, decode_step_ms=0), 4, io.StringIO())
    >>> [p.produced for p in run_request(engine, "r1", "/v1/completions", 10, 3, 0.0, ["a", "b"])]
    [1, 2, 3]
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from hgxkit.sim.standin.common.engine import Engine, RequestTruth


@dataclass(frozen=True)
class Piece:
    """One emitted chunk of a generation: its new text and the running totals."""

    delta: str
    produced: int
    steps: int
    finished: bool
    tokens: int = 1  # tokens in this chunk


def run_request(
    engine: Engine,
    rid: str,
    endpoint: str,
    input_tokens: int,
    max_new: int,
    received: float,
    vocab: Sequence[str],
    *,
    room: int | None = None,
    prefill: Callable[[int], float] | None = None,
) -> Iterator[Piece]:
    """Run one simulated request (`received` = its arrival on the monotonic clock); see the module doc.

    A disaggregated request names its `room`; `prefill` replaces the engine's own prefill (a decode server waits
    for the prefill server's KV instead) and returns the seconds it waited."""
    rng = random.Random(hash(rid) & 0xFFFFFFFF)
    words = list(vocab) or [f"tok{i}" for i in range(1000)]
    queue_s = engine.admit()
    produced = steps = 0
    ttft_ms = prefill_wait_s = 0.0
    step_tokens = 0
    itls: list[float] = []
    try:
        prefill_wait_s = (prefill or engine.prefill)(input_tokens)
        max_new = max(max_new, 1)
        produced = 1
        ttft_ms = (time.monotonic() - received) * 1000.0
        last = time.monotonic()
        yield Piece(words[rng.randrange(len(words))], produced, 0, produced >= max_new)
        while produced < max_new:
            accepted = min(engine.step(), max_new - produced)
            steps += 1
            step_tokens += accepted
            produced += accepted
            now = time.monotonic()
            itls.extend([(now - last) / accepted] * accepted)
            last = now
            text = " " + " ".join(words[rng.randrange(len(words))] for _ in range(accepted))
            yield Piece(text, produced, steps, produced >= max_new, accepted)
    finally:
        engine.release()
        e2e_ms = (time.monotonic() - received) * 1000.0
        engine.record(
            RequestTruth(
                rid=rid,
                endpoint=endpoint,
                input_tokens=input_tokens,
                output_tokens=produced,
                queue_ms=round(queue_s * 1000.0, 3),
                prefill_wait_ms=round(prefill_wait_s * 1000.0, 3),
                ttft_ms=round(ttft_ms, 3),
                e2e_ms=round(e2e_ms, 3),
                steps=steps,
                accept_length=round(step_tokens / steps, 4) if steps else 1.0,
                received_at=time.time() - (time.monotonic() - received),
                bootstrap_room=room,
            ),
            itls,
        )
