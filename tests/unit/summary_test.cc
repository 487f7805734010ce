// Summary tests: statistics checked against values computed independently here, the busy/gap
// reading, append-log behaviour, and damaged input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "tests/unit/scratch_dir.h"
#include "tools/reader/fixed_trace.h"
#include "tools/reader/proto_trace_writer.h"
#include "tools/summary/trace_summary.h"

namespace kp {
namespace {

std::string TempPath(const std::string& name) {
  return kp::test::ScratchPath("summary_test_" + name);
}
std::string WriteTemp(const std::string& name, const std::string& bytes) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}
std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Interns `name` as string `id` and adds kernel shape `id` with it as its name and demangled name.
// A chunk with range name 1 = `name` and range-mode metric config 1 (`passes`, warm-up skip 1,
// `metrics`).
MetricConfig* AddRangeConfig(Chunk* c, const std::string& name, uint32_t passes,
                             const std::vector<std::string>& metrics) {
  c->set_time_base_ns(1000000000);
  InternedString* str = c->add_strings();
  str->set_id(1);
  str->set_value(name);
  MetricConfig* cfg = c->add_metric_configs();
  cfg->set_id(1);
  cfg->set_mode("range");
  cfg->set_num_passes(passes);
  cfg->set_skip(1);
  for (const std::string& m : metrics) cfg->add_metric_names(m);
  return cfg;
}

void AddKernelShape(Chunk* c, uint32_t id, const std::string& name) {
  InternedString* s = c->add_strings();
  s->set_id(id);
  s->set_value(name);
  KernelShape* sh = c->add_kernel_shapes();
  sh->set_id(id);
  sh->set_name(id);
  sh->set_demangled(id);
}

// 100 launches of one kernel with durations 1..100 us (shuffled), back to back on one stream
// with a 1 ms gap after each: the GPU is mostly idle.
std::string KnownDurationsTrace() {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000000000);
  AddKernelShape(&c, 1, "void step_kernel<float>(float*, int)");
  uint64_t t = 1000000000;
  for (int i = 0; i < 100; ++i) {
    int d = (i * 37) % 100 + 1;  // a permutation of 1..100
    Kernel* k = c.add_kernels();
    k->set_start(static_cast<int64_t>(t));
    k->set_duration(d * 1000);
    k->set_shape(1);
    k->set_stream(7);
    t += d * 1000 + 1000000;
  }
  w.Add(c);
  return w.bytes();
}

TEST(Summary, NearestRankAndPopulationStdMatchIndependentValues) {
  std::vector<int64_t> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  DurationStats d = ComputeDurationStats(&v);
  // Independently: nearest rank ceil(p*n)-th smallest of 1..100 is p*100 itself.
  EXPECT_EQ(d.median, 50);
  EXPECT_EQ(d.p95, 95);
  EXPECT_EQ(d.p99, 99);
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.max, 100);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  // Population variance of 1..n is (n^2 - 1) / 12.
  EXPECT_NEAR(d.std, std::sqrt((100.0 * 100.0 - 1) / 12.0), 1e-9);
  EXPECT_FALSE(d.stable);
  std::vector<int64_t> flat(50, 1000);
  flat.push_back(1010);
  EXPECT_TRUE(ComputeDurationStats(&flat).stable);
  std::vector<int64_t> odd = {5, 1, 3};
  EXPECT_EQ(ComputeDurationStats(&odd).median, 3);
}

// The percentiles come from selection (nth_element), not a sort: every size from 1 to 300,
// with ties, against the nearest ranks of a sorted copy.
TEST(Summary, SelectedPercentilesMatchASortedCopy) {
  std::mt19937_64 rng(11);
  for (size_t n = 1; n <= 300; ++n) {
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = static_cast<int64_t>(rng() % (n / 3 + 2)) - 1;  // ties, a -1
    std::vector<int64_t> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const DurationStats d = ComputeDurationStats(&v);
    ASSERT_EQ(d.median, NearestRank(sorted, 50)) << n;
    ASSERT_EQ(d.p95, NearestRank(sorted, 95)) << n;
    ASSERT_EQ(d.p99, NearestRank(sorted, 99)) << n;
    ASSERT_EQ(d.min, static_cast<double>(sorted.front())) << n;
    ASSERT_EQ(d.max, static_cast<double>(sorted.back())) << n;
    std::sort(v.begin(), v.end());
    ASSERT_EQ(v, sorted) << "the values are reordered, none lost";
  }
}

TEST(Summary, KernelTableBusyAndIdleReading) {
  TraceSummary s = SummarizeTraces({WriteTemp("known", KnownDurationsTrace())});
  ASSERT_EQ(s.kernels.size(), 1u);
  const DurationStats& d = s.kernels[0].stats;
  EXPECT_EQ(d.count, 100u);
  EXPECT_EQ(d.median, 50000);
  EXPECT_EQ(d.p95, 95000);
  EXPECT_EQ(d.p99, 99000);
  EXPECT_DOUBLE_EQ(d.total, 5050000);
  EXPECT_DOUBLE_EQ(s.kernels[0].share, 1.0);
  ASSERT_EQ(s.streams.size(), 1u);
  EXPECT_EQ(s.streams[0].gaps, 99u);
  EXPECT_EQ(s.streams[0].median_ns, 1000000);
  EXPECT_DOUBLE_EQ(s.streams[0].idle_ns, 99e6);
  ASSERT_EQ(s.busy.size(), 1u);
  EXPECT_NEAR(s.busy[0].fraction, 5.05e6 / (5.05e6 + 99e6), 1e-12);
  std::string text = FormatSummaryText(s, 20);
  EXPECT_NE(text.find("GPU idle 95% of the span between kernels: launch-bound or CPU-bound; "
                      "consider CUDA graphs / fewer syncs"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("step_kernel<float>"), std::string::npos) << text;
  EXPECT_NE(text.find("no footer"), std::string::npos) << text;  // losses shown
}

// Two devices, streams with the same number on both, overlapping streams, copies and memsets,
// records out of order: busy time is each device's union of all its work; launch gaps are per
// (device, stream) and count kernels only.
TEST(Summary, BusyTimeAndLaunchGapsPerDeviceAndStream) {
  constexpr int64_t kBase = 1000000000, kUs = 1000;
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(kBase);
  AddKernelShape(&c, 1, "k");
  auto kernel = [&](uint32_t device, uint32_t stream, int64_t start_us, int64_t end_us) {
    Kernel* k = c.add_kernels();
    k->set_device(device);
    k->set_stream(stream);
    k->set_start(kBase + start_us * kUs);
    k->set_duration((end_us - start_us) * kUs);
    k->set_shape(1);
  };
  kernel(1, 3, 130, 140);
  kernel(0, 9, 60, 70);
  kernel(0, 3, 40, 50);
  kernel(0, 3, 0, 10);
  kernel(0, 9, 5, 25);
  kernel(1, 3, 100, 110);
  kernel(0, 3, 20, 30);
  Memcpy* m = c.add_memcpys();
  m->set_device(0);
  m->set_stream(3);
  m->set_start(kBase + 50 * kUs);
  m->set_duration(8 * kUs);
  m->set_bytes(1 << 20);
  Memset* ms = c.add_memsets();
  ms->set_device(1);
  ms->set_stream(3);
  ms->set_start(kBase + 110 * kUs);
  ms->set_duration(10 * kUs);
  w.Add(c);
  TraceSummary s = SummarizeTraces({WriteTemp("devices", w.bytes())});
  ASSERT_EQ(s.busy.size(), 2u);
  EXPECT_EQ(s.busy[0].device, 0u);
  EXPECT_DOUBLE_EQ(s.busy[0].busy_ns, (30 + 18 + 10) * kUs);  // [0,30) [40,58) [60,70)
  EXPECT_EQ(s.busy[1].device, 1u);
  EXPECT_DOUBLE_EQ(s.busy[1].busy_ns, (20 + 10) * kUs);  // [100,120) [130,140)
  EXPECT_DOUBLE_EQ(s.span_ns, 140 * kUs);
  ASSERT_EQ(s.streams.size(), 3u);
  struct Want {
    uint32_t device, stream;
    uint64_t kernels, gaps;
    double idle_us, span_us;
  };
  const Want want[] = {{0, 3, 3, 2, 20, 50}, {0, 9, 2, 1, 35, 65}, {1, 3, 2, 1, 20, 40}};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s.streams[i].device, want[i].device) << i;
    EXPECT_EQ(s.streams[i].stream, want[i].stream) << i;
    EXPECT_EQ(s.streams[i].kernels, want[i].kernels) << i;
    EXPECT_EQ(s.streams[i].gaps, want[i].gaps) << i;
    EXPECT_DOUBLE_EQ(s.streams[i].idle_ns, want[i].idle_us * kUs) << i;
    EXPECT_DOUBLE_EQ(s.streams[i].span_ns, want[i].span_us * kUs) << i;
  }
  EXPECT_DOUBLE_EQ(s.idle_between_kernels_fraction, (20.0 + 35 + 20) / (50 + 65 + 40));
}

// Range mode: a memory-bound kernel busy for a third of its measured range. Over the whole
// range the percentages look latency-bound; read while the GPU was busy (value / busy share of
// gpu__time_duration) it is memory-bound: 90 % / (0.4 ms / 1.2 ms) capped at 100, 6 % -> 18 %.
TEST(Summary, RangeMetricsAreAlsoReadWhileTheGpuWasBusy) {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000000000);
  auto add_string = [&](uint32_t id, const char* v) {
    InternedString* s = c.add_strings();
    s->set_id(id);
    s->set_value(v);
  };
  add_string(1, "vec_add");
  add_string(2, "mem");
  KernelShape* sh = c.add_kernel_shapes();
  sh->set_id(1);
  sh->set_name(1);
  sh->set_demangled(1);
  MetricConfig* cfg = c.add_metric_configs();
  cfg->set_id(1);
  cfg->set_mode("range");
  cfg->set_num_passes(1);
  cfg->add_metric_names("sm__throughput.avg.pct_of_peak_sustained_elapsed");
  cfg->add_metric_names("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
  cfg->add_metric_names("gpu__time_duration.sum");
  const int64_t t0 = 2000000000;
  for (int i = 0; i < 3; ++i) {
    const int64_t start = t0 + i * 10000000;  // ranges 10 ms apart, 1.5 ms long on the CPU
    Kernel* k = c.add_kernels();
    k->set_start(start + 500000);
    k->set_duration(400000);
    k->set_shape(1);
    k->set_stream(7);
    MetricRange* m = c.add_metric_ranges();
    m->set_config(1);
    m->set_name(2);
    m->set_occurrence(i);
    m->set_occurrences_used(1);
    m->set_start(start);
    m->set_duration(1500000);
    m->add_values(6.0);
    m->add_values(30.0);
    m->add_values(1200000.0);  // the GPU saw 1.2 ms of the range
  }
  w.Add(c);
  TraceSummary s = SummarizeTraces({WriteTemp("busy", w.bytes())});
  ASSERT_EQ(s.metrics.size(), 1u);
  const MetricRangeSummary& m = s.metrics[0];
  EXPECT_NEAR(m.busy_fraction, 0.4 / 1.2, 1e-9);
  EXPECT_NEAR(m.sm_pct, 6.0, 1e-9);
  EXPECT_NEAR(m.mem_pct, 30.0, 1e-9);
  EXPECT_NEAR(m.sm_pct_busy, 18.0, 1e-9);
  EXPECT_NEAR(m.mem_pct_busy, 90.0, 1e-9);
  EXPECT_EQ(m.verdict, "memory-bound");
  std::string text = FormatSummaryText(s, 20);
  EXPECT_NE(text.find("while busy: SM 18.0%, memory 90.0%"), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(FormatSummaryJson(s));
  EXPECT_NEAR(j["metrics"][0]["mem_pct_busy"].get<double>(), 90.0, 1e-9);
  EXPECT_EQ(j["metrics"][0]["verdict"], "memory-bound");
}

// Multi-pass value sets flagged inconsistent (occurrences of unlike length, e.g. a warm-up
// step) stay out of the medians unless --all, and the header says how many were used and
// dropped, and the warm-up skip of the run.
TEST(Summary, InconsistentValueSetsAreLeftOutOfTheMedianUnlessAll) {
  ProtoTraceWriter w;
  Chunk c;
  AddRangeConfig(&c, "step", 3, {"sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  const double sm[] = {0.5, 55.0, 57.0, 56.0};  // the first set mixed a warm-up step in
  for (int i = 0; i < 4; ++i) {
    MetricRange* m = c.add_metric_ranges();
    m->set_config(1);
    m->set_name(1);
    m->set_occurrence(3 + 3 * i);
    m->set_occurrences_used(3);
    m->set_start(i * 100000000);
    m->set_duration(1500000);
    m->set_occurrence_min_ns(1500000);
    m->set_occurrence_max_ns(i == 0 ? 178000000 : 1600000);
    m->set_inconsistent(i == 0);
    m->add_values(sm[i]);
  }
  w.Add(c);
  const std::string path = WriteTemp("inconsistent", w.bytes());
  TraceSummary s = SummarizeTraces({path});
  ASSERT_EQ(s.metrics.size(), 1u);
  EXPECT_EQ(s.metrics[0].occurrences, 3u);
  EXPECT_EQ(s.metrics[0].sets_inconsistent, 1u);
  EXPECT_EQ(s.metrics[0].skip, 1u);
  EXPECT_NEAR(s.metrics[0].medians["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 56.0, 1e-9);
  std::string text = FormatSummaryText(s, 20);
  EXPECT_NE(text.find("step  [3 value set(s) used, 1 dropped as inconsistent (--all shows them), "
                      "3 passes, warm-up skip 1]"),
            std::string::npos)
      << text;
  TraceSummary all = SummarizeTraces({path}, /*include_inconsistent=*/true);
  EXPECT_EQ(all.metrics[0].occurrences, 4u);
  EXPECT_NEAR(all.metrics[0].medians["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 55.0,
              1e-9);
  EXPECT_NE(FormatSummaryText(all, 20).find("[4 value set(s) used (1 of them inconsistent)"),
            std::string::npos);
}

// A trace of range "step" measured twice (two 9-pass sets of SM %, memory %, clock) on device
// `device`, whose Device record (when `max_khz` > 0) carries that maximum SM clock and `uuid`;
// the first set reads `first_hz` as its SM clock, the second 1976 MHz. Each 181 ms occurrence
// holds one 18.1 ms kernel: the GPU is busy 10 % of it.
std::string StepClockTrace(double first_hz, uint32_t device, uint32_t max_khz,
                           const std::string& uuid) {
  ProtoTraceWriter w;
  Chunk c;
  if (max_khz > 0) {
    Device* d = c.add_devices();
    d->set_id(device);
    d->set_name("NVIDIA H200");
    d->set_uuid(uuid);
    d->set_core_clock_khz(max_khz);
  }
  AddRangeConfig(&c, "step", 9,
                 {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
                  "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                  "gpc__cycles_elapsed.avg.per_second"});
  AddKernelShape(&c, 5, "fwd");
  for (int i = 0; i < 2; ++i) {
    const int64_t start = 1000000 + i * int64_t{300000000};
    Kernel* k = c.add_kernels();
    k->set_start(start + 1000000);
    k->set_duration(18100000);
    k->set_shape(5);
    k->set_stream(7);
    k->set_device(device);
    MetricRange* m = c.add_metric_ranges();
    m->set_config(1);
    m->set_name(1);
    m->set_device(device);
    m->set_occurrence(9 + 9 * i);
    m->set_occurrences_used(9);
    m->set_start(start);
    m->set_duration(181000000);
    m->set_occurrence_min_ns(181000000);
    m->set_occurrence_max_ns(209000000);
    m->add_values(5.2);
    m->add_values(4.7);
    m->add_values(i == 0 ? first_hz : 1.976e9);
  }
  w.Add(c);
  return w.bytes();
}

// A value set whose SM clock (elapsed cycles over its time) reads below half of its GPU's
// maximum counted for part of the range only (as a rank measuring a GPU it shares, which read
// 104 MHz of 1980): the explanation says in how many sets and the lowest, in the text, the JSON
// (and so the report), and the percentages are not divided by the range's busy share on top.
// A set at half the maximum (990 MHz) or above says nothing, and the busy reading stays.
TEST(Summary, SmClockFarBelowTheGpuMaximumIsExplained) {
  for (double clock_hz : {1.038e8, 9.897e8, 9.9e8, 1.976e9}) {
    TraceSummary s =
        SummarizeTraces({WriteTemp("low_clock", StepClockTrace(clock_hz, 1, 1980000, "GPU-a"))});
    ASSERT_EQ(s.metrics.size(), 1u);
    const MetricRangeSummary& m = s.metrics[0];
    EXPECT_DOUBLE_EQ(m.sm_clock_max_mhz, 1980);
    EXPECT_EQ(m.sets_with_sm_clock, 2u);
    const std::string text = FormatSummaryText(s, 20);
    const nlohmann::json j = nlohmann::json::parse(FormatSummaryJson(s));
    EXPECT_DOUBLE_EQ(j["metrics"][0]["sm_clock_max_mhz"].get<double>(), 1980);
    EXPECT_NEAR(m.busy_fraction, 0.1, 1e-9);
    if (clock_hz < 9.9e8) {  // below half of 1980 MHz
      EXPECT_TRUE(m.low_sm_clock()) << clock_hz;
      EXPECT_EQ(m.sets_low_sm_clock, 1u);
      EXPECT_DOUBLE_EQ(m.lowest_sm_clock_mhz, clock_hz / 1e6);
      EXPECT_EQ(j["metrics"][0]["sets_low_sm_clock"], 1);
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "SM clock below half of the GPU's maximum in 1 of 2 value set(s) (lowest %.0f "
                    "MHz, %.1f%% of GPU 1's 1980 MHz): the counters ran for only part",
                    std::floor(clock_hz / 1e6), std::floor(clock_hz / 1.98e6) / 10);
      const std::string head = buf;
      EXPECT_EQ(m.explanation.find(head), 0u) << m.explanation;
      EXPECT_NE(text.find("    " + head), std::string::npos) << text;
      EXPECT_EQ(j["metrics"][0]["explanation"].get<std::string>().find(head), 0u);
      // Not rescaled to the 10 % busy share: the speed-of-light reading is of what was counted.
      EXPECT_EQ(m.sm_pct_busy, -1);
      EXPECT_EQ(m.explanation.find("while busy"), std::string::npos) << m.explanation;
      EXPECT_NE(m.explanation.find("busy time. latency-bound: SM 5.2%"), std::string::npos)
          << m.explanation;
    } else {
      EXPECT_FALSE(m.low_sm_clock());
      EXPECT_EQ(m.sets_low_sm_clock, 0u);
      EXPECT_EQ(m.explanation.find("SM clock"), std::string::npos) << m.explanation;
      EXPECT_NEAR(m.sm_pct_busy, 52.0, 1e-9);  // 5.2 % / 0.1
      EXPECT_NE(m.explanation.find("percentages while busy"), std::string::npos) << m.explanation;
    }
  }
  // 989.7 MHz is below half: clock and share are rounded down (49.98 % reads 49.9 %), so that
  // it never reads as half.
  TraceSummary edge =
      SummarizeTraces({WriteTemp("edge_clock", StepClockTrace(9.897e8, 1, 1980000, "GPU-a"))});
  EXPECT_NE(edge.metrics[0].explanation.find("(lowest 989 MHz, 49.9% of"), std::string::npos)
      << edge.metrics[0].explanation;
}

// Each set's clock is read against its own trace's GPU: two ranks' traces reuse device id 0 for
// GPUs of different maximum clocks, and a 750 MHz set of the 1410 MHz GPU (53 %) is not low
// even though the first trace's GPU has a 1980 MHz maximum. A set with no Device record for
// its device has no maximum and is never called low.
TEST(Summary, SmClockIsReadAgainstEachTracesOwnGpu) {
  const std::string a = WriteTemp("clock_a", StepClockTrace(1.976e9, 0, 1980000, "GPU-a"));
  const std::string b = WriteTemp("clock_b", StepClockTrace(7.5e8, 0, 1410000, "GPU-b"));
  TraceSummary s = SummarizeTraces({a, b});
  ASSERT_EQ(s.metrics.size(), 1u);
  EXPECT_EQ(s.metrics[0].sets_with_sm_clock, 4u);
  EXPECT_EQ(s.metrics[0].sets_low_sm_clock, 0u);
  EXPECT_EQ(s.metrics[0].explanation.find("SM clock"), std::string::npos)
      << s.metrics[0].explanation;
  // The same 750 MHz set against a 1980 MHz GPU of that trace is low: 1 of the 4 sets.
  const std::string c = WriteTemp("clock_c", StepClockTrace(7.5e8, 0, 1980000, "GPU-c"));
  TraceSummary low = SummarizeTraces({a, c});
  EXPECT_EQ(low.metrics[0].sets_low_sm_clock, 1u);
  EXPECT_NE(low.metrics[0].explanation.find("in 1 of 4 value set(s) (lowest 750 MHz, 37.8% of "
                                            "GPU 0's 1980 MHz)"),
            std::string::npos)
      << low.metrics[0].explanation;
  TraceSummary none =
      SummarizeTraces({WriteTemp("clock_none", StepClockTrace(1.038e8, 0, 0, "GPU-a"))});
  EXPECT_DOUBLE_EQ(none.metrics[0].sm_clock_max_mhz, 0);
  EXPECT_FALSE(none.metrics[0].low_sm_clock());
}

// Without the clock metric in the set, each set's clock is its record's sm_clock_khz: the
// header's clock is their median, and a set below half its GPU's maximum is noted as above.
TEST(Summary, SmClockFromTheRecordsWhenTheSetHasNoClockMetric) {
  ProtoTraceWriter w;
  Chunk c;
  Device* d = c.add_devices();
  d->set_id(0);
  d->set_core_clock_khz(1980000);
  AddRangeConfig(&c, "step", 1, {"sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  const uint32_t khz[] = {1755000, 500000, 1980000};
  for (int i = 0; i < 3; ++i) {
    MetricRange* m = c.add_metric_ranges();
    m->set_config(1);
    m->set_name(1);
    m->set_occurrence(1 + i);
    m->set_occurrences_used(1);
    m->set_start(1000000 + i * 10000000);
    m->set_duration(1000000);
    m->set_sm_clock_khz(khz[i]);
    m->add_values(40.0);
  }
  w.Add(c);
  TraceSummary s = SummarizeTraces({WriteTemp("record_clock", w.bytes())});
  ASSERT_EQ(s.metrics.size(), 1u);
  EXPECT_DOUBLE_EQ(s.metrics[0].sm_clock_mhz, 1755);
  EXPECT_EQ(s.metrics[0].sets_with_sm_clock, 3u);
  EXPECT_EQ(s.metrics[0].sets_low_sm_clock, 1u);
  EXPECT_DOUBLE_EQ(s.metrics[0].lowest_sm_clock_mhz, 500);
  EXPECT_EQ(s.metrics[0].explanation.find("SM clock below half of the GPU's maximum in 1 of 3 "
                                          "value set(s) (lowest 500 MHz, 25.2% of GPU 0's "
                                          "1980 MHz)"),
            0u)
      << s.metrics[0].explanation;
}

// A range whose every value set was dropped keeps its passes and warm-up skip in the header and
// says why it has no reading, instead of "0 passes, warm-up skip 0" and a missing-metric hint.
TEST(Summary, RangeWithEveryValueSetDroppedSaysWhy) {
  ProtoTraceWriter w;
  Chunk c;
  AddRangeConfig(&c, "mma", 9,
                 {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
                  "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"});
  MetricRange* m = c.add_metric_ranges();
  m->set_config(1);
  m->set_name(1);
  m->set_occurrence(9);
  m->set_occurrences_used(9);
  m->set_start(100000000);
  m->set_duration(4000000);
  m->set_occurrence_min_ns(3920000);
  m->set_occurrence_max_ns(8270000);
  m->set_inconsistent(true);
  m->add_values(80.0);
  m->add_values(40.0);
  w.Add(c);
  const std::string path = WriteTemp("all_dropped", w.bytes());
  TraceSummary s = SummarizeTraces({path});
  ASSERT_EQ(s.metrics.size(), 1u);
  EXPECT_EQ(s.metrics[0].occurrences, 0u);
  EXPECT_EQ(s.metrics[0].passes, 9u);
  EXPECT_EQ(s.metrics[0].skip, 1u);
  EXPECT_TRUE(s.metrics[0].verdict.empty());
  std::string text = FormatSummaryText(s, 20);
  EXPECT_NE(text.find("mma  [0 value set(s) used, 1 dropped as inconsistent (--all shows them), "
                      "9 passes, warm-up skip 1]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("no value set to read: all 1 were dropped as inconsistent"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("not collected"), std::string::npos) << text;
  EXPECT_EQ(text.find("needs sm__throughput"), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(FormatSummaryJson(s));
  EXPECT_EQ(j["metrics"][0]["passes"], 9);
  EXPECT_EQ(j["metrics"][0]["skip"], 1);
  TraceSummary all = SummarizeTraces({path}, /*include_inconsistent=*/true);
  EXPECT_EQ(all.metrics[0].occurrences, 1u);
  EXPECT_EQ(all.metrics[0].verdict, "compute-bound");
}

// PyTorch kernel names: "(anonymous namespace)" must not be taken for the parameter list, and
// two instances of one template must stay distinguishable in the text table.
TEST(Summary, TextTableKeepsKernelNamesReadable) {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000000000);
  const char* names[] = {
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
      "namespace)::TensorListMetadata<1>, at::native::(anonymous "
      "namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>>(int)",
      "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
      "namespace)::TensorListMetadata<2>, at::native::(anonymous "
      "namespace)::PointwiseOpScalarFunctor<float, 2, 2, 0>>(int)"};
  for (uint32_t i = 0; i < 2; ++i) {
    AddKernelShape(&c, i + 1, names[i]);
    Kernel* k = c.add_kernels();
    k->set_start(1000000000 + i * 1000000);
    k->set_duration(1000 * (i + 1));
    k->set_shape(i + 1);
  }
  w.Add(c);
  std::string text = FormatSummaryText(SummarizeTraces({WriteTemp("names", w.bytes())}), 20);
  EXPECT_EQ(text.find("(anonymous namespace)"), std::string::npos) << text;
  EXPECT_NE(text.find("at::native::multi_tensor_apply_kernel<"), std::string::npos) << text;
  EXPECT_NE(text.find("<float, 1, 1, 0>>"), std::string::npos) << text;  // the tails differ
  EXPECT_NE(text.find("<float, 2, 2, 0>>"), std::string::npos) << text;
}

// Kernel-mode metrics: CUPTI replays the kernels and gives them no timestamps. They must not
// show up as 0 ns kernels in the duration statistics.
TEST(Summary, UntimedKernelsAreCountedNotAveraged) {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000000000);
  AddKernelShape(&c, 1, "gemm");
  for (int i = 0; i < 4; ++i) {
    Kernel* k = c.add_kernels();
    k->set_shape(1);
    if (i < 3) {
      k->set_flags(RECORD_FLAG_NO_TIMING);
    } else {
      k->set_start(1000000000);
      k->set_duration(5000);
    }
  }
  w.Add(c);
  TraceSummary sum = SummarizeTraces({WriteTemp("untimed", w.bytes())});
  EXPECT_EQ(sum.untimed_kernels, 3u);
  ASSERT_EQ(sum.kernels.size(), 1u);
  EXPECT_EQ(sum.kernels[0].stats.count, 1u);
  EXPECT_EQ(sum.kernels[0].stats.min, 5000);
  EXPECT_NE(FormatSummaryText(sum, 20).find("3 kernels without timestamps left out"),
            std::string::npos);
}

// Kernel-mode metrics' own records (RECORD_FLAG_PROFILER_TIMED) are timed: in the statistics,
// and counted with a line saying where their times come from.
TEST(Summary, KernelsTimedByKernelModeAreCountedAndAveraged) {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000000000);
  AddKernelShape(&c, 1, "gemm");
  for (int i = 0; i < 3; ++i) {
    Kernel* k = c.add_kernels();
    k->set_shape(1);
    k->set_start(i == 0 ? 1000000000 : 100000);
    k->set_duration(5000 + 1000 * i);
    if (i > 0) k->set_flags(RECORD_FLAG_PROFILER_TIMED);
  }
  w.Add(c);
  TraceSummary sum = SummarizeTraces({WriteTemp("timed", w.bytes())});
  EXPECT_EQ(sum.profiler_timed_kernels, 2u);
  EXPECT_EQ(sum.untimed_kernels, 0u);
  ASSERT_EQ(sum.kernels.size(), 1u);
  EXPECT_EQ(sum.kernels[0].stats.count, 3u);
  EXPECT_NE(FormatSummaryText(sum, 20).find("2 kernels timed by kernel-mode metrics"),
            std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(FormatSummaryJson(sum))["profiler_timed_kernels"], 2);
}

// A chunk's ids name its own strings and shapes: the same id may name another kernel in the
// next chunk, and one range name may come with two domains. Each goes to its own group.
TEST(Summary, IdsNameTheTextOfTheirOwnChunk) {
  ProtoTraceWriter w;
  uint64_t t = 1000000000;
  for (int chunk = 0; chunk < 2; ++chunk) {
    Chunk c;
    c.set_sequence(static_cast<uint64_t>(chunk));
    c.set_time_base_ns(1000000000);
    AddKernelShape(&c, 1, chunk == 0 ? "kernel_a" : "kernel_b");
    for (const auto& [id, text] :
         {std::pair<uint32_t, const char*>{2, "step"}, {3, "domain_x"}, {4, "domain_y"}}) {
      InternedString* s = c.add_strings();
      s->set_id(id);
      s->set_value(text);
    }
    for (int i = 0; i < 3 + chunk; ++i) {
      Kernel* k = c.add_kernels();
      k->set_start(static_cast<int64_t>(t));
      k->set_duration(1000);
      k->set_shape(1);
      k->set_stream(7);
      NvtxRange* r = c.add_nvtx_ranges();
      r->set_start(static_cast<int64_t>(t));
      r->set_duration(2000);
      r->set_name(2);
      r->set_domain(i % 2 == 0 ? 3 : 4);  // alternating domains for the same name id
      r->set_thread_id(1);
      t += 10000;
    }
    w.Add(c);
  }
  TraceSummary s = SummarizeTraces({WriteTemp("chunk_ids", w.bytes())});
  std::map<std::string, uint64_t> kernels, ranges;
  for (const auto& k : s.kernels) kernels[k.name] = k.stats.count;
  for (const auto& r : s.ranges) ranges[r.name + "@" + r.domain] = r.stats.count;
  EXPECT_EQ(kernels, (std::map<std::string, uint64_t>{{"kernel_a", 3}, {"kernel_b", 4}}));
  EXPECT_EQ(ranges, (std::map<std::string, uint64_t>{{"step@domain_x", 4}, {"step@domain_y", 3}}));
}

TEST(Summary, FixedTraceCopiesRangesMetricsAndFormats) {
  TraceSummary s = SummarizeTraces({WriteTemp("fixed", BuildFixedTrace())});
  EXPECT_EQ(s.internal_kernels_excluded, 1u);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].stats.count, 3u);  // gemm: 40+50+45 us
  EXPECT_DOUBLE_EQ(s.kernels[0].stats.total, 135000);
  EXPECT_DOUBLE_EQ(s.kernels[0].share, 135.0 / 185.0);
  ASSERT_EQ(s.copies.size(), 1u);
  EXPECT_EQ(s.copies[0].kind, "HtoD");
  EXPECT_DOUBLE_EQ(s.copies[0].aggregate_gbps, 500.0);
  EXPECT_DOUBLE_EQ(s.copies[0].median_gbps, 500.0);
  ASSERT_EQ(s.ranges.size(), 2u);
  EXPECT_EQ(s.ranges[0].domain, "my_domain");
  ASSERT_EQ(s.metrics.size(), 1u);
  EXPECT_EQ(s.metrics[0].occurrences, 2u);
  EXPECT_DOUBLE_EQ(s.metrics[0].medians["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
                   72.5);  // nearest-rank median of {72.5, 77.5}
  EXPECT_DOUBLE_EQ(s.metrics[0].sm_clock_mhz, 1980);
  EXPECT_DOUBLE_EQ(s.metrics[0].sm_clock_max_mhz, 1980);
  EXPECT_FALSE(s.metrics[0].low_sm_clock());
  EXPECT_EQ(s.metrics[0].explanation.find("SM clock"), std::string::npos)
      << s.metrics[0].explanation;
  bool dropped = false;
  for (const auto& l : s.losses) dropped |= l.find("3 records dropped by CUPTI") == 0;
  EXPECT_TRUE(dropped);
  auto j = nlohmann::json::parse(FormatSummaryJson(s));
  EXPECT_EQ(j["kernels"][0]["count"], 3);
  EXPECT_EQ(j["setup"]["devices"][0]["name"], "NVIDIA H200");
  std::string csv = FormatSummaryCsv(s);
  EXPECT_NE(csv.find("kernel,\"void gemm<float, 128>(float const*, float const*, float*)\",,3,"
                     "135000,"),
            std::string::npos)
      << csv;
  std::string text = FormatSummaryText(s, 20);
  EXPECT_NE(text.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(text.find("580.159.03"), std::string::npos);
  EXPECT_NE(text.find("1 profiler-internal kernels excluded"), std::string::npos) << text;
  EXPECT_NE(text.find("a range's percentages include its idle gaps"), std::string::npos);
}

TEST(Summary, AppendLogWritesHeaderOnceAndOneRowPerKernel) {
  std::string log = TempPath("bench_log.csv");
  std::remove(log.c_str());
  TraceSummary s = SummarizeTraces({WriteTemp("fixed2", BuildFixedTrace())});
  for (int i = 0; i < 2; ++i) {
    const Status appended = AppendSummaryLog(s, log);
    ASSERT_TRUE(appended.ok()) << appended.message();
  }
  std::string text = ReadFile(log);
  size_t lines = 0, headers = 0, pos = 0;
  while ((pos = text.find("\r\n", pos)) != std::string::npos) {
    ++lines;
    pos += 2;
  }
  for (pos = 0; (pos = text.find("date,host,gpu", pos)) != std::string::npos; ++pos) ++headers;
  EXPECT_EQ(headers, 1u);
  EXPECT_EQ(lines, 1u + 2 * 2);  // header + 2 kernels, twice
  EXPECT_NE(text.find("2023-11-14 22:13:20 UTC,gpu-node-1,NVIDIA H200,580.159.03,13.0,relu_kernel,"
                      "2,20000,"),  // nearest-rank median of {20, 30} us
            std::string::npos)
      << text;
}

TEST(Summary, DamagedInputIsSummarisedUpToTheDamage) {
  std::string bytes = BuildFixedTrace();
  bytes[bytes.size() - 40] ^= 0x55;  // inside the last chunk: CRC mismatch
  TraceSummary s = SummarizeTraces({WriteTemp("damaged", bytes), TempPath("missing")});
  EXPECT_TRUE(s.anything_read);
  EXPECT_EQ(s.errors.size(), 1u);
  ASSERT_FALSE(s.kernels.empty());
  EXPECT_EQ(s.kernels[0].stats.count, 2u);
  std::string text = FormatSummaryText(s, 20);
  EXPECT_NE(text.find("DATA LOSS / DAMAGE"), std::string::npos);
  EXPECT_NE(text.find("payload CRC mismatch"), std::string::npos) << text;
  TraceSummary none = SummarizeTraces({WriteTemp("junk", "KPTRACE1xxxxxxxxxxxxxxxxxxxxxxxxxxxxx")});
  EXPECT_FALSE(none.anything_read);
}

}  // namespace
}  // namespace kp
