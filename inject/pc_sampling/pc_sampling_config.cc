#include "inject/pc_sampling/pc_sampling_config.h"

#include <cstdlib>
#include <string_view>

#include "inject/config/config.h"

namespace kp {
namespace {

void AddError(std::vector<ConfigError>* errors, const char* variable, std::string_view value,
              const std::string& expected) {
  if (errors == nullptr) return;
  std::string shown;
  for (char c : value.substr(0, 200)) {
    shown += (static_cast<unsigned char>(c) < 0x20 || c == '"') ? '?' : c;
  }
  ConfigError e;
  e.variable = variable;
  e.scope = ConfigErrorScope::kProfiler;
  e.message = std::string(variable) + "=\"" + shown + "\" is not valid: " + expected +
              "; kp is off for this process";
  errors->push_back(std::move(e));
}

}  // namespace

void ParsePcSamplingConfig(const std::function<const char*(const char*)>& getenv,
                           PcSamplingConfig* config, std::vector<ConfigError>* errors) {
  if (const char* v = getenv("KP_PC_SAMPLING")) {
    const std::string_view s(v);
    if (s == "stall") {
      config->stall = true;
    } else if (s.empty() || s == "off" || s == "0") {
      config->stall = false;
    } else {
      AddError(errors, "KP_PC_SAMPLING", s,
               "accepted values are stall (warp-stall reasons per kernel) or off (the default)");
    }
  }
  if (const char* v = getenv("KP_PC_SAMPLING_PERIOD")) {
    const std::string_view s(v);
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
    if (!digits || end == nullptr || *end != '\0' || n < PcSamplingConfig::kMinPeriod ||
        n > PcSamplingConfig::kMaxPeriod) {
      AddError(errors, "KP_PC_SAMPLING_PERIOD", s,
               "accepted values are integers 5..31 (a sample every 2^N SM cycles; default " +
                   std::to_string(PcSamplingConfig::kDefaultPeriod) + ")");
    } else {
      config->period = static_cast<uint32_t>(n);
    }
  }
}

std::vector<std::pair<std::string, std::string>> DescribePcSamplingConfig(
    const PcSamplingConfig& config) {
  return {{"KP_PC_SAMPLING", config.stall ? "stall" : "off"},
          {"KP_PC_SAMPLING_PERIOD", std::to_string(config.period)}};
}

}  // namespace kp
