#include "inject/pc_sampling/pc_sampling_windows.h"

#include <algorithm>
#include <utility>

#include "inject/capture/capture_hooks.h"

namespace kp {

PcSamplingWindows::PcSamplingWindows(Switch on_off, AfterClose after_close)
    : switch_(std::move(on_off)), after_close_(std::move(after_close)) {}

bool PcSamplingWindows::Attach() { return AddCaptureWindowHooks(&OnOpened, &OnClosed, this); }

void PcSamplingWindows::OnOpened(const CaptureWindowInfo&, void* self) {
  static_cast<PcSamplingWindows*>(self)->Opened();
}

void PcSamplingWindows::OnClosed(const CaptureWindowInfo&, void* self) {
  static_cast<PcSamplingWindows*>(self)->Closed();
}

void PcSamplingWindows::Set(CUcontext context, bool on, bool* sampling) {
  if (*sampling == on) return;
  if (switch_(context, on)) {
    *sampling = on;
  } else {
    ++refused_;
    // A refused stop leaves the context counted as stopped: it is not asked again.
    if (!on) *sampling = false;
  }
}

void PcSamplingWindows::AddContext(CUcontext context) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Context& c : contexts_) {
    if (c.context == context) return;
  }
  contexts_.push_back(Context{context, false});
  if (open_) Set(context, true, &contexts_.back().sampling);
}

void PcSamplingWindows::RemoveContext(CUcontext context) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(contexts_.begin(), contexts_.end(),
                         [context](const Context& c) { return c.context == context; });
  if (it == contexts_.end()) return;
  Set(it->context, false, &it->sampling);
  contexts_.erase(it);
}

void PcSamplingWindows::Opened() {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) return;
  open_ = true;
  for (Context& c : contexts_) Set(c.context, true, &c.sampling);
}

void PcSamplingWindows::Closed() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) return;
    open_ = false;
    for (Context& c : contexts_) Set(c.context, false, &c.sampling);
  }
  if (after_close_) after_close_();
}

bool PcSamplingWindows::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

size_t PcSamplingWindows::sampling() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::count_if(contexts_.begin(), contexts_.end(),
                       [](const Context& c) { return c.sampling; });
}

uint64_t PcSamplingWindows::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

}  // namespace kp
