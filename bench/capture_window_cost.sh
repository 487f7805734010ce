#!/usr/bin/env bash
# capture_window_cost.sh DIST [ROUNDS]: what a capture window over 10 % of the steps costs,
# against a full trace and no tool (issue 17). Bounded: stops starting runs after BUDGET_S
# seconds (default 300; a round of 10 runs takes ~45 s on an H200, a run at most RUN_TIMEOUT_S,
# 25), so one device call of 330 s always ends with numbers.
#
# Workloads, each a loop of steps that are NVTX ranges "step":
#   launch  bench/workloads/launch_loop.cu --launches 300000 --steps 100 (empty kernels; us per launch)
#   torch   bench/workloads/capture_steps.py --workload tiny (tiny PyTorch ops; us per step)
# Both warm up for 1 s outside the ranges first (--warmup-s 1: CPU and GPU clocks settle).
# Modes (kptrace run, interleaved in a rotating order each round, pinned to KP_BENCH_CPUS):
#   none    the program alone
#   full    the whole run traced (kp's defaults)
#   nowin   --capture-range on a range the program never opens: kp's cost outside any window
#   range   --capture-range step --capture-range-end repeat:N/10 (the first 10 % of the steps)
#   sched   --capture-schedule step:W,0,N/10,1 (a window over the middle 10 % of the steps)
#   ffull   bench/floor's bare CUPTI subscriber with kp's default kinds, the whole run
#   fsched  the floor with the same window as sched (KPFLOOR_WINDOW) and CUPTI detached after
#           it (KPFLOOR_DETACH=1): what bare CUPTI pays for that window (share of ffull's)
# Every run prints one line as it ends; after every round the table of medians so far:
# time per unit, overhead over `none`, and each window's overhead as a share of the full
# trace's (the target is ~10 %; outside a window kp should cost what no tool costs).
# Writes $OUT/capture_window_cost.md and the raw lines ($OUT/capture_window_cost_raw.jsonl).
# Environment: OUT, PYTHON, NVCC, KP_BENCH_CPUS (default 2-5), BUDGET_S, RUN_TIMEOUT_S (25),
# WORKLOADS ("launch torch"), MODES (default "none full nowin range sched ffull fsched"). FAKE=1: no GPU, no kptrace: fake results (checks the script).
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${2:-${ROUNDS:-3}}
OUT=${OUT:-$(mktemp -d /tmp/kp-capture-cost.XXXXXX)}
PYTHON=${PYTHON:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CPUS=${KP_BENCH_CPUS:-2-5}
BUDGET_S=${BUDGET_S:-300}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-25}
FAKE=${FAKE:-0}
read -r -a WORKLOAD_LIST <<<"${WORKLOADS:-launch torch}"
RAW="$OUT/capture_window_cost_raw.jsonl"
MD="$OUT/capture_window_cost.md"
mkdir -p "$OUT"
: >"$RAW"
START=$SECONDS

if [[ $FAKE != 1 ]]; then
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "SKIP: capture_window_cost needs an NVIDIA GPU"
    exit 0
  fi
  DIST=$(cd "${1:?usage: capture_window_cost.sh DIST [ROUNDS]}" && pwd) || exit 2
fi
WORK=$(mktemp -d /tmp/kp-capture-cost-work.XXXXXX)
declare -A STEPS=([launch]=100 [torch]=200)
if [[ $FAKE != 1 && " ${WORKLOAD_LIST[*]} " == *" launch "* ]]; then
  if ! timeout 120 "$NVCC" -arch=sm_90 -O2 -o "$WORK/launch_loop" \
    "$HERE/workloads/launch_loop.cu" >"$WORK/nvcc.log" 2>&1; then
    echo "FAIL: building launch_loop: $(tail -n 3 "$WORK/nvcc.log")"
    exit 1
  fi
fi
echo "capture window cost: rounds $ROUNDS, budget ${BUDGET_S} s, CPUs $CPUS, $(date -u +%FT%TZ)"
uptime

# The medians so far, as a Markdown table (also written to $MD).
table() {
  "$PYTHON" - "$RAW" "$CPUS" <<'PY' | tee "$MD"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rounds = len({r["round"] for r in rows})
print(f"Medians of {rounds} interleaved round(s), pinned to CPUs {sys.argv[2]}.\n")
print("| workload | mode | time | runs | overhead vs none | share of full-trace overhead "
      "(kp: full's; floor: ffull's) "
      "| paired share: median (min-max) over rounds |")
print("|---|---|---|---|---|---|---|")


MODES = ("none", "full", "nowin", "range", "sched", "ffull", "fsched")
FULL_OF = {m: "ffull" if m.startswith("f") and m != "full" else "full" for m in MODES}


def paired(w, m):
    """Each round's own share (its none, full and m runs ran within seconds of each other)."""
    if m in ("none", "full", "ffull"):
        return " – |"
    f = FULL_OF[m]
    shares = []
    for r in sorted({r["round"] for r in rows}):
        v = {x["mode"]: x["value"] for x in rows if x["workload"] == w and x["round"] == r}
        if all(k in v for k in ("none", f, m)) and v[f] > v["none"]:
            shares.append((v[m] - v["none"]) / (v[f] - v["none"]) * 100)
    if not shares:
        return " – |"
    return f" {statistics.median(shares):.0f} % ({min(shares):.0f}..{max(shares):.0f} %) |"


for w in ("launch", "torch"):
    unit = "us/launch" if w == "launch" else "us/step"
    med = {}
    for m in MODES:
        v = [r["value"] for r in rows if r["workload"] == w and r["mode"] == m]
        med[m] = (statistics.median(v), len(v)) if v else (None, 0)
    base = med["none"][0]
    if base is None and med["full"][0] is None:
        continue
    for m in MODES:
        full = med[FULL_OF[m]][0]
        v, n = med[m]
        if v is None:
            print(f"| {w} | {m} | – | 0 | – | – | – |")
            continue
        over = f"{(v - base) / base * 100:+.1f} %" if base else "–"
        if m in ("full", "ffull"):
            share = "100 %"
        elif m == "none" or not base or full is None or full <= base:
            share = "–"
        else:
            share = f"{(v - base) / (full - base) * 100:.0f} %"
        print(f"| {w} | {m} | {v:.3f} {unit} | {n} | {over} | {share} |{paired(w, m)}")
PY
}

# run_one ROUND WORKLOAD MODE: one pinned run; appends a raw line and prints it.
run_one() {
  local r=$1 w=$2 m=$3 n=${STEPS[$2]} tenth cmd=() kp=() line value first
  tenth=$((n / 10))
  first=$(((n - tenth) / 2))
  case $w in
    launch) cmd=("$WORK/launch_loop" --launches 300000 --copies 0 --steps "$n" --warmup-s 1) ;;
    torch)
      cmd=("$PYTHON" "$HERE/workloads/capture_steps.py" --workload tiny --steps "$n" --warmup-s 1)
      ;;
  esac
  if [[ $m == ffull || $m == fsched ]]; then
    kp=(env "CUDA_INJECTION64_PATH=${DIST:-}/lib/libkpfloor.so" "NVTX_INJECTION64_PATH=${DIST:-}/lib/libkpfloor.so"
      "KPFLOOR_KINDS=kernel,nvtx,cb_api,lazy_copy,driver_only")
    [[ $m == fsched ]] && kp+=("KPFLOOR_WINDOW=$first,$tenth" KPFLOOR_DETACH=1)
  elif [[ $m != none ]]; then
    kp=("${DIST:-}/bin/kptrace" run -o "$WORK/$w-$m.kptrace" --force --log quiet)
    case $m in
      nowin) kp+=(--capture-range kp_no_such_range) ;;
      range) kp+=(--capture-range step --capture-range-end "repeat:$tenth") ;;
      sched) kp+=(--capture-schedule "step:$first,0,$tenth,1") ;;
    esac
    kp+=(--)
  fi
  if [[ $FAKE == 1 ]]; then
    local base=5 add=0
    [[ $w == torch ]] && base=900
    case $m in full | ffull) add=4 ;; range | sched | fsched) add=0.4 ;; nowin) add=0 ;; esac
    [[ $w == torch ]] && add=$("$PYTHON" -c "print($add * 60)")
    line="{\"us_per_launch\": $base, \"us_per_step\": $base, \"fake_added\": $add}"
    value=$("$PYTHON" -c "import random; print($base + $add + random.uniform(-0.05, 0.05) * $base)")
  else
    line=$(timeout "$RUN_TIMEOUT_S" taskset -c "$CPUS" "${kp[@]}" "${cmd[@]}" 2>"$WORK/err" |
      grep '^{' | tail -n 1)
    value=$("$PYTHON" -c 'import json, sys
j = json.loads(sys.argv[1])
print(j["us_per_launch"] if sys.argv[2] == "launch" else j["us_per_step"])' "$line" "$w" \
      2>/dev/null)
  fi
  if [[ -z $value ]]; then
    echo "  round $r $w $m: no result ($(tail -n 1 "$WORK/err" 2>/dev/null))"
    return
  fi
  printf '{"round": %d, "workload": "%s", "mode": "%s", "value": %s}\n' "$r" "$w" "$m" "$value" \
    >>"$RAW"
  printf '  round %d %-6s %-5s %10.3f  (%d s)\n' "$r" "$w" "$m" "$value" $((SECONDS - START))
}

read -r -a modes <<<"${MODES:-none full nowin range sched ffull fsched}"
for ((r = 1; r <= ROUNDS; r++)); do
  for w in "${WORKLOAD_LIST[@]}"; do
    for ((k = 0; k < ${#modes[@]}; k++)); do
      if ((SECONDS - START >= BUDGET_S)); then
        echo "budget of ${BUDGET_S} s reached: stopping after $((r - 1)) full round(s)"
        table
        exit 0
      fi
      run_one "$r" "$w" "${modes[$(((k + r) % ${#modes[@]}))]}"
    done
  done
  echo "--- after round $r ($((SECONDS - START)) s)"
  table
done
