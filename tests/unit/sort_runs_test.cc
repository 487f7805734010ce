// sort_runs_test.cc: common/sort_runs.h against std::sort: few runs (merged), many runs of
// slightly late records (insertion) and of records far out of place (the sort fallback), already
// sorted, empty and one element, with ties; grouped vectors with few and too many groups.
#include "common/sort_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
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

// Calls recorded as they end: every few records an outer call comes after the 1-3 calls it made
// (a run break each, but each only a few places late).
std::vector<Item> NestedAsRecorded(std::mt19937& rng, int outer) {
  std::vector<Item> v;
  int t = 0;
  for (int i = 0; i < outer; ++i) {
    const int start = t;
    const int inner = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < inner; ++k) v.push_back({start + 1 + 3 * k, start + 3 + 3 * k, 0});
    t = start + 3 * inner + 2;
    v.push_back({start, t, 0});
  }
  for (size_t i = 0; i < v.size(); ++i) v[i].id = static_cast<int>(i);
  return v;
}

TEST(SortRuns, ManyRunsOfSlightlyLateRecordsAreSortedByInsertion) {
  std::mt19937 rng(8);
  std::vector<Item> v = NestedAsRecorded(rng, 2000);
  std::vector<Item> direct = v;
  EXPECT_TRUE(kp::InsertionSortIfNearlySorted(direct.begin(), direct.end(), ByStart()));
  EXPECT_TRUE(std::is_sorted(direct.begin(), direct.end(), ByStart()));
  ExpectSortedPermutation(v);
}

TEST(SortRuns, RecordsFarOutOfPlaceStopTheInsertionAndAreSorted) {
  std::vector<Item> reversed;
  for (int i = 0; i < 1000; ++i) reversed.push_back({1000 - i, 1000 - i, i});
  std::vector<Item> direct = reversed;
  EXPECT_FALSE(kp::InsertionSortIfNearlySorted(direct.begin(), direct.end(), ByStart()));
  // What the stopped insertion left is still the same records.
  std::sort(direct.begin(), direct.end(), [](const Item& a, const Item& b) { return a.id < b.id; });
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(direct[i].id, i);
    EXPECT_EQ(direct[i].start, 1000 - i);
  }
  ExpectSortedPermutation(reversed);
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

// Grouped: outer = track, inner = sub (the order within a track is by ByStart, whatever sub).
struct Rec {
  uint64_t track, sub;
  Item item;
};

void ExpectGroupedSort(std::vector<Rec> input) {
  std::vector<Rec> got = input, scratch;
  kp::SortGroupedRuns(
      &got, &scratch, [](const Rec& r) { return std::pair<uint64_t, uint64_t>(r.track, r.sub); },
      [](const Rec& a, const Rec& b) { return ByStart()(a.item, b.item); });
  for (size_t i = 1; i < got.size(); ++i) {
    ASSERT_TRUE(got[i - 1].track < got[i].track ||
                (got[i - 1].track == got[i].track && !ByStart()(got[i].item, got[i - 1].item)))
        << i;
  }
  auto by_id = [](const Rec& a, const Rec& b) { return a.item.id < b.item.id; };
  std::sort(got.begin(), got.end(), by_id);
  std::sort(input.begin(), input.end(), by_id);
  ASSERT_EQ(got.size(), input.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].track, input[i].track);
    EXPECT_EQ(got[i].sub, input[i].sub);
    EXPECT_EQ(got[i].item.start, input[i].item.start);
    EXPECT_EQ(got[i].item.end, input[i].item.end);
  }
}

// `tracks` x `subs` sequences, each mostly in start order, interleaved at random.
std::vector<Rec> Interleaved(std::mt19937& rng, uint64_t tracks, uint64_t subs, int n) {
  std::vector<Rec> v;
  std::vector<int> clock(tracks * subs, 0);
  for (int i = 0; i < n; ++i) {
    const uint64_t t = rng() % tracks, s = rng() % subs;
    int& c = clock[t * subs + s];
    c += 1 + static_cast<int>(rng() % 7);
    const int start = rng() % 50 == 0 ? c / 2 : c;  // now and then a late one
    v.push_back({t * 1000003, s, {start, start + static_cast<int>(rng() % 4), i}});
  }
  return v;
}

TEST(SortGroupedRuns, FewGroupsAreGroupedMergedAndMergedAgainPerTrack) {
  std::mt19937 rng(5);
  ExpectGroupedSort(Interleaved(rng, 3, 4, 5000));     // 12 groups, 3 tracks
  ExpectGroupedSort(Interleaved(rng, 7, 1, 5000));     // one group per track
  ExpectGroupedSort(Interleaved(rng, 16, 16, 20000));  // 256 groups: the most it groups
}

TEST(SortGroupedRuns, TooManyGroupsFallBackToASort) {
  std::mt19937 rng(6);
  ExpectGroupedSort(Interleaved(rng, 17, 16, 20000));  // 272 groups
}

TEST(SortGroupedRuns, EmptySingleAndSorted) {
  ExpectGroupedSort({});
  ExpectGroupedSort({{1, 0, {5, 6, 0}}});
  ExpectGroupedSort({{1, 0, {5, 6, 0}}, {1, 1, {7, 8, 1}}, {2, 0, {1, 2, 2}}});
}

}  // namespace
