// l2_sweep.h: reads a buffer twice the size of the GPU's L2 on a stream of kp's own and waits for
// it, so that a measured range starts from an L2 in a known state. Range mode needs it after each
// cuptiRangeProfilerStart: measured on the H200 (CUDA 13.0, CUPTI 130001), the first
// write-heavy range after a Start read ~29 MB more dram__bytes_write (and up to 2.6x its
// gpu__time_duration) than the same range later in the pass, unless a read sweep of the L2 ran
// between the Start and that range (bench/results/metrics_probe_h200.txt). With
// KP_METRICS_CACHE=range it runs before every measured range, like ncu's default
// --cache-control all.
//
// The kernel is PTX text (L2SweepPtx) JIT-compiled by the driver at the first use, so the
// injector needs no device code at build time. It loads only 16-byte words with .cg (L2, not
// L1) and stores nothing unless the buffer, zeroed once (by kL2ZeroKernelName, at set-up), holds
// a non-zero word, which it never does: it leaves no dirty line of its own. On sm_80 and newer
// a third kernel (kL2DiscardKernelName) then discards the buffer's lines from L2 without writing
// them back, so the measured work starts from an empty L2, as after ncu's flush. All kernel records
// are marked profiler-internal by name. Its driver calls are made inside kp's CUPTI callbacks,
// where the default API recorder (KP_API=launch) records nothing, so they are not in the trace;
// the sweep puts no other GPU record there (no memset). Cost on the H200: one ~30-70 us kernel (and
// the discard's few us) and a stream synchronization, and 2 x L2 of device memory (about 100 MB on
// the H200), allocated at the first sweep.
//
// Everything runs on a non-blocking stream of kp's own, with the thread's stream-capture mode
// set to relaxed for the duration: an application capturing a CUDA graph meanwhile is neither
// joined nor invalidated.
//
// libkpinject does not link libcuda: every driver entry point is looked up in the process.
// Not thread-safe: used by the one thread that measures (see range_mode_collector.h).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "common/status.h"

namespace kp {

inline constexpr const char* kL2SweepKernelName = "kp_l2_sweep";
inline constexpr const char* kL2ZeroKernelName = "kp_l2_zero";
inline constexpr const char* kL2DiscardKernelName = "kp_l2_discard";

// The PTX module: kL2SweepKernelName(u64 words16, u64 count, u64 sink) and
// kL2ZeroKernelName(u64 words16, u64 count).
const char* L2SweepPtx();
// The sm_80+ module: kL2DiscardKernelName(u64 lines128, u64 count).
const char* L2DiscardPtx();

class L2Sweep {
 public:
  L2Sweep() = default;
  L2Sweep(const L2Sweep&) = delete;
  L2Sweep& operator=(const L2Sweep&) = delete;
  // Frees nothing: the context owns the module, buffer and stream, and may already be gone.
  ~L2Sweep() = default;

  // Loads the module, allocates and zeroes the buffer and creates the stream in `ctx` (which must
  // be current on the calling thread). An error ("L2 sweep: <call> failed: ...") when a driver
  // call fails; what was made is given back.
  Status Init(CUcontext ctx);
  // Launches the sweep and waits for it. An error when a driver call fails.
  Status Run();

  bool ready() const { return function_ != nullptr; }
  size_t bytes() const { return bytes_; }

 private:
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUfunction discard_ = nullptr;  // null before sm_80
  CUstream stream_ = nullptr;
  CUdeviceptr buffer_ = 0, sink_ = 0;
  size_t bytes_ = 0;
  unsigned grid_ = 0;
};

}  // namespace kp
