// profiler_collector.h: what range mode (range_mode_collector.h) and kernel mode
// (kernel_mode_collector.h) share: one range-profiler session per CUDA context, set up lazily,
// the stream-capture gate, posting results and notices to the encoder, and the final flush.
//
// Set-up is lazy and per context: at the first measured NVTX range (range mode) or the first
// kernel launch (kernel mode) the session checks device support and counter availability,
// builds the config image (names validated by common/metric_plan.h, the same code as
// `kptrace metrics check`) and enables the range profiler; a MetricConfig and a Notice with the
// set-up time follow (0.5-1 s on the H200; it is kept out of the first range's timing). The
// metric names were already checked at the first context's creation (CheckNamesAtStartup),
// before the program's first kernel, whether or not a range is ever measured.
//
// Errors: any failing call prints one `kp: metrics: <call> failed: ...` line, posts a Notice,
// disables the context's session and turns metrics off; tracing goes on.
//
// LOCKING RULES (every collector):
//  - mu_ guards the maps of this class; it is never held across a CUDA or CUPTI call.
//  - Context::mu guards one context's state and its session, and is held across the session's
//    range-profiler calls (which never call back into kp), so that a flush from another thread
//    (context destroy, Shutdown) or a capture begin cannot interleave with a push, pop or
//    launch. It is also held across the L2 flush (FlushL2: the driver's evict, or kp's sweep
//    kernels), so that a capture cannot begin during them; the driver calls made under it
//    reach kp's callbacks, which return at once for calls made inside a kp callback.
//    Kernel mode's own replay (kernel_mode_collector.h) holds it longest: from a measured
//    launch's entry callback to its exit callback, across its synchronize, memory
//    save/restore, flushes and relaunches, so a capture begin or a flush waits for the
//    measured kernel; the final flush waits at most kFinalFlushWait.
//  - setup_mu_ serializes the one-time per-context set-up and capture begins, so a capture
//    never starts while a set-up is in flight. A set-up whose counter-availability query or
//    enable finds the counters busy sleeps between its retries (RetryWhileBusy: at most 0.71 s
//    per call) with setup_mu_ held: a capture begin may wait that long, once. Order: setup_mu_,
//    then Context::mu (several: in address order), then mu_.
//  - Posts to the encoder (post_) happen after Context::mu is released.
//  - At a capture begin (the application's cudaStreamBeginCapture callback) every Context::mu
//    is taken and the gate raised under them: a push or launch either finished before or sees
//    the gate. Range mode makes no CUPTI call there; kernel mode only stops its batch (a
//    started profiler would invalidate the capture); decoding waits for the next launch.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "inject/metrics/capture_gate.h"
#include "inject/metrics/metrics_collector.h"
#include "inject/metrics/profiler_session.h"
#include "proto/kptrace_schema.h"

namespace kp {

class ProfilerCollector : public MetricsCollector {
 public:
  // One finished measurement, ready to post.
  struct Result {
    std::string name, domain;
    uint64_t occurrence = 0;
    uint32_t occurrences_used = 0;
    uint64_t start = 0, end = 0;
    uint32_t thread_id = 0, device = 0, context = 0, correlation = 0;
    std::vector<double> values;
    // Multi-pass: the shortest and longest occurrence that gave a pass, and whether they
    // differ by more than kInconsistentSpread.
    uint64_t min_duration = 0, max_duration = 0;
    bool inconsistent = false;
    bool tainted = false;  // multi-pass: a pass of this cycle is unusable; not posted
  };

  // One context's session and state. Subclasses extend it (NewContext). Guarded by `mu`.
  struct Context {
    virtual ~Context() = default;
    CUcontext ctx = nullptr;
    SessionSetup setup;
    std::unique_ptr<ProfilerSession> session;
    size_t max_ranges = 0;
    bool multi_pass = false;
    bool closed = false;
    std::shared_ptr<uint32_t> config_id = std::make_shared<uint32_t>(0);
    int sm_clock_index = -1;  // metric giving the SM clock in Hz, if the user asked for one
    // Metrics kp added to the end of setup.names for itself (kernel mode's gpu__time_duration):
    // measured, but left out of the MetricConfig and of every posted value set.
    size_t hidden_metrics = 0;
    // The metrics the configuration asked for: the first of setup.names.
    size_t shown_metrics() const {
      return setup.names.size() - std::min(hidden_metrics, setup.names.size());
    }
    uint64_t ranges_dropped = 0;  // NaN-only results and ranges CUPTI dropped
    // Kernel mode's own replay holds it from a launch's entry to its exit; the final flush
    // waits for that at most kFinalFlushWait.
    std::mutex mu;
  };
  // How long the final flush of a context waits for a kernel still being measured on it.
  static constexpr std::chrono::milliseconds kFinalFlushWait{3000};

  ProfilerCollector(const Config& config, std::vector<std::string> metrics, EncoderPost post,
                    std::unique_ptr<ProfilerBackend> backend);
  ~ProfilerCollector() override;

  void OnContextCreated(CUcontext ctx, uint32_t device_ordinal) override;
  void OnContextDestroying(CUcontext ctx) override;
  void OnStreamCapture(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                       const CUpti_CallbackData* data) override;
  bool IsProfilerInternalKernel(const char* name) const override;
  void Shutdown() override;

  bool off() const { return off_.load(); }

 protected:
  // --- what each mode supplies ---
  virtual std::unique_ptr<Context> NewContext() = 0;
  virtual size_t MaxRanges(const SessionSetup& setup) const = 0;
  // After Enable, p->mu not yet shared: e.g. single-pass range mode starts here.
  virtual Status AfterEnable(Context* p) = 0;
  // p->mu held, the gate not yet raised: what must happen before a capture starts.
  virtual Status BeforeCapture(Context* p, std::vector<Result>* results) = 0;
  // The session's set-up for the configured metrics: p->session->Plan(metrics_) by default. A
  // mode may plan more (and set p->hidden_metrics) or replace p->session.
  virtual StatusOr<SessionSetup> PlanSession(Context* p);
  // How the sessions are configured (range mode: user ranges and user replay).
  virtual RangeReplay replay() const { return RangeReplay::kUserRangesUserReplay; }
  // p->mu held: stop and collect everything pending (context destroy, Shutdown).
  virtual Status FlushLocked(Context* p, std::vector<Result>* results) = 0;
  // p->mu held, at the final flush: warnings about what could not be measured.
  virtual void FinalNotices(Context* p, std::vector<std::string>* warnings) = 0;
  // At Shutdown, after every context is flushed.
  virtual void ShutdownNotices() = 0;

  // --- shared ---
  // The context's profiler, set up at the first call; nullptr when off, closed or failed.
  Context* ProfilerFor(CUcontext ctx);
  // Turns metrics off with one line and an error notice (the first failure only).
  void Fail(const Status& failure);
  void Notice(int severity, const std::string& message);
  void PostResults(Context* p, std::vector<Result> results);
  // p->mu held, no other thread measuring on the context: session->FlushL2, timed
  // (SessionCall::kFlush). When the driver's flush was refused and the sweep stands in, one
  // warning line per process now and one trace notice at the context's final flush.
  Status FlushL2(Context* p);
  void FlushContext(Context* p, bool final);
  // Checks the metric names for the chip of `device` (the same check as `kptrace metrics
  // check`); a bad name turns metrics off with one line naming it and the closest names.
  void CheckNamesAtStartup(uint32_t device);
  // The calling thread's kernel thread id (as the trace's thread ids).
  static uint32_t ThreadId();

  // kp.NoticeSeverity values (generated from proto/kptrace.proto).
  static constexpr int kNoticeInfo = schema::NoticeSeverity::kInfo,
                       kNoticeWarning = schema::NoticeSeverity::kWarning,
                       kNoticeError = schema::NoticeSeverity::kError;
  // A multi-pass value set is flagged inconsistent when its longest occurrence is more than
  // (1 + kInconsistentSpread) times its shortest. Occurrence times are host times from push to
  // pop and include the profiler's own calls, so normal steps vary: on the H200 a PyTorch
  // step's occurrences spread up to 1.8x (7.0-12.5 ms) and DDP steps with gloo 1.9x, while a
  // warm-up step against normal ones is ~100x.
  static constexpr double kInconsistentSpread = 1.0;

  const Config config_;
  const MetricsMode mode_;
  const std::vector<std::string> metrics_;
  const bool debug_;
  EncoderPost post_;
  const std::unique_ptr<ProfilerBackend> backend_;
  StreamCaptureGate gate_;
  std::atomic<bool> off_{false};
  std::atomic<bool> failed_{false};  // Fail() has printed its line
  std::atomic<bool> flush_fallback_said_{false}, flush_fallback_noticed_{false};
  std::atomic<uint64_t> skipped_during_capture_{0};

  std::mutex mu_;  // guards the maps below; never held across a CUDA/CUPTI call
  std::unordered_map<CUcontext, uint32_t> context_devices_;
  std::unordered_map<CUcontext, std::unique_ptr<Context>> profilers_;
  std::vector<std::unique_ptr<Context>> retired_;  // destroyed contexts' profilers
  bool names_checked_ = false;
  std::mutex setup_mu_;  // serializes the one-time per-context set-up and capture begins

 private:
  mutable std::mutex seen_mu_;  // IsProfilerInternalKernel's debug log (encoder thread)
  mutable std::vector<std::string> seen_kernels_;
};

}  // namespace kp
