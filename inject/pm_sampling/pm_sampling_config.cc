#include "inject/pm_sampling/pm_sampling_config.h"

#include <string_view>

#include "common/pm_counters.h"

namespace kp {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool CounterNameSyntax(std::string_view m) {
  if (m.empty() || m.find("__") == std::string_view::npos) return false;
  for (char c : m) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
  }
  return true;
}

// The value as it goes into the one-line message: printable ASCII only, long values cut.
std::string Printable(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 200; ++i) {
    const auto c = static_cast<unsigned char>(v[i]);
    out += (c < 0x20 || c >= 0x7F || c == '"') ? '?' : static_cast<char>(c);
  }
  if (v.size() > 200) out += "...";
  return out;
}

void AddPmError(std::vector<ConfigError>* errors, const char* variable, std::string_view value,
                const std::string& expected) {
  if (errors == nullptr) return;
  ConfigError e;
  e.variable = variable;
  e.scope = ConfigErrorScope::kPmSampling;
  e.message = std::string(variable) + "=\"" + Printable(value) + "\" is not valid: " + expected +
              "; PM sampling is off, tracing goes on";
  errors->push_back(std::move(e));
}

}  // namespace

void ParsePmSamplingConfig(const GetEnvFn& get, Config* c, std::vector<ConfigError>* errors) {
  if (const char* v = get("KP_PM_SAMPLING")) {
    const std::string_view s = Trim(v);
    if (s.empty() || s == "off" || s == "0" || s == "none") {
      c->pm_sampling.clear();
    } else if (s == "gpu") {
      c->pm_sampling = PmGpuCounterSet();
      c->pm_sampling_gpu_set = true;
    } else {
      std::vector<std::string> names;
      auto add = [&names](const std::string& n) {
        for (const std::string& have : names) {
          if (have == n) return;  // CUPTI rejects a repeated name
        }
        names.push_back(n);
      };
      std::string_view rest = s;
      std::string bad;
      while (bad.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view item = Trim(rest.substr(0, comma));
        if (item == "gpu") {
          for (const std::string& n : PmGpuCounterSet()) add(n);
          c->pm_sampling_gpu_set = true;
        } else if (!CounterNameSyntax(item)) {
          bad = item.empty() ? std::string("(empty)") : std::string(item);
          break;
        } else {
          add(std::string(item));
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      if (!bad.empty()) {
        AddPmError(errors, "KP_PM_SAMPLING", v,
                   "expected off, gpu (SM, tensor-pipe, DRAM, L2, PCIe and NVLink counters) or a "
                   "comma list of PM-sampling counter names such as "
                   "dram__bytes_read.sum (\"" +
                       Printable(bad) +
                       "\" is not a counter name; kptrace metrics list --mode pm --chip GH100 "
                       "lists them; default: off)");
        c->pm_sampling.clear();
        c->pm_sampling_gpu_set = false;
      } else {
        c->pm_sampling = std::move(names);
      }
    }
  }
  if (const char* v = get("KP_PM_INTERVAL_US")) {
    const std::string_view s = Trim(v);
    uint64_t n = 0;
    bool ok = !s.empty() && s.size() <= 9;
    for (char ch : s) {
      ok = ok && ch >= '0' && ch <= '9';
      if (ok) n = n * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (!ok || n < kPmIntervalMinUs || n > kPmIntervalMaxUs) {
      AddPmError(errors, "KP_PM_INTERVAL_US", v,
                 "expected a whole number of microseconds from " +
                     std::to_string(kPmIntervalMinUs) + " to " + std::to_string(kPmIntervalMaxUs) +
                     " (default " + std::to_string(Config().pm_interval_us) +
                     "; faster, decoding the samples cannot keep up and most are lost)");
      c->pm_sampling.clear();
    } else {
      c->pm_interval_us = static_cast<uint32_t>(n);
    }
  }
}

std::string DescribePmSampling(const Config& c) {
  if (c.pm_sampling.empty()) return "off";
  if (c.pm_sampling_gpu_set) return "gpu";
  std::string out;
  for (const std::string& n : c.pm_sampling) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace kp
