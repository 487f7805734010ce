// trace_summary.h: `kptrace summary`: the one-page profile of one or more traces: the setup,
// per-kernel and per-NVTX-range duration statistics, copies, API time, GPU busy fraction and
// per-stream launch gaps, metrics per range with the speed-of-light reading, and every loss.
//
// Statistics methods (stated so results can be checked independently):
// - percentiles are nearest-rank on the sorted durations: p-th = sorted[ceil(p/100 * n) - 1];
//   the median is the p50 by the same rule (for n even, the lower middle value);
// - std is the population standard deviation (divide by n); rel_std = std / mean;
// - stable = rel_std < 2 %.
// Memory is bounded: durations are exact up to a shared budget, then large groups move to a
// histogram whose percentiles are within 0.39 % (duration_sketch.h); the GPU intervals of the
// busy/gap analysis are sorted through a temporary file (interval_sort.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "kptrace.pb.h"
#include "tools/pc_stalls/pc_stall_table.h"
#include "tools/summary/pm_range_summary.h"

namespace kp {

struct DurationStats {
  uint64_t count = 0;
  double total = 0, min = 0, median = 0, p95 = 0, p99 = 0, max = 0, mean = 0, std = 0, rel_std = 0;
  bool stable = false;
};
// Reorders `values` in place (percentile selection; not a full sort).
DurationStats ComputeDurationStats(std::vector<int64_t>* values);
// Nearest-rank percentile of sorted values (p in (0, 100]).
double NearestRank(const std::vector<int64_t>& sorted, double p);
// The 0-based index of that percentile among n > 0 values.
size_t NearestRankIndex(size_t n, double p);

struct NamedStats {
  std::string name, domain;
  DurationStats stats;
  double share = 0;              // of GPU time (kernels) or of wall span (ranges)
  std::vector<int64_t> samples;  // every duration, in no order; only with keep_samples
};

struct CopyStats {
  std::string kind;
  uint64_t count = 0, bytes = 0;
  double total_ns = 0, median_gbps = 0, aggregate_gbps = 0;
};

struct DeviceBusy {
  uint32_t device = 0;
  double busy_ns = 0, span_ns = 0, fraction = 0;
};

struct StreamGaps {
  uint32_t device = 0, stream = 0;
  uint64_t kernels = 0, gaps = 0;
  double median_ns = 0, p95_ns = 0, idle_ns = 0, span_ns = 0;
};

struct MetricRangeSummary {
  std::string name, domain, chip;
  uint64_t occurrences = 0;  // value sets whose values the medians use
  uint32_t passes = 0;
  uint32_t skip = 0;                   // warm-up occurrences not measured (KP_METRICS_SKIP)
  uint64_t sets_inconsistent = 0;      // multi-pass sets of unlike occurrences (MetricRange flag)
  bool inconsistent_included = false;  // --all: those sets are in the medians too
  double sm_clock_mhz = 0;             // 0 = unknown
  // The maximum SM clock of the GPU of the range's first value set with a clock (its Device
  // record in that set's trace; 0 = unknown). A value set whose own SM clock reads below half
  // of its GPU's maximum did not count through the whole range at speed: such sets are
  // counted, the lowest kept, the percentages are not rescaled to the range's busy time, and
  // the explanation says so (low_sm_clock).
  double sm_clock_max_mhz = 0;
  uint64_t sets_low_sm_clock = 0;
  uint64_t sets_with_sm_clock = 0;        // value sets used that have an SM clock
  double lowest_sm_clock_mhz = 0;         // of the sets below half (lowest share); 0 = none
  std::map<std::string, double> medians;  // metric -> median over occurrences
  std::vector<std::string> order;         // metric names in config order
  std::string verdict, explanation;
  double sm_pct = -1, mem_pct = -1;  // as measured over the whole range (gaps included)
  // Range mode: the share of the range's GPU time (gpu__time_duration.sum, else the range's own
  // duration) during which the application's kernels, copies or memsets ran (median over
  // occurrences; -1 = unknown). When known, every *.pct_of_peak_sustained_elapsed metric is
  // also read "while busy" (value / busy_fraction, at most 100) and the verdict uses those,
  // so launch gaps and syncs inside a range do not make a saturated kernel look latency-bound.
  double busy_fraction = -1;
  double sm_pct_busy = -1, mem_pct_busy = -1;
  // metric -> every occurrence's value; only with SummaryOptions::keep_samples
  std::map<std::string, std::vector<double>> samples;
  // Every value set was dropped as inconsistent: no metric has a value, `explanation` says why.
  bool all_dropped() const { return occurrences == 0 && sets_inconsistent > 0; }
  bool low_sm_clock() const { return sets_low_sm_clock > 0; }
};

// One process of a multi-process (multi-rank) input.
struct ProcessSummary {
  std::string path, host;
  int rank = -1;
  uint32_t pid = 0;
  uint64_t kernels = 0;
  double kernel_ns = 0;           // sum of kernel durations
  double collective_ns = 0;       // of which collective (NCCL) kernels
  double collective_busy_ns = 0;  // time covered by collective kernels (overlap counted once)
  double overlap_ns = 0;          // of that, time during which a compute kernel also ran
  std::vector<double> step_ns;    // durations of the step range's occurrences, in order
  int64_t clock_offset_ns = 0;    // applied with --align collectives
  bool clean_end = false;
  std::string end_reason;
};

struct TraceSummary {
  std::vector<std::string> paths;
  bool have_header = false;
  Header header;
  std::vector<Device> devices;
  std::vector<NamedStats> kernels, ranges, api;  // sorted by total, descending
  std::vector<CopyStats> copies;
  std::vector<DeviceBusy> busy;
  std::vector<StreamGaps> streams;
  std::vector<MetricRangeSummary> metrics;
  std::vector<PmDeviceSummary> pm;  // KP_PM_SAMPLING counters per GPU and range
  double gpu_time_ns = 0, span_ns = 0;
  double idle_between_kernels_fraction = 0;  // idle gap time / stream spans, all streams
  uint64_t internal_kernels_excluded = 0;
  // Kernels CUPTI gave no timestamps (RECORD_FLAG_NO_TIMING; e.g. every kernel in
  // KP_METRICS_MODE=kernel, where CUPTI replays them): counted, kept out of the duration stats.
  uint64_t untimed_kernels = 0;
  // Kernel records kp made (RECORD_FLAG_PROFILER_TIMED): kernel-mode metrics measured them on
  // their own launch with kernel records off. In the duration stats.
  uint64_t profiler_timed_kernels = 0;
  uint64_t records = 0;
  // Losses and damage, one line each, file-prefixed when several files.
  std::vector<std::string> losses;
  std::vector<std::string> notices;
  std::vector<std::string> capture_windows;  // one line per window (traces with a trigger)
  // Facts about the trace that are not losses: NVTX ranges the program left open, ranges that
  // ended before capture began, records outside the capture window.
  std::vector<std::string> trace_notes;
  std::vector<std::string> errors;  // files that could not be opened
  // Several processes: one entry each, in input order (rank order for a run), and the step
  // range compared across them: the outermost NVTX range repeated on every process ("" = none).
  std::vector<ProcessSummary> processes;
  std::string step_range;
  std::vector<std::string> alignment;  // --align collectives: one line per file
  bool anything_read = false;
  PcStallTable pc_stalls;  // KP_PC_SAMPLING records, all files together
};

struct SummaryOptions {
  // Keep every duration and metric value (kptrace diff tests distributions, not just medians).
  bool keep_samples = false;
  // Non-empty: a progress line under this label on stderr (only when it is a terminal).
  std::string progress_label;
  // --all: multi-pass value sets flagged inconsistent count in the medians too (by default
  // they are left out and counted).
  bool include_inconsistent = false;
  // --align collectives: shift each process's clock onto the first's (clock_alignment.h).
  bool align_collectives = false;
};

TraceSummary SummarizeTraces(const std::vector<std::string>& paths,
                             const SummaryOptions& options = {});
inline TraceSummary SummarizeTraces(const std::vector<std::string>& paths,
                                    bool include_inconsistent) {
  SummaryOptions options;
  options.include_inconsistent = include_inconsistent;
  return SummarizeTraces(paths, options);
}
std::string FormatSummaryText(const TraceSummary& s, size_t top);
// The "Processes" and "Steps across processes" sections (empty for one process).
std::string FormatCrossProcessText(const TraceSummary& s);
std::string FormatSummaryCsv(const TraceSummary& s);
std::string FormatSummaryJson(const TraceSummary& s);
// Appends one row per kernel to `log_path` (header only when the file is new or empty).
Status AppendSummaryLog(const TraceSummary& s, const std::string& log_path);

}  // namespace kp
