// pc_sampling_config.h: KP_PC_SAMPLING and KP_PC_SAMPLING_PERIOD (docs/pc-sampling.md).
//
// Kept apart from inject/config/config.cc so the PC-sampling settings travel with the code that
// uses them; config.cc calls ParsePcSamplingConfig once and stores the result in Config.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kp {

struct ConfigError;  // config.h

struct PcSamplingConfig {
  bool stall = false;  // KP_PC_SAMPLING=stall; off by default
  // KP_PC_SAMPLING_PERIOD: CUPTI samples each SM's warps every 2^period cycles.
  uint32_t period = kDefaultPeriod;
  static constexpr uint32_t kMinPeriod = 5;  // CUPTI's accepted range (cupti_pcsampling.h)
  static constexpr uint32_t kMaxPeriod = 31;
  // 2^15 cycles (~16 us at 1.98 GHz): chosen by cost on the H200
  // (bench/results/pc_sampling_h200.md).
  static constexpr uint32_t kDefaultPeriod = 15;
};

// Reads the two variables through `getenv`; a bad value appends one error (it names the
// variable and the accepted values) and leaves PC sampling off.
void ParsePcSamplingConfig(const std::function<const char*(const char*)>& getenv,
                           PcSamplingConfig* config, std::vector<ConfigError>* errors);

// The settings for the trace header's config list.
std::vector<std::pair<std::string, std::string>> DescribePcSamplingConfig(
    const PcSamplingConfig& config);

}  // namespace kp
