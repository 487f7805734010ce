#!/usr/bin/env bash
# run_all.sh DIST [SUITE[:SECONDS] ...]: runs kp's GPU suites one after another from the installed
# prefix DIST, each under its own time limit, so that one bounded session on a GPU machine runs
# them all and a suite that hangs costs only its own slot.
#
#   bash tests/gpu/run_all.sh DIST                       # every suite, default limits
#   bash tests/gpu/run_all.sh DIST pm:60 capture pc      # these suites; pm limited to 60 s
#   BUDGET_S=540 bash tests/gpu/run_all.sh DIST          # stop starting suites after 540 s
#
# Suites (default limit in seconds): gpu (90) run_gpu_tests.sh, capture (100) run_capture_tests.sh,
# pc (80) run_pc_sampling_tests.sh, pm (80) run_pm_sampling_tests.sh, ptree (150)
# run_process_tree_tests.sh, metrics (300) run_metrics_tests.sh. A suite is not started when its
# limit no longer fits in what is left of BUDGET_S (default: no budget).
#
# Each suite logs to $OUT/<its log> as when run alone; this script adds $OUT/run_all.log with one
# line per suite: its exit status, wall time and its own last "N passed, M failed" line. Exits 1
# if any suite failed, timed out or was not started, else 0. Without a GPU every suite prints its
# SKIP line and exits 0.
set -u -o pipefail

if [ $# -lt 1 ]; then
  echo "usage: run_all.sh DIST [SUITE[:SECONDS] ...]" >&2
  exit 2
fi
DIST=$(cd "$1" && pwd) || { echo "run_all.sh: no install prefix at $1" >&2; exit 2; }
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OUT=${OUT:-$(mktemp -d /tmp/kp-gpu-all.XXXXXX)}
mkdir -p "$OUT"
SUMMARY="$OUT/run_all.log"
BUDGET_S=${BUDGET_S:-0}

declare -A script=([gpu]=run_gpu_tests.sh [capture]=run_capture_tests.sh
  [pc]=run_pc_sampling_tests.sh [pm]=run_pm_sampling_tests.sh
  [ptree]=run_process_tree_tests.sh [metrics]=run_metrics_tests.sh)
declare -A limit=([gpu]=90 [capture]=100 [pc]=80 [pm]=80 [ptree]=150 [metrics]=300)
order=(gpu capture pc pm ptree metrics)

[ $# -gt 0 ] || set -- "${order[@]}"
bad=0
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
started=$SECONDS
for arg in "$@"; do
  name=${arg%%:*}
  if [ -z "${script[$name]+set}" ]; then
    echo "run_all.sh: unknown suite '$name' (known: ${order[*]})" >&2
    exit 2
  fi
  secs=${limit[$name]}
  [ "$arg" = "$name" ] || secs=${arg#*:}
  if [ "$BUDGET_S" -gt 0 ] && [ $((SECONDS - started + secs)) -gt "$BUDGET_S" ]; then
    note "NOT RUN  $name: its ${secs} s limit does not fit in what is left of BUDGET_S=$BUDGET_S"
    bad=1
    continue
  fi
  t0=$SECONDS
  # The suite's own output goes to its log; keep a copy of the console too.
  timeout --kill-after=10 "$secs" bash "$HERE/${script[$name]}" "$DIST" >"$OUT/$name.console" 2>&1
  rc=$?
  last=$(grep -E '[0-9]+ passed' "$OUT/$name.console" | tail -1)
  [ -n "$last" ] || last=$(grep -E '^SKIP' "$OUT/$name.console" | tail -1)
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    note "TIMEOUT  $name after $((SECONDS - t0)) s (limit $secs s): ${last:-no result line}"
    bad=1
  elif [ $rc -ne 0 ]; then
    note "FAILED   $name rc=$rc in $((SECONDS - t0)) s: ${last:-no result line}"
    bad=1
  else
    note "OK       $name in $((SECONDS - t0)) s: ${last:-no result line}"
  fi
done
note "total $((SECONDS - started)) s; logs in $OUT"
exit $bad
