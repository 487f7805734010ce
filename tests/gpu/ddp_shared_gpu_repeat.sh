#!/usr/bin/env bash
# ddp_shared_gpu_repeat.sh DIST SECONDS: runs the metrics suite's two-rank DDP case (torchrun,
# gloo, both ranks on GPU 0, KP_METRICS=sol) again and again until SECONDS have passed, and
# prints per run how many ranks measured and how many said HARDWARE_BUSY. Both ranks set up
# their counters at about the same moment; exactly one must measure every time (the other says
# HARDWARE_BUSY once and traces on). For the rank that measured it prints the summary's SM
# clock of its `step` (the median over its value sets) against the GPU's maximum, how many sets
# read below half of it (its counters can stand still while the other rank's kernels run) and
# whether the summary's explanation says so. Run from the repository root on a GPU machine.
set -u
DIST=$1
LIMIT=$2
T=$(mktemp -d)
start=$SECONDS
n=0
while ((SECONDS - start < LIMIT)); do
  n=$((n + 1))
  rm -rf "$T"/*
  t0=$SECONDS
  timeout 120 "$DIST/bin/kptrace" run --metrics sol -o "$T/ddp-%r.kptrace" -- python3 -m \
    torch.distributed.run --standalone --nproc-per-node 2 tests/gpu/metrics_ddp.py --steps 20 \
    >"$T/out" 2>"$T/err"
  rc=$?
  busy=$(grep -c 'HARDWARE_BUSY' "$T/err")
  measured=0
  clock=
  for r in 0 1; do
    "$DIST/bin/kptrace" convert "$T/ddp-$r.kptrace" --to csv -o "$T/csv$r" --no-progress \
      >/dev/null 2>&1
    rows=$(wc -l <"$T/csv$r/metrics.csv" 2>/dev/null || echo 0)
    [[ ${rows:-0} -gt 1 ]] || continue
    measured=$((measured + 1))
    c=$("$DIST/bin/kptrace" summary "$T/ddp-$r.kptrace" --format json 2>/dev/null |
      python3 -c 'import json, sys
m = [x for x in json.load(sys.stdin)["metrics"] if x["range"] == "step"][0]
note = "noted" if m["explanation"].startswith("SM clock ") else "no note"
clock, top = m["sm_clock_mhz"], m["sm_clock_max_mhz"]
low = m.get("sets_low_sm_clock", 0)
print(f"rank {sys.argv[1]} SM clock {clock:.0f} of {top:.0f} MHz, {low} set(s) below half, {note}")
' "$r" 2>/dev/null || echo "rank $r SM clock unknown")
    clock+="${clock:+; }$c"
  done
  echo "run $n: rc $rc, $measured rank(s) measured, $busy HARDWARE_BUSY line(s), $((SECONDS - t0)) s${clock:+; $clock}"
done
rm -rf "$T"
