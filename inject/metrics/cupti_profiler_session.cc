// cupti_profiler_session.cc: ProfilerSession and ProfilerBackend on CUPTI's range profiler
// (cupti_range_profiler.h) and the Profiler Host API (common/metric_plan.h). Every call that can
// fail returns one message naming the call and, for counter-access results, the fix.
#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cmath>
#include <cstdio>
#include <mutex>

#include "common/metric_plan.h"
#include "inject/cupti/driver_symbol.h"
#include "inject/cupti/profiler_support.h"
#include "inject/metrics/l2_sweep.h"
#include "inject/metrics/profiler_session.h"

namespace kp {

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

bool Call(const char* name, CUptiResult r, std::string* error) {
  return CheckCuptiCall(name, r, error);
}

class CuptiProfilerSession final : public ProfilerSession {
 public:
  explicit CuptiProfilerSession(CUcontext ctx) : ctx_(ctx) {}
  ~CuptiProfilerSession() override { Disable(); }

  bool Plan(const std::vector<std::string>& metrics, SessionSetup* setup,
            std::string* error) override {
    uint32_t device = 0;
    if (!Call("cuptiGetDeviceId", cuptiGetDeviceId(ctx_, &device), error) ||
        !Call("cuptiGetContextId", cuptiGetContextId(ctx_, &setup->context_id), error))
      return false;
    setup->device = device;
    if (!CheckDeviceSupported(device, CUPTI_PROFILER_RANGE_PROFILING, error)) return false;
    CUpti_Device_GetChipName_Params cn{};
    cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    cn.deviceIndex = device;
    if (!Call("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cn), error)) return false;
    setup->chip = cn.pChipName ? cn.pChipName : "";

    auto t_avail = std::chrono::steady_clock::now();
    CUpti_Profiler_GetCounterAvailability_Params ca{};
    ca.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
    ca.ctx = ctx_;
    if (!Call("cuptiProfilerGetCounterAvailability", cuptiProfilerGetCounterAvailability(&ca),
              error))
      return false;
    std::vector<uint8_t> availability(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = availability.data();
    if (!Call("cuptiProfilerGetCounterAvailability", cuptiProfilerGetCounterAvailability(&ca),
              error))
      return false;
    setup->availability_ms = MsSince(t_avail);

    auto t_config = std::chrono::steady_clock::now();
    StatusOr<MetricPlan> plan =
        BuildMetricPlan(setup->chip, CUPTI_PROFILER_TYPE_RANGE_PROFILER, availability, metrics);
    if (!plan.ok()) {
      *error = plan.status().WithContext("KP_METRICS").message();
      return false;
    }
    plan_ = std::move(plan.value());
    setup->config_ms = MsSince(t_config);
    for (const auto& n : plan_.names) metric_ptrs_.push_back(n.c_str());
    setup->names = plan_.names;
    setup->num_passes = plan_.num_passes;
    return true;
  }

  bool Enable(MetricsMode mode, size_t max_ranges, std::string* error) override {
    mode_ = mode;
    max_ranges_ = max_ranges;
    CUpti_RangeProfiler_Enable_Params en{};
    en.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
    en.ctx = ctx_;
    if (!Call("cuptiRangeProfilerEnable", cuptiRangeProfilerEnable(&en), error)) return false;
    obj_ = en.pRangeProfilerObject;
    CUpti_RangeProfiler_GetCounterDataSize_Params gs{};
    gs.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
    gs.pRangeProfilerObject = obj_;
    gs.pMetricNames = metric_ptrs_.data();
    gs.numMetrics = metric_ptrs_.size();
    gs.maxNumOfRanges = max_ranges_;
    gs.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges_);
    bool ok = Call("cuptiRangeProfilerGetCounterDataSize",
                   cuptiRangeProfilerGetCounterDataSize(&gs), error);
    if (ok) {
      image_.assign(gs.counterDataSize, 0);
      ok = InitImage(error) && SetConfig(error);
    }
    if (!ok) Disable();
    return ok;
  }

  bool Start(std::string* error) override {
    CUpti_RangeProfiler_Start_Params s{};
    s.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
    s.pRangeProfilerObject = obj_;
    Timer timer(this, SessionCall::kStart);
    if (!Call("cuptiRangeProfilerStart", cuptiRangeProfilerStart(&s), error)) return false;
    started_ = true;
    return true;
  }

  bool Stop(bool* all_passes_submitted, std::string* error) override {
    CUpti_RangeProfiler_Stop_Params s{};
    s.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
    s.pRangeProfilerObject = obj_;
    started_ = false;
    Timer timer(this, SessionCall::kStop);
    if (!Call("cuptiRangeProfilerStop", cuptiRangeProfilerStop(&s), error)) return false;
    *all_passes_submitted = s.isAllPassSubmitted != 0;
    return true;
  }

  bool PushRange(const std::string& name, std::string* error) override {
    CUpti_RangeProfiler_PushRange_Params pr{};
    pr.structSize = CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE;
    pr.pRangeProfilerObject = obj_;
    pr.pRangeName = name.c_str();
    Timer timer(this, SessionCall::kPush);
    return Call("cuptiRangeProfilerPushRange", cuptiRangeProfilerPushRange(&pr), error);
  }

  bool PopRange(std::string* error) override {
    CUpti_RangeProfiler_PopRange_Params pp{};
    pp.structSize = CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE;
    pp.pRangeProfilerObject = obj_;
    Timer timer(this, SessionCall::kPop);
    return Call("cuptiRangeProfilerPopRange", cuptiRangeProfilerPopRange(&pp), error);
  }

  bool Decode(const std::function<bool(size_t, const std::string&)>& want,
              std::vector<DecodedRange>* out, uint64_t* dropped, std::string* error) override {
    {
      Timer timer(this, SessionCall::kDecode);
      if (!DecodeImage(want, out, dropped, error)) return false;
    }
    Timer timer(this, SessionCall::kRearm);
    return InitImage(error) && SetConfig(error);
  }

  bool SweepL2(std::string* error) override {
    return (sweep_.ready() || sweep_.Init(ctx_, error)) && sweep_.Run(error);
  }

  void Disable() override {
    if (!obj_) return;
    if (started_) {
      bool all = false;
      std::string ignored;
      Stop(&all, &ignored);
    }
    CUpti_RangeProfiler_Disable_Params d{};
    d.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
    d.pRangeProfilerObject = obj_;
    cuptiRangeProfilerDisable(&d);
    obj_ = nullptr;
  }

 private:
  bool SetConfig(std::string* error) {
    CUpti_RangeProfiler_SetConfig_Params sc{};
    sc.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
    sc.pRangeProfilerObject = obj_;
    sc.configSize = plan_.config_image.size();
    sc.pConfig = plan_.config_image.data();
    sc.counterDataImageSize = image_.size();
    sc.pCounterDataImage = image_.data();
    sc.range = mode_ == MetricsMode::kKernel ? CUPTI_AutoRange : CUPTI_UserRange;
    sc.replayMode = mode_ == MetricsMode::kKernel ? CUPTI_KernelReplay : CUPTI_UserReplay;
    sc.maxRangesPerPass = max_ranges_;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    return Call("cuptiRangeProfilerSetConfig", cuptiRangeProfilerSetConfig(&sc), error);
  }

  bool InitImage(std::string* error) {
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii{};
    ii.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
    ii.pRangeProfilerObject = obj_;
    ii.counterDataSize = image_.size();
    ii.pCounterData = image_.data();
    return Call("cuptiRangeProfilerCounterDataImageInitialize",
                cuptiRangeProfilerCounterDataImageInitialize(&ii), error);
  }

  bool DecodeImage(const std::function<bool(size_t, const std::string&)>& want,
                   std::vector<DecodedRange>* out, uint64_t* dropped, std::string* error) {
    CUpti_RangeProfiler_DecodeData_Params dd{};
    dd.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
    dd.pRangeProfilerObject = obj_;
    if (!Call("cuptiRangeProfilerDecodeData", cuptiRangeProfilerDecodeData(&dd), error))
      return false;
    *dropped += dd.numOfRangeDropped;
    CUpti_RangeProfiler_GetCounterDataInfo_Params info{};
    info.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
    info.pCounterDataImage = image_.data();
    info.counterDataImageSize = image_.size();
    if (!Call("cuptiRangeProfilerGetCounterDataInfo", cuptiRangeProfilerGetCounterDataInfo(&info),
              error))
      return false;
    for (size_t i = 0; i < info.numTotalRanges; ++i) {
      CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri{};
      ri.structSize = CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE;
      ri.pCounterDataImage = image_.data();
      ri.counterDataImageSize = image_.size();
      ri.rangeIndex = i;
      ri.rangeDelimiter = "/";
      if (!Call("cuptiRangeProfilerCounterDataGetRangeInfo",
                cuptiRangeProfilerCounterDataGetRangeInfo(&ri), error))
        return false;
      std::string name = ri.rangeName ? ri.rangeName : "";
      if (!want(i, name)) continue;
      std::vector<double> values(metric_ptrs_.size(), std::nan(""));
      if (!Call("cuptiProfilerHostEvaluateToGpuValues",
                EvaluateToGpuValues(plan_.host->raw(), image_, i, metric_ptrs_, values.data()),
                error))
        return false;
      // An incomplete multi-pass cycle evaluates "successfully" to NaN.
      bool any_value = false;
      for (double v : values) any_value |= !std::isnan(v);
      if (!any_value) {
        ++*dropped;
        continue;
      }
      out->push_back(DecodedRange{i, std::move(name), std::move(values)});
    }
    return true;
  }

  CUcontext ctx_;
  MetricsMode mode_ = MetricsMode::kRange;
  size_t max_ranges_ = 0;
  MetricPlan plan_;
  std::vector<const char*> metric_ptrs_;
  CUpti_RangeProfiler_Object* obj_ = nullptr;
  std::vector<uint8_t> image_;
  L2Sweep sweep_;
};

class CuptiProfilerBackend final : public ProfilerBackend {
 public:
  std::unique_ptr<ProfilerSession> NewSession(CUcontext ctx) override {
    return std::make_unique<CuptiProfilerSession>(ctx);
  }
  bool Initialize(std::string* error) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (initialized_) return true;
    CUpti_Profiler_Initialize_Params ip{};
    ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
    if (!Call("cuptiProfilerInitialize", cuptiProfilerInitialize(&ip), error)) return false;
    initialized_ = true;
    return true;
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
  bool ChipName(uint32_t ordinal, std::string* chip, std::string* error) override {
    if (!Initialize(error)) return false;
    CUpti_Device_GetChipName_Params cn{};
    cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    cn.deviceIndex = ordinal;
    if (!Call("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cn), error)) return false;
    *chip = cn.pChipName ? cn.pChipName : "";
    return true;
  }

 private:
  std::mutex mu_;
  bool initialized_ = false;
};

}  // namespace

std::unique_ptr<ProfilerBackend> NewCuptiProfilerBackend() {
  return std::make_unique<CuptiProfilerBackend>();
}

}  // namespace kp
