// capture_controller.h: switches tracing on and off at capture-window edges.
//
// Outside a window the tracer enables no activity kind; the controller only keeps the CUPTI
// callbacks its trigger needs (the NVTX domain for a range or a schedule, cudaProfilerStart/Stop
// for the profiler API), plus a control thread for timers and the on-demand signal. At each edge
// it calls the tracer's own enable/disable function (CaptureTracerOps::set_tracing), so the kinds
// switched are exactly the ones the tracer would enable. At a window's end the tracer flushes
// CUPTI and records the window (trigger, start, end, steps) in the trace.
//
// Edges are taken on the thread that causes them, inside the CUPTI callback (the push or pop of
// the range, cudaProfilerStart's return, cudaProfilerStop's entry), so the window holds exactly
// the work launched between the two calls. Kernels launched inside a window that finish after it
// are still delivered (their records were requested at launch); work launched before a window is
// not recorded, even when it runs inside it.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "inject/capture/capture_state_machine.h"

namespace kp {

struct CaptureTracerOps {
  std::function<void(bool on)> set_tracing;  // enable/disable the tracer's activity kinds
  std::function<uint64_t()> now_ns;          // trace clock (cuptiGetTimestamp)
  // A window closed (also at exit): flush CUPTI and record it; `label` names range/schedule.
  std::function<void(const CaptureWindowInfo& window, const std::string& label)> window_closed;
  // Warm-up: records from `begin` on are discarded until discard_end(end).
  std::function<void(uint64_t begin)> discard_begin;
  std::function<void(uint64_t end)> discard_end;
  // Another collector shares the trigger's callbacks (metrics: NVTX, launches): never switch
  // them off when the last window has closed.
  bool keep_trigger_callbacks = false;
  // No window can open any more and none is open (called once, after window_closed; may be
  // empty). The tracer detaches CUPTI then (cupti_detach.h).
  std::function<void()> no_more_windows;
};

class CaptureControlThread;

class CaptureController {
 public:
  CaptureController(const CapturePlan& plan, CaptureTracerOps ops);
  ~CaptureController();
  CaptureController(const CaptureController&) = delete;
  CaptureController& operator=(const CaptureController&) = delete;

  // Enables the trigger's callbacks on `subscriber`, starts the control thread when the
  // trigger needs one, and opens the first window when it starts at once.
  Status Start(CUpti_SubscriberHandle subscriber);

  // From the tracer's CUPTI callback, every domain; ignores what is not a trigger.
  void OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata);

  // Process exit (or a finishing signal): closes the open window and records it. Bounded wait.
  void Finish();

  // The control thread's entry points (timers; the on-demand signal).
  void OnTick();
  void OnManual(bool start);

 private:
  Status StartTriggers(CUpti_SubscriberHandle subscriber);
  void SetTriggerCallbacks(bool on);  // the trigger's NVTX / profiler-API callbacks
  template <typename Event>
  void Apply(Event event);
  void OnNvtx(CUpti_CallbackId cbid, const void* cbdata);
  bool MatchesRange(const char* message, const void* domain) const;

  CapturePlan plan_;
  CaptureTracerOps ops_;
  std::string label_;
  std::string range_message_, range_domain_;  // the trigger's range split at "::"
  bool range_domain_named_ = false;
  std::atomic<const void*> range_domain_handle_{nullptr};
  std::timed_mutex mutex_;  // guards machine_; never held across a wait on CUDA work
  CaptureStateMachine machine_;
  std::unique_ptr<CaptureControlThread> control_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool trigger_callbacks_on_ = false;
  bool no_more_windows_sent_ = false;  // ops_.no_more_windows called
};

}  // namespace kp
