#!/usr/bin/env bash
# bench/attribution.sh DIST [ROUNDS] [kinds]: where does kp's cost on launch-bound PyTorch come from?
# With "kinds", each kp run enables kernel records plus ONE other activity kind, to find the
# kind that costs.
# Runs the tiny-op loop (bench/workloads/torch_tiny_ops.py) under: no tool; the bare CUPTI floor
# (kernel records only); kp defaults; kp with KP_API=none (no API records); kp with
# KP_ACTIVITIES=kernel (kernel records only, like the floor). Interleaved rounds, medians of the
# per-iteration time; writes $OUT/attribution.md. Skips without a GPU.
set -u -o pipefail
DIST=$(cd "${1:?usage: bench/attribution.sh DIST [ROUNDS]}" && pwd)
ROUNDS=${2:-5}
MODE=${3:-}
OUT=${OUT:-$(mktemp -d)}
REPO=$(cd "$(dirname "$0")/.." && pwd)
if ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no GPU (nvidia-smi found none)"; exit 0; fi
FLOOR=$DIST/lib/libkpfloor.so
work=$(mktemp -d)
run() {  # run NAME ENV... : one run, appends "NAME us" to $work/results
  local name=$1; shift
  local line
  line=$(cd "$work" && env "$@" taskset -c 2-5 python3 "$REPO/bench/workloads/torch_tiny_ops.py" \
         --iterations 3000 2>/dev/null | grep '^{' | tail -1)
  echo "$name $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["us_per_iter"])' "$line")" \
    >>"$work/results"
}
configs=(none floor kp kp_api_none kp_kernel_only)
kinds=(memcpy memset sync overhead nvtx api)
if [ "$MODE" = kinds ]; then
  configs=(none kp_kernel_only)
  for k in "${kinds[@]}"; do configs+=("kp_kernel+$k"); done
fi
for r in $(seq "$ROUNDS"); do
  for c in $(printf '%s\n' "${configs[@]}" | shuf); do
    case $c in
      none) run none X=1 ;;
      floor) run floor CUDA_INJECTION64_PATH="$FLOOR" ;;
      kp) run kp CUDA_INJECTION64_PATH="$DIST/lib/libkpinject.so" KP_LOG=quiet KP_OUTPUT="$work/kp.kptrace" ;;
      kp_api_none) run kp_api_none CUDA_INJECTION64_PATH="$DIST/lib/libkpinject.so" KP_LOG=quiet KP_API=none KP_OUTPUT="$work/kp2.kptrace" ;;
      kp_kernel+*) run "$c" CUDA_INJECTION64_PATH="$DIST/lib/libkpinject.so" KP_LOG=quiet KP_ACTIVITIES="kernel,${c#kp_kernel+}" KP_OUTPUT="$work/kp4.kptrace" ;;
      kp_kernel_only) run kp_kernel_only CUDA_INJECTION64_PATH="$DIST/lib/libkpinject.so" KP_LOG=quiet KP_ACTIVITIES=kernel KP_OUTPUT="$work/kp3.kptrace" ;;
    esac
  done
done
python3 - "$work/results" "$ROUNDS" >"$OUT/attribution.md" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, value = line.split()
    runs.setdefault(name, []).append(float(value))
base = statistics.median(runs["none"])
print("# Cost attribution on launch-bound PyTorch (tiny ops, 5 kernels per iteration)\n")
print(f"{sys.argv[2]} interleaved rounds, medians; pinned to CPUs 2-5.\n")
print("| configuration | runs | median us/iter | added us/iter | added us/kernel |")
print("|---|---|---|---|---|")
order = ["none", "floor", "kp_kernel_only"] + sorted(n for n in runs if n.startswith("kp_kernel+")) + ["kp_api_none", "kp"]
for name in order:
    v = runs.get(name, [])
    if not v:
        continue
    m = statistics.median(v)
    print(f"| {name} | {len(v)} | {m:.2f} | {m - base:+.2f} | {(m - base) / 5:+.2f} |")
PY
cat "$OUT/attribution.md"
