#!/usr/bin/env bash
# run_capture_tests.sh DIST: kp's capture-window GPU tests (issue 17) from the installed prefix
# DIST (bin/kptrace, lib/libkpinject.so): NVTX range (first, repeat:N), step schedule, a window
# over steps k..k+n, cudaProfilerStart/Stop, kptrace start|stop PID, delay/duration, a bad value,
# and the window-edge probe. The checks are in capture_cases.py.
#
# Logs to $OUT/capture_tests.log ($OUT: a fresh temporary directory if unset). With no usable GPU
# or no PyTorch with CUDA it prints "SKIP: ..." and exits 0. Environment: OUT, PYTHON,
# KP_NVIDIA_SMI, CAPTURE_ONLY (comma list of cases).
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIST=$(cd "${1:?usage: run_capture_tests.sh DIST}" && pwd)
OUT=${OUT:-$(mktemp -d /tmp/kp-capture-tests.XXXXXX)}
mkdir -p "$OUT"
LOG="$OUT/capture_tests.log"
PYTHON=${PYTHON:-python3}
NVIDIA_SMI=${KP_NVIDIA_SMI:-nvidia-smi}
# shellcheck source=require_gpu_torch.sh
source "$HERE/require_gpu_torch.sh"
{
  echo "== kp capture-window GPU tests, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "== kptrace: $("$DIST/bin/kptrace" version 2>&1)"
  require_gpu_torch || exit 0
  WORK=$(mktemp -d /tmp/kp-capture-work.XXXXXX)
  PYTHONUNBUFFERED=1 "$PYTHON" "$HERE/capture_cases.py" --kptrace "$DIST/bin/kptrace" \
    --work "$WORK" --only "${CAPTURE_ONLY:-}"
} 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
