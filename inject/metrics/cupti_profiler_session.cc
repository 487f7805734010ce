// cupti_profiler_session.cc: ProfilerSession and ProfilerBackend on CUPTI's range profiler
// (cupti_range_profiler.h) and the Profiler Host API (common/metric_plan.h). Every call that can
// fail returns one message naming the call and, for counter-access results, the fix.
#include <cupti.h>
#include <cupti_checkpoint.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>

#include "common/metric_plan.h"
#include "inject/cupti/driver_symbol.h"
#include "inject/cupti/profiler_support.h"
#include "inject/metrics/l2_evict.h"
#include "inject/metrics/l2_sweep.h"
#include "inject/metrics/profiler_session.h"

namespace kp {

namespace {

Status Call(const char* name, CUptiResult r) { return CheckCuptiCall(name, r); }

// CUPTI's checkpoint API lives in libcheckpoint.so (next to libcupti; kp's install bundles it),
// loaded at the first multi-pass kernel kp replays itself.
struct CheckpointApi {
  using Fn = CUptiResult (*)(NV::Cupti::Checkpoint::CUpti_Checkpoint*);
  Fn save = nullptr, restore = nullptr, free = nullptr;
};

StatusOr<const CheckpointApi*> LoadCheckpointApi() {
  static const CheckpointApi api = [] {
    CheckpointApi a;
    void* lib = dlopen("libcheckpoint.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return a;
    a.save = reinterpret_cast<CheckpointApi::Fn>(dlsym(lib, "cuptiCheckpointSave"));
    a.restore = reinterpret_cast<CheckpointApi::Fn>(dlsym(lib, "cuptiCheckpointRestore"));
    a.free = reinterpret_cast<CheckpointApi::Fn>(dlsym(lib, "cuptiCheckpointFree"));
    return a;
  }();
  if (!api.save || !api.restore || !api.free)
    return Status::Error(
        "kernel replay: CUPTI's checkpoint library (libcheckpoint.so) was not found; kernel mode "
        "needs it for a multi-pass set: put it next to libkpinject.so (kp's install does), or "
        "use a single-pass set or KP_METRICS_CACHE=none");
  return &api;
}

class CuptiProfilerSession final : public ProfilerSession {
 public:
  CuptiProfilerSession(CUcontext ctx, MetricsL2Flush flush) : ctx_(ctx), flush_(flush) {}
  ~CuptiProfilerSession() override { Disable(); }

  StatusOr<SessionSetup> Plan(const std::vector<std::string>& metrics) override {
    SessionSetup setup;
    uint32_t device = 0;
    if (Status s = Call("cuptiGetDeviceId", cuptiGetDeviceId(ctx_, &device)); !s.ok()) return s;
    if (Status s = Call("cuptiGetContextId", cuptiGetContextId(ctx_, &setup.context_id)); !s.ok())
      return s;
    setup.device = device;
    if (Status s = CheckDeviceSupported(device, CUPTI_PROFILER_RANGE_PROFILING); !s.ok()) return s;
    CUpti_Device_GetChipName_Params cn{};
    cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    cn.deviceIndex = device;
    if (Status s = Call("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cn)); !s.ok()) return s;
    setup.chip = cn.pChipName ? cn.pChipName : "";

    auto t_avail = std::chrono::steady_clock::now();
    CUpti_Profiler_GetCounterAvailability_Params ca{};
    ca.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
    ca.ctx = ctx_;
    // Busy answers are retried: another process may be setting up on this GPU right now.
    auto query = [&ca] { return cuptiProfilerGetCounterAvailability(&ca); };
    const char* kQuery = "cuptiProfilerGetCounterAvailability";
    if (Status s = Call(kQuery, RetryWhileBusy(kQuery, query)); !s.ok()) return s;
    std::vector<uint8_t> availability(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = availability.data();
    if (Status s = Call(kQuery, RetryWhileBusy(kQuery, query)); !s.ok()) return s;
    setup.availability_ms = MsSince(t_avail);

    auto t_config = std::chrono::steady_clock::now();
    StatusOr<MetricPlan> plan =
        BuildMetricPlan(setup.chip, CUPTI_PROFILER_TYPE_RANGE_PROFILER, availability, metrics);
    if (!plan.ok()) return plan.status().WithContext("KP_METRICS");
    plan_ = std::move(plan.value());
    setup.config_ms = MsSince(t_config);
    for (const auto& n : plan_.names) metric_ptrs_.push_back(n.c_str());
    setup.names = plan_.names;
    setup.num_passes = plan_.num_passes;
    return setup;
  }

  Status FlushL2() override {
    if (flush_ == MetricsL2Flush::kDriver) {
      if (!evict_tried_) {
        evict_tried_ = true;
        if (Status s = OpenEvict(); !s.ok()) flush_fallback_ = s.message();
      }
      if (evict_.ready()) {
        Status s = evict_.Evict();
        if (s.ok()) return s;
        flush_fallback_ = s.message();  // from now on the sweep
        evict_.Close();
      }
    }
    if (!sweep_.ready())
      if (Status s = sweep_.Init(ctx_); !s.ok()) return s;
    return sweep_.Run();
  }

 private:
  // The driver client for this context's GPU, found by its PCI address.
  Status OpenEvict() {
    static const auto device_get = FindDriverSymbol<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
    static const auto attribute =
        FindDriverSymbol<CUresult (*)(int*, CUdevice_attribute, CUdevice)>("cuDeviceGetAttribute");
    uint32_t ordinal = 0;
    CUdevice dev = 0;
    int pci[3] = {0, 0, 0};
    const CUdevice_attribute attrs[3] = {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
                                         CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
                                         CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID};
    bool ok = device_get && attribute && cuptiGetDeviceId(ctx_, &ordinal) == CUPTI_SUCCESS &&
              device_get(&dev, static_cast<int>(ordinal)) == CUDA_SUCCESS;
    for (int i = 0; ok && i < 3; ++i) ok = attribute(&pci[i], attrs[i], dev) == CUDA_SUCCESS;
    if (!ok) return Status::Error("driver L2 flush: the GPU's PCI address was not found");
    return evict_.Open(static_cast<unsigned>(pci[0]), static_cast<unsigned>(pci[1]),
                       static_cast<unsigned>(pci[2]));
  }

 protected:
  Status DoEnable(RangeReplay replay, size_t max_ranges) override {
    replay_ = replay;
    max_ranges_ = max_ranges;
    CUpti_RangeProfiler_Enable_Params en{};
    en.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
    en.ctx = ctx_;
    if (Status s = Call("cuptiRangeProfilerEnable",
                        RetryWhileBusy("cuptiRangeProfilerEnable",
                                       [&en] { return cuptiRangeProfilerEnable(&en); }));
        !s.ok())
      return s;
    obj_ = en.pRangeProfilerObject;
    return Status();
  }

  Status DoSizeImage() override {
    CUpti_RangeProfiler_GetCounterDataSize_Params gs{};
    gs.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
    gs.pRangeProfilerObject = obj_;
    gs.pMetricNames = metric_ptrs_.data();
    gs.numMetrics = metric_ptrs_.size();
    gs.maxNumOfRanges = max_ranges_;
    gs.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges_);
    if (Status s =
            Call("cuptiRangeProfilerGetCounterDataSize", cuptiRangeProfilerGetCounterDataSize(&gs));
        !s.ok())
      return s;
    image_.assign(gs.counterDataSize, 0);
    return Status();
  }

  Status DoInitImage() override {
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii{};
    ii.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
    ii.pRangeProfilerObject = obj_;
    ii.counterDataSize = image_.size();
    ii.pCounterData = image_.data();
    return Call("cuptiRangeProfilerCounterDataImageInitialize",
                cuptiRangeProfilerCounterDataImageInitialize(&ii));
  }

  Status DoSetConfig() override {
    CUpti_RangeProfiler_SetConfig_Params sc{};
    sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
    sc.pRangeProfilerObject = obj_;
    sc.configSize = plan_.config_image.size();
    sc.pConfig = plan_.config_image.data();
    sc.counterDataImageSize = image_.size();
    sc.pCounterDataImage = image_.data();
    sc.range = replay_ == RangeReplay::kUserRangesUserReplay ? CUPTI_UserRange : CUPTI_AutoRange;
    sc.replayMode =
        replay_ == RangeReplay::kAutoRangesKernelReplay ? CUPTI_KernelReplay : CUPTI_UserReplay;
    sc.maxRangesPerPass = max_ranges_;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    return Call("cuptiRangeProfilerSetConfig", cuptiRangeProfilerSetConfig(&sc));
  }

  Status DoStart() override {
    CUpti_RangeProfiler_Start_Params s{};
    s.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
    s.pRangeProfilerObject = obj_;
    // Not retried when busy: the counters are then held by another process's started profiler
    // (the first to start holds them). Kernel mode starts and stops on every kernel, so a
    // retried Start would let two processes take turns, each waiting in its launch callback,
    // and in a job whose processes wait for each other (DDP ranks sharing a GPU) the wait
    // would fall inside the other process's measured range.
    return Call("cuptiRangeProfilerStart", cuptiRangeProfilerStart(&s));
  }

  StatusOr<bool> DoStop() override {
    CUpti_RangeProfiler_Stop_Params s{};
    s.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    s.pRangeProfilerObject = obj_;
    if (Status st = Call("cuptiRangeProfilerStop", cuptiRangeProfilerStop(&s)); !st.ok()) return st;
    return s.isAllPassSubmitted != 0;
  }

  Status DoPushRange(const std::string& name) override {
    CUpti_RangeProfiler_PushRange_Params pr{};
    pr.structSize = CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE;
    pr.pRangeProfilerObject = obj_;
    pr.pRangeName = name.c_str();
    return Call("cuptiRangeProfilerPushRange", cuptiRangeProfilerPushRange(&pr));
  }

  Status DoPopRange() override {
    CUpti_RangeProfiler_PopRange_Params pp{};
    pp.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
    pp.pRangeProfilerObject = obj_;
    return Call("cuptiRangeProfilerPopRange", cuptiRangeProfilerPopRange(&pp));
  }

  StatusOr<std::vector<DecodedRange>> DoDecode(
      const std::function<bool(size_t, const std::string&)>& want, uint64_t* dropped) override {
    CUpti_RangeProfiler_DecodeData_Params dd{};
    dd.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
    dd.pRangeProfilerObject = obj_;
    if (Status s = Call("cuptiRangeProfilerDecodeData", cuptiRangeProfilerDecodeData(&dd)); !s.ok())
      return s;
    *dropped += dd.numOfRangeDropped;
    CUpti_RangeProfiler_GetCounterDataInfo_Params info{};
    info.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
    info.pCounterDataImage = image_.data();
    info.counterDataImageSize = image_.size();
    if (Status s = Call("cuptiRangeProfilerGetCounterDataInfo",
                        cuptiRangeProfilerGetCounterDataInfo(&info));
        !s.ok())
      return s;
    std::vector<DecodedRange> out;
    for (size_t i = 0; i < info.numTotalRanges; ++i) {
      CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri{};
      ri.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
      ri.pCounterDataImage = image_.data();
      ri.counterDataImageSize = image_.size();
      ri.rangeIndex = i;
      ri.rangeDelimiter = "/";
      if (Status s = Call("cuptiRangeProfilerCounterDataGetRangeInfo",
                          cuptiRangeProfilerCounterDataGetRangeInfo(&ri));
          !s.ok())
        return s;
      std::string name = ri.rangeName ? ri.rangeName : "";
      if (!want(i, name)) continue;
      std::vector<double> values(metric_ptrs_.size(), std::nan(""));
      if (Status s =
              Call("cuptiProfilerHostEvaluateToGpuValues",
                   EvaluateToGpuValues(plan_.host->raw(), image_, i, metric_ptrs_, values.data()));
          !s.ok())
        return s;
      // An incomplete multi-pass cycle evaluates "successfully" to NaN.
      bool any_value = false;
      for (double v : values) any_value |= !std::isnan(v);
      if (!any_value) {
        ++*dropped;
        continue;
      }
      out.push_back(DecodedRange{i, std::move(name), std::move(values)});
    }
    return out;
  }

  Status DoSynchronizeContext() override {
    static const auto push = FindDriverSymbol<CUresult (*)(CUcontext)>("cuCtxPushCurrent_v2");
    static const auto pop = FindDriverSymbol<CUresult (*)(CUcontext*)>("cuCtxPopCurrent_v2");
    static const auto sync = FindDriverSymbol<CUresult (*)()>("cuCtxSynchronize");
    if (!push || !pop || !sync) return Status::Error("kernel replay: no cuCtxSynchronize");
    if (push(ctx_) != CUDA_SUCCESS) return Status::Error("kernel replay: cuCtxPushCurrent failed");
    const CUresult r = sync();
    CUcontext popped = nullptr;
    pop(&popped);
    if (r != CUDA_SUCCESS)
      return Status::Error("kernel replay: cuCtxSynchronize failed (CUresult " +
                           std::to_string(static_cast<int>(r)) + ")");
    return Status();
  }

  Status DoSaveMemory() override {
    using NV::Cupti::Checkpoint::CUpti_Checkpoint;
    if (!checkpoint_saved_) {
      checkpoint_ = CUpti_Checkpoint{};
      checkpoint_.structSize = CUpti_Checkpoint_STRUCT_SIZE;
      checkpoint_.ctx = ctx_;
      checkpoint_.allowOverwrite = 1;
      // Leaves the application room on the device (a launch that needs more local memory or
      // heap); what does not fit is saved in host memory.
      checkpoint_.reserveDeviceMB = 1024;
    }
    StatusOr<const CheckpointApi*> api = LoadCheckpointApi();
    if (!api.ok()) return api.status();
    if (Status s = Call("cuptiCheckpointSave", api.value()->save(&checkpoint_)); !s.ok()) {
      // Whatever state a first, failed save set up in the handle is released (a failed
      // save over a kept one is freed with it by FreeMemory).
      if (!checkpoint_saved_) api.value()->free(&checkpoint_);
      return s;
    }
    checkpoint_saved_ = true;
    return Status();
  }

  Status DoRestoreMemory() override {
    if (!checkpoint_saved_) return Status::Error("kernel replay: no checkpoint to restore");
    StatusOr<const CheckpointApi*> api = LoadCheckpointApi();
    if (!api.ok()) return api.status();
    return Call("cuptiCheckpointRestore", api.value()->restore(&checkpoint_));
  }

  void DoFreeMemory() override {
    if (!checkpoint_saved_) return;
    checkpoint_saved_ = false;
    if (StatusOr<const CheckpointApi*> api = LoadCheckpointApi(); api.ok())
      api.value()->free(&checkpoint_);
  }

  Status DoRelaunch(const KernelLaunch& launch) override { return kp::Relaunch(launch); }

  KernelFacts DoDescribeLaunch(const KernelLaunch& launch) override {
    KernelFacts k = DescribeKernelLaunch(launch);
    uint32_t id = 0;
    if (cuptiGetStreamIdEx(ctx_, k.stream, k.per_thread_stream ? 1 : 0, &id) == CUPTI_SUCCESS)
      k.stream_id = id;
    return k;
  }

  Status DoDisable() override {
    evict_.Close();  // the driver client is the process's, not the context's: given back here
    CUpti_RangeProfiler_Disable_Params d{};
    d.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
    d.pRangeProfilerObject = obj_;
    obj_ = nullptr;
    return Call("cuptiRangeProfilerDisable", cuptiRangeProfilerDisable(&d));
  }

 private:
  CUcontext ctx_;
  RangeReplay replay_ = RangeReplay::kUserRangesUserReplay;
  size_t max_ranges_ = 0;
  MetricPlan plan_;
  std::vector<const char*> metric_ptrs_;
  CUpti_RangeProfiler_Object* obj_ = nullptr;
  std::vector<uint8_t> image_;
  const MetricsL2Flush flush_;
  DriverL2Evict evict_;
  bool evict_tried_ = false;
  L2Sweep sweep_;
  NV::Cupti::Checkpoint::CUpti_Checkpoint checkpoint_{};
  bool checkpoint_saved_ = false;
};

class CuptiProfilerBackend final : public ProfilerBackend {
 public:
  explicit CuptiProfilerBackend(MetricsL2Flush flush) : flush_(flush) {}
  std::unique_ptr<ProfilerSession> NewSession(CUcontext ctx) override {
    return std::make_unique<CuptiProfilerSession>(ctx, flush_);
  }
  Status Initialize() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (initialized_) return Status();
    CUpti_Profiler_Initialize_Params ip{};
    ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    if (Status s = Call("cuptiProfilerInitialize", cuptiProfilerInitialize(&ip)); !s.ok()) return s;
    initialized_ = true;
    return Status();
  }
  void DeInitialize() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialized_) return;
    CUpti_Profiler_DeInitialize_Params d{};
    d.structSize = CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE;
    cuptiProfilerDeInitialize(&d);
    initialized_ = false;
  }
  CUcontext CurrentContext() override {
    static const auto fn = FindDriverSymbol<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
    CUcontext ctx = nullptr;
    // A driver call from an NVTX callback: verified safe on the H200.
    if (!fn || fn(&ctx) != CUDA_SUCCESS) return nullptr;
    return ctx;
  }
  uint64_t Now() override {
    uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return t;
  }
  StatusOr<std::string> ChipName(uint32_t ordinal) override {
    if (Status s = Initialize(); !s.ok()) return s;
    CUpti_Device_GetChipName_Params cn{};
    cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    cn.deviceIndex = ordinal;
    if (Status s = Call("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cn)); !s.ok()) return s;
    return std::string(cn.pChipName ? cn.pChipName : "");
  }

 private:
  const MetricsL2Flush flush_;
  std::mutex mu_;
  bool initialized_ = false;
};

}  // namespace

std::unique_ptr<ProfilerBackend> NewCuptiProfilerBackend(MetricsL2Flush flush) {
  return std::make_unique<CuptiProfilerBackend>(flush);
}

}  // namespace kp
