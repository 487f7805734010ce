// speed_of_light.h: the diagnosis chart (docs/metrics.md, "Speed of light") as code.
// Given metric values of one range or kernel, say whether it is latency-, compute- or
// memory-bound, with the numbers behind the verdict. Used by `kptrace summary` and exporters.
#pragma once

#include <map>
#include <string>

namespace kp {

struct SolReading {
  // "latency-bound", "compute-bound", "memory-bound", "balanced", "compute+memory-bound"
  // (both near peak: at the roofline), "mixed", or "" when the metrics needed (an SM % and a
  // memory %) are absent. The rules, first match wins (S = sm_pct, M = mem_pct):
  //   1. S < 30 and M < 30                    latency-bound
  //   2. S >= 60 and M >= 60                  compute+memory-bound (near the roofline)
  //   3. S > 70 and M < 60                    compute-bound
  //   4. M > 70 and S < 60                    memory-bound
  //   5. 40 <= S <= 70 and 40 <= M <= 70      balanced
  //   6. anything else                        mixed (neither unit saturated nor idle; the
  //                                           explanation names the busier one)
  std::string verdict;
  double sm_pct = -1;    // sm__throughput.avg.pct_of_peak_sustained_elapsed, or -1
  double mem_pct = -1;   // gpu__compute_memory_throughput... or dram__throughput..., or -1
  std::string memory_metric;  // which metric mem_pct came from
  std::string explanation;    // one line: the rule that fired and what to check next
};

// `values` maps full metric names to values (NaN/absent = not collected).
SolReading DiagnoseSpeedOfLight(const std::map<std::string, double>& values);

}  // namespace kp
