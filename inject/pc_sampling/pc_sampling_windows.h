// pc_sampling_windows.h: PC sampling inside capture windows only (issue 17). With a capture
// trigger configured (capture_hooks.h, CaptureWindowsConfigured), each context's PC sampling is
// configured with CUPTI's start/stop control and sampled only while a window is open: the
// window's opened hook starts every known context, its closed hook stops them, and a context
// created inside an open window starts at once. Without a trigger nothing here runs and PC
// sampling covers the whole run.
//
// The CUPTI calls (cuptiPCSamplingStart/Stop, with the context made current around them) are
// the sampler's (pc_sampler.cc), passed in as `Switch`; this class only decides when. It is
// thread-safe: hooks arrive from application threads (NVTX, cudaProfilerStart/Stop), kp's
// capture control thread and the exiting thread, contexts come and go on application threads.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "inject/capture/capture_state_machine.h"

namespace kp {

class PcSamplingWindows {
 public:
  // Starts (on) or stops sampling on one context; false when CUPTI refused.
  using Switch = std::function<bool(CUcontext context, bool on)>;
  // Called after a window's contexts were stopped (the sampler reads what the range left:
  // CUPTI wants a read after every stop before the next start).
  using AfterClose = std::function<void()>;

  PcSamplingWindows(Switch on_off, AfterClose after_close);
  PcSamplingWindows(const PcSamplingWindows&) = delete;
  PcSamplingWindows& operator=(const PcSamplingWindows&) = delete;

  // Registers the window hooks (capture_hooks.h); the object must then live for the rest of
  // the process. False when no hook slot is left.
  bool Attach();

  // A context configured for start/stop control: started now if a window is open.
  void AddContext(CUcontext context);
  // Before the context's last read and Disable: stopped if it samples. Unknown contexts are
  // ignored.
  void RemoveContext(CUcontext context);

  // The hooks. Idempotent: a second open (or close) in a row changes nothing.
  void Opened();
  void Closed();

  bool open() const;
  size_t sampling() const;   // contexts started and not stopped
  uint64_t refused() const;  // Start/Stop calls CUPTI refused

 private:
  static void OnOpened(const CaptureWindowInfo& window, void* self);
  static void OnClosed(const CaptureWindowInfo& window, void* self);
  void Set(CUcontext context, bool on, bool* sampling);  // mu_ held

  const Switch switch_;
  const AfterClose after_close_;
  mutable std::mutex mu_;
  bool open_ = false;
  struct Context {
    CUcontext context;
    bool sampling;
  };
  std::vector<Context> contexts_;
  uint64_t refused_ = 0;
};

}  // namespace kp
