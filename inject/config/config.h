// config.h: the KP_* environment variables, parsed once at start-up.
//
// Every variable is documented in README.md ("Configuration"). A bad value yields one
// ConfigError whose message names the variable, the bad value and the accepted values; its
// scope says what turns off: the whole profiler (tracing settings: the user's intent is
// unclear, so kp records nothing rather than something unasked for) or just metrics.
// Parsing allocates and is never on a hot path.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/sol_metrics.h"
#include "common/status.h"
#include "inject/capture/capture_plan.h"
#include "inject/pc_sampling/pc_sampling_config.h"

namespace kp {

// KP_API: kLaunch records the launch-related calls from callbacks on their driver form
// (api_call_recorder.h; every runtime call reaches the driver); kLaunchRuntime from callbacks on
// both forms, a runtime call under its runtime name (CUPTI's runtime callbacks cost more);
// kLaunchActivity the same calls as per-cbid API activity; kAll every call.
enum class ApiMode { kLaunch, kLaunchRuntime, kLaunchActivity, kAll, kNone };
enum class MetricsMode { kRange, kKernel };
// KP_METRICS_CACHE: when the L2 is emptied before measured work (range_mode_collector.h,
// kernel_mode_collector.h).
enum class MetricsCache { kPass, kRange, kNone };
// KP_METRICS_L2_FLUSH: how the L2 is emptied where KP_METRICS_CACHE asks for it: the driver's
// evict (inject/metrics/l2_evict.h; the sweep where the driver refuses) or kp's sweep + discard
// (inject/metrics/l2_sweep.h).
enum class MetricsL2Flush { kDriver, kSweep };
enum class LogLevel { kQuiet, kInfo, kDebug };

struct Config {
  bool disabled = false;                         // KP_DISABLE=1
  std::string output_pattern = "kp-%p.kptrace";  // KP_OUTPUT
  // KP_ACTIVITIES: comma list of kernel,memcpy,memset,api,nvtx,sync,graph,overhead;
  // also "default", "all", and "-name" to remove one. Default: kernel,memcpy,memset,api,nvtx:
  // sync, overhead and graph cost on every CUDA call (docs/configuration.md) and are opt-in.
  bool kernel = true, memcpy = true, memset = true, api = true, nvtx = true, sync = false,
       graph = false, overhead = false;
  ApiMode api_mode = ApiMode::kLaunch;      // KP_API=launch|launch-runtime|launch-activity|all|none
  std::vector<std::string> metrics;         // KP_METRICS (comma list; "sol" expands)
  std::vector<std::string> metrics_ranges;  // KP_METRICS_RANGES (comma list of globs,
                                            // "domain::glob" to name a domain); empty = all
  MetricsMode metrics_mode = MetricsMode::kRange;             // KP_METRICS_MODE=range|kernel
  MetricsCache metrics_cache = MetricsCache::kPass;           // KP_METRICS_CACHE=pass|range|none
  MetricsL2Flush metrics_l2_flush = MetricsL2Flush::kDriver;  // KP_METRICS_L2_FLUSH=driver|sweep
  // KP_METRICS_SKIP: warm-up occurrences of each range name not measured (range mode)
  uint32_t metrics_skip = 1;
  // Kernel-mode targeting, like ncu's (inject/metrics/kernel_selector.h). Any of them set
  // implies KP_METRICS_MODE=kernel; with KP_METRICS_MODE=range they are an error.
  std::string metrics_kernels;                    // KP_METRICS_KERNELS: regex:RE | exact name
  uint64_t metrics_launch_skip_before_match = 0;  // KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH
  uint64_t metrics_launch_skip = 0;               // KP_METRICS_LAUNCH_SKIP
  uint64_t metrics_launch_count = 0;              // KP_METRICS_LAUNCH_COUNT (0: no limit)
  bool metrics_launch_per_name = false;           // KP_METRICS_LAUNCH_SCOPE=global|per-name
  std::vector<std::string> metrics_nvtx_include;  // KP_METRICS_NVTX_INCLUDE (RANGES syntax)
  uint32_t flush_ms = 1000;                       // KP_FLUSH_MS, 10..600000
  uint32_t buffer_mb = 256;                       // KP_BUFFER_MB, 8..65536: cap on CUPTI buffers
  int zstd_level = 3;                             // KP_COMPRESSION=zstd[:level]|none
  double delay_s = 0;                             // KP_DELAY: seconds before capture starts
  double duration_s = 0;      // KP_DURATION: seconds of capture (0 = to the end)
  std::string capture_range;  // KP_CAPTURE_RANGE: NVTX range that opens a capture window
  // KP_CAPTURE_RANGE_END=stop|repeat[:N]|none (nsys --capture-range-end): also applies to
  // KP_CAPTURE=cudaProfilerApi. capture_max_windows: N, 0 = no limit.
  CaptureRangeEnd capture_range_end = CaptureRangeEnd::kStop;
  uint32_t capture_max_windows = 1;
  // KP_CAPTURE_SCHEDULE=RANGE:wait,warmup,active[,repeat[,skip_first]] (torch.profiler.schedule)
  bool capture_schedule_set = false;
  CaptureSchedule capture_schedule;
  // KP_CAPTURE=cudaProfilerApi|signal: the trigger that is not a range or a time
  CaptureTrigger capture_trigger = CaptureTrigger::kWholeRun;
  int capture_signal = 0;          // KP_CAPTURE_SIGNAL: number; 0 = the default (SIGRTMIN+6)
  LogLevel log = LogLevel::kInfo;  // KP_LOG=quiet|info|debug
  std::string dump_buffers_dir;    // KP_DUMP_BUFFERS: save raw CUPTI buffers (tests)
  PcSamplingConfig pc_sampling;    // KP_PC_SAMPLING, KP_PC_SAMPLING_PERIOD
  std::string run_id;  // KP_RUN_ID: names the run this process belongs to (kptrace run sets it)
  // KP_PM_SAMPLING / KP_PM_INTERVAL_US (inject/pm_sampling/pm_sampling_config.h): counters
  // sampled over time per GPU; empty = off.
  std::vector<std::string> pm_sampling;
  bool pm_sampling_gpu_set = false;  // pm_sampling is the named set `gpu`
  uint32_t pm_interval_us = 1000;
};

enum class ConfigErrorScope { kProfiler, kMetrics, kPmSampling };

struct ConfigError {
  std::string variable;
  std::string message;  // one line, starts with the variable name, ends with the fix
  ConfigErrorScope scope = ConfigErrorScope::kProfiler;
};

using GetEnvFn = std::function<const char*(const char*)>;

// Parses every KP_* variable through `getenv`. Errors are appended; the returned Config holds
// defaults for the bad ones. Callers apply the scope rule (see above).
Config ParseConfig(const GetEnvFn& getenv, std::vector<ConfigError>* errors);

// The settings in force, as (variable, value) pairs for the trace header.
std::vector<std::pair<std::string, std::string>> DescribeConfig(const Config& config);

// Expands %p (pid), %h (host), %r (rank, "norank" when unknown), %t (start time,
// YYYYMMDD-HHMMSS), %% in KP_OUTPUT. An unknown %x is an error (the message names KP_OUTPUT and
// the %x).
StatusOr<std::string> ExpandOutputPattern(const std::string& pattern, uint32_t pid,
                                          const std::string& host, int rank,
                                          uint64_t start_unix_ns);

// The run id: KP_RUN_ID, else TORCHELASTIC_RUN_ID (unless "none"), SLURM_JOB_ID[.SLURM_STEP_ID]
// or PMIX_NAMESPACE with a prefix naming the launcher; "" when none is set.
std::string RunIdFromEnv(const Config& config, const GetEnvFn& getenv);

// Rank from RANK, then LOCAL_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK; -1 if none.
int RankFromEnv(const GetEnvFn& getenv);
int LocalRankFromEnv(const GetEnvFn& getenv);
int WorldSizeFromEnv(const GetEnvFn& getenv);

// Warnings (not errors) for KP_* variables in `environ` that kp does not know, most likely
// typos: one line each, starting with the variable name, with a "did you mean" when one is close.
std::vector<std::string> UnknownKpVariables(char** environ);

// The capture plan (inject/capture) the settings describe: the trigger, its range or schedule,
// delay, duration and window limits.
CapturePlan CapturePlanOf(const Config& config);

}  // namespace kp
