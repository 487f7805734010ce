// range_mode_collector.h: KP_METRICS_MODE=range (the default). NVTX push/pop callbacks drive
// CUPTI's range profiler (user ranges, user replay) through a ProfilerSession.
//
//  - Only the OUTERMOST range matching KP_METRICS_RANGES on a thread is measured; ranges nested
//    inside it (matching or not) are not measured on their own (they are part of its values).
//  - One thread is measured (the "owner"), on the context current there: the range profiler
//    belongs to one context and its push/pop must come from a thread on that context. The owner
//    is the first thread to open a matching range while it has launched GPU work (or, before any
//    thread has launched any, the first to open one): in a training process that is the thread
//    launching the model's kernels, not a communication library's helper thread. With the
//    default KP_METRICS_RANGES (every range), library domains (NCCL, cuBLAS, ...:
//    RangeSelector::IsLibraryDomain) are not picked. A notice names the chosen thread, range and
//    domain; matching ranges on other threads are counted (a notice at exit).
//  - Warm-up (KP_METRICS_SKIP, default 1): the first `skip` occurrences of each measured range
//    name are traced but not measured (the first step of a training loop allocates, tunes
//    cuBLAS and sets up NCCL, and is unlike the rest). A skipped occurrence still holds the
//    outermost slot: ranges nested in it are not measured either.
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
//    Each set records the shortest and longest occurrence that gave it a pass, and is flagged
//    inconsistent when they differ by more than kInconsistentSpread (profiler_collector.h):
//    its ratio metrics combine counters of unlike occurrences.
//  - L2 flush (ProfilerSession::FlushL2, KP_METRICS_CACHE): with `pass` (default) the first
//    measured push after each Start first empties the L2 (the driver's evict, at once: work
//    still running from before the range is not waited for), because the first write-heavy
//    range after a Start otherwise reads ~29 MB
//    more dram__bytes_write on the H200; with `range` before every measured push (ncu's
//    --cache-control all); `none` never. The flush's driver calls run under the context's
//    mutex, between the Start and the PushRange, so a capture begin waits for them.
//  - CUDA-graph stream capture (capture_gate.h): while any capture is in progress no range is
//    pushed (counted, a notice at exit); nothing is called at the capture begin. A measured
//    range popped during a capture is closed later, by its owner thread at its next measured
//    push (or at the final flush), and its values are dropped (its CUPTI range stayed open until
//    then; in multi-pass mode the whole cycle's set is dropped).
//
// Locking: see profiler_collector.h. The per-thread range stacks are thread_local; owner,
// counters and the occurrence map are atomics or under mu_; a context's pass state is under
// its Context::mu. Only the owner thread pushes, pops and flushes.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "inject/metrics/nvtx_range_events.h"
#include "inject/metrics/profiler_collector.h"
#include "inject/metrics/range_selector.h"

namespace kp {

class RangeModeCollector final : public ProfilerCollector {
 public:
  static constexpr size_t kRangesPerImage = 512;
  // Multi-pass range mode: the image holds one pass's ranges only. Its size sets the cost of
  // re-arming it after each full cycle (H200: ~115 ms at 512 ranges, ~3 ms at 16).
  static constexpr size_t kNamesPerPass = 64;

  RangeModeCollector(const Config& config, std::vector<std::string> metrics, EncoderPost post,
                     std::unique_ptr<ProfilerBackend> backend);

  bool wants_nvtx_callbacks() const override { return true; }
  // Launches mark the threads that launch GPU work (the owner is chosen among them).
  bool wants_launch_callbacks() const override { return true; }
  void OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) override;
  void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                const CUpti_CallbackData* data) override;

 private:
  struct RangeContext;

  std::unique_ptr<Context> NewContext() override;
  size_t MaxRanges(const SessionSetup& setup) const override;
  Status AfterEnable(Context* p) override;
  Status BeforeCapture(Context* p, std::vector<Result>* results) override;
  Status FlushLocked(Context* p, std::vector<Result>* results) override;
  void FinalNotices(Context* p, std::vector<std::string>* warnings) override;
  void ShutdownNotices() override;

  void OnRangePush(const void* domain, const std::string& message);
  void OnRangePop(const void* domain);
  // p->mu held. end = 0: now, after PopRange. keep=false: the range's values are dropped (a pop
  // deferred past a capture).
  Status PopLocked(RangeContext* p, uint64_t end, bool keep, std::vector<Result>* results);
  Status FinishDeferredPop(RangeContext* p, std::vector<Result>* results);
  // Stops the profiler and evaluates what is pending; with `restart`, starts again.
  Status Collect(RangeContext* p, bool restart, std::vector<Result>* results);
  Status Start(RangeContext* p);
  // The chosen thread, once: a notice (and a line at KP_LOG=debug).
  void AnnounceOwner(uint32_t tid, const std::string& domain, const std::string& message);

  const RangeSelector selector_;
  const MetricsCache cache_;
  const uint32_t skip_;
  NvtxRangeEvents nvtx_;
  std::atomic<uint64_t> owner_thread_{0};
  std::atomic<bool> any_launch_{false};
  std::atomic<uint64_t> skipped_other_thread_{0};
  std::atomic<uint64_t> skipped_warmup_{0};
  std::map<std::pair<std::string, std::string>, uint64_t> occurrences_;  // under mu_
};

}  // namespace kp
