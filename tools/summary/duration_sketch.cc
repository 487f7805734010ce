#include "tools/summary/duration_sketch.h"

#include <algorithm>
#include <cmath>

#include "tools/summary/trace_summary.h"

namespace kp {
namespace {

constexpr uint64_t kSub = uint64_t{1} << DurationSketch::kSubBits;
constexpr size_t kBuckets = (64 - DurationSketch::kSubBits + 1) * kSub;

uint64_t Magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : v; }

double Middle(uint32_t bucket) {
  uint64_t lower, upper;
  DurationSketch::BucketRange(bucket, &lower, &upper);
  return static_cast<double>(lower) + static_cast<double>(upper - lower) / 2;
}

}  // namespace

uint32_t DurationSketch::Bucket(uint64_t v) {
  if (v < kSub) return static_cast<uint32_t>(v);
  const int top = 63 - __builtin_clzll(v);  // >= kSubBits
  const int shift = top - kSubBits;
  return static_cast<uint32_t>(((static_cast<uint64_t>(shift) + 1) << kSubBits) |
                               ((v >> shift) & (kSub - 1)));
}

void DurationSketch::BucketRange(uint32_t b, uint64_t* lower, uint64_t* upper) {
  if (b < kSub) {
    *lower = *upper = b;
    return;
  }
  const int shift = static_cast<int>(b >> kSubBits) - 1;
  *lower = ((b & (kSub - 1)) | kSub) << shift;
  *upper = *lower + ((uint64_t{1} << shift) - 1);
}

void DurationSketch::Add(int64_t v, SketchBudget* budget) {
  if (count_ == 0 || v < min_) min_ = v;
  if (count_ == 0 || v > max_) max_ = v;
  if (exact_) {
    if (budget->Take()) {
      ++taken_;
    } else if (values_.size() >= kExactFloor) {
      ToHistogram(budget);
    }
    if (exact_) {
      ++count_;
      values_.push_back(v);
      sorted_ = false;
      return;
    }
  }
  AddToHistogram(v);
}

void DurationSketch::AddToHistogram(int64_t v) {
  ++count_;
  const double x = static_cast<double>(v);
  total_ += x;
  if (v > 0) positive_total_ += x;
  const double delta = x - mean_;
  mean_ += delta / static_cast<double>(count_);
  m2_ += delta * (x - mean_);
  if (v >= 0) {
    ++hist_[Bucket(static_cast<uint64_t>(v))];
  } else {
    if (neg_.empty()) neg_.assign(kBuckets, 0);
    ++neg_[Bucket(Magnitude(v))];
  }
}

void DurationSketch::ToHistogram(SketchBudget* budget) {
  exact_ = false;
  hist_.assign(kBuckets, 0);
  std::vector<int64_t> values;
  values.swap(values_);
  budget->Give(taken_);
  taken_ = 0;
  count_ = 0;
  for (int64_t v : values) AddToHistogram(v);  // arrival order, as the running sums expect
}

void DurationSketch::AddPositiveTo(double* sum) const {
  if (!exact_) {
    *sum += positive_total_;
    return;
  }
  for (int64_t v : values_) *sum += static_cast<double>(std::max<int64_t>(v, 0));
}

double DurationSketch::ValueAtRank(uint64_t rank) const {
  uint64_t seen = 0;
  double value = 0;
  bool found = false;
  for (size_t b = neg_.size(); b-- > 0 && !found;) {  // most negative first
    seen += neg_[b];
    if (seen >= rank) {
      value = -Middle(static_cast<uint32_t>(b));
      found = true;
    }
  }
  for (size_t b = 0; b < hist_.size() && !found; ++b) {
    seen += hist_[b];
    if (seen >= rank) {
      value = Middle(static_cast<uint32_t>(b));
      found = true;
    }
  }
  return std::clamp(value, static_cast<double>(min_), static_cast<double>(max_));
}

double DurationSketch::Percentile(double p) {
  if (count_ == 0) return 0;
  if (exact_) {
    if (!sorted_) std::sort(values_.begin(), values_.end());
    sorted_ = true;
    return NearestRank(values_, p);
  }
  return ValueAtRank(NearestRankIndex(count_, p) + 1);
}

DurationStats DurationSketch::Stats() {
  if (exact_) {
    sorted_ = false;  // reordered by the percentile selection, not sorted
    return ComputeDurationStats(&values_);
  }
  DurationStats s;
  s.count = count_;
  s.total = total_;
  s.mean = total_ / static_cast<double>(count_);
  s.std = std::sqrt(std::max(0.0, m2_) / static_cast<double>(count_));
  s.rel_std = s.mean != 0 ? s.std / std::fabs(s.mean) : 0;
  s.stable = s.rel_std < 0.02;
  s.min = static_cast<double>(min_);
  s.max = static_cast<double>(max_);
  s.median = Percentile(50);
  s.p95 = Percentile(95);
  s.p99 = Percentile(99);
  return s;
}

}  // namespace kp
