// metrics_collector.h: the contract between the tracer (inject/cupti) and hardware-metric
// collection (inject/metrics). The tracer owns the single CUPTI subscriber and fans callbacks
// out to the collector; the collector drives the CUPTI range profiler and posts its results to
// the encoder thread through `post`. Nothing here may throw or abort: on any failure the
// collector posts a Notice, prints one `kp: metrics: ...` line, and turns itself off while
// tracing goes on.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "inject/config/config.h"
#include "inject/trace/records.h"

namespace kp {

class TraceEncoder;
class ProfilerBackend;  // profiler_session.h
// Runs `task` on the encoder thread, in order. Thread-safe, never blocks on CUDA; allocation
// per task is fine (metric results are per range occurrence, not per kernel).
using EncoderPost = std::function<void(std::function<void(TraceEncoder&)> task)>;

// The kernel activity kind (CONCURRENT_KERNEL), as the tracer switches it. On Hopper CUPTI times
// kernels for their records by instrumenting them (a few instructions per warp), and the range
// profiler counts those instructions; kernel mode's own replay switches the kind off around
// the passes it measures, so that they run as under ncu. Thread-safe.
class KernelRecords {
 public:
  virtual ~KernelRecords() = default;
  // Kernel records are being taken now (configured, and inside a capture window).
  virtual bool on() const = 0;
  // Off until Resume, whatever the capture windows do meanwhile (a window that opens or
  // closes takes effect at the Resume). Not counted: one suspension at a time (the caller
  // counts its holders). False when the kind could not be switched off (it is still on).
  virtual bool Suspend() = 0;
  virtual void Resume() = 0;
};

class MetricsCollector {
 public:
  virtual ~MetricsCollector() = default;

  // nullptr when config.metrics is empty. Validates what can be validated without a context;
  // an invalid metric name is an error (one line, names the metric and how to list valid ones),
  // and the tracer then runs without metrics.
  static StatusOr<std::unique_ptr<MetricsCollector>> Create(const Config& config, EncoderPost post);
  // The same on another backend than CUPTI's (CPU tests drive the collectors with a fake).
  static StatusOr<std::unique_ptr<MetricsCollector>> CreateWithBackend(
      const Config& config, EncoderPost post, std::unique_ptr<ProfilerBackend> backend);

  // What the tracer must enable for us on its subscriber.
  virtual bool wants_nvtx_callbacks() const = 0;    // CUPTI_CB_DOMAIN_NVTX, all cbids
  virtual bool wants_launch_callbacks() const = 0;  // runtime+driver kernel-launch cbids

  // Callbacks, forwarded as they arrive (application threads; must be thread-safe). The first
  // context's creation checks the metric names against its chip (before any kernel runs).
  virtual void OnContextCreated(CUcontext ctx, uint32_t device_ordinal) = 0;
  virtual void OnContextDestroying(CUcontext ctx) = 0;
  virtual void OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) = 0;
  virtual void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const CUpti_CallbackData* data) = 0;
  // Stream-capture begin/end calls (runtime and driver cbids from CaptureCbids(), both sites;
  // always enabled when there is a collector): while an application captures a CUDA graph the
  // range profiler must not be touched, or the capture is invalidated.
  virtual void OnStreamCapture(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                               const CUpti_CallbackData* data) = 0;
  // True for kernels the profiler itself launched, so the tracer marks them
  // RECORD_FLAG_PROFILER_INTERNAL (called on the encoder thread with the mangled name).
  virtual bool IsProfilerInternalKernel(const char* name) const = 0;
  // The same for a kernel record by its correlation id, asked for each kernel record in the
  // order the records arrive (encoder thread): kp's own kernel replay (kernel mode with cache
  // control) relaunches a kernel from inside the application's launch call, and CUPTI gives
  // the relaunches that call's correlation id; the first record of such an id is the
  // application's own launch, the following ones are kp's.
  virtual bool IsProfilerInternalLaunch(uint32_t /*correlation*/) const { return false; }

  // The tracer's switch of kernel records, when they are configured (before any callback;
  // outlives the collector). Without one, measured kernels run with whatever the kind is.
  virtual void SetKernelRecords(KernelRecords* /*records*/) {}
  // Where the kernel records kp makes go (kernel mode's one-pass measurements, which switch
  // CUPTI's record of the launch off): called on the encoder thread, from a posted task, with
  // the encoder. The tracer routes them through its activity decoder, so that capture windows
  // and discard intervals apply to them as to CUPTI's; unset, they go straight to the encoder.
  using KernelRecordSink = std::function<void(TraceEncoder&, const KernelRecord&)>;
  virtual void SetKernelRecordSink(KernelRecordSink /*sink*/) {}

  // The stream-capture begin/end callback ids of `domain` (runtime or driver), and whether
  // `cbid` is one that begins a capture.
  static const std::vector<CUpti_CallbackId>& CaptureCbids(CUpti_CallbackDomain domain) {
    static const std::vector<CUpti_CallbackId> kRuntime = {
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000,
    };
    static const std::vector<CUpti_CallbackId> kDriver = {
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
        CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
        CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
    };
    static const std::vector<CUpti_CallbackId> kNone;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return kRuntime;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return kDriver;
    return kNone;
  }
  static bool IsCaptureCbid(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    for (CUpti_CallbackId c : CaptureCbids(domain))
      if (c == cbid) return true;
    return false;
  }
  static bool IsCaptureBegin(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
      return cbid != CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000 &&
             cbid != CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000;
    return cbid != CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture &&
           cbid != CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz;
  }

  // At the trace's finish (exit, signal), before the final activity flush: stop, decode, post
  // results. (A context's destruction, cudaDeviceReset's too, goes to OnContextDestroying.)
  virtual void Shutdown() = 0;
};

}  // namespace kp
