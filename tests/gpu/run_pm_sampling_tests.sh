#!/usr/bin/env bash
# run_pm_sampling_tests.sh DIST: the GPU tests of PM sampling (KP_PM_SAMPLING, issue 12).
#
#   fidelity   tests/gpu/programs/pm_sampling.cu under KP_PM_SAMPLING=gpu (100 us): a
#              memory-bound Copy kernel of >= 50 ms whose samples must show dram read + write
#              within 5 % of its known bytes / duration (check_pm_sampling.py), an idle gap of
#              40 ms with SM active < 1 %, an FMA kernel with SM active > 90 %, every sample
#              inside the trace span and the samples aligned with the kernels (best shift within
#              two intervals of 0); the Perfetto, Chrome and CSV exports carry the counters, and
#              the summary has the per-range table (copy, idle, fma)
#              and at most 1 % of the samples lost (Stats.pm_samples_dropped, kptrace info)
#   too_fast   KP_PM_INTERVAL_US=20, below the 100 us minimum (decoding cannot keep up): one
#              line names the range, PM sampling is off, the program and its trace are unharmed
#   two_procs  two copies of the program at once on one GPU: one samples, the other says in one
#              line that another process samples the GPU; both exit 0 with their traces
#   reset      the program ending with cudaDeviceReset: the sampling ends at the context's
#              destruction (Stop, last decode, Disable inside the callback); exit 0, the trace
#              finished, the copy's samples in it
#   metrics    KP_METRICS with KP_PM_SAMPLING: refused at start in one line, tracing and the
#              range profiler go on
#   bad_name   KP_PM_SAMPLING with an unknown counter: one line naming it with a close valid
#              name, tracing goes on
#   pytorch    tests/gpu/pytorch_train.py under KP_PM_SAMPLING=gpu: counter tracks and the
#              summary's per-range averages for step/forward/backward/optimizer
# Logs to $OUT/pm_sampling_tests.log with PASS/FAIL lines and "N passed, M failed"; the traces go
# to $OUT/pm_sampling_traces.tar.gz. Without a usable GPU: "SKIP: no GPU (<reason>)", exit 0.
# Environment: OUT, NVCC, PYTHON.
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/kp-pm-tests.XXXXXX)}
mkdir -p "$OUT"
LOG="$OUT/pm_sampling_tests.log"
PYTHON=${PYTHON:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

main() {
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "SKIP: no GPU (nvidia-smi lists none)"
    return 0
  fi
  DIST=$(cd "${1:?usage: run_pm_sampling_tests.sh DIST}" && pwd) || return 2
  KPTRACE="$DIST/bin/kptrace"
  T=$(mktemp -d /tmp/kp-pm-traces.XXXXXX)
  passed=0
  failed=0
  echo "kp PM sampling GPU tests, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
  if ! "$NVCC" -arch=sm_90 -O2 -o "$T/pm_sampling" "$REPO/tests/gpu/programs/pm_sampling.cu" -ldl \
    >"$T/build.log" 2>&1; then
    fail build "$(tail -n 5 "$T/build.log")"
    summary
    return 1
  fi

  fidelity fidelity 100
  too_fast
  two_procs
  device_reset
  with_metrics
  bad_name
  pytorch

  tar -C "$T" -czf "$OUT/pm_sampling_traces.tar.gz" --exclude='*_csv' --exclude=pm_sampling . \
    2>/dev/null
  summary
  [[ $failed -eq 0 ]]
}

pass() { echo "PASS [$1] ${2:-}"; passed=$((passed + 1)); }
fail() { echo "FAIL [$1] ${2:-}"; failed=$((failed + 1)); }
summary() { echo; echo "$passed passed, $failed failed"; }

# kp NAME ENV... -- CMD...: CMD under kptrace run (90 s limit) with ENV added; output in $T/NAME.*
kp() {
  local name=$1 envs=()
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  echo
  echo "=== $name: ${envs[*]} kptrace run -- $*"
  (cd "$T" && env "${envs[@]}" PYTHONUNBUFFERED=1 timeout 90 "$KPTRACE" run -o "$T/$name.kptrace" -- \
    "$@" >"$T/$name.out" 2>"$T/$name.err")
  local rc=$?
  sed 's/^/    out: /' "$T/$name.out" | grep -v '^    out: expect' | tail -n 5
  grep -i 'kp' "$T/$name.err" | tail -n 12 | sed 's/^/    err: /'
  return $rc
}

convert_all() {
  local name=$1
  "$KPTRACE" convert "$T/$name.kptrace" --to csv -o "$T/${name}_csv" --no-progress \
    >"$T/$name.csv.log" 2>&1 &&
    "$KPTRACE" convert "$T/$name.kptrace" --to perfetto -o "$T/$name.perfetto-trace" \
      --no-progress >"$T/$name.pf.log" 2>&1 &&
    "$KPTRACE" convert "$T/$name.kptrace" --to chrome -o "$T/$name.json" --no-progress \
      >"$T/$name.chrome.log" 2>&1 &&
    "$KPTRACE" summary "$T/$name.kptrace" >"$T/$name.summary.txt" 2>&1
}

count_checks() {
  local line
  while IFS= read -r line; do
    case "$line" in
      "PASS ["*) passed=$((passed + 1)); echo "$line" ;;
      "FAIL ["*) failed=$((failed + 1)); echo "$line" ;;
      *) echo "    $line" ;;
    esac
  done < <("$@" 2>&1)
}

fidelity() {
  local name=$1 us=$2
  if ! kp "$name" KP_PM_SAMPLING=gpu KP_PM_INTERVAL_US="$us" KP_LOG=debug -- "$T/pm_sampling"; then
    fail "$name/run" "exit status not 0"
    return
  fi
  pass "$name/run" "exit status 0"
  grep -h 'pm sampling' "$T/$name.err" | sed 's/^/    /'
  if ! convert_all "$name"; then
    fail "$name/convert" "$(cat "$T/$name".*.log | tail -n 3)"
    return
  fi
  count_checks "$PYTHON" "$REPO/tests/gpu/check_pm_sampling.py" "$T/${name}_csv" "$T/$name.out"
  local info samples dropped
  info=$("$KPTRACE" info "$T/$name.kptrace" 2>&1)
  samples=$(awk '$1 == "pm_samples" {print $2}' <<<"$info")
  dropped=$(awk '$1 == "pm_samples_dropped" {print $2}' <<<"$info")
  samples=${samples:-0} dropped=${dropped:-0}
  [[ $samples -gt 0 && $((dropped * 100)) -le $samples ]] &&
    pass "$name/losses" "$dropped of $samples samples lost (limit 1 %)" ||
    fail "$name/losses" "$dropped of $samples samples lost (limit 1 %)"
  local c
  c=$(grep -o '"ph":"C","name":"GPU 0 dram__bytes_read.sum.per_second"' "$T/$name.json" | wc -l)
  [[ $c -gt 10 ]] && pass "$name/chrome" "$c counter events for GPU 0 dram__bytes_read.sum.per_second" ||
    fail "$name/chrome" "$c counter events for dram__bytes_read.sum.per_second"
  if grep -q 'sm__cycles_active.avg.pct_of_peak_sustained_elapsed' "$T/$name.perfetto-trace"; then
    pass "$name/perfetto" "counter track names in the Perfetto trace"
  else
    fail "$name/perfetto" "no PM counter track in the Perfetto trace"
  fi
  echo "--- summary: PM sampling"
  sed -n '/^PM samples/,/^$/p' "$T/$name.summary.txt" | head -n 40 | sed 's/^/    /'
  if grep -A 30 '^PM samples' "$T/$name.summary.txt" | grep -q '^ *copy'; then
    pass "$name/summary" "per-range PM table lists range copy"
  else
    fail "$name/summary" "no per-range PM table with range copy"
  fi
}

two_procs() {
  echo
  echo "=== two_procs: two pm_sampling processes on one GPU at once"
  (cd "$T" && KP_PM_SAMPLING=gpu KP_LOG=debug timeout 90 "$KPTRACE" run -o "$T/proc_a.kptrace" -- \
    "$T/pm_sampling" --pause-ms 3000 >"$T/proc_a.out" 2>"$T/proc_a.err") &
  local a=$!
  sleep 0.5
  (cd "$T" && KP_PM_SAMPLING=gpu KP_LOG=debug timeout 90 "$KPTRACE" run -o "$T/proc_b.kptrace" -- \
    "$T/pm_sampling" --pause-ms 1000 >"$T/proc_b.out" 2>"$T/proc_b.err")
  local rb=$?
  wait $a
  local ra=$?
  grep -h 'pm sampling' "$T/proc_a.err" "$T/proc_b.err" | sed 's/^/    /'
  [[ $ra -eq 0 && $rb -eq 0 ]] && pass two_procs/exit "both exit 0" ||
    fail two_procs/exit "exit statuses $ra and $rb"
  local lines=0 samplers=0 n
  for p in proc_a proc_b; do
    n=$(grep -c 'another process (or profiler) is sampling this GPU' "$T/$p.err")
    lines=$((lines + n))
    "$KPTRACE" convert "$T/$p.kptrace" --to csv -o "$T/${p}_csv" --no-progress >/dev/null 2>&1
    n=$(($(wc -l <"$T/${p}_csv/pm_samples.csv") - 1))
    echo "    $p: $n samples"
    [[ $n -gt 0 ]] && samplers=$((samplers + 1))
  done
  [[ $lines -eq 1 && $samplers -eq 1 ]] &&
    pass two_procs/one_sampler "one process samples, the other says so in one line" ||
    fail two_procs/one_sampler "$samplers processes sampled, $lines 'another process' lines"
}

device_reset() {
  kp reset KP_PM_SAMPLING=gpu KP_PM_INTERVAL_US=100 KP_LOG=debug -- "$T/pm_sampling" --reps 20 \
    --pause-ms 1500 --reset 1
  local rc=$?
  "$KPTRACE" convert "$T/reset.kptrace" --to csv -o "$T/reset_csv" --no-progress >/dev/null 2>&1
  local samples wrote
  samples=$(($(wc -l <"$T/reset_csv/pm_samples.csv") - 1))
  wrote=$(grep -c "kp: wrote $T/reset.kptrace" "$T/reset.err")
  [[ $rc -eq 0 && $wrote -eq 1 && $samples -gt 10 ]] &&
    pass reset "exit 0, trace finished, $samples samples after cudaDeviceReset" ||
    fail reset "exit $rc, $wrote 'wrote' lines, $samples samples"
}

with_metrics() {
  kp metrics KP_PM_SAMPLING=gpu KP_METRICS=dram__bytes_read.sum KP_METRICS_SKIP=0 -- \
    "$T/pm_sampling" --pause-ms 500
  local rc=$?
  "$KPTRACE" convert "$T/metrics.kptrace" --to csv -o "$T/metrics_csv" --no-progress >/dev/null 2>&1
  local samples ranges
  samples=$(($(wc -l <"$T/metrics_csv/pm_samples.csv") - 1))
  ranges=$(($(wc -l <"$T/metrics_csv/metrics.csv") - 1))
  echo "    $samples PM samples, $ranges metric ranges"
  local lines
  lines=$(grep -c 'KP_PM_SAMPLING and KP_METRICS' "$T/metrics.err")
  [[ $rc -eq 0 && $lines -eq 1 && $samples -eq 0 && $ranges -gt 0 ]] &&
    pass metrics/refused "one line refuses the combination; metrics measured $ranges ranges" ||
    fail metrics/refused "exit $rc, $lines refusal lines, $samples samples, $ranges metric ranges"
}

too_fast() {
  kp too_fast KP_PM_SAMPLING=gpu KP_PM_INTERVAL_US=20 -- "$T/pm_sampling" --pause-ms 500 --reps 5
  local rc=$? line kernels samples
  line=$(grep -c 'KP_PM_INTERVAL_US="20".*from 100 to 1000000.*PM sampling is off' "$T/too_fast.err")
  "$KPTRACE" convert "$T/too_fast.kptrace" --to csv -o "$T/too_fast_csv" --no-progress >/dev/null 2>&1
  kernels=$(($(wc -l <"$T/too_fast_csv/kernels.csv") - 1))
  samples=$(($(wc -l <"$T/too_fast_csv/pm_samples.csv") - 1))
  [[ $rc -eq 0 && $line -eq 1 && $kernels -gt 0 && $samples -eq 0 ]] &&
    pass too_fast "one line refuses 20 us and names the range; $kernels kernels traced, no samples" ||
    fail too_fast "exit $rc, $line matching lines, $kernels kernels, $samples samples"
}

bad_name() {
  kp bad_name KP_PM_SAMPLING=dram__bytes_red.sum -- "$T/pm_sampling" --pause-ms 500 --reps 5
  local rc=$?
  local line
  line=$(grep -c "unknown metric 'dram__bytes_red.sum'.*did you mean 'dram__bytes_read.sum'" \
    "$T/bad_name.err")
  local kernels
  "$KPTRACE" convert "$T/bad_name.kptrace" --to csv -o "$T/bad_name_csv" --no-progress >/dev/null 2>&1
  kernels=$(($(wc -l <"$T/bad_name_csv/kernels.csv") - 1))
  [[ $rc -eq 0 && $line -eq 1 && $kernels -gt 0 ]] &&
    pass bad_name "one line names the bad counter and a close valid one; $kernels kernels traced" ||
    fail bad_name "exit $rc, $line matching lines, $kernels kernels"
}

pytorch() {
  if ! kp pytorch KP_PM_SAMPLING=gpu -- "$PYTHON" "$REPO/tests/gpu/pytorch_train.py" --steps 200; then
    fail pytorch/run "exit status not 0"
    return
  fi
  pass pytorch/run "exit status 0"
  if ! convert_all pytorch; then
    fail pytorch/convert "$(cat "$T"/pytorch.*.log | tail -n 3)"
    return
  fi
  local n
  n=$(($(wc -l <"$T/pytorch_csv/pm_samples.csv") - 1))
  [[ $n -gt 100 ]] && pass pytorch/samples "$n PM samples" || fail pytorch/samples "$n PM samples"
  echo "--- summary: PM sampling"
  sed -n '/^PM samples/,/^$/p' "$T/pytorch.summary.txt" | head -n 40 | sed 's/^/    /'
  local phases=0 r
  for r in step forward backward optimizer; do
    grep -A 40 '^PM samples' "$T/pytorch.summary.txt" | grep -q "^ *$r " && phases=$((phases + 1))
  done
  [[ $phases -eq 4 ]] && pass pytorch/summary "per-range PM averages for step, forward, backward, optimizer" ||
    fail pytorch/summary "$phases of 4 ranges in the PM table"
}

main "$@" 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
