#!/usr/bin/env bash
# cli_robustness.sh KPTRACE MAKE_REPRODUCERS EXAMPLE WORKDIR MEMORY_LIMIT_KB
# Runs kptrace's commands on the robustness reproducers under `ulimit -v` (0 = no limit, for
# sanitizer builds), and checks output safety: no output over an input, no partial or empty
# output left behind, write errors reported.
set -u
kptrace=$1 make_reproducers=$2 example=$3 work=$4 limit_kb=$5
rm -rf "$work" && mkdir -p "$work/in" || exit 1
"$make_reproducers" "$example" "$work/in" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# run NAME CMD...: runs kptrace under the memory limit; stdout/stderr in $work/NAME.{out,err}.
run() {
  local name=$1; shift
  ( if [ "$limit_kb" != 0 ]; then ulimit -v "$limit_kb"; fi
    exec timeout 120 "$kptrace" "$@" ) >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
}
expect_err() { grep -qF -- "$2" "$work/$1.err" || fail "$1: stderr lacks '$2': $(cat "$work/$1.err")"; }
expect_out() { grep -qF -- "$2" "$work/$1.out" || fail "$1: stdout lacks '$2'"; }

# 1. Every reproducer through every command within the memory bound: no crash, no abort.
for f in "$work"/in/*.kptrace; do
  n=$(basename "$f" .kptrace)
  for cmd in info summary csv chrome perfetto; do
    case $cmd in
      info) run "$n.$cmd" info "$f" ;;
      summary) run "$n.$cmd" summary --format json "$f" ;;
      *) run "$n.$cmd" convert "$f" --to "$cmd" -o "$work/$n.out.$cmd" --no-progress ;;
    esac
    if [ "$rc" -ge 2 ] && [ "$n" != format_version_4 ]; then
      fail "$n $cmd: exit $rc (limit ${limit_kb} KB): $(tail -3 "$work/$n.$cmd.err")"
    fi
  done
done
records() { sed -n 's/^  records total *\([0-9,]*\).*/\1/p' "$work/$1.out" | head -1; }
run ref info "$example"
for n in nested_command_line_bomb nested_config_bomb empty_kernels_bomb empty_kernels_stored \
         nested_config_stored; do
  expect_out "$n.info" "over the decode budget"
done
expect_out latin1_command_line.info "caf?"
expect_out duplicated_chunks.info "duplicate chunks (same sequence number and CRC as one already read) read once"
expect_out swapped_chunks.info "out of order"
grep -q "missing" "$work/swapped_chunks.info.out" && fail "swapped chunks reported as missing"
[ "$(records duplicated_chunks.info)" = "$(records ref)" ] || fail "duplicated chunks: record count changed"
expect_err format_version_4.info "kp trace format version 4 found; this kptrace reads versions 1, 2 and 3"

# 2. The same file twice is read once, with a warning.
cp "$example" "$work/t.kptrace"
run twice summary --format json "$work/t.kptrace" "$work/./t.kptrace"
expect_err twice "is the same file as"
run once summary --format json "$work/t.kptrace"
cmp -s "$work/once.out" "$work/twice.out" || fail "the same file twice changed the summary"

# 2b. Many inputs cost no memory or descriptors at rest: 300 distinct copies under 32 open files
#     (once every input was held open with a 4 MiB buffer).
mkdir -p "$work/many"
for i in $(seq 1 300); do cp "$example" "$work/many/t$i.kptrace"; done
( ulimit -n 32; if [ "$limit_kb" != 0 ]; then ulimit -v "$limit_kb"; fi
  exec "$kptrace" convert "$work"/many/*.kptrace --to chrome -o "$work/many.json" --no-progress ) \
  >"$work/many.out" 2>"$work/many.err"
rc=$?
[ "$rc" = 0 ] || fail "convert of 300 inputs: exit $rc: $(tail -2 "$work/many.err")"
expect_err many "from 300 files"

# 3. An output that names an input: exit 2, the input untouched.
for to in chrome perfetto; do
  run guard.$to convert "$work/t.kptrace" --to "$to" -o "$work/t.kptrace"
  [ "$rc" = 2 ] || fail "convert --to $to -o INPUT: exit $rc, want 2"
  expect_err guard.$to "is the input file"
  cmp -s "$example" "$work/t.kptrace" || fail "convert --to $to -o INPUT changed the input"
done
ln -f "$work/t.kptrace" "$work/hardlink.kptrace"
run guard.link convert "$work/t.kptrace" --to chrome -o "$work/hardlink.kptrace"
[ "$rc" = 2 ] || fail "convert -o HARDLINK-OF-INPUT: exit $rc, want 2"
mkdir -p "$work/csvdir" && cp "$example" "$work/csvdir/kernels.csv"
run guard.csv convert "$work/csvdir/kernels.csv" --to csv -o "$work/csvdir"
[ "$rc" = 2 ] || fail "convert --to csv into the input's directory: exit $rc, want 2"
cmp -s "$example" "$work/csvdir/kernels.csv" || fail "convert --to csv changed its input"
run guard.log summary "$work/t.kptrace" --append-log "$work/t.kptrace"
[ "$rc" = 2 ] || fail "summary --append-log INPUT: exit $rc, want 2"
cmp -s "$example" "$work/t.kptrace" || fail "summary --append-log INPUT changed the input"

# 4. No empty or partial output behind a failure.
run missing convert "$work/missing.kptrace" --to chrome -o "$work/missing.json"
[ "$rc" = 1 ] || fail "convert of a missing input: exit $rc, want 1"
[ -e "$work/missing.json" ] && fail "convert of a missing input left an output behind"
( trap '' XFSZ; ulimit -f 8; exec "$kptrace" convert "$example" --to chrome -o "$work/big.json" ) \
  >"$work/fsize.out" 2>"$work/fsize.err"
rc=$?
[ "$rc" = 1 ] || fail "convert past the file size limit: exit $rc, want 1"
[ -e "$work/big.json" ] && fail "a failed convert left a partial output"
ls "$work" | grep -q kptrace-tmp && fail "a failed convert left its temporary file"
run nodir summary "$example" --append-log "$work/no/such/dir/log.csv"
[ "$rc" = 1 ] || fail "--append-log into a missing directory: exit $rc, want 1"
expect_err nodir "No such file or directory"

# 5. Write errors are errors.
for cmd in info summary; do
  timeout 60 "$kptrace" "$cmd" "$example" >/dev/full 2>"$work/full.$cmd.err"
  rc=$?
  [ "$rc" = 1 ] || fail "$cmd > /dev/full: exit $rc, want 1"
  expect_err full.$cmd "cannot write to standard output: No space left on device"
done
timeout 60 "$kptrace" convert "$example" --to chrome -o /dev/full >/dev/null 2>"$work/full.convert.err"
rc=$?
[ "$rc" = 1 ] || fail "convert -o /dev/full: exit $rc, want 1"

if [ "$failures" != 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "cli_robustness: all checks passed (memory limit ${limit_kb} KB)"
