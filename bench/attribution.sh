#!/usr/bin/env bash
# bench/attribution.sh DIST [attribution.py options]: cost per record kind, CUPTI's own against
# kp's on top, on the launch loop, the tiny-op loop and the transformer step (bench/attribution.py
# says how). Writes $OUT/attribution.md (else bench/results/) and attribution_raw.json.
# Needs the floor (DIST/lib/libkpfloor.so), nvcc and PyTorch; skips without a GPU.
set -u -o pipefail
DIST=$(cd "${1:?usage: bench/attribution.sh DIST [--rounds N] [--configs a,b,...]}" && pwd)
shift
if ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no GPU (nvidia-smi found none)"; exit 0; fi
exec python3 "$(dirname "$0")/attribution.py" "$DIST" "$@"
