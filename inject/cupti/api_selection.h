// api_selection.h: which CUDA runtime/driver API calls kp records as activity records.
//
// KP_API=launch (the default) keeps the calls that explain GPU work -- launches, copies,
// memsets, synchronization, allocation, events and graph launches -- here named in both runtime
// and driver form (which form is recorded: api_call_recorder.h). Tracing every API call taxes
// hot no-op calls (cudaGetDevice, cuCtxGetCurrent ...) that PyTorch makes hundreds of times per
// step (docs/cupti.md). The selection is made by name, by walking every callback id of a domain,
// so new versions of a call (cudaLaunchKernel_v7000, __cudaLaunchKernel_v13000, *_ptsz) are
// picked up without a hand-kept cbid list.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace kp {

// True for the launch-related names (runtime or driver form).
bool IsLaunchRelatedApiName(std::string_view name);

// True for calls that may issue a copy or a memset (cudaMemcpy*, cuMemset*, graph launches, and
// graphs where their copy and memset nodes are made or instantiated): the first one turns the
// MEMCPY/MEMSET activity kinds on (api_call_recorder.h).
bool MayCopyApiName(std::string_view name);

// True for calls that launch exactly one kernel (cudaLaunchKernel*, __cudaLaunchKernel*,
// cudaLaunchCooperativeKernel*, cuLaunchKernel*, cuLaunchCooperativeKernel*; not graph launches
// nor the multi-device form): each successful one gets one kernel record (cupti_detach.h waits
// for them).
bool LaunchesOneKernelApiName(std::string_view name);

// Every cbid of `domain` (CUPTI_CB_DOMAIN_RUNTIME_API or _DRIVER_API) whose name
// (cuptiGetCallbackName) IsLaunchRelatedApiName. Works without a GPU.
std::vector<CUpti_CallbackId> SelectLaunchRelatedCbids(CUpti_CallbackDomain domain);

}  // namespace kp
