#include "inject/capture/capture_controller.h"

#include <generated_nvtx_meta.h>

#include <chrono>
#include <cstring>

#include "inject/capture/capture_control_thread.h"
#include "inject/capture/capture_hooks.h"
#include "inject/capture/capture_signal.h"
#include "inject/capture/nvtx_trigger_cbids.h"

namespace kp {
namespace {

// Per thread and NVTX domain (each domain has its own push/pop stack): which open levels are
// the capture range (bit i: depth i), so a pop, which carries no message, is known to end it.
// A fixed table, no allocation on the callback path: up to kDomainSlots domains per thread are
// tracked (the default domain and a few library domains), levels deeper than 64 are counted but
// never the capture range.
struct DomainStack {
  const void* domain = nullptr;
  bool used = false;
  uint32_t depth = 0;
  uint64_t named_levels = 0;
};
constexpr int kDomainSlots = 8;
thread_local DomainStack t_stacks[kDomainSlots];
thread_local int t_named_open = 0;  // capture-range levels open on this thread, all domains

DomainStack* StackOf(const void* domain, bool create) {
  for (DomainStack& s : t_stacks) {
    if (s.used && s.domain == domain) return &s;
  }
  if (!create) return nullptr;
  for (DomainStack& s : t_stacks) {
    if (!s.used) {
      s.used = true;
      s.domain = domain;
      return &s;
    }
  }
  return nullptr;  // table full: this domain's ranges are not tracked
}

const char* PushMessage(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr || attributes->messageType != NVTX_MESSAGE_TYPE_ASCII) return nullptr;
  return attributes->message.ascii;
}

}  // namespace

CaptureController::CaptureController(const CapturePlan& plan, CaptureTracerOps ops)
    : plan_(plan), ops_(std::move(ops)), machine_(plan) {
  const std::string& range =
      plan.trigger == CaptureTrigger::kSchedule ? plan.schedule.range : plan.range;
  const size_t sep = range.find("::");
  range_domain_named_ = sep != std::string::npos;
  range_message_ = range_domain_named_ ? range.substr(sep + 2) : range;
  if (range_domain_named_) range_domain_ = range.substr(0, sep);
  label_ = range;
}

CaptureController::~CaptureController() = default;

bool CaptureController::MatchesRange(const char* message, const void* domain) const {
  if (message == nullptr || range_message_ != message) return false;
  if (!range_domain_named_) return true;
  if (range_domain_.empty()) return domain == nullptr;
  return domain != nullptr && domain == range_domain_handle_.load(std::memory_order_acquire);
}

// Runs `event` on the state machine and turns a phase change into tracer calls and hooks.
template <typename Event>
void CaptureController::Apply(Event event) {
  std::lock_guard<std::timed_mutex> lock(mutex_);
  const CapturePhase before = machine_.phase();
  const uint64_t now = ops_.now_ns();
  if (!event(machine_, now)) return;
  const CapturePhase after = machine_.phase();
  if (before == CapturePhase::kOff) ops_.set_tracing(true);
  if (after == CapturePhase::kWarmup) ops_.discard_begin(now);
  if (before == CapturePhase::kWarmup) ops_.discard_end(now);
  if (after == CapturePhase::kOn) RunCaptureWindowOpened(machine_.last_window());
  if (before == CapturePhase::kOn) RunCaptureWindowClosed(machine_.last_window());
  if (after == CapturePhase::kOff) ops_.set_tracing(false);
  if (before == CapturePhase::kOn) ops_.window_closed(machine_.last_window(), label_);
  if (control_) control_->Send(kCaptureWake);  // a duration deadline may have appeared
  // No window can open any more: kp stops listening for the trigger (the rest of the run then
  // costs nothing per NVTX call).
  if (machine_.finished() && trigger_callbacks_on_ && !ops_.keep_trigger_callbacks) {
    SetTriggerCallbacks(false);
  }
  if (machine_.finished() && machine_.phase() == CapturePhase::kOff && !no_more_windows_sent_) {
    no_more_windows_sent_ = true;
    if (ops_.no_more_windows) ops_.no_more_windows();
  }
}

void CaptureController::SetTriggerCallbacks(bool on) {
  const uint32_t enable = on ? 1 : 0;
  switch (plan_.trigger) {
    case CaptureTrigger::kNvtxRange:
    case CaptureTrigger::kSchedule:
      for (CUpti_CallbackId cbid : kNvtxTriggerCbids) {
        cuptiEnableCallback(enable, subscriber_, CUPTI_CB_DOMAIN_NVTX, cbid);
      }
      break;
    case CaptureTrigger::kCudaProfilerApi:
      cuptiEnableCallback(enable, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API,
                          CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
      cuptiEnableCallback(enable, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API,
                          CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
      cuptiEnableCallback(enable, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API,
                          CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
      cuptiEnableCallback(enable, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API,
                          CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
      break;
    default:
      return;
  }
  trigger_callbacks_on_ = on;
}

Status CaptureController::Start(CUpti_SubscriberHandle subscriber) {
  // Before the first window can open (Apply below may open it): collectors set up from here on
  // wait for the window hooks. Cleared again when the controller cannot start.
  SetCaptureWindowsConfigured(true);
  Status started = StartTriggers(subscriber);
  if (!started.ok()) SetCaptureWindowsConfigured(false);
  return started;
}

Status CaptureController::StartTriggers(CUpti_SubscriberHandle subscriber) {
  // The clock starts first: the control thread's first deadline is the delay after it.
  Apply([](CaptureStateMachine& m, uint64_t now) { return m.Start(now); });
  const bool timers = plan_.trigger == CaptureTrigger::kTime || plan_.duration_ns != 0;
  if (timers || plan_.trigger == CaptureTrigger::kSignal) {
    CaptureControlThread::Callbacks callbacks;
    callbacks.now_ns = ops_.now_ns;
    callbacks.next_deadline = [this] {
      std::lock_guard<std::timed_mutex> lock(mutex_);
      return machine_.next_deadline();
    };
    callbacks.on_deadline = [this] { OnTick(); };
    callbacks.on_command = [this](CaptureCommand command) {
      if (command == kCaptureStart) {
        OnManual(true);
      } else if (command == kCaptureStop) {
        OnManual(false);
      } else if (command == kCaptureToggle) {
        bool on = false;
        {
          std::lock_guard<std::timed_mutex> lock(mutex_);
          on = machine_.phase() == CapturePhase::kOn;
        }
        OnManual(!on);
      }
    };
    control_ = std::make_unique<CaptureControlThread>(std::move(callbacks));
    if (Status started = control_->Start(); !started.ok()) {
      control_.reset();
      return started;
    }
    if (plan_.trigger == CaptureTrigger::kSignal) {
      if (Status installed = InstallCaptureSignal(plan_.control_signal, control_.get());
          !installed.ok()) {
        return installed;
      }
    }
  }
  // Trigger callbacks last: they may call Apply at once, which uses the control thread.
  {
    std::lock_guard<std::timed_mutex> lock(mutex_);
    subscriber_ = subscriber;
    SetTriggerCallbacks(true);
  }
  return Status();
}

void CaptureController::OnTick() {
  Apply([](CaptureStateMachine& m, uint64_t now) { return m.Tick(now); });
}

void CaptureController::OnManual(bool start) {
  if (start) {
    Apply([](CaptureStateMachine& m, uint64_t now) { return m.ManualStart(now); });
  } else {
    Apply([](CaptureStateMachine& m, uint64_t now) { return m.ManualStop(now); });
  }
}

void CaptureController::OnNvtx(CUpti_CallbackId cbid, const void* cbdata) {
  const auto* data = static_cast<const CUpti_NvtxData*>(cbdata);
  if (data == nullptr || data->functionParams == nullptr) return;
  const void* params = data->functionParams;
  const char* message = nullptr;
  const void* domain = nullptr;
  bool push = false, pop = false;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
      push = true;
      message = static_cast<const nvtxRangePushA_params*>(params)->message;
      break;
    case CUPTI_CBID_NVTX_nvtxRangePushW:
      push = true;  // wide messages never match (KP_CAPTURE_RANGE is narrow text)
      break;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      push = true;
      message = PushMessage(static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib);
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      const auto* p = static_cast<const nvtxDomainRangePushEx_params*>(params);
      push = true;
      domain = p->domain;
      message = PushMessage(p->core.eventAttrib);
      break;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
      pop = true;
      break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      pop = true;
      domain = static_cast<const nvtxDomainRangePop_params*>(params)->domain;
      break;
    case CUPTI_CBID_NVTX_nvtxDomainCreateA: {
      const auto* p = static_cast<const nvtxDomainCreateA_params*>(params);
      if (range_domain_named_ && !range_domain_.empty() && p->name != nullptr &&
          range_domain_ == p->name && data->functionReturnValue != nullptr) {
        range_domain_handle_.store(
            *static_cast<const nvtxDomainHandle_t*>(data->functionReturnValue),
            std::memory_order_release);
      }
      return;
    }
    default:
      return;
  }
  if (push) {
    const bool named = MatchesRange(message, domain);
    DomainStack* stack = StackOf(domain, true);
    if (stack == nullptr) return;
    const bool outermost = named && t_named_open == 0;
    if (named && stack->depth < 64) {
      stack->named_levels |= uint64_t{1} << stack->depth;
      ++t_named_open;
    }
    ++stack->depth;
    if (outermost) Apply([](CaptureStateMachine& m, uint64_t now) { return m.RangeStart(now); });
  } else if (pop) {
    DomainStack* stack = StackOf(domain, false);
    if (stack == nullptr || stack->depth == 0) return;  // pushed before kp listened
    --stack->depth;
    const uint64_t bit = stack->depth < 64 ? uint64_t{1} << stack->depth : 0;
    if ((stack->named_levels & bit) == 0) return;
    stack->named_levels &= ~bit;
    if (--t_named_open == 0) {
      Apply([](CaptureStateMachine& m, uint64_t now) { return m.RangeEnd(now); });
    }
  }
}

void CaptureController::OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const void* cbdata) {
  if (domain == CUPTI_CB_DOMAIN_NVTX) {
    if (plan_.trigger == CaptureTrigger::kNvtxRange || plan_.trigger == CaptureTrigger::kSchedule) {
      OnNvtx(cbid, cbdata);
    }
    return;
  }
  if (plan_.trigger != CaptureTrigger::kCudaProfilerApi) return;
  bool start = false, stop = false;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    start = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000;
    stop = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000;
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    start = cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart;
    stop = cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop;
  } else {
    return;
  }
  if (!start && !stop) return;
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  // Start on the call's return and stop on its entry: the profiler calls themselves stay out.
  if (start && data->callbackSite == CUPTI_API_EXIT) {
    Apply([](CaptureStateMachine& m, uint64_t now) { return m.ProfilerStart(now); });
  } else if (stop && data->callbackSite == CUPTI_API_ENTER) {
    Apply([](CaptureStateMachine& m, uint64_t now) { return m.ProfilerStop(now); });
  }
}

void CaptureController::Finish() {
  // A signal may have stopped a thread inside Apply: wait a little, never for good.
  std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::milliseconds(200))) return;
  const CapturePhase before = machine_.phase();
  const uint64_t now = ops_.now_ns();
  if (!machine_.Finish(now)) return;
  if (before == CapturePhase::kWarmup) ops_.discard_end(now);
  if (before != CapturePhase::kOn) return;
  RunCaptureWindowClosed(machine_.last_window());
  ops_.window_closed(machine_.last_window(), label_);
}

}  // namespace kp
