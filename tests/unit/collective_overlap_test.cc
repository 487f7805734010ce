// collective_overlap_test.cc: tools/summary/collective_overlap.h against the lists it replaces:
// the union of the collective kernels and its intersection with the union of the compute
// kernels, computed from interval lists merged by time_intervals.h, on random kernels.
#include "tools/summary/collective_overlap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "tools/summary/time_intervals.h"

namespace {

struct Kernel {
  uint64_t start, end;
  bool collective;
};

using Spans = std::vector<kp::TimeInterval>;

uint64_t Intersection(const Spans& a, const Spans& b) {
  uint64_t total = 0;
  for (const auto& x : a) {
    for (const auto& y : b) {
      const uint64_t lo = std::max(x.start, y.start), hi = std::min(x.end, y.end);
      if (hi > lo) total += hi - lo;
    }
  }
  return total;
}

TEST(CollectiveOverlap, EqualsTheUnionsOfSortedLists) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Kernel> kernels;
    const int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const uint64_t start = 1 + rng() % 1000;
      kernels.push_back({start, start + rng() % (trial % 3 == 0 ? 5 : 200), rng() % 3 == 0});
    }
    std::sort(kernels.begin(), kernels.end(),
              [](const Kernel& a, const Kernel& b) { return a.start < b.start; });
    kp::CollectiveOverlap sweep;
    Spans collective, compute;
    for (const Kernel& k : kernels) {
      sweep.Add(k.start, k.end, k.collective);
      (k.collective ? collective : compute).push_back({k.start, k.end});
    }
    sweep.Finish();
    const Spans c = kp::MergeIntervals(collective), p = kp::MergeIntervals(compute);
    uint64_t busy = 0;
    for (const auto& s : c) busy += s.end - s.start;
    ASSERT_EQ(sweep.collective_busy_ns(), busy) << "trial " << trial;
    ASSERT_EQ(sweep.overlap_ns(), Intersection(c, p)) << "trial " << trial;
  }
}

TEST(CollectiveOverlap, HandWorked) {
  // Compute [0,30) and [40,50); collectives [10,20), [15,45), [60,70): busy 35+10 = 45,
  // overlapping compute over [10,30) and [40,45): 25.
  kp::CollectiveOverlap sweep;
  sweep.Add(0, 30, false);
  sweep.Add(10, 20, true);
  sweep.Add(15, 45, true);
  sweep.Add(40, 50, false);
  sweep.Add(60, 70, true);
  sweep.Finish();
  EXPECT_EQ(sweep.collective_busy_ns(), 45u);
  EXPECT_EQ(sweep.overlap_ns(), 25u);
  kp::CollectiveOverlap none;
  none.Finish();
  EXPECT_EQ(none.collective_busy_ns(), 0u);
  EXPECT_EQ(none.overlap_ns(), 0u);
}

}  // namespace
