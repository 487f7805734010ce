#!/usr/bin/env bash
# metrics_probe.sh DIST: a diagnostic run of kp's metrics on tests/gpu/programs/metrics_sol.cu
# (NVTX ranges mem / mma / mma_tiled, an L2 clean before each) in several configurations, printing
# every occurrence's dram__bytes_write.sum and gpu__time_duration.sum per range or kernel, and the
# collector's Notices (set-up time, host time inside each range-profiler call). It answers
# "where does a metric's difference from ncu come from" and "where does the multi-pass time go";
# run_metrics_tests.sh holds the pass/fail checks. Without a GPU: SKIP, exit 0.
# Environment: OUT (where metrics_probe.txt goes; default a temporary directory), NVCC, REPS (12),
# PROBE_CONFIGS (space-separated subset of the names below; default all).
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${REPS:-12}
M1=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
M4=$M1,sm__throughput.avg.pct_of_peak_sustained_elapsed

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: no GPU (nvidia-smi missing or lists none)"
  exit 0
fi
if [[ $# -lt 1 ]]; then
  echo "usage: bench/metrics_probe.sh DIST" >&2
  exit 2
fi
DIST=$(cd "$1" && pwd) || exit 2
KPTRACE="$DIST/bin/kptrace"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
OUT=${OUT:-$(mktemp -d /tmp/kp-metrics-probe.XXXXXX)}
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/kp-metrics-probe-work.XXXXXX)
if ! "$NVCC" -arch=sm_90 -O2 -std=c++17 -o "$WORK/metrics_sol" \
  "$REPO/tests/gpu/programs/metrics_sol.cu" -ldl >"$WORK/build.log" 2>&1; then
  echo "FAIL: building metrics_sol: $(tail -n 5 "$WORK/build.log")"
  exit 1
fi

# probe NAME [kptrace run flags...] -- metrics_sol args
probe() {
  local name=$1
  shift
  local flags=()
  while [[ $# -gt 0 && $1 != -- ]]; do
    flags+=("$1")
    shift
  done
  shift
  if [[ -n ${PROBE_CONFIGS:-} && " $PROBE_CONFIGS " != *" $name "* ]]; then return; fi
  echo "=== $name: kptrace run ${flags[*]} -- metrics_sol $*"
  local trace="$WORK/$name.kptrace" t0 t1
  t0=$(date +%s%N)
  "$KPTRACE" run "${flags[@]}" -o "$trace" -- "$WORK/metrics_sol" "$@" >"$WORK/$name.out" \
    2>"$WORK/$name.err"
  echo "    exit $? after $(((($(date +%s%N) - t0)) / 1000000)) ms"
  grep -h 'info metrics_sol' "$WORK/$name.out" | sed 's/^/    /'
  grep -h 'kp: metrics' "$WORK/$name.err" | sed 's/^/    /'
  rm -rf "$WORK/$name.csv"
  "$KPTRACE" convert --to csv "$trace" -o "$WORK/$name.csv" >/dev/null 2>&1
  "$KPTRACE" summary "$trace" 2>/dev/null | sed -n '/^Notices/,$p' | sed 's/^/    /' | head -n 20
  python3 - "$WORK/$name.csv/metrics.csv" <<'EOF'
import csv, statistics, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError as e:
    print(f"    no metrics.csv: {e}"); sys.exit()
by = {}
for r in rows:
    by.setdefault(r["range"], []).append(r)
for name, rs in by.items():
    for m, scale, unit in (("dram__bytes_write.sum", 1e-6, "MB"),
                           ("dram__bytes_read.sum", 1e-6, "MB"),
                           ("gpu__time_duration.sum", 1e-3, "us"),
                           ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 1, "%")):
        vals = []
        for r in rs:
            try:
                v = float(r.get(m, "nan"))
            except ValueError:
                continue
            if v == v:
                vals.append(v * scale)
        if not vals:
            continue
        print(f"    {name[:40]:40s} {m:24s} n={len(vals):3d} median {statistics.median(vals):10.2f} {unit}"
              f"  all: {' '.join(f'{v:.1f}' for v in vals[:16])}")
EOF
}

{
  echo "# metrics_probe on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  R=(--metrics-ranges mem,mma,mma_tiled)
  probe range_1pass --log debug --metrics "$M1" "${R[@]}" -- --reps "$REPS"
  probe range_1pass_cache_range --log debug --metrics "$M1" "${R[@]}" --metrics-cache range -- \
    --reps "$REPS"
  probe range_8pass --log debug --metrics "$M4" "${R[@]}" -- --reps "$REPS"
  probe range_8pass_cache_none --log debug --metrics "$M4" "${R[@]}" --metrics-cache none -- \
    --reps "$REPS"
  probe range_8pass_no_mem --log debug --metrics "$M4" --metrics-ranges mma,mma_tiled -- \
    --reps "$REPS"
  probe range_8pass_clean_first --log debug --metrics "$M4" --metrics-ranges clean,mem,mma,mma_tiled \
    -- --reps "$REPS" --clean-range 1
  probe kernel_1pass --log debug --metrics "$M1" --metrics-mode kernel -- --reps "$REPS"
  probe kernel_8pass --log debug --metrics "$M4" --metrics-mode kernel -- --reps "$REPS"
  probe tiny_sol --log debug --metrics sol --metrics-ranges tiny -- --tiny 60
  probe tiny_1pass --log debug --metrics "$M1" --metrics-ranges tiny -- --tiny 2000
  probe tiny_1pass_cache_range --log debug --metrics "$M1" --metrics-ranges tiny \
    --metrics-cache range -- --tiny 2000
} 2>&1 | tee "$OUT/metrics_probe.txt"
rm -rf "$WORK"
