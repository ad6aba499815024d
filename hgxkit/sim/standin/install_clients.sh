#!/usr/bin/env bash
# Install the REAL benchmark clients of SGLang (sglang 0.5.23) and vLLM (vllm 0.33.0) from PyPI into one venv, the
# host's shared read-only client store (hgxkit/sim/standin/client_store.py). Only the clients run (python -m
# sglang.benchmark.serving, vllm bench serve); the servers of these packages never run (no GPU here): hgxkit's
# stand-ins answer instead.
#
#   usage: install_clients.sh [VENV_DIR [CLIENT...]]   (default /opt/hgxkit-client-venv, sglang vllm; needs
#                                                        python3.11)
#
# CLIENT is a layer: `sglang` makes the venv with SGLang's client and what both share, `vllm` adds vLLM's layer to
# a venv that has SGLang's (client_store.py installs only the layers a store lacks).
#
# Layout: VENV/lib/python3.11/site-packages holds SGLang's client and everything both clients share (torch 2.14.1,
# transformers, aiohttp, ...); VENV/vllm-site holds vllm and the few packages only its client needs, and is put on
# sys.path only for vLLM (VENV/bin/vllm, or the vLLM stand-in image's .pth). Kept apart because SGLang's import
# chain imports vllm when it is importable (sglang/srt/layers/moe/.../fused_moe.py tries vllm._custom_ops), which
# would change what SGLang's client runs; one torch serves both, so the store is 7.2 GB instead of two 6+ GB ones.
#
# Why these pins: `pip install sglang==0.5.23` / `vllm==0.33.0` with dependencies pull the GPU server stacks
# (flashinfer, sgl-kernel, CUDA kernels, ...), so both go in with --no-deps, plus exactly what the clients' import
# chains need (found by importing and running until nothing was missing, then frozen). torch must be 2.14.1 with
# torchvision 0.29.1 (CUDA builds; pip on Python 3.11 finds both in the machine's local wheel store): with the CPU
# torch 2.13 wheel PyPI's torchvision fails to import ("operator torchvision::nms does not exist"), and SGLang's
# import chain needs torchvision and triton. vLLM's client runs with the same torch (its CLI switches to the CPU
# platform for `vllm bench`). About 7.2 GB (vllm's wheel 0.9 GB of it, mostly CUDA kernels the client never
# loads); about a minute and a half here (2 cores).
#
# Installed with uv (pinned below, put in the venv by its own pip): it fetches and unpacks the wheels in parallel,
# where pip took 2.5 minutes for SGLang's layer alone, the longest step of a first `make demo`. uv reads no pip.conf:
# the pins above need nothing from it but the certificates, which it takes from SSL_CERT_FILE as pip does.
set -euo pipefail
VENV=${1:-/opt/hgxkit-client-venv}
shift || true
if (( $# )); then CLIENTS=("$@"); else CLIENTS=(sglang vllm); fi
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3.11}
UV_PIN=uv==0.9.9
# The clients' import chains compiled into the store itself (by the checks below): the nodes mount it read-only,
# so a client started without bytecode beside its sources compiles ~4,500 modules on every start (SGLang's: 22 s of
# CPU, 10 s with it). pip writes none here when the caller's environment sends bytecode elsewhere
# (PYTHONPYCACHEPREFIX, which the Makefile sets) or nowhere (PYTHONDONTWRITEBYTECODE); the whole store compiled would
# cost a minute the demo waits for.
with_bytecode() { env -u PYTHONDONTWRITEBYTECODE -u PYTHONPYCACHEPREFIX "$@"; }

sglang_layer() {
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "$UV_PIN"
    # Every package pinned (a freeze of a working venv); --no-deps keeps the GPU-server requirements out.
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps -r "$HERE/sglang/client-requirements.txt"
    with_bytecode "$VENV/bin/python" -m sglang.benchmark.serving --help >/dev/null
}

vllm_layer() {
    rm -rf "$VENV/vllm-site" "$VENV/bin/vllm"
    [[ -x $VENV/bin/uv ]] || "$VENV/bin/pip" install --quiet "$UV_PIN"
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-deps --target "$VENV/vllm-site" \
        -r "$HERE/vllm/client-requirements.txt"
    rm -rf "$VENV/vllm-site/bin"  # their console scripts would not find vllm-site; VENV/bin/vllm below does
    cat > "$VENV/bin/vllm" <<SCRIPT
#!$VENV/bin/python
# hgxkit: vLLM's CLI from the client store's vllm-site layer (kept apart so that SGLang's client never imports vllm).
import os
import site
import sys

site.addsitedir(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "vllm-site"))
from vllm.entrypoints.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
SCRIPT
    chmod 755 "$VENV/bin/vllm"
    with_bytecode "$VENV/bin/vllm" bench serve --help >/dev/null 2>&1 || { "$VENV/bin/vllm" bench serve --help 2>&1 | tail -5; exit 1; }
}

for client in "${CLIENTS[@]}"; do
    case $client in
        sglang) sglang_layer ;;
        vllm) vllm_layer ;;
        *) echo "install_clients.sh: unknown client '$client' (sglang or vllm)" >&2; exit 2 ;;
    esac
done
echo "${CLIENTS[*]} benchmark client(s) ready in $VENV ($(du -sh "$VENV" | cut -f1))"
