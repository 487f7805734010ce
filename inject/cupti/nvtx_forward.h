// nvtx_forward.h: hand NVTX's tool export table to the libcupti the calling library is bound to.
//
// NVTX loads the library named by NVTX_INJECTION64_PATH and calls its InitializeInjectionNvtx2.
// NVTX markers reach CUPTI only if that call ends in the libcupti copy the process actually uses
// (PyTorch loads pip's copy; NVTX pointed at the toolkit's copy reaches a second CUPTI instance
// no subscriber sees: docs/cupti.md, "NVTX"). libkpinject and bench/floor's libkpfloor both
// export their own InitializeInjectionNvtx2 and forward through this.
#pragma once

namespace kp {

// Calls InitializeInjectionNvtx2 of the libcupti that defines cuptiGetVersion for the caller;
// returns its result, or 0 (NVTX stays silent in that module, harmlessly) if it cannot be found.
// The libcupti reference taken here is kept: libcupti stays loaded for good.
int ForwardNvtxInitToCupti(void* get_export_table);

}  // namespace kp
