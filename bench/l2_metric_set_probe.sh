#!/usr/bin/env bash
# l2_metric_set_probe.sh DIST: does lts__t_bytes.sum of one kernel depend on the metric set it is
# collected with? write_heavy, read_only and reduction of bench/l2_prestate.cu, measured by ncu
# (--cache-control all, and --cache-control none after kp's own sweep + discard done by the
# program) and by kp kernel mode (KP_METRICS_CACHE=pass), each with three sets: the one-pass set
# of run_metrics_tests.sh's cache section, that set plus the per-unit max/min of lts__t_bytes,
# and sol + lts__t_bytes.sum. Application replay for ncu (no memory restores). Prints one table
# per set (bench/l2_prestate_probe.py). ~1.5 min on an H200. Environment: NVCC, NCU, PYTHON,
# REPS (4), PROBE_DIR (where the outputs go; default a new directory under /tmp).
PROBE_NAME=l2-sets
source "$(dirname "${BASH_SOURCE[0]}")/l2_probe_setup.sh"
REPS=${REPS:-4}
build_l2_prestate || exit 1
K='^(write_heavy|read_only|reduction)$'
KK='write_heavy|read_only|reduction'  # kp matches mangled names
ONE=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_bytes.sum
SOL=$("$DIST/bin/kptrace" metrics check --chip GH100 sol 2>/dev/null | awk '/^  [a-z]/{print $1}' |
  paste -sd, -)
[ -n "$SOL" ] || SOL=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
declare -A SETS=([one]="$ONE" [one_units]="$ONE,lts__t_bytes.max,lts__t_bytes.min"
  [sol]="$SOL,lts__t_bytes.sum")
for set in one one_units sol; do
  M=${SETS[$set]}
  for c in all:all:none none:none:kp; do
    IFS=: read -r label cache prestate <<<"$c"
    "$NCU" --clock-control none --cache-control "$cache" --replay-mode application --metrics "$M" \
      --csv --page raw --print-units base -k regex:"$K" "$W/l2p" --prestate "$prestate" \
      --reps "$REPS" >"$W/${set}_$label.csv" 2>"$W/${set}_$label.err" ||
      { echo "ncu $set/$label failed:"; tail -3 "$W/${set}_$label.err"
        rm -f "$W/${set}_$label.csv"; }
  done
  rm -rf "$W/kp_${set}_csv"
  "$DIST/bin/kptrace" run -o "$W/kp_$set.kptrace" --force --metrics "$M" --metrics-mode kernel \
    --metrics-cache pass --metrics-kernels regex:"$KK" -- "$W/l2p" --reps "$REPS" \
    >"$W/kp_$set.log" 2>&1 || tail -3 "$W/kp_$set.log"
  "$DIST/bin/kptrace" convert "$W/kp_$set.kptrace" --to csv -o "$W/kp_${set}_csv" >/dev/null
  rm -f "$W/kp_$set.kptrace"
  echo "=== set $set: ncu all (reference), ncu none after kp's sweep in the program, kp pass"
  show=lts__t_bytes.sum,gpu__time_duration.sum,dram__bytes_write.sum
  [ "$set" = one_units ] && show+=,lts__t_bytes.max,lts__t_bytes.min
  "$PYTHON" "$REPO/bench/l2_prestate_probe.py" all "$show" "all=$W/${set}_all.csv" \
    "ncu_none_kpsweep=$W/${set}_none.csv" "kp=$W/kp_${set}_csv/metrics.csv:kp"
done
