// sort_runs_test.cc: common/sort_runs.h against std::sort: few runs (merged), many runs (the
// sort fallback), already sorted, empty and one element, with ties.
#include "common/sort_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace {

struct Item {
  int start;
  int end;
  int id;  // which input position, to tell equal keys apart
};
struct ByStart {  // the exporters' order: start ascending, longer first
  bool operator()(const Item& a, const Item& b) const {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  }
};

// `runs` runs of sorted items, concatenated.
std::vector<Item> Runs(std::mt19937& rng, int runs, int per_run) {
  std::vector<Item> v;
  for (int r = 0; r < runs; ++r) {
    std::vector<Item> run;
    for (int i = 0; i < per_run; ++i) {
      const int start = static_cast<int>(rng() % 200);
      run.push_back({start, start + static_cast<int>(rng() % 5), 0});
    }
    std::sort(run.begin(), run.end(), ByStart());
    v.insert(v.end(), run.begin(), run.end());
  }
  for (size_t i = 0; i < v.size(); ++i) v[i].id = static_cast<int>(i);
  return v;
}

void ExpectSortedPermutation(std::vector<Item> input) {
  std::vector<Item> got = input;
  kp::SortRuns(got.begin(), got.end(), ByStart());
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end(), ByStart()));
  auto by_id = [](const Item& a, const Item& b) { return a.id < b.id; };
  std::sort(got.begin(), got.end(), by_id);
  std::sort(input.begin(), input.end(), by_id);
  ASSERT_EQ(got.size(), input.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].start, input[i].start);
    EXPECT_EQ(got[i].end, input[i].end);
  }
}

TEST(SortRuns, FewRunsAreMergedIntoOrder) {
  std::mt19937 rng(3);
  for (int runs = 1; runs <= 63; ++runs) ExpectSortedPermutation(Runs(rng, runs, 37));
}

TEST(SortRuns, ManyRunsFallBackToASort) {
  std::mt19937 rng(4);
  ExpectSortedPermutation(Runs(rng, 64, 20));
  ExpectSortedPermutation(Runs(rng, 400, 3));
}

TEST(SortRuns, EqualRunsKeepTheirOrderWhenMerged) {
  // Merging is stable: equal items keep their input order.
  std::vector<Item> v = {{1, 1, 0}, {2, 2, 1}, {1, 1, 2}, {2, 2, 3}};
  kp::SortRuns(v.begin(), v.end(), ByStart());
  EXPECT_EQ(v[0].id, 0);
  EXPECT_EQ(v[1].id, 2);
  EXPECT_EQ(v[2].id, 1);
  EXPECT_EQ(v[3].id, 3);
}

TEST(SortRuns, EmptyAndSingle) {
  std::vector<Item> none;
  kp::SortRuns(none.begin(), none.end(), ByStart());
  EXPECT_TRUE(none.empty());
  std::vector<Item> one = {{5, 6, 0}};
  kp::SortRuns(one.begin(), one.end(), ByStart());
  EXPECT_EQ(one[0].start, 5);
}

}  // namespace
