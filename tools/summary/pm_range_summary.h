// pm_range_summary.h: the summary's "PM samples" section (KP_PM_SAMPLING): per GPU, the mean
// and p95 of every sampled counter over the whole run and while each NVTX range was open.
//
// A sample belongs to a range occurrence when its midpoint lies inside it (samples are device-
// wide: they count every process's work on the GPU, but are matched with the ranges of the
// process whose trace holds them, the one that sampled). Byte counters are read as rates
// (common/pm_counters.h). Means are exact; p95 comes from at most kPmReservoir values per
// (range, GPU, counter), a uniform reservoir sample past that, so memory stays bounded on long
// runs. The summary calls this only when its own pass saw samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kptrace.pb.h"

namespace kp {

constexpr size_t kPmReservoir = 65536;

struct PmCounterStats {
  double mean = 0, p95 = 0;
  uint64_t count = 0;  // samples with a value
};

struct PmRangeStats {
  std::string name, domain;  // name "" = the whole run
  uint64_t samples = 0;
  double total_range_ns = 0;           // sum of the occurrences' durations (sorts the table)
  std::vector<PmCounterStats> values;  // in PmDeviceSummary::counters order
};

struct PmDeviceSummary {
  uint32_t device = 0;
  std::vector<std::string> counters;  // raw counter names, in first-seen order
  uint64_t interval_ns = 0;
  PmRangeStats whole;                // every sample of the device
  std::vector<PmRangeStats> ranges;  // by total range time, descending
};

// Reads the PM samples of `paths` with the NVTX ranges of the same file (two passes per file)
// and summarizes them.
std::vector<PmDeviceSummary> SummarizePmSamples(const std::vector<std::string>& paths);

// The text section ("" when there are no samples) and its JSON form (a JSON array as text).
std::string FormatPmSummaryText(const std::vector<PmDeviceSummary>& devices, size_t top);
std::string FormatPmSummaryJson(const std::vector<PmDeviceSummary>& devices);

}  // namespace kp
