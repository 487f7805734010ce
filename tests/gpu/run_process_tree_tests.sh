#!/usr/bin/env bash
# run_process_tree_tests.sh DIST: kp's process-tree GPU tests (issue 9) from the installed prefix
# DIST (bin/kptrace, lib/libkpinject.so): torchrun with 2 ranks (kptrace run and plain
# CUDA_INJECTION64_PATH with one KP_OUTPUT), torch.compile(mode="reduce-overhead") with compile
# workers, two independent processes with one KP_OUTPUT, SIGTERM and SIGINT mid-run, DataLoader
# workers. The checks are in process_tree_cases.py.
#
# Logs to $OUT/process_tree_tests.log ($OUT: a fresh temporary directory if unset) and keeps the
# traces in $OUT/process_tree_traces.tar.gz. With no usable GPU or no PyTorch with CUDA it prints
# "SKIP: ..." and exits 0. Environment: OUT, PYTHON, KP_NVIDIA_SMI, PT_ONLY (comma list of cases).
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIST=$(cd "${1:?usage: run_process_tree_tests.sh DIST}" && pwd)
OUT=${OUT:-$(mktemp -d /tmp/kp-ptree-tests.XXXXXX)}
mkdir -p "$OUT"
LOG="$OUT/process_tree_tests.log"
PYTHON=${PYTHON:-python3}
NVIDIA_SMI=${KP_NVIDIA_SMI:-nvidia-smi}
# shellcheck source=require_gpu_torch.sh
source "$HERE/require_gpu_torch.sh"
{
  echo "== kp process-tree GPU tests, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "== kptrace: $("$DIST/bin/kptrace" version 2>&1)"
  require_gpu_torch || exit 0
  WORK=$(mktemp -d /tmp/kp-ptree-work.XXXXXX)
  "$PYTHON" "$HERE/process_tree_cases.py" --kptrace "$DIST/bin/kptrace" \
    --lib "$DIST/lib/libkpinject.so" --work "$WORK" --only "${PT_ONLY:-}"
  rc=$?
  tar -C "$WORK" -czf "$OUT/process_tree_traces.tar.gz" . 2>/dev/null || true
  exit $rc
} 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
