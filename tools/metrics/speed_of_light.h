// speed_of_light.h: the workflow's diagnosis chart (shared/seeds/profiling-workflow.txt) as code.
// Given metric values of one range or kernel, say whether it is latency-, compute- or
// memory-bound, with the numbers behind the verdict. Used by `kptrace summary` and exporters.
#pragma once

#include <map>
#include <string>

namespace kp {

struct SolReading {
  // "latency-bound", "compute-bound", "memory-bound", "balanced", "mixed", or "" when the
  // metrics needed (an SM % and a memory %) are absent.
  std::string verdict;
  double sm_pct = -1;    // sm__throughput.avg.pct_of_peak_sustained_elapsed, or -1
  double mem_pct = -1;   // gpu__compute_memory_throughput... or dram__throughput..., or -1
  std::string memory_metric;  // which metric mem_pct came from
  std::string explanation;    // one line: the rule that fired and what to check next
};

// `values` maps full metric names to values (NaN/absent = not collected).
SolReading DiagnoseSpeedOfLight(const std::map<std::string, double>& values);

}  // namespace kp
