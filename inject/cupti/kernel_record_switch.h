// kernel_record_switch.h: the kernel activity kind (CONCURRENT_KERNEL) switched by two owners:
// the capture windows (the tracer opens and closes them) and kernel mode's own replay, which
// suspends kernel records around the passes it measures (metrics_collector.h, KernelRecords).
// The kind is on while a window is open and no measurement has it suspended. Suspend and
// Resume are not counted (one boolean): KernelModeCollector counts its measurements itself.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

#include "inject/metrics/metrics_collector.h"

namespace kp {

class KernelRecordSwitch final : public KernelRecords {
 public:
  // `apply(on)` enables or disables the kind (cuptiActivityEnable / Disable, with the tracer's
  // messages) and says whether it did; it is called only when the kind's state should change,
  // and a failed call leaves the state as it was (tried again at the next change).
  explicit KernelRecordSwitch(std::function<bool(bool)> apply) : apply_(std::move(apply)) {}

  // A capture window opens or closes (the start of tracing opens the first).
  void SetWindow(bool open);

  bool on() const override { return on_.load(std::memory_order_acquire); }
  bool Suspend() override;
  void Resume() override;

 private:
  void Apply();  // mu_ held

  std::function<bool(bool)> apply_;
  std::mutex mu_;
  bool window_ = false, suspended_ = false, enabled_ = false;  // under mu_
  std::atomic<bool> on_{false};                                // enabled_, lock-free
};

}  // namespace kp
