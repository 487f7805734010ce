# l2_probe_setup.sh: the common start of the L2 probe scripts (l2_*_probe.sh), sourced with the
# caller's arguments (its $1 is DIST) after it sets PROBE_NAME. Sets REPO, DIST, NVCC, NCU,
# PYTHON (from the environment, or nvcc, ncu, python3) and the work directory W (PROBE_DIR, or a
# new /tmp/kp-$PROBE_NAME.XXXXXX), and defines the builds of the two probe programs into W:
# build_l2_prestate (W/l2p: bench/l2_prestate.cu, which calls the driver API) and
# build_metrics_cache (W/mc: tests/gpu/programs/metrics_cache.cu).
set -u -o pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIST=$(cd "${1:?usage: $(basename "$0") DIST}" && pwd) || exit 2
NVCC=${NVCC:-nvcc}
NCU=${NCU:-ncu}
PYTHON=${PYTHON:-python3}
W=${PROBE_DIR:-$(mktemp -d "/tmp/kp-$PROBE_NAME.XXXXXX")}
mkdir -p "$W"
build_l2_prestate() {
  "$NVCC" -arch=sm_90 -O2 -o "$W/l2p" "$REPO/bench/l2_prestate.cu" -lcuda
}
build_metrics_cache() {
  "$NVCC" -arch=sm_90 -O2 -std=c++17 -I"$REPO/tests/gpu/programs" -o "$W/mc" \
    "$REPO/tests/gpu/programs/metrics_cache.cu" -ldl
}
