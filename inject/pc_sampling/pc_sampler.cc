#include "inject/pc_sampling/pc_sampler.h"

#include <cupti_pcsampling.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "inject/capture/capture_hooks.h"
#include "inject/cupti/driver_symbol.h"
#include "inject/log/log.h"
#include "inject/pc_sampling/pc_sampling_windows.h"
#include "inject/pc_sampling/pc_stall_aggregator.h"
#include "inject/trace/records.h"
#include "inject/trace/trace_encoder.h"

namespace kp {
namespace {

constexpr uint32_t kPollMs = 100;
// PCs one GetData call can return; CUPTI keeps the rest for the next call (remainingNumPcs).
constexpr size_t kPcsPerRead = 4096;
// GetData calls per context per poll at most, so one busy context cannot starve the others.
constexpr int kMaxReadsPerPoll = 64;
constexpr size_t kTopPcs = 10;
// Cubins kept for source-line lookup (copied at module load), in total.
constexpr size_t kMaxCubinBytes = 256u << 20;

const char* ResultText(CUptiResult r) {
  const char* text = nullptr;
  if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || text == nullptr) return "unknown";
  return text;
}

uint64_t Now() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

// Makes `context` current on this thread for the scope (cuptiPCSamplingStart/Stop run on the
// thread that opened or closed a capture window, which may have another context current or
// none, e.g. kp's capture control thread). Nothing is changed when it is current already.
class ScopedCurrentContext {
 public:
  explicit ScopedCurrentContext(CUcontext context) {
    using GetFn = CUresult (*)(CUcontext*);
    using PushFn = CUresult (*)(CUcontext);
    static const GetFn get = FindDriverSymbol<GetFn>("cuCtxGetCurrent");
    static const PushFn push = FindDriverSymbol<PushFn>("cuCtxPushCurrent_v2");
    CUcontext current = nullptr;
    if (get == nullptr || push == nullptr || get(&current) != CUDA_SUCCESS) return;
    if (current == context) return;
    pushed_ = push(context) == CUDA_SUCCESS;
  }
  ~ScopedCurrentContext() {
    using PopFn = CUresult (*)(CUcontext*);
    static const PopFn pop = FindDriverSymbol<PopFn>("cuCtxPopCurrent_v2");
    CUcontext popped = nullptr;
    if (pushed_ && pop != nullptr) pop(&popped);
  }
  ScopedCurrentContext(const ScopedCurrentContext&) = delete;
  ScopedCurrentContext& operator=(const ScopedCurrentContext&) = delete;

 private:
  bool pushed_ = false;
};

// A CUpti_PCSamplingData with room for `pcs` PCs of `reasons` stall reasons each.
struct SampleBuffer {
  CUpti_PCSamplingData data{};
  std::vector<CUpti_PCSamplingPCData> pcs;
  std::vector<CUpti_PCSamplingStallReason> reasons;

  void Allocate(size_t num_pcs, size_t num_reasons) {
    pcs.assign(num_pcs, CUpti_PCSamplingPCData{});
    reasons.assign(num_pcs * num_reasons, CUpti_PCSamplingStallReason{});
    for (size_t i = 0; i < num_pcs; ++i) {
      pcs[i].size = sizeof(CUpti_PCSamplingPCData);
      pcs[i].stallReason = reasons.data() + i * num_reasons;
    }
    data = CUpti_PCSamplingData{};
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = num_pcs;
    data.pPcData = pcs.data();
  }
};

struct ContextState {
  CUcontext context = nullptr;
  uint32_t device = 0;
  std::mutex mutex;  // GetData/Disable on this context: collector thread vs. callbacks
  bool enabled = false;
  size_t num_reasons = 0;
  SampleBuffer read;    // for cuptiPCSamplingGetData
  SampleBuffer config;  // CUPTI flushes here itself (module unload, context destroy, Disable)
};

class CuptiPcSampler final : public PcSampler {
 public:
  CuptiPcSampler(const PcSamplingConfig& config, EncoderPost post)
      : config_(config),
        post_(std::move(post)),
        windows_([this](CUcontext context, bool on) { return StartStop(context, on); },
                 [this] { PollSoon(); }) {
    thread_ = std::thread([this] { Run(); });
    if (!windows_.Attach()) {
      Log(LogSeverity::kWarning,
          "PC sampling: no capture-window hook slot left; it samples outside windows too");
    }
  }
  ~CuptiPcSampler() override { StopThread(); }

  void EnableCallbacks(CUpti_SubscriberHandle sub) override {
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                        CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
  }

  void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) override {
    if (data == nullptr || stopped_.load()) return;
    switch (cbid) {
      case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
        EnableContext(data->context);
        break;
      case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
        DisableContext(data->context);
        break;
      case CUPTI_CBID_RESOURCE_MODULE_LOADED:
        KeepCubin(static_cast<const CUpti_ModuleResourceData*>(data->resourceDescriptor));
        break;
      case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING:
        if (auto state = Find(data->context)) {
          std::lock_guard<std::mutex> lock(state->mutex);
          Drain(*state);
        }
        break;
      default:
        break;
    }
  }

  void Shutdown() override {
    if (stopped_.exchange(true)) return;
    StopThread();
    std::vector<std::shared_ptr<ContextState>> contexts;
    {
      std::lock_guard<std::mutex> lock(contexts_mutex_);
      contexts.swap(contexts_);
    }
    for (auto& state : contexts) {
      windows_.RemoveContext(state->context);  // stopped first when a window is still open
      std::lock_guard<std::mutex> lock(state->mutex);
      Finish(*state);
    }
    Log(LogSeverity::kDebug,
        "PC sampling: %llu samples (%llu in kernels without PC records), %llu dropped, hardware "
        "buffer full %llu times",
        static_cast<unsigned long long>(total_samples_.load()),
        static_cast<unsigned long long>(non_user_samples_.load()),
        static_cast<unsigned long long>(dropped_.load() + dropped_posted_),
        static_cast<unsigned long long>(buffer_full_.load() + full_posted_));
    PostTotals();
  }

 private:
  std::shared_ptr<ContextState> Find(CUcontext context) {
    std::lock_guard<std::mutex> lock(contexts_mutex_);
    for (auto& s : contexts_) {
      if (s->context == context) return s;
    }
    return nullptr;
  }

  bool SetAttributes(CUcontext context, CUpti_PCSamplingConfigurationInfo* info, size_t n) {
    CUpti_PCSamplingConfigurationInfoParams params{};
    params.size = CUpti_PCSamplingConfigurationInfoParamsSize;
    params.ctx = context;
    params.numAttributes = n;
    params.pPCSamplingConfigurationInfo = info;
    CUptiResult r = cuptiPCSamplingSetConfigurationAttribute(&params);
    if (r != CUPTI_SUCCESS) {
      for (size_t i = 0; i < n; ++i) {
        if (info[i].attributeStatus != CUPTI_SUCCESS) {
          LogNotice(LogSeverity::kError, "pc_sampling",
                    "CUPTI rejected PC-sampling attribute " +
                        std::to_string(static_cast<int>(info[i].attributeType)) + " (" +
                        ResultText(info[i].attributeStatus) + ")");
        }
      }
      LogNotice(LogSeverity::kError, "pc_sampling",
                std::string("cannot configure PC sampling: ") + ResultText(r),
                "PC sampling is off, tracing goes on");
      return false;
    }
    return true;
  }

  uint32_t DefaultPeriod(CUcontext context) {
    CUpti_PCSamplingConfigurationInfo info{};
    info.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    CUpti_PCSamplingConfigurationInfoParams params{};
    params.size = CUpti_PCSamplingConfigurationInfoParamsSize;
    params.ctx = context;
    params.numAttributes = 1;
    params.pPCSamplingConfigurationInfo = &info;
    if (cuptiPCSamplingGetConfigurationAttribute(&params) != CUPTI_SUCCESS) return 0;
    return info.attributeData.samplingPeriodData.samplingPeriod;
  }

  // The window hooks' CUPTI side (pc_sampling_windows.h). Before a start, what the previous
  // window left is read: CUPTI wants a read after every stop.
  bool StartStop(CUcontext context, bool on) {
    if (on) {
      if (auto state = Find(context)) {
        std::lock_guard<std::mutex> lock(state->mutex);
        Drain(*state);
      }
    }
    CUptiResult r = CUPTI_SUCCESS;
    {
      ScopedCurrentContext current(context);
      if (on) {
        CUpti_PCSamplingStartParams p{};
        p.size = CUpti_PCSamplingStartParamsSize;
        p.ctx = context;
        r = cuptiPCSamplingStart(&p);
      } else {
        CUpti_PCSamplingStopParams p{};
        p.size = CUpti_PCSamplingStopParamsSize;
        p.ctx = context;
        r = cuptiPCSamplingStop(&p);
      }
    }
    if (r != CUPTI_SUCCESS && !warned_switch_.exchange(true)) {
      LogNotice(LogSeverity::kWarning, "pc_sampling",
                std::string(on ? "cuptiPCSamplingStart" : "cuptiPCSamplingStop") +
                    " failed at a capture window's " + (on ? "start" : "end") + ": " +
                    ResultText(r),
                "PC samples may be missing from (or reach beyond) the capture windows");
    }
    return r == CUPTI_SUCCESS;
  }

  // On the thread creating the context, inside its callback.
  void EnableContext(CUcontext context) {
    // With capture windows, sampling runs only while one is open (started by its hook).
    const bool windowed = CaptureWindowsConfigured();
    auto state = std::make_shared<ContextState>();
    state->context = context;
    cuptiGetDeviceId(context, &state->device);
    CUpti_PCSamplingEnableParams enable{};
    enable.size = CUpti_PCSamplingEnableParamsSize;
    enable.ctx = context;
    CUptiResult r = cuptiPCSamplingEnable(&enable);
    if (r != CUPTI_SUCCESS) {
      LogNotice(LogSeverity::kError, "pc_sampling",
                "cannot enable PC sampling on device " + std::to_string(state->device) + ": " +
                    ResultText(r),
                "PC sampling is off for this device, tracing goes on");
      return;
    }
    const uint32_t cupti_default = DefaultPeriod(context);
    size_t num_reasons = 0;
    CUpti_PCSamplingGetNumStallReasonsParams num{};
    num.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
    num.ctx = context;
    num.numStallReasons = &num_reasons;
    r = cuptiPCSamplingGetNumStallReasons(&num);
    if (r != CUPTI_SUCCESS || num_reasons == 0) {
      LogNotice(LogSeverity::kError, "pc_sampling",
                std::string("cannot read the stall reasons: ") + ResultText(r),
                "PC sampling is off for this device, tracing goes on");
      DisableOnly(context);
      return;
    }
    std::vector<uint32_t> indexes(num_reasons);
    std::vector<std::vector<char>> name_storage(num_reasons,
                                                std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
    std::vector<char*> names(num_reasons);
    for (size_t i = 0; i < num_reasons; ++i) names[i] = name_storage[i].data();
    CUpti_PCSamplingGetStallReasonsParams get{};
    get.size = CUpti_PCSamplingGetStallReasonsParamsSize;
    get.ctx = context;
    get.numStallReasons = num_reasons;
    get.stallReasonIndex = indexes.data();
    get.stallReasons = names.data();
    r = cuptiPCSamplingGetStallReasons(&get);
    if (r != CUPTI_SUCCESS) {
      LogNotice(LogSeverity::kError, "pc_sampling",
                std::string("cannot read the stall reason names: ") + ResultText(r),
                "PC sampling is off for this device, tracing goes on");
      DisableOnly(context);
      return;
    }
    state->num_reasons = num_reasons;
    state->read.Allocate(kPcsPerRead, num_reasons);
    state->config.Allocate(kPcsPerRead, num_reasons);

    CUpti_PCSamplingConfigurationInfo info[6] = {};
    info[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    info[0].attributeData.samplingPeriodData.samplingPeriod = config_.period;
    info[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
    info[1].attributeData.stallReasonData.stallReasonCount = num_reasons;
    info[1].attributeData.stallReasonData.pStallReasonIndex = indexes.data();
    info[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
    info[2].attributeData.collectionModeData.collectionMode =
        CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
    info[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
    info[3].attributeData.enableStartStopControlData.enableStartStopControl = windowed ? 1 : 0;
    info[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
    info[4].attributeData.outputDataFormatData.outputDataFormat =
        CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
    info[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
    info[5].attributeData.samplingDataBufferData.samplingDataBuffer = &state->config.data;
    if (!SetAttributes(context, info, 6)) {
      DisableOnly(context);
      return;
    }
    state->enabled = true;
    Log(LogSeverity::kDebug,
        "PC sampling on device %u: %zu stall reasons, period 2^%u cycles (CUPTI default 2^%u)",
        state->device, num_reasons, config_.period, cupti_default);
    // The device's reason table goes into every later chunk (the encoder repeats it).
    std::vector<std::pair<uint32_t, std::string>> table;
    for (size_t i = 0; i < num_reasons; ++i) table.emplace_back(indexes[i], names[i]);
    const uint32_t device = state->device;
    post_([device, table = std::move(table)](TraceEncoder& encoder) {
      for (const auto& [index, name] : table) encoder.AddPcStallReason(device, index, name);
    });
    {
      std::lock_guard<std::mutex> lock(contexts_mutex_);
      contexts_.push_back(std::move(state));
    }
    if (windowed) windows_.AddContext(context);  // started now if a window is open
  }

  void DisableOnly(CUcontext context) {
    CUpti_PCSamplingDisableParams disable{};
    disable.size = CUpti_PCSamplingDisableParamsSize;
    disable.ctx = context;
    cuptiPCSamplingDisable(&disable);
  }

  void DisableContext(CUcontext context) {
    windows_.RemoveContext(context);
    std::shared_ptr<ContextState> state;
    {
      std::lock_guard<std::mutex> lock(contexts_mutex_);
      for (auto it = contexts_.begin(); it != contexts_.end(); ++it) {
        if ((*it)->context == context) {
          state = *it;
          contexts_.erase(it);
          break;
        }
      }
    }
    if (!state) return;
    std::lock_guard<std::mutex> lock(state->mutex);
    Finish(*state);  // the collector thread posts what this read, at its next poll
  }

  // Reads the context's last samples, disables sampling and reads what Disable flushed.
  void Finish(ContextState& state) {
    if (!state.enabled) return;
    Drain(state);
    DisableOnly(state.context);
    state.enabled = false;
    TakeConfigBuffer(state);
  }

  // Samples CUPTI flushed into the configuration buffer by itself.
  void TakeConfigBuffer(ContextState& state) {
    CUpti_PCSamplingData& d = state.config.data;
    if (d.totalNumPcs == 0) return;
    Aggregate(state, d);
    d.totalNumPcs = 0;
  }

  // Caller holds state.mutex.
  void Drain(ContextState& state) {
    if (!state.enabled) return;
    TakeConfigBuffer(state);
    for (int i = 0; i < kMaxReadsPerPoll; ++i) {
      CUpti_PCSamplingData& d = state.read.data;
      d.collectNumPcs = kPcsPerRead;
      d.totalNumPcs = 0;
      d.remainingNumPcs = 0;
      d.hardwareBufferFull = 0;
      CUpti_PCSamplingGetDataParams params{};
      params.size = CUpti_PCSamplingGetDataParamsSize;
      params.ctx = state.context;
      params.pcSamplingData = &d;
      const CUptiResult r = cuptiPCSamplingGetData(&params);
      if (d.hardwareBufferFull != 0 || r == CUPTI_ERROR_OUT_OF_MEMORY) {
        buffer_full_.fetch_add(1);
        if (!warned_full_.exchange(true)) {
          LogNotice(LogSeverity::kWarning, "pc_sampling",
                    "CUPTI's PC-sampling hardware buffer was full: samples were lost",
                    "raise KP_PC_SAMPLING_PERIOD to sample less often");
        }
      }
      if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_OUT_OF_MEMORY) {
        if (!warned_read_.exchange(true)) {
          LogNotice(LogSeverity::kWarning, "pc_sampling",
                    std::string("cuptiPCSamplingGetData failed: ") + ResultText(r));
        }
        return;
      }
      Aggregate(state, d);
      if (d.remainingNumPcs == 0 || d.totalNumPcs == 0) break;
    }
  }

  void Aggregate(ContextState& state, const CUpti_PCSamplingData& d) {
    dropped_.fetch_add(d.droppedSamples);
    total_samples_.fetch_add(d.totalSamples);
    non_user_samples_.fetch_add(d.nonUsrKernelsTotalSamples);
    std::lock_guard<std::mutex> lock(aggregate_mutex_);
    const size_t n = std::min(d.totalNumPcs, d.collectNumPcs);
    for (size_t i = 0; i < n; ++i) {
      const CUpti_PCSamplingPCData& pc = d.pPcData[i];
      reason_scratch_.clear();
      sample_scratch_.clear();
      const size_t m = std::min(pc.stallReasonCount, state.num_reasons);
      for (size_t k = 0; k < m; ++k) {
        reason_scratch_.push_back(pc.stallReason[k].pcSamplingStallReasonIndex);
        sample_scratch_.push_back(pc.stallReason[k].samples);
      }
      aggregator_.Add(state.device, pc.functionName, pc.cubinCrc, pc.pcOffset,
                      reason_scratch_.data(), sample_scratch_.data(), m);
    }
  }

  // ---- source lines ----

  void KeepCubin(const CUpti_ModuleResourceData* module) {
    if (module == nullptr || module->pCubin == nullptr || module->cubinSize == 0) return;
    CUpti_GetCubinCrcParams crc{};
    crc.size = CUpti_GetCubinCrcParamsSize;
    crc.cubin = module->pCubin;
    crc.cubinSize = module->cubinSize;
    if (cuptiGetCubinCrc(&crc) != CUPTI_SUCCESS) return;
    std::lock_guard<std::mutex> lock(cubin_mutex_);
    if (cubins_.count(crc.cubinCrc) != 0) return;
    if (cubin_bytes_ + module->cubinSize > kMaxCubinBytes) {
      if (!warned_cubins_) {
        warned_cubins_ = true;
        Log(LogSeverity::kDebug, "PC sampling: over %zu MiB of modules; later ones get no lines",
            kMaxCubinBytes >> 20);
      }
      return;
    }
    cubin_bytes_ += module->cubinSize;
    cubins_[crc.cubinCrc] = std::make_shared<const std::vector<char>>(
        module->pCubin, module->pCubin + module->cubinSize);
  }

  std::shared_ptr<const std::vector<char>> FindCubin(uint64_t crc) {
    std::lock_guard<std::mutex> lock(cubin_mutex_);
    auto it = cubins_.find(crc);
    return it == cubins_.end() ? nullptr : it->second;
  }

  // Caller holds post_mutex_ (lines_). CUPTI is asked without cubin_mutex_ held: module-load
  // callbacks on application threads take that one.
  void ResolveLines(KernelStallTotals& kernel) {
    for (PcStallPcTotals& pc : kernel.top_pcs) {
      const auto key = std::make_pair(pc.cubin_crc, pc.pc_offset);
      auto known = lines_.find(key);
      if (known == lines_.end()) {
        std::pair<std::string, uint32_t> where;
        if (const auto cubin = FindCubin(pc.cubin_crc)) {
          CUpti_GetSassToSourceCorrelationParams p{};
          p.size = CUpti_GetSassToSourceCorrelationParamsSize;
          p.cubin = cubin->data();
          p.cubinSize = cubin->size();
          p.functionName = kernel.kernel.c_str();
          p.pcOffset = pc.pc_offset;
          if (cuptiGetSassToSourceCorrelation(&p) == CUPTI_SUCCESS) {
            if (p.fileName != nullptr && p.fileName[0] != '\0' && p.lineNumber != 0) {
              std::string dir = p.dirName != nullptr ? p.dirName : "";
              std::string file = p.fileName;
              where.first = (!dir.empty() && file[0] != '/') ? dir + "/" + file : file;
              where.second = p.lineNumber;
            }
            std::free(p.fileName);
            std::free(p.dirName);
          }
        }
        known = lines_.emplace(key, std::move(where)).first;
      }
      pc.file = known->second.first;
      pc.line = known->second.second;
    }
  }

  // ---- collector thread ----

  void Run() {
    pthread_setname_np(pthread_self(), "kp-pc-sampling");  // as top -H, perf and gdb show it
    std::unique_lock<std::mutex> lock(run_mutex_);
    while (!stop_thread_) {
      run_cv_.wait_for(lock, std::chrono::milliseconds(kPollMs),
                       [this] { return stop_thread_ || poll_soon_; });
      poll_soon_ = false;
      if (stop_thread_) break;
      lock.unlock();
      Poll();
      lock.lock();
    }
  }

  void Poll() {
    std::vector<std::shared_ptr<ContextState>> contexts;
    {
      std::lock_guard<std::mutex> lock(contexts_mutex_);
      contexts = contexts_;
    }
    for (auto& state : contexts) {
      std::lock_guard<std::mutex> lock(state->mutex);
      Drain(*state);
    }
    PostTotals();
  }

  // A capture window closed: read what it left now rather than at the next poll.
  void PollSoon() {
    {
      std::lock_guard<std::mutex> lock(run_mutex_);
      poll_soon_ = true;
    }
    run_cv_.notify_all();
  }

  void StopThread() {
    {
      std::lock_guard<std::mutex> lock(run_mutex_);
      stop_thread_ = true;
    }
    run_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Hands what was read since the last call to the encoder thread.
  void PostTotals() {
    std::lock_guard<std::mutex> post_lock(post_mutex_);
    std::vector<KernelStallTotals> kernels;
    {
      std::lock_guard<std::mutex> lock(aggregate_mutex_);
      kernels = aggregator_.Take(kTopPcs);
    }
    for (KernelStallTotals& k : kernels) ResolveLines(k);
    const uint64_t dropped = dropped_.exchange(0);
    const uint64_t full = buffer_full_.exchange(0);
    dropped_posted_ += dropped;
    full_posted_ += full;
    if (kernels.empty() && dropped == 0 && full == 0) return;
    const uint64_t now = Now();
    const uint32_t period = config_.period;
    post_([kernels = std::move(kernels), dropped, full, now, period](TraceEncoder& encoder) {
      encoder.stats().pc_samples_dropped += dropped;
      encoder.stats().pc_sampling_buffer_full += full;
      std::vector<uint32_t> reasons;
      std::vector<uint64_t> samples;
      std::vector<PcStallsRecord::Pc> pcs;
      for (const KernelStallTotals& k : kernels) {
        size_t total_rows = k.reasons.size();
        for (const auto& pc : k.top_pcs) total_rows += pc.reasons.size();
        reasons.clear();
        samples.clear();
        reasons.reserve(total_rows);
        samples.reserve(total_rows);
        for (const PcStallCount& c : k.reasons) {
          reasons.push_back(c.reason);
          samples.push_back(c.samples);
        }
        pcs.clear();
        for (const PcStallPcTotals& pc : k.top_pcs) {
          PcStallsRecord::Pc row;
          row.pc_offset = pc.pc_offset;
          row.num_reasons = static_cast<uint32_t>(pc.reasons.size());
          const size_t first = reasons.size();
          for (const PcStallCount& c : pc.reasons) {
            reasons.push_back(c.reason);
            samples.push_back(c.samples);
          }
          row.reason_index = reasons.data() + first;
          row.samples = samples.data() + first;
          row.file = pc.file.c_str();
          row.line = pc.line;
          pcs.push_back(row);
        }
        PcStallsRecord r;
        r.device = k.device;
        r.kernel = k.kernel.c_str();
        r.time_ns = now;
        r.sampling_period = period;
        r.reason_index = reasons.data();
        r.samples = samples.data();
        r.num_reasons = static_cast<uint32_t>(k.reasons.size());
        r.pcs = pcs.data();
        r.num_pcs = static_cast<uint32_t>(pcs.size());
        encoder.AddPcStalls(r);
      }
    });
  }

  const PcSamplingConfig config_;
  const EncoderPost post_;
  std::atomic<bool> stopped_{false};

  std::mutex contexts_mutex_;
  std::vector<std::shared_ptr<ContextState>> contexts_;

  std::mutex aggregate_mutex_;
  PcStallAggregator aggregator_;
  std::vector<uint32_t> reason_scratch_, sample_scratch_;
  std::atomic<uint64_t> dropped_{0}, buffer_full_{0}, total_samples_{0}, non_user_samples_{0};
  std::atomic<bool> warned_full_{false}, warned_read_{false};
  uint64_t dropped_posted_ = 0, full_posted_ = 0;  // under post_mutex_
  std::mutex post_mutex_;

  std::mutex cubin_mutex_;  // cubins_, cubin_bytes_, warned_cubins_
  std::map<uint64_t, std::shared_ptr<const std::vector<char>>> cubins_;  // by CUPTI's CRC
  size_t cubin_bytes_ = 0;
  bool warned_cubins_ = false;
  // (cubin CRC, PC offset) -> source file and line; under post_mutex_
  std::map<std::pair<uint64_t, uint64_t>, std::pair<std::string, uint32_t>> lines_;

  std::atomic<bool> warned_switch_{false};
  PcSamplingWindows windows_;

  std::mutex run_mutex_;
  std::condition_variable run_cv_;
  bool stop_thread_ = false;
  bool poll_soon_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<PcSampler> PcSampler::Create(const PcSamplingConfig& config, bool range_profiler,
                                             EncoderPost post) {
  if (!config.stall) return nullptr;
  if (range_profiler) {
    // CUDA 13.0, driver 580, H200: with the range profiler started, cuptiPCSamplingGetData
    // succeeds and returns no samples at all (the sampling hardware is the profiler's).
    LogNotice(LogSeverity::kWarning, "pc_sampling",
              "KP_PC_SAMPLING with KP_METRICS: CUPTI delivers no PC samples while the range "
              "profiler runs, so the stall counts will be empty",
              "run the two in separate runs");
  }
  return std::make_unique<CuptiPcSampler>(config, std::move(post));
}

}  // namespace kp
