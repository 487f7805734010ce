// capture_plan.h: what opens and closes capture windows (KP_DELAY, KP_DURATION,
// KP_CAPTURE_RANGE, KP_CAPTURE_RANGE_END, KP_CAPTURE_SCHEDULE, KP_CAPTURE), as parsed by
// inject/config. No CUDA dependency.
#pragma once

#include <cstdint>
#include <string>

namespace kp {

enum class CaptureTrigger {
  kWholeRun,         // no trigger: one window from start-up to exit
  kTime,             // KP_DELAY / KP_DURATION
  kNvtxRange,        // KP_CAPTURE_RANGE (nsys -c nvtx)
  kCudaProfilerApi,  // KP_CAPTURE=cudaProfilerApi (nsys -c cudaProfilerApi)
  kSchedule,         // KP_CAPTURE_SCHEDULE (torch.profiler.schedule over an NVTX range)
  kSignal,           // KP_CAPTURE=signal: kptrace start|stop PID
};

// KP_CAPTURE_RANGE_END, as nsys --capture-range-end: stop after the first window, repeat after
// `max_windows` (0: no limit), or none: the window opened by the trigger stays open to the end.
enum class CaptureRangeEnd { kStop, kRepeat, kNone };

struct CaptureSchedule {
  std::string range;  // the NVTX range that marks a step ("domain::message" names a domain)
  uint32_t skip_first = 0, wait = 0, warmup = 0, active = 1, repeat = 0;  // repeat 0: forever
};

struct CapturePlan {
  CaptureTrigger trigger = CaptureTrigger::kWholeRun;
  uint64_t delay_ns = 0;     // kTime: from start-up to the window
  uint64_t duration_ns = 0;  // any trigger: a window closes after this long (0: no limit)
  std::string range;         // kNvtxRange: message, or domain::message
  CaptureRangeEnd range_end = CaptureRangeEnd::kStop;
  uint32_t max_windows = 1;  // kRepeat's N (0: no limit); 1 for kStop
  CaptureSchedule schedule;  // kSchedule
  int control_signal = 0;    // kSignal: the signal `kptrace start|stop` sends
};

const char* CaptureTriggerName(CaptureTrigger trigger);

}  // namespace kp
