#!/usr/bin/env bash
# capture_window_cost.sh DIST [ROUNDS]: what a capture window over 10 % of the steps costs,
# against a full trace and no tool (issue 17). Two workloads (bench/workloads/capture_steps.py):
# the launch-bound tiny-op loop and a small training step, each step an NVTX range "step".
# Modes, interleaved in a rotating order each round and pinned to the same CPUs:
#   none    python alone
#   full    kptrace run (default activities, whole run)
#   window  kptrace run --capture-schedule step:W,0,N/10,1 (a window over the middle 10 %)
#   range   kptrace run --capture-range step --capture-range-end repeat:N/10 (the first 10 %)
# Prints a Markdown table of medians: time per step, overhead over `none`, and the window's
# overhead as a share of the full trace's. Writes $OUT/capture_window_cost.md and the raw lines.
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIST=$(cd "${1:?usage: capture_window_cost.sh DIST [ROUNDS]}" && pwd)
ROUNDS=${2:-5}
OUT=${OUT:-$(mktemp -d /tmp/kp-capture-cost.XXXXXX)}
PYTHON=${PYTHON:-python3}
CPUS=${KP_BENCH_CPUS:-2-5}
RAW="$OUT/capture_window_cost_raw.jsonl"
: > "$RAW"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: capture_window_cost needs an NVIDIA GPU"
  exit 0
fi
WORK=$(mktemp -d /tmp/kp-capture-cost-work.XXXXXX)
declare -A STEPS=([tiny]=400 [train]=300)
modes=(none full window range)
for ((r = 0; r < ROUNDS; r++)); do
  for w in tiny train; do
    n=${STEPS[$w]}
    tenth=$((n / 10))
    for ((k = 0; k < ${#modes[@]}; k++)); do
      m=${modes[$(((k + r) % ${#modes[@]}))]}
      cmd=("$PYTHON" "$HERE/workloads/capture_steps.py" --workload "$w" --steps "$n")
      case $m in
        none) run=(taskset -c "$CPUS" "${cmd[@]}") ;;
        full) run=(taskset -c "$CPUS" "$DIST/bin/kptrace" run -o "$WORK/$w-full.kptrace" --force --log quiet -- "${cmd[@]}") ;;
        window) run=(taskset -c "$CPUS" "$DIST/bin/kptrace" run -o "$WORK/$w-window.kptrace" --force --log quiet
                     --capture-schedule "step:$(((n - tenth) / 2)),0,$tenth,1" -- "${cmd[@]}") ;;
        range) run=(taskset -c "$CPUS" "$DIST/bin/kptrace" run -o "$WORK/$w-range.kptrace" --force --log quiet
                    --capture-range step --capture-range-end "repeat:$tenth" -- "${cmd[@]}") ;;
      esac
      line=$("${run[@]}" 2>/dev/null | grep '^{' | tail -1)
      if [[ -z "$line" ]]; then
        echo "round $r $w $m: no result" >&2
        continue
      fi
      echo "{\"round\": $r, \"mode\": \"$m\", \"result\": $line}" >> "$RAW"
    done
  done
done
"$PYTHON" - "$RAW" "$ROUNDS" "$CPUS" <<'PY' | tee "$OUT/capture_window_cost.md"
import json, statistics, sys
raw, rounds, cpus = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(raw) if l.strip()]
med = {}
for w in ("tiny", "train"):
    for m in ("none", "full", "window", "range"):
        v = [r["result"]["us_per_step"] for r in rows if r["mode"] == m and r["result"]["workload"] == w]
        med[w, m] = (statistics.median(v), len(v)) if v else (None, 0)
print(f"Medians of {rounds} interleaved rounds, pinned to CPUs {cpus}; time per step of the timed loop.\n")
print("| workload | mode | us/step | runs | overhead vs none | share of full-trace overhead |")
print("|---|---|---|---|---|---|")
for w in ("tiny", "train"):
    base = med[w, "none"][0]
    full = med[w, "full"][0]
    for m in ("none", "full", "window", "range"):
        v, n = med[w, m]
        if v is None:
            print(f"| {w} | {m} | – | 0 | – | – |")
            continue
        over = (v - base) / base * 100 if base else float("nan")
        share = (v - base) / (full - base) * 100 if base and full and full > base else float("nan")
        print(f"| {w} | {m} | {v:.1f} | {n} | {over:+.1f} % | {share:.0f} % |" if m not in ("none", "full")
              else f"| {w} | {m} | {v:.1f} | {n} | {over:+.1f} % | {'100 %' if m == 'full' else '–'} |")
PY
