// cupti_floor.cc: libkpfloor.so, the overhead floor of the benchmark suite.
//
// The least any CUPTI tracer pays for a given set of records: a bare injection subscriber that
// enables exactly the kinds and callbacks named in KPFLOOR_KINDS, hands out 8 MB buffers (kp's
// size), counts the records of each completed buffer by kind and frees it. No decoding, no I/O,
// no thread of its own. kp's added cost is judged against this one's with the same kinds
// (bench/run_bench.py, bench/attribution.sh).
//
// KPFLOOR_KINDS: comma list of
//   kernel, memcpy (MEMCPY + MEMCPY2), memset, sync, overhead, nvtx (MARKER, MARKER_DATA, NAME;
//   NVTX_INJECTION64_PATH must name this library), graph,
//   runtime, driver (every call as RUNTIME / DRIVER activity),
//   api_launch (per-cbid RUNTIME/DRIVER activity on kp's launch-related selection, KP_API=launch),
//   cb_launch (callbacks on the kernel-launch cbids), cb_launch_runtime / cb_launch_driver (the
//   same in the runtime or the driver domain only), cb_copy (callbacks on memcpy/memset cbids),
//   cb_sync (callbacks on the synchronization cbids), cb_api (callbacks on kp's whole
//   launch-related selection), cb_nvtx (the NVTX callback domain), cb_reset (the runtime
//   domain's cudaDeviceReset callback alone: what one enabled runtime cbid costs the other calls),
//   cb_resource (kp's set-up callbacks, on for the whole run as kp has them: the resource
//   domain's CONTEXT_CREATED and CONTEXT_DESTROY_STARTING, the state domain's FATAL_ERROR),
//   cb_trigger (with KPFLOOR_WINDOW: the 7 NVTX push/pop/domain-create callbacks kp's capture
//   trigger takes, instead of nvtxRangePushA alone), dev_ctx (DEVICE and CONTEXT records
//   enabled and dumped when the kinds first go on, then left on, as kp does),
//   lazy_copy (memcpy/memset kinds enabled at the first copy/memset API callback; implies
//   callbacks on those cbids), latency (cuptiActivityEnableLatencyTimestamps: kernel records
//   carry `queued` and `submitted`; on from start-up, windows or not),
//   driver_only (the callbacks of cb_copy, cb_sync, cb_api and lazy_copy on driver cbids only,
//   as kp's KP_API=launch takes them).
// Each callback reads CUPTI's timestamp at entry and exit, as a tracer keeping its own API
// timing must. Default: kernel,memcpy (KPFLOOR_MEMCPY=0: kernel only).
//
// KPFLOOR_WINDOW=FIRST,COUNT: the floor of a capture window (kp's --capture-schedule). Until the
// FIRST-th nvtxRangePushA("step") (counting from 0) only that push's callback is on; the kinds and
// callbacks above are on from then until the (FIRST+COUNT)-th push, then off again, and so is the
// push callback (kp's trigger also stops once its window is done). NVTX_INJECTION64_PATH must
// name this library. KPFLOOR_DETACH=1: at the window's end the floor also force-flushes and calls
// cuptiFinalize (in that NVTX callback, without waiting for kernels still running: the floor
// counts records, it does not keep them), so CUPTI detaches from the process.
// KPFLOOR_WINDOW=FIRST,COUNT,PERIOD: a window of COUNT steps every PERIOD steps from step FIRST
// on, until the end (kp's --capture-schedule step:WAIT,0,ACTIVE,0 is FIRST=WAIT, COUNT=ACTIVE,
// PERIOD=WAIT+ACTIVE); the push callback stays on and KPFLOOR_DETACH does not apply.
//
// Loaded through CUDA_INJECTION64_PATH; NVTX_INJECTION64_PATH should name this library too: its
// InitializeInjectionNvtx2 forwards to the libcupti it is bound to, the copy in the process
// (PyTorch loads pip's libcupti; NVTX pointed at another copy reaches a second CUPTI instance
// that no subscriber of ours sees). At exit it force-flushes and prints one line to stderr:
// `kpfloor: {"records":N,"kernels":K,"memcpy":M,"dropped":D,"kinds":{...},"callbacks":C,
// "api_top":{...}}` (the drivers parse it). api_top names the most frequent API records.
#include "bench/floor/cupti_floor.h"

#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "inject/capture/nvtx_trigger_cbids.h"
#include "inject/cupti/api_selection.h"
#include "inject/cupti/nvtx_forward.h"

namespace {

constexpr size_t kBufferBytes = 8u << 20;  // kp's (inject/cupti/tracer.cc)
constexpr size_t kAlignment = 8;           // ACTIVITY_RECORD_ALIGNMENT
constexpr size_t kMaxKind = 64;
constexpr size_t kMaxCbid = 1024;

std::atomic<uint64_t> g_records{0};
std::atomic<uint64_t> g_kind_records[kMaxKind];
std::atomic<uint64_t> g_runtime_cbid[kMaxCbid];
std::atomic<uint64_t> g_driver_cbid[kMaxCbid];
std::atomic<uint64_t> g_callbacks{0};
std::atomic<uint64_t> g_queued{0};  // kernel records with a `queued` timestamp
std::atomic<uint64_t> g_buffers_refused{0};
std::atomic<bool> g_copy_kinds_on{false};
std::once_flag g_init_once;
bool g_active = false;
bool g_lazy_copy = false;
// driver_only: the domain cb_copy, cb_sync, cb_api and lazy_copy enable callbacks in (INVALID:
// runtime and driver).
CUpti_CallbackDomain g_callback_domain = CUPTI_CB_DOMAIN_INVALID;
bool g_detached = false;
// KPFLOOR_WINDOW: the window's first and end step (-1: no window), its period (0: one window);
// the steps pushed so far.
long g_window_first = -1;
long g_window_end = -1;
long g_window_period = 0;  // 0: one window
std::atomic<long> g_steps_pushed{0};
std::string g_kinds;
CUpti_SubscriberHandle g_subscriber = nullptr;
thread_local uint64_t t_enter_ns = 0;
thread_local uint64_t t_api_ns = 0;  // per-thread sum, so the timestamps are not optimized out

void CUPTIAPI RequestBuffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* memory = std::aligned_alloc(kAlignment, kBufferBytes);
  if (memory == nullptr) g_buffers_refused.fetch_add(1, std::memory_order_relaxed);
  *buffer = static_cast<uint8_t*>(memory);
  *size = memory == nullptr ? 0 : kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI CompleteBuffer(CUcontext /*context*/, uint32_t /*stream_id*/, uint8_t* buffer,
                             size_t /*size*/, size_t valid_size) {
  uint64_t records = 0;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    ++records;
    const size_t kind = static_cast<size_t>(record->kind);
    if (kind < kMaxKind) g_kind_records[kind].fetch_add(1, std::memory_order_relaxed);
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        reinterpret_cast<const CUpti_ActivityKernel10*>(record)->queued != 0) {
      g_queued.fetch_add(1, std::memory_order_relaxed);
    }
    if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME || record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      auto& table = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? g_runtime_cbid : g_driver_cbid;
      if (api->cbid < kMaxCbid) table[api->cbid].fetch_add(1, std::memory_order_relaxed);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_OVERHEAD) {
      // The header makes the client free COMMAND_BUFFER_FULL data.
      auto* overhead = reinterpret_cast<CUpti_ActivityOverhead3*>(record);
      if (overhead->overheadKind == CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL) {
        std::free(overhead->overheadData);
      }
    }
  }
  g_records.fetch_add(records, std::memory_order_relaxed);
  std::free(buffer);
}

const char* KindName(size_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "kernel";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "memcpy";
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return "memcpy2";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "memset";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "runtime";
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return "driver";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return "sync";
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return "overhead";
    case CUPTI_ACTIVITY_KIND_MARKER:
      return "marker";
    case CUPTI_ACTIVITY_KIND_MARKER_DATA:
      return "marker_data";
    case CUPTI_ACTIVITY_KIND_NAME:
      return "name";
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
      return "graph";
    default:
      return nullptr;
  }
}

// The ten most frequent API records, "runtime:cudaLaunchKernel_v7000":N.
std::string TopApis() {
  struct Entry {
    uint64_t count;
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < kMaxCbid; ++i) {
    if (uint64_t n = g_runtime_cbid[i].load()) {
      entries.push_back({n, CUPTI_CB_DOMAIN_RUNTIME_API, static_cast<CUpti_CallbackId>(i)});
    }
    if (uint64_t n = g_driver_cbid[i].load()) {
      entries.push_back({n, CUPTI_CB_DOMAIN_DRIVER_API, static_cast<CUpti_CallbackId>(i)});
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.count > b.count; });
  if (entries.size() > 10) entries.resize(10);
  std::string text = "{";
  for (const Entry& e : entries) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(e.domain, e.cbid, &name) != CUPTI_SUCCESS || name == nullptr) {
      name = "?";
    }
    if (text.size() > 1) text += ",";
    text += "\"";
    text += e.domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime:" : "driver:";
    text += name;
    text += "\":" + std::to_string(e.count);
  }
  return text + "}";
}

void FlushAtExit() {
  if (!g_active) return;
  size_t dropped = 0;
  if (!g_detached) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
  }
  std::string kinds = "{";
  for (size_t k = 0; k < kMaxKind; ++k) {
    const uint64_t n = g_kind_records[k].load();
    if (n == 0) continue;
    const char* name = KindName(k);
    if (kinds.size() > 1) kinds += ",";
    kinds += "\"" + (name != nullptr ? std::string(name) : "kind" + std::to_string(k)) +
             "\":" + std::to_string(n);
  }
  kinds += "}";
  std::fprintf(
      stderr,
      "kpfloor: {\"records\":%llu,\"kernels\":%llu,\"memcpy\":%llu,\"dropped\":%llu,"
      "\"buffers_refused\":%llu,\"callbacks\":%llu,\"queued\":%llu,\"kinds\":%s,"
      "\"api_top\":%s}\n",
      static_cast<unsigned long long>(g_records.load()),
      static_cast<unsigned long long>(g_kind_records[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL].load()),
      static_cast<unsigned long long>(g_kind_records[CUPTI_ACTIVITY_KIND_MEMCPY].load()),
      static_cast<unsigned long long>(dropped),
      static_cast<unsigned long long>(g_buffers_refused.load()),
      static_cast<unsigned long long>(g_callbacks.load()),
      static_cast<unsigned long long>(g_queued.load()), kinds.c_str(),
      g_detached ? "{}" : TopApis().c_str());
}

bool Check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "kpfloor: %s failed: %s\n", what, text != nullptr ? text : "unknown error");
  return false;
}

void EnableCopyKinds() {
  Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable MEMCPY");
  Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2), "enable MEMCPY2");
  Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable MEMSET");
}

bool StartsWith(const char* name, std::string_view prefix) {
  return name != nullptr && std::string_view(name).substr(0, prefix.size()) == prefix;
}

bool IsCopyName(const char* name) { return name != nullptr && kp::MayCopyApiName(name); }

void OnStep();  // KPFLOOR_WINDOW: a "step" range was pushed

}  // namespace

// Declared in cupti_floor.h so that bench/callback_cost.cc can time it beside kp's.
void CUPTIAPI kpfloor::OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                  const void* cbdata) {
  g_callbacks.fetch_add(1, std::memory_order_relaxed);
  if (domain == CUPTI_CB_DOMAIN_NVTX && cbid == CUPTI_CBID_NVTX_nvtxRangePushA &&
      g_window_first >= 0) {
    const auto* nvtx = static_cast<const CUpti_NvtxData*>(cbdata);
    const auto* params = static_cast<const nvtxRangePushA_params*>(nvtx->functionParams);
    if (params != nullptr && params->message != nullptr &&
        std::strcmp(params->message, "step") == 0) {
      OnStep();
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  uint64_t now = 0;
  cuptiGetTimestamp(&now);
  if (data->callbackSite == CUPTI_API_ENTER) {
    t_enter_ns = now;
    if (g_lazy_copy && !g_copy_kinds_on.load(std::memory_order_relaxed)) {
      const char* name = nullptr;
      cuptiGetCallbackName(domain, cbid, &name);
      if (IsCopyName(name) && !g_copy_kinds_on.exchange(true)) EnableCopyKinds();
    }
  } else {
    t_api_ns += now - t_enter_ns + data->correlationId;
  }
}

namespace {

// Callbacks on the cbids of the runtime and driver domains (or only `only`) whose name is wanted.
void EnableCallbacksWhere(CUpti_SubscriberHandle sub, bool (*wanted)(const char*), bool on,
                          CUpti_CallbackDomain only) {
  const CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API};
  for (CUpti_CallbackDomain domain : domains) {
    if (only != CUPTI_CB_DOMAIN_INVALID && domain != only) continue;
    const CUpti_CallbackId end = domain == CUPTI_CB_DOMAIN_RUNTIME_API
                                     ? static_cast<CUpti_CallbackId>(CUPTI_RUNTIME_TRACE_CBID_SIZE)
                                     : static_cast<CUpti_CallbackId>(CUPTI_DRIVER_TRACE_CBID_SIZE);
    for (CUpti_CallbackId cbid = 1; cbid < end; ++cbid) {
      const char* name = nullptr;
      if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
      if (wanted(name)) cuptiEnableCallback(on ? 1 : 0, sub, domain, cbid);
    }
  }
}

bool IsLaunchName(const char* name) {
  return StartsWith(name, "cudaLaunchKernel") || StartsWith(name, "__cudaLaunchKernel") ||
         StartsWith(name, "cudaLaunchCooperativeKernel") || StartsWith(name, "cudaGraphLaunch") ||
         StartsWith(name, "cuLaunchKernel") || StartsWith(name, "cuLaunchCooperativeKernel") ||
         StartsWith(name, "cuGraphLaunch");
}

bool IsSyncName(const char* name) {
  return StartsWith(name, "cudaDeviceSynchronize") || StartsWith(name, "cudaStreamSynchronize") ||
         StartsWith(name, "cudaEventSynchronize") || StartsWith(name, "cudaStreamWaitEvent") ||
         StartsWith(name, "cuCtxSynchronize") || StartsWith(name, "cuStreamSynchronize") ||
         StartsWith(name, "cuEventSynchronize") || StartsWith(name, "cuStreamWaitEvent");
}

bool IsSelectedName(const char* name) { return kp::IsLaunchRelatedApiName(name); }

bool Has(const std::string& list, const char* word) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (list.compare(start, end - start, word) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Whether the list names a callback word (they all start with "cb_").
bool HasCallbackWord(const std::string& list) {
  return list.compare(0, 3, "cb_") == 0 || list.find(",cb_") != std::string::npos;
}

// cb_launch and its one-domain forms: the domain each takes callbacks in (INVALID: both).
struct LaunchCallbackWord {
  const char* word;
  CUpti_CallbackDomain domain;
};
constexpr LaunchCallbackWord kLaunchCallbackWords[] = {
    {"cb_launch", CUPTI_CB_DOMAIN_INVALID},
    {"cb_launch_runtime", CUPTI_CB_DOMAIN_RUNTIME_API},
    {"cb_launch_driver", CUPTI_CB_DOMAIN_DRIVER_API},
};

// The kinds and callbacks of g_kinds on (or off again at a window's end).
void SwitchKinds(bool on) {
  const uint32_t flag = on ? 1 : 0;
  auto kind = [on](CUpti_ActivityKind k, const char* what) {
    Check(on ? cuptiActivityEnable(k) : cuptiActivityDisable(k), what);
  };
  const std::string& kinds = g_kinds;
  if (g_subscriber != nullptr) {
    for (const LaunchCallbackWord& w : kLaunchCallbackWords) {
      if (Has(kinds, w.word)) EnableCallbacksWhere(g_subscriber, IsLaunchName, on, w.domain);
    }
    if (Has(kinds, "cb_copy") || Has(kinds, "lazy_copy")) {
      EnableCallbacksWhere(g_subscriber, IsCopyName, on, g_callback_domain);
    }
    if (Has(kinds, "cb_sync")) {
      EnableCallbacksWhere(g_subscriber, IsSyncName, on, g_callback_domain);
    }
    if (Has(kinds, "cb_api")) {
      EnableCallbacksWhere(g_subscriber, IsSelectedName, on, g_callback_domain);
    }
    if (Has(kinds, "cb_nvtx")) cuptiEnableDomain(flag, g_subscriber, CUPTI_CB_DOMAIN_NVTX);
    if (Has(kinds, "cb_reset")) {
      cuptiEnableCallback(flag, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                          CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
    }
    g_lazy_copy = Has(kinds, "lazy_copy");
  }
  if (Has(kinds, "kernel")) kind(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "switch CONCURRENT_KERNEL");
  // Off again: also the copy kinds lazy_copy turned on at the first copy call.
  const bool lazily_on = !on && g_copy_kinds_on.exchange(false);
  if (Has(kinds, "memcpy") || lazily_on) {
    kind(CUPTI_ACTIVITY_KIND_MEMCPY, "switch MEMCPY");
    kind(CUPTI_ACTIVITY_KIND_MEMCPY2, "switch MEMCPY2");
  }
  if (Has(kinds, "memset") || lazily_on) kind(CUPTI_ACTIVITY_KIND_MEMSET, "switch MEMSET");
  if (Has(kinds, "runtime")) kind(CUPTI_ACTIVITY_KIND_RUNTIME, "switch RUNTIME");
  if (Has(kinds, "driver")) kind(CUPTI_ACTIVITY_KIND_DRIVER, "switch DRIVER");
  if (Has(kinds, "api_launch")) {
    for (CUpti_CallbackId cbid : kp::SelectLaunchRelatedCbids(CUPTI_CB_DOMAIN_RUNTIME_API)) {
      cuptiActivityEnableRuntimeApi(cbid, flag);
    }
    for (CUpti_CallbackId cbid : kp::SelectLaunchRelatedCbids(CUPTI_CB_DOMAIN_DRIVER_API)) {
      cuptiActivityEnableDriverApi(cbid, flag);
    }
  }
  if (Has(kinds, "nvtx")) {
    kind(CUPTI_ACTIVITY_KIND_MARKER, "switch MARKER");
    kind(CUPTI_ACTIVITY_KIND_MARKER_DATA, "switch MARKER_DATA");
    kind(CUPTI_ACTIVITY_KIND_NAME, "switch NAME");
  }
  if (Has(kinds, "sync")) kind(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "switch SYNCHRONIZATION");
  if (Has(kinds, "overhead")) kind(CUPTI_ACTIVITY_KIND_OVERHEAD, "switch OVERHEAD");
  if (Has(kinds, "graph")) kind(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, "switch GRAPH_TRACE");
  static bool dumped = false;
  if (on && !dumped && Has(kinds, "dev_ctx")) {
    dumped = true;
    Check(cuptiActivityEnableAndDump(CUPTI_ACTIVITY_KIND_DEVICE), "dump DEVICE");
    Check(cuptiActivityEnableAndDump(CUPTI_ACTIVITY_KIND_CONTEXT), "dump CONTEXT");
  }
}

// The NVTX callbacks that open and close windows: nvtxRangePushA alone, or (cb_trigger) the
// 7 that kp's capture trigger takes (kp::kNvtxTriggerCbids).
void EnableTriggerCallbacks(bool on) {
  const uint32_t flag = on ? 1 : 0;
  if (!Has(g_kinds, "cb_trigger")) {
    cuptiEnableCallback(flag, g_subscriber, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA);
    return;
  }
  for (CUpti_CallbackId cbid : kp::kNvtxTriggerCbids) {
    cuptiEnableCallback(flag, g_subscriber, CUPTI_CB_DOMAIN_NVTX, cbid);
  }
}

void OnStep() {
  const long step = g_steps_pushed.fetch_add(1);
  if (g_window_period > 0) {  // repeating windows
    if (step < g_window_first) return;
    const long phase = (step - g_window_first) % g_window_period;
    if (phase == 0) SwitchKinds(true);
    if (phase == g_window_end - g_window_first) SwitchKinds(false);
    return;
  }
  if (step == g_window_first) SwitchKinds(true);
  if (step != g_window_end) return;
  SwitchKinds(false);
  EnableTriggerCallbacks(false);
  const char* detach = std::getenv("KPFLOOR_DETACH");
  if (detach != nullptr && std::strcmp(detach, "1") == 0) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    g_detached = Check(cuptiFinalize(), "cuptiFinalize");
  }
}

// KPFLOOR_WINDOW=FIRST,COUNT[,PERIOD] into g_window_first/g_window_end/g_window_period; false
// (with a message) if bad.
bool ParseWindow() {
  const char* setting = std::getenv("KPFLOOR_WINDOW");
  if (setting == nullptr || *setting == '\0') return true;
  long first = -1, count = -1, period = 0;
  int used = -1;  // characters read: the whole setting, or it is not what it should be
  int fields = std::sscanf(setting, "%ld,%ld%n", &first, &count, &used);
  if (fields == 2 && setting[used] == ',') {
    const char* rest = setting + used + 1;
    used = -1;
    fields = std::sscanf(rest, "%ld%n", &period, &used) == 1 && rest[used] == '\0' ? 3 : 0;
  } else if (fields == 2 && setting[used] != '\0') {
    fields = 0;
  }
  if ((fields != 2 && fields != 3) || first < 0 || count <= 0 || (fields == 3 && period <= count)) {
    std::fprintf(stderr,
                 "kpfloor: KPFLOOR_WINDOW='%s' is not FIRST,COUNT or FIRST,COUNT,PERIOD with "
                 "PERIOD > COUNT (e.g. 20,10 or 10,10,20); the floor records nothing\n",
                 setting);
    return false;
  }
  g_window_first = first;
  g_window_end = first + count;
  g_window_period = fields == 3 ? period : 0;
  return true;
}

void StartTracing() {
  std::string kinds = "kernel,memcpy";
  const char* memcpy_setting = std::getenv("KPFLOOR_MEMCPY");
  if (memcpy_setting != nullptr && std::strcmp(memcpy_setting, "0") == 0) kinds = "kernel";
  if (const char* setting = std::getenv("KPFLOOR_KINDS")) kinds = setting;
  static constexpr const char* kKnown[] = {
      "kernel",           "memcpy",     "memset",      "sync",
      "overhead",         "nvtx",       "graph",       "runtime",
      "driver",           "api_launch", "cb_launch",   "cb_launch_runtime",
      "cb_launch_driver", "cb_copy",    "cb_sync",     "cb_api",
      "cb_nvtx",          "cb_reset",   "lazy_copy",   "latency",
      "driver_only",      "none",       "cb_resource", "cb_trigger",
      "dev_ctx"};
  for (size_t start = 0; start <= kinds.size();) {
    size_t end = kinds.find(',', start);
    if (end == std::string::npos) end = kinds.size();
    const std::string word = kinds.substr(start, end - start);
    bool known = false;
    for (const char* k : kKnown) known = known || word == k;
    if (!known) {
      std::string accepted;
      for (const char* k : kKnown) accepted += (accepted.empty() ? "" : ", ") + std::string(k);
      std::fprintf(
          stderr, "kpfloor: KPFLOOR_KINDS: unknown '%s'; accepted: %s; the floor records nothing\n",
          word.c_str(), accepted.c_str());
      return;
    }
    start = end + 1;
  }
  if (!ParseWindow()) return;
  const char* detach = std::getenv("KPFLOOR_DETACH");
  if (detach != nullptr && std::strcmp(detach, "1") == 0 &&
      (g_window_first < 0 || g_window_period > 0)) {
    std::fprintf(stderr, "kpfloor: KPFLOOR_DETACH=1 needs a single KPFLOOR_WINDOW; ignored\n");
  }
  g_kinds = kinds;
  if (Has(kinds, "driver_only")) g_callback_domain = CUPTI_CB_DOMAIN_DRIVER_API;

  // As kp does (inject/cupti/tracer.cc): system thread ids, a bounded device buffer pool.
  cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
  size_t pool_limit = 1024;
  size_t attr_size = sizeof(pool_limit);
  cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &attr_size, &pool_limit);
  if (!Check(cuptiActivityRegisterCallbacks(RequestBuffer, CompleteBuffer),
             "cuptiActivityRegisterCallbacks")) {
    return;
  }
  if (Has(kinds, "latency")) {
    Check(cuptiActivityEnableLatencyTimestamps(1), "cuptiActivityEnableLatencyTimestamps");
  }
  const bool wants_callbacks =
      HasCallbackWord(kinds) || Has(kinds, "lazy_copy") || g_window_first >= 0;
  if (wants_callbacks &&
      !Check(cuptiSubscribe(&g_subscriber, &kpfloor::OnCallback, nullptr), "cuptiSubscribe")) {
    return;
  }
  if (Has(kinds, "cb_resource")) {
    cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                        CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
    cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
  }
  if (g_window_first >= 0) {
    EnableTriggerCallbacks(true);
  } else {
    SwitchKinds(true);
  }
  g_active = true;
  std::atexit(FlushAtExit);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  std::call_once(g_init_once, StartTracing);
  return 1;
}

// NVTX's tool entry: hand the export table to the libcupti this library is bound to.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    void* get_export_table) {
  return kp::ForwardNvtxInitToCupti(get_export_table);
}
