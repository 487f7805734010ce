// range_collector.h: the MetricsCollector behind KP_METRICS. It drives CUPTI's range profiler
// (cupti_range_profiler.h) on one CUDA context at a time and evaluates values with the Profiler
// Host API. What it does follows what was measured on the H200 (docs/cupti.md, "Range profiler"):
//
// Set-up is lazy and per context: at the first measured NVTX range (range mode) or the first
// kernel launch (kernel mode) it initializes the profiler, checks device support and counter
// availability, builds the config image (names validated by metric_plan.h, the same code as
// `kptrace metrics check`), enables the range profiler and posts a MetricConfig plus a Notice
// with the set-up time (0.5-1 s on the H200; it is kept out of the first range's timing).
//
// Range mode (KP_METRICS_MODE=range, default), driven by NVTX push/pop callbacks:
//  - Only the OUTERMOST range matching KP_METRICS_RANGES on a thread is measured; ranges nested
//    inside it (matching or not) are not measured on their own (they are part of its values).
//  - Only the thread that measured the first range (the "owner"), on the context current there,
//    is measured: the range profiler belongs to one context and its push/pop must come from a
//    thread on that context. Matching ranges on other threads are skipped (counted, logged once
//    at KP_LOG=debug).
//  - Single-pass sets: Start once, give every occurrence its own range name ("name#k", since
//    same-name ranges in one pass are summed), and Stop/Decode only at flush points: counter
//    image nearly full (kRangesPerImage), context destroy, Shutdown. Each occurrence gets its
//    own MetricRange with occurrences_used = 1.
//  - Multi-pass sets: one pass = one repeating unit. A pass starts at a measured push and ends
//    when a measured range name already seen in this pass is pushed again (for a training loop
//    with forward/backward/optimizer, one pass = one step). CUPTI advances the pass index at
//    each Stop; when it reports all passes submitted, every name seen in every pass gets one
//    MetricRange whose occurrences_used = passes (the trace says how many steps the set took).
//    A name missing from some pass comes out NaN and is counted as dropped. The image holds
//    kNamesPerPass ranges (one pass), which keeps Start and the re-arm after each cycle cheap.
//  - L2 sweep (l2_sweep.h, KP_METRICS_CACHE): with `pass` (default) the first measured push after
//    each Start first reads 2x the L2 on kp's own stream and waits, because the first
//    write-heavy range after a Start otherwise reads ~29 MB more dram__bytes_write on the H200;
//    with `range` before every measured push (ncu's --cache-control all); `none` never. The
//    sweep's driver calls run outside the mutexes, between the Start and the PushRange.
// Kernel mode (KP_METRICS_MODE=kernel): AutoRange + KernelReplay, started at the first launch;
// each range is one kernel, in launch order, matched to the launch callbacks (correlation id,
// symbol name). Every kKernelsPerBatch launches the batch is stopped, decoded and posted. Kernels
// are serialized and replayed once per pass: ncu-like values at ncu-like cost. Graph launches
// are not measured per kernel (the batch is closed before them). No L2 sweep in kernel mode:
// CUPTI replays each kernel internally and nothing can run between its passes; with a
// multi-pass set every kernel reads ~8-23 MB more dram__bytes_write on the H200 than with a
// single-pass one (README, known limits).
//
// CUDA-graph stream capture: touching the range profiler while an application captures
// invalidates its capture (seen on the H200: cuptiRangeProfilerStart failed with
// CUPTI_ERROR_UNKNOWN and cudaStreamEndCapture with "operation failed due to a previous error
// during capture"). So OnStreamCapture counts captures in progress (begin/end calls, runtime and
// driver, outermost only): at a begin, kernel mode first closes its batch; while any capture is
// in progress no range is pushed, no launch is measured or starts the profiler (both counted,
// a notice at exit). A measured range popped during a capture is closed later, by its owner
// thread at its next measured push (or at the final flush), and its values are dropped (its
// CUPTI range stayed open until then; in multi-pass mode the whole cycle's set is dropped). A
// begin waits for a profiler set-up in flight (setup_mu_) and closes kernel mode's batch; an
// end counts only when it ends the capture (success, invalidated or unjoined).
//
// Errors: any failing CUPTI call prints one `kp: metrics: <call> failed: ...` line, posts a
// Notice, and turns metrics off; tracing goes on.
//
// Locking: the collector's mutexes are never held while calling into CUDA's driver API; the
// per-context mutex is held across range-profiler calls (which do not call back into kp) so that
// a flush from another thread (context destroy, Shutdown) cannot interleave with a push/pop.
// Posts to the encoder happen after the mutex is released.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "inject/metrics/metric_plan.h"
#include "inject/metrics/metrics_collector.h"
#include "inject/metrics/range_selector.h"

namespace kp {

class RangeCollector final : public MetricsCollector {
 public:
  static constexpr size_t kRangesPerImage = 512;
  // Multi-pass range mode: the image holds one pass's ranges only. Its size sets the cost of
  // re-arming it after each full cycle (H200: ~115 ms at 512 ranges, ~3 ms at 16).
  static constexpr size_t kNamesPerPass = 64;
  static constexpr size_t kKernelsPerBatch = 16;

  RangeCollector(const Config& config, std::vector<std::string> metrics, EncoderPost post);
  ~RangeCollector() override;

  bool wants_nvtx_callbacks() const override { return mode_ == MetricsMode::kRange; }
  bool wants_launch_callbacks() const override { return mode_ == MetricsMode::kKernel; }

  void OnContextCreated(CUcontext ctx, uint32_t device_ordinal) override;
  void OnContextDestroying(CUcontext ctx) override;
  void OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) override;
  void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                const CUpti_CallbackData* data) override;
  void OnStreamCapture(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                       const CUpti_CallbackData* data) override;
  bool IsProfilerInternalKernel(const char* name) const override;
  void Shutdown() override;

  struct ContextProfiler;  // range_collector.cc
  // One finished measurement, ready to post.
  struct Result {
    std::string name, domain;
    uint64_t occurrence = 0;
    uint32_t occurrences_used = 0;
    uint64_t start = 0, end = 0;
    uint32_t thread_id = 0, device = 0, context = 0, correlation = 0;
    std::vector<double> values;
    bool tainted = false;  // multi-pass: a pass of this cycle is unusable; not posted
  };

 private:
  void OnRangePush(const void* domain, std::string message);
  void OnRangePop(const void* domain);
  // p->mu held. end = 0: now, after PopRange. keep=false: the range's values are dropped (a pop
  // deferred past a capture).
  bool PopLocked(ContextProfiler* p, uint64_t end, bool keep, std::vector<Result>* results,
                 std::string* error);
  bool FinishDeferredPop(ContextProfiler* p, std::vector<Result>* results,
                         std::string* error);   // p->mu held
  ContextProfiler* ProfilerFor(CUcontext ctx);  // lazy set-up; nullptr when off or failed
  void Fail(const std::string& message);
  void Notice(int severity, const std::string& message);
  void PostResults(ContextProfiler* p, std::vector<Result> results);
  void FlushContext(ContextProfiler* p, bool final);
  std::string DomainName(const void* domain);

  const MetricsMode mode_;
  const MetricsCache cache_;
  const std::vector<std::string> metrics_;
  const RangeSelector selector_;
  const bool debug_;
  EncoderPost post_;

  std::atomic<bool> off_{false};
  std::atomic<uint64_t> owner_thread_{0};
  std::atomic<uint64_t> skipped_other_thread_{0};
  std::atomic<int> active_captures_{0};  // stream captures in progress, process-wide
  std::atomic<uint64_t> skipped_during_capture_{0};

  std::mutex mu_;  // guards the maps below; never held across a CUDA/CUPTI call
  std::unordered_map<CUcontext, uint32_t> context_devices_;
  std::unordered_map<CUcontext, std::unique_ptr<ContextProfiler>> profilers_;
  std::vector<std::unique_ptr<ContextProfiler>> retired_;  // destroyed contexts' profilers
  std::unordered_map<const void*, std::string> domain_names_;
  std::unordered_map<const void*, std::string> registered_strings_;
  std::map<std::pair<std::string, std::string>, uint64_t> occurrences_;  // (domain, name) -> n
  std::mutex setup_mu_;  // serializes the one-time per-context set-up
  bool profiler_initialized_ = false;

  mutable std::mutex seen_mu_;  // IsProfilerInternalKernel's debug log (encoder thread)
  mutable std::vector<std::string> seen_kernels_;
};

}  // namespace kp
