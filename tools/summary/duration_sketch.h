// duration_sketch.h: count, total, min, max, mean, std and nearest-rank percentiles of a stream
// of integer durations (ns) in bounded memory, for `kptrace summary`.
//
// A sketch keeps every value while the summary's shared budget (SketchBudget) lasts, and then
// the statistics are exactly those of ComputeDurationStats (trace_summary.h). Once the budget is
// spent, a group with more than kExactFloor values moves to a log-linear histogram: values below
// 2^kSubBits have a bucket each; above, every power of two is split into 2^kSubBits buckets of
// equal width. Count, total, min and max stay exact; the mean and the population std are kept
// by Welford's method (exact up to floating-point rounding). A percentile is the middle of the
// bucket that holds the nearest-rank value, clamped to [min, max]: the bucket's width is at most
// 2^-kSubBits of its lower edge, so the reported value is within 2^-(kSubBits+1) (0.39 %) of the
// exact nearest-rank value. A histogram is 58 x 2^kSubBits counters (58 KiB), whatever the
// number of values; negative durations (a damaged trace) get a mirrored histogram.
#pragma once

#include <cstdint>
#include <vector>

namespace kp {

struct DurationStats;

// How many values all sketches of one summary may keep exactly, together.
class SketchBudget {
 public:
  explicit SketchBudget(uint64_t values) : left_(values) {}
  bool Take() {
    if (left_ == 0) return false;
    --left_;
    return true;
  }
  void Give(uint64_t n) { left_ += n; }
  bool spent() const { return left_ == 0; }

 private:
  uint64_t left_;
};

class DurationSketch {
 public:
  static constexpr int kSubBits = 7;
  // A group this small keeps its values even when the budget is spent (bounded by the number of
  // groups, each at most this many values).
  static constexpr uint64_t kExactFloor = 1024;

  void Add(int64_t v, SketchBudget* budget);
  uint64_t count() const { return count_; }
  bool exact() const { return exact_; }
  // Every value kept (exact() only), in no particular order.
  const std::vector<int64_t>& values() const { return values_; }
  // The statistics; nearest-rank percentiles exact while exact(), else within the bound above.
  // Reorders the kept values.
  DurationStats Stats();
  // Nearest-rank percentile (p in (0, 100]); 0 when empty. Sorts the kept values.
  double Percentile(double p);
  // Adds every max(value, 0) to *sum, one at a time in arrival order while exact() (so a
  // running sum over several groups is the same double as before sketches), else the group's
  // running sum. Call before Stats() or Percentile().
  void AddPositiveTo(double* sum) const;

  // Bucket index of a non-negative value, and the bucket's [lower, upper] values (for tests).
  static uint32_t Bucket(uint64_t v);
  static void BucketRange(uint32_t b, uint64_t* lower, uint64_t* upper);

 private:
  void ToHistogram(SketchBudget* budget);
  void AddToHistogram(int64_t v);
  double ValueAtRank(uint64_t rank) const;  // 1-based
  std::vector<int64_t> values_;
  std::vector<uint64_t> hist_, neg_;  // neg_ by magnitude; allocated on first use
  bool exact_ = true;
  bool sorted_ = false;
  uint64_t taken_ = 0;  // values kept on the shared budget (given back on ToHistogram)
  uint64_t count_ = 0;
  int64_t min_ = 0, max_ = 0;
  double total_ = 0, mean_ = 0, m2_ = 0, positive_total_ = 0;
};

}  // namespace kp
