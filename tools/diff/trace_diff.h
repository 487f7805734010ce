// trace_diff.h: `kptrace diff`: did B get faster or slower than A? Per kernel name, per NVTX range
// and per measured metric: the medians, the change in %, a 95 % confidence interval of the change
// (Hodges-Lehmann, shift_statistics.h) and the Mann-Whitney p-value. A change is marked only when
// it is both significant (p < 0.05) and at least the threshold in size; a marked increase of a
// kernel's or range's duration is a regression. Differences in setup (GPU, driver, clocks, kp
// configuration) that make the comparison unfair are listed as warnings.
#pragma once

#include <string>
#include <vector>

#include "tools/diff/shift_statistics.h"
#include "tools/summary/trace_summary.h"

namespace kp {

struct DiffOptions {
  double threshold_pct = 5;  // smallest |change| that is marked
  double alpha = 0.05;       // significance level of the U test
};

struct DiffRow {
  std::string kind;    // "kernel", "nvtx_range", "metric"
  std::string name;    // kernel name, "domain: range" or the metric's range
  std::string metric;  // metric rows: the metric name
  ShiftEstimate estimate;
  // (median_b - median_a) / median_a and the Hodges-Lehmann interval over median_a, in %.
  double change_pct = 0, change_low_pct = 0, change_high_pct = 0;
  bool significant = false;  // testable and p < alpha
  bool marked = false;       // significant and |change| >= threshold
  bool regression = false;   // marked, a duration, and B slower
  bool only_in_a = false, only_in_b = false;
};

struct TraceDiff {
  std::vector<std::string> paths_a, paths_b;
  std::vector<DiffRow> rows;          // kernels, then ranges, then metrics; each by A's total
  std::vector<std::string> warnings;  // setup differences, losses
  double threshold_pct = 5, alpha = 0.05;
  bool any_regression = false;
};

// a and b must have been summarised with SummaryOptions::keep_samples.
TraceDiff DiffSummaries(const TraceSummary& a, const TraceSummary& b, const DiffOptions& options);
// Differences between the two setups that make timings incomparable, one line each.
std::vector<std::string> SetupDifferences(const TraceSummary& a, const TraceSummary& b);

std::string FormatDiffText(const TraceDiff& d, size_t top);
std::string FormatDiffCsv(const TraceDiff& d);
std::string FormatDiffJson(const TraceDiff& d);

}  // namespace kp
