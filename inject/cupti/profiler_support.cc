#include "inject/cupti/profiler_support.h"

#include <unistd.h>

#include <thread>
#include <utility>

#include "common/metric_plan.h"
#include "common/mix64.h"
#include "inject/log/log.h"

namespace kp {

Status CheckCuptiCall(const char* call, CUptiResult result) {
  if (result == CUPTI_SUCCESS) return Status();
  std::string message = CuptiCallError(call, result);
  const std::string why = ExplainCounterAccessError(result);
  if (!why.empty()) message += ": " + why;
  return Status::Error(std::move(message));
}

std::chrono::milliseconds BusyPause(int attempt, uint64_t seed) {
  const uint64_t jitter = Mix64(seed + static_cast<uint64_t>(attempt)) % 121;
  return std::chrono::milliseconds((50 << attempt) + static_cast<int64_t>(jitter));
}

CUptiResult RetryWhileBusy(const std::function<CUptiResult()>& call,
                           const std::function<void(std::chrono::milliseconds)>& pause,
                           uint64_t seed) {
  CUptiResult r = call();
  for (int attempt = 0; r == CUPTI_ERROR_HARDWARE_BUSY && attempt < kBusyRetries; ++attempt) {
    pause(BusyPause(attempt, seed));
    r = call();
  }
  return r;
}

CUptiResult RetryWhileBusy(const char* name, const std::function<CUptiResult()>& call) {
  const uint64_t seed =
      Mix64(static_cast<uint64_t>(getpid())) ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  int attempt = 0;
  return RetryWhileBusy(
      call,
      [&](std::chrono::milliseconds ms) {
        Log(LogSeverity::kDebug,
            "metrics: %s answered CUPTI_ERROR_HARDWARE_BUSY; retry %d of %d in %lld ms", name,
            ++attempt, kBusyRetries, static_cast<long long>(ms.count()));
        std::this_thread::sleep_for(ms);
      },
      seed);
}

CUptiResult EvaluateToGpuValues(CUpti_Profiler_Host_Object* host, const std::vector<uint8_t>& image,
                                size_t index, const std::vector<const char*>& metrics,
                                double* values) {
  CUpti_Profiler_Host_EvaluateToGpuValues_Params ev{};
  ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
  ev.pHostObject = host;
  ev.pCounterDataImage = image.data();
  ev.counterDataImageSize = image.size();
  ev.rangeIndex = index;
  ev.ppMetricNames = const_cast<const char**>(metrics.data());  // CUPTI only reads the names
  ev.numMetrics = metrics.size();
  ev.pMetricValues = values;
  return cuptiProfilerHostEvaluateToGpuValues(&ev);
}

Status CheckDeviceSupported(uint32_t device, CUpti_Profiler_API api) {
  CUpti_Profiler_DeviceSupported_Params ds{};
  ds.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
  ds.cuDevice = static_cast<CUdevice>(device);
  ds.api = api;
  if (Status called =
          CheckCuptiCall("cuptiProfilerDeviceSupported", cuptiProfilerDeviceSupported(&ds));
      !called.ok())
    return called;
  DeviceSupportLevels levels;
  levels.overall = ds.isSupported;
  levels.architecture = ds.architecture;
  levels.sli = ds.sli;
  levels.vgpu = ds.vGpu;
  levels.confidential_compute = ds.confidentialCompute;
  levels.cmp = ds.cmp;
  levels.wsl = ds.wsl;
  const std::string unsupported = ExplainDeviceSupport(levels);
  if (unsupported.empty()) return Status();
  return Status::Error("device " + std::to_string(device) + " cannot be profiled: " + unsupported);
}

}  // namespace kp
