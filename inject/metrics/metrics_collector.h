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

#include "inject/config/config.h"

namespace kp {

class TraceEncoder;
// Runs `task` on the encoder thread, in order. Thread-safe, never blocks on CUDA; allocation
// per task is fine (metric results are per range occurrence, not per kernel).
using EncoderPost = std::function<void(std::function<void(TraceEncoder&)> task)>;

class MetricsCollector {
 public:
  virtual ~MetricsCollector() = default;

  // Returns nullptr when config.metrics is empty. Validates what can be validated without a
  // context; an invalid metric name yields nullptr with *error set (one line, names the metric
  // and how to list valid ones), and the tracer then runs without metrics.
  static std::unique_ptr<MetricsCollector> Create(const Config& config, EncoderPost post,
                                                  std::string* error);

  // What the tracer must enable for us on its subscriber.
  virtual bool wants_nvtx_callbacks() const = 0;    // CUPTI_CB_DOMAIN_NVTX, all cbids
  virtual bool wants_launch_callbacks() const = 0;  // runtime+driver kernel-launch cbids

  // Callbacks, forwarded as they arrive (application threads; must be thread-safe).
  virtual void OnContextCreated(CUcontext ctx, uint32_t device_ordinal) = 0;
  virtual void OnContextDestroying(CUcontext ctx) = 0;
  virtual void OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) = 0;
  virtual void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const CUpti_CallbackData* data) = 0;
  // True for kernels the profiler itself launched, so the tracer marks them
  // RECORD_FLAG_PROFILER_INTERNAL (called on the encoder thread with the mangled name).
  virtual bool IsProfilerInternalKernel(const char* name) const = 0;

  // At exit or cudaDeviceReset, before the final activity flush: stop, decode, post results.
  virtual void Shutdown() = 0;
};

}  // namespace kp
