// capture_window_text.h: one line per capture window for `kptrace info` and `summary`, and the
// trigger's name for exporters.
#pragma once

#include <cstdint>
#include <string>

#include "kptrace.pb.h"

namespace kp {

// "nvtx range", "schedule", "cudaProfilerApi", "on demand", "delay/duration".
const char* CaptureTriggerText(CaptureWindowTrigger trigger);

// "#0 schedule 'step' steps 5..7: +1.234 s .. +1.300 s (66.0 ms), closed by schedule";
// `base_ns` is the trace's start (times are shown after it).
std::string DescribeCaptureWindow(const CaptureWindow& window, uint64_t base_ns);

}  // namespace kp
