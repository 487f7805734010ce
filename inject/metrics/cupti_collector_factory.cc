// cupti_collector_factory.cc: MetricsCollector::Create, the collectors on CUPTI's backend.
#include "inject/metrics/metrics_collector.h"
#include "inject/metrics/profiler_session.h"

namespace kp {

StatusOr<std::unique_ptr<MetricsCollector>> MetricsCollector::Create(const Config& config,
                                                                     EncoderPost post) {
  return CreateWithBackend(config, std::move(post),
                           NewCuptiProfilerBackend(config.metrics_l2_flush));
}

}  // namespace kp
