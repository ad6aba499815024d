"""vLLM stand-in: speaks vLLM 0.33's command line and HTTP API with a documented latency model (simulated).

Modules: `args` (parsing with vLLM's
spelling rules), `miniyaml` (``--config`` files without PyYAML), `hfcache` (model resolution through the
Hugging Face cache), `checks` (start-up refusals), `stats` (vLLM's statistics over the shared engine),
`metrics` (Prometheus text), `server` (endpoints), `nixl` (prefill/decode over NIXL), `launcher` (start-up),
`shim` (``vllm`` in an image), `inprocess` (a stand-in inside a Python process, for tests). Stdlib only, so a
bare Debian ``python3`` runs it.

Example:
    python3 -m hgxkit.sim.standin.vllm serve /models/tiny -tp 2 --port 8000
    python3 -m hgxkit.sim.standin.vllm api-server --model /models/tiny
"""
