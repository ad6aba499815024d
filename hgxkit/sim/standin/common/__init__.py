"""Code shared by the SGLang and vLLM stand-ins (stdlib only): the latency model and scheduler (`engine`), one
simulated generation (`generation`), HTTP plumbing (`httpbase`) and token counting (`tokens`).

Example:
    >>> from hgxkit.sim.standin.common.engine import LatencyModel
    >>> LatencyModel().ttft_base_ms
    215.0
"""
