#include "inject/cupti/api_selection.h"

#include <cupti.h>

namespace kp {
namespace {

// Prefixes, matched against the callback name. A prefix catches every version suffix
// (_v3020, _v7000, _ptsz, _ptds, _v2 ...).
constexpr std::string_view kLaunchRelatedPrefixes[] = {
    // Runtime: launches (cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel,
    // cudaLaunchHostFunc) and the nvcc 13 <<<>>> entry point __cudaLaunchKernel (cbid 505/506).
    "cudaLaunch",
    "__cudaLaunch",
    "cudaGraphLaunch",
    "cudaMemcpy",
    "cudaMemset",
    "cudaMalloc",
    "cudaHostAlloc",
    "cudaFree",
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaEventRecord",
    "cudaEventQuery",
    "cudaStreamWaitEvent",
    // Driver.
    "cuLaunch",
    "cuGraphLaunch",
    "cuMemcpy",
    "cuMemset",
    "cuMemAlloc",
    "cuMemHostAlloc",  // cudaMallocHost, cudaHostAlloc
    // What cudaMalloc*Array and cudaFree*Array reach (the default records the driver form).
    "cuArrayCreate",
    "cuArray3DCreate",
    "cuArrayDestroy",
    "cuMipmappedArrayCreate",
    "cuMipmappedArrayDestroy",
    "cuMemFree",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEvent",
};

}  // namespace

bool IsLaunchRelatedApiName(std::string_view name) {
  for (std::string_view prefix : kLaunchRelatedPrefixes) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

bool MayCopyApiName(std::string_view name) {
  for (std::string_view prefix :
       {"cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset", "cudaGraphLaunch", "cuGraphLaunch",
        "cudaGraphAddMem", "cuGraphAddMem", "cudaGraphInstantiate", "cuGraphInstantiate"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

bool LaunchesOneKernelApiName(std::string_view name) {
  if (name.find("MultiDevice") != std::string_view::npos) return false;
  for (std::string_view prefix :
       {"cudaLaunchKernel", "__cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
        "cuLaunchCooperativeKernel"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

std::vector<CUpti_CallbackId> SelectLaunchRelatedCbids(CUpti_CallbackDomain domain) {
  std::vector<CUpti_CallbackId> selected;
  CUpti_CallbackId end = 0;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    end = CUPTI_RUNTIME_TRACE_CBID_SIZE;
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    end = CUPTI_DRIVER_TRACE_CBID_SIZE;
  }
  for (CUpti_CallbackId cbid = 1; cbid < end; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) continue;
    if (IsLaunchRelatedApiName(name)) selected.push_back(cbid);
  }
  return selected;
}

}  // namespace kp
