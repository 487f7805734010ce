#include "tools/diff/shift_statistics.h"

#include <algorithm>
#include <cmath>

namespace kp {
namespace {

double NearestRankMedian(const std::vector<double>& sorted) {
  if (sorted.empty()) return 0;
  return sorted[(sorted.size() + 1) / 2 - 1];
}

std::vector<double> Thin(const std::vector<double>& sorted) {
  if (sorted.size() <= kMaxSampleForPairs) return sorted;
  std::vector<double> out(kMaxSampleForPairs);
  const double step = static_cast<double>(sorted.size()) / kMaxSampleForPairs;
  for (size_t i = 0; i < kMaxSampleForPairs; ++i) {
    out[i] = sorted[static_cast<size_t>((static_cast<double>(i) + 0.5) * step)];
  }
  return out;
}

}  // namespace

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) {
  const double m = static_cast<double>(a.size()), n = static_cast<double>(b.size());
  if (a.empty() || b.empty()) return 1;
  // Merge the two sorted samples, giving tied values their average rank.
  double rank_sum_a = 0, tie_term = 0;
  size_t i = 0, j = 0;
  double next_rank = 1;
  while (i < a.size() || j < b.size()) {
    const double v = (j >= b.size() || (i < a.size() && a[i] <= b[j])) ? a[i] : b[j];
    size_t ca = 0, cb = 0;
    while (i < a.size() && a[i] == v) ++i, ++ca;
    while (j < b.size() && b[j] == v) ++j, ++cb;
    const double t = static_cast<double>(ca + cb);
    const double avg_rank = next_rank + (t - 1) / 2;
    rank_sum_a += avg_rank * static_cast<double>(ca);
    tie_term += t * t * t - t;
    next_rank += t;
  }
  const double u = rank_sum_a - m * (m + 1) / 2;
  const double mean = m * n / 2;
  const double total = m + n;
  const double var = m * n / 12 * ((total + 1) - tie_term / (total * (total - 1)));
  if (var <= 0) return 1;  // every value equal
  const double z = std::max(0.0, std::fabs(u - mean) - 0.5) / std::sqrt(var);
  return std::erfc(z / std::sqrt(2.0));
}

ShiftEstimate EstimateShift(std::vector<double> a, std::vector<double> b) {
  ShiftEstimate e;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  e.n_a = a.size();
  e.n_b = b.size();
  e.median_a = NearestRankMedian(a);
  e.median_b = NearestRankMedian(b);
  e.shift = e.shift_low = e.shift_high = e.median_b - e.median_a;
  if (a.size() < 3 || b.size() < 3) return e;
  e.testable = true;
  e.p_value = MannWhitneyP(a, b);
  const std::vector<double> ta = Thin(a), tb = Thin(b);
  std::vector<double> diffs;
  diffs.reserve(ta.size() * tb.size());
  for (double y : tb) {
    for (double x : ta) diffs.push_back(y - x);
  }
  const size_t k_total = diffs.size();
  auto order_stat = [&](size_t k) {  // k-th smallest, 0-based
    std::nth_element(diffs.begin(), diffs.begin() + static_cast<std::ptrdiff_t>(k), diffs.end());
    return diffs[k];
  };
  e.shift = k_total % 2 == 1 ? order_stat(k_total / 2)
                             : (order_stat(k_total / 2 - 1) + order_stat(k_total / 2)) / 2;
  const double m = static_cast<double>(ta.size()), n = static_cast<double>(tb.size());
  const double k = std::floor(m * n / 2 - 1.959964 * std::sqrt(m * n * (m + n + 1) / 12));
  if (k >= 0) {
    const size_t lo = static_cast<size_t>(k);  // (K+1)-th smallest, 0-based K
    e.shift_low = order_stat(lo);
    e.shift_high = order_stat(k_total - 1 - lo);
  } else {  // too few values for a 95 % interval: the whole range of differences
    e.shift_low = *std::min_element(diffs.begin(), diffs.end());
    e.shift_high = *std::max_element(diffs.begin(), diffs.end());
  }
  return e;
}

}  // namespace kp
