#!/usr/bin/env bash
# kp overhead benchmark (issue 5): bash bench/run.sh DIST [--rounds 5] [--quick] [...]
# DIST is a kp install prefix (bin/kptrace, lib/libkpinject.so). Needs an NVIDIA GPU, nvcc and,
# for the torch workloads, python3 with PyTorch; without a GPU it prints why and exits 0.
# Results: Markdown on stdout and in $OUT/bench_results.md (else bench/results/), raw JSON beside.
# The default run (5 rounds, the 60 s soak) takes about 6-7 minutes on the H200 VM; --budget-s
# (default 540) starts no round that would push the whole run past it, so one 10-minute call fits.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ "${KP_BENCH_ASSUME_NO_GPU:-0}" == "1" ]]; then
  echo "SKIP: kp overhead benchmark needs an NVIDIA GPU: KP_BENCH_ASSUME_NO_GPU=1"
  exit 0
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "SKIP: kp overhead benchmark needs an NVIDIA GPU: nvidia-smi not found"
  exit 0
fi
if ! nvidia-smi -L 2>/dev/null | grep -q "GPU"; then
  echo "SKIP: kp overhead benchmark needs an NVIDIA GPU: nvidia-smi -L lists no GPU"
  exit 0
fi
if [[ $# -lt 1 ]]; then
  echo "usage: bash bench/run.sh DIST [--rounds N] [--quick] [--skip-soak] [--out DIR]" \
    "[--paired-passes N] [--paired-tiny-passes M]" \
    "[--budget-s S] [--tools a,b]" >&2
  exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "run.sh: python3 not found; the benchmark driver (bench/run_bench.py) needs it" >&2
  exit 2
fi
exec python3 "$here/run_bench.py" "$@"
