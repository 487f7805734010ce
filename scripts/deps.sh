#!/usr/bin/env bash
# The one list of Debian/Ubuntu packages kp needs, by profile. scripts/demo.sh, scripts/test.sh
# and .ci/run call it before building.
#   scripts/deps.sh build          # compile kp and run the demo
#   scripts/deps.sh build test     # + the CPU test suite (gtest/gmock, Chromium for the report test)
#   scripts/deps.sh fuzz           # clang and libFuzzer for fuzz/ (CI runs it)
# Missing packages are installed when run as root on a system with apt-get (one `apt-get update`,
# then one `apt-get install`); otherwise the exact install command is printed and it exits 1.
# The CUDA toolkit (/usr/local/cuda) is not a Debian package and is not installed here.
set -euo pipefail

declare -A profile
profile[build]="cmake ninja-build g++ pkg-config libprotobuf-dev protobuf-compiler libabsl-dev
                libzstd-dev nlohmann-json3-dev python3"
# chromium + a font: the report's real-browser test (tests/report) loads and screenshots pages.
profile[test]="libgtest-dev libgmock-dev chromium fonts-dejavu-core"
# clang + its libFuzzer runtime: the fuzz target (fuzz/, -DKP_FUZZ=ON) that CI runs for a bounded time.
profile[fuzz]="clang libclang-rt-14-dev"

[ $# -gt 0 ] || set -- build
wanted=()
for p in "$@"; do
  if [ -z "${profile[$p]+set}" ]; then
    echo "scripts/deps.sh: unknown profile '$p' (known: ${!profile[*]})" >&2
    exit 2
  fi
  for pkg in ${profile[$p]}; do wanted+=("$pkg"); done
done

if ! command -v dpkg-query >/dev/null; then
  echo "scripts/deps.sh: not a Debian/Ubuntu system; make sure these (or their equivalents) are" \
       "installed: ${wanted[*]}" >&2
  exit 0
fi
missing=()
for pkg in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing missing packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "scripts/deps.sh: missing packages: ${missing[*]}" >&2
echo "install them with:" >&2
echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
exit 1
