// callback_cost.cc: kp_callback_cost, the CPU cost of kp's per-call API callback
// (inject/cupti/api_call_recorder.cc) beside the floor's (bench/floor/cupti_floor.cc), without a
// GPU: both functions are called directly with CUpti_CallbackData as CUPTI fills it.
//
// One "launch" is what CUPTI delivers for one cudaLaunchKernel with kp's default callbacks:
// runtime ENTER, the nested cuLaunchKernel's driver ENTER and EXIT (same correlation id), runtime
// EXIT. kp's rings are drained between blocks of 4096 launches, untimed, through the real
// ActivityDecoder and TraceEncoder (zstd:3), so what is timed is the callbacks alone on a warm
// ring; the cross-core traffic of libkpinject's separate encoder thread is not in it. Rounds
// alternate floor and kp; the medians over rounds are printed in ns per launch, with the cost
// of the timestamp sources beside them and the offset between cuptiGetTimestamp and
// CLOCK_REALTIME (the same clock when it is a few hundred ns at most).
//
// Usage: kp_callback_cost [--launches N] [--rounds R]   (ctest: callback_cost, disabled by default)
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

#include "bench/floor/cupti_floor.h"
#include "inject/cupti/activity_decoder.h"
#include "inject/cupti/api_call_recorder.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"

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

// One launch's four callbacks, as CUPTI makes them.
struct Launch {
  uint64_t runtime_slot = 0, driver_slot = 0;
  int result = 0;
  CUpti_CallbackData runtime{}, driver{};
  Launch() {
    runtime.correlationData = &runtime_slot;
    driver.correlationData = &driver_slot;
    runtime.functionReturnValue = &result;
    driver.functionReturnValue = &result;
    runtime.functionName = "cudaLaunchKernel";
    driver.functionName = "cuLaunchKernel";
  }
  template <typename Callback>
  void Run(uint32_t correlation, Callback callback) {
    runtime.correlationId = driver.correlationId = correlation;
    runtime.callbackSite = CUPTI_API_ENTER;
    callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
             &runtime);
    driver.callbackSite = CUPTI_API_ENTER;
    callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
    driver.callbackSite = CUPTI_API_EXIT;
    callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
    runtime.callbackSite = CUPTI_API_EXIT;
    callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
             &runtime);
  }
};

double FloorRound(long launches) {
  Launch launch;
  double ns = 0;
  for (long done = 0; done < launches; done += 4096) {  // blocks, as kp's side (KpRound)
    const long n = std::min(4096L, launches - done);
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      launch.Run(static_cast<uint32_t>(done + i + 1),
                 [](CUpti_CallbackDomain d, CUpti_CallbackId c, const CUpti_CallbackData* data) {
                   kpfloor::OnCallback(nullptr, d, c, data);
                 });
    }
    ns += NsPer(start, 1);
  }
  return ns / static_cast<double>(launches);
}

// kp's recorder with its encoder-side half, the real ActivityDecoder and TraceEncoder.
struct KpSide {
  kp::MemoryChunkSink sink{3};
  kp::TraceEncoder encoder{&sink, kp::TraceEncoder::Options()};
  kp::ActivityDecoder decoder{&encoder, nullptr, kp::ActivityDecoder::Options()};
  kp::ApiCallRecorder recorder{nullptr};
  KpSide() {
    kp::HeaderInfo header;
    header.kp_version = "callback_cost";
    encoder.SetHeader(header);
  }
  void Drain() {
    recorder.Drain(&decoder);
    if (encoder.FlushDue()) encoder.Flush();
  }
};

// Launches in blocks of kBlock; between blocks, untimed, the rings are drained as the encoder
// thread would (on this 2-core test machine a draining thread of its own falls behind the
// ~20x faster-than-real calls, and a dropped call would skip the ring write and flatter kp).
constexpr long kBlock = 4096;

double KpRound(KpSide& kp_side, long launches, uint32_t* correlation) {
  Launch launch;
  kp::ApiCallRecorder& recorder = kp_side.recorder;
  double ns = 0;
  for (long done = 0; done < launches; done += kBlock) {
    const long n = std::min(kBlock, launches - done);
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      launch.Run(++*correlation,
                 [&recorder](CUpti_CallbackDomain d, CUpti_CallbackId c,
                             const CUpti_CallbackData* data) { recorder.OnCallback(d, c, data); });
    }
    ns += NsPer(start, 1);
    kp_side.Drain();
  }
  return ns / static_cast<double>(launches);
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
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--launches") == 0) launches = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  if (launches < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: kp_callback_cost [--launches N] [--rounds R]\n");
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

  KpSide kp_side;
  uint32_t correlation = 0;
  std::vector<double> floor_ns, kp_ns, cupti_ts, realtime_ts;
  FloorRound(launches / 10);  // warm-up: code, rings, caches
  KpRound(kp_side, launches / 10, &correlation);
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      floor_ns.push_back(FloorRound(launches));
      kp_ns.push_back(KpRound(kp_side, launches, &correlation));
    } else {
      kp_ns.push_back(KpRound(kp_side, launches, &correlation));
      floor_ns.push_back(FloorRound(launches));
    }
    cupti_ts.push_back(TimestampRound(launches, true));
    realtime_ts.push_back(TimestampRound(launches, false));
  }
  const uint64_t dropped = kp_side.recorder.dropped();
  std::printf("callback cost, %ld launches x %d rounds (medians; load average %s)\n", launches,
              rounds, LoadAverage().c_str());
  std::printf("  floor (bench/floor OnCallback):         %7.1f ns/launch (4 callbacks)\n",
              Median(floor_ns));
  std::printf(
      "  kp (ApiCallRecorder::OnCallback):       %7.1f ns/launch (4 callbacks), %llu "
      "dropped\n",
      Median(kp_ns), static_cast<unsigned long long>(dropped));
  std::printf("  kp - floor:                             %+7.1f ns/launch\n",
              Median(kp_ns) - Median(floor_ns));
  std::printf("  cuptiGetTimestamp:                      %7.1f ns/call\n", Median(cupti_ts));
  std::printf("  clock_gettime(CLOCK_REALTIME):          %7.1f ns/call\n", Median(realtime_ts));
  std::printf("  cuptiGetTimestamp - CLOCK_REALTIME:     %+.0f ns (+-%.0f)\n", offset,
              best_window / 2.0);
  return dropped == 0 ? 0 : 1;
}
