// callback_cost.cc: kp_callback_cost, the CPU cost of kp's per-call API callback
// (inject/cupti/api_call_recorder.cc) beside the floor's (bench/floor/cupti_floor.cc), without a
// GPU: both functions are called directly with CUpti_CallbackData as CUPTI fills it.
//
// One "launch" is what CUPTI delivers for one cudaLaunchKernel: with kp's default callbacks
// (KP_API=launch, the floor's driver_only) the cuLaunchKernel it reaches, ENTER and EXIT; with
// KP_API=launch-runtime also the runtime call's ENTER before and EXIT after (same correlation
// id). Both are timed, the default first; then the default at a program's pace, with kp's rings
// drained by a thread of their own as kp's encoder thread does; then "cold": 64 KiB, 512 KiB
// or 4 MiB of other memory written before each launch, as a program's work between two
// launches pushes the callbacks' data out of the core's caches, and the callbacks alone timed. In
// the first two, kp's rings are drained between blocks of 4096 launches, untimed, through the real
// ActivityDecoder and TraceEncoder (zstd:3), so what is timed is the callbacks alone on a warm
// ring; the cross-core traffic of libkpinject's separate encoder thread is only in the paced
// rounds. Rounds alternate floor and kp; the medians over rounds are printed in ns per launch, with
// the cost of the timestamp sources beside them and the offset between cuptiGetTimestamp and
// CLOCK_REALTIME (the same clock when it is within the bracketing window printed beside it). The
// loops themselves are in libkp_callback_cost_rounds.so (callback_cost_rounds.cc).
//
// Usage: kp_callback_cost [--launches N] [--rounds R] [--cold-only]
// (ctest: callback_cost, disabled by default; --cold-only: only the rounds with other memory
// written between launches, e.g. under valgrind --tool=callgrind --cache-sim=yes to count the
// cache lines each side's callbacks miss)
#include <cupti.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/callback_cost_rounds.h"

namespace {

using Clock = std::chrono::steady_clock;

double NsPer(Clock::time_point start, long n) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
         static_cast<double>(n);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double TimestampRound(long n, bool cupti) {
  uint64_t sum = 0;
  const auto start = Clock::now();
  for (long i = 0; i < n; ++i) {
    uint64_t t = 0;
    if (cupti) {
      cuptiGetTimestamp(&t);
    } else {
      t = RealtimeNs();
    }
    sum += t;
  }
  const double ns = NsPer(start, n);
  if (sum == 42) std::puts("");  // keeps the loop
  return ns;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  long launches = 1000000;
  int rounds = 7;
  bool cold_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cold-only") == 0) cold_only = true;
    if (i + 1 == argc) break;
    if (std::strcmp(argv[i], "--launches") == 0) launches = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  if (launches < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: kp_callback_cost [--launches N] [--rounds R] [--cold-only]\n");
    return 2;
  }
  uint64_t cupti_now = 0;
  if (cuptiGetTimestamp(&cupti_now) != CUPTI_SUCCESS) {  // also CUPTI's first-use set-up
    std::fprintf(stderr, "kp_callback_cost: cuptiGetTimestamp failed\n");
    return 1;
  }
  // The offset between the two clocks, from the tightest of many bracketed reads.
  double offset = 0;
  uint64_t best_window = UINT64_MAX;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t before = RealtimeNs();
    cuptiGetTimestamp(&cupti_now);
    const uint64_t after = RealtimeNs();
    if (after - before < best_window) {
      best_window = after - before;
      offset = static_cast<double>(cupti_now) - (before / 2.0 + after / 2.0);
    }
  }

  std::printf("callback cost, %ld launches x %d rounds (medians; load average %s)\n", launches,
              rounds, LoadAverage().c_str());
  uint64_t dropped = 0;
  uint32_t correlation = 0;
  // The default first (driver callbacks only), then KP_API=launch-runtime's four per launch.
  for (const bool driver_only : {true, false}) {
    if (cold_only) break;
    KpSide* kp = NewKpSide(driver_only);
    std::vector<double> floor_ns, kp_ns, kp_off_ns, empty_ns;
    FloorRound(launches / 10, driver_only);  // warm-up: code, rings, caches
    KpRound(*kp, launches / 10, &correlation);
    for (int r = 0; r < rounds; ++r) {
      if (r % 2 == 0) {
        floor_ns.push_back(FloorRound(launches, driver_only));
        kp_ns.push_back(KpRound(*kp, launches, &correlation));
      } else {
        kp_ns.push_back(KpRound(*kp, launches, &correlation));
        floor_ns.push_back(FloorRound(launches, driver_only));
      }
      kp_off_ns.push_back(KpOffRound(*kp, launches, &correlation));
      empty_ns.push_back(EmptyRound(launches, driver_only));
    }
    const uint64_t side_dropped = KpDropped(kp);
    dropped += side_dropped;
    DeleteKpSide(kp);
    const int callbacks = driver_only ? 2 : 4;
    std::printf("%s (%d callbacks per launch):\n",
                driver_only ? "driver callbacks only (KP_API=launch, floor driver_only)"
                            : "runtime and driver callbacks (KP_API=launch-runtime)",
                callbacks);
    std::printf("  floor (bench/floor OnCallback):         %7.1f ns/launch\n", Median(floor_ns));
    std::printf("  kp (ApiCallRecorder::OnCallback):       %7.1f ns/launch, %llu dropped\n",
                Median(kp_ns), static_cast<unsigned long long>(side_dropped));
    std::printf("  kp, recording off (outside a window):   %7.1f ns/launch\n", Median(kp_off_ns));
    std::printf("  empty callback (loop + call only):      %7.1f ns/launch\n", Median(empty_ns));
    std::printf("  kp - floor:                             %+7.1f ns/launch\n",
                Median(kp_ns) - Median(floor_ns));
  }
  // At a program's pace, kp's rings drained by a thread of their own: what each side's callbacks
  // add to a loop that does other work between launches (the default, driver callbacks only).
  if (!cold_only) {
    KpSide* kp = NewKpSide(true);
    const long paced = std::max(1L, launches / 2);
    for (const long spin_ns : {1000L, 3000L}) {
      std::vector<double> none_ns, floor_ns, kp_ns;
      for (int r = 0; r < rounds; ++r) {
        none_ns.push_back(PacedRound(kp, paced, spin_ns, PacedCallbacks::kNone, &correlation));
        floor_ns.push_back(PacedRound(kp, paced, spin_ns, PacedCallbacks::kFloor, &correlation));
        kp_ns.push_back(PacedRound(kp, paced, spin_ns, PacedCallbacks::kKp, &correlation));
      }
      std::printf(
          "paced, %ld ns of work before each launch, kp's rings drained by another "
          "thread every 10 ms:\n  no callback %.1f ns/launch; floor %+.1f, kp %+.1f "
          "ns/launch\n",
          spin_ns, Median(none_ns), Median(floor_ns) - Median(none_ns),
          Median(kp_ns) - Median(none_ns));
    }
    const uint64_t side_dropped = KpDropped(kp);
    dropped += side_dropped;
    if (side_dropped != 0) {
      std::printf("  paced: %llu calls dropped\n", static_cast<unsigned long long>(side_dropped));
    }
    DeleteKpSide(kp);
  }
  // With other memory written between launches: the callbacks' own data no longer in the core's
  // caches, as in a program that does real work between launches (a PyTorch op's dispatch).
  {
    KpSide* kp = NewKpSide(true);
    const long cold = std::max(1L, launches / 10);
    for (const size_t evict_kb : {64ul, 512ul, 4096ul}) {
      std::vector<double> none_ns, floor_ns, kp_ns;
      for (int r = 0; r < rounds; ++r) {
        none_ns.push_back(ColdRound(kp, cold, evict_kb << 10, PacedCallbacks::kNone, &correlation));
        floor_ns.push_back(
            ColdRound(kp, cold, evict_kb << 10, PacedCallbacks::kFloor, &correlation));
        kp_ns.push_back(ColdRound(kp, cold, evict_kb << 10, PacedCallbacks::kKp, &correlation));
      }
      std::printf(
          "cold, %zu KiB of other memory written before each launch (callbacks alone timed):\n"
          "  timer alone %.1f ns/launch; floor %+.1f, kp %+.1f ns/launch\n",
          evict_kb, Median(none_ns), Median(floor_ns) - Median(none_ns),
          Median(kp_ns) - Median(none_ns));
    }
    dropped += KpDropped(kp);
    DeleteKpSide(kp);
  }
  std::vector<double> cupti_ts, realtime_ts;
  for (int r = 0; r < rounds; ++r) {
    cupti_ts.push_back(TimestampRound(launches, true));
    realtime_ts.push_back(TimestampRound(launches, false));
  }
  std::printf("  cuptiGetTimestamp:                      %7.1f ns/call\n", Median(cupti_ts));
  std::printf("  clock_gettime(CLOCK_REALTIME):          %7.1f ns/call\n", Median(realtime_ts));
  std::printf("  cuptiGetTimestamp - CLOCK_REALTIME:     %+.0f ns (+-%.0f)\n", offset,
              best_window / 2.0);
  return dropped == 0 ? 0 : 1;
}
