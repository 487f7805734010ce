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

std::vector<std::string> SupportedChips(std::string* error) {
  CUpti_Profiler_Host_GetSupportedChips_Params p{};
  p.structSize = CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE;
  std::vector<std::string> chips;
  CUptiResult r = cuptiProfilerHostGetSupportedChips(&p);
  if (r != CUPTI_SUCCESS) {
    *error = CuptiCallError("cuptiProfilerHostGetSupportedChips", r);
    return chips;
  }
  for (size_t i = 0; i < p.numChips; ++i)
    if (p.ppChipNames && p.ppChipNames[i]) chips.emplace_back(p.ppChipNames[i]);
  return chips;
}

bool ListMetrics(const MetricQuery& query, std::vector<MetricDescription>* out,
                 std::string* error) {
  auto host = MetricHost::Create(query.chip, query.profiler, {}, error);
  if (!host) return false;
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
  return true;
}

bool CountPasses(const std::string& chip, CUpti_ProfilerType profiler,
                 const std::vector<std::string>& names, PassCount* out, std::string* error) {
  auto host = MetricHost::Create(chip, profiler, {}, error);
  if (!host) return false;
  if (!host->Validate(names, error)) return false;
  MetricPlan plan;
  if (!BuildMetricPlan(chip, profiler, {}, names, &plan, error)) return false;
  out->set_passes = plan.num_passes;
  out->per_metric.clear();
  for (const auto& n : names) {
    MetricPlan one;
    if (!BuildMetricPlan(chip, profiler, {}, {n}, &one, error)) return false;
    out->per_metric.push_back(one.num_passes);
  }
  return true;
}

}  // namespace kp
