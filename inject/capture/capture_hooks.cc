#include "inject/capture/capture_hooks.h"

#include <atomic>

namespace kp {
namespace {

struct HookSlot {
  CaptureWindowHook opened = nullptr;
  CaptureWindowHook closed = nullptr;
  void* user = nullptr;
};

HookSlot g_hooks[kMaxCaptureHooks];
std::atomic<int> g_hook_count{0};  // slots below it are complete (published with release)
std::atomic<bool> g_configured{false};

}  // namespace

bool AddCaptureWindowHooks(CaptureWindowHook opened, CaptureWindowHook closed, void* user) {
  const int n = g_hook_count.load(std::memory_order_relaxed);
  if (n >= kMaxCaptureHooks) return false;
  g_hooks[n] = HookSlot{opened, closed, user};
  g_hook_count.store(n + 1, std::memory_order_release);
  return true;
}

bool CaptureWindowsConfigured() { return g_configured.load(std::memory_order_acquire); }

void SetCaptureWindowsConfigured(bool configured) {
  g_configured.store(configured, std::memory_order_release);
}

void RunCaptureWindowOpened(const CaptureWindowInfo& window) {
  const int n = g_hook_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (g_hooks[i].opened != nullptr) g_hooks[i].opened(window, g_hooks[i].user);
  }
}

void RunCaptureWindowClosed(const CaptureWindowInfo& window) {
  const int n = g_hook_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (g_hooks[i].closed != nullptr) g_hooks[i].closed(window, g_hooks[i].user);
  }
}

}  // namespace kp
