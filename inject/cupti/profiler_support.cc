#include "inject/cupti/profiler_support.h"

#include <unistd.h>

#include <thread>
#include <utility>

#include "common/metric_plan.h"

namespace kp {

Status CheckCuptiCall(const char* call, CUptiResult result) {
  if (result == CUPTI_SUCCESS) return Status();
  std::string message = CuptiCallError(call, result);
  const std::string why = ExplainCounterAccessError(result);
  if (!why.empty()) message += ": " + why;
  return Status::Error(std::move(message));
}

std::chrono::milliseconds BusyPause(int attempt, uint32_t seed) {
  // 60, 120, 240 ms, each plus 0-31 ms that depend on the seed and the attempt.
  const uint32_t jitter = (seed * 2654435761u + static_cast<uint32_t>(attempt) * 40503u) >> 27;
  return std::chrono::milliseconds((60 << attempt) + jitter);
}

CUptiResult RetryWhileBusy(const std::function<CUptiResult()>& call,
                           const std::function<void(std::chrono::milliseconds)>& pause,
                           uint32_t seed) {
  CUptiResult r = call();
  for (int attempt = 0; r == CUPTI_ERROR_HARDWARE_BUSY && attempt < kBusyRetries; ++attempt) {
    pause(BusyPause(attempt, seed));
    r = call();
  }
  return r;
}

CUptiResult RetryWhileBusy(const std::function<CUptiResult()>& call) {
  return RetryWhileBusy(
      call, [](std::chrono::milliseconds ms) { std::this_thread::sleep_for(ms); },
      static_cast<uint32_t>(getpid()));
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
