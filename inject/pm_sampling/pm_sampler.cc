#include "inject/pm_sampling/pm_sampler.h"

#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <thread>

#include "common/metric_plan.h"
#include "common/pm_counters.h"
#include "inject/cupti/profiler_support.h"
#include "inject/log/log.h"

namespace kp {
namespace {

constexpr const char* kComponent = "pm sampling";
constexpr const char* kOff = "PM sampling is off for this GPU, tracing goes on";
// Hardware buffer the GPU writes raw samples to, drained by every decode (Kineto's size; a
// sample takes several KB there, so this holds about a second at 100 us).
constexpr size_t kHardwareBufferBytes = 64u << 20;
// Samples the counter-data image holds (tens of KB each). Decoding every quarter of that keeps a
// late decode from filling it: a full image loses the samples beyond it.
constexpr uint32_t kMaxSamplesPerDecode = 2048;
constexpr int kMaxDecodeFailures = 10;
// When a sampler whose GPU's counters are held by another session tries again: after 2 s, then
// twice as long each time up to a minute (each try queries the counters, ~0.1-0.6 s of CPU).
constexpr std::chrono::seconds kBusyRetryFirst(2), kBusyRetryMax(60);

bool Call(const char* name, CUptiResult r, std::string* error) {
  const Status called = CheckCuptiCall(name, r);
  if (!called.ok()) *error = called.message();
  return called.ok();
}

// The GPU's counters are held by another session: on the H200, a second process's
// cuptiPmSamplingGetCounterAvailability returns HARDWARE_BUSY while the first one samples;
// a second Enable on one device returns INVALID_OPERATION.
bool Busy(const char* call, CUptiResult r, std::string* error) {
  if (r != CUPTI_ERROR_HARDWARE_BUSY && r != CUPTI_ERROR_INVALID_OPERATION) return false;
  *error = "another process (or profiler) is sampling this GPU already (" +
           CuptiCallError(call, r) + "); its samples are in that process's trace";
  return true;
}

uint64_t TraceNow() {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

// Decoded samples on their way to the encoder thread.
struct SampleBatch {
  std::vector<uint64_t> start, end;
  std::vector<double> values;  // num_counters per sample
  uint64_t dropped = 0, overflows = 0;
};

}  // namespace

class PmSampling::DeviceSampler {
 public:
  DeviceSampler(uint32_t device, std::vector<std::string> counters, bool gpu_set,
                uint64_t interval_ns, Post post)
      : device_(device),
        counters_(std::move(counters)),
        gpu_set_(gpu_set),
        interval_ns_(interval_ns),
        post_(std::move(post)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~DeviceSampler() { Stop(false, std::chrono::hours(24)); }

  // Idempotent: ends the sampler thread, after one last decode when `drain`. Waits at most
  // `wait` for it; a thread still busy after that (in its set-up) is left to finish on its own:
  // the samplers are never destroyed while the process runs (see PmSampling::Shutdown). The PM
  // sampling session itself is left as it is.
  void Stop(bool drain, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
    drain_ = drain;
    wake_.notify_all();
    const bool finished = done_.wait_for(lock, wait, [this] { return finished_; });
    lock.unlock();
    std::lock_guard<std::mutex> join(join_mu_);  // a context destroy and exit may race here
    if (!thread_.joinable()) return;
    if (finished) {
      thread_.join();
    } else {
      thread_.detach();
    }
  }

 private:
  void Run() {
    Sample();
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    done_.notify_all();
  }

  bool StopRequested() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

  void Sample() {
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    bool said_busy = false;
    std::chrono::seconds retry = kBusyRetryFirst;
    while (true) {
      busy_ = false;
      if (Setup(&error)) break;
      Teardown();
      if (StopRequested()) return;
      if (!busy_) {
        LogNotice(LogSeverity::kError, kComponent, "GPU " + std::to_string(device_) + ": " + error,
                  kOff);
        return;
      }
      // Another session holds the counters (another process sampling, a compile worker that
      // inherited KP_PM_SAMPLING, ncu): said once, then tried again until it ends.
      if (!said_busy) {
        said_busy = true;
        LogNotice(LogSeverity::kWarning, kComponent,
                  "GPU " + std::to_string(device_) + ": " + error,
                  "PM sampling is off for this GPU while that lasts (kp tries again from time to "
                  "time), tracing goes on");
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, retry, [this] { return stop_; })) return;
      retry = std::min(retry * 2, kBusyRetryMax);
    }
    if (said_busy) {
      LogNotice(
          LogSeverity::kInfo, kComponent,
          "GPU " + std::to_string(device_) + ": the other session ended; sampling from now on");
    }
    const double setup_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Log(LogSeverity::kDebug,
        "pm sampling: GPU %u (%s) samples %zu counters every %llu us (set-up %.0f ms)", device_,
        chip_.c_str(), names_.size(), static_cast<unsigned long long>(interval_ns_ / 1000),
        setup_ms);
    // Decode every quarter of the counter-data image, so a late decode does not fill it.
    const uint64_t period_ms = std::clamp<uint64_t>(
        interval_ns_ * (kMaxSamplesPerDecode / 4) / 1000000, uint64_t{10}, uint64_t{200});
    std::unique_lock<std::mutex> lock(mu_);
    int failures = 0;  // consecutive failed decodes
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(period_ms));
      if (stop_) break;
      lock.unlock();
      failures = Decode() ? 0 : failures + 1;
      lock.lock();
      if (overflowed_) break;  // the hardware buffer stays unusable: said once, counted
      if (failures >= kMaxDecodeFailures) {
        LogNotice(LogSeverity::kError, kComponent,
                  "GPU " + std::to_string(device_) + ": decoding failed " +
                      std::to_string(failures) + " times in a row; sampling stopped here",
                  "tracing goes on");
        break;
      }
    }
    if (stop_ && drain_ && !overflowed_) {
      lock.unlock();
      Decode();  // the samples completed since the last period
    }
  }

  bool Setup(std::string* error) {
    if (!profiler_initialized_) {
      CUpti_Profiler_Initialize_Params ip{};
      ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
      if (!Call("cuptiProfilerInitialize", cuptiProfilerInitialize(&ip), error)) return false;
      profiler_initialized_ = true;
    }

    if (const Status supported = CheckDeviceSupported(device_, CUPTI_PROFILER_PM_SAMPLING);
        !supported.ok()) {
      *error = supported.message();
      return false;
    }

    CUpti_Device_GetChipName_Params cn{};
    cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
    cn.deviceIndex = device_;
    if (!Call("cuptiDeviceGetChipName", cuptiDeviceGetChipName(&cn), error)) return false;
    chip_ = cn.pChipName != nullptr ? cn.pChipName : "";

    CUpti_PmSampling_GetCounterAvailability_Params ca{};
    ca.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
    ca.deviceIndex = device_;
    const CUptiResult available = cuptiPmSamplingGetCounterAvailability(&ca);
    busy_ = Busy("cuptiPmSamplingGetCounterAvailability", available, error);
    if (busy_ || !Call("cuptiPmSamplingGetCounterAvailability", available, error)) return false;
    std::vector<uint8_t> availability(ca.counterAvailabilityImageSize);
    ca.pCounterAvailabilityImage = availability.data();
    if (!Call("cuptiPmSamplingGetCounterAvailability", cuptiPmSamplingGetCounterAvailability(&ca),
              error))
      return false;

    // The named set keeps what this chip has (no NVLink on a PCIe card); a list the user wrote
    // must be valid as written.
    names_ = counters_;
    if (gpu_set_) {
      StatusOr<std::unique_ptr<MetricHost>> created =
          MetricHost::Create(chip_, CUPTI_PROFILER_TYPE_PM_SAMPLING, availability);
      if (!created.ok()) {
        *error = created.status().message();
        return false;
      }
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
    if (!planned.ok()) {
      *error = planned.status().WithContext("KP_PM_SAMPLING").message();
      return false;
    }
    plan_ = std::move(planned.value());
    if (plan_.num_passes != 1) {
      *error = "KP_PM_SAMPLING: the counters need " + std::to_string(plan_.num_passes) +
               " passes on " + chip_ +
               "; PM sampling reads one pass only: drop counters (kptrace metrics check --mode pm "
               "--chip " +
               chip_ + " NAMES shows each counter's passes)";
      return false;
    }

    if (StopRequested()) return false;  // the context went away during the set-up
    CUpti_PmSampling_Enable_Params en{};
    en.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE;
    en.deviceIndex = device_;
    const CUptiResult enabled = cuptiPmSamplingEnable(&en);
    busy_ = Busy("cuptiPmSamplingEnable", enabled, error);
    if (busy_ || !Call("cuptiPmSamplingEnable", enabled, error)) return false;
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
    if (!Call("cuptiPmSamplingSetConfig", cuptiPmSamplingSetConfig(&sc), error)) return false;

    name_ptrs_.clear();
    for (const std::string& n : names_) name_ptrs_.push_back(n.c_str());
    CUpti_PmSampling_GetCounterDataSize_Params cs{};
    cs.structSize = CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE;
    cs.pPmSamplingObject = object_;
    cs.pMetricNames = name_ptrs_.data();
    cs.numMetrics = name_ptrs_.size();
    cs.maxSamples = kMaxSamplesPerDecode;
    if (!Call("cuptiPmSamplingGetCounterDataSize", cuptiPmSamplingGetCounterDataSize(&cs), error))
      return false;
    image_.assign(cs.counterDataSize, 0);
    if (!InitializeImage(error)) return false;

    // The config record goes first; the samples posted later find its id.
    auto id = config_id_;
    PmSampleConfigInfo info;
    info.device = device_;
    info.counter_names = names_;
    info.interval_ns = interval_ns_;
    info.chip = chip_;
    post_([id, info](TraceEncoder& enc) { *id = enc.AddPmSampleConfig(info); });

    CUpti_PmSampling_Start_Params st{};
    st.structSize = CUpti_PmSampling_Start_Params_STRUCT_SIZE;
    st.pPmSamplingObject = object_;
    if (!Call("cuptiPmSamplingStart", cuptiPmSamplingStart(&st), error)) return false;
    started_at_ = TraceNow();
    return true;
  }

  bool InitializeImage(std::string* error) {
    CUpti_PmSampling_CounterDataImage_Initialize_Params ii{};
    ii.structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE;
    ii.pPmSamplingObject = object_;
    ii.counterDataSize = image_.size();
    ii.pCounterData = image_.data();
    return Call("cuptiPmSamplingCounterDataImageInitialize",
                cuptiPmSamplingCounterDataImageInitialize(&ii), error);
  }

  // Drains the hardware buffer into the image and the image into a batch for the encoder.
  // False after an error that ends sampling on this device.
  bool Decode() {
    auto batch = std::make_shared<SampleBatch>();
    std::string error;
    bool ok = true;
    for (int round = 0; round < 64; ++round) {
      CUpti_PmSampling_DecodeData_Params dd{};
      dd.structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE;
      dd.pPmSamplingObject = object_;
      dd.pCounterDataImage = image_.data();
      dd.counterDataImageSize = image_.size();
      const CUptiResult r = cuptiPmSamplingDecodeData(&dd);
      if (dd.overflow != 0) ++batch->overflows;  // KEEP_LATEST: the oldest records were lost
      if (r == CUPTI_ERROR_OUT_OF_MEMORY) {
        // The hardware buffer overflowed: decoding fails from here on until the session is
        // enabled again.
        if (dd.overflow == 0) ++batch->overflows;
        overflowed_ = true;
        LogNotice(LogSeverity::kWarning, kComponent,
                  "GPU " + std::to_string(device_) +
                      ": the hardware sample buffer overflowed (decoding fell behind); sampling "
                      "stopped here (a longer KP_PM_INTERVAL_US avoids this)",
                  "tracing goes on");
        break;
      }
      if (r != CUPTI_SUCCESS) {
        Call("cuptiPmSamplingDecodeData", r, &error);
        ok = false;
        break;
      }
      CUpti_PmSampling_GetCounterDataInfo_Params di{};
      di.structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE;
      di.pCounterDataImage = image_.data();
      di.counterDataImageSize = image_.size();
      if (!Call("cuptiPmSamplingGetCounterDataInfo", cuptiPmSamplingGetCounterDataInfo(&di),
                &error)) {
        ok = false;
        break;
      }
      ReadSamples(di.numCompletedSamples, batch.get());
      if (!InitializeImage(&error)) {
        ok = false;
        break;
      }
      if (dd.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) break;
    }
    if (!batch->start.empty() || batch->dropped != 0 || batch->overflows != 0) {
      auto id = config_id_;
      const uint32_t device = device_;
      const uint32_t n = static_cast<uint32_t>(names_.size());
      post_([id, batch, device, n](TraceEncoder& enc) {
        PmSampleRecord r;
        r.config = *id;
        r.device = device;
        r.num_values = n;
        for (size_t i = 0; i < batch->start.size(); ++i) {
          r.start = batch->start[i];
          r.end = batch->end[i];
          r.values = batch->values.data() + i * n;
          enc.AddPmSample(r);
        }
        enc.stats().pm_samples_dropped += batch->dropped;
        enc.stats().pm_buffer_overflows += batch->overflows;
      });
    }
    if (!ok && !decode_error_reported_) {
      decode_error_reported_ = true;  // one line, the first cause; the losses are counted
      LogNotice(LogSeverity::kWarning, kComponent,
                "GPU " + std::to_string(device_) + ": " + error + "; samples of that decode lost",
                "sampling goes on");
    }
    if (!ok) {
      post_([](TraceEncoder& enc) { ++enc.stats().pm_samples_dropped; });
    }
    return ok;
  }

  void ReadSamples(size_t completed, SampleBatch* batch) {
    std::vector<double> values(names_.size());
    for (size_t i = 0; i < completed; ++i) {
      CUpti_PmSampling_CounterData_GetSampleInfo_Params si{};
      si.structSize = CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE;
      si.pPmSamplingObject = object_;
      si.pCounterDataImage = image_.data();
      si.counterDataImageSize = image_.size();
      si.sampleIndex = i;
      if (cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS) {
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
      if (EvaluateToGpuValues(plan_.host->raw(), image_, i, name_ptrs_, values.data()) !=
          CUPTI_SUCCESS) {
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

  void Teardown() {
    if (object_ != nullptr) {
      CUpti_PmSampling_Disable_Params dp{};
      dp.structSize = CUpti_PmSampling_Disable_Params_STRUCT_SIZE;
      dp.pPmSamplingObject = object_;
      cuptiPmSamplingDisable(&dp);
      object_ = nullptr;
    }
    plan_ = MetricPlan();  // a retry builds its own
  }

  const uint32_t device_;
  const std::vector<std::string> counters_;
  const bool gpu_set_;
  const uint64_t interval_ns_;
  Post post_;

  std::string chip_;
  std::vector<std::string> names_;
  std::vector<const char*> name_ptrs_;
  MetricPlan plan_;
  CUpti_PmSampling_Object* object_ = nullptr;
  std::vector<uint8_t> image_;
  // Written on the encoder thread by the config task, read there by the sample tasks.
  std::shared_ptr<uint32_t> config_id_ = std::make_shared<uint32_t>(0);
  uint64_t started_at_ = 0;
  bool profiler_initialized_ = false;
  bool busy_ = false;  // the last Setup failed because another session holds the counters
  bool first_seen_ = false;
  bool decode_error_reported_ = false;
  bool overflowed_ = false;
  uint64_t last_end_ = 0;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool drain_ = false;
  bool finished_ = false;  // Run() has returned
  std::condition_variable done_;
  std::mutex join_mu_;  // guards thread_ after construction
  std::thread thread_;
};

PmSampling::PmSampling(const Config& config, Post post)
    : counters_(config.pm_sampling),
      gpu_set_(config.pm_sampling_gpu_set),
      interval_ns_(uint64_t{config.pm_interval_us} * 1000),
      post_(std::move(post)) {}

PmSampling::~PmSampling() { Shutdown(); }

std::unique_ptr<PmSampling> PmSampling::Create(const Config& config, Post post) {
  if (config.pm_sampling.empty()) return nullptr;
  if (!config.metrics.empty()) {
    // Both need the GPU's performance counters: whichever starts first holds them, and the other
    // fails with CUPTI_ERROR_HARDWARE_BUSY (seen on the H200).
    LogNotice(LogSeverity::kError, kComponent,
              "KP_PM_SAMPLING and KP_METRICS cannot run together (both need the GPU's "
              "performance counters); drop one of them",
              "PM sampling is off, metrics and tracing go on");
    return nullptr;
  }
  return std::unique_ptr<PmSampling>(new PmSampling(config, std::move(post)));
}

void PmSampling::OnContextCreated(CUcontext context, uint32_t device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  context_devices_[context] = device;
  ++live_contexts_[device];
  if (devices_.count(device) != 0) return;
  devices_[device] =
      std::make_unique<DeviceSampler>(device, counters_, gpu_set_, interval_ns_, post_);
}

void PmSampling::OnContextDestroying(CUcontext context) {
  DeviceSampler* stopping = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = context_devices_.find(context);
    if (it == context_devices_.end()) return;
    const uint32_t device = it->second;
    context_devices_.erase(it);
    if (--live_contexts_[device] > 0) return;
    auto d = devices_.find(device);
    if (d == devices_.end()) return;
    // Left in the map, stopped: a context created later on this device does not restart it.
    stopping = d->second.get();
  }
  // No last decode here: the decode would run on the sampler thread while this one is inside
  // the driver destroying the context.
  if (stopping) stopping->Stop(/*drain=*/false, std::chrono::milliseconds(200));
}

// At exit: each sampler thread decodes once more and ends. The PM sampling sessions are not
// stopped or disabled and the samplers are not destroyed: on the H200 with CUDA 13.0, stopping,
// disabling and freeing them during exit corrupted the heap; the driver ends the sessions with
// the process.
void PmSampling::Shutdown() {
  std::vector<DeviceSampler*> samplers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [device, sampler] : devices_) samplers.push_back(sampler.get());
  }
  for (DeviceSampler* sampler : samplers) sampler->Stop(/*drain=*/true, std::chrono::seconds(2));
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [device, sampler] : devices_) static_cast<void>(sampler.release());
}

}  // namespace kp
