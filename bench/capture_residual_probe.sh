#!/usr/bin/env bash
# capture_residual_probe.sh DIST [PASSES]: does tracing cost outlive a capture window, and which
# record kind leaves it? The launch loop (bench/workloads/launch_loop.cu, 100 steps of 3,000
# empty-kernel launches, 1 s warm-up, --step-times) runs with no tool, with a full trace, with no
# window, and with one schedule window over steps 20-29 for kp's defaults and for each kind
# alone. Per run it prints the median per step before (0-19), inside (20-29) and after (30-99)
# the window of: wall time (us), the launching thread's CPU time (us) and its instructions
# (millions; "-" where perf events are refused). A kind whose "after" stays above "before" keeps
# costing once disabled. ~2 min on an H200 for 2 passes. Environment: NVCC, PYTHON,
# KP_BENCH_CPUS (2-5).
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIST=$(cd "${1:?usage: capture_residual_probe.sh DIST [PASSES]}" && pwd) || exit 2
PASSES=${2:-2}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
PYTHON=${PYTHON:-python3}
CPUS=${KP_BENCH_CPUS:-2-5}
WORK=$(mktemp -d /tmp/kp-residual.XXXXXX)
"$NVCC" -arch=sm_90 -O2 -o "$WORK/launch_loop" "$HERE/workloads/launch_loop.cu" || exit 1
loop=("$WORK/launch_loop" --launches 300000 --copies 0 --steps 100 --warmup-s 1 --step-times)
window=(--capture-schedule "step:20,0,10,1")

# summarize NAME: reads the loop's stdout, prints one line.
summarize() {
  "$PYTHON" -c '
import json, statistics, sys
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("{") and "step_us" in l]
if not lines:
    print(f"{sys.argv[1]:24s} no step times"); sys.exit()
j = json.loads(lines[-1])
def part(v, scale, fmt):
    v = [x for x in v if x is not None]
    if len(v) < 100:
        return "   -      -      -  "
    m = statistics.median
    return " ".join(fmt.format(m(v[a:b]) / scale) for a, b in ((0, 20), (20, 30), (30, 100)))
wall = part(j["step_us"], 1, "{:7.0f}")
cpu = part(j["step_cpu_us"], 1, "{:7.0f}")
instr = part(j["step_instructions"], 1e6, "{:6.2f}")
print(f"{sys.argv[1]:24s} wall {wall} | cpu {cpu} | Minstr {instr}")' "$1"
}

echo "capture residual probe: $(date -u +%FT%TZ), CPUs $CPUS; columns: before / inside / after"
for ((p = 1; p <= PASSES; p++)); do
  echo "--- pass $p"
  taskset -c "$CPUS" "${loop[@]}" 2>/dev/null | summarize none
  for cfg in "full|" "sched defaults|${window[*]}" "sched kernel|${window[*]} --activities kernel" \
    "sched memcpy,memset|${window[*]} --activities memcpy,memset" \
    "sched nvtx|${window[*]} --activities nvtx" "sched api|${window[*]} --activities api" \
    "nowin|--capture-range kp_no_such_range"; do
    name=${cfg%%|*}
    read -r -a flags <<<"${cfg#*|}"
    taskset -c "$CPUS" "$DIST/bin/kptrace" run -o "$WORK/p.kptrace" --force --log warning \
      ${flags[@]+"${flags[@]}"} -- "${loop[@]}" 2>"$WORK/err" | summarize "$name"
  done
done
