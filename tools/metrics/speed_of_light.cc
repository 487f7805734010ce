#include "tools/metrics/speed_of_light.h"

#include <cmath>
#include <cstdio>

namespace kp {
namespace {

constexpr char kSmMetric[] = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kMemoryMetrics[] = {
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
};

bool Lookup(const std::map<std::string, double>& values, const std::string& name, double* out) {
  auto it = values.find(name);
  if (it == values.end() || !std::isfinite(it->second)) return false;
  *out = it->second;
  return true;
}

}  // namespace

SolReading DiagnoseSpeedOfLight(const std::map<std::string, double>& values) {
  SolReading r;
  double sm = 0, mem = 0;
  bool have_sm = Lookup(values, kSmMetric, &sm);
  bool have_mem = false;
  for (const char* name : kMemoryMetrics) {
    if (Lookup(values, name, &mem)) {
      have_mem = true;
      r.memory_metric = name;
      break;
    }
  }
  if (have_sm) r.sm_pct = sm;
  if (have_mem) r.mem_pct = mem;
  if (!have_sm || !have_mem) {
    r.memory_metric.clear();
    r.explanation = std::string("no speed-of-light reading: needs ") + kSmMetric + " and " +
                    kMemoryMetrics[0] + " (or " + kMemoryMetrics[1] + "); KP_METRICS=sol has both";
    return r;
  }

  const char* rule = nullptr;
  const char* next = nullptr;
  if (sm < 30 && mem < 30) {
    r.verdict = "latency-bound";
    rule = "SM < 30% and memory < 30%";
    next =
        "check occupancy (smsp__average_warps_active), launch overhead and idle gaps on the "
        "timeline, synchronization barriers";
  } else if (sm >= 60 && mem >= 60) {
    r.verdict = "compute+memory-bound";
    rule = "SM >= 60% and memory >= 60%: near the roofline";
    next = "both units are busy; squeeze the last percent (precision, fusion) or move on";
  } else if (sm > 70 && mem < 60) {
    r.verdict = "compute-bound";
    rule = "SM > 70% and memory < 60%";
    next = "check tensor-core utilization, the non-matmul FLOP fraction and the instruction mix";
  } else if (mem > 70 && sm < 60) {
    r.verdict = "memory-bound";
    rule = "memory > 70% and SM < 60%";
    next =
        "check arithmetic intensity against the ridge point, fuse with neighbours, tile "
        "larger, check the L2 hit rate (does the working set fit?)";
  } else if (sm >= 40 && sm <= 70 && mem >= 40 && mem <= 70) {
    r.verdict = "balanced";
    rule = "SM and memory both 40-70%";
    next = "near the roofline; squeeze the last 20% or move on";
  } else {
    r.verdict = "mixed";
    rule = sm >= mem ? "no unit saturated or idle; SM is the busier"
                     : "no unit saturated or idle; memory is the busier";
    next =
        "check occupancy and warp stalls (latency hides part of the work), then the busier "
        "unit's workload";
  }
  char line[640];
  std::snprintf(line, sizeof line, "%s: SM %.1f%%, memory %.1f%% (%s); rule: %s; next: %s",
                r.verdict.c_str(), sm, mem, r.memory_metric.c_str(), rule, next);
  r.explanation = line;
  return r;
}

}  // namespace kp
