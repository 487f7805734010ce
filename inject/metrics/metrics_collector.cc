// metrics_collector.cc: the factory behind the contract in metrics_collector.h. Names are
// checked syntactically here (no CUDA yet); the full check against the chip runs at the lazy
// per-context set-up, through the same validator `kptrace metrics check` uses (metric_plan.h).
#include "inject/metrics/metrics_collector.h"

#include "inject/metrics/metric_plan.h"
#include "inject/metrics/range_collector.h"

namespace kp {

std::unique_ptr<MetricsCollector> MetricsCollector::Create(const Config& config, EncoderPost post,
                                                           std::string* error) {
  if (config.metrics.empty()) return nullptr;
  std::vector<std::string> names = ExpandMetricList(config.metrics);
  for (const auto& n : names) {
    std::string reason;
    if (!CheckMetricNameSyntax(n, &reason)) {
      *error = "KP_METRICS: unknown metric '" + n + "': " + reason +
               " (kptrace metrics list --chip <chip> lists valid names)";
      return nullptr;
    }
  }
  if (names.empty()) {
    *error = "KP_METRICS: no metric names given (e.g. KP_METRICS=sol)";
    return nullptr;
  }
  return std::make_unique<RangeCollector>(config, std::move(names), std::move(post));
}

}  // namespace kp
