#!/usr/bin/env bash
# run_fuzz.sh [SECONDS] [BUILD_DIR]: builds the libFuzzer target (clang, ASan+UBSan) in
# BUILD_DIR (default build-fuzz), seeds a corpus with the shipped example traces, the inputs
# that once failed (fuzz/regressions/) and the robustness reproducers, and fuzzes for SECONDS
# (default 150). Exits non-zero on any finding; the crashing input is left in
# BUILD_DIR/findings/. docs/robustness.md describes a longer run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-150}
build=${2:-build-fuzz}
cxx=${KP_FUZZ_CXX:-clang++}
cc=${KP_FUZZ_CC:-clang}
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "run_fuzz: $cxx not found (install clang and libclang-rt-dev)" >&2
  exit 1
fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" -DKP_FUZZ=ON -DKP_BUILD_TESTS=ON \
  -DKP_WERROR=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target kp_trace_fuzzer make_reproducers

corpus="$build/corpus"
findings="$build/findings"
mkdir -p "$corpus" "$findings"
cp examples/*.kptrace "$corpus/"
# Inputs that once failed (fuzz/regressions/README.md): each run starts by replaying them.
cp fuzz/regressions/*.kptrace "$corpus/"
repro=$(mktemp -d)
trap 'rm -rf "$repro"' EXIT
"$build/tests/robustness/make_reproducers" examples/pytorch_h200.kptrace "$repro"
# Seeds stay small so each run is fast; the large stored bombs are covered by the unit tests.
find "$repro" -name '*.kptrace' -size -256k -exec cp {} "$corpus/" \;

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "run_fuzz: $(ls "$corpus" | wc -l) inputs in the corpus, fuzzing for ${seconds} s"
"$build/fuzz/kp_trace_fuzzer" "$corpus" -max_total_time="$seconds" -max_len=131072 \
  -timeout=20 -rss_limit_mb=3072 -artifact_prefix="$findings/" -print_final_stats=1
