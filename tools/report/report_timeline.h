// report_timeline.h: the time-resolved data of `kptrace report` that the summary's totals do not
// keep: GPU busy % over time per GPU, and each NVTX range's duration per occurrence ("step") per
// rank, with stragglers (a rank much slower than the others at the same step).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kp {

class ProgressLine;

struct UtilisationStrip {
  std::string label;             // "GPU 0", or "rank 1 GPU 0" for several traces
  std::vector<double> busy_pct;  // per time bin: kernels, copies, memsets (overlap counted once)
  // Hook for PM-sampling counters (e.g. SM throughput % per bin, by counter name): the trace
  // schema has no PM-sampling records yet, so this stays empty; the report draws one line per
  // series found here.
  std::map<std::string, std::vector<double>> pm_counters;
};

struct RankSteps {
  int rank = 0;
  std::vector<double> durations_ns;  // in start order
  std::vector<bool> straggler;       // per step: > kStragglerFactor x the median over ranks
  size_t straggler_steps = 0;
  double median_ns = 0;
};

// A rank is late at a step when it took more than this times the median of all ranks there.
inline constexpr double kStragglerFactor = 1.10;

struct RangeSteps {
  std::string name;  // "domain: name" or name
  double total_ns = 0;
  std::vector<RankSteps> ranks;  // by rank
};

struct ReportTimeline {
  uint64_t start_ns = 0, end_ns = 0;  // span of the GPU work
  size_t bins = 0;
  std::vector<UtilisationStrip> strips;
  std::vector<RangeSteps> steps;  // ranges with >= 2 occurrences, by total time, at most max_ranges
  bool multi_rank = false;
};

// Reads `paths` once more. A file's rank is its header's rank, else its position in `paths`.
ReportTimeline BuildReportTimeline(const std::vector<std::string>& paths, size_t bins,
                                   size_t max_ranges, ProgressLine* progress);

}  // namespace kp
