// nvtx_trigger_cbids.h: the NVTX callbacks a range trigger (--capture-range, --capture-schedule)
// takes: only the calls that push, pop or name a range's domain, not every NVTX callback. Shared
// with the benchmark floor (bench/floor), which prices the same set.
#pragma once

#include <cupti.h>

namespace kp {

inline constexpr CUpti_CallbackId kNvtxTriggerCbids[] = {
    CUPTI_CBID_NVTX_nvtxRangePushA,        CUPTI_CBID_NVTX_nvtxRangePushW,
    CUPTI_CBID_NVTX_nvtxRangePushEx,       CUPTI_CBID_NVTX_nvtxRangePop,
    CUPTI_CBID_NVTX_nvtxDomainRangePushEx, CUPTI_CBID_NVTX_nvtxDomainRangePop,
    CUPTI_CBID_NVTX_nvtxDomainCreateA,
};

}  // namespace kp
