#!/usr/bin/env bash
# Builds and installs kp into dist/, then profiles a demo program. With no GPU it says so and
# works on the shipped example trace (examples/pytorch_h200.kptrace) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
# CMake preset "demo": its own build folder (build-demo/, so scripts/test.sh's build/ keeps the
# tests on), installed into dist/.
cmake --preset demo >/dev/null
cmake --build --preset demo -j "$(nproc)"
cmake --install build-demo >/dev/null
KPTRACE="$PWD/dist/bin/kptrace"
mkdir -p out
if nvidia-smi -L >/dev/null 2>&1; then
  trace=out/demo.kptrace
  if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    echo "== profiling examples/demo_train.py (PyTorch) with kp"
    "$KPTRACE" run -o "$trace" -- python3 examples/demo_train.py
  else
    echo "== PyTorch not available; profiling a CUDA demo program with kp"
    nvcc -arch=sm_90 -O2 -o out/demo_cuda tests/gpu/programs/multistream.cu -ldl
    "$KPTRACE" run -o "$trace" -- out/demo_cuda
  fi
else
  echo "== no GPU here (nvidia-smi found none): using the shipped example trace recorded on an H200"
  trace=examples/pytorch_h200.kptrace
fi
"$KPTRACE" info "$trace"
"$KPTRACE" summary "$trace"
"$KPTRACE" convert "$trace" --to perfetto -o out/demo.pftrace
"$KPTRACE" convert "$trace" --to chrome -o out/demo.json
"$KPTRACE" convert "$trace" --to csv -o out/demo_csv
"$KPTRACE" report "$trace" -o out/demo_report.html
echo "== wrote out/demo.pftrace (open in https://ui.perfetto.dev), out/demo.json, out/demo_csv/,"
echo "   out/demo_report.html (open in any browser; works offline)"
if [ "$trace" = examples/pytorch_h200.kptrace ]; then
  echo "== hardware metrics per NVTX range (KP_METRICS=sol), from examples/pytorch_h200_metrics.kptrace"
  "$KPTRACE" summary examples/pytorch_h200_metrics.kptrace | sed -n '/^Metrics per range/,$p'
fi
