#include "inject/cupti/tracer.h"

#include <cupti.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "inject/capture/capture_controller.h"
#include "inject/config/config.h"
#include "inject/cupti/activity_decoder.h"
#include "inject/cupti/api_call_recorder.h"
#include "inject/cupti/api_selection.h"
#include "inject/cupti/buffer_pool.h"
#include "inject/cupti/cupti_detach.h"
#include "inject/cupti/driver_symbol.h"
#include "inject/cupti/encoder_thread.h"
#include "inject/cupti/kernel_record_switch.h"
#include "inject/log/log.h"
#include "inject/metrics/metrics_collector.h"
#include "inject/pc_sampling/pc_sampler.h"
#include "inject/pm_sampling/pm_sampling.h"
#include "inject/signals/termination_signals.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "proto/kptrace_schema.h"

#ifndef KP_VERSION
#define KP_VERSION "unknown"
#endif

namespace kp {
namespace {

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kDeviceBufferPoolLimit = 1024;
// A terminating signal waits at most this long for the trace to be finished (<= 1 s), plus at
// most kSignalLockWaitMs for an exit finish or a detach holding the shutdown lock: the two waits
// have separate budgets, so a slow lock never eats the finish's time.
constexpr uint32_t kSignalFinishTimeoutMs = 1000;
constexpr uint32_t kSignalLockWaitMs = 500;
// Within a signal's finish: how long a PM sampler still in its set-up is waited for (it ends its
// session itself afterwards), so that the footer is still written inside the finish's budget.
constexpr std::chrono::milliseconds kSignalPmSamplingWait(300);

// Process-wide state. Deliberately never destroyed: CUPTI threads may still call back while
// static destructors run at exit.
struct TracerState {
  Config config;
  std::string output_path;
  FileChunkWriter* writer = nullptr;
  TraceEncoder* encoder = nullptr;
  BufferPool* pool = nullptr;
  ActivityDecoder* decoder = nullptr;
  EncoderThread* thread = nullptr;
  std::unique_ptr<MetricsCollector> collector;
  ApiCallRecorder* api_calls = nullptr;     // KP_API=launch(-runtime): from callbacks
  std::unique_ptr<PcSampler> pc_sampler;    // KP_PC_SAMPLING
  std::unique_ptr<PmSampling> pm_sampling;  // KP_PM_SAMPLING
  CUpti_SubscriberHandle subscriber = nullptr;
  std::unique_ptr<CaptureController> capture;  // null: no capture trigger, the whole run
  // The kernel kind, switched by the capture windows and by kernel mode's own replay; null
  // when kernel records are not configured.
  std::unique_ptr<KernelRecordSwitch> kernel_records;
};

TracerState* g_state = nullptr;
std::once_flag g_init_once;
std::atomic<bool> g_active{false};         // tracing runs; cleared at exit or on a fatal error
std::atomic<bool> g_in_fork_child{false};  // CUPTI calls hang in a fork child (docs/cupti.md)
std::atomic<bool> g_exit_done{false};
std::mutex g_shutdown_mutex;  // serializes exit-time shutdown, a signal's finish and the detach
thread_local bool t_in_callback = false;
// Set when the process creates its first CUDA context: only then is the trace file created, so
// a process that never uses the GPU (a launcher, a compile worker that only queries the device)
// leaves no file behind.
std::atomic<bool> g_context_seen{false};

std::atomic<bool> g_cupti_fatal{false};  // CUPTI reported a fatal error and finalized itself
// Detaches CUPTI once the last capture window has closed; never destroyed (its thread may still
// run at exit).
CuptiDetach& Detach() {
  static CuptiDetach* detach = new CuptiDetach;
  return *detach;
}
bool CuptiUsable() { return g_active.load(std::memory_order_acquire) && !g_in_fork_child.load(); }
// For the encoder thread: CUPTI may still be called (also while draining at exit, when tracing
// itself has stopped), but never after a fatal error, nor once it is being detached.
bool CuptiAlive() { return !g_cupti_fatal.load() && !g_in_fork_child.load() && !Detach().quiet(); }

// The recorder, while recording API calls is all an API-domain callback does (no metrics, no
// cudaProfilerStart trigger, no CUPTI detach started, tracing on, not a fork child, no fatal
// error): OnCallback then calls it without reading the tracer's state, on a cache line of its
// own. Between two CUDA calls the program's work pushes that state out of the core's caches,
// and each further line read on every launch is a miss on the launching thread
// (bench/callback_cost.cc, "cold").
struct alignas(64) ApiFastPath {
  std::atomic<ApiCallRecorder*> recorder{nullptr};
};
ApiFastPath g_api_fast;

void DisarmApiFastPath() { g_api_fast.recorder.store(nullptr, std::memory_order_release); }

void OnForkChild() {
  g_in_fork_child.store(true);
  DisarmApiFastPath();
}

const char* CuptiErrorString(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) return "unknown";
  return text;
}

// ---- header ----

std::vector<std::string> ReadCommandLine() {
  std::vector<std::string> args;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release Build ..."
std::string ReadDriverVersion() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(in, line)) return "";
  size_t at = line.find("Module");
  if (at == std::string::npos) return "";
  std::istringstream words(line.substr(at));
  std::string word;
  while (words >> word) {
    if (!word.empty() && word[0] >= '0' && word[0] <= '9' && word.find('.') != std::string::npos) {
      return word;
    }
  }
  return "";
}

int CudaDriverVersion() {
  // Not linked against libcuda: ask it only if the process already has it.
  auto fn = FindDriverSymbol<int (*)(int*)>("cuDriverGetVersion");
  int version = 0;
  if (fn == nullptr || fn(&version) != 0) return 0;
  return version;
}

const char* ModeName(InjectionMode mode) {
  switch (mode) {
    case InjectionMode::kInjection:
      return "injection";
    case InjectionMode::kPreload:
      return "preload";
    case InjectionMode::kNvtxEarly:
      return "nvtx-early";
  }
  return "unknown";
}

std::string HumanBytes(uint64_t bytes) {
  char text[32];
  if (bytes >= (1u << 30)) {
    std::snprintf(text, sizeof(text), "%.1f GiB", bytes / double(1u << 30));
  } else if (bytes >= (1u << 20)) {
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / double(1u << 20));
  } else if (bytes >= (1u << 10)) {
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / double(1u << 10));
  } else {
    std::snprintf(text, sizeof(text), "%llu bytes", static_cast<unsigned long long>(bytes));
  }
  return text;
}

// ---- CUPTI callbacks (hot path: short, no I/O, no lock a CUDA-calling thread holds) ----

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_num_records) {
  *buffer = nullptr;
  *size = 0;
  *max_num_records = 0;
  try {
    if (g_state == nullptr || g_in_fork_child.load()) return;
    *buffer = g_state->pool->Acquire();  // nullptr at the KP_BUFFER_MB cap: CUPTI drops, counts
    if (*buffer != nullptr) *size = g_state->pool->buffer_bytes();
  } catch (...) {
    *buffer = nullptr;
    *size = 0;
  }
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t,
                              size_t valid_size) {
  try {
    if (g_state == nullptr || buffer == nullptr || g_in_fork_child.load()) return;
    if (g_exit_done.load() || Detach().finalizing()) {
      // After the footer: nowhere to write it. While CUPTI detaches: empty (everything was
      // flushed and decoded first), and decoding it would call CUPTI.
      g_state->pool->Release(buffer);
      return;
    }
    g_state->thread->PushCompleted(context, stream_id, buffer, valid_size);
  } catch (...) {
  }
}

void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) {
  if (Detach().quiet()) return;  // CUPTI is being detached: nothing more is traced
  if (g_state->pc_sampler) g_state->pc_sampler->OnResource(cbid, data);
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    if (!g_context_seen.exchange(true)) {
      // Write a chunk now so the file (and the run's manifest entry) appear at once, not a
      // KP_FLUSH_MS later: a process killed early still leaves its header behind.
      g_state->thread->Post([](TraceEncoder& encoder) { encoder.Flush(true); });
    }
    uint32_t device = 0;
    cuptiGetDeviceId(data->context, &device);
    if (g_state->collector) g_state->collector->OnContextCreated(data->context, device);
    if (g_state->pm_sampling) g_state->pm_sampling->OnContextCreated(data->context, device);
  } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // Also how cudaDeviceReset's records are flushed: the reset destroys the context.
    if (g_state->collector) g_state->collector->OnContextDestroying(data->context);
    if (g_state->pm_sampling) g_state->pm_sampling->OnContextDestroying(data->context);
    cuptiActivityFlushAll(0);
  }
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* cbdata) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API || domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    ApiCallRecorder* recorder = g_api_fast.recorder.load(std::memory_order_acquire);
    if (recorder != nullptr && !t_in_callback) {
      t_in_callback = true;
      try {  // nothing may leave a CUPTI callback (a first copy's kind switch can log)
        recorder->OnCallback(domain, cbid, static_cast<const CUpti_CallbackData*>(cbdata));
      } catch (...) {
      }
      t_in_callback = false;
      return;
    }
  }
  if (t_in_callback || g_state == nullptr || !CuptiUsable()) return;
  t_in_callback = true;
  try {
    if (Detach().OnCallback(domain, cbdata)) {
      t_in_callback = false;
      return;
    }
    if (g_state->capture) g_state->capture->OnCallback(domain, cbid, cbdata);
    switch (domain) {
      case CUPTI_CB_DOMAIN_RESOURCE:
        OnResource(cbid, static_cast<const CUpti_ResourceData*>(cbdata));
        break;
      case CUPTI_CB_DOMAIN_RUNTIME_API:
      case CUPTI_CB_DOMAIN_DRIVER_API: {
        const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
        if (g_state->api_calls != nullptr) g_state->api_calls->OnCallback(domain, cbid, data);
        if (g_state->collector && MetricsCollector::IsCaptureCbid(domain, cbid)) {
          g_state->collector->OnStreamCapture(domain, cbid, data);
        } else if (g_state->collector && g_state->collector->wants_launch_callbacks()) {
          g_state->collector->OnLaunch(domain, cbid, data);
        }
        break;
      }
      case CUPTI_CB_DOMAIN_NVTX:
        if (g_state->collector) {
          g_state->collector->OnNvtx(cbid, static_cast<const CUpti_NvtxData*>(cbdata));
        }
        break;
      case CUPTI_CB_DOMAIN_STATE:
        if (cbid == CUPTI_CBID_STATE_FATAL_ERROR) {
          const auto* state = static_cast<const CUpti_StateData*>(cbdata);
          const char* message = state->notification.message;
          Log(LogSeverity::kError, "CUPTI fatal error (%s): %s; tracing stops here",
              CuptiErrorString(state->notification.result),
              message != nullptr ? message : "no message");
          g_cupti_fatal.store(true);  // CUPTI has finalized itself; no more CUPTI calls
          g_active.store(false);
          DisarmApiFastPath();
        }
        break;
      default:
        break;
    }
  } catch (...) {
  }
  t_in_callback = false;
}

// ---- exit ----

// Flushes CUPTI, drains kp's queue, writes the footer and marks the manifest entry ended.
// Caller holds g_shutdown_mutex. `on_signal`: a termination signal's finish (bounded waits).
void FinishTrace(const std::string& reason, bool on_signal) {
  if (g_state == nullptr || g_in_fork_child.load() || g_exit_done.load()) return;
  const bool cupti_ok = CuptiUsable();
  Detach().Cancel(cupti_ok);  // a detach not done yet: CUPTI stays, and is flushed below
  if (cupti_ok && g_state->capture) g_state->capture->Finish();
  if (cupti_ok && !Detach().detached()) {
    if (g_state->collector) g_state->collector->Shutdown();
    if (g_state->pc_sampler) g_state->pc_sampler->Shutdown();
    if (g_state->pm_sampling) {
      if (on_signal) {
        g_state->pm_sampling->Shutdown(kSignalPmSamplingWait);
      } else {
        g_state->pm_sampling->Shutdown();
      }
    }
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  g_active.store(false);
  DisarmApiFastPath();
  g_state->thread->Stop(cupti_ok ? reason : "cupti fatal error");
  g_exit_done.store(true);
  FileChunkWriter& writer = *g_state->writer;
  writer.MarkEnded(cupti_ok ? reason : "cupti fatal error");
  const EncoderStats& stats = g_state->encoder->stats();
  const auto written = static_cast<unsigned long long>(stats.records_written);
  const char* at = reason == "exit" ? "" : " at ";
  const char* why = reason == "exit" ? "" : reason.c_str();
  if (stats.write_errors != 0 && (written == 0 || writer.bytes_written() == 0)) {
    // After a write failure (a full disk, a path that could not be claimed) the line never
    // claims what could not be written: chunks held before the file existed count as records
    // written by the encoder but never reached the disk.
    Log(LogSeverity::kError, "nothing could be written to %s (see the error above)%s%s",
        writer.path().c_str(), at, why);
  } else if (stats.write_errors != 0) {
    Log(LogSeverity::kError,
        "%s is incomplete: %llu records (%s) written before writing failed; later records are "
        "lost%s%s",
        writer.path().c_str(), written, HumanBytes(writer.bytes_written()).c_str(), at, why);
  } else if (!writer.created()) {
    Log(LogSeverity::kDebug, "this process created no CUDA context; no trace written");
  } else {
    Log(LogSeverity::kInfo, "wrote %s (%llu records, %s)%s%s", writer.path().c_str(), written,
        HumanBytes(writer.bytes_written()).c_str(), at, why);
  }
}

void AtExit() {
  try {
    // A termination signal arriving from here on waits for this finish (bounded), then ends the
    // process with its own status (termination_signals.h). When a signal's finish is already
    // running, the lock below waits for it and FinishTrace finds the trace finished.
    const bool exit_finishes = BeginExitFinish();
    if (g_state != nullptr && !g_in_fork_child.load() && !g_exit_done.load()) {
      std::lock_guard<std::mutex> lock(g_shutdown_mutex);
      FinishTrace("exit", /*on_signal=*/false);
    }
    if (exit_finishes) EndExitFinish();
  } catch (...) {
  }
}

// On kp's signal thread (termination_signals.h). The signal may have interrupted a thread that
// holds g_shutdown_mutex (an exit finish or the detach in progress): try for a bounded time only.
void FinishOnSignal(int signo) {
  try {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(kSignalLockWaitMs);
    std::unique_lock<std::mutex> lock(g_shutdown_mutex, std::defer_lock);
    while (!lock.try_lock()) {
      if (Clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FinishTrace(std::string("signal ") + TerminationSignalName(signo), /*on_signal=*/true);
  } catch (...) {
  }
}

// ---- set-up ----

uint64_t TraceNowNs();

// Capture windows switch tracing off again through the same function: `on` false disables.
thread_local bool t_enabling = true;

// Whether the kind is now as asked.
bool EnableKind(CUpti_ActivityKind kind, const char* what) {
  CUptiResult result = t_enabling ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind);
  if (result == CUPTI_SUCCESS) return true;
  if (result == CUPTI_ERROR_NOT_COMPATIBLE) {
    Log(LogSeverity::kWarning,
        "%s records are not compatible with the other kinds enabled; they are off (drop them "
        "from KP_ACTIVITIES to silence this)",
        what);
  } else {
    Log(LogSeverity::kError, "cannot %s %s records: %s", t_enabling ? "enable" : "disable", what,
        CuptiErrorString(result));
  }
  return false;
}

void EnableCopyKinds(const Config& c) {
  if (c.memcpy) {
    EnableKind(CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy");
    EnableKind(CUPTI_ACTIVITY_KIND_MEMCPY2, "peer memcpy");
  }
  if (c.memset) EnableKind(CUPTI_ACTIVITY_KIND_MEMSET, "memset");
}

// Device and context records describe the run, not a window: enabled (and the current ones
// dumped) once, they stay on, so every capture window does not repeat them.
void DumpDevicesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    cuptiActivityEnableAndDump(CUPTI_ACTIVITY_KIND_DEVICE);
    cuptiActivityEnableAndDump(CUPTI_ACTIVITY_KIND_CONTEXT);
  });
}

// Whether the activity kinds are on (false outside a capture window), and whether the program
// has made its first copy: lazily enabled copy kinds follow the windows once it has.
std::atomic<bool> g_activities_on{false};
std::atomic<bool> g_copy_seen{false};

// From the ENTER callback of the program's first call that may copy or set memory. Outside a
// capture window the kinds wait for the window's opening (EnableActivities).
void EnableCopyKindsAtFirstCopy() {
  g_copy_seen.store(true);
  if (g_state != nullptr && g_activities_on.load()) EnableCopyKinds(g_state->config);
}

// Capture windows: the recorded API calls' callbacks are on only inside windows (the metrics
// collector shares the launch cbids' callbacks, so with metrics they stay on).
void SwitchApiCallbacksWithWindow(bool on) {
  if (g_state->api_calls != nullptr && !g_state->collector) {
    g_state->api_calls->SetCallbacksEnabled(g_state->subscriber, on);
  }
}

// The configured kinds on (or, `on` false, off again at a capture window's end).
void EnableActivities(const Config& c, bool on = true) {
  t_enabling = on;
  g_activities_on.store(on);
  if (g_state != nullptr && g_state->api_calls != nullptr) {
    if (g_state->capture) SwitchApiCallbacksWithWindow(on);
    g_state->api_calls->SetRecording(on, on ? TraceNowNs() : 0);
  }
  if (g_state != nullptr && g_state->kernel_records) g_state->kernel_records->SetWindow(on);
  if (!on || !CopyKindsAtFirstCopy(c) || g_copy_seen.load()) EnableCopyKinds(c);
  if (c.api && c.api_mode == ApiMode::kAll) {
    EnableKind(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime API");
    EnableKind(CUPTI_ACTIVITY_KIND_DRIVER, "driver API");
  } else if (c.api && c.api_mode == ApiMode::kLaunchActivity) {
    // Per-cbid enables only: enabling the RUNTIME/DRIVER kind afterwards would override them.
    for (CUpti_CallbackId cbid : SelectLaunchRelatedCbids(CUPTI_CB_DOMAIN_RUNTIME_API)) {
      cuptiActivityEnableRuntimeApi(cbid, on ? 1 : 0);
    }
    for (CUpti_CallbackId cbid : SelectLaunchRelatedCbids(CUPTI_CB_DOMAIN_DRIVER_API)) {
      cuptiActivityEnableDriverApi(cbid, on ? 1 : 0);
    }
  }
  if (c.nvtx) {
    EnableKind(CUPTI_ACTIVITY_KIND_MARKER, "NVTX marker");
    EnableKind(CUPTI_ACTIVITY_KIND_MARKER_DATA, "NVTX marker data");
    EnableKind(CUPTI_ACTIVITY_KIND_NAME, "NVTX name");
  }
  if (c.sync) EnableKind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization");
  if (c.overhead) EnableKind(CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead");
  if (c.graph) EnableKind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, "graph");
  t_enabling = true;
  if (on) DumpDevicesOnce();
}

// No runtime-API callback unless something asks for one (KP_API=launch-runtime, metrics, the
// cudaProfilerStart trigger): a bare subscriber with one runtime cbid on, a call the program
// never makes, read more on PyTorch's tiny ops (bench/results/paired_cost_h200.md, run 22; not
// settled). The defaults' API-domain callbacks are the benchmark floor's.
void EnableCallbacks(CUpti_SubscriberHandle sub, MetricsCollector* collector) {
  if (g_state->api_calls != nullptr) g_state->api_calls->EnableCallbacks(sub);
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
  if (collector == nullptr) return;
  if (collector->wants_nvtx_callbacks()) cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_NVTX);
  for (CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    for (CUpti_CallbackId cbid : MetricsCollector::CaptureCbids(domain))
      cuptiEnableCallback(1, sub, domain, cbid);
  }
  if (collector->wants_launch_callbacks()) {
    static constexpr CUpti_CallbackId kRuntimeLaunches[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
        CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    };
    static constexpr CUpti_CallbackId kDriverLaunches[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
        // Not measured; kernel mode keeps kernel records on while they submit kernels.
        CUPTI_DRIVER_TRACE_CBID_cuLaunch,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    };
    for (CUpti_CallbackId cbid : kRuntimeLaunches) {
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, cbid);
    }
    for (CUpti_CallbackId cbid : kDriverLaunches) {
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
    }
  }
}

uint64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

uint64_t CuptiNowNs() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

// CUPTI's clock minus CLOCK_REALTIME, now.
int64_t CuptiClockOffsetNs() {
  return static_cast<int64_t>(CuptiNowNs()) - static_cast<int64_t>(ClockNs(CLOCK_REALTIME));
}

// CUPTI's clock; once CUPTI is being detached, CLOCK_REALTIME plus their offset read just before.
uint64_t TraceNowNs() {
  if (Detach().quiet()) {
    return static_cast<uint64_t>(static_cast<int64_t>(ClockNs(CLOCK_REALTIME)) +
                                 Detach().clock_offset_ns());
  }
  return CuptiNowNs();
}

int CaptureTriggerSchemaValue(CaptureTrigger trigger) {
  switch (trigger) {
    case CaptureTrigger::kTime:
      return schema::CaptureWindowTrigger::kTime;
    case CaptureTrigger::kNvtxRange:
      return schema::CaptureWindowTrigger::kNvtxRange;
    case CaptureTrigger::kCudaProfilerApi:
      return schema::CaptureWindowTrigger::kCudaProfilerApi;
    case CaptureTrigger::kSchedule:
      return schema::CaptureWindowTrigger::kSchedule;
    case CaptureTrigger::kSignal:
      return schema::CaptureWindowTrigger::kOnDemand;
    case CaptureTrigger::kWholeRun:
      break;
  }
  return schema::CaptureWindowTrigger::kUnspecified;
}

// No capture window can open any more: detach CUPTI (cupti_detach.h), unless a collector that
// holds CUPTI's profiler (metrics, PC or PM sampling) runs on.
void DetachAfterLastWindow() {
  if (g_state->collector || g_state->pc_sampler || g_state->pm_sampling) return;
  DisarmApiFastPath();  // the detach happens in a driver callback (CuptiDetach::OnCallback)
  CuptiDetach::Hooks hooks;
  hooks.flush = [](bool forced) {
    cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  };
  hooks.clock_offset = &CuptiClockOffsetNs;
  hooks.driver_callbacks = [](bool on) {
    cuptiEnableDomain(on ? 1 : 0, g_state->subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  };
  hooks.finalize = [] { return cuptiFinalize(); };
  hooks.shutdown_mutex = &g_shutdown_mutex;
  hooks.exit_done = &g_exit_done;
  hooks.progress = [] {
    const ActivityDecoder::WorkCounts c = g_state->decoder->work_counts();
    return CuptiDetach::Progress{c.launch_calls, c.kernels, c.gpu_records};
  };
  hooks.drain_encoder = [] {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> ran = done->get_future();
    g_state->thread->Post([done](TraceEncoder&) { done->set_value(); });
    return ran.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  };
  Detach().Start(std::move(hooks));
}

// Capture windows: the controller switches the same kinds EnableActivities enables.
void StartCapture(const CapturePlan& plan) {
  CaptureTracerOps ops;
  ops.set_tracing = [](bool on) {
    if (!CuptiUsable() || g_exit_done.load() || Detach().quiet()) return;
    const uint64_t begin = ClockNs(CLOCK_MONOTONIC);
    EnableActivities(g_state->config, on);
    Log(LogSeverity::kDebug, "capture edge: tracing %s in %.3f ms", on ? "on" : "off",
        (ClockNs(CLOCK_MONOTONIC) - begin) / 1e6);
  };
  ops.now_ns = &TraceNowNs;
  ops.window_closed = [](const CaptureWindowInfo& w, const std::string& label) {
    ActivityDecoder* decoder = g_state->decoder;
    g_state->thread->Post([w, label, decoder](TraceEncoder& encoder) {
      decoder->AddCaptureWindow(w.start_ns, w.end_ns);
      // The window's finished work reaches the queue now; work still running comes with a
      // later flush (its records were requested at launch).
      if (CuptiAlive()) cuptiActivityFlushAll(0);
      CaptureWindowRecord r;
      r.index = w.index;
      r.trigger = static_cast<uint32_t>(CaptureTriggerSchemaValue(w.trigger));
      r.start_ns = w.start_ns;
      r.end_ns = w.end_ns;
      r.range = label;
      r.first_step = w.first_step;
      r.last_step = w.last_step;
      r.end_reason = w.end_reason;
      encoder.AddCaptureWindow(r);
    });
  };
  ops.discard_begin = [](uint64_t begin) {
    ActivityDecoder* decoder = g_state->decoder;
    g_state->thread->Post([decoder, begin](TraceEncoder&) { decoder->BeginDiscard(begin); });
  };
  ops.discard_end = [](uint64_t end) {
    ActivityDecoder* decoder = g_state->decoder;
    g_state->thread->Post([decoder, end](TraceEncoder&) { decoder->EndDiscard(end); });
  };
  ops.keep_trigger_callbacks = g_state->collector != nullptr;
  ops.no_more_windows = &DetachAfterLastWindow;
  DumpDevicesOnce();  // the trace names its devices even when no window ever opens
  SwitchApiCallbacksWithWindow(false);  // until a window opens
  g_state->capture = std::make_unique<CaptureController>(plan, std::move(ops));
  if (const Status started = g_state->capture->Start(g_state->subscriber); !started.ok()) {
    Log(LogSeverity::kError, "%s; capture windows are off, the whole run is traced",
        started.message().c_str());
    EnableActivities(g_state->config);  // the controller still set: the API callbacks back on
    // Never destroyed: the control thread, once started, keeps a pointer to it.
    static_cast<void>(g_state->capture.release());
  }
}

void DoToolInit(InjectionMode mode) {
  auto state = std::make_unique<TracerState>();
  std::vector<ConfigError> errors;
  state->config = ParseConfig([](const char* name) { return std::getenv(name); }, &errors);
  SetLogLevel(state->config.log);
  bool profiler_off = false;
  for (const ConfigError& error : errors) {
    Log(LogSeverity::kError, "%s", error.message.c_str());
    if (error.scope == ConfigErrorScope::kProfiler) profiler_off = true;
    if (error.scope == ConfigErrorScope::kMetrics) state->config.metrics.clear();
  }
  if (profiler_off) return;  // the error line already says kp is off
  Config& config = state->config;
  if (config.disabled) return;
  for (const std::string& warning : UnknownKpVariables(environ)) {
    Log(LogSeverity::kWarning, "%s", warning.c_str());
  }

  pthread_atfork(nullptr, nullptr, &OnForkChild);

  const uint32_t pid = static_cast<uint32_t>(getpid());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const int rank = RankFromEnv([](const char* name) { return std::getenv(name); });
  const uint64_t start_unix_ns = ClockNs(CLOCK_REALTIME);
  const uint64_t start_monotonic_ns = ClockNs(CLOCK_MONOTONIC);
  uint64_t start_trace_ns = 0;
  cuptiGetTimestamp(&start_trace_ns);
  auto getenv_fn = [](const char* name) { return std::getenv(name); };
  const std::string run_id = RunIdFromEnv(config, getenv_fn);

  StatusOr<std::string> output_path =
      ExpandOutputPattern(config.output_pattern, pid, host, rank, start_unix_ns);
  if (!output_path.ok()) {
    Log(LogSeverity::kError, "%s; kp is off for this process",
        output_path.status().message().c_str());
    return;
  }
  state->output_path = std::move(output_path.value());

  // Subscribe first: it is also the "am I the only CUDA profiler" check (docs/cupti.md).
  char old_subscriber[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "kp";
  params.oldSubscriberName = old_subscriber;
  params.oldSubscriberSize = sizeof(old_subscriber) - 1;
  CUptiResult result = cuptiSubscribe_v2(&state->subscriber, &OnCallback, nullptr, &params);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    Log(LogSeverity::kError, "another CUDA profiler (%s) is attached; kp is off for this process",
        old_subscriber[0] != '\0' ? old_subscriber : "unknown");
    return;
  }
  if (result != CUPTI_SUCCESS) {
    Log(LogSeverity::kError, "cannot start CUPTI (%s); kp is off for this process",
        CuptiErrorString(result));
    return;
  }

  // The file is claimed (trace_file_claim.h) and created only once the process has a CUDA
  // context; until then chunks wait in memory.
  DeferredFileOptions file_options;
  file_options.claim.requested = state->output_path;
  file_options.claim.run_id = run_id;
  file_options.claim.rank = rank;
  file_options.claim.host = host;
  file_options.claim.pid = pid;
  file_options.create_when = &g_context_seen;
  ManifestEntry& entry = file_options.entry;
  entry.run_id = run_id;
  entry.pid = pid;
  entry.ppid = static_cast<uint32_t>(getppid());
  entry.host = host;
  entry.rank = rank;
  entry.local_rank = LocalRankFromEnv(getenv_fn);
  entry.world_size = WorldSizeFromEnv(getenv_fn);
  entry.command = ReadCommandLine();
  entry.start_unix_ns = start_unix_ns;
  state->writer = FileChunkWriter::CreateDeferred(std::move(file_options), config.zstd_level);

  cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  size_t pool_limit = kDeviceBufferPoolLimit;
  size_t attr_size = sizeof(pool_limit);
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &attr_size, &pool_limit);

  state->encoder = new TraceEncoder(state->writer, TraceEncoder::Options());
  HeaderInfo header;
  header.kp_version = KP_VERSION;
  header.pid = pid;
  header.ppid = static_cast<uint32_t>(getppid());
  header.hostname = host;
  header.command_line = ReadCommandLine();
  header.rank = rank;
  header.local_rank = LocalRankFromEnv(getenv_fn);
  header.world_size = WorldSizeFromEnv(getenv_fn);
  header.start_time_unix_ns = start_unix_ns;
  header.start_time_trace_ns = start_trace_ns;
  header.clock = "CLOCK_REALTIME (cupti default)";
  header.config = DescribeConfig(config);
  uint32_t cupti_version = 0;
  cuptiGetVersion(&cupti_version);
  header.cupti_api_version = cupti_version;
  header.cuda_driver_version = CudaDriverVersion();
  header.driver_version = ReadDriverVersion();
  header.injection_mode = ModeName(mode);
  header.output_path = state->output_path;
  header.run_id = run_id;
  header.start_time_monotonic_ns = start_monotonic_ns;
  header.boot_id = ReadBootId();
  state->encoder->SetHeader(header);

  state->pool = new BufferPool(kBufferBytes, static_cast<size_t>(config.buffer_mb) << 20);

  // Capture windows switch CUPTI itself on and off (inject/capture): the decoder filters
  // nothing by time, only a schedule's warm-up.
  ActivityDecoder::Options window;
  const CapturePlan capture_plan = CapturePlanOf(config);
  if (capture_plan.trigger != CaptureTrigger::kWholeRun &&
      capture_plan.trigger != CaptureTrigger::kTime && config.delay_s > 0) {
    Log(LogSeverity::kWarning, "KP_DELAY is ignored with a capture trigger (%s)",
        CaptureTriggerName(capture_plan.trigger));
  }

  // Notices (LogNotice) go straight into the encoder while only this thread runs, then
  // through the encoder thread once it exists.
  TraceEncoder* encoder = state->encoder;
  SetNoticeSink(
      [encoder](LogSeverity severity, std::string_view component, const std::string& text) {
        uint64_t t = 0;
        cuptiGetTimestamp(&t);
        encoder->AddNotice(NoticeSeverityOf(severity), component, text, t);
      });

  EncoderThread* thread_ptr = nullptr;
  EncoderThread** thread_slot = &state->thread;
  if (!config.metrics.empty()) {
    EncoderPost post = [thread_slot](std::function<void(TraceEncoder&)> task) {
      if (*thread_slot != nullptr) (*thread_slot)->Post(std::move(task));
    };
    StatusOr<std::unique_ptr<MetricsCollector>> collector = MetricsCollector::Create(config, post);
    if (collector.ok()) {
      state->collector = std::move(collector.value());
    } else {
      LogNotice(LogSeverity::kError, "metrics", collector.status().message(),
                "metrics are off, tracing goes on");
    }
  }
  state->pm_sampling = PmSampling::Create(config, [thread_slot](auto task) {
    if (*thread_slot != nullptr) (*thread_slot)->Post(std::move(task));
  });
  state->decoder = new ActivityDecoder(state->encoder, state->collector.get(), window);
  if (config.kernel) {
    state->kernel_records = std::make_unique<KernelRecordSwitch>([](bool on) {
      // No CUPTI call once tracing has finished, after a fatal error, or while detaching (a
      // measurement may still be ending then).
      if (!CuptiUsable() || g_exit_done.load() || Detach().quiet()) return false;
      const bool enabling = t_enabling;
      t_enabling = on;
      const bool done =
          EnableKind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel");  // never KERNEL
      t_enabling = enabling;
      return done;
    });
    if (state->collector) state->collector->SetKernelRecords(state->kernel_records.get());
    if (state->collector) {
      ActivityDecoder* decoder = state->decoder;
      state->collector->SetKernelRecordSink(
          [decoder](TraceEncoder&, const KernelRecord& k) { decoder->AddKernelRecord(k); });
    }
  }

  EncoderThread::Options thread_options;
  thread_options.flush_ms = config.flush_ms;
  thread_options.dump_dir = config.dump_buffers_dir;
  thread_options.pid = pid;
  thread_options.cupti_usable = &CuptiAlive;
  state->api_calls = MakeApiCallRecorder(config, &EnableCopyKindsAtFirstCopy);
  if (state->api_calls != nullptr && capture_plan.trigger != CaptureTrigger::kWholeRun) {
    state->api_calls->SetRecording(false);  // until the first window opens
  }
  if (ApiCallRecorder* recorder = state->api_calls) {
    thread_options.poll = [recorder, encoder](ActivityDecoder& decoder) {
      const size_t drained = recorder->Drain(&decoder);
      encoder->stats().api_calls_dropped = recorder->dropped();
      return drained;
    };
  }
  thread_ptr = new EncoderThread(state->encoder, state->decoder, state->pool, thread_options);
  if (const Status started = thread_ptr->Start(); !started.ok()) {
    Log(LogSeverity::kError, "%s; kp is off for this process", started.message().c_str());
    SetNoticeSink(nullptr);
    cuptiUnsubscribe(state->subscriber);
    return;  // the file keeps its magic only; nothing else was enabled
  }
  state->thread = thread_ptr;
  SetNoticeSink(
      [thread_ptr](LogSeverity severity, std::string_view component, const std::string& text) {
        // No CUPTI call after a fatal error nor in a forked child (TraceNowNs needs none while
        // CUPTI detaches).
        const uint64_t t = g_cupti_fatal.load() || g_in_fork_child.load() ? 0 : TraceNowNs();
        thread_ptr->Post([severity, c = std::string(component), text, t](TraceEncoder& enc) {
          enc.AddNotice(NoticeSeverityOf(severity), c, text, t);
        });
      });

  state->pc_sampler = PcSampler::Create(
      config.pc_sampling, !config.metrics.empty(),
      [thread_ptr](std::function<void(TraceEncoder&)> task) { thread_ptr->Post(std::move(task)); });
  g_state = state.release();
  g_active.store(true, std::memory_order_release);

  result = cuptiActivityRegisterCallbacks(&BufferRequested, &BufferCompleted);
  if (result != CUPTI_SUCCESS) {
    Log(LogSeverity::kError, "cannot register CUPTI buffers (%s); kp is off for this process",
        CuptiErrorString(result));
    g_active.store(false);
    SetNoticeSink(nullptr);
    g_state->thread->Stop("cupti error");
    cuptiUnsubscribe(g_state->subscriber);
    return;
  }
  EnableCallbacks(g_state->subscriber, g_state->collector.get());
  if (g_state->pc_sampler) g_state->pc_sampler->EnableCallbacks(g_state->subscriber);
  // API-domain callbacks only record (OnCallback's other readers of them: the metrics collector
  // and the cudaProfilerStart trigger; the detach disarms it when it starts). Armed before any
  // capture window can end.
  if (g_state->api_calls != nullptr && !g_state->collector &&
      capture_plan.trigger != CaptureTrigger::kCudaProfilerApi && CuptiUsable()) {
    g_api_fast.recorder.store(g_state->api_calls, std::memory_order_release);
  }
  if (capture_plan.trigger == CaptureTrigger::kWholeRun) {
    EnableActivities(g_state->config);
  } else {
    StartCapture(capture_plan);
  }
  std::atexit(&AtExit);
  if (const Status signals =
          InstallTerminationSignals(&FinishOnSignal, kSignalLockWaitMs + kSignalFinishTimeoutMs);
      !signals.ok()) {
    Log(LogSeverity::kWarning, "%s; a signal that ends the process leaves no footer",
        signals.message().c_str());
  }
  Log(LogSeverity::kDebug, "tracing for %s (%s mode)", g_state->output_path.c_str(),
      ModeName(mode));
}

}  // namespace

void ToolInit(InjectionMode mode) {
  try {
    if (g_in_fork_child.load()) return;
    std::call_once(g_init_once, [mode] {
      try {
        DoToolInit(mode);
      } catch (const std::exception& e) {
        Log(LogSeverity::kError, "internal error at start-up (%s); kp is off", e.what());
      } catch (...) {
        Log(LogSeverity::kError, "internal error at start-up; kp is off");
      }
    });
  } catch (...) {
  }
}

}  // namespace kp
