#!/usr/bin/env bash
# Install SGLang's real benchmark client (sglang 0.5.23 from PyPI) into a venv, for the stand-in image or a
# shared read-only store. Only the client runs (python -m sglang.benchmark.serving / sglang.bench_serving);
# the server side of this sglang is never used (no GPU here) — the stand-in answers instead.
#
#   usage: install_client.sh [VENV_DIR]            (default /opt/sglang-client-venv; needs python3.11)
#
# Why these pins: `pip install sglang==0.5.23` with dependencies pulls the GPU server stack (flashinfer,
# sgl-kernel, …), so sglang goes in with --no-deps, plus exactly what the benchmark client's import chain
# needs (found by importing until it worked). torch must be 2.14.1 with torchvision 0.29.1 (CUDA builds; pip on
# Python 3.11 finds both in the machine's local wheel store): with the CPU torch 2.13 wheel PyPI's torchvision
# fails to import ("operator torchvision::nms does not exist"), and the import chain needs torchvision and
# triton. Result: about 6.3 GB (nvidia/* 3.2 GB, torch 1.2 GB, triton 0.9 GB). Takes ~6 min here.
set -euo pipefail
VENV=${1:-/opt/sglang-client-venv}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3.11}
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
# Every package pinned (a freeze of a working venv); --no-deps keeps sglang's GPU-server requirements out.
"$VENV/bin/pip" install --quiet --no-deps -r "$HERE/client-requirements.txt"
"$VENV/bin/python" -m sglang.benchmark.serving --help >/dev/null
echo "sglang benchmark client ready in $VENV ($(du -sh "$VENV" | cut -f1))"
