// PM sampling on the CPU side: KP_PM_SAMPLING / KP_PM_INTERVAL_US parsing, the PM-sample record
// through the injector's encoder and the reader (real libprotobuf parsing), pm_samples.csv, and
// the summary's per-range table on a synthetic trace whose answers are known.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/pm_counters.h"
#include "inject/config/config.h"
#include "inject/pm_sampling/pm_sampling_config.h"
#include "inject/pm_sampling/pm_session.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "tests/unit/scratch_dir.h"
#include "tools/kptrace/commands.h"
#include "tools/reader/proto_trace_writer.h"
#include "tools/reader/trace_reader.h"
#include "tools/summary/trace_summary.h"

namespace kp {
namespace {

Config ParseVars(std::map<std::string, std::string> vars, std::vector<ConfigError>* errors) {
  return ParseConfig(
      [&vars](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      errors);
}

std::string Temp(const std::string& name) {
  return kp::test::ScratchPath("pm_sampling_test_" + name);
}

TEST(PmSamplingConfig, OffByDefaultGpuSetAndLists) {
  std::vector<ConfigError> errors;
  Config c = ParseVars({}, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_TRUE(c.pm_sampling.empty());
  EXPECT_EQ(c.pm_interval_us, 1000u);

  c = ParseVars({{"KP_PM_SAMPLING", "gpu"}, {"KP_PM_INTERVAL_US", "100"}}, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.pm_sampling, PmGpuCounterSet());
  EXPECT_TRUE(c.pm_sampling_gpu_set);
  EXPECT_EQ(c.pm_interval_us, 100u);

  c = ParseVars(
      {{"KP_PM_SAMPLING", " dram__bytes_read.sum, sm__cycles_active.avg,dram__bytes_read.sum"}},
      &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.pm_sampling,
            (std::vector<std::string>{"dram__bytes_read.sum", "sm__cycles_active.avg"}));
  EXPECT_FALSE(c.pm_sampling_gpu_set);

  c = ParseVars(
      {{"KP_PM_SAMPLING", "gpu,sm__inst_executed_pipe_alu_realtime.avg.per_cycle_active"}},
      &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.pm_sampling.size(), PmGpuCounterSet().size() + 1);
  EXPECT_TRUE(c.pm_sampling_gpu_set);  // counters the chip lacks are left out, as with gpu alone

  c = ParseVars({{"KP_PM_SAMPLING", "off"}}, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_TRUE(c.pm_sampling.empty());
}

TEST(PmSamplingConfig, BadValuesTurnSamplingOffNotTracing) {
  for (const auto& [var, value, needle] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"KP_PM_SAMPLING", "gpu,DRAM", "\"DRAM\" is not a counter name"},
           {"KP_PM_SAMPLING", "sm__cycles_active.avg,on", "\"on\" is not a counter name"},
           {"KP_PM_SAMPLING", "dram__bytes_read.sum,,", "\"(empty)\" is not a counter name"},
           {"KP_PM_INTERVAL_US", "5", "from 100 to 1000000"},
           {"KP_PM_INTERVAL_US", "99", "cannot keep up"},
           {"KP_PM_INTERVAL_US", "1000001", "from 100 to 1000000"},
           {"KP_PM_INTERVAL_US", "1ms", "from 100 to 1000000"}}) {
    std::vector<ConfigError> errors;
    std::map<std::string, std::string> vars = {{"KP_PM_SAMPLING", "gpu"}};
    vars[var] = value;
    Config c = ParseVars(vars, &errors);
    ASSERT_EQ(errors.size(), 1u) << var << "=" << value;
    const ConfigError& e = errors[0];
    EXPECT_EQ(e.variable, var);
    EXPECT_EQ(e.scope, ConfigErrorScope::kPmSampling);
    EXPECT_EQ(e.message.rfind(var + "=\"", 0), 0u) << e.message;
    EXPECT_NE(e.message.find(needle), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("PM sampling is off, tracing goes on"), std::string::npos);
    EXPECT_EQ(e.message.find('\n'), std::string::npos);
    EXPECT_TRUE(c.pm_sampling.empty());
    EXPECT_FALSE(c.disabled);
  }
}

TEST(PmCounters, ByteSumsAreShownAsRates) {
  EXPECT_TRUE(PmCounterIsRate("dram__bytes_read.sum"));
  EXPECT_TRUE(PmCounterIsRate("nvltx__bytes.sum"));
  EXPECT_FALSE(PmCounterIsRate("dram__bytes_read.sum.per_second"));
  EXPECT_FALSE(PmCounterIsRate("sm__cycles_active.avg.pct_of_peak_sustained_elapsed"));
  EXPECT_FALSE(PmCounterIsRate("sm__cycles_active.sum"));
  EXPECT_EQ(PmCounterLabel("lts__t_bytes.sum"), "lts__t_bytes.sum.per_second");
  EXPECT_DOUBLE_EQ(PmCounterShownValue("dram__bytes_read.sum", 4e5, 100000), 4e9);
  EXPECT_DOUBLE_EQ(PmCounterShownValue("gpu__time_duration.sum", 7, 100000), 7);
}

// The injector's encoder writes PM configs and samples; the reader gives them back with
// absolute times, and the footer counts them.
TEST(PmSamplingRecord, EncoderToReaderRoundTrip) {
  const std::string path = Temp("roundtrip.kptrace");
  {
    std::string err;
    StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open(path, 3);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    std::unique_ptr<FileChunkWriter> writer = std::move(opened.value());
    TraceEncoder enc(writer.get(), TraceEncoder::Options());
    HeaderInfo h;
    h.pid = 42;
    h.start_time_trace_ns = 5'000'000'000;
    enc.SetHeader(h);
    PmSampleConfigInfo info;
    info.device = 1;
    info.counter_names = {"sm__cycles_active.avg", "dram__bytes_read.sum"};
    info.interval_ns = 100000;
    info.chip = "GH100";
    const uint32_t id = enc.AddPmSampleConfig(info);
    EXPECT_EQ(id, 1u);
    for (int i = 0; i < 300; ++i) {
      const double values[2] = {static_cast<double>(i), i * 1e3};
      PmSampleRecord r;
      r.config = id;
      r.device = 1;
      r.start = 5'000'000'000 + i * 100000ull;
      r.end = r.start + 100000;
      r.values = values;
      r.num_values = 2;
      enc.AddPmSample(r);
      if (i == 150) enc.Flush();
    }
    enc.stats().pm_samples_dropped = 3;
    FooterInfo f;
    f.end_reason = "exit";
    enc.Finish(f);
  }
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<TraceReader> reader = std::move(opened.value());
  Chunk c;
  int n = 0, configs = 0;
  uint64_t dropped = 0, footer = 0;
  while (reader->Next(&c)) {
    configs += c.pm_sample_configs_size() > 0;
    for (const PmSampleConfig& pc : c.pm_sample_configs()) {
      EXPECT_EQ(pc.device(), 1u);
      EXPECT_EQ(pc.chip(), "GH100");
      EXPECT_EQ(pc.counter_names_size(), 2);
    }
    for (const PmSample& s : c.pm_samples()) {
      EXPECT_EQ(s.start(), static_cast<int64_t>(5'000'000'000 + n * 100000ull));
      EXPECT_EQ(s.duration(), 100000);
      ASSERT_EQ(s.values_size(), 2);
      EXPECT_EQ(s.values(0), n);
      EXPECT_EQ(s.device(), 1u);
      ++n;
    }
    if (c.has_stats()) dropped = c.stats().pm_samples_dropped();
    if (c.has_footer()) footer = c.footer().pm_samples();
  }
  EXPECT_EQ(n, 300);
  EXPECT_GE(configs, 2);  // every chunk defines the config its samples use
  EXPECT_EQ(dropped, 3u);
  EXPECT_EQ(footer, 300u);
}

// A synthetic run: ranges "copy" [1, 2) ms and "idle" [2, 3) ms, samples every 100 us from 0.5
// to 3.5 ms; SM active 90 in copy, 0 in idle, 50 elsewhere; 1e5 bytes per sample in copy.
std::string SyntheticRun(const std::string& name) {
  ProtoTraceWriter w;
  Chunk c;
  const uint64_t t0 = 1'000'000'000, us = 1000, ms = 1000 * us;
  c.set_time_base_ns(t0);
  Header* h = c.mutable_header();
  h->set_pid(7);
  h->set_start_time_trace_ns(t0);
  Device* d = c.add_devices();
  d->set_id(0);
  d->set_name("NVIDIA H200");
  InternedString* s = c.add_strings();
  s->set_id(1);
  s->set_value("copy");
  s = c.add_strings();
  s->set_id(2);
  s->set_value("idle");
  for (int i = 0; i < 2; ++i) {
    NvtxRange* r = c.add_nvtx_ranges();
    r->set_start(static_cast<int64_t>(t0 + (1 + i) * ms));
    r->set_duration(ms);
    r->set_name(1 + i);
    r->set_thread_id(7);
  }
  PmSampleConfig* pc = c.add_pm_sample_configs();
  pc->set_id(1);
  pc->set_device(0);
  pc->add_counter_names("sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
  pc->add_counter_names("dram__bytes_read.sum");
  pc->set_interval_ns(100 * us);
  for (uint64_t t = t0 + 500 * us; t < t0 + 3500 * us; t += 100 * us) {
    PmSample* p = c.add_pm_samples();
    p->set_config(1);
    p->set_device(0);
    p->set_start(static_cast<int64_t>(t));
    p->set_duration(100 * us);
    const uint64_t mid = t + 50 * us;
    const bool copy = mid >= t0 + ms && mid < t0 + 2 * ms;
    const bool idle = mid >= t0 + 2 * ms && mid < t0 + 3 * ms;
    p->add_values(copy ? 90 : idle ? 0 : 50);
    p->add_values(copy ? 1e5 : 0);
  }
  w.Add(c);
  const std::string path = Temp(name);
  const Status written = w.WriteFile(path);
  EXPECT_TRUE(written.ok()) << written.message();
  return path;
}

TEST(PmSamplingSummary, PerRangeMeansAndP95) {
  TraceSummary s = SummarizeTraces({SyntheticRun("summary.kptrace")});
  ASSERT_EQ(s.pm.size(), 1u);
  const PmDeviceSummary& d = s.pm[0];
  EXPECT_EQ(d.whole.samples, 30u);
  ASSERT_EQ(d.counters.size(), 2u);
  // Whole run: 10 copy samples at 90, 10 idle at 0, 10 others at 50.
  EXPECT_NEAR(d.whole.values[0].mean, (10 * 90 + 10 * 50) / 30.0, 1e-9);
  EXPECT_EQ(d.whole.values[0].p95, 90);
  std::map<std::string, const PmRangeStats*> by_name;
  for (const PmRangeStats& r : d.ranges) by_name[r.name] = &r;
  ASSERT_TRUE(by_name.count("copy") && by_name.count("idle"));
  EXPECT_EQ(by_name["copy"]->samples, 10u);
  EXPECT_DOUBLE_EQ(by_name["copy"]->values[0].mean, 90);
  EXPECT_DOUBLE_EQ(by_name["copy"]->values[1].mean, 1e9);  // 1e5 B per 100 us
  EXPECT_EQ(by_name["idle"]->samples, 10u);
  EXPECT_DOUBLE_EQ(by_name["idle"]->values[0].mean, 0);
  EXPECT_DOUBLE_EQ(by_name["idle"]->values[0].p95, 0);

  const std::string text = FormatSummaryText(s, 10);
  EXPECT_NE(text.find("\nPM samples ("), std::string::npos) << text;
  EXPECT_NE(text.find("dram__bytes_read.sum.per_second"), std::string::npos);
  EXPECT_NE(text.find("      copy "), std::string::npos) << text;
  const nlohmann::json j = nlohmann::json::parse(FormatSummaryJson(s));
  ASSERT_EQ(j["pm_samples"].size(), 1u);
  EXPECT_EQ(j["pm_samples"][0]["samples"], 30);
}

TEST(PmSamplingCsv, OneColumnPerCounterWithRates) {
  const std::string in = SyntheticRun("csv.kptrace");
  const std::string out = Temp("csv_out");
  std::vector<std::string> args = {in, "--to", "csv", "-o", out, "--no-progress"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ASSERT_EQ(cli::RunConvert(static_cast<int>(argv.size()), argv.data()), 0);
  std::ifstream f(out + "/pm_samples.csv");
  std::string header, row;
  ASSERT_TRUE(std::getline(f, header));
  EXPECT_EQ(header,
            "file,pid,device,start_ns,end_ns,duration_ns,t_ms,"
            "sm__cycles_active.avg.pct_of_peak_sustained_elapsed,"
            "dram__bytes_read.sum.per_second\r");
  int rows = 0;
  bool saw_copy = false;
  while (std::getline(f, row)) {
    ++rows;
    // The last two cells: SM active and the read rate (1e5 bytes in 100 us = 1e9 B/s).
    const size_t b = row.rfind(',');
    const size_t a = row.rfind(',', b - 1);
    const double sm = std::stod(row.substr(a + 1, b - a - 1));
    const double rate = std::stod(row.substr(b + 1));
    saw_copy = saw_copy || (sm == 90 && rate == 1e9);
  }
  EXPECT_EQ(rows, 30);
  EXPECT_TRUE(saw_copy);
}

TEST(PmSamplingDecode, PeriodAndImageFollowTheInterval) {
  // 512 intervals per decode, clamped to 10..200 ms; the image holds four periods, 64..2048.
  EXPECT_EQ(PmDecodePeriodMs(100'000), 51u);
  EXPECT_EQ(PmImageSamples(100'000), 2040u);
  EXPECT_EQ(PmDecodePeriodMs(1'000'000), 200u);  // the default 1 ms: 200 samples per decode
  EXPECT_EQ(PmImageSamples(1'000'000), 800u);
  EXPECT_EQ(PmDecodePeriodMs(1'000'000'000), 200u);
  EXPECT_EQ(PmImageSamples(1'000'000'000), 64u);
  EXPECT_EQ(PmDecodePeriodMs(10'000), 10u);  // faster than the configurable minimum
  EXPECT_EQ(PmImageSamples(10'000), 2048u);
  EXPECT_EQ(PmImageSamples(1'000), 2048u);
  // Every configurable interval: the image holds at least two periods' samples (or 2048).
  for (uint64_t us = kPmIntervalMinUs; us <= kPmIntervalMaxUs; us = us * 3 / 2) {
    const uint64_t ns = us * 1000;
    const uint64_t per_period = PmDecodePeriodMs(ns) * 1000000 / ns;
    EXPECT_GE(PmImageSamples(ns), std::min<uint64_t>(4 * per_period, 2048)) << us;
  }
}

}  // namespace
}  // namespace kp
