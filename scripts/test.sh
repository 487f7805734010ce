#!/usr/bin/env bash
# Builds kp with warnings as errors and runs every CPU test (unit, golden, robustness, offline
# metrics). GPU tests skip here with a reason; run them with tests/gpu/run_gpu_tests.sh on a GPU.
#   scripts/test.sh            # release-ish build in build/
#   KP_SANITIZE=1 scripts/test.sh   # address+undefined sanitizers in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build test
build=build
extra=()
if [ "${KP_SANITIZE:-0}" = 1 ]; then build=build-asan; extra=(-DKP_SANITIZE=ON); fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DKP_WERROR=ON -DKP_BUILD_TESTS=ON "${extra[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
cd "$build"
ctest --output-on-failure -j "$(nproc)"
