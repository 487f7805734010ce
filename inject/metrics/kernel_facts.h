// kernel_facts.h: what a kernel record says of a launch, read from the launch's arguments and
// the driver, for the launches kernel mode measures on the application's own run with kernel
// records off (kernel_mode_collector.h): CUPTI makes no record of those, and kp makes it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "inject/metrics/kernel_launch.h"

namespace kp {

struct KernelFacts {
  std::string name;  // mangled, as in CUPTI's records (cuFuncGetName); empty if unknown
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, cluster[3] = {0, 0, 0};
  uint32_t dynamic_shared = 0, static_shared = 0, registers_per_thread = 0, local_per_thread = 0;
  uint32_t launch_type = 0;  // CUpti_ActivityLaunchType
  CUstream stream = nullptr;
  bool per_thread_stream = false;  // a _ptsz form: the default stream is the thread's
  uint32_t stream_id = 0;          // CUPTI's stream id (filled by the session)
};

// The facts of `launch` from its arguments (the Ex forms' launch config included) and the
// driver's function attributes. What the driver cannot say stays 0 (or empty).
KernelFacts DescribeKernelLaunch(const KernelLaunch& launch);

}  // namespace kp
