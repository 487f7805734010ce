// kernel_launch.h: a driver kernel launch as kp's own kernel replay needs it (kernel mode with
// cache control, kernel_mode_collector.h): the launch's arguments read from the driver
// callback's parameters at its entry, and the same launch issued again from its exit callback.
//
// The pointers (kernel arguments, `extra`, the launch config of cuLaunchKernelEx) belong to the
// application's call and stay valid until that call returns, i.e. through its exit callback,
// which is the only place Relaunch is used.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include "common/status.h"

namespace kp {

struct KernelLaunch {
  enum class Form {
    kKernel,
    kKernelPtsz,
    kKernelEx,
    kKernelExPtsz,
    kCooperative,
    kCooperativePtsz
  };
  Form form = Form::kKernel;
  CUfunction function = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
  const CUlaunchConfig* config = nullptr;  // the Ex forms
};

// The launch of a driver callback's `function_params` (CUpti_CallbackData::functionParams) for a
// relaunchable `cbid`; false for any other call.
bool ReadKernelLaunch(CUpti_CallbackId cbid, const void* function_params, KernelLaunch* out);

// Issues `launch` again through the driver entry point of its form (looked up in the process,
// driver_symbol.h). Called inside kp's callback, so the tracer records no API call for it.
Status Relaunch(const KernelLaunch& launch);

}  // namespace kp
