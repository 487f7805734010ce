// shift_statistics.h: how much two samples differ, and whether the difference is real.
//
// - Mann-Whitney U (Wilcoxon rank-sum), two-sided, normal approximation with the tie correction
//   and a continuity correction of 0.5. Ranks make it indifferent to outliers and to the shape
//   of the distributions (kernel durations are skewed and multi-modal).
// - Hodges-Lehmann shift: the median of all pairwise differences b_j - a_i; its 95 % confidence
//   interval is the Moses interval, the order statistics K+1 and mn-K of those differences with
//   K = floor(mn/2 - 1.96 sqrt(mn(m+n+1)/12)).
// Samples larger than kMaxSampleForPairs are thinned to evenly spaced order statistics of that
// many values before the pairwise step (the U test always uses every value).
#pragma once

#include <cstddef>
#include <vector>

namespace kp {

inline constexpr size_t kMaxSampleForPairs = 2000;

struct ShiftEstimate {
  size_t n_a = 0, n_b = 0;
  double median_a = 0, median_b = 0;     // nearest-rank medians (as kptrace summary)
  double shift = 0;                      // Hodges-Lehmann estimate of b - a
  double shift_low = 0, shift_high = 0;  // its 95 % confidence interval
  double p_value = 1;                    // Mann-Whitney, two-sided; 1 when untestable
  bool testable = false;                 // both samples have >= 3 values
};

// `a` and `b` need not be sorted.
ShiftEstimate EstimateShift(std::vector<double> a, std::vector<double> b);

// Two-sided p-value of the Mann-Whitney U test (exposed for tests).
double MannWhitneyP(const std::vector<double>& sorted_a, const std::vector<double>& sorted_b);

}  // namespace kp
