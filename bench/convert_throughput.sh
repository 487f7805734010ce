#!/usr/bin/env bash
# convert_throughput.sh: `kptrace convert` throughput on one core (issue 3, point 4).
# Generates an N-record trace with kp_gen_trace (the injector's own encoder), converts it to
# Perfetto, CSV and Chrome JSON pinned to one core (taskset -c 0), and prints a Markdown table:
# wall time, records/s, CPU (user) time and peak RSS from /usr/bin/time. Perfetto and Chrome are
# also converted to /dev/null, which separates the converter's own cost from the page-cache and
# disk cost of writing several GB.
# usage: bench/convert_throughput.sh [BUILD_DIR] [RECORDS] [WORK_DIR]
set -euo pipefail
build=${1:-build-perf}
records=${2:-20000000}
work=${3:-$(mktemp -d /tmp/kp_convert_bench.XXXXXX)}
kptrace=$build/tools/kptrace
gen=$build/bench/kp_gen_trace
for tool in "$kptrace" "$gen" /usr/bin/time taskset; do
  if [[ ! -x $tool ]] && ! command -v "$tool" >/dev/null; then
    echo "convert_throughput: missing $tool (build kptrace and kp_gen_trace; apt-get install time)" >&2
    exit 1
  fi
done
mkdir -p "$work"
trace=$work/trace_${records}.kptrace
[[ -f $trace ]] || "$gen" --records "$records" -o "$trace" >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), 1 core (taskset -c 0)"
echo "trace: $records records, $(stat -L -c %s "$trace") bytes"
echo
echo "| format | output | wall s | records/s | user s | sys s | user-only records/s | peak RSS MiB | output bytes |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
run() {  # format output-path
  local fmt=$1 out=$2 tf=$work/time.txt
  rm -rf "$out"
  /usr/bin/time -f "%e %U %S %M" -o "$tf" taskset -c 0 "$kptrace" convert "$trace" --to "$fmt" \
    -o "$out" --no-progress 2>/dev/null
  read -r wall user sys rss <"$tf"
  local bytes
  if [[ $out == /dev/null ]]; then bytes="-"; else bytes=$(du -sb "$out" | cut -f1); fi
  awk -v f="$fmt" -v o="$out" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v n="$records" \
    -v b="$bytes" 'BEGIN { printf "| %s | %s | %.2f | %.2fM | %.2f | %.2f | %.2fM | %.0f | %s |\n",
    f, o == "/dev/null" ? "/dev/null" : "file", w, n / w / 1e6, u, s, n / u / 1e6, r / 1024, b }'
  [[ $out == /dev/null ]] || rm -rf "$out"
}
run perfetto "$work/out.perfetto-trace"
run perfetto /dev/null
run csv "$work/out_csv/"
run chrome "$work/out.json"
run chrome /dev/null
