#!/usr/bin/env bash
# pc_sampling_cost.sh DIST: what KP_PC_SAMPLING=stall costs on top of kp's tracing.
#
# Workloads:
#   tiny   tests/gpu/programs/pc_stalls.cu --tiny K: K launches of a one-block kernel, each
#          followed by cudaDeviceSynchronize; the program prints its own mean time per launch
#          (process start and CUDA init stay out of it);
#   train  bench/workloads/torch_suite.py: PyTorch's launch-bound tiny-op loop (us per
#          iteration of 5 ops) and a transformer training step (median ms per step).
# Configurations, interleaved in every round, ROUNDS rounds (default 5), medians, all runs
# pinned to the same CPUs (taskset -c 0-7) so the comparison does not move between sockets:
#   trace   kp tracing (the default activities)
#   pc      kp tracing + KP_PC_SAMPLING=stall at the default period
#   pcN     the same at KP_PC_SAMPLING_PERIOD=N for each N in PERIODS (default "10 20")
# Writes $OUT/pc_sampling_cost.md (else bench/results/pc_sampling_h200.md) and the raw lines to
# $OUT/pc_sampling_cost_raw.txt. Without a GPU: SKIP, exit 0.
# Environment: OUT, NVCC, PYTHON, ROUNDS, K (tiny launches, default 5000), PERIODS, CPUS.
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${ROUNDS:-5}
K=${K:-5000}
PERIODS=${PERIODS:-"10 20"}
CPUS=${CPUS:-0-7}
PYTHON=${PYTHON:-python3}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: no GPU (nvidia-smi missing or lists none)"
  exit 0
fi
[[ $# -ge 1 ]] || { echo "usage: pc_sampling_cost.sh DIST" >&2; exit 2; }
DIST=$(cd "$1" && pwd) || exit 1
KPTRACE="$DIST/bin/kptrace"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
WORK=$(mktemp -d /tmp/kp-pc-cost.XXXXXX)
RESULT=${OUT:+$OUT/pc_sampling_cost.md}
RESULT=${RESULT:-$REPO/bench/results/pc_sampling_h200.md}
RAW=${OUT:+$OUT/pc_sampling_cost_raw.txt}
RAW=${RAW:-$WORK/raw.txt}
"$NVCC" -O2 -arch=sm_90 -o "$WORK/pc_stalls" "$REPO/tests/gpu/programs/pc_stalls.cu" || exit 1

configs="trace pc"
for p in $PERIODS; do configs="$configs pc$p"; done
env_of() {
  case "$1" in
    trace) echo "KP_PC_SAMPLING=off" ;;
    pc) echo "KP_PC_SAMPLING=stall" ;;
    pc*) echo "KP_PC_SAMPLING=stall KP_PC_SAMPLING_PERIOD=${1#pc}" ;;
  esac
}
: >"$RAW"
for round in $(seq 1 "$ROUNDS"); do
  for c in $configs; do
    # shellcheck disable=SC2046
    t=$(env $(env_of "$c") taskset -c "$CPUS" "$KPTRACE" run --force -o "$WORK/tiny.kptrace" -- \
      "$WORK/pc_stalls" --tiny "$K" 2>/dev/null | awk '/^tiny_us_per_launch/ {print $2}')
    echo "tiny $c $round ${t:-nan}" >>"$RAW"
    # shellcheck disable=SC2046
    env $(env_of "$c") taskset -c "$CPUS" "$KPTRACE" run --force -o "$WORK/train.kptrace" -- \
      "$PYTHON" "$REPO/bench/workloads/torch_suite.py" --steps 10 2>/dev/null |
      "$PYTHON" -c '
import json, sys
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if d.get("workload") == "tiny_ops":
        print("torch_tiny_ops '"$c $round"'", d["us_per_iter"])
    if d.get("workload") == "transformer":
        print("train_step '"$c $round"'", d["step_ms"])
' >>"$RAW"
  done
done

"$PYTHON" - "$RAW" "$RESULT" "$ROUNDS" "$K" "$configs" <<'PY'
import statistics, sys
raw, result, rounds, k, configs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split()
vals = {}
for line in open(raw):
    w, c, r, v = line.split()
    if v != "nan":
        vals.setdefault((w, c), []).append(float(v))
units = {"tiny": "us per launch+sync", "torch_tiny_ops": "us per iteration (5 ops)", "train_step": "ms per step"}
out = ["# KP_PC_SAMPLING cost", "",
       "bench/pc_sampling_cost.sh: %s interleaved rounds, medians; tiny = %s launches; all runs "
       "pinned (taskset). `trace` = kp tracing alone, `pc` = + KP_PC_SAMPLING=stall (default "
       "period), `pcN` = period 2^N cycles." % (rounds, k), "",
       "| workload | unit | " + " | ".join(configs) + " |", "|---|---|" + "---|" * len(configs)]
for w in ("tiny", "torch_tiny_ops", "train_step"):
    base = vals.get((w, "trace"))
    row = ["%s" % w, units[w]]
    for c in configs:
        v = vals.get((w, c))
        if not v:
            row.append("n/a")
            continue
        m = statistics.median(v)
        if base and c != "trace":
            row.append("%.4g (%+.1f %%)" % (m, 100 * (m / statistics.median(base) - 1)))
        else:
            row.append("%.4g" % m)
    out.append("| " + " | ".join(row) + " |")
open(result, "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
