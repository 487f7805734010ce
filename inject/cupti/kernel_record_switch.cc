#include "inject/cupti/kernel_record_switch.h"

namespace kp {

void KernelRecordSwitch::SetWindow(bool open) {
  std::lock_guard<std::mutex> lock(mu_);
  window_ = open;
  Apply();
}

bool KernelRecordSwitch::Suspend() {
  std::lock_guard<std::mutex> lock(mu_);
  suspended_ = true;
  Apply();
  return !enabled_;
}

void KernelRecordSwitch::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  suspended_ = false;
  Apply();
}

void KernelRecordSwitch::Apply() {
  const bool want = window_ && !suspended_;
  if (want == enabled_ || !apply_(want)) return;
  enabled_ = want;
  on_.store(want, std::memory_order_release);
}

}  // namespace kp
