// metrics_collector.cc: the factory behind the contract in metrics_collector.h (Create, on
// CUPTI, is cupti_collector_factory.cc). Names are checked syntactically here (no CUDA yet);
// the full check against the chip runs when the first context is created, through the same
// validator `kptrace metrics check` uses (common/metric_plan.h).
#include "inject/metrics/metrics_collector.h"

#include "common/metric_plan.h"
#include "inject/metrics/kernel_mode_collector.h"
#include "inject/metrics/range_mode_collector.h"

namespace kp {

StatusOr<std::unique_ptr<MetricsCollector>> MetricsCollector::CreateWithBackend(
    const Config& config, EncoderPost post, std::unique_ptr<ProfilerBackend> backend) {
  if (config.metrics.empty()) return std::unique_ptr<MetricsCollector>();
  std::vector<std::string> names = ExpandMetricList(config.metrics);
  for (const auto& n : names) {
    if (const Status syntax = CheckMetricNameSyntax(n); !syntax.ok()) {
      return Status::Error("unknown metric '" + n + "': " + syntax.message() +
                           " (kptrace metrics list --chip <chip> lists valid names)")
          .WithContext("KP_METRICS");
    }
  }
  if (names.empty())
    return Status::Error("no metric names given (e.g. KP_METRICS=sol)").WithContext("KP_METRICS");
  if (config.metrics_mode == MetricsMode::kKernel)
    return std::unique_ptr<MetricsCollector>(std::make_unique<KernelModeCollector>(
        config, std::move(names), std::move(post), std::move(backend)));
  return std::unique_ptr<MetricsCollector>(std::make_unique<RangeModeCollector>(
      config, std::move(names), std::move(post), std::move(backend)));
}

}  // namespace kp
