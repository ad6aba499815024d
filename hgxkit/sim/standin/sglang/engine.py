"""Compatibility name: the latency model and scheduler moved to `hgxkit.sim.standin.common.engine`, shared by
the SGLang and vLLM stand-ins. Existing imports (``from hgxkit.sim.standin.sglang.engine import Engine``) keep
working through this module.

Example:
    >>> from hgxkit.sim.standin.sglang.engine import LatencyModel
    >>> LatencyModel().decode_step_ms
    12.0
"""

from hgxkit.sim.standin.common.engine import (
    E2E_BUCKETS,
    ITL_BUCKETS,
    TTFT_BUCKETS,
    Engine,
    Histogram,
    LatencyModel,
    RequestTruth,
)

__all__ = ["E2E_BUCKETS", "ITL_BUCKETS", "TTFT_BUCKETS", "Engine", "Histogram", "LatencyModel", "RequestTruth"]
