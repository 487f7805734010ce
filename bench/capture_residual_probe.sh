#!/usr/bin/env bash
# capture_residual_probe.sh DIST [PASSES]: does tracing cost outlive a capture window, and which
# record kind leaves it? The launch loop (bench/workloads/launch_loop.cu, 100 steps of 3,000
# empty-kernel launches, 1 s warm-up, --step-times) runs with no tool, with a full trace, with no
# window, and with one schedule window over steps 20-29 for kp's defaults and for each kind
# alone. Per run it prints the median per step before (0-19), inside (20-29) and after (30-99)
# the window of: wall time (us), the launching thread's CPU time (us) and its instructions
# (millions; "-" where perf events are refused). A kind whose "after" stays above "before" keeps
# costing once disabled. ~2 min on an H200 for 2 passes. Environment: NVCC, PYTHON,
# KP_BENCH_CPUS (2-5), ONLY (probe names). The floor probes (bench/floor, KPFLOOR_WINDOW) show
# what bare CUPTI keeps costing after the same window, and with KPFLOOR_DETACH=1 after detaching.
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

# One probe: NAME|TOOL|SETTINGS. TOOL kp: `kptrace run SETTINGS`; floor: bench/floor's
# libkpfloor.so with the environment SETTINGS (KPFLOOR_KINDS = kp's defaults unless given).
FLOOR_DEFAULTS=kernel,nvtx,cb_api,lazy_copy,driver_only
PROBES=(
  "full|kp|"
  "sched defaults|kp|${window[*]}"
  "sched kernel|kp|${window[*]} --activities kernel"
  "sched memcpy,memset|kp|${window[*]} --activities memcpy,memset"
  "sched nvtx|kp|${window[*]} --activities nvtx"
  "sched api|kp|${window[*]} --activities api"
  "nowin|kp|--capture-range kp_no_such_range"
  "floor full|floor|"
  "floor sched|floor|KPFLOOR_WINDOW=20,10"
  "floor sched detach|floor|KPFLOOR_WINDOW=20,10 KPFLOOR_DETACH=1"
  "floor sched kernel|floor|KPFLOOR_WINDOW=20,10 KPFLOOR_KINDS=kernel"
  "floor sched cb_api|floor|KPFLOOR_WINDOW=20,10 KPFLOOR_KINDS=cb_api"
)
# ONLY: a comma list of probe names to run (default: all).
ONLY=${ONLY:-}

echo "capture residual probe: $(date -u +%FT%TZ), CPUs $CPUS; columns: before / inside / after"
for ((p = 1; p <= PASSES; p++)); do
  echo "--- pass $p"
  taskset -c "$CPUS" "${loop[@]}" 2>/dev/null | summarize none
  for probe in "${PROBES[@]}"; do
    IFS='|' read -r name tool settings <<<"$probe"
    [[ -n $ONLY && ",$ONLY," != *",$name,"* ]] && continue
    read -r -a flags <<<"$settings"
    if [[ $tool == kp ]]; then
      taskset -c "$CPUS" "$DIST/bin/kptrace" run -o "$WORK/p.kptrace" --force --log quiet \
        ${flags[@]+"${flags[@]}"} -- "${loop[@]}" 2>"$WORK/err" | summarize "$name"
      # What kp traced: its kernels, windows and notices (a probe of an untraced run means nothing).
      echo "  kp: $("$DIST/bin/kptrace" info "$WORK/p.kptrace" 2>&1 |
        grep -E '^ +(kernels|capture windows|\[)' | tr -s ' ' | tr '\n' ';')$(tail -n 2 "$WORK/err" | tr '\n' ';')"
    else
      env CUDA_INJECTION64_PATH="$DIST/lib/libkpfloor.so" NVTX_INJECTION64_PATH="$DIST/lib/libkpfloor.so" \
        KPFLOOR_KINDS="$FLOOR_DEFAULTS" ${flags[@]+"${flags[@]}"} \
        taskset -c "$CPUS" "${loop[@]}" 2>"$WORK/err" | summarize "$name"
      grep -h '^kpfloor: ' "$WORK/err" | cut -c 1-150 | head -n 3
    fi
  done
done
