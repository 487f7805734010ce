#include "common/metric_plan.h"

#include <cupti.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "common/sol_metrics.h"

namespace kp {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string BaseOf(const std::string& name) { return name.substr(0, name.find('.')); }

std::string SuffixOf(const std::string& name) {
  size_t dot = name.find('.');
  return dot == std::string::npos ? std::string() : name.substr(dot + 1);
}

// The rollup kp suggests when a name has none: the one users of the workflow read.
std::string DefaultSuffix(CUpti_MetricType type, const std::vector<std::string>& subs) {
  const char* preferred = type == CUPTI_METRIC_TYPE_COUNTER ? "sum"
                          : type == CUPTI_METRIC_TYPE_THROUGHPUT
                              ? "avg.pct_of_peak_sustained_elapsed"
                              : "pct";
  for (const auto& s : subs)
    if (s == preferred) return s;
  if (type == CUPTI_METRIC_TYPE_RATIO)
    for (const auto& s : subs)
      if (s == "ratio") return s;
  return subs.empty() ? std::string() : subs.front();
}

std::string Nearest(const std::string& target, const std::vector<std::string>& candidates,
                    size_t* distance) {
  std::string best;
  size_t best_d = static_cast<size_t>(-1);
  for (const auto& c : candidates) {
    size_t d = EditDistance(target, c);
    if (d < best_d || (d == best_d && c.size() < best.size())) {
      best_d = d;
      best = c;
    }
  }
  if (distance) *distance = best_d;
  return best;
}

bool AddMetricsTo(CUpti_Profiler_Host_Object* host, const std::vector<std::string>& names,
                  CUptiResult* result) {
  std::vector<const char*> ptrs;
  for (const auto& n : names) ptrs.push_back(n.c_str());
  CUpti_Profiler_Host_ConfigAddMetrics_Params p{};
  p.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
  p.pHostObject = host;
  p.ppMetricNames = ptrs.data();
  p.numMetrics = ptrs.size();
  *result = cuptiProfilerHostConfigAddMetrics(&p);
  return *result == CUPTI_SUCCESS;
}

}  // namespace

std::string CuptiCallError(const char* call, CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || !text) text = "unknown error";
  return std::string(call) + " failed: " + text + " (" + std::to_string(static_cast<int>(result)) +
         ")";
}

std::string ExplainCounterAccessError(CUptiResult result) {
  static const char kPermissionFix[] =
      "run as root or with CAP_SYS_ADMIN, or set 'options nvidia "
      "NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/ and reload the driver (check: "
      "grep RmProfilingAdminOnly /proc/driver/nvidia/params); in a container add --cap-add "
      "SYS_ADMIN";
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return std::string("no permission to read GPU performance counters (ERR_NVGPUCTRPERM): ") +
             kPermissionFix;
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "virtualized GPU (vGPU) without profiling rights: the hypervisor administrator must "
             "enable profiling for this VM";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      return "virtualized GPU: this vGPU/passthrough configuration exposes no performance "
             "counters; run on bare metal";
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
      return "MIG instance: counter profiling is not supported on this MIG configuration; run on "
             "a full GPU (MIG disabled)";
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
      return "confidential computing is enabled on this GPU: counters are not readable; disable "
             "CC mode to profile";
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
      return "NVIDIA CMP device: counter profiling is not supported";
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
      return "SLI is enabled: counter profiling is not supported; disable SLI";
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
      return "WSL: counter profiling is not supported by this driver under WSL; run on native "
             "Linux";
    case CUPTI_ERROR_HARDWARE_BUSY:
      return "the counters are held by another profiler session (ncu, DCGM profiling metrics, "
             "another kp); stop it (e.g. dcgmi profile --pause) and retry";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another CUPTI tool is attached (nsys, ncu, torch.profiler, ...); run kp alone";
    default:
      return "";
  }
}

std::string ExplainDeviceSupport(const DeviceSupportLevels& l) {
  constexpr int kSupported = 3, kDisabled = 2;
  if (l.overall == kSupported) return "";
  if (l.architecture != kSupported)
    return "this GPU's architecture has no range profiler (compute capability 7.0 or newer "
           "needed)";
  if (l.vgpu == kDisabled)
    return ExplainCounterAccessError(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES);
  if (l.vgpu != kSupported)
    return ExplainCounterAccessError(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED);
  if (l.confidential_compute != kSupported)
    return ExplainCounterAccessError(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED);
  if (l.cmp != kSupported) return ExplainCounterAccessError(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED);
  if (l.sli != kSupported) return ExplainCounterAccessError(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED);
  if (l.wsl != kSupported) return ExplainCounterAccessError(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED);
  return "the device does not support counter profiling in this configuration (MIG or MPS?)";
}

std::vector<std::string> ExpandMetricList(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& n) {
    if (seen.insert(n).second) out.push_back(n);
  };
  for (const auto& arg : args) {
    size_t start = 0;
    while (start <= arg.size()) {
      size_t comma = arg.find(',', start);
      if (comma == std::string::npos) comma = arg.size();
      std::string item = Trim(arg.substr(start, comma - start));
      if (item == "sol") {
        for (const auto& m : SpeedOfLightMetrics()) add(m);
      } else if (!item.empty()) {
        add(item);
      }
      start = comma + 1;
    }
  }
  return out;
}

Status CheckMetricNameSyntax(const std::string& name) {
  if (name.empty()) {
    return Status::Error("empty metric name");
  }
  if (name.rfind("launch__", 0) == 0) {
    return Status::Error(
        "launch__* names are Nsight Compute launch attributes, not CUPTI counters; kp records the "
        "launch configuration (grid, block, registers, shared memory) in every kernel record");
  }
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.')) {
      return Status::Error(std::string("invalid character '") + c +
                           "' (metric names use lower-case letters, digits, '_' and '.')");
    }
  }
  if (name.find("__") == std::string::npos) {
    return Status::Error("not of the form unit__quantity.rollup");
  }
  if (name.find('.') == std::string::npos) {
    return Status::Error(
        "no rollup: a metric needs one, e.g. .sum, .avg, .max, .pct, .ratio or "
        ".avg.pct_of_peak_sustained_elapsed");
  }
  if (name.back() == '.' || name.find("..") != std::string::npos) {
    return Status::Error("empty rollup or submetric");
  }
  return Status();
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

StatusOr<std::unique_ptr<MetricHost>> MetricHost::Create(
    const std::string& chip, CUpti_ProfilerType type,
    const std::vector<uint8_t>& counter_availability) {
  std::unique_ptr<MetricHost> host(new MetricHost());
  host->chip_ = chip;
  host->type_ = type;
  host->availability_ = counter_availability;  // must outlive the host object
  CUpti_Profiler_Host_Initialize_Params p{};
  p.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
  p.profilerType = type;
  p.pChipName = host->chip_.c_str();
  p.pCounterAvailabilityImage = host->availability_.empty() ? nullptr : host->availability_.data();
  CUptiResult r = cuptiProfilerHostInitialize(&p);
  if (r != CUPTI_SUCCESS || !p.pHostObject) {
    return Status::Error(CuptiCallError("cuptiProfilerHostInitialize", r) + " for chip '" + chip +
                         "' (kptrace metrics chips lists the supported chips; libnvperf_host.so "
                         "must be next to libcupti or on LD_LIBRARY_PATH)");
  }
  host->host_ = p.pHostObject;
  return host;
}

MetricHost::~MetricHost() {
  if (!host_) return;
  CUpti_Profiler_Host_Deinitialize_Params p{};
  p.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
  p.pHostObject = host_;
  cuptiProfilerHostDeinitialize(&p);
}

std::vector<std::string> MetricHost::BaseMetrics(CUpti_MetricType type) const {
  CUpti_Profiler_Host_GetBaseMetrics_Params p{};
  p.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE;
  p.pHostObject = host_;
  p.metricType = type;
  std::vector<std::string> out;
  if (cuptiProfilerHostGetBaseMetrics(&p) != CUPTI_SUCCESS || !p.ppMetricNames) return out;
  for (size_t i = 0; i < p.numMetrics; ++i) {
    const char* n = p.ppMetricNames[i];
    if (n && !std::strchr(n, '.')) out.emplace_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<std::string>& MetricHost::AllBaseMetrics() const {
  if (all_base_.empty()) {
    for (auto t :
         {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
      auto v = BaseMetrics(t);
      all_base_.insert(all_base_.end(), v.begin(), v.end());
    }
    std::sort(all_base_.begin(), all_base_.end());
  }
  return all_base_;
}

std::vector<std::string> MetricHost::SubMetrics(const std::string& base,
                                                CUpti_MetricType type) const {
  CUpti_Profiler_Host_GetSubMetrics_Params p{};
  p.structSize = CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE;
  p.pHostObject = host_;
  p.metricType = type;
  p.pMetricName = base.c_str();
  std::vector<std::string> out;
  if (cuptiProfilerHostGetSubMetrics(&p) != CUPTI_SUCCESS || !p.ppSubMetrics) return out;
  for (size_t i = 0; i < p.numOfSubmetrics; ++i) {
    if (!p.ppSubMetrics[i]) continue;
    std::string s = p.ppSubMetrics[i];
    if (!s.empty() && s[0] == '.') s.erase(0, 1);
    out.push_back(s);
  }
  return out;
}

std::string MetricHost::Suggest(const std::string& name) const {
  const auto& bases = AllBaseMetrics();
  if (bases.empty()) return "";
  std::string base = BaseOf(name);
  std::string suffix = SuffixOf(name);
  std::string best_base;
  if (std::binary_search(bases.begin(), bases.end(), base)) {
    best_base = base;
  } else {
    size_t d = 0;
    best_base = Nearest(base, bases, &d);
    // Farther than a third of the name is a different metric, not a typo.
    if (d > std::max<size_t>(3, base.size() / 3)) return "";
  }
  CUpti_Profiler_Host_GetMetricProperties_Params props{};
  props.structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
  props.pHostObject = host_;
  props.pMetricName = best_base.c_str();
  if (cuptiProfilerHostGetMetricProperties(&props) != CUPTI_SUCCESS) return best_base;
  std::vector<std::string> subs = SubMetrics(best_base, props.metricType);
  if (subs.empty()) return best_base;
  if (std::find(subs.begin(), subs.end(), suffix) != subs.end()) return best_base + "." + suffix;
  std::string sub =
      suffix.empty() ? DefaultSuffix(props.metricType, subs) : Nearest(suffix, subs, nullptr);
  return best_base + "." + sub;
}

Status MetricHost::Validate(const std::vector<std::string>& names) const {
  if (names.empty()) return Status::Error("no metric names given");
  for (const auto& name : names) {
    const Status syntax = CheckMetricNameSyntax(name);
    std::string reason = syntax.message();
    bool ok = syntax.ok();
    if (ok) {
      // A fresh object per name: ConfigAddMetrics accumulates, and a list is rejected as a whole.
      StatusOr<std::unique_ptr<MetricHost>> one = Create(chip_, type_, availability_);
      if (!one.ok()) return one.status();
      CUptiResult r;
      ok = AddMetricsTo(one.value()->raw(), {name}, &r);
      if (!ok) {
        const char* text = nullptr;
        if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || !text) text = "rejected";
        reason = std::string(text) + " (cuptiProfilerHostConfigAddMetrics)";
      }
    }
    if (ok) continue;
    std::string msg = "unknown metric '" + name + "' for " + chip_ + ": " + reason;
    if (name.rfind("launch__", 0) != 0) {
      std::string suggestion = Suggest(name);
      if (!suggestion.empty() && suggestion != name) msg += "; did you mean '" + suggestion + "'?";
      std::string base = BaseOf(name);
      size_t sep = base.find("__");
      std::string filter = sep == std::string::npos ? base : base.substr(0, sep + 2);
      msg += " (kptrace metrics list --chip " + chip_ +
             (type_ == CUPTI_PROFILER_TYPE_PM_SAMPLING ? " --mode pm" : "") + " --filter " +
             filter + ")";
    }
    return Status::Error(std::move(msg));
  }
  return Status();
}

StatusOr<MetricPlan> BuildMetricPlan(const std::string& chip, CUpti_ProfilerType type,
                                     const std::vector<uint8_t>& counter_availability,
                                     const std::vector<std::string>& names) {
  StatusOr<std::unique_ptr<MetricHost>> created =
      MetricHost::Create(chip, type, counter_availability);
  if (!created.ok()) return created.status();
  std::unique_ptr<MetricHost>& host = created.value();
  MetricPlan plan;
  CUptiResult r;
  if (!AddMetricsTo(host->raw(), names, &r)) {
    // Find and name the culprit; if each name passes alone, the set itself is the problem.
    if (Status valid = host->Validate(names); !valid.ok()) return valid;
    return Status::Error(CuptiCallError("cuptiProfilerHostConfigAddMetrics", r) +
                         " for the set of " + std::to_string(names.size()) + " metrics on " + chip);
  }
  CUpti_Profiler_Host_GetConfigImageSize_Params sz{};
  sz.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
  sz.pHostObject = host->raw();
  if ((r = cuptiProfilerHostGetConfigImageSize(&sz)) != CUPTI_SUCCESS) {
    return Status::Error(CuptiCallError("cuptiProfilerHostGetConfigImageSize", r));
  }
  plan.config_image.assign(sz.configImageSize, 0);
  CUpti_Profiler_Host_GetConfigImage_Params img{};
  img.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
  img.pHostObject = host->raw();
  img.configImageSize = plan.config_image.size();
  img.pConfigImage = plan.config_image.data();
  if ((r = cuptiProfilerHostGetConfigImage(&img)) != CUPTI_SUCCESS) {
    return Status::Error(CuptiCallError("cuptiProfilerHostGetConfigImage", r));
  }
  CUpti_Profiler_Host_GetNumOfPasses_Params np{};
  np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
  np.configImageSize = plan.config_image.size();
  np.pConfigImage = plan.config_image.data();
  if ((r = cuptiProfilerHostGetNumOfPasses(&np)) != CUPTI_SUCCESS) {
    return Status::Error(CuptiCallError("cuptiProfilerHostGetNumOfPasses", r));
  }
  plan.names = names;
  plan.num_passes = np.numOfPasses;
  plan.host = std::move(host);
  return plan;
}

}  // namespace kp
