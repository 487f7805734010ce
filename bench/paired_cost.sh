#!/usr/bin/env bash
# paired_cost.sh DIST [--passes N] [--budget-s S] [...]: kp's, the bare CUPTI floor's and
# torch.profiler's cost measured within each process (traced steps against the same process's
# untraced ones); see bench/paired_cost.py. Needs an NVIDIA GPU, nvcc and python3 with PyTorch;
# without a GPU it prints why and exits 0. ~100 s per pass on the H200 VM.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! nvidia-smi -L 2>/dev/null | grep -q "GPU"; then
  echo "SKIP: paired cost benchmark needs an NVIDIA GPU: nvidia-smi lists none"
  exit 0
fi
exec python3 "$here/paired_cost.py" "$@"
