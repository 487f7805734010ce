// pm_sampler.h: KP_PM_SAMPLING, device-wide counters sampled over time (CUPTI PM sampling,
// cupti_pmsampling.h; docs/pm-sampling.md).
//
// One sampler per GPU, each on its own kp-owned thread: set-up (counter availability, config
// image, Enable, SetConfig, Start) and every decode run there, never on a CUDA-calling thread.
// A device's sampler starts at the first context created on it and stops at the last context's
// destruction or at exit. Decoded samples go to the encoder thread in batches (EncoderPost), so
// the trace gets them in order after the sampler's config record.
//
// PM sampling is per device, not per process: the first process to enable it on a GPU samples
// it; in the others cuptiPmSamplingEnable fails and kp says so in one line (tracing goes on).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inject/config/config.h"
#include "inject/trace/trace_encoder.h"

namespace kp {

class PmSampling {
 public:
  using Post = std::function<void(std::function<void(TraceEncoder&)> task)>;

  // nullptr when KP_PM_SAMPLING is off.
  static std::unique_ptr<PmSampling> Create(const Config& config, Post post);
  ~PmSampling();
  PmSampling(const PmSampling&) = delete;
  PmSampling& operator=(const PmSampling&) = delete;

  // From CUPTI's resource callbacks. Never blocks on the sampler's set-up.
  void OnContextCreated(CUcontext context, uint32_t device);
  void OnContextDestroying(CUcontext context);
  // At exit, before the encoder thread drains: stops every sampler, decodes what is left.
  void Shutdown();

 private:
  class DeviceSampler;
  PmSampling(const Config& config, Post post);

  std::vector<std::string> counters_;
  bool gpu_set_ = false;
  uint64_t interval_ns_ = 0;
  Post post_;
  std::mutex mu_;  // guards the maps and shut_down_
  std::map<uint32_t, std::unique_ptr<DeviceSampler>> devices_;
  std::map<CUcontext, uint32_t> context_devices_;
  std::map<uint32_t, int> live_contexts_;
  bool shut_down_ = false;
};

}  // namespace kp
