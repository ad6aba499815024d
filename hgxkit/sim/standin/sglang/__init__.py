"""SGLang stand-in: speaks SGLang's HTTP API with a documented latency model (simulated; stdlib only).

Modules: `args` (the SGLang command line), `checks` (start-up refusals), `engine` (latency model and
scheduler), `server` (endpoints), `disagg` (prefill/decode disaggregation), `metrics` (Prometheus text),
`launcher` (start-up), `shim` (entry points for an image). Stdlib only, so a bare Debian ``python3`` runs it.

Example:
    python3 -m hgxkit.sim.standin.sglang serve --model-path /model --tp 4 --port 30000
    python3 -m hgxkit.sim.standin.sglang launch-server --model-path /model --port 30000
"""
