#!/usr/bin/env bash
# Real-browser check of `kptrace report`: for each shipped example trace, headless Chromium loads
# the report with no network and no sandbox-dependent features, and
#   - the browser console shows nothing but the page's own "kp-selfcheck: ok" line (any error,
#     warning or blocked fetch fails the test),
#   - the DOM after scripts ran has every section, <body data-selfcheck="ok"> (the page checked
#     that each chart has data marks and is visible, and that nothing is wider than the 1280 px
#     window), and the charts expected for that trace carry marks,
#   - a 1280 px wide screenshot is written (kept in WORK_DIR for people to look at).
# usage: report_browser_test.sh KPTRACE EXAMPLES_DIR WORK_DIR
# Skips (exit 77) without Chromium, except under CI=true, where it fails.
set -u
kptrace=$1 examples=$2 work=$3
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: CI=true and no chromium on PATH (scripts/deps.sh build test installs it)"
    exit 1
  fi
  echo "SKIP: no chromium on PATH: install it with scripts/deps.sh build test (as root) or" \
       "apt-get install chromium"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL ($name): $2"; fail=1; fi; }
# Own profile per run: parallel tests and a user's running browser do not share state.
flags=(--headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars
       --user-data-dir="$work/profile" --window-size=1280,2400 --virtual-time-budget=5000)
for trace in "$examples"/*.kptrace; do
  name=$(basename "$trace" .kptrace)
  page="$work/$name.html"
  "$kptrace" report "$trace" -o "$page" 2>"$work/$name.report.log" ||
    { echo "FAIL ($name): kptrace report failed: $(cat "$work/$name.report.log")"; fail=1; continue; }
  "$browser" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$page" \
    >"$work/$name.dom.html" 2>"$work/$name.browser.log"
  grep 'CONSOLE' "$work/$name.browser.log" | sed 's/^\[[^]]*\] //' >"$work/$name.console.log"
  check '[ "$(grep -c . "$work/$name.console.log")" = 1 ]' \
    "console messages other than the self-check: $(grep -v 'kp-selfcheck: ok' "$work/$name.console.log")"
  check 'grep -q "\"kp-selfcheck: ok\"" "$work/$name.console.log"' "no self-check line on the console"
  dom="$work/$name.dom.html"
  check 'grep -q "data-selfcheck=\"ok\"" "$dom"' \
    "page self-check: $(grep -o 'data-selfcheck="[^"]*"' "$dom")"
  for id in setup utilisation kernels ranges copies sol notices; do
    check 'grep -q "<section id=\"$id\"" "$dom"' "section $id missing"
  done
  charts=(util-chart kernel-chart)
  # The metrics example measured ranges: its speed-of-light chart must have points.
  case "$name" in *metrics*) charts+=(sol-chart) ;; esac
  for chart in "${charts[@]}"; do
    marks=$(grep -o "id=\"$chart\"[^>]*" "$dom" | grep -o 'data-marks="[0-9]*"' | grep -o '[0-9]*')
    check '[ "${marks:-0}" -gt 0 ]' "chart $chart has no data marks"
  done
  "$browser" "${flags[@]}" --screenshot="$work/$name.png" "file://$page" >/dev/null 2>&1
  # PNG width: bytes 16..19 of the IHDR chunk, big-endian.
  width=$(od -An -tu1 -j16 -N4 "$work/$name.png" 2>/dev/null | awk '{print $1*16777216+$2*65536+$3*256+$4}')
  size=$(stat -c %s "$work/$name.png" 2>/dev/null || echo 0)
  check '[ "${width:-0}" = 1280 ] && [ "$size" -gt 20000 ]' \
    "screenshot missing or wrong (width ${width:-?}, $size bytes)"
  echo "$name: $(grep -o 'data-charts="[0-9]*"' "$dom"), screenshot $work/$name.png"
done
[ $fail = 0 ] && echo "PASS: every example report loads cleanly in $("$browser" --version 2>/dev/null)"
exit $fail
