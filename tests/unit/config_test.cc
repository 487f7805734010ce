// Config tests: every KP_* variable with good and bad values, the exact error lines, output
// pattern expansion, rank discovery and the unknown-variable warnings.
#include "inject/config/config.h"

#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kp {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  GetEnvFn fn() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

Config Parse(std::map<std::string, std::string> vars, std::vector<ConfigError>* errors) {
  Env env{std::move(vars)};
  return ParseConfig(env.fn(), errors);
}

// Parses one variable that must be accepted.
Config Good(const std::string& name, const std::string& value) {
  std::vector<ConfigError> errors;
  Config c = Parse({{name, value}}, &errors);
  EXPECT_TRUE(errors.empty()) << name << "=" << value << ": " << errors[0].message;
  return c;
}

// Parses one variable that must be refused; returns its single error.
ConfigError Bad(const std::string& name, const std::string& value) {
  std::vector<ConfigError> errors;
  Parse({{name, value}}, &errors);
  EXPECT_EQ(errors.size(), 1u) << name << "=" << value;
  if (errors.empty()) return {};
  EXPECT_EQ(errors[0].variable, name);
  EXPECT_EQ(errors[0].message.find('\n'), std::string::npos);
  EXPECT_EQ(errors[0].message.rfind(name + "=\"", 0), 0u) << errors[0].message;
  return errors[0];
}

TEST(ConfigTest, DefaultsWhenNothingIsSet) {
  std::vector<ConfigError> errors;
  Config c = Parse({}, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_FALSE(c.disabled);
  EXPECT_EQ(c.output_pattern, "kp-%p.kptrace");
  EXPECT_TRUE(c.kernel && c.memcpy && c.memset && c.api && c.nvtx);
  EXPECT_FALSE(c.graph || c.sync || c.overhead);  // opt-in: they cost on every CUDA call
  EXPECT_EQ(c.api_mode, ApiMode::kLaunch);
  EXPECT_TRUE(c.metrics.empty());
  EXPECT_EQ(c.metrics_mode, MetricsMode::kRange);
  EXPECT_EQ(c.flush_ms, 1000u);
  EXPECT_EQ(c.buffer_mb, 256u);
  EXPECT_EQ(c.zstd_level, 3);
  EXPECT_EQ(c.log, LogLevel::kInfo);
  // Empty values count as unset.
  c = Parse({{"KP_FLUSH_MS", ""}, {"KP_API", ""}}, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.flush_ms, 1000u);
}

TEST(ConfigTest, Disable) {
  EXPECT_TRUE(Good("KP_DISABLE", "1").disabled);
  EXPECT_TRUE(Good("KP_DISABLE", "yes").disabled);
  EXPECT_FALSE(Good("KP_DISABLE", "0").disabled);
  EXPECT_FALSE(Good("KP_DISABLE", "off").disabled);
  EXPECT_EQ(Bad("KP_DISABLE", "2").message,
            "KP_DISABLE=\"2\" is not valid: expected 1 to turn kp off or 0 to keep it on (also "
            "true/false, yes/no, on/off; default 0); kp is off for this process");
}

TEST(ConfigTest, Output) {
  EXPECT_EQ(Good("KP_OUTPUT", "/data/run-%h-%p-%r-%t-100%%.kptrace").output_pattern,
            "/data/run-%h-%p-%r-%t-100%%.kptrace");
  EXPECT_EQ(Bad("KP_OUTPUT", "trace-%q").message,
            "KP_OUTPUT=\"trace-%q\" is not valid: expected a file path in which % is followed by "
            "p (pid), h (host), r (rank), t (start time) or % (found \"%q\"; default "
            "kp-%p.kptrace); kp is off for this process");
  Bad("KP_OUTPUT", "trace%");
  EXPECT_EQ(Bad("KP_OUTPUT", "a\nb").message.find("a\\x0ab"), 11u);
}

TEST(ConfigTest, Activities) {
  Config c = Good("KP_ACTIVITIES", "kernel,memcpy");
  EXPECT_TRUE(c.kernel && c.memcpy);
  EXPECT_FALSE(c.memset || c.api || c.nvtx || c.sync || c.graph || c.overhead);
  c = Good("KP_ACTIVITIES", "all");
  EXPECT_TRUE(c.kernel && c.memcpy && c.memset && c.api && c.nvtx && c.sync && c.graph &&
              c.overhead);
  c = Good("KP_ACTIVITIES", "-api, -nvtx");
  EXPECT_TRUE(c.kernel && c.memcpy && c.memset);
  EXPECT_FALSE(c.api || c.nvtx || c.graph || c.sync || c.overhead);
  c = Good("KP_ACTIVITIES", "default,graph,-overhead");
  EXPECT_TRUE(c.kernel && c.graph && c.api);
  EXPECT_FALSE(c.overhead || c.sync);
  c = Good("KP_ACTIVITIES", "default,sync,overhead");  // the former defaults
  EXPECT_TRUE(c.kernel && c.memcpy && c.memset && c.api && c.nvtx && c.sync && c.overhead);
  EXPECT_FALSE(c.graph);
  c = Good("KP_ACTIVITIES", "all,-memset");
  EXPECT_TRUE(c.graph);
  EXPECT_FALSE(c.memset);
  EXPECT_EQ(Bad("KP_ACTIVITIES", "kernel,kernels").message,
            "KP_ACTIVITIES=\"kernel,kernels\" is not valid: expected a comma list of kernel, "
            "memcpy, memset, api, nvtx, sync, graph, overhead, default or all, with -name to "
            "remove one (\"kernels\" is none of them; default: kernel,memcpy,memset,api,nvtx); kp "
            "is off for this process");
  Bad("KP_ACTIVITIES", "kernel,,memcpy");
  Bad("KP_ACTIVITIES", "-");
}

TEST(ConfigTest, Api) {
  EXPECT_EQ(Good("KP_API", "launch").api_mode, ApiMode::kLaunch);
  EXPECT_EQ(Good("KP_API", "launch-runtime").api_mode, ApiMode::kLaunchRuntime);
  EXPECT_EQ(Good("KP_API", "launch-activity").api_mode, ApiMode::kLaunchActivity);
  EXPECT_EQ(Good("KP_API", "all").api_mode, ApiMode::kAll);
  EXPECT_EQ(Good("KP_API", "none").api_mode, ApiMode::kNone);
  EXPECT_EQ(Bad("KP_API", "ALL").message,
            "KP_API=\"ALL\" is not valid: expected launch (launch, copy, memset, sync, "
            "allocation, event and graph calls, as the driver calls they reach), launch-runtime "
            "(the same, runtime calls under their runtime names, slower), launch-activity (as "
            "API activity records, slower), all or none (default launch); kp is off for this "
            "process");
}

TEST(ConfigTest, MetricsAndSolShorthand) {
  Config c = Good("KP_METRICS", "dram__bytes_read.sum, gpu__time_duration.sum");
  EXPECT_EQ(c.metrics,
            (std::vector<std::string>{"dram__bytes_read.sum", "gpu__time_duration.sum"}));
  c = Good("KP_METRICS", "sol");
  EXPECT_EQ(c.metrics, SpeedOfLightMetrics());
  EXPECT_EQ(SpeedOfLightMetrics().size(), 8u);
  EXPECT_EQ(SpeedOfLightMetrics()[0], "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  c = Good("KP_METRICS", "l1tex__t_bytes.sum,sol,dram__bytes_read.sum");  // duplicates dropped
  ASSERT_EQ(c.metrics.size(), 9u);
  EXPECT_EQ(c.metrics[0], "l1tex__t_bytes.sum");
  EXPECT_EQ(c.metrics[4], "dram__bytes_read.sum");
  ConfigError e = Bad("KP_METRICS", "dram__bytes_read.sum,DRAM-bytes");
  EXPECT_EQ(e.scope, ConfigErrorScope::kMetrics);
  EXPECT_EQ(e.message,
            "KP_METRICS=\"dram__bytes_read.sum,DRAM-bytes\" is not valid: expected a comma list "
            "of CUPTI metric names made of a-z, 0-9, _ and . (e.g. dram__bytes_read.sum), or sol "
            "for the speed-of-light set (\"DRAM-bytes\" is not a metric name; default: no "
            "metrics); metrics are off, tracing goes on");
  Bad("KP_METRICS", "a,,b");
}

TEST(ConfigTest, MetricsRangesAndMode) {
  Config c = Good("KP_METRICS_RANGES", "forward,backward*,torch::opt?mizer");
  EXPECT_EQ(c.metrics_ranges,
            (std::vector<std::string>{"forward", "backward*", "torch::opt?mizer"}));
  ConfigError e = Bad("KP_METRICS_RANGES", "torch::");
  EXPECT_EQ(e.scope, ConfigErrorScope::kMetrics);
  EXPECT_EQ(e.message,
            "KP_METRICS_RANGES=\"torch::\" is not valid: expected a comma list of NVTX range "
            "names or globs (* and ?), each optionally domain::glob (::glob for the default "
            "domain), none empty (default: every range); metrics are off, tracing goes on");
  Bad("KP_METRICS_RANGES", "a,,b");
  EXPECT_EQ(Good("KP_METRICS_RANGES", "::step*").metrics_ranges,
            (std::vector<std::string>{"::step*"}));  // default domain only
  EXPECT_EQ(Good("KP_METRICS_MODE", "kernel").metrics_mode, MetricsMode::kKernel);
  EXPECT_EQ(Good("KP_METRICS_MODE", "range").metrics_mode, MetricsMode::kRange);
  e = Bad("KP_METRICS_MODE", "ranges");
  EXPECT_EQ(e.scope, ConfigErrorScope::kMetrics);
  EXPECT_EQ(e.message,
            "KP_METRICS_MODE=\"ranges\" is not valid: expected range (per NVTX range) or kernel "
            "(per kernel, with replay) (default range); metrics are off, tracing goes on");
  EXPECT_EQ(Good("KP_METRICS_CACHE", "pass").metrics_cache, MetricsCache::kPass);
  EXPECT_EQ(Good("KP_METRICS_CACHE", " range ").metrics_cache, MetricsCache::kRange);
  EXPECT_EQ(Good("KP_METRICS_CACHE", "none").metrics_cache, MetricsCache::kNone);
  e = Bad("KP_METRICS_CACHE", "all");
  EXPECT_EQ(e.scope, ConfigErrorScope::kMetrics);
  EXPECT_EQ(e.message,
            "KP_METRICS_CACHE=\"all\" is not valid: expected pass (empty the L2 after each "
            "range-profiler start), range (before every measured range, like ncu "
            "--cache-control all) or none (default pass); metrics are off, tracing goes on");
  EXPECT_EQ(Config().metrics_l2_flush, MetricsL2Flush::kDriver);
  EXPECT_EQ(Good("KP_METRICS_L2_FLUSH", "driver").metrics_l2_flush, MetricsL2Flush::kDriver);
  EXPECT_EQ(Good("KP_METRICS_L2_FLUSH", " sweep").metrics_l2_flush, MetricsL2Flush::kSweep);
  e = Bad("KP_METRICS_L2_FLUSH", "ncu");
  EXPECT_EQ(e.scope, ConfigErrorScope::kMetrics);
  EXPECT_EQ(e.message,
            "KP_METRICS_L2_FLUSH=\"ncu\" is not valid: expected driver (the GPU driver's L2 "
            "evict, like ncu's cache control; kp's sweep where the driver refuses) or sweep (kp "
            "reads the L2 out and discards it) (default driver); metrics are off, tracing goes "
            "on");
  EXPECT_EQ(Config().metrics_skip, 1u);
  EXPECT_EQ(Good("KP_METRICS_SKIP", "0").metrics_skip, 0u);
  EXPECT_EQ(Good("KP_METRICS_SKIP", "3").metrics_skip, 3u);
  e = Bad("KP_METRICS_SKIP", "-1");
  EXPECT_EQ(e.scope, ConfigErrorScope::kMetrics);
  EXPECT_EQ(e.message,
            "KP_METRICS_SKIP=\"-1\" is not valid: expected a whole number 0-1000000: the warm-up "
            "occurrences of each measured range name that are traced but not measured (default "
            "1); metrics are off, tracing goes on");
}

TEST(ConfigTest, FlushMs) {
  EXPECT_EQ(Good("KP_FLUSH_MS", "10").flush_ms, 10u);
  EXPECT_EQ(Good("KP_FLUSH_MS", "600000").flush_ms, 600000u);
  EXPECT_EQ(Bad("KP_FLUSH_MS", "abc").message,
            "KP_FLUSH_MS=\"abc\" is not valid: expected an integer number of milliseconds from "
            "10 to 600000 (default 1000); kp is off for this process");
  EXPECT_EQ(Bad("KP_FLUSH_MS", "abc").scope, ConfigErrorScope::kProfiler);
  for (const char* v : {"9", "600001", "-5", "1e3", "100ms", "99999999999999999999999"}) {
    Bad("KP_FLUSH_MS", v);
  }
}

TEST(ConfigTest, BufferMb) {
  EXPECT_EQ(Good("KP_BUFFER_MB", "8").buffer_mb, 8u);
  EXPECT_EQ(Good("KP_BUFFER_MB", "65536").buffer_mb, 65536u);
  EXPECT_EQ(Bad("KP_BUFFER_MB", "4").message,
            "KP_BUFFER_MB=\"4\" is not valid: expected an integer number of MiB from 8 to 65536 "
            "(default 256); kp is off for this process");
  Bad("KP_BUFFER_MB", "65537");
}

TEST(ConfigTest, Compression) {
  EXPECT_EQ(Good("KP_COMPRESSION", "none").zstd_level, 0);
  EXPECT_EQ(Good("KP_COMPRESSION", "zstd").zstd_level, 3);
  EXPECT_EQ(Good("KP_COMPRESSION", "zstd:19").zstd_level, 19);
  EXPECT_EQ(Good("KP_COMPRESSION", "zstd:1").zstd_level, 1);
  EXPECT_EQ(Bad("KP_COMPRESSION", "gzip").message,
            "KP_COMPRESSION=\"gzip\" is not valid: expected zstd, zstd:LEVEL with LEVEL from 1 "
            "to 19, or none (default zstd:3); kp is off for this process");
  Bad("KP_COMPRESSION", "zstd:0");
  Bad("KP_COMPRESSION", "zstd:20");
  Bad("KP_COMPRESSION", "zstd:");
}

TEST(ConfigTest, DelayAndDuration) {
  EXPECT_EQ(Good("KP_DELAY", "2.5").delay_s, 2.5);
  EXPECT_EQ(Good("KP_DELAY", "10s").delay_s, 10.0);
  EXPECT_EQ(Good("KP_DURATION", "0").duration_s, 0.0);
  EXPECT_EQ(Good("KP_DURATION", "30").duration_s, 30.0);
  EXPECT_EQ(Bad("KP_DELAY", "-1").message,
            "KP_DELAY=\"-1\" is not valid: expected a number of seconds from 0 to 1000000 before "
            "capture starts (default 0); kp is off for this process");
  EXPECT_EQ(Bad("KP_DURATION", "nan").message,
            "KP_DURATION=\"nan\" is not valid: expected a number of seconds from 0 to 1000000 "
            "to capture, 0 meaning until the end (default 0); kp is off for this process");
  for (const char* v : {"inf", "1e3", "0x10", "2000000", "1.2.3", "s"}) Bad("KP_DELAY", v);
}

TEST(ConfigTest, CaptureRangeLogAndDumpBuffers) {
  EXPECT_EQ(Good("KP_CAPTURE_RANGE", "train_step").capture_range, "train_step");
  EXPECT_EQ(Good("KP_CAPTURE_RANGE", "torch::step 10").capture_range, "torch::step 10");
  EXPECT_EQ(Good("KP_CAPTURE_RANGE", "::step").capture_range, "::step");  // default domain
  EXPECT_EQ(Bad("KP_CAPTURE_RANGE", "torch::").message,
            "KP_CAPTURE_RANGE=\"torch::\" is not valid: expected the message of the NVTX range "
            "that starts capture, optionally domain::message (::message for the default domain; "
            "default: capture from the start); kp is off for this process");
  EXPECT_EQ(Good("KP_LOG", "quiet").log, LogLevel::kQuiet);
  EXPECT_EQ(Good("KP_LOG", "debug").log, LogLevel::kDebug);
  EXPECT_EQ(Bad("KP_LOG", "verbose").message,
            "KP_LOG=\"verbose\" is not valid: expected quiet, info or debug (default info); kp "
            "is off for this process");
  EXPECT_EQ(Good("KP_DUMP_BUFFERS", "/tmp/bufs").dump_buffers_dir, "/tmp/bufs");
  EXPECT_EQ(Bad("KP_DUMP_BUFFERS", "/tmp/\x01").message,
            "KP_DUMP_BUFFERS=\"/tmp/\\x01\" is not valid: expected a directory path without "
            "control characters (default: off); kp is off for this process");
}

TEST(ConfigTest, CaptureTriggers) {
  Config c = Parse({{"KP_CAPTURE_RANGE", "step"}, {"KP_CAPTURE_RANGE_END", "repeat:3"}}, nullptr);
  EXPECT_EQ(c.capture_range_end, CaptureRangeEnd::kRepeat);
  EXPECT_EQ(c.capture_max_windows, 3u);
  CapturePlan plan = CapturePlanOf(c);
  EXPECT_EQ(plan.trigger, CaptureTrigger::kNvtxRange);
  EXPECT_EQ(plan.max_windows, 3u);
  c = Parse({{"KP_CAPTURE_RANGE", "step"}, {"KP_CAPTURE_RANGE_END", "repeat"}}, nullptr);
  EXPECT_EQ(c.capture_max_windows, 0u);
  c = Parse({{"KP_CAPTURE", "cudaProfilerApi"}, {"KP_CAPTURE_RANGE_END", "none"}}, nullptr);
  EXPECT_EQ(CapturePlanOf(c).trigger, CaptureTrigger::kCudaProfilerApi);
  EXPECT_EQ(CapturePlanOf(c).range_end, CaptureRangeEnd::kNone);

  c = Good("KP_CAPTURE_SCHEDULE", "torch::step:5,1,3,2,1");
  ASSERT_TRUE(c.capture_schedule_set);
  EXPECT_EQ(c.capture_schedule.range, "torch::step");
  EXPECT_EQ(c.capture_schedule.wait, 5u);
  EXPECT_EQ(c.capture_schedule.warmup, 1u);
  EXPECT_EQ(c.capture_schedule.active, 3u);
  EXPECT_EQ(c.capture_schedule.repeat, 2u);
  EXPECT_EQ(c.capture_schedule.skip_first, 1u);
  EXPECT_EQ(CapturePlanOf(c).trigger, CaptureTrigger::kSchedule);
  EXPECT_EQ(Good("KP_CAPTURE_SCHEDULE", "step:0,0,1").capture_schedule.repeat, 0u);
  for (const char* bad : {"step", "step:1,1", "step:1,1,0", ":1,1,1", "step:1,1,1,1,1,1",
                          "torch:::1,1,1", "step:a,1,1"}) {
    EXPECT_EQ(Bad("KP_CAPTURE_SCHEDULE", bad).variable, "KP_CAPTURE_SCHEDULE") << bad;
  }
  EXPECT_EQ(Bad("KP_CAPTURE_SCHEDULE", "step:1,1").message,
            "KP_CAPTURE_SCHEDULE=\"step:1,1\" is not valid: expected "
            "RANGE:WAIT,WARMUP,ACTIVE[,REPEAT[,SKIP_FIRST]] with the NVTX range that marks a step "
            "(domain::message to name a domain) and step counts, ACTIVE at least 1, REPEAT 0 for "
            "no limit (e.g. step:5,1,3,2); kp is off for this process");

  EXPECT_EQ(Good("KP_CAPTURE", "signal").capture_trigger, CaptureTrigger::kSignal);
  EXPECT_EQ(CapturePlanOf(Good("KP_CAPTURE", "signal")).control_signal, SIGRTMIN + 6);
  EXPECT_EQ(Bad("KP_CAPTURE", "nvtx").variable, "KP_CAPTURE");
  EXPECT_EQ(Good("KP_CAPTURE_SIGNAL", "SIGRTMIN+2").capture_signal, SIGRTMIN + 2);
  EXPECT_EQ(Good("KP_CAPTURE_SIGNAL", "SIGUSR2").capture_signal, SIGUSR2);
  EXPECT_EQ(Good("KP_CAPTURE_SIGNAL", "45").capture_signal, 45);
  for (const char* bad : {"SIGTERM", "15", "9", "SIGRTMIN+99", "x"}) {
    EXPECT_EQ(Bad("KP_CAPTURE_SIGNAL", bad).variable, "KP_CAPTURE_SIGNAL") << bad;
  }
  for (const char* bad : {"repeat:0", "repeat:x", "forever"}) {
    std::vector<ConfigError> errors;
    Parse({{"KP_CAPTURE_RANGE", "step"}, {"KP_CAPTURE_RANGE_END", bad}}, &errors);
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_EQ(errors[0].variable, "KP_CAPTURE_RANGE_END");
  }

  // One trigger at a time; a range end needs a range.
  std::vector<ConfigError> errors;
  Parse({{"KP_CAPTURE_RANGE", "step"}, {"KP_CAPTURE_SCHEDULE", "step:1,0,1"}}, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("cannot be combined with KP_CAPTURE_RANGE"), std::string::npos);
  errors.clear();
  Parse({{"KP_CAPTURE_RANGE", "step"}, {"KP_CAPTURE", "signal"}}, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].variable, "KP_CAPTURE");
  errors.clear();
  Parse({{"KP_CAPTURE_RANGE_END", "repeat:2"}}, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].variable, "KP_CAPTURE_RANGE_END");

  // Delay/duration alone are the time trigger; nothing set is the whole run.
  EXPECT_EQ(CapturePlanOf(Good("KP_DURATION", "2")).trigger, CaptureTrigger::kTime);
  EXPECT_EQ(CapturePlanOf(Parse({}, nullptr)).trigger, CaptureTrigger::kWholeRun);
}

TEST(ConfigTest, ErrorsAccumulateAndKeepDefaults) {
  std::vector<ConfigError> errors;
  Config c = Parse({{"KP_FLUSH_MS", "x"}, {"KP_METRICS", "BAD"}, {"KP_API", "all"}}, &errors);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].variable, "KP_METRICS");
  EXPECT_EQ(errors[1].variable, "KP_FLUSH_MS");
  EXPECT_EQ(c.flush_ms, 1000u);
  EXPECT_TRUE(c.metrics.empty());
  EXPECT_EQ(c.api_mode, ApiMode::kAll);
}

TEST(ConfigTest, DescribeConfigListsEverySetting) {
  Config c = Good("KP_COMPRESSION", "zstd:7");
  c.metrics = {"a.sum", "b.sum"};
  auto pairs = DescribeConfig(c);
  ASSERT_EQ(pairs.size(), 29u);
  std::map<std::string, std::string> m(pairs.begin(), pairs.end());
  EXPECT_EQ(m["KP_COMPRESSION"], "zstd:7");
  EXPECT_EQ(m["KP_METRICS"], "a.sum,b.sum");
  EXPECT_EQ(m["KP_ACTIVITIES"], "kernel,memcpy,memset,api,nvtx");
  EXPECT_EQ(m["KP_FLUSH_MS"], "1000");
  EXPECT_EQ(m["KP_METRICS_SKIP"], "1");
  EXPECT_EQ(m["KP_API"], "launch");
  for (const char* api : {"launch-runtime", "launch-activity", "all", "none"}) {
    std::map<std::string, std::string> d;
    for (const auto& [key, value] : DescribeConfig(Good("KP_API", api))) d[key] = value;
    EXPECT_EQ(d["KP_API"], api);
  }
  EXPECT_EQ(m["KP_DELAY"], "0");
  EXPECT_EQ(m["KP_METRICS_MODE"], "range");
  EXPECT_EQ(m["KP_METRICS_CACHE"], "pass");
  EXPECT_EQ(m["KP_METRICS_L2_FLUSH"], "driver");
  EXPECT_EQ(m["KP_METRICS_KERNELS"], "");
  EXPECT_EQ(m["KP_METRICS_LAUNCH_COUNT"], "0");
  EXPECT_EQ(m["KP_METRICS_LAUNCH_SCOPE"], "global");
  EXPECT_EQ(m["KP_PC_SAMPLING"], "off");
  EXPECT_EQ(m["KP_PC_SAMPLING_PERIOD"], "15");
  EXPECT_EQ(m["KP_PM_SAMPLING"], "off");
  EXPECT_EQ(m["KP_PM_INTERVAL_US"], "1000");
}

TEST(ConfigTest, KernelTargeting) {
  Config c = Good("KP_METRICS_KERNELS", "regex:gemm|conv");
  EXPECT_EQ(c.metrics_kernels, "regex:gemm|conv");
  EXPECT_EQ(c.metrics_mode, MetricsMode::kKernel);  // targeting implies kernel mode
  EXPECT_EQ(Good("KP_METRICS_KERNELS", " my_kernel ").metrics_kernels, "my_kernel");
  ConfigError e = Bad("KP_METRICS_KERNELS", "regex:gemm(");
  EXPECT_EQ(e.scope, ConfigErrorScope::kMetrics);
  EXPECT_EQ(e.message.rfind("KP_METRICS_KERNELS=\"regex:gemm(\" is not valid: expected regex:RE "
                            "(an ECMAScript regular expression searched in the mangled and "
                            "demangled kernel name) or an exact kernel name (mangled, demangled, "
                            "or the bare function name) (the regular expression does not compile: ",
                            0),
            0u)
      << e.message;
  EXPECT_NE(e.message.find("; metrics are off, tracing goes on"), std::string::npos);
  EXPECT_NE(Bad("KP_METRICS_KERNELS", "regex:").message.find("an empty regular expression"),
            std::string::npos);

  c = Good("KP_METRICS_LAUNCH_SKIP", "3");
  EXPECT_EQ(c.metrics_launch_skip, 3u);
  EXPECT_EQ(c.metrics_mode, MetricsMode::kKernel);
  EXPECT_EQ(Good("KP_METRICS_LAUNCH_COUNT", "2").metrics_launch_count, 2u);
  EXPECT_EQ(Good("KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH", "100").metrics_launch_skip_before_match,
            100u);
  e = Bad("KP_METRICS_LAUNCH_COUNT", "two");
  EXPECT_EQ(e.message,
            "KP_METRICS_LAUNCH_COUNT=\"two\" is not valid: expected a whole number "
            "0-1000000000000: the selected kernel launches measured, 0 for all (default 0); "
            "metrics are off, tracing goes on");
  Bad("KP_METRICS_LAUNCH_SKIP", "-1");
  Bad("KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH", "1e3");

  EXPECT_TRUE(Good("KP_METRICS_LAUNCH_SCOPE", "per-name").metrics_launch_per_name);
  EXPECT_FALSE(Good("KP_METRICS_LAUNCH_SCOPE", "global").metrics_launch_per_name);
  e = Bad("KP_METRICS_LAUNCH_SCOPE", "name");
  EXPECT_EQ(e.message,
            "KP_METRICS_LAUNCH_SCOPE=\"name\" is not valid: expected global "
            "(KP_METRICS_LAUNCH_SKIP/COUNT count launches of all selected kernels together, like "
            "ncu) or per-name (each kernel symbol on its own) (default global); metrics are off, "
            "tracing goes on");

  EXPECT_EQ(Good("KP_METRICS_NVTX_INCLUDE", "step*,torch::fwd").metrics_nvtx_include,
            (std::vector<std::string>{"step*", "torch::fwd"}));
  e = Bad("KP_METRICS_NVTX_INCLUDE", "a,,b");
  EXPECT_EQ(e.message,
            "KP_METRICS_NVTX_INCLUDE=\"a,,b\" is not valid: expected a comma list of NVTX range "
            "names or globs (* and ?), each optionally domain::glob (::glob for the default "
            "domain), none empty (default: no NVTX condition); metrics are off, tracing goes on");

  // Kernel targeting contradicts an explicit range mode: one line naming KP_METRICS_MODE.
  std::vector<ConfigError> errors;
  c = Parse({{"KP_METRICS_MODE", "range"}, {"KP_METRICS_KERNELS", "regex:gemm"}}, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].variable, "KP_METRICS_MODE");
  EXPECT_EQ(errors[0].scope, ConfigErrorScope::kMetrics);
  EXPECT_NE(errors[0].message.find("need kernel"), std::string::npos) << errors[0].message;
  errors.clear();
  c = Parse({{"KP_METRICS_MODE", "kernel"}, {"KP_METRICS_LAUNCH_COUNT", "1"}}, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.metrics_mode, MetricsMode::kKernel);
  // Nothing set: range mode stays the default.
  EXPECT_EQ(Good("KP_METRICS_LAUNCH_SCOPE", "").metrics_mode, MetricsMode::kRange);
}

TEST(ConfigTest, OutputPatternExpansion) {
  // 2023-11-14 22:13:20 UTC.
  const uint64_t t = 1700000000ull * 1000000000ull + 123;
  EXPECT_EQ(ExpandOutputPattern("/x/%h-%p-%r-%t-%%.kptrace", 4242, "node7", 3, t).value_or(""),
            "/x/node7-4242-3-20231114-221320-%.kptrace");
  EXPECT_EQ(ExpandOutputPattern("kp-%r.kptrace", 1, "h", -1, t).value_or(""), "kp-norank.kptrace");
  const StatusOr<std::string> unknown = ExpandOutputPattern("kp-%x", 1, "h", 0, t);
  EXPECT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "KP_OUTPUT=\"kp-%x\" uses unknown %x: expected %p (pid), %h (host), %r (rank), %t "
            "(start time) or %%");
  EXPECT_EQ(ExpandOutputPattern("kp-%", 1, "h", 0, t).status().message(),
            "KP_OUTPUT=\"kp-%\" ends in a lone %");
}

TEST(ConfigTest, RankDiscovery) {
  Env env{{{"LOCAL_RANK", "2"}, {"SLURM_PROCID", "9"}, {"WORLD_SIZE", "16"}}};
  EXPECT_EQ(RankFromEnv(env.fn()), 2);  // RANK missing: LOCAL_RANK is next
  EXPECT_EQ(LocalRankFromEnv(env.fn()), 2);
  EXPECT_EQ(WorldSizeFromEnv(env.fn()), 16);
  env.vars["RANK"] = "11";
  EXPECT_EQ(RankFromEnv(env.fn()), 11);
  env.vars["RANK"] = "garbage";  // ignored, falls through
  EXPECT_EQ(RankFromEnv(env.fn()), 2);
  Env none;
  EXPECT_EQ(RankFromEnv(none.fn()), -1);
  EXPECT_EQ(LocalRankFromEnv(none.fn()), -1);
  EXPECT_EQ(WorldSizeFromEnv(none.fn()), -1);
  Env slurm{{{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}}};
  EXPECT_EQ(RankFromEnv(slurm.fn()), 5);
  EXPECT_EQ(WorldSizeFromEnv(slurm.fn()), 8);
  EXPECT_EQ(LocalRankFromEnv(slurm.fn()), 1);
}

TEST(ConfigTest, UnknownVariablesAreWarnedWithSuggestion) {
  std::vector<std::string> storage = {"PATH=/bin",     "KP_FLUSHMS=100",  "KP_OUTPUT=x",
                                      "KP_METRIC=sol", "KP_ZZZZZZZZZZ=1", "KPX=1",
                                      "KP_DISABLE=0"};
  std::vector<char*> envp;
  for (auto& s : storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> w = UnknownKpVariables(envp.data());
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0], "KP_FLUSHMS is not a kp variable (did you mean KP_FLUSH_MS?); it is ignored");
  EXPECT_EQ(w[1], "KP_METRIC is not a kp variable (did you mean KP_METRICS?); it is ignored");
  EXPECT_EQ(w[2], "KP_ZZZZZZZZZZ is not a kp variable; it is ignored");
  EXPECT_TRUE(UnknownKpVariables(nullptr).empty());
}

}  // namespace
}  // namespace kp

namespace kp {
namespace {

TEST(ConfigTest, RunIdFromTheVariableOrTheLauncher) {
  EXPECT_EQ(Good("KP_RUN_ID", "kprun-node1-42-1700000000").run_id, "kprun-node1-42-1700000000");
  EXPECT_EQ(Bad("KP_RUN_ID", "has space").message,
            "KP_RUN_ID=\"has space\" is not valid: expected 1 to 128 characters from A-Z, a-z, "
            "0-9, '.', '_', ':' and '-' (default: set by kptrace run, else the launcher's job "
            "id); kp is off for this process");
  EXPECT_EQ(Bad("KP_RUN_ID", std::string(129, 'a')).variable, "KP_RUN_ID");
  Config none;
  Config given = Good("KP_RUN_ID", "mine");
  Env torch{{{"TORCHELASTIC_RUN_ID", "3f2a"}, {"SLURM_JOB_ID", "77"}}};
  EXPECT_EQ(RunIdFromEnv(given, torch.fn()), "mine");
  EXPECT_EQ(RunIdFromEnv(none, torch.fn()), "torchelastic-3f2a");
  // torchrun's default rendezvous id "none" names no run.
  Env torch_default{{{"TORCHELASTIC_RUN_ID", "none"}}};
  EXPECT_EQ(RunIdFromEnv(none, torch_default.fn()), "");
  Env slurm{{{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}}};
  EXPECT_EQ(RunIdFromEnv(none, slurm.fn()), "slurm-77.3");
  Env pmix{{{"PMIX_NAMESPACE", "prterun-host-1@1"}}};
  EXPECT_EQ(RunIdFromEnv(none, pmix.fn()), "pmix-prterun-host-1-1");
  EXPECT_EQ(RunIdFromEnv(none, Env{}.fn()), "");
}

}  // namespace
}  // namespace kp
