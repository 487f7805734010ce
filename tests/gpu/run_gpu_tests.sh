#!/usr/bin/env bash
# run_gpu_tests.sh DIST: kp's GPU integration tests (issue 2, "Tests: GPU").
#
# Builds the CUDA programs of tests/gpu/programs with nvcc, runs each under kp from the installed
# prefix DIST (bin/kptrace, lib/libkpinject.so, libexec/kp/kp_trace_expect), and checks every
# trace against the `expect` lines the program printed. Also covers plain CUDA_INJECTION64_PATH
# injection, exit-status passthrough, a run killed with SIGKILL, a forked child, a PyTorch
# training loop, and torch.profiler started inside a kp-profiled process; captures raw CUPTI buffers for the CPU decoder tests ($OUT/cupti_buffers.tar.gz)
# and the example trace ($OUT/example_pytorch.kptrace); all traces go to $OUT/traces.tar.gz.
#
# Everything is logged to $OUT/gpu_tests.log ($OUT: a fresh temporary directory if unset). With no
# usable GPU it prints "SKIP: no GPU (<reason>)" and exits 0. Otherwise it ends with
# "N passed, M failed" and exits non-zero if anything failed.
#
# Environment: OUT, KP_NVIDIA_SMI (nvidia-smi to probe with), NVCC, PYTHON, KP_TRACE_EXPECT.
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/kp-gpu-tests.XXXXXX)}
mkdir -p "$OUT"
LOG="$OUT/gpu_tests.log"
NVIDIA_SMI=${KP_NVIDIA_SMI:-nvidia-smi}
PYTHON=${PYTHON:-python3}

passed=0
failed=0
failed_names=()

pass() { echo "PASS [$1] ${2:-}"; passed=$((passed + 1)); }
fail() { echo "FAIL [$1] ${2:-}"; failed=$((failed + 1)); failed_names+=("$1"); }

# Runs the checker on TRACE against the expect lines in EXPECT; one test case.
check_trace() {
  local name=$1 trace=$2 expect=$3
  if [[ ! -s "$trace" ]]; then
    fail "$name" "no trace at $trace"
    return
  fi
  echo "--- kptrace info $trace"
  "$KPTRACE" info "$trace" 2>&1 | sed 's/^/    /' || echo "    (kptrace info exited non-zero)"
  echo "--- checks for $name"
  if "$CHECKER" "$trace" "$expect" 2>&1 | sed 's/^/    /'; then
    pass "$name" "trace matches what the program did"
  else
    fail "$name" "trace does not match (FAIL lines above)"
  fi
}

# run_case NAME WANT_RC CMD...: runs CMD with a 120 s limit, stdout to $WORK/NAME.out (the
# program's expect lines), and checks its exit status.
run_case() {
  local name=$1 want_rc=$2
  shift 2
  echo
  echo "=== $name: $*"
  local start=$SECONDS
  timeout 120 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local rc=$?
  sed 's/^/    out: /' "$WORK/$name.out" | grep -v '^    out: expect ' || true
  echo "    ($(grep -c '^expect ' "$WORK/$name.out") expect lines)"
  sed 's/^/    err: /' "$WORK/$name.err" | tail -n 30
  echo "    exit status $rc after $((SECONDS - start)) s"
  if [[ $rc -ne $want_rc ]]; then
    fail "$name/exit" "exit status $rc, expected $want_rc"
    return 1
  fi
  pass "$name/exit" "exit status $rc"
  return 0
}

main() {
  echo "kp GPU tests: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  local smi_out
  if ! command -v "$NVIDIA_SMI" >/dev/null 2>&1; then
    echo "SKIP: no GPU ($NVIDIA_SMI not found)"
    return 0
  fi
  if ! smi_out=$("$NVIDIA_SMI" -L 2>&1); then
    echo "SKIP: no GPU ($NVIDIA_SMI -L failed: $(echo "$smi_out" | head -n 1))"
    return 0
  fi
  if ! grep -q '^GPU ' <<<"$smi_out"; then
    echo "SKIP: no GPU ($NVIDIA_SMI -L lists none)"
    return 0
  fi

  if [[ $# -lt 1 ]]; then
    echo "usage: run_gpu_tests.sh DIST" >&2
    return 2
  fi
  DIST=$(cd "$1" 2>/dev/null && pwd) || { echo "FAIL: DIST '$1' is not a directory"; return 1; }
  KPTRACE="$DIST/bin/kptrace"
  LIBKP="$DIST/lib/libkpinject.so"
  CHECKER=${KP_TRACE_EXPECT:-$DIST/libexec/kp/kp_trace_expect}
  NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  for f in "$KPTRACE" "$LIBKP" "$CHECKER" "$NVCC"; do
    if [[ ! -x "$f" && ! -f "$f" ]]; then
      echo "FAIL: $f is missing (install kp into DIST with cmake --install)"
      return 1
    fi
  done

  echo "=== setup"
  echo "$smi_out"
  "$NVIDIA_SMI" --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  "$NVCC" --version | tail -n 2
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")' 2>&1 |
    tail -n 1
  echo "kp prefix: $DIST"
  echo "checker: $CHECKER"
  echo "repo: $REPO ($(git -C "$REPO" describe --always --dirty 2>/dev/null || echo 'no git'))"

  WORK=$(mktemp -d /tmp/kp-gpu-work.XXXXXX)
  local bin="$WORK/bin" traces="$WORK/traces"
  mkdir -p "$bin" "$traces" "$WORK/cupti_buffers"

  echo
  echo "=== building programs with $NVCC"
  local src pids=() names=()
  for src in "$REPO"/tests/gpu/programs/*.cu; do
    local name
    name=$(basename "$src" .cu)
    "$NVCC" -arch=sm_90 -O2 -std=c++17 -I"$REPO/tests/gpu/programs" -o "$bin/$name" "$src" \
      -ldl -lpthread >"$WORK/build-$name.log" 2>&1 &
    pids+=($!)
    names+=("$name")
  done
  local i
  for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
      pass "build/${names[$i]}"
    else
      fail "build/${names[$i]}" "$(tail -n 5 "$WORK/build-${names[$i]}.log")"
    fi
  done

  # Launcher runs; multistream, memcpy_kinds and nvtx_threads also save their raw CUPTI buffers
  # for the decoder tests. device_reset: the records of a context cudaDeviceReset destroys.
  local p
  for p in multistream memcpy_kinds graph nvtx_threads device_reset; do
    [[ -x "$bin/$p" ]] || continue
    local dump=()
    if [[ $p == multistream || $p == memcpy_kinds || $p == nvtx_threads ]]; then
      mkdir -p "$WORK/cupti_buffers/$p"
      dump=(env "KP_DUMP_BUFFERS=$WORK/cupti_buffers/$p")
    fi
    run_case "$p" 0 "${dump[@]}" "$KPTRACE" run -o "$traces/$p.kptrace" -- "$bin/$p" &&
      check_trace "$p" "$traces/$p.kptrace" "$WORK/$p.out"
  done

  # Two GPUs in one process: both devices, kernels on each, peer copies both ways, one trace.
  local gpus
  gpus=$(grep -c '^GPU ' <<<"$smi_out")
  if [[ -x "$bin/multi_gpu" && $gpus -ge 2 ]]; then
    run_case multi_gpu 0 "$KPTRACE" run -o "$traces/multi_gpu.kptrace" -- "$bin/multi_gpu" &&
      check_trace multi_gpu "$traces/multi_gpu.kptrace" "$WORK/multi_gpu.out"
  else
    echo
    echo "SKIP multi_gpu: needs 2 GPUs with peer access, this machine has $gpus (run on the"
    echo "  nvidia-h200-x2 kind); not counted"
  fi

  # NVTX before CUDA starts: only the preload mode can see it.
  if [[ -x "$bin/nvtx_early" ]]; then
    run_case nvtx_early 0 "$KPTRACE" run --preload -o "$traces/nvtx_early.kptrace" -- \
      "$bin/nvtx_early" && check_trace nvtx_early "$traces/nvtx_early.kptrace" "$WORK/nvtx_early.out"
  fi

  # KP_API=launch-runtime: the calls under their runtime names, none of the driver calls they reach.
  for p in multistream memcpy_kinds graph; do
    [[ -x "$bin/$p" ]] || continue
    run_case "$p-launch-runtime" 0 "$KPTRACE" run --api launch-runtime \
      -o "$traces/$p-launch-runtime.kptrace" -- "$bin/$p" &&
      check_trace "$p-launch-runtime" "$traces/$p-launch-runtime.kptrace" \
        "$WORK/$p-launch-runtime.out"
  done

  # Plain CUDA_INJECTION64_PATH, no launcher.
  if [[ -x "$bin/multistream" ]]; then
    run_case plain_injection 0 env "CUDA_INJECTION64_PATH=$LIBKP" \
      "KP_OUTPUT=$traces/plain_injection.kptrace" "$bin/multistream" &&
      check_trace plain_injection "$traces/plain_injection.kptrace" "$WORK/plain_injection.out"
  fi

  # Exit status passthrough, through the launcher and through plain injection.
  if [[ -x "$bin/exit_code" ]]; then
    run_case exit_code_launcher 3 "$KPTRACE" run -o "$traces/exit_code.kptrace" -- \
      "$bin/exit_code" &&
      check_trace exit_code_launcher "$traces/exit_code.kptrace" "$WORK/exit_code_launcher.out"
    run_case exit_code_injection 3 env "CUDA_INJECTION64_PATH=$LIBKP" \
      "KP_OUTPUT=$traces/exit_code_injection.kptrace" "$bin/exit_code" &&
      check_trace exit_code_injection "$traces/exit_code_injection.kptrace" \
        "$WORK/exit_code_injection.out"
  fi

  # Killed with SIGKILL mid-run: the status is 128 + 9, the trace readable without a footer.
  if [[ -x "$bin/killed" ]]; then
    run_case killed 137 env KP_FLUSH_MS=200 "$KPTRACE" run -o "$traces/killed.kptrace" -- \
      "$bin/killed"
    # Checked whatever the status said: the trace is the point.
    check_trace killed "$traces/killed.kptrace" "$WORK/killed.out"
  fi

  # A child that forks off and exits without CUDA must not damage the parent's trace.
  if [[ -x "$bin/fork_child" ]]; then
    mkdir -p "$traces/fork"
    if run_case fork_child 0 "$KPTRACE" run -o "$traces/fork/fork-%p.kptrace" -- \
      "$bin/fork_child"; then
      local parent_pid child_pid
      parent_pid=$(sed -n 's/^info fork_child: pid=\([0-9]*\) .*/\1/p' "$WORK/fork_child.out")
      child_pid=$(sed -n 's/^info fork_child: .*child_pid=\([0-9]*\).*/\1/p' "$WORK/fork_child.out")
      echo "    traces: $(ls "$traces/fork" | tr '\n' ' ')"
      check_trace fork_child "$traces/fork/fork-$parent_pid.kptrace" "$WORK/fork_child.out"
      if [[ -e "$traces/fork/fork-$child_pid.kptrace" ]]; then
        if "$KPTRACE" info "$traces/fork/fork-$child_pid.kptrace" >/dev/null 2>&1; then
          pass fork_child/child_trace "the child (no CUDA) left a readable trace"
        else
          fail fork_child/child_trace "the child (no CUDA) left an unreadable trace"
        fi
      else
        pass fork_child/child_trace "the child (no CUDA) left no trace file"
      fi
    fi
  fi

  # PyTorch training loop with NVTX ranges; its trace becomes the example trace.
  if "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
    run_case pytorch 0 "$KPTRACE" run -o "$traces/pytorch.kptrace" -- \
      "$PYTHON" "$REPO/tests/gpu/pytorch_train.py" --steps 20 &&
      check_trace pytorch "$traces/pytorch.kptrace" "$WORK/pytorch.out"
    if [[ -s "$traces/pytorch.kptrace" ]]; then
      cp "$traces/pytorch.kptrace" "$OUT/example_pytorch.kptrace"
    fi
  else
    fail pytorch "$PYTHON cannot import torch"
  fi

  # torch.profiler inside a kp-profiled process (a second CUPTI client): the program runs on and
  # exits 0, kp's trace is complete, and if torch.profiler got no GPU events the user was told
  # that kp holds CUPTI.
  if "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
    run_case torch_profiler 0 "$KPTRACE" run -o "$traces/torch_profiler.kptrace" -- \
      "$PYTHON" "$REPO/tests/gpu/torch_profiler_under_kp.py" --steps 10 &&
      check_trace torch_profiler "$traces/torch_profiler.kptrace" "$WORK/torch_profiler.out"
    local cuda_events
    cuda_events=$(sed -n 's/^info torch_profiler: cuda_events=\([0-9]*\).*/\1/p' \
      "$WORK/torch_profiler.out")
    echo "    torch.profiler got ${cuda_events:-?} GPU events; what the run said about CUPTI:"
    grep -i -E 'cupti|subscriber|kp' "$WORK/torch_profiler.err" | sed 's/^/      /' | head -n 20
    if [[ -z "$cuda_events" ]]; then
      fail torch_profiler/told "the script printed no cuda_events line"
    elif [[ "$cuda_events" -gt 0 ]]; then
      pass torch_profiler/told "torch.profiler collected $cuda_events GPU events alongside kp"
    elif grep -v '^kp: ' "$WORK/torch_profiler.err" | grep -q -E '\bkp\b'; then
      pass torch_profiler/told "torch.profiler got no GPU events and its message names kp"
    elif grep -q 'MULTIPLE_SUBSCRIBERS' "$WORK/torch_profiler.err"; then
      # kp's own lines do not count: the user must learn from the other tool why it got nothing.
      pass torch_profiler/told "torch.profiler got no GPU events and said why (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; it does not name the holder)"
    else
      fail torch_profiler/told "torch.profiler got no GPU events and nothing said why"
    fi
  fi

  echo
  # Few files in $OUT (the GPU machine returns a limited number): two archives.
  echo "=== captured CUPTI buffers (for tests/data/cupti_buffers)"
  for p in "$WORK"/cupti_buffers/*/; do
    echo "    $(basename "$p"): $(ls "$p" | wc -l) buffers, $(du -sh "$p" | cut -f1)"
  done
  tar -czf "$OUT/cupti_buffers.tar.gz" -C "$WORK" cupti_buffers
  for f in "$WORK"/*.out; do cp "$f" "$traces/$(basename "$f" .out).expect"; done
  tar -czf "$OUT/traces.tar.gz" -C "$WORK" traces
  echo "kept: $OUT/cupti_buffers.tar.gz, $OUT/traces.tar.gz (traces + expect files)"

  echo
  if [[ $failed -gt 0 ]]; then echo "failed: ${failed_names[*]}"; fi
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}

main "$@" 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
