#include "inject/metrics/range_collector.h"

#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <generated_nvtx_meta.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>

#include "inject/cupti/driver_symbol.h"
#include "inject/metrics/l2_sweep.h"
#include "inject/trace/trace_encoder.h"

namespace kp {

// Kernels the range profiler launches itself (docs/cupti.md: one extra kernel record per
// measured range in range mode). Their names are only known once seen on a GPU: run with
// KP_LOG=debug, which prints each distinct kernel name once, and add the profiler's here.
// Seen on the H200 (CUDA 13.0, CUPTI 130001): the range profiler launches one 1x1 "WaitNs"
// kernel per measured range on a stream of its own (~80 us), with no API call of the app.
// kp's own L2 sweep (l2_sweep.h) is listed too.
static const std::vector<std::string_view> kProfilerInternalKernels = {"WaitNs",
                                                                       kL2SweepKernelName};

namespace {

constexpr int kNoticeInfo = 0, kNoticeWarning = 1, kNoticeError = 2;

struct OpenRange {
  const void* domain;
  bool measured;
};
thread_local std::vector<OpenRange> t_open_ranges;

// generated_nvtx_meta.h has no struct for nvtxDomainCreateW; its one argument is the name.
struct DomainCreateWParams {
  const wchar_t* name;
};
thread_local bool t_has_measured = false;
thread_local CUcontext t_measured_ctx = nullptr;
thread_local int t_runtime_launch_depth = 0;
// Stream-capture calls in progress on this thread (a runtime call nests a driver one).
thread_local int t_capture_call_depth = 0;

uint32_t ThreadId() {
  thread_local uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

CUresult CurrentContext(CUcontext* ctx) {
  static const auto fn = FindDriverSymbol<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
  return fn ? fn(ctx) : CUDA_ERROR_NOT_INITIALIZED;
}

uint64_t Now() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string Narrow(const wchar_t* w) {
  std::string s;
  if (!w) return s;
  for (; *w; ++w) s.push_back(*w < 128 ? static_cast<char>(*w) : '?');
  return s;
}

bool IsKernelLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
      case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000:
        return true;
      default:
        return false;
    }
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        return true;
      default:
        return false;
    }
  }
  return false;
}

bool IsGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
    return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ||
           cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
    return cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
           cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
  return false;
}

}  // namespace

// The range profiler calls whose host time is accounted (FlushContext reports them).
enum TimedCall { kTStart, kTStop, kTPush, kTPop, kTDecode, kTRearm, kTSweep, kNumTimedCalls };
constexpr const char* kTimedCallNames[kNumTimedCalls] = {
    "Start",   "Stop", "PushRange", "PopRange", "decode+evaluate", "image re-init+SetConfig",
    "L2 sweep"};
struct CallTimes {
  uint64_t count = 0;
  double total_ms = 0, max_ms = 0;
  void Add(double ms) {
    ++count;
    total_ms += ms;
    if (ms > max_ms) max_ms = ms;
  }
};

// State of the range profiler on one context. Guarded by `mu` (see the header on locking).
struct RangeCollector::ContextProfiler {
  CUcontext ctx = nullptr;
  uint32_t device = 0, context_id = 0;
  std::string chip;
  MetricPlan plan;
  std::vector<const char*> metric_ptrs;
  CUpti_RangeProfiler_Object* obj = nullptr;
  std::vector<uint8_t> image;
  size_t max_ranges = 0;
  bool multi_pass = false;
  bool started = false;
  bool closed = false;
  std::shared_ptr<uint32_t> config_id = std::make_shared<uint32_t>(0);
  int sm_clock_index = -1;  // metric giving the SM clock in Hz, if the user asked for one
  std::mutex mu;

  Result open;  // the measured range now open (range mode; owner thread only)
  // Its pop came during a stream capture: the owner closes it at its next measured push or the
  // final flush, and drops its values (FinishDeferredPop); the end is the application's pop.
  bool deferred_pop = false;
  uint64_t deferred_pop_end = 0;
  std::string open_range_name;
  std::pair<std::string, std::string> open_key;
  // Single-pass range mode: occurrences since the last decode, by CUPTI range name.
  std::vector<Result> pending;
  std::unordered_map<std::string, size_t> pending_by_range_name;
  // Multi-pass range mode: the names of the current pass and the per-name state of the cycle.
  std::set<std::pair<std::string, std::string>> names_in_pass;
  std::map<std::pair<std::string, std::string>, Result> cycle;
  uint32_t passes_submitted = 0;
  // Kernel mode: launches since the last decode, in launch order.
  std::vector<Result> launches;
  uint64_t launch_index = 0;
  uint64_t graph_launches = 0;
  uint64_t ranges_dropped = 0;  // NaN-only results and ranges CUPTI dropped
  uint64_t index_mismatches = 0;
  uint64_t names_over_capacity = 0;      // multi-pass: occurrences past kNamesPerPass in a pass
  uint64_t range_number_mismatches = 0;  // kernel mode: CUPTI's range number != launch number
  // Host time spent inside the range profiler's calls, by call (reported at the final flush).
  CallTimes times[kNumTimedCalls];
  // Range mode: the L2 sweep (l2_sweep.h) and whether a Start happened since the last one.
  L2Sweep sweep;
  bool sweep_pending = false;
  bool sweep_failed = false;
};

namespace {

using Profiler = RangeCollector::ContextProfiler;
using Result = RangeCollector::Result;

// Adds the time from construction to destruction to p->times[call].
class CallTimer {
 public:
  CallTimer(Profiler* p, TimedCall call)
      : t_(&p->times[call]), t0_(std::chrono::steady_clock::now()) {}
  ~CallTimer() { t_->Add(MsSince(t0_)); }
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

 private:
  CallTimes* t_;
  std::chrono::steady_clock::time_point t0_;
};

// "Start 9x 1.62 ms (max 2.10), Stop ...": the calls that ran, for the final Notice.
std::string FormatCallTimes(const Profiler& p) {
  std::string out;
  for (int i = 0; i < kNumTimedCalls; ++i) {
    const CallTimes& t = p.times[i];
    if (!t.count) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %llux %.3f ms (max %.3f)", out.empty() ? "" : ", ",
                  kTimedCallNames[i], static_cast<unsigned long long>(t.count),
                  t.total_ms / static_cast<double>(t.count), t.max_ms);
    out += buf;
  }
  return out;
}

bool Call(const char* name, CUptiResult r, std::string* error) {
  if (r == CUPTI_SUCCESS) return true;
  *error = CuptiCallError(name, r);
  std::string why = ExplainCounterAccessError(r);
  if (!why.empty()) *error += ": " + why;
  return false;
}

bool SetConfig(Profiler* p, MetricsMode mode, std::string* error) {
  CUpti_RangeProfiler_SetConfig_Params sc{};
  sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
  sc.pRangeProfilerObject = p->obj;
  sc.configSize = p->plan.config_image.size();
  sc.pConfig = p->plan.config_image.data();
  sc.counterDataImageSize = p->image.size();
  sc.pCounterDataImage = p->image.data();
  sc.range = mode == MetricsMode::kKernel ? CUPTI_AutoRange : CUPTI_UserRange;
  sc.replayMode = mode == MetricsMode::kKernel ? CUPTI_KernelReplay : CUPTI_UserReplay;
  sc.maxRangesPerPass = p->max_ranges;
  sc.numNestingLevels = 1;
  sc.minNestingLevel = 1;
  sc.passIndex = 0;
  sc.targetNestingLevel = 1;
  return Call("cuptiRangeProfilerSetConfig", cuptiRangeProfilerSetConfig(&sc), error);
}

bool InitImage(Profiler* p, std::string* error) {
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii{};
  ii.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
  ii.pRangeProfilerObject = p->obj;
  ii.counterDataSize = p->image.size();
  ii.pCounterData = p->image.data();
  return Call("cuptiRangeProfilerCounterDataImageInitialize",
              cuptiRangeProfilerCounterDataImageInitialize(&ii), error);
}

bool Start(Profiler* p, std::string* error) {
  CUpti_RangeProfiler_Start_Params s{};
  s.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
  s.pRangeProfilerObject = p->obj;
  CallTimer timer(p, kTStart);
  if (!Call("cuptiRangeProfilerStart", cuptiRangeProfilerStart(&s), error)) return false;
  p->started = true;
  p->sweep_pending = true;
  return true;
}

bool Stop(Profiler* p, bool* all_passes_submitted, std::string* error) {
  CUpti_RangeProfiler_Stop_Params s{};
  s.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
  s.pRangeProfilerObject = p->obj;
  p->started = false;
  CallTimer timer(p, kTStop);
  if (!Call("cuptiRangeProfilerStop", cuptiRangeProfilerStop(&s), error)) return false;
  *all_passes_submitted = s.isAllPassSubmitted != 0;
  return true;
}

template <typename Lookup>
bool DecodeAndEvaluateImage(Profiler* p, Lookup by_index, std::vector<Result>* out,
                            std::string* error);

// Decodes the image and evaluates every range in it: `by_index(i, range_name)` says which
// Result range i belongs to (nullptr: unknown, skipped). Re-arms the image and config after.
template <typename Lookup>
bool DecodeAndEvaluate(Profiler* p, MetricsMode mode, Lookup by_index, std::vector<Result>* out,
                       std::string* error) {
  {
    CallTimer timer(p, kTDecode);
    if (!DecodeAndEvaluateImage(p, by_index, out, error)) return false;
  }
  CallTimer timer(p, kTRearm);
  return InitImage(p, error) && SetConfig(p, mode, error);
}

template <typename Lookup>
bool DecodeAndEvaluateImage(Profiler* p, Lookup by_index, std::vector<Result>* out,
                            std::string* error) {
  CUpti_RangeProfiler_DecodeData_Params dd{};
  dd.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
  dd.pRangeProfilerObject = p->obj;
  if (!Call("cuptiRangeProfilerDecodeData", cuptiRangeProfilerDecodeData(&dd), error)) return false;
  p->ranges_dropped += dd.numOfRangeDropped;
  CUpti_RangeProfiler_GetCounterDataInfo_Params info{};
  info.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
  info.pCounterDataImage = p->image.data();
  info.counterDataImageSize = p->image.size();
  if (!Call("cuptiRangeProfilerGetCounterDataInfo", cuptiRangeProfilerGetCounterDataInfo(&info),
            error))
    return false;
  for (size_t i = 0; i < info.numTotalRanges; ++i) {
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri{};
    ri.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
    ri.pCounterDataImage = p->image.data();
    ri.counterDataImageSize = p->image.size();
    ri.rangeIndex = i;
    ri.rangeDelimiter = "/";
    if (!Call("cuptiRangeProfilerCounterDataGetRangeInfo",
              cuptiRangeProfilerCounterDataGetRangeInfo(&ri), error))
      return false;
    Result* target = by_index(i, ri.rangeName ? ri.rangeName : "");
    if (!target) continue;
    std::vector<double> values(p->metric_ptrs.size(), std::nan(""));
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev{};
    ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
    ev.pHostObject = p->plan.host->raw();
    ev.pCounterDataImage = p->image.data();
    ev.counterDataImageSize = p->image.size();
    ev.rangeIndex = i;
    ev.ppMetricNames = p->metric_ptrs.data();
    ev.numMetrics = p->metric_ptrs.size();
    ev.pMetricValues = values.data();
    if (!Call("cuptiProfilerHostEvaluateToGpuValues", cuptiProfilerHostEvaluateToGpuValues(&ev),
              error))
      return false;
    // An incomplete multi-pass cycle evaluates "successfully" to NaN (docs/cupti.md).
    bool any_value = false;
    for (double v : values) any_value |= !std::isnan(v);
    if (!any_value) {
      ++p->ranges_dropped;
      continue;
    }
    target->values = std::move(values);
    out->push_back(*target);
  }
  return true;
}

// Stops the profiler and evaluates whatever the mode has pending. With `restart`, starts again
// (single-pass range mode and kernel mode keep one session running between flush points).
bool Collect(Profiler* p, MetricsMode mode, bool restart, std::vector<Result>* out,
             std::string* error) {
  if (!p->started) return true;
  bool all = false;
  if (!Stop(p, &all, error)) return false;
  if (mode == MetricsMode::kKernel) {
    if (!DecodeAndEvaluate(
            p, mode,
            [p](size_t i, const char* name) -> Result* {
              if (i >= p->launches.size()) return nullptr;
              // CUPTI names auto ranges by their number since the profiler was enabled ("0",
              // "1", ...; seen on the H200), and kp numbers the launches it records the same
              // way: a difference means a launch CUPTI measured and kp did not see, or the
              // reverse, and the values from there on may belong to other kernels.
              char* end = nullptr;
              unsigned long long n = std::strtoull(name, &end, 10);
              if (end != name && *end == '\0' && n != p->launches[i].occurrence)
                ++p->range_number_mismatches;
              return &p->launches[i];
            },
            out, error))
      return false;
    // Auto ranges are numbered in launch order; a count that differs means launches we did not
    // see (or a range CUPTI dropped), so the mapping of the tail is uncertain.
    if (out->size() + p->ranges_dropped != p->launches.size()) ++p->index_mismatches;
    p->launches.clear();
  } else if (!p->multi_pass) {
    if (!DecodeAndEvaluate(
            p, mode,
            [p](size_t, const char* name) -> Result* {
              auto it = p->pending_by_range_name.find(name);
              return it == p->pending_by_range_name.end() ? nullptr : &p->pending[it->second];
            },
            out, error))
      return false;
    p->pending.clear();
    p->pending_by_range_name.clear();
  } else {
    ++p->passes_submitted;
    if (all) {
      if (!DecodeAndEvaluate(
              p, mode,
              [p](size_t, const char* name) -> Result* {
                for (auto& [key, r] : p->cycle) {
                  std::string range_name =
                      key.first.empty() ? key.second : key.first + "::" + key.second;
                  if (range_name != name) continue;
                  if (r.tainted) {
                    ++p->ranges_dropped;  // one pass held a range closed late (a capture)
                    return nullptr;
                  }
                  return &r;
                }
                return nullptr;
              },
              out, error))
        return false;
      p->cycle.clear();
      p->passes_submitted = 0;
    }
    p->names_in_pass.clear();
  }
  if (restart) return Start(p, error);
  return true;
}

}  // namespace

RangeCollector::RangeCollector(const Config& config, std::vector<std::string> metrics,
                               EncoderPost post)
    : mode_(config.metrics_mode),
      cache_(config.metrics_cache),
      metrics_(std::move(metrics)),
      selector_(config.metrics_ranges),
      debug_(config.log == LogLevel::kDebug),
      post_(std::move(post)) {}

RangeCollector::~RangeCollector() = default;

void RangeCollector::Notice(int severity, const std::string& message) {
  uint64_t t = Now();
  post_([severity, message, t](TraceEncoder& enc) {
    enc.AddNotice(severity, "metrics", message, t);
  });
}

void RangeCollector::Fail(const std::string& message) {
  if (off_.exchange(true)) return;  // one line, the first cause
  std::fprintf(stderr, "kp: metrics: %s; metrics are off, tracing goes on\n", message.c_str());
  Notice(kNoticeError, message + "; metrics are off");
}

std::string RangeCollector::DomainName(const void* domain) {
  if (!domain) return "";
  std::lock_guard<std::mutex> lock(mu_);
  auto it = domain_names_.find(domain);
  return it == domain_names_.end() ? std::string() : it->second;
}

void RangeCollector::OnContextCreated(CUcontext ctx, uint32_t device_ordinal) {
  std::lock_guard<std::mutex> lock(mu_);
  context_devices_[ctx] = device_ordinal;
}

RangeCollector::ContextProfiler* RangeCollector::ProfilerFor(CUcontext ctx) {
  if (off_.load(std::memory_order_relaxed) || !ctx) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(ctx);
    if (it != profilers_.end()) return it->second->closed ? nullptr : it->second.get();
  }
  std::lock_guard<std::mutex> setup(setup_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(ctx);
    if (it != profilers_.end()) return it->second->closed ? nullptr : it->second.get();
  }
  if (off_) return nullptr;
  // A capture began since the caller looked: set up later (a begin waits for setup_mu_).
  if (active_captures_.load() > 0) return nullptr;

  auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_unique<ContextProfiler>();
  p->ctx = ctx;
  std::string error;
  if (!profiler_initialized_) {
    CUpti_Profiler_Initialize_Params ip{};
    ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    if (!Call("cuptiProfilerInitialize", cuptiProfilerInitialize(&ip), &error)) {
      Fail(error);
      return nullptr;
    }
    profiler_initialized_ = true;
  }
  uint32_t device = 0;
  if (!Call("cuptiGetDeviceId", cuptiGetDeviceId(ctx, &device), &error) ||
      !Call("cuptiGetContextId", cuptiGetContextId(ctx, &p->context_id), &error)) {
    Fail(error);
    return nullptr;
  }
  p->device = device;

  CUpti_Profiler_DeviceSupported_Params ds{};
  ds.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
  ds.cuDevice = static_cast<CUdevice>(device);
  ds.api = CUPTI_PROFILER_RANGE_PROFILING;
  if (!Call("cuptiProfilerDeviceSupported", cuptiProfilerDeviceSupported(&ds), &error)) {
    Fail(error);
    return nullptr;
  }
  DeviceSupportLevels levels;
  levels.overall = ds.isSupported;
  levels.architecture = ds.architecture;
  levels.sli = ds.sli;
  levels.vgpu = ds.vGpu;
  levels.confidential_compute = ds.confidentialCompute;
  levels.cmp = ds.cmp;
  levels.wsl = ds.wsl;
  std::string unsupported = ExplainDeviceSupport(levels);
  if (!unsupported.empty()) {
    Fail("device " + std::to_string(device) + " cannot be profiled: " + unsupported);
    return nullptr;
  }

  CUpti_Device_GetChipName_Params cn{};
  cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
  cn.deviceIndex = device;
  if (!Call("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cn), &error)) {
    Fail(error);
    return nullptr;
  }
  p->chip = cn.pChipName ? cn.pChipName : "";

  auto t_avail = std::chrono::steady_clock::now();
  CUpti_Profiler_GetCounterAvailability_Params ca{};
  ca.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
  ca.ctx = ctx;
  if (!Call("cuptiProfilerGetCounterAvailability", cuptiProfilerGetCounterAvailability(&ca),
            &error)) {
    Fail(error);
    return nullptr;
  }
  std::vector<uint8_t> availability(ca.counterAvailabilityImageSize);
  ca.pCounterAvailabilityImage = availability.data();
  if (!Call("cuptiProfilerGetCounterAvailability", cuptiProfilerGetCounterAvailability(&ca),
            &error)) {
    Fail(error);
    return nullptr;
  }
  double avail_ms = MsSince(t_avail);

  auto t_config = std::chrono::steady_clock::now();
  if (!BuildMetricPlan(p->chip, CUPTI_PROFILER_TYPE_RANGE_PROFILER, availability, metrics_,
                       &p->plan, &error)) {
    Fail("KP_METRICS: " + error);
    return nullptr;
  }
  double config_ms = MsSince(t_config);
  for (const auto& n : p->plan.names) p->metric_ptrs.push_back(n.c_str());
  for (size_t i = 0; i < p->plan.names.size(); ++i) {
    const auto& n = p->plan.names[i];
    if (n == "sm__cycles_elapsed.avg.per_second" || n == "gpc__cycles_elapsed.avg.per_second" ||
        n == "sm__cycles_elapsed.max.per_second" || n == "gpc__cycles_elapsed.max.per_second")
      p->sm_clock_index = static_cast<int>(i);
  }
  p->multi_pass = mode_ == MetricsMode::kRange && p->plan.num_passes > 1;
  p->max_ranges = mode_ == MetricsMode::kKernel ? 2 * kKernelsPerBatch
                  : p->multi_pass               ? kNamesPerPass
                                                : kRangesPerImage;

  auto t_enable = std::chrono::steady_clock::now();
  CUpti_RangeProfiler_Enable_Params en{};
  en.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
  en.ctx = ctx;
  if (!Call("cuptiRangeProfilerEnable", cuptiRangeProfilerEnable(&en), &error)) {
    Fail(error);
    return nullptr;
  }
  p->obj = en.pRangeProfilerObject;
  CUpti_RangeProfiler_GetCounterDataSize_Params gs{};
  gs.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
  gs.pRangeProfilerObject = p->obj;
  gs.pMetricNames = p->metric_ptrs.data();
  gs.numMetrics = p->metric_ptrs.size();
  gs.maxNumOfRanges = p->max_ranges;
  gs.maxNumRangeTreeNodes = static_cast<uint32_t>(p->max_ranges);
  if (!Call("cuptiRangeProfilerGetCounterDataSize", cuptiRangeProfilerGetCounterDataSize(&gs),
            &error)) {
    Fail(error);
    return nullptr;
  }
  p->image.assign(gs.counterDataSize, 0);
  if (!InitImage(p.get(), &error) || !SetConfig(p.get(), mode_, &error)) {
    Fail(error);
    return nullptr;
  }
  // Single-pass range mode starts once here; multi-pass starts per pass, kernel mode at launch.
  if (mode_ == MetricsMode::kRange && !p->multi_pass && !Start(p.get(), &error)) {
    Fail(error);
    return nullptr;
  }
  double enable_ms = MsSince(t_enable);
  double total_ms = MsSince(t0);

  MetricConfigInfo info;
  info.metric_names = p->plan.names;
  info.num_passes = static_cast<uint32_t>(p->plan.num_passes);
  info.mode = mode_ == MetricsMode::kKernel ? "kernel" : "range";
  info.device = device;
  info.chip = p->chip;
  auto id = p->config_id;
  post_([id, info](TraceEncoder& enc) { *id = enc.AddMetricConfig(info); });
  char msg[512];
  std::snprintf(msg, sizeof msg,
                "set up on device %u (%s, context %u) in %.1f ms (counter availability %.1f ms, "
                "config %.1f ms, enable+image+start %.1f ms): %zu metrics, %zu pass(es), %s mode%s",
                device, p->chip.c_str(), p->context_id, total_ms, avail_ms, config_ms, enable_ms,
                p->plan.names.size(), p->plan.num_passes, info.mode.c_str(),
                p->multi_pass ? "; passes rotate over repeated occurrences of each range" : "");
  Notice(kNoticeInfo, msg);
  if (debug_) std::fprintf(stderr, "kp: metrics: %s\n", msg);
  if (mode_ == MetricsMode::kKernel && p->plan.num_passes > 1) {
    bool dram = false;
    for (const auto& n : p->plan.names) dram |= n.rfind("dram__", 0) == 0;
    if (dram) {
      std::string warn =
          "kernel mode with a " + std::to_string(p->plan.num_passes) +
          "-pass set: CUPTI replays each kernel once per pass with no cache control between "
          "passes, and DRAM traffic reads high (on the H200, dram__bytes_write 8-23 MB more per "
          "kernel than with a single-pass set); for exact DRAM bytes per kernel measure them in "
          "a single-pass set, or use range mode";
      Notice(kNoticeWarning, warn);
      if (debug_) std::fprintf(stderr, "kp: metrics: %s\n", warn.c_str());
    }
  }

  ContextProfiler* raw = p.get();
  std::lock_guard<std::mutex> lock(mu_);
  profilers_[ctx] = std::move(p);
  return raw;
}

void RangeCollector::PostResults(ContextProfiler* p, std::vector<Result> results) {
  if (results.empty()) return;
  auto id = p->config_id;
  int clock = p->sm_clock_index;
  post_([id, clock, results = std::move(results)](TraceEncoder& enc) {
    for (const Result& r : results) {
      MetricRangeRecord rec;
      rec.config = *id;
      rec.name = r.name.c_str();
      rec.domain = r.domain.empty() ? nullptr : r.domain.c_str();
      rec.occurrence = r.occurrence;
      rec.occurrences_used = r.occurrences_used;
      rec.start = r.start;
      rec.end = r.end;
      rec.values = r.values.data();
      rec.num_values = static_cast<uint32_t>(r.values.size());
      rec.thread_id = r.thread_id;
      rec.device = r.device;
      rec.context = r.context;
      rec.correlation = r.correlation;
      rec.nesting_level = 1;
      if (clock >= 0 && static_cast<size_t>(clock) < r.values.size() &&
          std::isfinite(r.values[clock]))
        rec.sm_clock_khz = static_cast<uint32_t>(r.values[clock] / 1000.0);
      enc.AddMetricRange(rec);
    }
  });
}

void RangeCollector::OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) {
  if (!data || off_.load(std::memory_order_relaxed)) return;
  const void* params = data->functionParams;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxDomainCreateA:
    case CUPTI_CBID_NVTX_nvtxDomainCreateW: {
      if (!params || !data->functionReturnValue) return;
      auto handle = *static_cast<const nvtxDomainHandle_t*>(data->functionReturnValue);
      std::string name =
          cbid == CUPTI_CBID_NVTX_nvtxDomainCreateA
              ? std::string(static_cast<const nvtxDomainCreateA_params*>(params)->name
                                ? static_cast<const nvtxDomainCreateA_params*>(params)->name
                                : "")
              : Narrow(static_cast<const DomainCreateWParams*>(params)->name);
      std::lock_guard<std::mutex> lock(mu_);
      domain_names_[handle] = name;
      return;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringA: {
      if (!params || !data->functionReturnValue) return;
      auto handle = *static_cast<const nvtxStringHandle_t*>(data->functionReturnValue);
      const char* s = static_cast<const nvtxDomainRegisterStringA_params*>(params)->string;
      std::lock_guard<std::mutex> lock(mu_);
      registered_strings_[handle] = s ? s : "";
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushA: {
      const char* m = params ? static_cast<const nvtxRangePushA_params*>(params)->message : nullptr;
      OnRangePush(nullptr, m ? m : "");
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushW: {
      OnRangePush(
          nullptr,
          Narrow(params ? static_cast<const nvtxRangePushW_params*>(params)->message : nullptr));
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      if (!params) return;
      const void* domain = nullptr;
      const nvtxEventAttributes_t* attr = nullptr;
      if (cbid == CUPTI_CBID_NVTX_nvtxRangePushEx) {
        attr = static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib;
      } else {
        auto* dp = static_cast<const nvtxDomainRangePushEx_params*>(params);
        domain = dp->domain;
        attr = dp->core.eventAttrib;
      }
      std::string message;
      if (attr) {
        switch (attr->messageType) {
          case NVTX_MESSAGE_TYPE_ASCII:
            message = attr->message.ascii ? attr->message.ascii : "";
            break;
          case NVTX_MESSAGE_TYPE_UNICODE:
            message = Narrow(attr->message.unicode);
            break;
          case NVTX_MESSAGE_TYPE_REGISTERED: {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = registered_strings_.find(attr->message.registered);
            if (it != registered_strings_.end()) message = it->second;
            break;
          }
          default:
            break;
        }
      }
      OnRangePush(domain, std::move(message));
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
      OnRangePop(nullptr);
      return;
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      OnRangePop(params ? static_cast<const nvtxDomainRangePop_params*>(params)->domain : nullptr);
      return;
    default:
      return;
  }
}

void RangeCollector::OnRangePush(const void* domain, std::string message) {
  if (mode_ != MetricsMode::kRange) return;
  bool measure = !t_has_measured;
  std::string domain_name;
  if (measure) {
    domain_name = DomainName(domain);
    measure = selector_.Matches(domain_name, message);
  }
  uint64_t owner = owner_thread_.load(std::memory_order_relaxed);
  if (measure && owner != 0 && owner != ThreadId()) {
    if (skipped_other_thread_.fetch_add(1) == 0 && debug_)
      std::fprintf(stderr,
                   "kp: metrics: range '%s' on thread %u not measured: only thread %llu (the "
                   "first to open a measured range) is measured\n",
                   message.c_str(), ThreadId(), static_cast<unsigned long long>(owner));
    measure = false;
  }
  ContextProfiler* p = nullptr;
  CUcontext ctx = nullptr;
  if (measure && active_captures_.load() > 0) {
    skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
    measure = false;
  }
  if (measure) {
    // A driver call from an NVTX callback: verified safe on the H200 (docs/cupti.md).
    if (CurrentContext(&ctx) != CUDA_SUCCESS || !ctx) measure = false;
  }
  if (measure) {
    p = ProfilerFor(ctx);  // the first call does the set-up (keeps it out of the range's time)
    measure = p != nullptr;
  }
  if (measure) {
    uint64_t expected = 0;
    owner_thread_.compare_exchange_strong(expected, ThreadId());
    measure = owner_thread_.load() == ThreadId();
  }
  if (!measure) {
    t_open_ranges.push_back({domain, false});
    return;
  }

  std::vector<Result> results;
  std::string error;
  bool ok = true, skip = false, sweep = false;
  std::pair<std::string, std::string> key(domain_name, message);
  std::string range_name = domain_name.empty() ? message : domain_name + "::" + message;
  uint64_t k = 0;
  // Opens the CUPTI range; p->mu held.
  auto push = [&] {
    p->open = Result();
    p->open.name = message;
    p->open.domain = domain_name;
    p->open.occurrence = k;
    p->open.occurrences_used = 1;
    p->open.thread_id = ThreadId();
    p->open.device = p->device;
    p->open.context = p->context_id;
    p->open_range_name = range_name;
    p->open_key = key;
    CUpti_RangeProfiler_PushRange_Params pr{};
    pr.structSize = CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE;
    pr.pRangeProfilerObject = p->obj;
    pr.pRangeName = p->open_range_name.c_str();
    p->open.start = Now();
    CallTimer timer(p, kTPush);
    ok = Call("cuptiRangeProfilerPushRange", cuptiRangeProfilerPushRange(&pr), &error);
    if (ok && p->multi_pass) p->names_in_pass.insert(key);
  };
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed || active_captures_.load() > 0) {
      if (!p->closed) skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
      t_open_ranges.push_back({domain, false});
      return;
    }
    // A pop that came during a capture, which has ended since: close that range now.
    if (p->deferred_pop) ok = FinishDeferredPop(p, &results, &error);
    {
      std::lock_guard<std::mutex> maps(mu_);
      k = occurrences_[key]++;
    }
    if (!ok) {
      // falls through to the failure handling below
    } else if (p->multi_pass) {
      if (p->started && p->names_in_pass.count(key)) {
        ok = Collect(p, mode_, /*restart=*/false, &results, &error);  // the unit repeats: end pass
      }
      if (ok && !p->started) {
        ok = Start(p, &error);
        p->names_in_pass.clear();
      }
      // More names in one pass than the image holds: leave this one unmeasured.
      skip = ok && p->names_in_pass.size() + 1 >= p->max_ranges;
      if (skip) ++p->names_over_capacity;
    } else {
      range_name += "#" + std::to_string(k);
    }
    sweep = ok && !skip && !p->sweep_failed &&
            (cache_ == MetricsCache::kRange || (cache_ == MetricsCache::kPass && p->sweep_pending));
    if (ok && !skip && !sweep) push();
    if (!ok) p->closed = true;
  }
  if (sweep) {
    // Driver calls: outside the mutexes (see the header on locking). Only this thread, the
    // owner, pushes, pops and sweeps; another thread can only close the profiler meanwhile, or
    // begin a capture (checked again below).
    std::string sweep_error;
    auto t0 = std::chrono::steady_clock::now();
    bool swept =
        (p->sweep.ready() || p->sweep.Init(p->ctx, &sweep_error)) && p->sweep.Run(&sweep_error);
    double sweep_ms = MsSince(t0);
    if (!swept) {
      std::string msg = sweep_error +
                        "; ranges are measured without it from here on (the first range after "
                        "each range-profiler start can then read ~30 MB more dram writes)";
      std::fprintf(stderr, "kp: metrics: %s\n", msg.c_str());
      Notice(kNoticeWarning, msg);
    }
    std::lock_guard<std::mutex> lock(p->mu);
    p->times[kTSweep].Add(sweep_ms);  // timed outside the lock: the times are guarded by it
    if (!swept) p->sweep_failed = true;
    if (p->closed || active_captures_.load() > 0) {
      if (!p->closed) skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
      skip = true;  // not measured; sweep_pending stays set for the next range
    } else {
      p->sweep_pending = false;
      push();
      if (!ok) p->closed = true;
    }
  }
  PostResults(p, std::move(results));
  if (!ok || skip) {
    if (!ok) Fail(error);
    t_open_ranges.push_back({domain, false});
    return;
  }
  t_open_ranges.push_back({domain, true});
  t_has_measured = true;
  t_measured_ctx = ctx;
}

void RangeCollector::OnRangePop(const void* domain) {
  if (mode_ != MetricsMode::kRange) return;
  // Close the innermost open range of this domain (NVTX keeps one stack per domain).
  bool measured = false;
  for (size_t i = t_open_ranges.size(); i-- > 0;) {
    if (t_open_ranges[i].domain == domain) {
      measured = t_open_ranges[i].measured;
      t_open_ranges.erase(t_open_ranges.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (!measured) return;
  t_has_measured = false;
  ContextProfiler* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(t_measured_ctx);
    if (it != profilers_.end()) p = it->second.get();
  }
  if (!p) return;
  std::vector<Result> results;
  std::string error;
  bool ok = true;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed) return;
    if (active_captures_.load() > 0) {
      // Not during a capture: the owner closes it later (FinishDeferredPop).
      p->deferred_pop = true;
      p->deferred_pop_end = Now();
      return;
    }
    ok = PopLocked(p, /*end=*/0, /*keep=*/true, &results, &error);
  }
  PostResults(p, std::move(results));
  if (!ok) Fail(error);
}

bool RangeCollector::PopLocked(ContextProfiler* p, uint64_t end, bool keep,
                               std::vector<Result>* results, std::string* error) {
  CUpti_RangeProfiler_PopRange_Params pp{};
  pp.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
  pp.pRangeProfilerObject = p->obj;
  bool ok;
  {
    CallTimer timer(p, kTPop);
    ok = Call("cuptiRangeProfilerPopRange", cuptiRangeProfilerPopRange(&pp), error);
  }
  // The end is taken after PopRange, which waits for the range's GPU work in multi-pass mode,
  // so the range's time window holds its kernels (the summary's "while busy" reading uses it).
  p->open.end = end ? end : Now();
  if (ok && p->multi_pass) {
    Result& r = p->cycle[p->open_key];
    uint32_t used = r.occurrences_used + 1;
    bool tainted = r.tainted || !keep;
    r = p->open;  // the latest occurrence gives the times and index
    r.occurrences_used = used;
    r.tainted = tainted;  // a pass of this cycle is not trustworthy: the set is dropped
  } else if (ok && keep) {
    p->pending_by_range_name[p->open_range_name] = p->pending.size();
    p->pending.push_back(p->open);
    // Flush point: the image is nearly full (no measured range is open on the owner now).
    if (p->pending.size() + 1 >= p->max_ranges)
      ok = Collect(p, mode_, /*restart=*/true, results, error);
  }
  if (!ok) p->closed = true;
  return ok;
}

bool RangeCollector::FinishDeferredPop(ContextProfiler* p, std::vector<Result>* results,
                                       std::string* error) {
  p->deferred_pop = false;
  // Its CUPTI range stayed open past the capture, so its counters hold whatever ran until now:
  // the values are not kept (counted with the ranges skipped during captures).
  skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
  return PopLocked(p, p->deferred_pop_end, /*keep=*/false, results, error);
}

void RangeCollector::OnStreamCapture(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                     const CUpti_CallbackData* data) {
  if (!data) return;
  const bool begin = IsCaptureBegin(domain, cbid);
  if (data->callbackSite == CUPTI_API_ENTER) {
    if (t_capture_call_depth++ != 0 || !begin) return;  // the outermost call only
    // Before the capture starts: wait for a profiler set-up in flight (setup_mu_), close kernel
    // mode's batch (Stop and decode are not allowed during a capture), and raise the count
    // while holding every profiler's mutex, so a push or launch either finished before or sees
    // it.
    std::lock_guard<std::mutex> setup(setup_mu_);
    std::vector<ContextProfiler*> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [ctx, p] : profilers_) all.push_back(p.get());
    }
    std::sort(all.begin(), all.end());  // one lock order for concurrent begins
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(all.size());
    for (ContextProfiler* p : all) locks.emplace_back(p->mu);
    active_captures_.fetch_add(1);
    std::vector<std::pair<ContextProfiler*, std::vector<Result>>> posts;
    std::string error;
    bool ok = true;
    if (mode_ == MetricsMode::kKernel) {
      for (ContextProfiler* p : all) {
        if (!ok || p->closed || !p->started) continue;
        posts.emplace_back(p, std::vector<Result>());
        ok = Collect(p, mode_, /*restart=*/false, &posts.back().second, &error);
        if (!ok) p->closed = true;
      }
    }
    locks.clear();
    for (auto& [p, results] : posts) PostResults(p, std::move(results));
    if (!ok) Fail(error);
    return;
  }
  if (t_capture_call_depth > 0) --t_capture_call_depth;
  if (t_capture_call_depth != 0) return;
  // A begin that failed started no capture. An end ends the capture when it succeeds or reports
  // the capture invalidated or unjoined (901, 904 in both APIs); other errors (wrong thread, no
  // capture on that stream) leave any capture going. Pops deferred meanwhile are finished by
  // the owner thread at its next measured push (or at the final flush).
  int status = data->functionReturnValue ? *static_cast<const int*>(data->functionReturnValue) : 0;
  bool ended = begin ? status != 0 : (status == 0 || status == 901 || status == 904);
  if (!ended) return;
  int n = active_captures_.load();
  while (n > 0 && !active_captures_.compare_exchange_weak(n, n - 1)) {
  }
}

void RangeCollector::OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const CUpti_CallbackData* data) {
  if (mode_ != MetricsMode::kKernel || !data) return;
  bool kernel = IsKernelLaunch(domain, cbid);
  bool graph = !kernel && IsGraphLaunch(domain, cbid);
  if (!kernel && !graph) return;
  // A runtime launch calls a driver launch inside it: count the outermost call only.
  bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (data->callbackSite == CUPTI_API_EXIT) {
    if (runtime && t_runtime_launch_depth > 0) --t_runtime_launch_depth;
    return;
  }
  bool nested = !runtime && t_runtime_launch_depth > 0;
  if (runtime) ++t_runtime_launch_depth;
  if (off_.load(std::memory_order_relaxed)) return;
  // While a CUDA graph is being captured the profiler stays stopped (see OnStreamCapture):
  // launches then (captured ones do not even run) are not measured.
  if (active_captures_.load() > 0) {
    if (kernel && !nested) skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ContextProfiler* p = ProfilerFor(data->context);
  if (!p) return;
  std::vector<Result> results;
  std::string error;
  bool ok = true;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed || active_captures_.load() > 0) return;
    if (nested) {
      // The runtime's symbolName can be empty for some launch forms; the driver's has it.
      if (kernel && !p->launches.empty() && p->launches.back().name.empty() && data->symbolName)
        p->launches.back().name = data->symbolName;
      return;
    }
    if (graph) {
      // Per-kernel ranges inside a graph cannot be matched to launches: close the batch and
      // leave the graph unmeasured.
      ++p->graph_launches;
      ok = Collect(p, mode_, /*restart=*/false, &results, &error);
    } else {
      if (p->launches.size() >= kKernelsPerBatch)
        ok = Collect(p, mode_, /*restart=*/false, &results, &error);
      if (ok && !p->started) ok = Start(p, &error);
      if (ok) {
        Result r;
        r.name = data->symbolName ? data->symbolName : "";
        r.occurrence = p->launch_index++;
        r.occurrences_used = 1;
        r.start = r.end = Now();
        r.thread_id = ThreadId();
        r.device = p->device;
        r.context = p->context_id;
        r.correlation = data->correlationId;
        p->launches.push_back(std::move(r));
      }
    }
    if (!ok) p->closed = true;
  }
  PostResults(p, std::move(results));
  if (!ok) Fail(error);
}

void RangeCollector::FlushContext(ContextProfiler* p, bool final) {
  std::vector<Result> results;
  std::string error;
  bool ok = true;
  uint64_t incomplete = 0, dropped = 0, graphs = 0, mismatches = 0, over_capacity = 0,
           number_mismatches = 0;
  size_t passes = 0, submitted = 0;
  std::string call_times;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed) return;
    if (p->deferred_pop) ok = FinishDeferredPop(p, &results, &error);
    if (ok) ok = Collect(p, mode_, /*restart=*/false, &results, &error);
    if (final) {
      incomplete = p->cycle.size();
      passes = p->plan.num_passes;
      submitted = p->passes_submitted;
      p->cycle.clear();
      dropped = p->ranges_dropped;
      graphs = p->graph_launches;
      over_capacity = p->names_over_capacity;
      mismatches = p->index_mismatches;
      number_mismatches = p->range_number_mismatches;
      call_times = FormatCallTimes(*p);
      p->closed = true;
      if (p->obj) {
        CUpti_RangeProfiler_Disable_Params d{};
        d.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
        d.pRangeProfilerObject = p->obj;
        cuptiRangeProfilerDisable(&d);
        p->obj = nullptr;
      }
    }
  }
  PostResults(p, std::move(results));
  if (!ok) Fail(error);
  if (!call_times.empty()) {
    std::string msg = "host time in range-profiler calls on device " + std::to_string(p->device) +
                      " (context " + std::to_string(p->context_id) + "): " + call_times;
    Notice(kNoticeInfo, msg);
    if (debug_) std::fprintf(stderr, "kp: metrics: %s\n", msg.c_str());
  }
  if (incomplete) {
    // The cycle still open at exit: its occurrences gave passes but no full value set.
    Notice(kNoticeWarning,
           std::to_string(incomplete) + " range name(s) ended inside an unfinished pass cycle: " +
               std::to_string(submitted) + " of the " + std::to_string(passes) +
               " occurrences a value set needs were measured, so their last occurrences carry "
               "no values (complete cycles before it are in the trace)");
  }
  if (over_capacity)
    Notice(kNoticeWarning,
           std::to_string(over_capacity) + " range occurrence(s) not measured: more than " +
               std::to_string(kNamesPerPass - 1) +
               " distinct measured range names in one pass (one repeating unit); narrow "
               "KP_METRICS_RANGES");
  if (dropped || graphs || mismatches || number_mismatches) {
    post_([dropped](TraceEncoder& enc) { enc.stats().metric_ranges_dropped += dropped; });
    Notice(kNoticeWarning,
           std::to_string(dropped) + " measured range(s) dropped or incomplete, " +
               std::to_string(graphs) + " graph launch(es) not measured per kernel, " +
               std::to_string(mismatches) +
               " kernel batch(es) with a range count unlike the launch count, " +
               std::to_string(number_mismatches) +
               " kernel value set(s) whose CUPTI range number differs from the launch number "
               "(from there on values may belong to other kernels)");
  }
}

void RangeCollector::OnContextDestroying(CUcontext ctx) {
  ContextProfiler* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(ctx);
    if (it != profilers_.end()) p = it->second.get();
    context_devices_.erase(ctx);
  }
  if (p) FlushContext(p, /*final=*/true);
  // A new context may reuse the handle; keep the closed profiler alive (a racing callback may
  // still hold its pointer) but out of the map.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = profilers_.find(ctx);
  if (it != profilers_.end()) {
    retired_.push_back(std::move(it->second));
    profilers_.erase(it);
  }
}

void RangeCollector::Shutdown() {
  // Off first, so no thread starts setting up a profiler for a new context while (or after)
  // the profilers are closed and the profiler interface de-initialized.
  off_.store(true);
  std::lock_guard<std::mutex> setup(setup_mu_);
  std::vector<ContextProfiler*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [ctx, p] : profilers_) all.push_back(p.get());
  }
  for (ContextProfiler* p : all) FlushContext(p, /*final=*/true);
  if (uint64_t n = skipped_during_capture_.exchange(0))
    Notice(kNoticeInfo,
           std::to_string(n) +
               (mode_ == MetricsMode::kKernel ? " kernel launch(es)" : " range(s)") +
               " during CUDA-graph stream capture were not measured (the range profiler is not "
               "touched while an application captures, which would invalidate the capture)");
  uint64_t skipped = skipped_other_thread_.exchange(0);
  if (skipped)
    Notice(kNoticeInfo, std::to_string(skipped) +
                            " matching range(s) on threads other than the measured one were not "
                            "measured (range mode measures one thread)");
  if (profiler_initialized_) {
    CUpti_Profiler_DeInitialize_Params d{};
    d.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
    cuptiProfilerDeInitialize(&d);
    profiler_initialized_ = false;
  }
}

bool RangeCollector::IsProfilerInternalKernel(const char* name) const {
  if (!name) return false;
  std::string_view n(name);
  for (std::string_view known : kProfilerInternalKernels)
    if (n == known) return true;
  if (debug_ && mode_ == MetricsMode::kRange) {
    std::lock_guard<std::mutex> lock(seen_mu_);
    if (seen_kernels_.size() < 256 &&
        std::find(seen_kernels_.begin(), seen_kernels_.end(), n) == seen_kernels_.end()) {
      seen_kernels_.emplace_back(n);
      std::fprintf(stderr,
                   "kp: metrics: kernel '%s' seen (not a known profiler-internal kernel; if the "
                   "range profiler launched it, add it to kProfilerInternalKernels)\n",
                   name);
    }
  }
  return false;
}

}  // namespace kp
