// pm_sampler.cc: one GPU's CUPTI PM sampling session (PmSession, pm_session.h): counter
// availability, the config image (one pass), Enable, SetConfig, Start, DecodeData with the
// samples' times and values, Stop, Disable. The thread that drives it and the exit order are in
// pm_sampling.cc.
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <algorithm>
#include <chrono>

#include "common/metric_plan.h"
#include "common/pm_counters.h"
#include "inject/cupti/profiler_support.h"
#include "inject/log/log.h"
#include "inject/pm_sampling/pm_session.h"

namespace kp {
namespace {

// Hardware buffer the GPU writes raw samples to, drained by every decode (Kineto's size; a
// sample takes several KB there, so this holds about a second at 100 us).
constexpr size_t kHardwareBufferBytes = 64u << 20;

// The GPU's counters are held by another session: on the H200, a second process's
// cuptiPmSamplingGetCounterAvailability returns HARDWARE_BUSY while the first one samples;
// a second Enable on one device returns INVALID_OPERATION.
bool IsBusy(CUptiResult r) {
  return r == CUPTI_ERROR_HARDWARE_BUSY || r == CUPTI_ERROR_INVALID_OPERATION;
}

uint64_t SteadyNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t TraceNow() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

}  // namespace

class CuptiPmSession final : public PmSession {
 public:
  CuptiPmSession(uint32_t device, std::vector<std::string> counters, bool gpu_set,
                 uint64_t interval_ns)
      : device_(device),
        counters_(std::move(counters)),
        gpu_set_(gpu_set),
        interval_ns_(interval_ns) {}
  ~CuptiPmSession() override { CloseSession(); }

  Status Start() override {
    busy_ = false;
    return Setup();
  }
  bool busy() const override { return busy_; }

  const std::string& chip() const override { return chip_; }
  const std::vector<std::string>& counters() const override { return names_; }

  void Stop() override {
    if (!started_) return;
    started_ = false;
    CUpti_PmSampling_Stop_Params sp{};
    sp.structSize = CUpti_PmSampling_Stop_Params_STRUCT_SIZE;
    sp.pPmSamplingObject = object_;
    cuptiPmSamplingStop(&sp);
  }

  // Disable first, then free: CUPTI keeps pointers to the config image until Disable.
  void Close() override { CloseSession(); }

 private:
  void CloseSession() {
    Stop();
    if (object_ != nullptr && timing_.decodes > 0) {
      Log(LogSeverity::kDebug,
          "pm sampling: GPU %u decoding: %llu decodes, %llu samples; DecodeData %.1f ms, sample "
          "info %.1f ms, evaluate %.1f ms, image initialize %.1f ms (image %zu bytes, %u samples)",
          device_, static_cast<unsigned long long>(timing_.decodes),
          static_cast<unsigned long long>(timing_.samples), timing_.decode_ns / 1e6,
          timing_.info_ns / 1e6, timing_.evaluate_ns / 1e6, timing_.initialize_ns / 1e6,
          image_.size(), PmImageSamples(interval_ns_));
    }
    if (object_ != nullptr) {
      CUpti_PmSampling_Disable_Params dp{};
      dp.structSize = CUpti_PmSampling_Disable_Params_STRUCT_SIZE;
      dp.pPmSamplingObject = object_;
      cuptiPmSamplingDisable(&dp);
      object_ = nullptr;
    }
    plan_ = MetricPlan();  // the host object and config image; a retry builds its own
    image_ = std::vector<uint8_t>();
  }

  // A call of the set-up that fails when another session holds the counters: OK, or why not
  // (busy_ says which). The busy line names this case in words the GPU test looks for
  // (tests/gpu/run_pm_sampling_tests.sh, two_procs).
  Status CheckSetUpCall(const char* call, CUptiResult r) {
    busy_ = IsBusy(r);
    if (busy_) {
      return Status::Error("another process (or profiler) is sampling this GPU already (" +
                           CuptiCallError(call, r) + "); its samples are in that process's trace");
    }
    return CheckCuptiCall(call, r);
  }

  Status Setup() {
    if (!profiler_initialized_) {
      CUpti_Profiler_Initialize_Params ip{};
      ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
      if (Status s = CheckCuptiCall("cuptiProfilerInitialize", cuptiProfilerInitialize(&ip));
          !s.ok())
        return s;
      profiler_initialized_ = true;
    }

    if (Status s = CheckDeviceSupported(device_, CUPTI_PROFILER_PM_SAMPLING); !s.ok()) return s;

    CUpti_Device_GetChipName_Params cn{};
    cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    cn.deviceIndex = device_;
    if (Status s = CheckCuptiCall("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cn)); !s.ok())
      return s;
    chip_ = cn.pChipName != nullptr ? cn.pChipName : "";

    CUpti_PmSampling_GetCounterAvailability_Params ca{};
    ca.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
    ca.deviceIndex = device_;
    if (Status s = CheckSetUpCall("cuptiPmSamplingGetCounterAvailability",
                                  cuptiPmSamplingGetCounterAvailability(&ca));
        !s.ok())
      return s;
    std::vector<uint8_t> availability(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = availability.data();
    // The size query succeeds while another process samples; the fill is where the H200 says
    // HARDWARE_BUSY.
    if (Status s = CheckSetUpCall("cuptiPmSamplingGetCounterAvailability",
                                  cuptiPmSamplingGetCounterAvailability(&ca));
        !s.ok())
      return s;

    // The named set keeps what this chip has (no NVLink on a PCIe card); a list the user wrote
    // must be valid as written.
    names_ = counters_;
    if (gpu_set_) {
      StatusOr<std::unique_ptr<MetricHost>> created =
          MetricHost::Create(chip_, CUPTI_PROFILER_TYPE_PM_SAMPLING, availability);
      if (!created.ok()) return created.status();
      const std::unique_ptr<MetricHost>& host = created.value();
      names_.clear();
      std::string skipped;
      const std::vector<std::string>& set = PmGpuCounterSet();
      for (const std::string& name : counters_) {
        const bool from_set = std::find(set.begin(), set.end(), name) != set.end();
        if (!from_set || host->Validate({name}).ok()) {
          names_.push_back(name);
        } else {
          skipped += (skipped.empty() ? "" : ", ") + name;
        }
      }
      if (!skipped.empty()) {
        Log(LogSeverity::kDebug, "pm sampling: GPU %u (%s) has no %s; sampled without them",
            device_, chip_.c_str(), skipped.c_str());
      }
    }
    StatusOr<MetricPlan> planned =
        BuildMetricPlan(chip_, CUPTI_PROFILER_TYPE_PM_SAMPLING, availability, names_);
    if (!planned.ok()) return planned.status().WithContext("KP_PM_SAMPLING");
    plan_ = std::move(planned.value());
    if (plan_.num_passes != 1) {
      return Status::Error("the counters need " + std::to_string(plan_.num_passes) + " passes on " +
                           chip_ +
                           "; PM sampling reads one pass only: drop counters (kptrace metrics "
                           "check --mode pm --chip " +
                           chip_ + " NAMES shows each counter's passes)")
          .WithContext("KP_PM_SAMPLING");
    }

    CUpti_PmSampling_Enable_Params en{};
    en.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE;
    en.deviceIndex = device_;
    if (Status s = CheckSetUpCall("cuptiPmSamplingEnable", cuptiPmSamplingEnable(&en)); !s.ok())
      return s;
    object_ = en.pPmSamplingObject;

    CUpti_PmSampling_SetConfig_Params sc{};
    sc.structSize = CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE;
    sc.pPmSamplingObject = object_;
    sc.configSize = plan_.config_image.size();
    sc.pConfig = plan_.config_image.data();
    sc.hardwareBufferSize = kHardwareBufferBytes;
    sc.samplingInterval = interval_ns_;
    sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    // KEEP_LATEST: a late decode loses the oldest samples (counted from the gaps in the sample
    // times) rather than the newest.
    sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
    if (Status s = CheckSetUpCall("cuptiPmSamplingSetConfig", cuptiPmSamplingSetConfig(&sc));
        !s.ok())
      return s;

    name_ptrs_.clear();
    for (const std::string& n : names_) name_ptrs_.push_back(n.c_str());
    CUpti_PmSampling_GetCounterDataSize_Params cs{};
    cs.structSize = CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE;
    cs.pPmSamplingObject = object_;
    cs.pMetricNames = name_ptrs_.data();
    cs.numMetrics = name_ptrs_.size();
    // Tens of KB per sample; see PmImageSamples for the size.
    cs.maxSamples = PmImageSamples(interval_ns_);
    if (Status s = CheckCuptiCall("cuptiPmSamplingGetCounterDataSize",
                                  cuptiPmSamplingGetCounterDataSize(&cs));
        !s.ok())
      return s;
    image_.assign(cs.counterDataSize, 0);
    if (Status s = InitializeImage(); !s.ok()) return s;

    CUpti_PmSampling_Start_Params st{};
    st.structSize = CUpti_PmSampling_Start_Params_STRUCT_SIZE;
    st.pPmSamplingObject = object_;
    if (Status s = CheckSetUpCall("cuptiPmSamplingStart", cuptiPmSamplingStart(&st)); !s.ok())
      return s;
    started_ = true;
    started_at_ = TraceNow();
    return Status();
  }

  Status InitializeImage() {
    const uint64_t t0 = SteadyNs();
    CUpti_PmSampling_CounterDataImage_Initialize_Params ii{};
    ii.structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE;
    ii.pPmSamplingObject = object_;
    ii.counterDataSize = image_.size();
    ii.pCounterData = image_.data();
    const CUptiResult r = cuptiPmSamplingCounterDataImageInitialize(&ii);
    timing_.initialize_ns += SteadyNs() - t0;
    return CheckCuptiCall("cuptiPmSamplingCounterDataImageInitialize", r);
  }

  // Drains the hardware buffer into the image and the image into `batch`.
 public:
  StatusOr<PmDecode> Decode(PmSampleBatch* batch) override {
    if (object_ == nullptr) return Status::Error("PM sampling is not enabled on this GPU");
    for (int round = 0; round < 64; ++round) {
      CUpti_PmSampling_DecodeData_Params dd{};
      dd.structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE;
      dd.pPmSamplingObject = object_;
      dd.pCounterDataImage = image_.data();
      dd.counterDataImageSize = image_.size();
      const uint64_t t0 = SteadyNs();
      const CUptiResult r = cuptiPmSamplingDecodeData(&dd);
      timing_.decode_ns += SteadyNs() - t0;
      ++timing_.decodes;
      if (dd.overflow != 0) ++batch->overflows;  // KEEP_LATEST: the oldest records were lost
      if (r == CUPTI_ERROR_OUT_OF_MEMORY) {
        // The hardware buffer overflowed: decoding fails from here on until the session is
        // enabled again.
        if (dd.overflow == 0) ++batch->overflows;
        return PmDecode::kOverflow;
      }
      if (Status s = CheckCuptiCall("cuptiPmSamplingDecodeData", r); !s.ok()) return s;
      CUpti_PmSampling_GetCounterDataInfo_Params di{};
      di.structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE;
      di.pCounterDataImage = image_.data();
      di.counterDataImageSize = image_.size();
      if (Status s = CheckCuptiCall("cuptiPmSamplingGetCounterDataInfo",
                                    cuptiPmSamplingGetCounterDataInfo(&di));
          !s.ok())
        return s;
      ReadSamples(di.numCompletedSamples, batch);
      if (Status s = InitializeImage(); !s.ok()) return s;
      if (dd.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
    }
    return PmDecode::kOk;
  }

 private:
  void ReadSamples(size_t completed, PmSampleBatch* batch) {
    std::vector<double> values(names_.size());
    for (size_t i = 0; i < completed; ++i) {
      CUpti_PmSampling_CounterData_GetSampleInfo_Params si{};
      si.structSize = CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE;
      si.pPmSamplingObject = object_;
      si.pCounterDataImage = image_.data();
      si.counterDataImageSize = image_.size();
      si.sampleIndex = i;
      const uint64_t t0 = SteadyNs();
      const CUptiResult info = cuptiPmSamplingCounterDataGetSampleInfo(&si);
      timing_.info_ns += SteadyNs() - t0;
      ++timing_.samples;
      if (info != CUPTI_SUCCESS) {
        ++batch->dropped;
        continue;
      }
      // After a full image, samples come back with no time or out of order; samples after a
      // stop can be empty. Neither covers a sampling interval of its own.
      if (first_seen_ && (si.startTimestamp == 0 || si.endTimestamp <= si.startTimestamp ||
                          si.startTimestamp + interval_ns_ / 2 < last_end_)) {
        ++batch->dropped;
        continue;
      }
      if (!first_seen_) {
        // The first sample spans Enable to Start: not a sampling interval, dropped.
        first_seen_ = true;
        Log(LogSeverity::kDebug,
            "pm sampling: GPU %u first sample ends at %llu, Start returned at %llu on the trace "
            "clock (%+lld ns)",
            device_, static_cast<unsigned long long>(si.endTimestamp),
            static_cast<unsigned long long>(started_at_),
            static_cast<long long>(started_at_) - static_cast<long long>(si.endTimestamp));
        last_end_ = si.endTimestamp;
        continue;
      }
      const uint64_t t1 = SteadyNs();
      const CUptiResult evaluated =
          EvaluateToGpuValues(plan_.host->raw(), image_, i, name_ptrs_, values.data());
      timing_.evaluate_ns += SteadyNs() - t1;
      if (evaluated != CUPTI_SUCCESS) {
        ++batch->dropped;
        continue;
      }
      // Samples overwritten in the hardware buffer (KEEP_LATEST) show as a gap.
      if (last_end_ != 0 && si.startTimestamp > last_end_ + interval_ns_ / 2) {
        batch->dropped += (si.startTimestamp - last_end_ + interval_ns_ / 2) / interval_ns_;
      }
      last_end_ = si.endTimestamp;
      batch->start.push_back(si.startTimestamp);
      batch->end.push_back(si.endTimestamp);
      batch->values.insert(batch->values.end(), values.begin(), values.end());
    }
  }

  const uint32_t device_;
  const std::vector<std::string> counters_;
  const bool gpu_set_;
  const uint64_t interval_ns_;

  std::string chip_;
  std::vector<std::string> names_;
  std::vector<const char*> name_ptrs_;
  MetricPlan plan_;
  CUpti_PmSampling_Object* object_ = nullptr;
  std::vector<uint8_t> image_;
  uint64_t started_at_ = 0;
  bool started_ = false;  // Start succeeded and Stop has not been called
  bool profiler_initialized_ = false;
  bool busy_ = false;  // the last Start failed because another session holds the counters
  bool first_seen_ = false;
  uint64_t last_end_ = 0;
  // Where the decoding time goes (logged at debug level when the session closes).
  struct {
    uint64_t decodes = 0, samples = 0;
    uint64_t decode_ns = 0, info_ns = 0, evaluate_ns = 0, initialize_ns = 0;
  } timing_;
};

std::unique_ptr<PmSession> MakeCuptiPmSession(uint32_t device, std::vector<std::string> counters,
                                              bool gpu_set, uint64_t interval_ns) {
  return std::make_unique<CuptiPmSession>(device, std::move(counters), gpu_set, interval_ns);
}

}  // namespace kp
