// profiler_session.h: the CUPTI boundary of metric collection. A ProfilerSession is the range
// profiler on one CUDA context (Enable, SetConfig, Start, Stop, PushRange, PopRange, decode and
// evaluate, Disable) with the host time of each call; a ProfilerBackend is what the collectors
// need from the process besides sessions (profiler initialization, the current context, the
// clock). The collectors (range_mode_collector.h, kernel_mode_collector.h) see only these
// interfaces: the CUPTI implementation is cupti_profiler_session.h, and CPU tests drive the
// collectors with a scripted one (tests/unit/metrics_collector_test.cc).
//
// A session disables whatever it enabled: a failed Enable disables what it had enabled, after a
// failed call the collector calls Disable() (idempotent), and the destructor does it too.
//
// Thread safety: a session is not thread-safe; its collector calls it with the context's mutex
// held (see profiler_collector.h). A backend is thread-safe.
#pragma once

#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/ms_since.h"
#include "common/status.h"
#include "inject/config/config.h"
#include "inject/metrics/kernel_facts.h"
#include "inject/metrics/kernel_launch.h"

namespace kp {

// The calls whose host time is accounted and reported in the final notice.
enum class SessionCall {
  kStart,
  kStop,
  kPush,
  kPop,
  kDecode,
  kRearm,
  kFlush,     // FlushL2
  kSync,      // kp's replay: cuCtxSynchronize before a measured kernel
  kSave,      // kp's replay: checkpoint of the context's memory before a multi-pass kernel
  kRestore,   // kp's replay: the checkpoint restored before each further pass
  kRelaunch,  // kp's replay: the kernel launched again for a further pass
  kCount
};

// How the range profiler is configured: user ranges with user replay (range mode), auto ranges
// with user replay (kernel mode when kp replays each kernel itself, with cache control between
// passes), or auto ranges with CUPTI's kernel replay (kernel mode with KP_METRICS_CACHE=none).
enum class RangeReplay { kUserRangesUserReplay, kAutoRangesUserReplay, kAutoRangesKernelReplay };

struct CallTimes {
  uint64_t count = 0;
  double total_ms = 0, max_ms = 0;
  void Add(double ms) {
    ++count;
    total_ms += ms;
    if (ms > max_ms) max_ms = ms;
  }
};

// What set-up found out about the context and the metric set.
struct SessionSetup {
  uint32_t device = 0, context_id = 0;
  std::string chip;
  std::vector<std::string> names;  // the metric names, in value order
  size_t num_passes = 0;
  double availability_ms = 0, config_ms = 0;  // set-up steps' host time, for the notice
};

// One evaluated range of a decoded counter-data image.
struct DecodedRange {
  size_t index = 0;            // range index in the image
  std::string name;            // CUPTI's range name
  std::vector<double> values;  // in SessionSetup::names order
};

class ProfilerSession {
 public:
  // A subclass's destructor must call Disable() (the base cannot call into a destroyed
  // subclass).
  virtual ~ProfilerSession() = default;

  // Device support, chip, counter availability and the config image for `metrics` (validated
  // with common/metric_plan.h). No range-profiler state is created yet.
  virtual StatusOr<SessionSetup> Plan(const std::vector<std::string>& metrics) = 0;
  // Enables the range profiler on the context, sizes and initializes the counter-data image for
  // `max_ranges` and sets the config (`replay`). On failure everything enabled so far is
  // disabled again.
  Status Enable(RangeReplay replay, size_t max_ranges);
  Status Start();
  // True when CUPTI has every pass of the set (multi-pass user replay). The session counts as
  // stopped even when the call fails.
  StatusOr<bool> Stop();
  Status PushRange(const std::string& name);
  Status PopRange();
  // Decodes the image and evaluates the ranges `want(index, name)` selects, then re-arms the
  // image and the config. Ranges whose values are all NaN (an incomplete multi-pass cycle)
  // and ranges CUPTI dropped are added to *dropped instead of returned.
  StatusOr<std::vector<DecodedRange>> Decode(
      const std::function<bool(size_t, const std::string&)>& want, uint64_t* dropped);
  // Empties the L2 so that the next measured work starts from it as under ncu's cache control:
  // the driver writes back and invalidates the whole L2 (l2_evict.h) at once, not in stream
  // order, so a caller that needs the context's earlier work out of it synchronizes first
  // (kernel mode does); with KP_METRICS_L2_FLUSH=sweep, or where the driver refuses
  // (flush_fallback() says why, from then on), reads 2x the L2 on a stream of kp's own,
  // discards it and waits (l2_sweep.h). Driver calls; no other thread measures on the context
  // meanwhile.
  virtual Status FlushL2() = 0;
  // Why the driver's flush was refused and FlushL2 sweeps instead; empty while it is not.
  const std::string& flush_fallback() const { return flush_fallback_; }
  // kp's own kernel replay (kernel mode with cache control; each call timed):
  // waits for all work on the context;
  Status SynchronizeContext();
  // saves the context's device memory (CUPTI checkpoint; replaces the previous save);
  Status SaveMemory();
  // restores it, so that a further pass starts from the memory the first one started from;
  Status RestoreMemory();
  // frees the saved copy (idempotent; also done by Disable);
  void FreeMemory();
  // issues the launch again (kernel_launch.h).
  Status Relaunch(const KernelLaunch& launch);
  // What a kernel record says of `launch` (kernel_facts.h), CUPTI's stream id included, for a
  // launch measured with kernel records off for it. Not timed (driver queries, microseconds).
  KernelFacts DescribeLaunch(const KernelLaunch& launch) { return DoDescribeLaunch(launch); }
  // Disables the range profiler if this session enabled it (stopping it first if started).
  // Idempotent; a failure to disable is logged at KP_LOG=debug (the session is closed anyway).
  void Disable();

  bool started() const { return started_; }
  bool enabled() const { return enabled_; }
  const CallTimes& times(SessionCall c) const { return times_[static_cast<int>(c)]; }
  // Host time of a call made outside the session (the collector times the sweep itself).
  void AddTime(SessionCall c, double ms) { times_[static_cast<int>(c)].Add(ms); }
  // "Start 9x 1.620 ms (max 2.100), Stop ...": the calls that ran.
  std::string FormatCallTimes() const;

 protected:
  // The range-profiler calls, one each (cupti_profiler_session.cc; the CPU tests script them).
  // The public functions above own the state (enabled, started), the call times and the
  // clean-up on failure, so every implementation disables what it enabled.
  virtual Status DoEnable(RangeReplay replay, size_t max_ranges) = 0;  // the profiler object
  virtual Status DoSizeImage() = 0;  // the counter-data image for the metrics and max_ranges
  virtual Status DoInitImage() = 0;
  virtual Status DoSetConfig() = 0;
  virtual Status DoStart() = 0;
  virtual StatusOr<bool> DoStop() = 0;  // all passes submitted
  virtual Status DoPushRange(const std::string& name) = 0;
  virtual Status DoPopRange() = 0;
  virtual StatusOr<std::vector<DecodedRange>> DoDecode(
      const std::function<bool(size_t, const std::string&)>& want, uint64_t* dropped) = 0;
  virtual Status DoDisable() = 0;
  virtual Status DoSynchronizeContext() = 0;
  virtual Status DoSaveMemory() = 0;
  virtual Status DoRestoreMemory() = 0;
  virtual void DoFreeMemory() = 0;
  virtual Status DoRelaunch(const KernelLaunch& launch) = 0;
  virtual KernelFacts DoDescribeLaunch(const KernelLaunch& launch) = 0;

  std::string flush_fallback_;  // set by a FlushL2 that falls back to the sweep

 private:
  // Adds the time from construction to destruction to one call's times.
  class Timer {
   public:
    Timer(ProfilerSession* s, SessionCall c)
        : t_(&s->times_[static_cast<int>(c)]), t0_(std::chrono::steady_clock::now()) {}
    ~Timer() { t_->Add(MsSince(t0_)); }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    CallTimes* t_;
    std::chrono::steady_clock::time_point t0_;
  };

  bool enabled_ = false;
  bool started_ = false;
  CallTimes times_[static_cast<int>(SessionCall::kCount)];
};

class ProfilerBackend {
 public:
  virtual ~ProfilerBackend() = default;
  // A session on `ctx` (nothing is called on the GPU yet).
  virtual std::unique_ptr<ProfilerSession> NewSession(CUcontext ctx) = 0;
  // The profiler interface, once per process (cuptiProfilerInitialize / DeInitialize).
  virtual Status Initialize() = 0;
  virtual void DeInitialize() = 0;
  // The context current on the calling thread (nullptr: none or the driver is not ready).
  virtual CUcontext CurrentContext() = 0;
  // The trace clock (CUPTI timestamps, ns).
  virtual uint64_t Now() = 0;
  // The chip name of device `ordinal` ("GH100"), for the start-up check of metric names.
  virtual StatusOr<std::string> ChipName(uint32_t ordinal) = 0;
};

// The CUPTI implementation (cupti_profiler_session.cc); its sessions flush the L2 with `flush`
// (KP_METRICS_L2_FLUSH).
std::unique_ptr<ProfilerBackend> NewCuptiProfilerBackend(MetricsL2Flush flush);

}  // namespace kp
