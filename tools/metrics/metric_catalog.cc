#include "tools/metrics/metric_catalog.h"

#include <cupti.h>

#include <algorithm>

#include "common/metric_plan.h"

namespace kp {

const char* MetricTypeName(CUpti_MetricType type) {
  switch (type) {
    case CUPTI_METRIC_TYPE_COUNTER:
      return "counter";
    case CUPTI_METRIC_TYPE_RATIO:
      return "ratio";
    case CUPTI_METRIC_TYPE_THROUGHPUT:
      return "throughput";
    default:
      return "unknown";
  }
}

StatusOr<std::vector<std::string>> SupportedChips() {
  CUpti_Profiler_Host_GetSupportedChips_Params p{};
  p.structSize = CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE;
  std::vector<std::string> chips;
  CUptiResult r = cuptiProfilerHostGetSupportedChips(&p);
  if (r != CUPTI_SUCCESS)
    return Status::Error(CuptiCallError("cuptiProfilerHostGetSupportedChips", r));
  for (size_t i = 0; i < p.numChips; ++i)
    if (p.ppChipNames && p.ppChipNames[i]) chips.emplace_back(p.ppChipNames[i]);
  return chips;
}

StatusOr<std::vector<MetricDescription>> ListMetrics(const MetricQuery& query) {
  StatusOr<std::unique_ptr<MetricHost>> created =
      MetricHost::Create(query.chip, query.profiler, {});
  if (!created.ok()) return created.status();
  const std::unique_ptr<MetricHost>& host = created.value();
  std::vector<MetricDescription> metrics;
  std::vector<MetricDescription>* out = &metrics;
  for (auto type :
       {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
    if (query.type >= 0 && query.type != type) continue;
    for (const auto& name : host->BaseMetrics(type)) {
      if (!query.filter.empty() && name.find(query.filter) == std::string::npos) continue;
      MetricDescription d;
      d.name = name;
      d.type = type;
      if (query.describe) {
        CUpti_Profiler_Host_GetMetricProperties_Params props{};
        props.structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
        props.pHostObject = host->raw();
        props.pMetricName = name.c_str();
        if (cuptiProfilerHostGetMetricProperties(&props) == CUPTI_SUCCESS) {
          d.description = props.pDescription ? props.pDescription : "";
          d.hw_unit = props.pHwUnit ? props.pHwUnit : "";
          d.dim_unit = props.pDimUnit ? props.pDimUnit : "";
        }
        d.submetrics = host->SubMetrics(name, type);
      }
      out->push_back(std::move(d));
    }
  }
  std::sort(out->begin(), out->end(),
            [](const MetricDescription& a, const MetricDescription& b) { return a.name < b.name; });
  return metrics;
}

StatusOr<PassCount> CountPasses(const std::string& chip, CUpti_ProfilerType profiler,
                                const std::vector<std::string>& names) {
  StatusOr<std::unique_ptr<MetricHost>> host = MetricHost::Create(chip, profiler, {});
  if (!host.ok()) return host.status();
  if (Status valid = host.value()->Validate(names); !valid.ok()) return valid;
  StatusOr<MetricPlan> plan = BuildMetricPlan(chip, profiler, {}, names);
  if (!plan.ok()) return plan.status();
  PassCount passes;
  passes.set_passes = plan.value().num_passes;
  for (const auto& n : names) {
    StatusOr<MetricPlan> one = BuildMetricPlan(chip, profiler, {}, {n});
    if (!one.ok()) return one.status();
    passes.per_metric.push_back(one.value().num_passes);
  }
  return passes;
}

}  // namespace kp
