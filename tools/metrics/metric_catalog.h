// metric_catalog.h: offline queries of the CUPTI Profiler Host API for `kptrace metrics`:
// supported chips, base metrics with their descriptions and valid suffixes, and pass counts.
// Needs only a chip name, no GPU (docs/cupti.md). Name validation itself lives in
// common/metric_plan.h, shared with the injector.
#pragma once

#include <cupti_profiler_host.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace kp {

struct MetricDescription {
  std::string name;  // base name, e.g. "dram__bytes_read"
  CUpti_MetricType type = CUPTI_METRIC_TYPE_COUNTER;
  std::string description, hw_unit, dim_unit;
  std::vector<std::string> submetrics;  // valid suffixes ("sum", "avg.per_second", ...)
};

const char* MetricTypeName(CUpti_MetricType type);  // "counter" | "ratio" | "throughput"

// Chip names the host API accepts ("GH100", ...).
StatusOr<std::vector<std::string>> SupportedChips();

struct MetricQuery {
  std::string chip;
  CUpti_ProfilerType profiler = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  std::string filter;     // substring of the base name; "" = all
  int type = -1;          // a CUpti_MetricType, or -1 for all three
  bool describe = false;  // fill description, units and submetrics
};

// Base metrics matching the query, sorted by name.
StatusOr<std::vector<MetricDescription>> ListMetrics(const MetricQuery& query);

struct PassCount {
  size_t set_passes = 0;
  std::vector<size_t> per_metric;  // passes of each metric alone, in input order
};

// Validates `names` (the shared validator) and counts passes for the set and per metric.
StatusOr<PassCount> CountPasses(const std::string& chip, CUpti_ProfilerType profiler,
                                const std::vector<std::string>& names);

}  // namespace kp
