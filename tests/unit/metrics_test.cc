// Metric-name validation, pass counting (the real Profiler Host API, chip GH100, no GPU), the
// speed-of-light rules, the NVTX range selector and `kptrace metrics` exit codes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/metric_plan.h"
#include "common/pm_counters.h"
#include "inject/config/config.h"
#include "inject/metrics/l2_sweep.h"
#include "inject/metrics/range_selector.h"
#include "tests/unit/status_assertions.h"
#include "tools/kptrace/commands.h"
#include "tools/metrics/metric_catalog.h"
#include "tools/metrics/speed_of_light.h"

namespace kp {
namespace {

constexpr char kSm[] = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr char kMem[] = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
constexpr char kDram[] = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

// The host API needs libnvperf_host.so (dlopen'ed by libcupti). It ships with the toolkit on
// the build machine and in CI; skip with the reason anywhere it cannot be loaded.
StatusOr<std::unique_ptr<MetricHost>> Gh100() {
  return MetricHost::Create("GH100", CUPTI_PROFILER_TYPE_RANGE_PROFILER, {});
}
// libcupti dlopen()s libnvperf_host.so with RTLD_DEEPBIND, which AddressSanitizer's runtime
// refuses (it aborts the process: google/sanitizers#611). Under KP_SANITIZE these tests skip
// with that reason; the normal build (CI's) runs them.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif
#define REQUIRE_HOST_API()                                                            \
  do {                                                                                \
    if (kUnderAsan)                                                                   \
      GTEST_SKIP() << "libnvperf_host.so is loaded with RTLD_DEEPBIND, which "        \
                      "AddressSanitizer cannot run (google/sanitizers#611); the non-" \
                      "sanitizer build runs this test";                               \
    const Status host_api = Gh100().status();                                         \
    if (!host_api.ok())                                                               \
      GTEST_SKIP() << "Profiler Host API unavailable here: " << host_api.message();   \
  } while (0)

size_t Passes(const std::vector<std::string>& names,
              CUpti_ProfilerType type = CUPTI_PROFILER_TYPE_RANGE_PROFILER) {
  StatusOr<MetricPlan> plan = BuildMetricPlan("GH100", type, {}, names);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? plan.value().num_passes : 0;
}

TEST(MetricSyntax, AcceptsWellFormedNames) {
  for (const char* n : {"dram__bytes_read.sum", kSm, "l1tex__t_sector_hit_rate.pct",
                        "sm__cycles_elapsed.avg.per_second"})
    EXPECT_TRUE(IsOk(CheckMetricNameSyntax(n))) << n;
}

TEST(MetricSyntax, RejectsNoRollupLaunchAttributesAndJunk) {
  std::string reason;
  reason = CheckMetricNameSyntax("dram__bytes_read").message();
  EXPECT_FALSE(reason.empty());
  EXPECT_NE(reason.find("no rollup"), std::string::npos) << reason;
  reason = CheckMetricNameSyntax("launch__registers_per_thread").message();
  EXPECT_FALSE(reason.empty());
  EXPECT_NE(reason.find("Nsight Compute launch attribute"), std::string::npos) << reason;
  EXPECT_NE(reason.find("kernel record"), std::string::npos) << reason;
  reason = CheckMetricNameSyntax("").message();
  EXPECT_FALSE(reason.empty());
  reason = CheckMetricNameSyntax("DRAM__bytes_read.sum").message();
  EXPECT_FALSE(reason.empty());
  reason = CheckMetricNameSyntax("dram__bytes_read.").message();
  EXPECT_FALSE(reason.empty());
  reason = CheckMetricNameSyntax("dram__bytes_read..sum").message();
  EXPECT_FALSE(reason.empty());
  reason = CheckMetricNameSyntax("bytes.sum").message();
  EXPECT_FALSE(reason.empty());
}

TEST(MetricList, SplitsCommasExpandsSolAndDeduplicates) {
  auto names = ExpandMetricList(
      {"dram__bytes_read.sum, gpu__time_duration.sum", "sol", "dram__bytes_read.sum,,"});
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "dram__bytes_read.sum");
  EXPECT_EQ(names[1], "gpu__time_duration.sum");
  size_t expected = 2;
  for (const auto& m : SpeedOfLightMetrics())
    if (m != "dram__bytes_read.sum" && m != "gpu__time_duration.sum") ++expected;
  EXPECT_EQ(names.size(), expected);
  EXPECT_NE(std::find(names.begin(), names.end(), kSm), names.end());
}

TEST(EditDistance, Basics) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", "abc"), 0u);
  EXPECT_EQ(EditDistance("dram__byte_read", "dram__bytes_read"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(MetricHost, ListsSupportedChipsAndBaseMetrics) {
  REQUIRE_HOST_API();
  const std::vector<std::string> chips = SupportedChips().value_or(std::vector<std::string>());
  EXPECT_NE(std::find(chips.begin(), chips.end(), "GH100"), chips.end());
  auto host = Gh100().value_or(nullptr);
  auto counters = host->BaseMetrics(CUPTI_METRIC_TYPE_COUNTER);
  EXPECT_GT(counters.size(), 3000u);  // 3389 minus the prefixed ones on 13.0 U1
  for (const auto& n : counters) ASSERT_EQ(n.find('.'), std::string::npos) << n;
  EXPECT_TRUE(std::binary_search(counters.begin(), counters.end(), "dram__bytes_read"));
  auto subs = host->SubMetrics("dram__bytes_read", CUPTI_METRIC_TYPE_COUNTER);
  EXPECT_NE(std::find(subs.begin(), subs.end(), "sum"), subs.end());
  EXPECT_NE(std::find(subs.begin(), subs.end(), "avg.pct_of_peak_sustained_elapsed"), subs.end());
}

TEST(MetricHost, ValidatesGoodNames) {
  REQUIRE_HOST_API();
  auto host = Gh100().value_or(nullptr);
  EXPECT_TRUE(IsOk(host->Validate({"dram__bytes_read.sum", "gpu__time_duration.sum", kSm})));
  EXPECT_TRUE(IsOk(host->Validate(ExpandMetricList({"sol"}))));
}

TEST(MetricHost, NamesTheBadMetricAndSuggestsTheNearest) {
  REQUIRE_HOST_API();
  auto host = Gh100().value_or(nullptr);
  std::string error;
  error = host->Validate({"gpu__time_duration.sum", "dram__byte_read.sum"}).message();
  ASSERT_FALSE(error.empty());
  EXPECT_EQ(error.rfind("unknown metric 'dram__byte_read.sum' for GH100: ", 0), 0u) << error;
  EXPECT_NE(error.find("did you mean 'dram__bytes_read.sum'?"), std::string::npos) << error;
  EXPECT_NE(error.find("(kptrace metrics list --chip GH100 --filter dram__)"), std::string::npos)
      << error;
}

// KP_PM_SAMPLING validates on a PM-sampling host: the hint lists PM-sampling names, and the
// gpu set fits one pass there.
TEST(MetricHost, PmSamplingHintAndGpuSetInOnePass) {
  REQUIRE_HOST_API();
  StatusOr<std::unique_ptr<MetricHost>> host =
      MetricHost::Create("GH100", CUPTI_PROFILER_TYPE_PM_SAMPLING, {});
  ASSERT_TRUE(host.ok()) << host.status().message();
  const Status bad = host.value()->Validate({"dram__bytes_red.sum"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("did you mean 'dram__bytes_read.sum'?"), std::string::npos)
      << bad.message();
  EXPECT_NE(bad.message().find("(kptrace metrics list --chip GH100 --mode pm --filter dram__)"),
            std::string::npos)
      << bad.message();
  StatusOr<MetricPlan> plan =
      BuildMetricPlan("GH100", CUPTI_PROFILER_TYPE_PM_SAMPLING, {}, PmGpuCounterSet());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan.value().num_passes, 1u);
  plan = BuildMetricPlan("GH100", CUPTI_PROFILER_TYPE_PM_SAMPLING, {},
                         {"sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_GT(plan.value().num_passes, 1u);  // why the gpu set reads SM activity another way
}

TEST(MetricHost, NoRollupSuggestsTheSum) {
  REQUIRE_HOST_API();
  auto host = Gh100().value_or(nullptr);
  std::string error;
  error = host->Validate({"dram__bytes_read"}).message();
  ASSERT_FALSE(error.empty());
  EXPECT_NE(error.find("no rollup"), std::string::npos) << error;
  EXPECT_NE(error.find("did you mean 'dram__bytes_read.sum'?"), std::string::npos) << error;
  error = host->Validate({"sm__throughput"}).message();
  ASSERT_FALSE(error.empty());
  EXPECT_NE(error.find("did you mean '" + std::string(kSm) + "'?"), std::string::npos) << error;
}

TEST(MetricHost, BadSuffixSuggestsAValidOne) {
  REQUIRE_HOST_API();
  auto host = Gh100().value_or(nullptr);
  std::string error;
  error = host->Validate({"dram__bytes_read.summ"}).message();
  ASSERT_FALSE(error.empty());
  EXPECT_NE(error.find("did you mean 'dram__bytes_read.sum'?"), std::string::npos) << error;
}

TEST(MetricHost, LaunchAttributesAreRejectedWithTheReason) {
  REQUIRE_HOST_API();
  auto host = Gh100().value_or(nullptr);
  std::string error;
  error = host->Validate({"launch__registers_per_thread"}).message();
  ASSERT_FALSE(error.empty());
  EXPECT_NE(error.find("unknown metric 'launch__registers_per_thread' for GH100"),
            std::string::npos);
  EXPECT_NE(error.find("Nsight Compute launch attribute"), std::string::npos) << error;
  EXPECT_EQ(error.find("did you mean"), std::string::npos) << error;
}

TEST(MetricHost, FarOffNamesGetNoSuggestion) {
  REQUIRE_HOST_API();
  auto host = Gh100().value_or(nullptr);
  std::string error;
  EXPECT_EQ(host->Suggest("zzzzqqqq__xxxxyyyyy.sum"), "");
}

// Pass counts measured with the 13.0 U1 host API (docs/cupti.md, "Passes").
TEST(PassCount, MatchesTheMeasuredTable) {
  REQUIRE_HOST_API();
  for (const char* one : {"dram__bytes_read.sum", "gpu__time_duration.sum", kDram,
                          "sm__inst_executed.sum", "l1tex__t_sector_hit_rate.pct"})
    EXPECT_EQ(Passes({one}), 1u) << one;
  EXPECT_EQ(Passes({kSm}), 8u);
  EXPECT_EQ(Passes({kMem}), 5u);
  EXPECT_EQ(Passes({"lts__t_sector_hit_rate.pct"}), 2u);
  EXPECT_EQ(Passes({kSm, "dram__bytes_read.sum", "gpu__time_duration.sum"}), 8u);
  EXPECT_EQ(Passes({kSm, "dram__bytes_read.sum", "gpu__time_duration.sum",
                    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum"}),
            9u);
  std::vector<std::string> cheap = {"dram__bytes_read.sum",
                                    "dram__bytes_write.sum",
                                    "gpu__time_duration.sum",
                                    "sm__inst_executed.sum",
                                    "sm__cycles_active.avg",
                                    "sm__cycles_elapsed.avg",
                                    "sm__warps_active.avg.pct_of_peak_sustained_active",
                                    "l1tex__t_sector_hit_rate.pct",
                                    kDram,
                                    "sm__inst_executed_pipe_tensor.sum"};
  EXPECT_EQ(Passes(cheap), 1u);
  cheap.push_back("lts__t_sector_hit_rate.pct");
  EXPECT_EQ(Passes(cheap), 2u);
  EXPECT_EQ(Passes({kSm}, CUPTI_PROFILER_TYPE_PM_SAMPLING), 19u);
}

TEST(PassCount, PerMetricAndSet) {
  REQUIRE_HOST_API();
  StatusOr<PassCount> counted =
      CountPasses("GH100", CUPTI_PROFILER_TYPE_RANGE_PROFILER, {"dram__bytes_read.sum", kSm});
  ASSERT_TRUE(counted.ok()) << counted.status().message();
  const PassCount& pc = counted.value();
  EXPECT_EQ(pc.set_passes, 8u);
  ASSERT_EQ(pc.per_metric.size(), 2u);
  EXPECT_EQ(pc.per_metric[0], 1u);
  EXPECT_EQ(pc.per_metric[1], 8u);
  const std::string error =
      CountPasses("GH100", CUPTI_PROFILER_TYPE_RANGE_PROFILER, {"nope__x.sum"}).status().message();
  EXPECT_NE(error.find("unknown metric 'nope__x.sum'"), std::string::npos) << error;
}

TEST(MetricHost, UnknownChipIsAnError) {
  REQUIRE_HOST_API();
  const std::string error =
      MetricHost::Create("NOPE1", CUPTI_PROFILER_TYPE_RANGE_PROFILER, {}).status().message();
  EXPECT_NE(error.find("cuptiProfilerHostInitialize failed"), std::string::npos) << error;
  EXPECT_NE(error.find("NOPE1"), std::string::npos) << error;
}

TEST(CounterAccess, ExplainsPermissionAndSupportFailures) {
  std::string s = ExplainCounterAccessError(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  EXPECT_NE(s.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos) << s;
  EXPECT_NE(s.find("CAP_SYS_ADMIN"), std::string::npos) << s;
  EXPECT_NE(ExplainCounterAccessError(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED).find("MIG"),
            std::string::npos);
  EXPECT_NE(ExplainCounterAccessError(CUPTI_ERROR_HARDWARE_BUSY).find("another profiler"),
            std::string::npos);
  EXPECT_EQ(ExplainCounterAccessError(CUPTI_ERROR_INVALID_PARAMETER), "");
  DeviceSupportLevels ok;
  EXPECT_EQ(ExplainDeviceSupport(ok), "");
  DeviceSupportLevels vgpu;
  vgpu.overall = 1;
  vgpu.vgpu = 2;  // DISABLED: supported but not enabled by the hypervisor
  EXPECT_NE(ExplainDeviceSupport(vgpu).find("hypervisor"), std::string::npos);
  DeviceSupportLevels cc;
  cc.overall = 1;
  cc.confidential_compute = 1;
  EXPECT_NE(ExplainDeviceSupport(cc).find("confidential"), std::string::npos);
}

// --- speed of light ---

SolReading Sol(double sm, double mem) { return DiagnoseSpeedOfLight({{kSm, sm}, {kMem, mem}}); }

TEST(SpeedOfLight, WorkflowExamples) {
  EXPECT_EQ(Sol(5.4, 92).verdict, "memory-bound");  // the 512 MiB add on the H200
  EXPECT_EQ(Sol(68, 20).verdict, "mixed");          // not above 70: no unit saturated
  EXPECT_EQ(Sol(85, 20).verdict, "compute-bound");
  EXPECT_EQ(Sol(10, 12).verdict, "latency-bound");
  EXPECT_EQ(Sol(50, 50).verdict, "balanced");
  EXPECT_EQ(Sol(80, 85).verdict, "compute+memory-bound");
}

TEST(SpeedOfLight, Boundaries) {
  EXPECT_EQ(Sol(29.99, 29.99).verdict, "latency-bound");
  EXPECT_EQ(Sol(30, 10).verdict, "mixed");
  EXPECT_EQ(Sol(10, 30).verdict, "mixed");
  EXPECT_EQ(Sol(60, 60).verdict, "compute+memory-bound");
  EXPECT_EQ(Sol(59.99, 60).verdict, "balanced");
  EXPECT_EQ(Sol(70, 59).verdict, "balanced");
  EXPECT_EQ(Sol(70.01, 59.99).verdict, "compute-bound");
  EXPECT_EQ(Sol(70.01, 60).verdict, "compute+memory-bound");
  EXPECT_EQ(Sol(59.99, 70.01).verdict, "memory-bound");
  EXPECT_EQ(Sol(40, 40).verdict, "balanced");
  EXPECT_EQ(Sol(39.99, 40).verdict, "mixed");
  EXPECT_EQ(Sol(100, 0).verdict, "compute-bound");
  EXPECT_EQ(Sol(0, 100).verdict, "memory-bound");
}

TEST(SpeedOfLight, EveryPointOfTheGridGetsExactlyTheRuleOrder) {
  // Independent restatement of the header's rules; the grid covers every boundary.
  for (double s = 0; s <= 100; s += 2.5) {
    for (double m = 0; m <= 100; m += 2.5) {
      std::string expected = (s < 30 && m < 30)                           ? "latency-bound"
                             : (s >= 60 && m >= 60)                       ? "compute+memory-bound"
                             : (s > 70 && m < 60)                         ? "compute-bound"
                             : (m > 70 && s < 60)                         ? "memory-bound"
                             : (s >= 40 && s <= 70 && m >= 40 && m <= 70) ? "balanced"
                                                                          : "mixed";
      SolReading r = Sol(s, m);
      ASSERT_EQ(r.verdict, expected) << "SM " << s << " mem " << m;
      ASSERT_EQ(r.sm_pct, s);
      ASSERT_EQ(r.mem_pct, m);
      ASSERT_NE(r.explanation.find(r.verdict), std::string::npos);
    }
  }
}

TEST(SpeedOfLight, ExplanationGivesNumbersAndNextChecks) {
  SolReading r = Sol(85.04, 20.5);
  EXPECT_NE(r.explanation.find("SM 85.0%"), std::string::npos) << r.explanation;
  EXPECT_NE(r.explanation.find("memory 20.5%"), std::string::npos) << r.explanation;
  EXPECT_NE(r.explanation.find("tensor-core"), std::string::npos) << r.explanation;
  EXPECT_EQ(r.memory_metric, kMem);
}

TEST(SpeedOfLight, FallsBackToDramAndNeedsBoth) {
  SolReading r = DiagnoseSpeedOfLight({{kSm, 5}, {kDram, 90}});
  EXPECT_EQ(r.verdict, "memory-bound");
  EXPECT_EQ(r.memory_metric, kDram);
  r = DiagnoseSpeedOfLight({{kSm, 5}, {kMem, 80}, {kDram, 10}});
  EXPECT_EQ(r.memory_metric, kMem);
  EXPECT_EQ(r.mem_pct, 80);
  r = DiagnoseSpeedOfLight({{kSm, 5}});
  EXPECT_EQ(r.verdict, "");
  EXPECT_EQ(r.mem_pct, -1);
  r = DiagnoseSpeedOfLight({{kSm, std::nan("")}, {kMem, 50}});
  EXPECT_EQ(r.verdict, "");
  EXPECT_EQ(r.sm_pct, -1);
  EXPECT_NE(r.explanation.find("KP_METRICS=sol"), std::string::npos);
}

// --- range selection ---

TEST(RangeSelector, Globs) {
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("fwd*", "fwd_layer3"));
  EXPECT_TRUE(GlobMatch("*layer?", "fwd_layer3"));
  EXPECT_FALSE(GlobMatch("*layer?", "fwd_layer33"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXXbYY"));
  EXPECT_FALSE(GlobMatch("forward", "forwardx"));
}

TEST(RangeSelector, DomainsAndDefaults) {
  RangeSelector all({});
  EXPECT_TRUE(all.Matches("", "anything"));
  RangeSelector sel({"forward", "torch::back*", "::step"});
  EXPECT_TRUE(sel.Matches("", "forward"));
  EXPECT_TRUE(sel.Matches("mydomain", "forward"));  // no domain given: any domain
  EXPECT_TRUE(sel.Matches("torch", "backward"));
  EXPECT_FALSE(sel.Matches("", "backward"));
  EXPECT_TRUE(sel.Matches("", "step"));  // "::" = the default domain only
  EXPECT_FALSE(sel.Matches("torch", "step"));
  EXPECT_FALSE(sel.Matches("", "optimizer"));
}

// --- kptrace metrics exit codes ---

int RunCli(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  int rc = cli::RunMetrics(static_cast<int>(argv.size()), argv.data());
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  return rc;
}

TEST(MetricsCli, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCli({}), 2);
  EXPECT_EQ(RunCli({"frobnicate", "--chip", "GH100"}), 2);
  EXPECT_EQ(RunCli({"check", "dram__bytes_read.sum"}), 2);  // no --chip
  EXPECT_EQ(RunCli({"list", "--chip", "GH100", "--type", "bogus"}), 2);
  EXPECT_EQ(RunCli({"check", "--chip", "GH100", "--mode", "nope", "x__y.sum"}), 2);
  EXPECT_EQ(RunCli({"check", "--chip", "GH100"}), 2);  // no names
}

TEST(MetricsCli, CheckAndListExitCodes) {
  REQUIRE_HOST_API();
  EXPECT_EQ(RunCli({"check", "--chip", "GH100", "dram__bytes_read.sum,gpu__time_duration.sum"}), 0);
  EXPECT_EQ(RunCli({"check", "--chip=GH100", "sol"}), 0);
  EXPECT_EQ(RunCli({"check", "--chip", "GH100", "dram__bytes_read.sum", "dram__byte_read.sum"}), 1);
  EXPECT_EQ(RunCli({"check", "--chip", "GH100", "launch__grid_size"}), 1);
  EXPECT_EQ(RunCli({"check", "--chip", "NOPE1", "dram__bytes_read.sum"}), 1);
  EXPECT_EQ(RunCli({"list", "--chip", "GH100", "--filter", "dram__bytes", "--describe"}), 0);
  EXPECT_EQ(RunCli({"chips"}), 0);
}

TEST(MetricsCli, CheckPrintsTheBadNameAndPassCounts) {
  REQUIRE_HOST_API();
  std::vector<std::string> args = {"check", "--chip", "GH100", "gpu__time_duraton.sum"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli::RunMetrics(static_cast<int>(argv.size()), argv.data()), 1);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("kptrace: unknown metric 'gpu__time_duraton.sum' for GH100: "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("did you mean 'gpu__time_duration.sum'?"), std::string::npos) << err;

  args = {"check", "--chip", "GH100", std::string(kSm) + ",dram__bytes_read.sum"};
  argv.clear();
  for (auto& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  EXPECT_EQ(cli::RunMetrics(static_cast<int>(argv.size()), argv.data()), 0);
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("8 pass(es) for the set"), std::string::npos) << out;
  EXPECT_NE(out.find("8 passes"), std::string::npos) << out;
  EXPECT_NE(out.find("1 pass\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace kp

namespace kp {
namespace {

// The L2 sweep's PTX must assemble for the GPUs kp profiles (the driver JIT-compiles the same
// text at run time). Needs ptxas from the CUDA toolkit: $CUDA_HOME/bin, /usr/local/cuda/bin or
// PATH; CI has the toolkit.
std::string FindPtxas() {
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  if (const char* path = std::getenv("PATH")) {
    std::string p(path);
    for (size_t at = 0; at <= p.size();) {
      size_t end = p.find(':', at);
      if (end == std::string::npos) end = p.size();
      if (end > at) dirs.push_back(p.substr(at, end - at));
      at = end + 1;
    }
  }
  for (const auto& d : dirs)
    if (access((d + "/ptxas").c_str(), X_OK) == 0) return d + "/ptxas";
  return "";
}

TEST(L2Sweep, PtxAssemblesForHopperAndAmpere) {
  std::string ptxas = FindPtxas();
  if (ptxas.empty())
    GTEST_SKIP() << "ptxas not found (no CUDA toolkit in CUDA_HOME, /usr/local/cuda or PATH)";
  std::string ptx = L2SweepPtx();
  const size_t sweep = ptx.find(std::string(".entry ") + kL2SweepKernelName + "(");
  const size_t zero = ptx.find(std::string(".entry ") + kL2ZeroKernelName + "(");
  ASSERT_NE(sweep, std::string::npos);
  ASSERT_NE(zero, std::string::npos);
  ASSERT_LT(sweep, zero);
  // The sweep loads through L2 only, and its one store is behind the "non-zero XOR" branch.
  const std::string sweep_body = ptx.substr(sweep, zero - sweep);
  EXPECT_NE(sweep_body.find("ld.global.cg.v4.u32"), std::string::npos);
  EXPECT_LT(sweep_body.find("@%p2 bra END"), sweep_body.find("st.global"));
  EXPECT_EQ(sweep_body.find("st.global"), sweep_body.rfind("st.global"));
  // The zeroing kernel stores zeros and loads nothing.
  const std::string zero_body = ptx.substr(zero);
  EXPECT_NE(zero_body.find("st.global.v4.u32"), std::string::npos);
  EXPECT_EQ(zero_body.find("ld.global"), std::string::npos);
  char dir[] = "/tmp/kp-ptx-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string file = std::string(dir) + "/sweep.ptx";
  std::ofstream(file) << ptx;
  // The discard module: one entry, one discard.global.L2 per 128-byte line, no load or store.
  const std::string discard = L2DiscardPtx();
  EXPECT_NE(discard.find(std::string(".entry ") + kL2DiscardKernelName + "("), std::string::npos);
  EXPECT_NE(discard.find("discard.global.L2 [%rd8], 128;"), std::string::npos);
  EXPECT_EQ(discard.find("ld.global"), std::string::npos);
  EXPECT_EQ(discard.find("st.global"), std::string::npos);
  std::string discard_file = std::string(dir) + "/discard.ptx";
  std::ofstream(discard_file) << discard;
  for (const std::string& f : {file, discard_file}) {
    for (const char* arch : {"sm_90", "sm_80"}) {
      std::string cmd = ptxas + " -arch=" + arch + " -o " + dir + "/sweep.cubin " + f + " 2>&1";
      FILE* p = popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      std::string out;
      char buf[256];
      while (fgets(buf, sizeof buf, p)) out += buf;
      int rc = pclose(p);
      EXPECT_EQ(rc, 0) << f << " for " << arch << ": " << out;
    }
  }
  std::remove((std::string(dir) + "/sweep.cubin").c_str());
  std::remove(file.c_str());
  std::remove(discard_file.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace kp
