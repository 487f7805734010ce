// pm_sampling_config.h: KP_PM_SAMPLING and KP_PM_INTERVAL_US (docs/pm-sampling.md).
//
// KP_PM_SAMPLING: off (default), `gpu` (the named set in common/pm_counters.h), or a comma list
// of PM-sampling counter names. The names are checked for syntax here; the check against the
// chip runs when the sampler starts on a device. A bad value turns PM sampling off, never
// tracing (ConfigErrorScope::kPmSampling).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inject/config/config.h"

namespace kp {

// Below 100 us the samples come faster than one thread can decode them: on the H200 host CUPTI
// takes about 50 us of CPU per sample in cuptiPmSamplingDecodeData and 25 us to evaluate it
// (10 counters), so at 50 us 28 % and at 20 us most of the samples were lost.
constexpr uint32_t kPmIntervalMinUs = 100;
constexpr uint32_t kPmIntervalMaxUs = 1000000;

// Reads both variables through `get` into `config` (pm_sampling, pm_sampling_gpu_set,
// pm_interval_us); appends one error per bad value.
void ParsePmSamplingConfig(const GetEnvFn& get, Config* config, std::vector<ConfigError>* errors);

// "off", "gpu" or the comma list, for the trace header.
std::string DescribePmSampling(const Config& config);

}  // namespace kp
