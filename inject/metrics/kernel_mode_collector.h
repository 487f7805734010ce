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
// Locking: see profiler_collector.h; a context's batch is under its Context::mu.
#pragma once

#include "inject/metrics/profiler_collector.h"

namespace kp {

class KernelModeCollector final : public ProfilerCollector {
 public:
  static constexpr size_t kKernelsPerBatch = 16;

  using ProfilerCollector::ProfilerCollector;

  bool wants_nvtx_callbacks() const override { return false; }
  bool wants_launch_callbacks() const override { return true; }
  void OnNvtx(CUpti_CallbackId, const CUpti_NvtxData*) override {}
  void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                const CUpti_CallbackData* data) override;

 private:
  struct KernelContext;

  std::unique_ptr<Context> NewContext() override;
  size_t MaxRanges(const SessionSetup&) const override { return 2 * kKernelsPerBatch; }
  bool AfterEnable(Context*, std::string*) override { return true; }  // started at a launch
  bool BeforeCapture(Context* p, std::vector<Result>* results, std::string* error) override;
  bool FlushLocked(Context* p, std::vector<Result>* results, std::string* error) override;
  void FinalNotices(Context* p, std::vector<std::string>* warnings) override;
  void ShutdownNotices() override {}

  // Stops the batch if started; decodes a stopped batch.
  bool Collect(KernelContext* p, std::vector<Result>* results, std::string* error);
};

}  // namespace kp
