// no_metrics.cc: stands in for inject/metrics when that component is not built, so the tracer
// links and runs; KP_METRICS then reports that metrics are unavailable in this build.
#include "inject/metrics/metrics_collector.h"

namespace kp {

StatusOr<std::unique_ptr<MetricsCollector>> MetricsCollector::Create(const Config& config,
                                                                     EncoderPost) {
  if (!config.metrics.empty())
    return Status::Error(
        "KP_METRICS: metrics not built into this libkpinject.so; unset KP_METRICS");
  return std::unique_ptr<MetricsCollector>();
}

}  // namespace kp
