// sol_metrics.h: the metric set "sol" expands to (the speed-of-light reading: SM and memory
// throughput, DRAM bytes, duration, clock, active cycles). Shared by KP_METRICS parsing
// (inject/config) and metric planning (common/metric_plan.h); no dependencies.
#pragma once

#include <string>
#include <vector>

namespace kp {

inline const std::vector<std::string>& SpeedOfLightMetrics() {
  static const std::vector<std::string> kMetrics = {
      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "gpu__time_duration.sum",
      "gpc__cycles_elapsed.avg.per_second",
      "sm__cycles_active.avg",
  };
  return kMetrics;
}

}  // namespace kp
