// The summary's bounded-memory parts: the duration sketch (exact while its budget lasts, then a
// log-linear histogram whose percentiles are within 2^-8 of the exact nearest-rank value) and
// the external interval sort (same order as an in-memory sort, whatever the run size).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tools/summary/duration_sketch.h"
#include "tools/summary/interval_sort.h"
#include "tools/summary/trace_summary.h"

namespace kp {
namespace {

// Feeds `values` to a sketch with no budget (so it moves to its histogram after
// kExactFloor values) and checks every statistic against the exact ones.
void ExpectWithinBound(const std::vector<int64_t>& values, const std::string& what) {
  SCOPED_TRACE(what);
  SketchBudget none(0);
  DurationSketch sketch;
  for (int64_t v : values) sketch.Add(v, &none);
  ASSERT_EQ(sketch.exact(), values.size() <= DurationSketch::kExactFloor);
  std::vector<int64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());  // the reference percentiles below read it sorted
  const DurationStats exact = ComputeDurationStats(&sorted);
  const DurationStats got = sketch.Stats();
  EXPECT_EQ(got.count, exact.count);
  EXPECT_EQ(got.min, exact.min);
  EXPECT_EQ(got.max, exact.max);
  EXPECT_NEAR(got.total, exact.total, std::fabs(exact.total) * 1e-12);
  EXPECT_NEAR(got.mean, exact.mean, std::fabs(exact.mean) * 1e-9 + 1e-9);
  EXPECT_NEAR(got.std, exact.std, exact.std * 1e-6 + 1e-6);
  const double kBound = 1.0 / 256;  // 2^-(kSubBits + 1)
  for (double p : {1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0}) {
    const double want = NearestRank(sorted, p);
    const double have = p == 50   ? got.median
                        : p == 95 ? got.p95
                        : p == 99 ? got.p99
                                  : [&] { return sketch.Percentile(p); }();
    EXPECT_LE(std::fabs(have - want), std::fabs(want) * kBound) << "p" << p << " exact " << want;
  }
}

TEST(DurationSketch, BucketsCoverEveryValueWithinTheRelativeWidth) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);
    uint64_t lo, hi;
    DurationSketch::BucketRange(DurationSketch::Bucket(v), &lo, &hi);
    ASSERT_LE(lo, v);
    ASSERT_GE(hi, v);
    ASSERT_LE(static_cast<double>(hi - lo), static_cast<double>(lo) / 128) << v;
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{255}, uint64_t{256},
                     ~uint64_t{0}, uint64_t{1} << 63}) {
    uint64_t lo, hi;
    DurationSketch::BucketRange(DurationSketch::Bucket(v), &lo, &hi);
    EXPECT_LE(lo, v);
    EXPECT_GE(hi, v);
  }
}

TEST(DurationSketch, ExactWhileTheBudgetLastsMatchesComputeDurationStats) {
  std::mt19937_64 rng(1);
  SketchBudget budget(100000);
  DurationSketch sketch;
  std::vector<int64_t> values;
  for (int i = 0; i < 50000; ++i) {
    values.push_back(static_cast<int64_t>(rng() % 1000000));
    sketch.Add(values.back(), &budget);
  }
  ASSERT_TRUE(sketch.exact());
  const DurationStats got = sketch.Stats();
  const DurationStats want = ComputeDurationStats(&values);
  EXPECT_EQ(got.median, want.median);
  EXPECT_EQ(got.p95, want.p95);
  EXPECT_EQ(got.p99, want.p99);
  EXPECT_EQ(got.total, want.total);
  EXPECT_EQ(got.std, want.std);  // the same doubles, summed in the same order
}

TEST(DurationSketch, SpentBudgetMovesLargeGroupsToTheHistogramAndGivesItBack) {
  SketchBudget budget(5000);
  DurationSketch big, small;
  for (int i = 0; i < 10000; ++i) big.Add(i, &budget);
  EXPECT_FALSE(big.exact());
  EXPECT_FALSE(budget.spent());  // what `big` held went back to the pool
  for (int i = 0; i < 3000; ++i) small.Add(i, &budget);
  EXPECT_TRUE(small.exact());
}

TEST(DurationSketch, PercentilesWithinTheBoundOnAdversarialDistributions) {
  std::mt19937_64 rng(42);
  const size_t n = 200000;
  std::vector<int64_t> v;
  // Uniform over a wide range.
  for (size_t i = 0; i < n; ++i) v.push_back(static_cast<int64_t>(rng() % 1000000000));
  ExpectWithinBound(v, "uniform 0..1e9");
  // Heavy tail: log-uniform over 12 decades.
  v.clear();
  for (size_t i = 0; i < n; ++i) {
    v.push_back(static_cast<int64_t>(
        std::pow(10.0, 12.0 * static_cast<double>(rng() % 1000000) / 1000000.0)));
  }
  ExpectWithinBound(v, "log-uniform 1..1e12");
  // Two far-apart modes with the p95 exactly at the boundary between them.
  v.clear();
  for (size_t i = 0; i < n; ++i) v.push_back(i < n * 95 / 100 ? 1000 + i % 7 : 5000000000 + i);
  ExpectWithinBound(v, "bimodal, p95 on the edge");
  // All equal (a bucket much wider than the spread must not move the answer off the value).
  v.assign(n, 123456789);
  ExpectWithinBound(v, "constant");
  // Small values: one bucket each, so exact.
  v.clear();
  for (size_t i = 0; i < n; ++i) v.push_back(static_cast<int64_t>(rng() % 128));
  ExpectWithinBound(v, "below 128");
  // Sorted descending, then ascending: order of arrival does not matter.
  v.clear();
  for (size_t i = 0; i < n; ++i) v.push_back(static_cast<int64_t>(n - i) * 1000);
  for (size_t i = 0; i < n; ++i) v.push_back(static_cast<int64_t>(i) * 3);
  ExpectWithinBound(v, "descending then ascending");
  // Damage: negative durations mixed in, and the extremes of int64.
  v.clear();
  for (size_t i = 0; i < n; ++i) {
    v.push_back(static_cast<int64_t>(rng() % 2000000) - 1000000);
  }
  v.push_back(std::numeric_limits<int64_t>::min());
  v.push_back(std::numeric_limits<int64_t>::max());
  SketchBudget none(0);
  DurationSketch extremes;
  for (int64_t x : v) extremes.Add(x, &none);
  EXPECT_EQ(extremes.Stats().min, static_cast<double>(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(extremes.Stats().max, static_cast<double>(std::numeric_limits<int64_t>::max()));
  v.pop_back();
  v.pop_back();
  ExpectWithinBound(v, "negative and positive");
}

// Everything `sorter` gives back, appended to `got` in its order.
Status Drain(ExternalIntervalSort* sorter, std::vector<KeyedInterval>* got) {
  return sorter->ForEachSorted(
      [got](const KeyedInterval* b, size_t n) { got->insert(got->end(), b, b + n); });
}

TEST(ExternalIntervalSort, ExtremeAndDamagedIntervalsSurviveTheRunsOnDisk) {
  // Runs of two entries: every value below goes through the file's varint encoding.
  ExternalIntervalSort sorter(2);
  const std::vector<KeyedInterval> in = {
      {UINT64_MAX, UINT64_MAX - 1, 0, UINT64_MAX},  // end before start (a damaged record)
      {0, 0, UINT64_MAX, 0},
      {7, 5, 4, 1},
      {7, 5, 9, UINT64_MAX - 3},
      {7, 1, 2, 2},
  };
  for (const KeyedInterval& iv : in) sorter.Add(iv.key, iv.start, iv.end, iv.tag);
  std::vector<KeyedInterval> got;
  ASSERT_TRUE(Drain(&sorter, &got).ok());
  ASSERT_EQ(got.size(), in.size());
  auto same = [](const KeyedInterval& a, const KeyedInterval& b) {
    return a.key == b.key && a.start == b.start && a.end == b.end && a.tag == b.tag;
  };
  EXPECT_TRUE(same(got[0], in[1]));
  EXPECT_TRUE(same(got[1], in[4]));
  // The two (7, 5) entries in either order, each whole.
  EXPECT_TRUE((same(got[2], in[2]) && same(got[3], in[3])) ||
              (same(got[2], in[3]) && same(got[3], in[2])));
  EXPECT_TRUE(same(got[4], in[0]));
}

// Drains `sorter` and checks that it gave back exactly `want` (each interval whole, its tag
// with it) in (key, start) order.
void ExpectSortedCopyOf(ExternalIntervalSort* sorter, std::vector<KeyedInterval> want) {
  std::vector<KeyedInterval> got;
  ASSERT_TRUE(Drain(sorter, &got).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 1; i < got.size(); ++i) {
    ASSERT_TRUE(std::tie(got[i - 1].key, got[i - 1].start) <= std::tie(got[i].key, got[i].start))
        << i;
  }
  auto full = [](const KeyedInterval& a, const KeyedInterval& b) {
    return std::tie(a.key, a.start, a.end, a.tag) < std::tie(b.key, b.start, b.end, b.tag);
  };
  std::sort(want.begin(), want.end(), full);
  std::sort(got.begin(), got.end(), full);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(!full(got[i], want[i]) && !full(want[i], got[i])) << i;
  }
}

TEST(ExternalIntervalSort, RunsLargerThanOneReadComeBackWhole) {
  // Wide values make entries of up to 40 encoded bytes; runs of 50,000 are ~1 MiB on disk, read
  // back 64 KiB at a time, so entries straddle the reads (and the 1 MiB write pieces).
  std::mt19937_64 rng(11);
  ExternalIntervalSort sorter(50000);
  std::vector<KeyedInterval> want;
  for (int i = 0; i < 160000; ++i) {
    KeyedInterval iv{rng() % 3, rng(), rng(), rng()};
    if (i % 5 == 0) iv = {rng() % 3, rng() % 1000, rng() % 1000, rng() % 4};
    sorter.Add(iv.key, iv.start, iv.end, iv.tag);
    want.push_back(iv);
  }
  ExpectSortedCopyOf(&sorter, want);
}

TEST(ExternalIntervalSort, FewStreamsPerDeviceInterleavedComeOutInStartOrder) {
  // As in a trace: per (device, stream) the intervals mostly arrive in time order, streams and
  // devices interleaved, a few late ones; sorted in runs of 1000 (both grouping and merging).
  std::mt19937_64 rng(5);
  ExternalIntervalSort sorter(1000);
  std::vector<KeyedInterval> want;
  uint64_t clock[3][4] = {};
  for (int i = 0; i < 20500; ++i) {
    const uint64_t key = rng() % 3, tag = rng() % 4;
    uint64_t& t = clock[key][tag];
    t += 1 + rng() % 50;
    const uint64_t start = rng() % 97 == 0 ? t / 2 : t;  // now and then a late one
    KeyedInterval iv{key, start, start + rng() % 100, tag};
    sorter.Add(iv.key, iv.start, iv.end, iv.tag);
    want.push_back(iv);
  }
  ExpectSortedCopyOf(&sorter, want);
}

TEST(ExternalIntervalSort, SpilledRunsMergeIntoTheInMemoryOrder) {
  std::mt19937_64 rng(3);
  ExternalIntervalSort sorter(1000);  // 100 runs on disk plus a remainder in memory
  std::vector<KeyedInterval> want;
  for (int i = 0; i < 100500; ++i) {
    KeyedInterval iv{rng() % 5, rng() % 1000000, 0, 0};
    iv.end = iv.start + rng() % 1000;
    iv.tag = iv.end * 7 + 1;  // travels with its interval through the runs on disk
    sorter.Add(iv.key, iv.start, iv.end, iv.tag);
    want.push_back(iv);
  }
  EXPECT_EQ(sorter.size(), want.size());
  std::sort(want.begin(), want.end(), [](const KeyedInterval& a, const KeyedInterval& b) {
    return a.key != b.key ? a.key < b.key : a.start < b.start;
  });
  std::vector<KeyedInterval> got;
  const Status sorted = Drain(&sorter, &got);
  ASSERT_TRUE(sorted.ok()) << sorted.message();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].key, want[i].key) << i;
    ASSERT_EQ(got[i].start, want[i].start) << i;
    ASSERT_EQ(got[i].tag, got[i].end * 7 + 1) << i;
  }
  EXPECT_EQ(sorter.size(), 0u);
}

TEST(ExternalIntervalSort, RunsInArrivalOrderMergeWhetherTheirTimesMeetOrOverlap) {
  // Intervals arriving in time order, as a trace delivers them (each run a stretch of time), on
  // three devices; every 50th one arrives late, from far back, so runs also overlap in time.
  std::mt19937_64 rng(17);
  ExternalIntervalSort sorter(700);
  std::vector<KeyedInterval> want;
  uint64_t now = 1000;
  for (int i = 0; i < 20000; ++i) {
    now += 1 + rng() % 50;
    const uint64_t start = i % 50 == 49 ? now - rng() % 100000 - 1 : now;
    const KeyedInterval iv{rng() % 3, start, start + rng() % 300, rng() % 4};
    sorter.Add(iv.key, iv.start, iv.end, iv.tag);
    want.push_back(iv);
  }
  ExpectSortedCopyOf(&sorter, want);
}

TEST(ExternalIntervalSort, InRunOrderGivesEveryIntervalOnceRunByRun) {
  std::mt19937_64 rng(23);
  ExternalIntervalSort sorter(1000);  // 5 runs on disk and 500 in memory
  std::vector<KeyedInterval> want;
  for (int i = 0; i < 5500; ++i) {
    const uint64_t start = rng() % 1000000;
    const KeyedInterval iv{rng() % 4, start, start + rng() % 1000, rng() % 8};
    sorter.Add(iv.key, iv.start, iv.end, iv.tag);
    want.push_back(iv);
  }
  std::vector<KeyedInterval> got;
  ASSERT_TRUE(sorter
                  .ForEachInRunOrder(
                      [&got](const KeyedInterval* b, size_t n) { got.insert(got.end(), b, b + n); })
                  .ok());
  ASSERT_EQ(got.size(), want.size());
  // The runs on disk come whole and in order, each sorted by (key, start); then the rest as
  // added.
  for (size_t run = 0; run < 5; ++run) {
    for (size_t i = run * 1000 + 1; i < (run + 1) * 1000; ++i) {
      ASSERT_TRUE(std::tie(got[i - 1].key, got[i - 1].start) <= std::tie(got[i].key, got[i].start))
          << i;
    }
  }
  for (size_t i = 5000; i < got.size(); ++i) {
    ASSERT_EQ(got[i].start, want[i].start) << i;
    ASSERT_EQ(got[i].tag, want[i].tag) << i;
  }
  auto full = [](const KeyedInterval& a, const KeyedInterval& b) {
    return std::tie(a.key, a.start, a.end, a.tag) < std::tie(b.key, b.start, b.end, b.tag);
  };
  std::sort(want.begin(), want.end(), full);
  std::sort(got.begin(), got.end(), full);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_FALSE(full(got[i], want[i]) || full(want[i], got[i]));
  EXPECT_EQ(sorter.size(), 0u);
}

}  // namespace
}  // namespace kp
