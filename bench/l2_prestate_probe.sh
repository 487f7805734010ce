#!/usr/bin/env bash
# l2_prestate_probe.sh DIST: which L2 state before a kernel reproduces ncu's --cache-control all.
# bench/l2_prestate.cu prepares a state itself (--prestate) before write_heavy, read_only and
# reduction; ncu measures them with --cache-control none (the prepared state is what they see),
# against ncu --cache-control all as the reference, and kp kernel mode (KP_METRICS_CACHE=pass)
# on the unprepared program. Application replay throughout (no memory restores between passes).
# Prints one table (bench/l2_prestate_probe.py): medians over launches, the first dropped, and
# each column's deviation from the reference. ~2 min on an H200. Environment: NVCC, NCU, PYTHON,
# REPS (4), DIRTY (same: the L2 is left dirty by write_heavy's own buffer; other: by another
# one; alloc: by write_heavy's own, with the other one allocated but unused; read: the other
# one is read, not written), PRESTATES (the --prestate columns; default all but the driver
# calls reset_persist, set_limit, rdma_flush and memop_flush), METRICS (default: the sector
# breakdown below; keep gpu__time_duration.sum in it), WITNESS (0; 1 measures l2_prestate's
# witness kernels too: spin_dirty, spin_clean, touch_pages), PROBE_DIR (where the outputs go;
# default a new directory under /tmp).
PROBE_NAME=l2-prestate
source "$(dirname "${BASH_SOURCE[0]}")/l2_probe_setup.sh"
REPS=${REPS:-4}
build_l2_prestate || exit 1
M=lts__t_sectors.sum,lts__t_sectors_lookup_hit.sum,lts__t_sectors_lookup_miss.sum
M+=,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum
M+=,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
M+=,sm__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second
M=${METRICS:-$M}
DIRTY=${DIRTY:-same}
WITNESS=${WITNESS:-0}
kernels=(write_heavy read_only reduction)
[[ $WITNESS == 1 ]] && kernels+=(spin_dirty spin_clean touch_pages)
KK=$(IFS='|' && echo "${kernels[*]}")  # kp matches mangled names
K="^($KK)\$"
# The table's rows: each kernel keyed and matched by its name.
PROBE_KERNELS=$(for k in "${kernels[@]}"; do printf '%s=%s;' "$k" "$k"; done)
export PROBE_KERNELS=${PROBE_KERNELS%;}
ncu_run() {  # LABEL CACHE PRESTATE
  "$NCU" --clock-control none --cache-control "$2" --replay-mode application --metrics "$M" \
    --csv --page raw --print-units base -k regex:"$K" "$W/l2p" --prestate "$3" --reps "$REPS" \
    --dirty "$DIRTY" --witness "$WITNESS" \
    >"$W/$1.csv" 2>"$W/$1.err" || { echo "ncu $1 failed:"; tail -3 "$W/$1.err"; rm -f "$W/$1.csv"; }
}
ncu_run all all none
ncu_run all_idle all idle
PRESTATES=${PRESTATES-none idle kp kp_idle rsweep wsweep kp2 kp_all wsweep_all}
for p in $PRESTATES; do ncu_run "$p" none "$p"; done
# kp on the unprepared program (its sweep + discard before each measured kernel).
kp_kernel_csv kp -- --metrics "$M" --metrics-cache pass --metrics-kernels regex:"$KK" \
  -- "$W/l2p" --reps "$REPS" --dirty "$DIRTY" --witness "$WITNESS"
echo "# ncu --cache-control none after each --prestate (columns), against ncu's"
echo "# --cache-control all ('all'); kp: kp kernel mode, KP_METRICS_CACHE=pass; $REPS reps;"
echo "# --dirty $DIRTY, --witness $WITNESS"
cols=("all=$W/all.csv" "all_idle=$W/all_idle.csv" "kp=$W/kp_csv/metrics.csv:kp")
for p in $PRESTATES; do cols+=("ncu_$p=$W/$p.csv"); done
"$PYTHON" "$REPO/bench/l2_prestate_probe.py" all "$M" "${cols[@]}"
