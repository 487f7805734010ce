#!/usr/bin/env bash
# l2_state_probe.sh DIST: L2 sector counts (by source, hit/miss, read/write) and DRAM writes of
# write_heavy, read_only and reduction (tests/gpu/programs/metrics_cache.cu) under kp kernel mode
# with KP_METRICS_CACHE=pass (L2 sweep + discard) and none (CUPTI's kernel replay), each against
# ncu --cache-control all --replay-mode application (which restores no memory between passes).
# Prints compare_cache.py's lines (INFO: reported, not counted). ~60 s on an H200.
# Environment: NVCC, NCU, PYTHON, PROBE_DIR (where the outputs go; default a new directory under
# /tmp).
PROBE_NAME=l2-probe
source "$(dirname "${BASH_SOURCE[0]}")/l2_probe_setup.sh"
build_metrics_cache || exit 1
P=lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_lookup_hit.sum
P+=,lts__t_sectors_lookup_miss.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum
P+=,lts__t_sectors.sum,dram__bytes_write.sum
K='write_heavy|read_only|reduction'
"$NCU" --clock-control none --cache-control all --replay-mode application --metrics "$P" --csv \
  --page raw --print-units base -k regex:"$K" "$W/mc" --reps 3 >"$W/ncu_app.csv" 2>"$W/ncu.err"
for c in pass none; do
  "$DIST/bin/kptrace" run -o "$W/kp_$c.kptrace" --force --metrics "$P" --metrics-mode kernel \
    --metrics-cache "$c" --metrics-kernels regex:"$K" -- "$W/mc" --reps 3 >/dev/null 2>&1
  "$DIST/bin/kptrace" convert "$W/kp_$c.kptrace" --to csv -o "$W/kp_${c}_csv" >/dev/null
  echo "=== kp --metrics-cache $c vs ncu app replay"
  "$PYTHON" "$REPO/tests/gpu/compare_cache.py" --label "$c" --mode kernel --kp "$W/kp_${c}_csv" \
    --ncu "$W/ncu_app.csv" --metrics "$P" --kernel write_heavy=write_heavy \
    --kernel read_only=read_only --kernel reduction=reduction --info |
    grep -v "matched\|rows" | sed -E 's/; kp sum of.*//; s/\[(pass|fail) if counted\] //'
done
