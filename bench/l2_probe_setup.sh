# l2_probe_setup.sh: the common start of the probe scripts (l2_*_probe.sh, breakdown_probe.sh,
# instrumentation_probe.sh), sourced with the caller's arguments (its $1 is DIST) after it sets
# PROBE_NAME. Sets REPO, DIST, NVCC, NCU, PYTHON (from the environment, or nvcc, ncu, python3)
# and the work directory W (PROBE_DIR, or a new /tmp/kp-$PROBE_NAME.XXXXXX), and defines the
# builds of the two probe programs into W: build_l2_prestate (W/l2p: bench/l2_prestate.cu,
# which calls the driver API, with kp's driver L2 flush) and build_metrics_cache (W/mc:
# tests/gpu/programs/metrics_cache.cu), and the measurements: ncu_app (ncu's application replay
# from a flushed L2), kp_csv (a kp run converted to CSV) and kp_kernel_csv (the same in kernel
# mode).
set -u -o pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIST=$(cd "${1:?usage: $(basename "$0") DIST}" && pwd) || exit 2
NVCC=${NVCC:-nvcc}
NCU=${NCU:-ncu}
PYTHON=${PYTHON:-python3}
W=${PROBE_DIR:-$(mktemp -d "/tmp/kp-$PROBE_NAME.XXXXXX")}
mkdir -p "$W"
build_l2_prestate() {
  "$NVCC" -arch=sm_90 -O2 -I"$REPO" -o "$W/l2p" "$REPO/bench/l2_prestate.cu" \
    "$REPO/inject/metrics/l2_evict.cc" -lcuda
}
build_metrics_cache() {
  "$NVCC" -arch=sm_90 -O2 -std=c++17 -I"$REPO/tests/gpu/programs" -o "$W/mc" \
    "$REPO/tests/gpu/programs/metrics_cache.cu" -ldl
}
# ncu_app CSV METRICS KERNEL_REGEX CMD...: ncu --clock-control none --cache-control all
# --replay-mode application on CMD's kernels matching KERNEL_REGEX, its raw-page CSV in CSV and
# its stderr in CSV.err; on a failure says so with the error's tail and returns 1.
ncu_app() {
  local csv=$1 metrics=$2 re=$3
  shift 3
  "$NCU" --clock-control none --cache-control all --replay-mode application --metrics "$metrics" \
    --csv --page raw --print-units base -k regex:"$re" "$@" >"$csv" 2>"$csv.err" ||
    { echo "ncu failed ($(basename "$csv")):"; tail -3 "$csv.err"; return 1; }
}
# kp_csv LABEL [VAR=VALUE...] -- RUN_ARGS...: `kptrace run RUN_ARGS` (its --metrics, other
# flags, -- and the command) with the VAR=VALUE environment, converted to CSV in W/LABEL_csv;
# its output in W/LABEL.log, the trace removed. What a previous run left under LABEL is removed
# first, so a failed run leaves no stale CSV.
kp_csv() {
  local label=$1 envs=()
  shift
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  rm -rf "$W/${label}_csv" "$W/$label.kptrace"
  env ${envs[@]+"${envs[@]}"} "$DIST/bin/kptrace" run -o "$W/$label.kptrace" --force "$@" \
    >"$W/$label.log" 2>&1 ||
    { echo "kp $label failed:"; tail -3 "$W/$label.log"; }
  "$DIST/bin/kptrace" convert "$W/$label.kptrace" --to csv -o "$W/${label}_csv" >/dev/null
  rm -f "$W/$label.kptrace"
}
# kp_kernel_csv LABEL [VAR=VALUE...] -- RUN_ARGS...: kp_csv in kernel mode.
kp_kernel_csv() {
  local label=$1 envs=()
  shift
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  kp_csv "$label" ${envs[@]+"${envs[@]}"} -- --metrics-mode kernel "$@"
}
