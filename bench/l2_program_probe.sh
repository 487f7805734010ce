#!/usr/bin/env bash
# l2_program_probe.sh DIST: lts__t_bytes.sum of write_heavy, read_only and reduction in three
# programs, ncu (--cache-control all, its default kernel replay: one pass here) against kp kernel
# mode (KP_METRICS_CACHE=pass), both with the one-pass set of run_metrics_tests.sh's cache
# section: bench/l2_prestate.cu with the L2 left dirty by write_heavy's own buffer (--dirty same)
# or by another buffer (--dirty other), and tests/gpu/programs/metrics_cache.cu itself (where the
# cache section measured ncu ~5 % above kp on write_heavy). Prints one table per program
# (bench/l2_prestate_probe.py). ~1.5 min on an H200. Environment: NVCC, NCU, PYTHON, PROBE_DIR
# (where the outputs go; default a new directory under /tmp; no spaces or colons).
PROBE_NAME=l2-programs
source "$(dirname "${BASH_SOURCE[0]}")/l2_probe_setup.sh"
build_l2_prestate || exit 1
build_metrics_cache || exit 1
K='write_heavy|read_only|reduction'
M=dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_bytes.sum
for prog in "l2p_same:$W/l2p --prestate none --dirty same --reps 4" \
  "l2p_other:$W/l2p --prestate none --dirty other --reps 4" "metrics_cache:$W/mc --reps 3"; do
  label=${prog%%:*}
  read -r -a argv <<<"${prog#*:}"
  for round in 1 2; do
    "$NCU" --clock-control none --cache-control all --metrics "$M" --csv --page raw \
      --print-units base -k regex:"$K" "${argv[@]}" >"$W/${label}_ncu$round.csv" \
      2>"$W/${label}_ncu$round.err" ||
      { echo "ncu $label failed:"; tail -3 "$W/${label}_ncu$round.err"
        rm -f "$W/${label}_ncu$round.csv"; }
    rm -rf "$W/${label}_kp${round}_csv"
    "$DIST/bin/kptrace" run -o "$W/$label.kptrace" --force --metrics "$M" --metrics-mode kernel \
      --metrics-cache pass --metrics-kernels regex:"$K" -- "${argv[@]}" \
      >"$W/${label}_kp$round.log" 2>&1 || tail -3 "$W/${label}_kp$round.log"
    "$DIST/bin/kptrace" convert "$W/$label.kptrace" --to csv -o "$W/${label}_kp${round}_csv" \
      >/dev/null
    rm -f "$W/$label.kptrace"
  done
  echo "=== $label: ncu run 1 (reference), ncu run 2, kp runs 1 and 2"
  "$PYTHON" "$REPO/bench/l2_prestate_probe.py" ncu1 lts__t_bytes.sum,dram__bytes_write.sum \
    "ncu1=$W/${label}_ncu1.csv" "ncu2=$W/${label}_ncu2.csv" \
    "kp1=$W/${label}_kp1_csv/metrics.csv:kp" "kp2=$W/${label}_kp2_csv/metrics.csv:kp"
done
