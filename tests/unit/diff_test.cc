// kptrace diff tests: the rank statistics against values worked out by hand, and whole diffs of
// synthetic traces with known shifts (none, +3 % inside the noise, +20 %), setup warnings, the
// output formats, and the shipped examples compared with themselves.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "step_trace_builder.h"
#include "tools/diff/shift_statistics.h"
#include "tools/diff/trace_diff.h"

namespace kp {
namespace {

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  return WriteTestTrace("diff_test_" + name, bytes);
}

TraceSummary Summarize(const std::string& name, const StepTraceSpec& spec) {
  SummaryOptions o;
  o.keep_samples = true;
  return SummarizeTraces({WriteTemp(name, BuildStepTrace(spec))}, o);
}

const DiffRow* Find(const TraceDiff& d, const std::string& kind, const std::string& name,
                    const std::string& metric = "") {
  for (const DiffRow& r : d.rows) {
    if (r.kind == kind && r.name == name && r.metric == metric) return &r;
  }
  return nullptr;
}

TEST(ShiftStatistics, MatchHandComputedValues) {
  // a = 1..5, b = 6..10: U = 0. Normal approximation with continuity correction:
  // mean 12.5, var = 25 * 11 / 12, z = 12 / sqrt(22.9167) = 2.5067, p = erfc(z / sqrt 2).
  const ShiftEstimate e = EstimateShift({5, 3, 1, 2, 4}, {6, 7, 8, 9, 10});
  EXPECT_TRUE(e.testable);
  EXPECT_NEAR(e.p_value, 0.01219, 1e-4);
  EXPECT_DOUBLE_EQ(e.median_a, 3);
  EXPECT_DOUBLE_EQ(e.median_b, 8);
  // The 25 pairwise differences are 1..9 with counts 1,2,3,4,5,4,3,2,1: median 5. Moses:
  // K = floor(12.5 - 1.96 * 4.787) = 3, so the interval is the 4th and 22nd smallest: 3 and 7.
  EXPECT_DOUBLE_EQ(e.shift, 5);
  EXPECT_DOUBLE_EQ(e.shift_low, 3);
  EXPECT_DOUBLE_EQ(e.shift_high, 7);
  // Identical samples: no evidence of a shift.
  const ShiftEstimate same = EstimateShift({1, 2, 3, 4, 5}, {1, 2, 3, 4, 5});
  EXPECT_NEAR(same.p_value, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(same.shift, 0);
  // All values tied: the test has nothing to rank and says so with p = 1.
  EXPECT_DOUBLE_EQ(EstimateShift({2, 2, 2}, {2, 2, 2}).p_value, 1);
  // Too few values to test.
  EXPECT_FALSE(EstimateShift({1, 2}, {3, 4, 5}).testable);
}

TEST(ShiftStatistics, LargeSamplesAreThinnedButKeepTheShift) {
  std::vector<double> a, b;
  for (int i = 0; i < 20000; ++i) {
    a.push_back(1000 + i % 100);
    b.push_back(1100 + i % 100);
  }
  const ShiftEstimate e = EstimateShift(a, b);
  EXPECT_NEAR(e.shift, 100, 1);
  EXPECT_LT(e.shift_low, e.shift_high + 1e-9);
  EXPECT_LE(e.shift_low, 100);
  EXPECT_GE(e.shift_high, 100);
  EXPECT_LT(e.p_value, 1e-10);
}

TEST(Diff, NoShiftIsNotMarked) {
  StepTraceSpec a, b;
  b.seed = 2;  // same distribution, other draws
  const TraceDiff d = DiffSummaries(Summarize("none_a", a), Summarize("none_b", b), {});
  ASSERT_FALSE(d.rows.empty());
  for (const DiffRow& r : d.rows) {
    EXPECT_FALSE(r.marked) << r.kind << " " << r.name << " " << r.metric << " " << r.change_pct;
  }
  EXPECT_FALSE(d.any_regression);
  EXPECT_TRUE(d.warnings.empty());
}

TEST(Diff, ThreePercentInsideTheNoiseIsNotMarked) {
  // +/-10 % noise, 20 steps: a 3 % shift is not distinguishable, and below the 5 % threshold.
  StepTraceSpec a, b;
  a.steps = b.steps = 20;
  a.noise = b.noise = 0.10;
  b.seed = 3;
  b.scale = 1.03;
  const TraceDiff d = DiffSummaries(Summarize("three_a", a), Summarize("three_b", b), {});
  const DiffRow* gemm = Find(d, "kernel", "gemm_kernel");
  ASSERT_NE(gemm, nullptr);
  EXPECT_FALSE(gemm->marked);
  EXPECT_FALSE(d.any_regression);
  // The interval of the change covers the truth (+3 %).
  EXPECT_LE(gemm->change_low_pct, 3);
  EXPECT_GE(gemm->change_high_pct, 3);
}

TEST(Diff, SignificantButBelowThresholdIsNotMarked) {
  // 400 steps with +/-1 % noise make a +3 % shift highly significant, yet it stays unmarked
  // under the default 5 % threshold and is marked with --threshold 2.
  StepTraceSpec a, b;
  a.steps = b.steps = 400;
  a.noise = b.noise = 0.01;
  b.seed = 4;
  b.scale = 1.03;
  const TraceSummary sa = Summarize("small_a", a), sb = Summarize("small_b", b);
  const TraceDiff d = DiffSummaries(sa, sb, {});
  const DiffRow* gemm = Find(d, "kernel", "gemm_kernel");
  ASSERT_NE(gemm, nullptr);
  EXPECT_TRUE(gemm->significant);
  EXPECT_NEAR(gemm->change_pct, 3, 0.5);
  EXPECT_FALSE(gemm->marked);
  DiffOptions low;
  low.threshold_pct = 2;
  EXPECT_TRUE(Find(DiffSummaries(sa, sb, low), "kernel", "gemm_kernel")->regression);
}

TEST(Diff, TwentyPercentSlowerIsARegression) {
  StepTraceSpec a, b;
  b.seed = 5;
  b.scale = 1.20;
  b.sm_pct = 50;  // and the SM throughput dropped
  const TraceDiff d = DiffSummaries(Summarize("twenty_a", a), Summarize("twenty_b", b), {});
  for (const char* k : {"gemm_kernel", "relu_kernel"}) {
    const DiffRow* r = Find(d, "kernel", k);
    ASSERT_NE(r, nullptr) << k;
    EXPECT_TRUE(r->marked) << k;
    EXPECT_TRUE(r->regression) << k;
    EXPECT_NEAR(r->change_pct, 20, 1.5) << k;
    EXPECT_LE(r->change_low_pct, r->change_pct);
    EXPECT_GE(r->change_high_pct, r->change_pct);
    EXPECT_NEAR(r->change_low_pct, 20, 1.5);
    EXPECT_NEAR(r->change_high_pct, 20, 1.5);
    EXPECT_LT(r->estimate.p_value, 1e-6);
  }
  const DiffRow* step = Find(d, "nvtx_range", "step");
  ASSERT_NE(step, nullptr);
  EXPECT_TRUE(step->regression);
  const DiffRow* sm = Find(d, "metric", "step", "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  ASSERT_NE(sm, nullptr);
  EXPECT_TRUE(sm->marked);
  EXPECT_NEAR(sm->change_pct, -16.7, 1.5);
  EXPECT_FALSE(sm->regression);  // metrics are reported, not judged
  EXPECT_TRUE(d.any_regression);

  // A faster B (the same traces swapped) is marked but is no regression.
  const TraceDiff back = DiffSummaries(Summarize("twenty_b2", b), Summarize("twenty_a2", a), {});
  EXPECT_TRUE(Find(back, "kernel", "gemm_kernel")->marked);
  EXPECT_FALSE(back.any_regression);

  // Formats carry the same verdicts.
  const nlohmann::json j = nlohmann::json::parse(FormatDiffJson(d));
  EXPECT_TRUE(j["any_regression"].get<bool>());
  bool found = false;
  for (const auto& r : j["rows"]) {
    if (r["name"] == "gemm_kernel") {
      found = true;
      EXPECT_TRUE(r["regression"].get<bool>());
    }
  }
  EXPECT_TRUE(found);
  const std::string csv = FormatDiffCsv(d);
  EXPECT_EQ(csv.rfind("kind,name,metric,n_a,n_b,median_a", 0), 0u);
  EXPECT_NE(csv.find("kernel,gemm_kernel,,200,200,"), std::string::npos);
  const std::string text = FormatDiffText(d, 20);
  EXPECT_NE(text.find("SLOWER"), std::string::npos);
  EXPECT_NE(text.find("gemm_kernel"), std::string::npos);
}

TEST(Diff, SetupDifferencesAreWarned) {
  StepTraceSpec a, b;
  b.gpu = "NVIDIA H100";
  b.driver = "570.1";
  b.core_clock_khz = 1755000;
  const TraceDiff d = DiffSummaries(Summarize("setup_a", a), Summarize("setup_b", b), {});
  std::string all;
  for (const std::string& w : d.warnings) all += w + "\n";
  EXPECT_NE(all.find("GPU differs: A NVIDIA H200, B NVIDIA H100"), std::string::npos) << all;
  EXPECT_NE(all.find("driver differs: A 580.159.03, B 570.1"), std::string::npos) << all;
  EXPECT_NE(all.find("maximum SM clock differs"), std::string::npos) << all;
}

TEST(Diff, ShippedExamplesAgainstThemselvesChangeNothing) {
  for (const char* name : {"pytorch_h200.kptrace", "pytorch_h200_metrics.kptrace"}) {
    SummaryOptions o;
    o.keep_samples = true;
    const std::string path = std::string(KP_SOURCE_DIR) + "/examples/" + name;
    const TraceSummary s = SummarizeTraces({path}, o);
    ASSERT_TRUE(s.anything_read) << name;
    const TraceDiff d = DiffSummaries(s, s, {});
    EXPECT_GT(d.rows.size(), 10u) << name;
    EXPECT_TRUE(d.warnings.empty()) << name;
    for (const DiffRow& r : d.rows) {
      EXPECT_FALSE(r.marked) << name << ": " << r.name;
      EXPECT_DOUBLE_EQ(r.change_pct, 0) << name << ": " << r.name;
    }
  }
}

TEST(Diff, ShippedExamplesDifferInKpConfiguration) {
  SummaryOptions o;
  o.keep_samples = true;
  const std::string dir = std::string(KP_SOURCE_DIR) + "/examples/";
  const TraceDiff d = DiffSummaries(SummarizeTraces({dir + "pytorch_h200.kptrace"}, o),
                                    SummarizeTraces({dir + "pytorch_h200_metrics.kptrace"}, o), {});
  std::string all;
  for (const std::string& w : d.warnings) all += w + "\n";
  EXPECT_NE(all.find("kp configuration differs: KP_METRICS"), std::string::npos) << all;
  // Metrics replay makes B's training step far slower: a real, flagged slowdown.
  const DiffRow* step = Find(d, "nvtx_range", "step");
  ASSERT_NE(step, nullptr);
  EXPECT_TRUE(step->regression);
}

}  // namespace
}  // namespace kp
