#include "inject/capture/capture_state_machine.h"

#include <cstdint>

namespace kp {

const char* CaptureTriggerName(CaptureTrigger trigger) {
  switch (trigger) {
    case CaptureTrigger::kWholeRun:
      return "whole run";
    case CaptureTrigger::kTime:
      return "delay/duration";
    case CaptureTrigger::kNvtxRange:
      return "nvtx range";
    case CaptureTrigger::kCudaProfilerApi:
      return "cudaProfilerApi";
    case CaptureTrigger::kSchedule:
      return "schedule";
    case CaptureTrigger::kSignal:
      return "on demand";
  }
  return "unknown";
}

uint64_t CaptureStateMachine::next_deadline() const {
  if (finished_ || !started_) return UINT64_MAX;
  if (plan_.trigger == CaptureTrigger::kTime && phase_ == CapturePhase::kOff &&
      windows_opened_ == 0) {
    return start_ns_ + plan_.delay_ns;
  }
  if (phase_ == CapturePhase::kOn && plan_.duration_ns != 0) {
    return window_.start_ns + plan_.duration_ns;
  }
  return UINT64_MAX;
}

bool CaptureStateMachine::WindowsLeft() const {
  return plan_.max_windows == 0 || windows_opened_ < plan_.max_windows;
}

bool CaptureStateMachine::Open(uint64_t now, uint64_t step) {
  if (phase_ == CapturePhase::kOn || finished_) return false;
  window_ = CaptureWindowInfo();
  window_.index = windows_opened_++;
  window_.trigger = plan_.trigger;
  window_.start_ns = now;
  window_.first_step = window_.last_step = step;
  phase_ = CapturePhase::kOn;
  return true;
}

bool CaptureStateMachine::Close(uint64_t now, const char* reason) {
  if (phase_ == CapturePhase::kOff) return false;
  if (phase_ == CapturePhase::kOn) {
    window_.end_ns = now;
    window_.end_reason = reason;
  }
  phase_ = CapturePhase::kOff;
  if (plan_.trigger != CaptureTrigger::kSchedule && !WindowsLeft()) finished_ = true;
  return true;
}

bool CaptureStateMachine::Start(uint64_t now) {
  start_ns_ = now;
  started_ = true;
  if (plan_.trigger == CaptureTrigger::kWholeRun) return Open(now, 0);
  if (plan_.trigger == CaptureTrigger::kTime && plan_.delay_ns == 0) return Open(now, 0);
  return false;
}

bool CaptureStateMachine::Tick(uint64_t now) {
  const uint64_t deadline = next_deadline();
  if (now < deadline) return false;
  if (phase_ == CapturePhase::kOn) {
    const bool changed = Close(now, "duration");
    // A duration ends the capture of the time trigger and of a range left open (`none`).
    if (plan_.trigger == CaptureTrigger::kTime || plan_.range_end == CaptureRangeEnd::kNone) {
      finished_ = true;
    }
    return changed;
  }
  return Open(now, 0);
}

CapturePhase CaptureStateMachine::ScheduledPhase(uint64_t step) const {
  const CaptureSchedule& s = plan_.schedule;
  if (step < s.skip_first) return CapturePhase::kOff;
  const uint64_t cycle = static_cast<uint64_t>(s.wait) + s.warmup + s.active;
  if (cycle == 0 || ScheduleDone(step)) return CapturePhase::kOff;
  const uint64_t at = (step - s.skip_first) % cycle;
  if (at < s.wait) return CapturePhase::kOff;
  if (at < static_cast<uint64_t>(s.wait) + s.warmup) return CapturePhase::kWarmup;
  return CapturePhase::kOn;
}

bool CaptureStateMachine::ScheduleDone(uint64_t step) const {
  const CaptureSchedule& s = plan_.schedule;
  if (s.repeat == 0 || step < s.skip_first) return false;
  const uint64_t cycle = static_cast<uint64_t>(s.wait) + s.warmup + s.active;
  return cycle != 0 && (step - s.skip_first) / cycle >= s.repeat;
}

bool CaptureStateMachine::RangeStart(uint64_t now) {
  const uint64_t step = occurrences_++;
  if (finished_) return false;
  if (plan_.trigger == CaptureTrigger::kNvtxRange) {
    if (phase_ != CapturePhase::kOff || !WindowsLeft()) return false;
    return Open(now, step);
  }
  if (plan_.trigger != CaptureTrigger::kSchedule) return false;
  const CapturePhase want = ScheduledPhase(step);
  if (want == CapturePhase::kOn) {
    if (phase_ == CapturePhase::kOn) {
      window_.last_step = step;
      return false;
    }
    return Open(now, step);
  }
  if (want == CapturePhase::kWarmup && phase_ == CapturePhase::kOff) {
    phase_ = CapturePhase::kWarmup;
    return true;
  }
  if (want == CapturePhase::kOff && phase_ != CapturePhase::kOff) return Close(now, "schedule");
  return false;
}

bool CaptureStateMachine::RangeEnd(uint64_t now) {
  if (occurrences_ == 0 || finished_) return false;
  if (plan_.trigger == CaptureTrigger::kNvtxRange) {
    if (phase_ != CapturePhase::kOn || plan_.range_end == CaptureRangeEnd::kNone) return false;
    return Close(now, "range end");
  }
  if (plan_.trigger != CaptureTrigger::kSchedule) return false;
  const uint64_t step = occurrences_ - 1;  // the step that ends
  if (phase_ != CapturePhase::kOn || ScheduledPhase(step + 1) == CapturePhase::kOn) return false;
  const bool changed = Close(now, "schedule");
  if (ScheduleDone(step + 1)) finished_ = true;
  return changed;
}

bool CaptureStateMachine::ProfilerStart(uint64_t now) {
  if (plan_.trigger != CaptureTrigger::kCudaProfilerApi || phase_ != CapturePhase::kOff ||
      !WindowsLeft()) {
    return false;
  }
  return Open(now, 0);
}

bool CaptureStateMachine::ProfilerStop(uint64_t now) {
  if (plan_.trigger != CaptureTrigger::kCudaProfilerApi || phase_ != CapturePhase::kOn ||
      plan_.range_end == CaptureRangeEnd::kNone) {
    return false;
  }
  return Close(now, "cudaProfilerStop");
}

bool CaptureStateMachine::ManualStart(uint64_t now) {
  if (plan_.trigger != CaptureTrigger::kSignal) return false;
  return Open(now, 0);
}

bool CaptureStateMachine::ManualStop(uint64_t now) {
  if (plan_.trigger != CaptureTrigger::kSignal || phase_ != CapturePhase::kOn) return false;
  return Close(now, "kptrace stop");
}

bool CaptureStateMachine::Finish(uint64_t now) {
  const bool changed = Close(now, "exit");
  finished_ = true;
  return changed;
}

}  // namespace kp
