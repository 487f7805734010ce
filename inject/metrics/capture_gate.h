// capture_gate.h: whether an application is capturing a CUDA graph. Touching the range profiler
// while a stream capture is in progress invalidates the capture (seen on the H200:
// cuptiRangeProfilerStart failed with CUPTI_ERROR_UNKNOWN and cudaStreamEndCapture reported
// "operation failed due to a previous error during capture"), so the collectors ask the gate
// before every range-profiler call made on behalf of the application.
//
// The gate sees the begin/end capture calls (runtime and driver cbids of
// MetricsCollector::CaptureCbids, ENTER and EXIT). A runtime call nests a driver one, so only
// the outermost call of a thread counts. A capture is counted from the ENTER of its begin call
// (before the driver starts it) to the EXIT of the end call that ends it: the end succeeded or
// reported the capture invalidated or unjoined (901, 904 in both APIs). A begin that failed
// started no capture and is uncounted at its EXIT.
//
// Thread safety: OnCapture runs on application threads; active() may be read anywhere. The
// count is process-wide: one capture anywhere stops measurement on every context.
#pragma once

#include <cupti.h>

#include <atomic>

namespace kp {

class StreamCaptureGate {
 public:
  enum class Event { kNone, kBeginning, kEnded };
  // Feeds one begin/end callback. kBeginning: the outermost begin call of this thread is being
  // entered; the caller does what must happen before the capture starts and then calls
  // Raise(). kEnded: a capture ended (the count is already lowered).
  Event OnCapture(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                  const CUpti_CallbackData* data);
  void Raise() { active_.fetch_add(1); }
  bool active() const { return active_.load() > 0; }

 private:
  std::atomic<int> active_{0};
};

}  // namespace kp
