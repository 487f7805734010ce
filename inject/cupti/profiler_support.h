// profiler_support.h: the checks the injector's counter collectors (KP_METRICS on the range
// profiler, KP_PM_SAMPLING) share before they touch a GPU's counters: one message per failed
// CUPTI call, with the fix for results that mean "this machine may not read counters", and
// cuptiProfilerDeviceSupported turned into the reason a device cannot be profiled.
#pragma once

#include <cupti.h>
#include <cupti_profiler_target.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

struct CUpti_Profiler_Host_Object;

namespace kp {

// OK on CUPTI_SUCCESS; else "<call> failed: ... (<code>)[: <fix>]".
Status CheckCuptiCall(const char* call, CUptiResult result);

// OK when `device` supports `api`; else why not (the call's failure, or the reason from
// ExplainDeviceSupport).
Status CheckDeviceSupported(uint32_t device, CUpti_Profiler_API api);

// The values of `metrics` for range (or PM sample) `index` of a counter-data image, into
// values[0 .. metrics.size()): cuptiProfilerHostEvaluateToGpuValues for both collectors.
CUptiResult EvaluateToGpuValues(CUpti_Profiler_Host_Object* host, const std::vector<uint8_t>& image,
                                size_t index, const std::vector<const char*>& metrics,
                                double* values);

}  // namespace kp
