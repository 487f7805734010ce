// callback_cost_rounds.cc: the timed loops of kp_callback_cost (bench/callback_cost.cc), built
// as a shared library as libkpinject.so and libkpfloor.so are, so that their thread-locals are
// reached the way they are in the injected libraries (__tls_get_addr), not the cheaper way an
// executable reaches its own.
#include "bench/callback_cost_rounds.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
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

// One launch's callbacks, as CUPTI makes them: four (runtime ENTER, the nested driver call's
// ENTER and EXIT, runtime EXIT) with callbacks in both domains (KP_API=launch-runtime), or the
// driver call's two with callbacks in the driver domain only (the default, KP_API=launch).
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
  void Run(uint32_t correlation, bool driver_only, Callback callback) {
    runtime.correlationId = driver.correlationId = correlation;
    if (!driver_only) {
      runtime.callbackSite = CUPTI_API_ENTER;
      callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
               &runtime);
    }
    driver.callbackSite = CUPTI_API_ENTER;
    callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
    driver.callbackSite = CUPTI_API_EXIT;
    callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
    if (!driver_only) {
      runtime.callbackSite = CUPTI_API_EXIT;
      callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
               &runtime);
    }
  }
};

// The floor's callback, as CUPTI would call it.
constexpr auto kFloorCallback = [](CUpti_CallbackDomain d, CUpti_CallbackId c,
                                   const CUpti_CallbackData* data) {
  kpfloor::OnCallback(nullptr, d, c, data);
};

// kp's recorder's callback.
auto RecorderCallback(kp::ApiCallRecorder& recorder) {
  return [&recorder](CUpti_CallbackDomain d, CUpti_CallbackId c, const CUpti_CallbackData* data) {
    recorder.OnCallback(d, c, data);
  };
}

}  // namespace

double FloorRound(long launches, bool driver_only) {
  Launch launch;
  double ns = 0;
  for (long done = 0; done < launches; done += 4096) {  // blocks, as kp's side (KpRound)
    const long n = std::min(4096L, launches - done);
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      launch.Run(static_cast<uint32_t>(done + i + 1), driver_only, kFloorCallback);
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
  const bool driver_only;
  kp::ApiCallRecorder recorder;
  explicit KpSide(bool driver_only_calls)
      : driver_only(driver_only_calls),
        recorder(nullptr,
                 driver_only_calls ? kp::ApiLevel::kDriver : kp::ApiLevel::kRuntimeAndDriver) {
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
namespace {
constexpr long kBlock = 4096;
volatile int g_sink = 0;
}  // namespace

double KpRound(KpSide& kp_side, long launches, uint32_t* correlation) {
  Launch launch;
  const auto callback = RecorderCallback(kp_side.recorder);
  double ns = 0;
  for (long done = 0; done < launches; done += kBlock) {
    const long n = std::min(kBlock, launches - done);
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      launch.Run(++*correlation, kp_side.driver_only, callback);
    }
    ns += NsPer(start, 1);
    kp_side.Drain();
  }
  return ns / static_cast<double>(launches);
}

// Outside a capture window: the same four callbacks with recording off (SetRecording(false)).
double KpOffRound(KpSide& kp_side, long launches, uint32_t* correlation) {
  kp::ApiCallRecorder& recorder = kp_side.recorder;
  recorder.SetRecording(false);
  const double ns = KpRound(kp_side, launches, correlation);
  recorder.SetRecording(true);
  return ns;
}

// Only the dispatch into the recorder, a callback that returns at once (a lower bound for
// kp's part of a subscribed callback, what remains if the body were empty).
double EmptyRound(long launches, bool driver_only) {
  Launch launch;
  double ns = 0;
  for (long done = 0; done < launches; done += kBlock) {
    const long n = std::min(kBlock, launches - done);
    const auto start = Clock::now();
    for (long i = 0; i < n; ++i) {
      launch.Run(
          static_cast<uint32_t>(done + i + 1), driver_only,
          [](CUpti_CallbackDomain d, CUpti_CallbackId, const CUpti_CallbackData*) { g_sink = d; });
    }
    ns += NsPer(start, 1);
  }
  return ns / static_cast<double>(launches);
}

// While it lives, drains `kp_side`'s rings every 10 ms from a thread of its own, as kp's encoder
// thread does (nothing for a null side).
class Drainer {
 public:
  explicit Drainer(KpSide* kp_side) {
    if (kp_side == nullptr) return;
    thread_ = std::thread([this, kp_side] {
      while (!stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        kp_side->Drain();
      }
    });
  }
  ~Drainer() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Launches at a program's pace (`spin_ns` of busy work before each), kp's rings drained every
// 10 ms by a thread of their own, as kp's encoder thread does: the whole loop's ns per launch.
double PacedRound(KpSide* kp_side, long launches, long spin_ns, PacedCallbacks callbacks,
                  uint32_t* correlation) {
  Launch launch;
  const auto kp_callback = RecorderCallback(kp_side->recorder);
  const Drainer drainer(callbacks == PacedCallbacks::kKp ? kp_side : nullptr);
  const auto start = Clock::now();
  for (long i = 0; i < launches; ++i) {
    const auto until = Clock::now() + std::chrono::nanoseconds(spin_ns);
    while (Clock::now() < until) {
    }
    if (callbacks == PacedCallbacks::kFloor) {
      launch.Run(++*correlation, kp_side->driver_only, kFloorCallback);
    } else if (callbacks == PacedCallbacks::kKp) {
      launch.Run(++*correlation, kp_side->driver_only, kp_callback);
    }
  }
  return NsPer(start, launches);
}

// Launches with `evict_bytes` of other memory written before each (a rotating walk over 64 MiB,
// one write per 64-byte line), as a program's own work between two launches pushes the
// callbacks' data out of the core's caches; only the launch's callbacks are timed. kp's rings
// are drained every 10 ms by a thread of their own, as in PacedRound.
double ColdRound(KpSide* kp_side, long launches, size_t evict_bytes, PacedCallbacks callbacks,
                 uint32_t* correlation) {
  static constexpr size_t kArena = 64u << 20;
  static std::vector<uint8_t> arena(kArena);
  static size_t offset = 0;
  Launch launch;
  const auto kp_callback = RecorderCallback(kp_side->recorder);
  const Drainer drainer(callbacks == PacedCallbacks::kKp ? kp_side : nullptr);
  double ns = 0;
  for (long i = 0; i < launches; ++i) {
    for (size_t b = 0; b < evict_bytes; b += 64) {
      arena[offset] = static_cast<uint8_t>(arena[offset] + 1);
      offset = (offset + 64) % kArena;
    }
    const auto start = Clock::now();
    if (callbacks == PacedCallbacks::kFloor) {
      launch.Run(++*correlation, kp_side->driver_only, kFloorCallback);
    } else if (callbacks == PacedCallbacks::kKp) {
      launch.Run(++*correlation, kp_side->driver_only, kp_callback);
    }
    ns += NsPer(start, 1);
  }
  return ns / static_cast<double>(launches);
}

KpSide* NewKpSide(bool driver_only) { return new KpSide(driver_only); }
void DeleteKpSide(KpSide* kp_side) { delete kp_side; }
uint64_t KpDropped(const KpSide* kp_side) { return kp_side->recorder.dropped(); }
