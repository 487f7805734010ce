#include "tools/capture/capture_window_text.h"

#include <cinttypes>
#include <cstdio>

#include "tools/summary/text_format.h"

namespace kp {

const char* CaptureTriggerText(CaptureWindowTrigger trigger) {
  switch (trigger) {
    case CAPTURE_WINDOW_TRIGGER_TIME:
      return "delay/duration";
    case CAPTURE_WINDOW_TRIGGER_NVTX_RANGE:
      return "nvtx range";
    case CAPTURE_WINDOW_TRIGGER_CUDA_PROFILER_API:
      return "cudaProfilerApi";
    case CAPTURE_WINDOW_TRIGGER_SCHEDULE:
      return "schedule";
    case CAPTURE_WINDOW_TRIGGER_ON_DEMAND:
      return "on demand";
    default:
      return "unknown trigger";
  }
}

std::string DescribeCaptureWindow(const CaptureWindow& w, uint64_t base_ns) {
  std::string o = "#" + std::to_string(w.index()) + " " + CaptureTriggerText(w.trigger());
  if (!w.range().empty()) o += " '" + w.range() + "'";
  char steps[64];
  if (w.trigger() == CAPTURE_WINDOW_TRIGGER_SCHEDULE) {
    std::snprintf(steps, sizeof(steps), " steps %" PRIu64 "..%" PRIu64, w.first_step(),
                  w.last_step());
    o += steps;
  } else if (w.trigger() == CAPTURE_WINDOW_TRIGGER_NVTX_RANGE) {
    std::snprintf(steps, sizeof(steps), " occurrence %" PRIu64, w.first_step());
    o += steps;
  }
  const uint64_t start = w.start_ns() > base_ns ? w.start_ns() - base_ns : 0;
  const uint64_t end = w.end_ns() > base_ns ? w.end_ns() - base_ns : 0;
  o += ": +" + FormatDuration(static_cast<double>(start)) + " .. +" +
       FormatDuration(static_cast<double>(end)) + " (" +
       FormatDuration(static_cast<double>(end > start ? end - start : 0)) + ")";
  if (!w.end_reason().empty()) o += ", closed by " + w.end_reason();
  return o;
}

}  // namespace kp
