#!/usr/bin/env bash
# metrics_cost.sh DIST: what kp's per-range metrics cost (issue 4, "the cost of metric collection
# per range occurrence is measured in bench/ and documented").
#
# Workload: tests/gpu/programs/metrics_sol.cu --tiny K: 20 warm-up then K timed NVTX ranges
# "tiny", each around one one-block kernel and a cudaDeviceSynchronize; the program prints its
# own mean time per range, so process start, CUDA init and kp's one-time set-up (which lands in
# the warm-up ranges) stay out of the per-range number. Configurations, interleaved, ROUNDS
# rounds (default 5), medians:
#   none      the program alone
#   trace     kp tracing only
#   metrics1  kp + a one-pass set (dram bytes read/write + gpu__time_duration) on "tiny": every
#             occurrence measured, counter image decoded every 512 ranges (amortized in)
#   metrics1_sweep  the same with KP_METRICS_CACHE=range: an L2 sweep before every range
#   sol       kp + the 9-pass speed-of-light set on "tiny" (passes rotate; one Start/Stop per
#             occurrence), fewer ranges since each costs milliseconds
#   kernel1, kernel_sol  the same two sets in kernel mode (KP_METRICS_MODE=kernel): every
#             kernel measured by kp's own replay (with kernel records on, the default: a memory
#             save, and every pass a relaunch with kernel records off)
#   kernel1_base, kernel_sol_base  the same with BASE_LIB (another libkpinject.so, e.g. an
#             older build), when BASE_LIB is set
# With TORCH=1 (and PyTorch importable), kernel mode's one-pass set on 400 kernels of
# tests/gpu/metrics_train.py (launches 300-699, about 1.2 GB of device memory), ROUNDS//2+1
# rounds each with this build and BASE_LIB: process wall time and the collector's own account
# of its calls (the trace's "host time in range-profiler calls" Notice).
# Per-occurrence added cost = per-range time of the configuration - that of "trace". The one-time
# set-up is read from the trace's metrics Notice ("set up on device ... in X ms").
# Writes $OUT/metrics_cost.md (else bench/results/metrics_cost.md). Without a GPU: SKIP, exit 0.
# Environment: OUT, NVCC, ROUNDS, K1 (ranges for none/trace/metrics1, default 2000), K9 (sol,
# 100), KK1 and KK9 (kernel1 and kernel_sol, 200 and 20: a kernel-mode measurement costs
# milliseconds), BASE_LIB, TORCH, PYTHON, TINY (0: only the PyTorch part).
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-5}
K1=${K1:-2000}
K9=${K9:-100}
KK1=${KK1:-200}
KK9=${KK9:-20}
TINY=${TINY:-1}
ONE_PASS=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
BASE_LIB=${BASE_LIB:-}
TORCH=${TORCH:-0}
PYTHON=${PYTHON:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: no GPU (nvidia-smi missing or lists none)"
  exit 0
fi
if [[ $# -lt 1 ]]; then
  echo "usage: bench/metrics_cost.sh DIST" >&2
  exit 2
fi
DIST=$(cd "$1" && pwd) || exit 2
if [[ $TINY != 1 && $TORCH != 1 ]]; then
  echo "nothing to measure: TINY=0 needs TORCH=1" >&2
  exit 2
fi
KPTRACE="$DIST/bin/kptrace"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
OUT=${OUT:-$REPO/bench/results}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/kp-metrics-cost.XXXXXX)
if ! "$NVCC" -arch=sm_90 -O2 -std=c++17 -I"$REPO/tests/gpu/programs" -o "$WORK/metrics_sol" \
  "$REPO/tests/gpu/programs/metrics_sol.cu" -ldl >"$WORK/build.log" 2>&1; then
  echo "FAIL: building metrics_sol: $(tail -n 5 "$WORK/build.log")"
  exit 1
fi

# One run: appends "config round per_range_us wall_s setup_ms metric_rows" to results.tsv.
run_one() {
  local config=$1 round=$2 k=$3
  shift 3
  local trace="$WORK/$config-$round.kptrace" t0 t1 rc
  t0=$(date +%s%N)
  if [[ $config == none ]]; then
    "$WORK/metrics_sol" --tiny "$k" >"$WORK/run.out" 2>"$WORK/run.err"
  else
    "$KPTRACE" run "$@" -o "$trace" -- "$WORK/metrics_sol" --tiny "$k" >"$WORK/run.out" \
      2>"$WORK/run.err"
  fi
  rc=$?
  t1=$(date +%s%N)
  local per setup=nan rows=0
  per=$(sed -n 's/.*per_range_us=\([0-9.]*\).*/\1/p' "$WORK/run.out")
  if [[ $rc -ne 0 || -z $per ]]; then
    echo "  $config round $round: FAILED (exit $rc): $(tail -n 3 "$WORK/run.err")"
    return
  fi
  if [[ -s $trace ]]; then
    "$KPTRACE" summary "$trace" --format json >"$WORK/summary.json" 2>/dev/null
    read -r setup rows < <(python3 - "$WORK/summary.json" <<'EOF'
import json, re, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception:
    print("nan 0"); sys.exit()
setup = next((m.group(1) for n in s.get("notices", [])
              for m in [re.search(r"set up on device .* in ([0-9.]+) ms", n)] if m), "nan")
print(setup, sum(r.get("occurrences", 0) for r in s.get("metrics", [])))
EOF
    )
    rm -f "$trace"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$config" "$round" "$per" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')" "$setup" "$rows" >>"$WORK/results.tsv"
  echo "  $config round $round: ${per} us/range, setup ${setup} ms, ${rows} metric rows"
}

echo "metrics cost benchmark: $ROUNDS rounds, K1=$K1, K9=$K9, KK1=$KK1, KK9=$KK9, \
$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
: >"$WORK/results.tsv"
: >"$OUT/metrics_cost.md"
for round in $(seq 1 "$ROUNDS"); do
  [[ $TINY == 1 ]] || break
  run_one none "$round" "$K1"
  run_one trace "$round" "$K1"
  run_one metrics1 "$round" "$K1" --metrics "$ONE_PASS" --metrics-ranges tiny
  run_one metrics1_sweep "$round" "$K1" --metrics "$ONE_PASS" --metrics-ranges tiny \
    --metrics-cache range
  run_one trace9 "$round" "$K9"
  run_one sol "$round" "$K9" --metrics sol --metrics-ranges tiny
  run_one trace_k1 "$round" "$KK1"
  run_one kernel1 "$round" "$KK1" --metrics "$ONE_PASS" --metrics-mode kernel
  run_one trace_k9 "$round" "$KK9"
  run_one kernel_sol "$round" "$KK9" --metrics sol --metrics-mode kernel
  if [[ -n $BASE_LIB ]]; then
    run_one kernel1_base "$round" "$KK1" --lib "$BASE_LIB" --metrics "$ONE_PASS" \
      --metrics-mode kernel
    run_one kernel_sol_base "$round" "$KK9" --lib "$BASE_LIB" --metrics sol --metrics-mode kernel
  fi
done
# trace9 is "trace" with the sol run's range count: the baseline for "sol".

passes1=$("$KPTRACE" metrics check --chip GH100 "$ONE_PASS" 2>&1 | sed -n 's/.*: \([0-9]*\) pass(es) for the set/\1/p')
passes9=$("$KPTRACE" metrics check --chip GH100 sol 2>&1 | sed -n 's/.*: \([0-9]*\) pass(es) for the set/\1/p')
[[ $TINY == 1 ]] && python3 - "$WORK/results.tsv" "$OUT/metrics_cost.md" "$K1" "$K9" "$KK1" \
  "$KK9" "${passes1:-?}" "${passes9:-?}" "$ROUNDS" <<'EOF'
import statistics, sys
path, md, k1, k9, kk1, kk9, p1, p9, rounds = sys.argv[1:]
rows = {}
for line in open(path):
    c, r, per, wall, setup, n = line.rstrip("\n").split("\t")
    rows.setdefault(c, []).append((float(per), float(wall), float(setup), int(n)))
def med(c, i):
    v = [x[i] for x in rows.get(c, []) if x[i] == x[i]]
    return statistics.median(v) if v else float("nan")
base = {"none": "none", "trace": "none", "metrics1": "trace", "metrics1_sweep": "trace",
        "trace9": "none", "sol": "trace9", "trace_k1": "none", "kernel1": "trace_k1",
        "trace_k9": "none", "kernel_sol": "trace_k9", "kernel1_base": "trace_k1",
        "kernel_sol_base": "trace_k9"}
desc = {
    "none": f"program alone, {k1} ranges",
    "trace": f"kp tracing only, {k1} ranges",
    "metrics1": f"kp + {p1}-pass set (dram bytes r/w, gpu time) on every range, {k1} ranges",
    "metrics1_sweep": f"the same with KP_METRICS_CACHE=range (an L2 sweep before every range)",
    "trace9": f"kp tracing only, {k9} ranges (baseline for sol)",
    "sol": f"kp + sol ({p9} passes, rotating over occurrences), {k9} ranges",
    "trace_k1": f"kp tracing only, {kk1} ranges (baseline for kernel1)",
    "kernel1": f"kernel mode, the {p1}-pass set on every kernel, {kk1} ranges",
    "kernel1_base": f"kernel mode, the {p1}-pass set, BASE_LIB, {kk1} ranges",
    "trace_k9": f"kp tracing only, {kk9} ranges (baseline for kernel_sol)",
    "kernel_sol": f"kernel mode, sol ({p9} passes per kernel), {kk9} ranges",
    "kernel_sol_base": f"kernel mode, sol, BASE_LIB, {kk9} ranges",
}
out = ["# kp metrics cost per NVTX range occurrence", "",
       f"Workload: `metrics_sol --tiny K` (one one-block kernel + sync per range), {rounds} "
       "interleaved rounds, medians. Per-range time is the program's own timer over the K "
       "timed ranges (after 20 warm-up ranges that absorb kp's one-time set-up).", "",
       "| configuration | per range (µs) | added per range (µs) | vs | process wall (s) "
       "| one-time set-up (ms, from the Notice) | metric rows |",
       "|---|---|---|---|---|---|---|"]
for c in ("none", "trace", "metrics1", "metrics1_sweep", "trace9", "sol", "trace_k1", "kernel1",
          "kernel1_base", "trace_k9", "kernel_sol", "kernel_sol_base"):
    if c.endswith("_base") and c not in rows:
        continue
    if c not in rows:
        out.append(f"| {desc[c]} | failed | | | | | |")
        continue
    per, added = med(c, 0), med(c, 0) - med(base[c], 0)
    setup = med(c, 2)
    out.append(f"| {desc[c]} | {per:.2f} | {added:+.2f} | {base[c]} | {med(c, 1):.2f} | "
               f"{'' if setup != setup else f'{setup:.0f}'} | {int(med(c, 3))} |")
out += ["", "Added cost = median per-range time minus that of the configuration in column "
        "`vs` (metrics against tracing only with the same range count). The one-pass set includes the amortized counter-image decode (every 512 ranges); "
        f"the {p9}-pass set pays a range-profiler Stop + Start and an L2 sweep (the default "
        "KP_METRICS_CACHE=pass) per occurrence here, since each occurrence is a pass, and gives "
        f"one full value set per {p9} occurrences. The collector's own account of that time, "
        "by call, is the trace's 'host time in range-profiler calls' Notice. Kernel mode "
        "measures each kernel by itself (synchronize, L2 sweep, profiler start and stop, "
        "decode); with kernel records on (the default) it also saves the context's memory, "
        "lets the application's launch run unmeasured with its record, and measures every "
        "pass with a relaunch while kernel records are off (docs/metrics.md, \"Kernel records "
        "and instruction counts\").", ""]
text = "\n".join(out)
print(text)
open(md, "w").write(text)
EOF

# Kernel mode on a PyTorch training run: the cost of the memory save that every measured kernel
# needs with kernel records on, where the context holds about 1.2 GB.
if [[ $TORCH == 1 ]] && ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "TORCH=1: $PYTHON cannot import torch; the PyTorch part is skipped" | tee -a "$OUT/metrics_cost.md"
elif [[ $TORCH == 1 ]]; then
  {
    echo
    echo "## Kernel mode on tests/gpu/metrics_train.py (one-pass set, launches 300-699)"
    echo
    echo "| build | round | wall (s) | collector's calls (the Notice) |"
    echo "|---|---|---|---|"
  } >>"$OUT/metrics_cost.md"
  for round in $(seq 1 $((ROUNDS / 2 + 1))); do
    for build in this base; do
      [[ $build == base && -z $BASE_LIB ]] && continue
      lib=()
      [[ $build == base ]] && lib=(--lib "$BASE_LIB")
      trace="$WORK/torch-$build-$round.kptrace"
      t0=$(date +%s%N)
      "$KPTRACE" run ${lib[@]+"${lib[@]}"} --metrics "$ONE_PASS" --metrics-mode kernel \
        --metrics-launch-skip 300 --metrics-launch-count 400 -o "$trace" -- "$PYTHON" \
        "$REPO/tests/gpu/metrics_train.py" --steps 8 >"$WORK/run.out" 2>"$WORK/run.err"
      rc=$?
      t1=$(date +%s%N)
      calls=$("$KPTRACE" summary "$trace" --format json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(next((n.split(": ", 1)[1] for n in s.get("notices", [])
            if "host time in range-profiler calls" in n), "none"))' 2>/dev/null)
      echo "| $build | $round | $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')$([[ $rc -ne 0 ]] && echo " (exit $rc)") | ${calls:-none} |" \
        | tee -a "$OUT/metrics_cost.md"
      rm -f "$trace"
    done
  done
fi
echo "written: $OUT/metrics_cost.md"
