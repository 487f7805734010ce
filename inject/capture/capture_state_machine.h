// capture_state_machine.h: decides when capture windows open and close, from trigger events
// (an NVTX range's outermost start/end, cudaProfilerStart/Stop, kptrace start/stop, the clock).
// Pure logic, no CUDA and no locking (CaptureController serializes the calls): unit-tested on
// CPU.
//
// Phases: kOff (nothing traced), kWarmup (tracing on, records discarded: a schedule's warm-up
// steps absorb the cost of switching CUPTI on, as torch.profiler's do), kOn (a window).
// Every event returns true when the phase changed; the caller then reads phase() and, after a
// window closed, last_window().
//
// Schedules follow torch.profiler.schedule: steps are the outermost occurrences of the range,
// numbered from 0; the first skip_first are off, then cycles of wait (off), warmup, active (one
// window per cycle) repeat `repeat` times (0: forever). A window opens at the start of its first
// active step and closes at the end of its last one, so the time between steps after the window
// is not captured; warm-up stays on across the gap before the first active step.
#pragma once

#include <cstdint>

#include "inject/capture/capture_plan.h"

namespace kp {

enum class CapturePhase { kOff, kWarmup, kOn };

struct CaptureWindowInfo {
  uint32_t index = 0;  // 0, 1, ... in opening order
  CaptureTrigger trigger = CaptureTrigger::kWholeRun;
  uint64_t start_ns = 0, end_ns = 0;  // trace clock
  // kSchedule: the steps the window holds; kNvtxRange: the range's occurrence (first = last)
  uint64_t first_step = 0, last_step = 0;
  const char* end_reason = "";  // "range end", "duration", "exit", ... (static strings)
};

class CaptureStateMachine {
 public:
  explicit CaptureStateMachine(const CapturePlan& plan) : plan_(plan) {}

  CapturePhase phase() const { return phase_; }
  // No window can open any more: trigger callbacks may be switched off.
  bool finished() const { return finished_; }
  // The window being captured (phase kOn) or the last one closed.
  const CaptureWindowInfo& last_window() const { return window_; }
  uint32_t windows_opened() const { return windows_opened_; }
  // When Tick must run next (delay or duration); UINT64_MAX when no timer is pending.
  uint64_t next_deadline() const;

  bool Start(uint64_t now);
  bool Tick(uint64_t now);
  bool RangeStart(uint64_t now);  // outermost start of the plan's range (or schedule's)
  bool RangeEnd(uint64_t now);
  bool ProfilerStart(uint64_t now);
  bool ProfilerStop(uint64_t now);
  bool ManualStart(uint64_t now);
  bool ManualStop(uint64_t now);
  bool Finish(uint64_t now);  // process exit: closes the open window

 private:
  bool Open(uint64_t now, uint64_t step);
  bool Close(uint64_t now, const char* reason);
  bool WindowsLeft() const;
  CapturePhase ScheduledPhase(uint64_t step) const;
  bool ScheduleDone(uint64_t step) const;

  CapturePlan plan_;
  CapturePhase phase_ = CapturePhase::kOff;
  bool finished_ = false;
  bool started_ = false;
  uint64_t start_ns_ = 0;
  uint32_t windows_opened_ = 0;
  CaptureWindowInfo window_;
  uint64_t occurrences_ = 0;  // outermost range starts seen (schedule: the next step's number)
};

}  // namespace kp
