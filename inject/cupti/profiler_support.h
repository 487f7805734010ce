// profiler_support.h: the checks the injector's counter collectors (KP_METRICS on the range
// profiler, KP_PM_SAMPLING) share before they touch a GPU's counters: one message per failed
// CUPTI call, with the fix for results that mean "this machine may not read counters", and
// cuptiProfilerDeviceSupported turned into the reason a device cannot be profiled.
#pragma once

#include <cupti.h>
#include <cupti_profiler_target.h>

#include <chrono>
#include <cstdint>
#include <functional>
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

// Two processes setting up counters on one GPU at the same moment (two ranks sharing it) can
// each find them held by the other's set-up call (a counter-availability query takes ~0.1 s on
// an H200), and then neither measures. RetryWhileBusy makes `call` again while it answers
// CUPTI_ERROR_HARDWARE_BUSY, at most kBusyRetries more times, after BusyPause(attempt, seed):
// 50, 100 and 200 ms, each plus 0-120 ms drawn afresh for every attempt from the seed, so that
// two processes' retries fall apart and one of them wins. A session that holds the counters for
// good (ncu, DCGM, the other process's profiler) still fails, after 0.35-0.71 s of pauses.
constexpr int kBusyRetries = 3;
std::chrono::milliseconds BusyPause(int attempt, uint64_t seed);
CUptiResult RetryWhileBusy(const std::function<CUptiResult()>& call,
                           const std::function<void(std::chrono::milliseconds)>& pause,
                           uint64_t seed);
// The same, sleeping the calling thread, seeded with the pid and the clock (processes in
// separate containers may share a pid); each retry is a KP_LOG=debug line naming `name`.
CUptiResult RetryWhileBusy(const char* name, const std::function<CUptiResult()>& call);

// The values of `metrics` for range (or PM sample) `index` of a counter-data image, into
// values[0 .. metrics.size()): cuptiProfilerHostEvaluateToGpuValues for both collectors.
CUptiResult EvaluateToGpuValues(CUpti_Profiler_Host_Object* host, const std::vector<uint8_t>& image,
                                size_t index, const std::vector<const char*>& metrics,
                                double* values);

}  // namespace kp
