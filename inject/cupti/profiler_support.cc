#include "inject/cupti/profiler_support.h"

#include "common/metric_plan.h"

namespace kp {

bool CheckCuptiCall(const char* call, CUptiResult result, std::string* error) {
  if (result == CUPTI_SUCCESS) return true;
  *error = CuptiCallError(call, result);
  const std::string why = ExplainCounterAccessError(result);
  if (!why.empty()) *error += ": " + why;
  return false;
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

bool CheckDeviceSupported(uint32_t device, CUpti_Profiler_API api, std::string* error) {
  CUpti_Profiler_DeviceSupported_Params ds{};
  ds.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
  ds.cuDevice = static_cast<CUdevice>(device);
  ds.api = api;
  if (!CheckCuptiCall("cuptiProfilerDeviceSupported", cuptiProfilerDeviceSupported(&ds), error))
    return false;
  DeviceSupportLevels levels;
  levels.overall = ds.isSupported;
  levels.architecture = ds.architecture;
  levels.sli = ds.sli;
  levels.vgpu = ds.vGpu;
  levels.confidential_compute = ds.confidentialCompute;
  levels.cmp = ds.cmp;
  levels.wsl = ds.wsl;
  const std::string unsupported = ExplainDeviceSupport(levels);
  if (unsupported.empty()) return true;
  *error = "device " + std::to_string(device) + " cannot be profiled: " + unsupported;
  return false;
}

}  // namespace kp
