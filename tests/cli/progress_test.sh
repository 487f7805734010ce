#!/usr/bin/env bash
# Progress lines of convert, summary, report and diff: shown on a terminal (a pty made by
# script(1)) once the work has run KP_PROGRESS_DELAY_MS, never when stderr is not a terminal,
# and not on a terminal when the work ends before the delay.
# usage: progress_test.sh KPTRACE TRACE WORK_DIR
set -u
kptrace=$1 trace=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
if ! command -v script >/dev/null; then
  echo "SKIP: script(1) (util-linux/bsdutils) is not installed"
  exit 77
fi
fail=0
commands=("summary $trace"
          "convert $trace --to csv -o $work/csv"
          "report $trace -o $work/r.html"
          "diff $trace $trace")
for c in "${commands[@]}"; do
  verb=${c%% *}
  # On a terminal, no delay: the line appears and is erased at the end.
  KP_PROGRESS_DELAY_MS=0 script -qec "$kptrace $c >/dev/null" /dev/null >"$work/tty.out" 2>&1
  if ! grep -aq "kptrace $verb.*% of .* MiB read, .* M records/s" "$work/tty.out"; then
    echo "FAIL: $verb on a terminal showed no progress line: $(cat -v "$work/tty.out" | head -3)"
    fail=1
  fi
  if ! grep -aq $'\r\033\[K' "$work/tty.out"; then
    echo "FAIL: $verb did not erase its progress line"
    fail=1
  fi
  # Not a terminal: stderr holds no progress at all.
  KP_PROGRESS_DELAY_MS=0 $kptrace $c >/dev/null 2>"$work/pipe.err"
  if grep -aq "records/s" "$work/pipe.err"; then
    echo "FAIL: $verb wrote progress to a non-terminal stderr: $(head -2 "$work/pipe.err")"
    fail=1
  fi
  # A terminal, but the work (a small example) ends well before the default 1 s delay.
  script -qec "$kptrace $c >/dev/null" /dev/null >"$work/tty_default.out" 2>&1
  if grep -aq "records/s" "$work/tty_default.out"; then
    echo "FAIL: $verb showed progress for work shorter than the delay"
    fail=1
  fi
done
# A bad KP_PROGRESS_DELAY_MS is named with the accepted values.
KP_PROGRESS_DELAY_MS=soon script -qec "$kptrace summary $trace >/dev/null" /dev/null >"$work/bad.out" 2>&1
if ! grep -aq "KP_PROGRESS_DELAY_MS='soon' is not accepted (a whole number of milliseconds" "$work/bad.out"; then
  echo "FAIL: bad KP_PROGRESS_DELAY_MS not reported: $(cat -v "$work/bad.out" | head -2)"
  fail=1
fi
[ $fail = 0 ] && echo "PASS: progress on terminals only, for ${#commands[@]} commands"
exit $fail
