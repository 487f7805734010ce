// cupti_collector_factory.cc: MetricsCollector::Create, the collectors on CUPTI's backend.
#include "inject/metrics/metrics_collector.h"
#include "inject/metrics/profiler_session.h"

namespace kp {

std::unique_ptr<MetricsCollector> MetricsCollector::Create(const Config& config, EncoderPost post,
                                                           std::string* error) {
  return CreateWithBackend(config, std::move(post), NewCuptiProfilerBackend(), error);
}

}  // namespace kp
