// launch_callbacks.h: which runtime/driver callback ids launch a kernel or a CUDA graph (the
// ones the tracer enables when a collector wants_launch_callbacks()).
#pragma once

#include <cupti.h>

namespace kp {

bool IsKernelLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
bool IsGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
// Driver calls that also submit kernels but are not measured (cuLaunch, cuLaunchGrid,
// cuLaunchGridAsync, cuLaunchCooperativeKernelMultiDevice): kernel mode only keeps kernel
// records on while they run.
bool IsUnmeasuredKernelLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

}  // namespace kp
