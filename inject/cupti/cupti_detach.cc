#include "inject/cupti/cupti_detach.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/ms_since.h"
#include "inject/log/log.h"

namespace kp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kStaysAttached =
    "CUPTI stays attached (the rest of the run pays its kernel-launch cost)";

}  // namespace

void CuptiDetach::Start(Hooks hooks) {
  if (started_.exchange(true)) return;
  hooks_ = std::move(hooks);
  running_.store(true, std::memory_order_release);
  // kp's threads take no signal meant for the application (as the encoder thread).
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  try {
    std::thread([this] { Run(); }).detach();
  } catch (...) {
    running_.store(false, std::memory_order_release);
    Log(LogSeverity::kWarning,
        "capture: cannot start the thread that detaches CUPTI after the last window; %s",
        kStaysAttached);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

bool CuptiDetach::WaitForWindowWork() {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(hooks_.timeout_ms);
  Progress last = hooks_.progress();
  uint32_t still = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> step(step_mutex_);
      if (cancelled_.load()) return false;
      hooks_.flush(false);  // completed records only: nothing is cut short
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(hooks_.poll_ms));
    if (cancelled_.load()) return false;
    const Progress now = hooks_.progress();
    still = now.records == last.records && now.launch_calls == last.launch_calls ? still + 1 : 0;
    last = now;
    if (now.kernels >= now.launch_calls && still >= hooks_.settle_polls) return true;
    if (Clock::now() >= deadline) {
      Log(LogSeverity::kInfo,
          "capture: the last window's GPU work did not reach kp within %u s (%llu of %llu kernel "
          "launches recorded); %s",
          hooks_.timeout_ms / 1000, static_cast<unsigned long long>(now.kernels),
          static_cast<unsigned long long>(now.launch_calls), kStaysAttached);
      return false;
    }
  }
}

void CuptiDetach::Run() {
  pthread_setname_np(pthread_self(), "kp-detach");  // as top -H, perf and gdb show it
  Steps();
  running_.store(false, std::memory_order_release);  // the last thing this thread touches
}

void CuptiDetach::Steps() {
  const Clock::time_point begin = Clock::now();
  if (!WaitForWindowWork()) return;
  // Step 2.
  {
    std::lock_guard<std::mutex> step(step_mutex_);
    if (cancelled_.load()) return;
    clock_offset_ns_.store(hooks_.clock_offset(), std::memory_order_release);
    quiet_.store(true, std::memory_order_release);
  }
  auto abandon = [this](const char* what) {
    quiet_.store(false, std::memory_order_release);
    if (!cancelled_.load()) Log(LogSeverity::kWarning, "capture: %s; %s", what, kStaysAttached);
  };
  // From its next task on, the encoder thread sees quiet() and makes no CUPTI call of its own.
  if (!hooks_.drain_encoder()) return abandon("kp's encoder thread did not pause in time");
  {
    std::lock_guard<std::mutex> step(step_mutex_);
    if (cancelled_.load()) return;
    hooks_.flush(true);
  }
  // Decoding reads records through CUPTI: what the flush returned is decoded before it goes.
  if (!hooks_.drain_encoder()) return abandon("kp's encoder thread did not pause in time");
  // Step 3.
  std::lock_guard<std::mutex> lock(*hooks_.shutdown_mutex);
  if (hooks_.exit_done->load() || cancelled_.load()) return;
  pending_.store(true, std::memory_order_release);
  hooks_.driver_callbacks(true);
  Log(LogSeverity::kDebug, "capture: CUPTI detach requested %.3f ms after the last window",
      MsSince(begin));
}

bool CuptiDetach::OnCallback(CUpti_CallbackDomain domain, const void* cbdata) {
  if (!pending_.load(std::memory_order_acquire)) return false;
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return false;
  const auto* data = static_cast<const CUpti_CallbackData*>(cbdata);
  if (data == nullptr || data->callbackSite != CUPTI_API_EXIT) return true;
  std::unique_lock<std::mutex> lock(*hooks_.shutdown_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return true;  // the exit finish runs; it cancels
  if (!pending_.exchange(false)) return true;
  detached_.store(true, std::memory_order_release);
  const CUptiResult result = hooks_.finalize();
  if (result != CUPTI_SUCCESS) {
    detached_.store(false, std::memory_order_release);
    quiet_.store(false, std::memory_order_release);
    // No window opens again: the driver callbacks kp still had on have nothing left to do.
    hooks_.driver_callbacks(false);
    const char* text = nullptr;
    cuptiGetResultString(result, &text);
    Log(LogSeverity::kWarning, "capture: cuptiFinalize failed after the last window (%s); %s",
        text != nullptr ? text : "unknown error", kStaysAttached);
    return true;
  }
  LogNotice(LogSeverity::kInfo, "capture",
            "the last capture window has ended: CUPTI is detached, the rest of the run is not "
            "traced and costs nothing");
  return true;
}

void CuptiDetach::Cancel(bool may_call_cupti) {
  cancelled_.store(true);
  // A CUPTI call of the detach thread in progress ends before the exit's own calls.
  std::unique_lock<std::mutex> step(step_mutex_, std::defer_lock);
  for (int waited_ms = 0; !step.try_lock() && waited_ms < 500; ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (pending_.exchange(false) && may_call_cupti) hooks_.driver_callbacks(false);
}

}  // namespace kp
