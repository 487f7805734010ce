// kernel_record_switch.h: the kernel activity kind (CONCURRENT_KERNEL) switched by two owners:
// the capture windows (the tracer opens and closes them) and kernel mode's own replay, which
// suspends kernel records around the passes it measures (metrics_collector.h, KernelRecords).
// The kind is on while a window is open and no measurement has it suspended.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

#include "inject/metrics/metrics_collector.h"

namespace kp {

class KernelRecordSwitch final : public KernelRecords {
 public:
  // `apply(on)` enables or disables the kind (cuptiActivityEnable / Disable, with the tracer's
  // messages); it is called only when the kind's state changes.
  explicit KernelRecordSwitch(std::function<void(bool)> apply) : apply_(std::move(apply)) {}

  // A capture window opens or closes (the start of tracing opens the first).
  void SetWindow(bool open);

  bool on() const override { return on_.load(std::memory_order_acquire); }
  void Suspend() override;
  void Resume() override;

 private:
  void Apply();  // mu_ held

  std::function<void(bool)> apply_;
  std::mutex mu_;
  bool window_ = false, suspended_ = false, enabled_ = false;  // under mu_
  std::atomic<bool> on_{false};                                // enabled_, lock-free
};

}  // namespace kp
