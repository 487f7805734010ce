#!/usr/bin/env bash
# breakdown_probe.sh DIST METRIC KEY=KERNEL_REGEX CMD...: which of a throughput metric's
# sub-metrics makes kp and ncu differ on one kernel, and how far each tool moves between runs.
# ncu (--clock-control none --cache-control all --replay-mode application) measures
# "breakdown:METRIC" on CMD's kernels matching KERNEL_REGEX; the measured names are METRIC,
# gpu__time_duration.sum and the .avg/.max pct_of_peak_sustained_elapsed sub-metrics it lists.
# ncu then measures those names RUNS times, and kp kernel mode (KP_METRICS_CACHE=pass) RUNS
# times, on the same program. Prints bench/l2_prestate_probe.py's table: per name the median
# over launches (the first dropped), the first ncu run as the reference. KERNEL_REGEX must match
# ncu's function name and kp's mangled or demangled name ('^f|[0-9]f' for a C++ kernel f).
# Environment: RUNS (2), NCU, PYTHON, PROBE_DIR (as l2_probe_setup.sh).
PROBE_NAME=breakdown
source "$(dirname "${BASH_SOURCE[0]}")/l2_probe_setup.sh"
usage="usage: breakdown_probe.sh DIST METRIC KEY=KERNEL_REGEX CMD..."
METRIC=${2:?$usage}
SPEC=${3:?$usage}
: "${4:?$usage}"  # the command
shift 3
RE=${SPEC#*=}
RUNS=${RUNS:-2}
ncu_app "$W/breakdown.csv" "breakdown:$METRIC" "$RE" "$@" || exit 1
NAMES=$("$PYTHON" - "$W/breakdown.csv" "$METRIC" <<'PY'
import csv, re, sys
rows = list(csv.reader(l for l in open(sys.argv[1], errors="replace") if l.startswith('"')))
header = next(r for r in rows if r and r[0] == "ID")
keep = re.compile(r"\.(avg|max)\.pct_of_peak_sustained_elapsed$")
subs = [n for n in header if keep.search(n) and n != sys.argv[2]]
print(",".join([sys.argv[2], "gpu__time_duration.sum"] + subs))  # the table needs the time
PY
) || exit 1
echo "# breakdown of $METRIC on /$RE/: ncu (application replay) and kp kernel mode, $RUNS runs each"
cols=()
for ((r = 1; r <= RUNS; r++)); do
  ncu_app "$W/ncu_$r.csv" "$NAMES" "$RE" "$@"
  cols+=("ncu_$r=$W/ncu_$r.csv")
done
for ((r = 1; r <= RUNS; r++)); do
  kp_kernel_csv "kp_$r" -- --metrics "$NAMES" --metrics-cache pass \
    --metrics-kernels regex:"$RE" -- "$@"
  cols+=("kp_$r=$W/kp_${r}_csv/metrics.csv:kp")
done
PROBE_KERNELS=$SPEC "$PYTHON" "$REPO/bench/l2_prestate_probe.py" ncu_1 "$NAMES" "${cols[@]}"
