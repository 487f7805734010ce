// nvtx_callback_data.h: synthetic NVTX callbacks (push/pop of a plain range) for the capture
// controller, as CUPTI delivers them, for CPU tests.
#pragma once

#include <generated_nvtx_meta.h>

#include "inject/capture/capture_controller.h"

namespace kp {

inline void Push(CaptureController& c, const char* message) {
  nvtxRangePushA_params p{message};
  CUpti_NvtxData d{"nvtxRangePushA", &p, nullptr};
  c.OnCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA, &d);
}

inline void Pop(CaptureController& c) {
  nvtxRangePop_params p{};
  CUpti_NvtxData d{"nvtxRangePop", &p, nullptr};
  c.OnCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePop, &d);
}

}  // namespace kp
