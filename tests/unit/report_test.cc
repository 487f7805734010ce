// kptrace report tests: the timeline (busy % per bin, per-step times, stragglers) against the
// synthetic traces' known timings, and the page's structure: every section, escaped names,
// nothing fetched from outside. tests/browser checks the same pages in a real browser.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "step_trace_builder.h"
#include "tools/reader/fixed_trace.h"
#include "tools/report/html_report.h"
#include "tools/report/report_timeline.h"

namespace kp {
namespace {

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  return WriteTestTrace("report_test_" + name, bytes);
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

TEST(ReportTimeline, StragglerRankIsMarkedAtItsSlowSteps) {
  StepTraceSpec r0, r1;
  r0.steps = r1.steps = 40;
  r0.rank = 0;
  r1.rank = 1;
  r1.seed = 9;
  r1.slow_from_step = 30;  // rank 1's last 10 steps take 30 % longer
  r1.slow_factor = 1.3;
  const std::vector<std::string> paths = {WriteTemp("rank0", BuildStepTrace(r0)),
                                          WriteTemp("rank1", BuildStepTrace(r1))};
  const ReportTimeline t = BuildReportTimeline(paths, 100, 6, nullptr);
  EXPECT_TRUE(t.multi_rank);
  ASSERT_EQ(t.steps.size(), 1u);
  const RangeSteps& step = t.steps[0];
  EXPECT_EQ(step.name, "step");
  ASSERT_EQ(step.ranks.size(), 2u);
  EXPECT_EQ(step.ranks[0].rank, 0);
  EXPECT_EQ(step.ranks[1].rank, 1);
  ASSERT_EQ(step.ranks[1].durations_ns.size(), 40u);
  EXPECT_EQ(step.ranks[0].straggler_steps, 0u);
  EXPECT_EQ(step.ranks[1].straggler_steps, 10u);
  for (size_t i = 0; i < 40; ++i) EXPECT_EQ(step.ranks[1].straggler[i], i >= 30) << i;
  ASSERT_EQ(t.strips.size(), 2u);
  EXPECT_EQ(t.strips[0].label, "rank 0 GPU 0");
  EXPECT_EQ(t.strips[1].label, "rank 1 GPU 0");
  EXPECT_TRUE(t.strips[0].pm_counters.empty());

  const TraceSummary s = SummarizeTraces(paths);
  const std::string html = RenderHtmlReport(s, t, "test");
  EXPECT_EQ(Count(html, "class=\"mark straggler\""), 10u);
  EXPECT_NE(html.find("10 (straggler)"), std::string::npos);
}

TEST(ReportTimeline, BusyPercentMatchesTheKnownKernelTimes) {
  // Noise-free steps: 100 us + 2 us gap + 20 us + 2 us gap + 5 us between steps = 120 of 129 us.
  StepTraceSpec spec;
  spec.steps = 50;
  spec.noise = 0;
  const std::string path = WriteTemp("busy", BuildStepTrace(spec));
  const ReportTimeline t = BuildReportTimeline({path}, 50, 6, nullptr);
  ASSERT_EQ(t.strips.size(), 1u);
  EXPECT_EQ(t.strips[0].label, "GPU 0");
  ASSERT_EQ(t.strips[0].busy_pct.size(), 50u);
  double mean = 0;
  for (double v : t.strips[0].busy_pct) {
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 100);
    mean += v / 50;
  }
  // The span runs from the first kernel to the last kernel's end (no trailing gaps).
  const double busy = 50 * 120.0, span = 50 * 129.0 - 7;
  EXPECT_NEAR(mean, 100 * busy / span, 0.01);
  EXPECT_FALSE(t.multi_rank);
}

TEST(HtmlReport, HasEverySectionAndFetchesNothing) {
  StepTraceSpec spec;
  const std::string path = WriteTemp("page", BuildStepTrace(spec));
  const TraceSummary s = SummarizeTraces({path});
  const ReportTimeline t = BuildReportTimeline({path}, 100, 6, nullptr);
  const std::string html = RenderHtmlReport(s, t, "test");
  for (const char* id : {"setup", "utilisation", "kernels", "ranges", "copies", "sol", "notices"}) {
    EXPECT_EQ(Count(html, std::string("<section id=\"") + id + "\""), 1u) << id;
  }
  for (const char* chart : {"util-chart", "kernel-chart", "steps-chart-0", "sol-chart"}) {
    EXPECT_EQ(Count(html, std::string("id=\"") + chart + "\""), 1u) << chart;
  }
  // One speed-of-light point: the "step" range (SM 60 %, memory 30 % over the range; the page
  // shows them read while the GPU was busy, 120 of 129 us, so a little higher).
  const size_t sol = html.find("id=\"sol-chart\"");
  const std::string sol_svg = html.substr(sol, html.find("</svg>", sol) - sol);
  EXPECT_EQ(Count(sol_svg, "<circle class=\"mark\""), 1u);
  EXPECT_NE(sol_svg.find("step: SM 6"), std::string::npos) << sol_svg;
  // Offline: nothing is loaded from anywhere.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find(" href="), std::string::npos);
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  EXPECT_EQ(Count(html, "<script>"), 1u);
}

TEST(HtmlReport, AwkwardNamesAreEscaped) {
  const std::string path = WriteTemp("fixed", BuildFixedTrace());
  const TraceSummary s = SummarizeTraces({path});
  const ReportTimeline t = BuildReportTimeline({path}, 100, 6, nullptr);
  const std::string html = RenderHtmlReport(s, t, "test");
  EXPECT_EQ(Count(html, "<script"), 1u);
  EXPECT_NE(html.find("Data loss or damage"), std::string::npos);  // the fixed trace lost records
  EXPECT_NE(html.find("1 NVTX range left open at exit"), std::string::npos);
  EXPECT_EQ(HtmlEscape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

// A range whose every value set was dropped as inconsistent: the page lists no metric as "not
// collected" and shows no -1 percentage; the reading says why.
TEST(HtmlReport, RangeWithEveryValueSetDroppedListsNoValues) {
  TraceSummary s;
  MetricRangeSummary m;
  m.name = "mma";
  m.passes = 9;
  m.skip = 1;
  m.sets_inconsistent = 1;
  m.order = {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
             "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"};
  m.explanation = "no value set to read: all 1 were dropped as inconsistent";
  s.metrics.push_back(m);
  ASSERT_TRUE(s.metrics[0].all_dropped());
  const std::string html = RenderHtmlReport(s, ReportTimeline(), "test");
  EXPECT_EQ(html.find("not collected"), std::string::npos);
  EXPECT_NE(html.find("(every value set dropped)"), std::string::npos);
  EXPECT_NE(html.find("no value set to read"), std::string::npos);
  EXPECT_EQ(html.find(">-1.0<"), std::string::npos);
}

}  // namespace
}  // namespace kp
