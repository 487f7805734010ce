// step_ranges_test.cc: tools/summary/step_ranges.h against the in-memory way of choosing the
// step range (every occurrence in a list, sorted by thread, start and longest first, the
// outermost marked in one pass, durations grouped per name), on random nested ranges, with sort
// runs small enough that both of its sorters go to disk, and runs of one start that straddle the
// sorter's batches.
#include "tools/summary/step_ranges.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using kp::StepRanges;
using Name = StepRanges::Name;

struct Occurrence {
  Name name;
  uint32_t thread;
  uint64_t start, end;
};
using Files = std::vector<std::vector<Occurrence>>;

bool IsNccl(const std::string& s) { return s.find("nccl") != std::string::npos; }

// The reference: each file's occurrences in memory.
Name Reference(Files files, std::vector<std::vector<double>>* steps) {
  std::map<Name, std::vector<std::vector<double>>> per_name;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    std::vector<Occurrence>& v = files[fi];
    std::sort(v.begin(), v.end(), [](const Occurrence& a, const Occurrence& b) {
      if (a.thread != b.thread) return a.thread < b.thread;
      if (a.start != b.start) return a.start < b.start;
      if (a.end != b.end) return a.end > b.end;
      return a.name < b.name;  // one interval under two names: the first name is the outer one
    });
    std::map<Name, std::vector<std::pair<uint64_t, double>>> outer;
    bool have = false;
    uint32_t thread = 0;
    uint64_t enclosing_end = 0;
    for (const Occurrence& r : v) {
      if (have && r.thread == thread && r.start < enclosing_end) continue;
      have = true;
      thread = r.thread;
      enclosing_end = r.end;
      outer[r.name].emplace_back(r.start, static_cast<double>(r.end - r.start));
    }
    for (auto& [name, occ] : outer) {
      if (occ.size() < 2 || IsNccl(name.first) || IsNccl(name.second)) continue;
      std::sort(occ.begin(), occ.end());
      auto& slot = per_name[name];
      slot.resize(files.size());
      for (const auto& [start, duration] : occ) slot[fi].push_back(duration);
    }
  }
  Name best;
  size_t best_files = 0;
  double best_total = -1;
  for (const auto& [name, per_file] : per_name) {
    size_t present = 0;
    for (const auto& d : per_file) present += d.empty() ? 0 : 1;
    double total = 0;
    for (double d : per_file[0]) total += d;
    if (present > best_files || (present == best_files && total > best_total)) {
      best = name;
      best_files = present;
      best_total = total;
    }
  }
  steps->clear();
  if (best_files < 2) return {};
  *steps = per_name[best];
  return best;
}

Name Streamed(const Files& files, size_t run_entries, std::vector<std::vector<double>>* steps) {
  StepRanges ranges(files.size(), run_entries);
  std::map<Name, uint32_t> keys;  // one key per name across the files, as the summary gives
  for (size_t fi = 0; fi < files.size(); ++fi) {
    for (const Occurrence& r : files[fi]) {
      const uint32_t key = keys.emplace(r.name, static_cast<uint32_t>(keys.size())).first->second;
      ranges.Add(fi, key, r.name, r.thread, r.start, r.end);
    }
    EXPECT_TRUE(ranges.FinishFile(fi).ok());
  }
  Name step;
  EXPECT_TRUE(ranges.Choose(&step, steps).ok());
  return step;
}

// A training loop per thread: steps (some starting at the same nanosecond as their first
// child), children nested in them, ranges between steps, an NCCL-domain range repeating at the
// top level, zero-length ranges; in recording order (a range when it ends), shuffled a little.
std::vector<Occurrence> RandomFile(std::mt19937_64& rng, int steps, const std::string& step_name) {
  std::vector<Occurrence> v;
  const uint32_t threads = 1 + static_cast<uint32_t>(rng() % 3);
  for (uint32_t t = 0; t < threads; ++t) {
    uint64_t now = 1000 + rng() % 1000;
    const uint32_t tid = 100 + t;
    for (int s = 0; s < steps; ++s) {
      const uint64_t step_start = now;
      uint64_t child = step_start + (rng() % 3 == 0 ? 0 : rng() % 50);
      const int children = static_cast<int>(rng() % 4);
      for (int c = 0; c < children; ++c) {
        // Zero-length sometimes, so that up to four ranges share one start.
        const uint64_t len = rng() % 3 == 0 ? 0 : rng() % 200;
        v.push_back({{c % 2 == 0 ? "forward" : "backward", ""}, tid, child, child + len});
        child += len + (rng() % 2 == 0 ? 0 : rng() % 30);
      }
      const uint64_t step_end = child + 1 + rng() % 100;
      v.push_back({{step_name, ""}, tid, step_start, step_end});
      now = step_end + rng() % 40;
      if (rng() % 4 == 0) {  // a top-level range between steps
        v.push_back({{"data", ""}, tid, now, now + rng() % 60});
        now += 61;
      }
      if (rng() % 3 == 0) {
        v.push_back({{"allreduce", "nccl"}, tid, now, now + 500});
        now += 501;
      }
    }
  }
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    if (rng() % 8 == 0) std::swap(v[i], v[i + 1]);
  }
  return v;
}

TEST(StepRanges, EqualsTheInMemoryChoiceWithRunsOnDisk) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    const size_t n_files = 1 + rng() % 4;
    Files files;
    for (size_t f = 0; f < n_files; ++f) {
      // Mostly "step"; sometimes a file calls it otherwise, or has too few of it.
      const std::string name = rng() % 5 == 0 ? "train_step" : "step";
      // Some files longer than the sorter's batches of 1,024.
      const int steps = static_cast<int>(trial % 4 == 0 ? 300 + rng() % 300 : rng() % 40);
      files.push_back(RandomFile(rng, steps, name));
    }
    std::vector<std::vector<double>> want, got;
    const Name expected = Reference(files, &want);
    for (size_t run_entries : {size_t{7}, size_t{64}, size_t{1} << 18}) {
      const Name chosen = Streamed(files, run_entries, &got);
      EXPECT_EQ(chosen, expected) << "trial " << trial << ", runs of " << run_entries;
      EXPECT_EQ(got, want) << "trial " << trial << ", runs of " << run_entries;
    }
  }
}

TEST(StepRanges, ManyOutermostOccurrencesWaitOnDisk) {
  // More outermost occurrences than one sort run holds, in both files.
  std::mt19937_64 rng(9);
  constexpr size_t kSteps = 12288;
  Files files(2);
  for (auto& f : files) {
    uint64_t now = 1;
    for (size_t i = 0; i < kSteps; ++i) {
      const uint64_t len = 1 + rng() % 1000;
      f.push_back({{"step", ""}, 7, now, now + len});
      f.push_back({{"op", ""}, 7, now, now + len / 2});  // same start: enclosed
      now += len + 1;
    }
  }
  std::vector<std::vector<double>> want, got;
  const Name expected = Reference(files, &want);
  ASSERT_EQ(expected, Name("step", ""));
  EXPECT_EQ(Streamed(files, 1000, &got), expected);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].size(), kSteps);
  EXPECT_EQ(got, want);
}

TEST(StepRanges, NoStepWhenOnlyOneProcessRepeatsARangeOrOnlyNcclRepeats) {
  Files files(2);
  files[0] = {{{"step", ""}, 1, 10, 20}, {{"step", ""}, 1, 30, 40}};
  files[1] = {{{"step", ""}, 1, 10, 20}, {{"ar", "nccl"}, 1, 30, 40}, {{"ar", "nccl"}, 1, 50, 60}};
  std::vector<std::vector<double>> got{{1.0}};
  EXPECT_EQ(Streamed(files, 64, &got), Name());
  EXPECT_TRUE(got.empty());
}

TEST(StepRanges, AParentStartingWithItsChildIsTheOutermostAndTiesGoToTheFirstFilesTime) {
  Files files(2);
  for (auto& f : files) {
    // "outer" starts at the same ns as "inner" and lasts longer; "b" repeats at top level too.
    f = {{{"inner", ""}, 1, 100, 150}, {{"outer", ""}, 1, 100, 200}, {{"inner", ""}, 1, 300, 350},
         {{"outer", ""}, 1, 300, 400}, {{"b", ""}, 1, 500, 510},     {{"b", ""}, 1, 600, 610}};
  }
  // In the second file "b" takes far longer: only the first file's time breaks the tie.
  files[1][4].end = 5000;
  files[1][5] = {{"b", ""}, 1, 6000, 9000};
  std::vector<std::vector<double>> want, got;
  EXPECT_EQ(Reference(files, &want), Name("outer", ""));
  EXPECT_EQ(Streamed(files, 2, &got), Name("outer", ""));  // 200 ns in file 0 against b's 20
  EXPECT_EQ(got, (std::vector<std::vector<double>>{{100, 100}, {100, 100}}));
  EXPECT_EQ(got, want);
}

}  // namespace
