#!/usr/bin/env bash
# `kptrace diff` from the command line on the shipped examples: exit codes of
# --fail-on-regression, the formats, the two ways to give several traces per side, and usage
# errors. The statistics themselves are checked in tests/unit/diff_test.cc.
# usage: diff_cli_test.sh KPTRACE EXAMPLES_DIR WORK_DIR
set -u
k=$1 ex=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
a=$ex/pytorch_h200.kptrace b=$ex/pytorch_h200_metrics.kptrace
fail=0
expect() {  # expect RC DESCRIPTION CMD...
  local want=$1 what=$2; shift 2
  "$@" >"$work/out" 2>"$work/err"; local rc=$?
  if [ $rc != "$want" ]; then
    echo "FAIL: $what: exit $rc, expected $want: $(head -3 "$work/err")"
    fail=1
  fi
}
expect 0 "same trace, gate on" $k diff "$a" "$a" --fail-on-regression
grep -q "0 significant changes" "$work/out" || { echo "FAIL: same trace reported changes"; fail=1; }
# The metrics run replays kernels: its steps are much slower, a real regression.
expect 1 "metrics run vs plain run, gate on" $k diff "$a" "$b" --fail-on-regression
grep -q "significant slowdown" "$work/err" || { echo "FAIL: no slowdown message"; fail=1; }
grep -q "kp configuration differs: KP_METRICS" "$work/out" || { echo "FAIL: no config warning"; fail=1; }
expect 0 "no gate" $k diff "$a" "$b"
expect 0 "json" $k diff "$a" "$b" --format json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["any_regression"] and d["rows"]' \
  "$work/out" || { echo "FAIL: JSON output"; fail=1; }
grep -q "kp configuration differs" "$work/err" || { echo "FAIL: JSON mode must warn on stderr"; fail=1; }
expect 0 "csv" $k diff "$a" "$b" --format csv --threshold 10%
python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); assert r and "p_value" in r[0]' \
  "$work/out" || { echo "FAIL: CSV output"; fail=1; }
expect 0 "several per side" $k diff "$a" "$a" --vs "$a" "$a" --fail-on-regression
grep -q "is the same file as" "$work/err" || { echo "FAIL: a file named twice on one side must be read once, with a warning"; fail=1; }
expect 0 "one file named twice, json" $k diff "$a" "$a" --vs "$a" --format json
cp "$work/out" "$work/twice.json"
expect 0 "one file once, json" $k diff "$a" "$a" --format json
cmp -s "$work/out" "$work/twice.json" || { echo "FAIL: naming a file twice changed the comparison"; fail=1; }
expect 2 "bad threshold" $k diff "$a" "$b" --threshold lots
grep -q -- "--threshold needs a percentage" "$work/err" || { echo "FAIL: threshold message"; fail=1; }
expect 2 "one trace" $k diff "$a"
expect 2 "three traces without --vs" $k diff "$a" "$a" "$b"
expect 1 "missing file" $k diff "$a" "$work/missing.kptrace"
[ $fail = 0 ] && echo "PASS: kptrace diff command line"
exit $fail
