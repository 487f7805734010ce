// kernel_mode_collector.h: KP_METRICS_MODE=kernel. CUPTI's range profiler with auto ranges and
// kernel replay, started at the first launch; each range is one kernel, in launch order,
// matched to the launch callbacks (correlation id, symbol name). Every kKernelsPerBatch
// launches the batch is stopped, decoded and posted. Kernels are serialized and replayed once
// per pass: ncu-like values at ncu-like cost. Graph launches are not measured per kernel (the
// batch is closed before them). No L2 sweep: CUPTI replays each kernel internally and nothing
// can run between its passes; with a multi-pass set every kernel reads ~8-23 MB more
// dram__bytes_write on the H200 than with a single-pass one (a warning says so at set-up).
//
// Stream capture (capture_gate.h): at a capture begin the batch is stopped (a started profiler
// would invalidate the capture) and decoded at the next launch after the capture, so the
// application's cudaStreamBeginCapture callback makes one CUPTI call at most; launches during
// a capture are not measured (counted, a notice at exit).
//
// Targeting (kernel_selector.h: KP_METRICS_KERNELS, KP_METRICS_LAUNCH_*,
// KP_METRICS_NVTX_INCLUDE): a launch not selected makes no profiler call and sets up no
// session; if its context's profiler is running (the previous launch was selected), the
// profiler is stopped first (as before a capture), so the launch runs unserialized and
// unreplayed. Once a global launch count is reached every context's profiler is flushed and
// disabled at the next launch, and later launches cost one atomic load.
//
// Locking: see profiler_collector.h; a context's batch is under its Context::mu. The selector
// and the NVTX stacks have mutexes of their own, never held across a call out of this class.
#pragma once

#include <unordered_map>
#include <vector>

#include "inject/metrics/kernel_selector.h"
#include "inject/metrics/nvtx_range_events.h"
#include "inject/metrics/profiler_collector.h"
#include "inject/metrics/range_selector.h"

namespace kp {

class KernelModeCollector final : public ProfilerCollector {
 public:
  static constexpr size_t kKernelsPerBatch = 16;

  KernelModeCollector(const Config& config, std::vector<std::string> metrics, EncoderPost post,
                      std::unique_ptr<ProfilerBackend> backend);

  bool wants_nvtx_callbacks() const override { return selector_.wants_nvtx(); }
  bool wants_launch_callbacks() const override { return true; }
  void OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) override;
  void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                const CUpti_CallbackData* data) override;

 private:
  struct KernelContext;

  std::unique_ptr<Context> NewContext() override;
  size_t MaxRanges(const SessionSetup&) const override { return 2 * kKernelsPerBatch; }
  Status AfterEnable(Context*) override { return Status(); }  // started at a launch
  Status BeforeCapture(Context* p, std::vector<Result>* results) override;
  Status FlushLocked(Context* p, std::vector<Result>* results) override;
  void FinalNotices(Context* p, std::vector<std::string>* warnings) override;
  void ShutdownNotices() override;

  // Stops the batch if started; decodes a stopped batch.
  Status Collect(KernelContext* p, std::vector<Result>* results);
  Status StopSession(KernelContext* p);  // p->mu held, session started
  // A launch not selected: stops `ctx`'s running profiler, or, once the selection is done,
  // flushes and disables every context's profiler (once).
  void NotSelected(CUcontext ctx);
  // Whether a KP_METRICS_NVTX_INCLUDE range is open on the calling thread.
  bool InIncludedRange();

  KernelSelector selector_;
  RangeSelector nvtx_include_;
  NvtxRangeEvents nvtx_;
  std::atomic<int> sessions_started_{0};  // a hint: profilers started and not yet stopped
  std::atomic<bool> torn_down_{false};
  // One thread's open push/pop ranges: per domain, whether each matches
  // KP_METRICS_NVTX_INCLUDE; and how many open ones match.
  struct ThreadRanges {
    std::unordered_map<const void*, std::vector<bool>> stacks;
    int matching_open = 0;
  };
  std::mutex nvtx_mu_;  // guards nvtx_stacks_
  std::unordered_map<uint32_t, ThreadRanges> nvtx_stacks_;
};

}  // namespace kp
