#!/usr/bin/env bash
# instrumentation_probe.sh DIST: whether kp's kernel-mode metrics count the instructions CUPTI
# adds to every kernel to time it when kernel records are on (CONCURRENT_KERNEL; on Hopper CUPTI
# times kernels by instrumenting them). Per kernel, the median instruction count under kp
# kernel mode with its defaults (kernel records on, kp's own replay), with kernel records off
# (KP_ACTIVITIES=memcpy,memset) and with CUPTI's kernel replay (KP_METRICS_CACHE=none), on
# tests/gpu/programs/metrics_cache.cu's read_only and reduction (against ncu's application
# replay as well) and on tests/gpu/metrics_train.py's PyTorch kernels (launches 300-699); then
# range mode, one kernel per range, with kernel records on and off (metrics_cache.cu's
# write_heavy, read_only, reduction and atomic_hist ranges: range mode measures the program's
# own launches, so records on means instrumented).
# Prints three tables; ~1 min on an H200. Environment: NVCC, NCU, PYTHON, PROBE_DIR (as
# l2_probe_setup.sh).
PROBE_NAME=instrumentation
source "$(dirname "${BASH_SOURCE[0]}")/l2_probe_setup.sh"
build_metrics_cache || exit 1
MODES=("default" "records_off KP_ACTIVITIES=memcpy,memset" "cupti_replay KP_METRICS_CACHE=none")

# 1. metrics_cache.cu's read_only and reduction, against ncu.
M=sm__inst_executed.sum,sm__inst_executed_pipe_adu.sum,sm__inst_executed_pipe_cbu.sum
M+=,sm__inst_executed_pipe_lsu.sum,sm__warps_launched.sum,smsp__inst_executed_op_branch.sum
M+=,gpu__time_duration.sum
# Each C++ kernel matched by its bare name (ncu) or its mangled one (kp, "<length><name>").
RE='' KEYS=''
for k in reduction read_only; do
  RE+="${RE:+|}^$k|[0-9]$k"
  KEYS+="${KEYS:+;}$k=^$k|[0-9]$k"
done
ncu_app "$W/ncu.csv" "$M" "$RE" "$W/mc" --reps 3
cols=("ncu=$W/ncu.csv")
for mode in "${MODES[@]}"; do
  read -r -a m <<<"$mode"
  kp_kernel_csv "mc_${m[0]}" "${m[@]:1}" -- --metrics "$M" --metrics-kernels regex:"$RE" \
    -- "$W/mc" --reps 3
  cols+=("kp_${m[0]}=$W/mc_${m[0]}_csv/metrics.csv:kp")
done
echo "## metrics_cache.cu: ncu (application replay) against kp kernel mode"
echo
PROBE_KERNELS=$KEYS "$PYTHON" "$REPO/bench/l2_prestate_probe.py" ncu "$M" "${cols[@]}"

# 2. PyTorch: every kernel name of launches 300-699 of a small training run.
M=sm__inst_executed.sum,sm__warps_launched.sum,gpu__time_duration.sum
for mode in "${MODES[@]}"; do
  read -r -a m <<<"$mode"
  kp_kernel_csv "torch_${m[0]}" "${m[@]:1}" -- --metrics "$M" --metrics-launch-skip 300 \
    --metrics-launch-count 400 -- "$PYTHON" "$REPO/tests/gpu/metrics_train.py" --steps 8 \
    --width 1024
done
echo
echo "## tests/gpu/metrics_train.py: kp kernel mode, per kernel name (the 20 most measured)"
echo
"$PYTHON" - "$W" <<'PY'
import collections, csv, statistics as st, sys
W = sys.argv[1]
def load(mode):
    d = collections.defaultdict(list)
    with open("%s/torch_%s_csv/metrics.csv" % (W, mode)) as f:
        for r in csv.DictReader(f):
            try:
                d[r["range"]].append(tuple(float(r[k]) for k in (
                    "sm__inst_executed.sum", "sm__warps_launched.sum", "gpu__time_duration.sum")))
            except (KeyError, ValueError):
                pass
    return d
a, b, c = load("default"), load("records_off"), load("cupti_replay")
med = lambda rows, i: st.median(x[i] for x in rows)
print("| kernel | launches | warps | instructions per warp, records off | default: extra per warp"
      " | default | CUPTI's replay | default: time |")
print("|---|---|---|---|---|---|---|---|")
for n in sorted(set(a) & set(b), key=lambda n: -len(a[n]))[:20]:
    ia, ib, w = med(a[n], 0), med(b[n], 0), med(b[n], 1)
    ic = med(c[n], 0) if n in c else float("nan")
    print("| %s | %d | %d | %.1f | %+.2f | %+.2f %% | %+.2f %% | %+.2f %% |" % (
        n[:70], len(a[n]), w, ib / w, (ia - ib) / w, (ia / ib - 1) * 100, (ic / ib - 1) * 100,
        (med(a[n], 2) / med(b[n], 2) - 1) * 100))
PY

# 3. Range mode: the program's own launches, kernel records on (the default) and off.
M=sm__inst_executed.sum,smsp__inst_executed_op_branch.sum,sm__warps_launched.sum
kp_csv range_on -- --metrics "$M" --metrics-ranges write_heavy,read_only,reduction,atomic_hist \
  -- "$W/mc" --reps 4
kp_csv range_off KP_ACTIVITIES=memcpy,memset -- --metrics "$M" \
  --metrics-ranges write_heavy,read_only,reduction,atomic_hist -- "$W/mc" --reps 4
echo
echo "## metrics_cache.cu: kp range mode (one kernel per range), kernel records on and off"
echo
"$PYTHON" - "$W" <<'PY'
import collections, csv, statistics as st, sys
W = sys.argv[1]
KEYS = ("sm__inst_executed.sum", "smsp__inst_executed_op_branch.sum", "sm__warps_launched.sum")
def load(mode):
    d = collections.defaultdict(lambda: collections.defaultdict(list))
    with open("%s/range_%s_csv/metrics.csv" % (W, mode)) as f:
        for r in csv.DictReader(f):
            for k in KEYS:
                try:
                    d[r["range"]][k].append(float(r[k]))
                except (KeyError, ValueError):
                    pass
    return d
on, off = load("on"), load("off")
print("| range | metric | records on | records off | on - off, per warp |")
print("|---|---|---|---|---|")
for rng in sorted(set(on) & set(off)):
    if not all(on[rng][k] and off[rng][k] for k in KEYS):
        print("| %s | (no values in one of the runs) | | | |" % rng)
        continue
    w = st.median(off[rng]["sm__warps_launched.sum"])
    for k in KEYS[:2]:
        a, b = st.median(on[rng][k]), st.median(off[rng][k])
        print("| %s | %s | %.0f (%+.2f %%) | %.0f | %+.2f |" % (rng, k, a, (a / b - 1) * 100, b,
                                                            (a - b) / w))
PY
