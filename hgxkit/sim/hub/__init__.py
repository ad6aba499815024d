"""Simulated Hugging Face Hub: serves synthetic model repositories to `huggingface_hub` (simulated).

Stdlib only, so it runs on a bare Debian python3. See `server` for the endpoints, `faults` for the fault
switches and `makerepo` for the synthetic DeepSeek-V4-Flash-DSpark-shaped repository.

Example:
    python3 -m hgxkit.sim.hub make-repo --root /tmp/hub deepseek-ai/DeepSeek-V4-Flash-DSpark --size-mb 32
    python3 -m hgxkit.sim.hub serve --root /tmp/hub --port 8088
"""
