// pc_sampler.h: KP_PC_SAMPLING=stall — warp-stall reasons per kernel from CUPTI's PC sampling
// API (cupti_pcsampling.h) in continuous mode, without kernel replay or serialization.
//
// Per CUDA context, at its creation callback: Enable, read the device's stall-reason table,
// configure (period, all reasons, continuous mode, kp's buffers). A collector thread reads the
// samples with cuptiPCSamplingGetData every kPollMs (CUPTI's own decode threads run on a 100 ms
// cycle); module unload and context destroy drain the context first, since CUPTI needs a flush
// before a module's PCs can be reused; exit drains and Disables every context. Samples are
// summed per kernel name (pc_stall_aggregator.h) and posted to the encoder thread as PcStalls
// records. Application threads only ever run the resource callbacks here (context create and
// destroy, module load and unload): no work on the launch path. See docs/pc-sampling.md.
#pragma once

#include <cupti.h>

#include <functional>
#include <memory>

#include "inject/pc_sampling/pc_sampling_config.h"

namespace kp {

class TraceEncoder;

class PcSampler {
 public:
  using EncoderPost = std::function<void(std::function<void(TraceEncoder&)>)>;
  // nullptr when KP_PC_SAMPLING is off. `range_profiler` = KP_METRICS is set too: CUPTI then
  // delivers no PC samples (seen on the H200), which kp says once, up front.
  static std::unique_ptr<PcSampler> Create(const PcSamplingConfig& config, bool range_profiler,
                                           EncoderPost post);
  virtual ~PcSampler() = default;

  // The resource callbacks it needs (module load/unload) on the tracer's subscriber.
  virtual void EnableCallbacks(CUpti_SubscriberHandle subscriber) = 0;
  // Every RESOURCE-domain callback of the tracer; it picks the ones it needs.
  virtual void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) = 0;
  // At exit, before the trace's last chunk: reads and disables every context, posts the rest.
  virtual void Shutdown() = 0;
};

}  // namespace kp
