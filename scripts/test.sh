#!/usr/bin/env bash
# Builds kp with warnings as errors and runs every CPU test (unit, golden, robustness, offline
# metrics). GPU tests skip here with a reason; run them with tests/gpu/run_gpu_tests.sh on a GPU.
#   scripts/test.sh                  # CMake preset "release" in build/
#   KP_SANITIZE=1 scripts/test.sh    # preset "asan": address+undefined sanitizers in build-asan/
# (CMakePresets.json; `cmake --preset debug` etc. work by hand too.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build test
preset=release
if [ "${KP_SANITIZE:-0}" = 1 ]; then preset=asan; fi
cmake --preset "$preset" -DKP_BUILD_TESTS=ON >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
ctest --preset "$preset" -j "$(nproc)"
