// profiler_support.h: the checks the injector's counter collectors (KP_METRICS on the range
// profiler, KP_PM_SAMPLING) share before they touch a GPU's counters: one message per failed
// CUPTI call, with the fix for results that mean "this machine may not read counters", and
// cuptiProfilerDeviceSupported turned into the reason a device cannot be profiled.
#pragma once

#include <cupti.h>
#include <cupti_profiler_target.h>

#include <cstdint>
#include <string>

namespace kp {

// True on CUPTI_SUCCESS; else *error = "<call> failed: ... (<code>)[: <fix>]".
bool CheckCuptiCall(const char* call, CUptiResult result, std::string* error);

// True when `device` supports `api`; else *error says why (the call's failure, or the reason
// from ExplainDeviceSupport).
bool CheckDeviceSupported(uint32_t device, CUpti_Profiler_API api, std::string* error);

}  // namespace kp
