#!/usr/bin/env bash
# convert_throughput.sh: `kptrace convert` and `kptrace summary` throughput per core (issue 10,
# point 4), measured in CPU time, not wall time (the machine may be busy with other work).
# Generates an N-record trace with kp_gen_trace (the injector's own encoder; mix below), then runs
# `convert --to perfetto|csv|chrome` (to a file in WORK_DIR) and `summary`, ROUNDS times each,
# interleaved, and prints a Markdown table per binary: median CPU seconds (user + sys, from
# GNU time), records per CPU second ("per core": the converter is single-threaded), the
# median user and sys seconds, the largest peak RSS, the output size.
# With BEFORE=path/to/other/kptrace the same runs are made with that binary too, interleaved
# with the first, for a before/after comparison under the same load.
#
# Trace mix (bench/gen_trace.cc): 45 % kernels (~200 long templated names), 35 % CUDA API calls
# linked to their GPU work by correlation id, 5 % memcpy, 2 % memset, 10 % nested NVTX ranges,
# 3 % synchronizations; 2 devices, 4 streams, 3 threads; zstd level 3.
#
# With FLOOR=1, also the floor: the reader alone, the formats to /dev/null, and dd writing
# as many bytes as each output (see the end of this script); FLOOR=only measures just the floor
# (no conversion rounds, no tables), taking the output sizes from an earlier run's
# WORK_DIR/times.txt.
#
# FORMATS: which commands, a space-separated subset of "perfetto csv chrome summary" (default all).
# TIME_BIN: GNU time, a path or a command name (default /usr/bin/time).
# KP_BENCH_CPU: the CPU every timed command is pinned to (taskset -c; default the last CPU the
# script may run on), so that no run is moved between cores or sockets mid-way.
# usage: [BEFORE=kptrace] [FLOOR=1] [FORMATS="..."] [TIME_BIN=time] bench/convert_throughput.sh [BUILD_DIR] [RECORDS] [WORK_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
records=${2:-20000000}
work=${3:-$(mktemp -d /tmp/kp_convert_bench.XXXXXX)}
rounds=${4:-4}
kptrace=$build/tools/kptrace
gen=$build/bench/kp_gen_trace
time_bin=$(type -P "${TIME_BIN:-/usr/bin/time}" || true)  # GNU time: the program, not bash's keyword
time_bin=${time_bin:-${TIME_BIN:-/usr/bin/time}}
for tool in "$kptrace" "$gen" "$time_bin"; do
  if [[ ! -x $tool ]]; then
    echo "convert_throughput: missing $tool (build kptrace and kp_gen_trace; apt-get install time)" >&2
    exit 1
  fi
done
# The last CPU this script may run on (its affinity list, e.g. "0-15" or "8-11,14"), not nproc-1:
# under a cpuset the two differ.
last_cpu=$(awk '/^Cpus_allowed_list/ { n = split($2, a, ","); m = split(a[n], b, "-"); print b[m] }' \
  /proc/self/status 2>/dev/null || true)
cpu=${KP_BENCH_CPU:-${last_cpu:-0}}
pin=()
if command -v taskset >/dev/null; then
  pin=(taskset -c "$cpu")
else
  echo "convert_throughput: taskset not found: runs are not pinned" >&2
fi
binaries=("$kptrace")
if [[ -n ${BEFORE:-} ]]; then
  [[ -x $BEFORE ]] || { echo "convert_throughput: BEFORE=$BEFORE is not an executable" >&2; exit 1; }
  binaries=("$BEFORE" "$kptrace")
fi
mkdir -p "$work"
trace=$work/trace_${records}.kptrace
[[ -f $trace ]] || "$gen" --records "$records" -o "$trace" >/dev/null
read -r -a formats <<<"${FORMATS:-perfetto csv chrome summary}"
log=$work/times.txt
if [[ ${FLOOR:-} != only ]]; then
  : >"$log"
  for ((r = 1; r <= rounds; ++r)); do
    # Odd rounds run the binaries in order, even rounds in reverse: the sys time of a write
    # depends on the run just before it (the page cache it left), which must not favour one.
    # (An even ROUNDS gives each order the same number of rounds.)
    order=()
    for ((i = 0; i < ${#binaries[@]}; ++i)); do
      if ((r % 2 == 0)); then order=("$i" "${order[@]}"); else order+=("$i"); fi
    done
    for f in "${formats[@]}"; do
      for b in "${order[@]}"; do
        out=$work/out_$f
        rm -rf "$out" "$out".*
        tf=$work/time.txt
        if [[ $f == summary ]]; then
          ${pin[@]+"${pin[@]}"} "$time_bin" -f "%U %S %M" -o "$tf" "${binaries[$b]}" summary "$trace" >"$out" 2>/dev/null
        else
          [[ $f == csv ]] && out=$out/
          ${pin[@]+"${pin[@]}"} "$time_bin" -f "%U %S %M" -o "$tf" "${binaries[$b]}" convert "$trace" --to "$f" \
            -o "$out" --no-progress 2>/dev/null
        fi
        echo "$b $f $(cat "$tf") $(du -sb "$work/out_$f" | cut -f1)" >>"$log"
        rm -rf "$work/out_$f"
      done
    done
  done
  thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true)
  echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, transparent huge pages: ${thp:-unknown}; CPU time of one process${pin[*]:+, pinned to CPU $cpu}"
  echo "trace: $records records, $(stat -L -c %s "$trace") bytes; medians of $rounds rounds"
  for b in "${!binaries[@]}"; do
    echo
    echo "${binaries[$b]}:"
    echo
    echo "| command | CPU s (user+sys) | records/s per core | user s | sys s | peak RSS MiB | output bytes |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for f in "${formats[@]}"; do
      awk -v b="$b" -v f="$f" -v n="$records" '
        $1 == b && $2 == f { cpu[++k] = $3 + $4; u[k] = $3; s[k] = $4; if ($5 > rss) rss = $5; bytes = $6 }
        function median(a, m,   i, j, t) {
          for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
          return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        }
        END {
          c = median(cpu, k); mu = median(u, k); ms = median(s, k)
          printf "| %s | %.2f | %.2fM | %.2f | %.2f | %.0f | %s |\n", f == "summary" ? "summary" : "convert --to " f,
            c, n / c / 1e6, mu, ms, rss / 1024, bytes
        }' "$log"
    done
  done
fi
# FLOOR=1: where the floor is, for the last binary: the reader alone (`info`: read, decompress,
# decode, no output), each timeline format written to /dev/null (no file copy), and the kernel's
# cost of writing as many bytes as each format's file (dd from /dev/zero: no format work at all).
if [[ -n ${FLOOR:-} ]]; then
  last=$((${#binaries[@]} - 1))
  floor=$work/floor.txt
  : >"$floor"
  tf=$work/time.txt
  for ((r = 1; r <= rounds; ++r)); do
    ${pin[@]+"${pin[@]}"} "$time_bin" -f "%U %S %M" -o "$tf" "${binaries[$last]}" info "$trace" >/dev/null 2>&1
    echo "info $(cat "$tf")" >>"$floor"
    for f in perfetto chrome; do
      ${pin[@]+"${pin[@]}"} "$time_bin" -f "%U %S %M" -o "$tf" "${binaries[$last]}" convert "$trace" --to "$f" \
        -o /dev/null --no-progress >/dev/null 2>&1
      echo "devnull_$f $(cat "$tf")" >>"$floor"
    done
    for f in perfetto csv chrome; do
      bytes=$(awk -v b="$last" -v f="$f" '$1 == b && $2 == f { n = $6 } END { print n == "" ? 0 : n }' "$log")
      [[ $bytes -gt 0 ]] || continue
      ${pin[@]+"${pin[@]}"} "$time_bin" -f "%U %S 0" -o "$tf" dd if=/dev/zero of="$work/zero" bs=1M \
        count=$(((bytes + 1048575) / 1048576)) 2>/dev/null
      echo "write_$f $(cat "$tf")" >>"$floor"
      rm -f "$work/zero"
    done
  done
  echo
  echo "floor (${binaries[$last]}; medians of $rounds rounds):"
  echo
  echo "| what | CPU s (user+sys) | records/s per core | user s | sys s |"
  echo "|---|---:|---:|---:|---:|"
  for w in info devnull_perfetto devnull_chrome write_perfetto write_csv write_chrome; do
    awk -v w="$w" -v n="$records" '
      $1 == w { cpu[++k] = $2 + $3; u[k] = $2; s[k] = $3 }
      function median(a, m,   i, j, t) {
        for (i = 1; i <= m; ++i) for (j = i + 1; j <= m; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
      }
      END {
        if (k == 0) exit
        label = w == "info" ? "reader only (`info`)" : w ~ /^devnull_/ ? "convert --to " substr(w, 9) " -o /dev/null" : "dd: write the " substr(w, 7) " output'"'"'s bytes"
        c = median(cpu, k)
        printf "| %s | %.2f | %s | %.2f | %.2f |\n", label, c, w ~ /^write_/ ? "-" : sprintf("%.2fM", n / c / 1e6), median(u, k), median(s, k)
      }' "$floor"
  done
fi
