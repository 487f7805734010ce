#include "inject/capture/capture_signal.h"

#include <signal.h>
#include <unistd.h>

#include <string>

#include "inject/capture/capture_control_thread.h"

namespace kp {
namespace {

const CaptureControlThread* g_control = nullptr;
pid_t g_owner = 0;

void OnCaptureSignal(int, siginfo_t* info, void*) {
  if (g_control == nullptr || getpid() != g_owner) return;
  CaptureCommand command = kCaptureToggle;
  if (info != nullptr && info->si_code == SI_QUEUE) {
    if (info->si_value.sival_int == kCaptureSignalStart) command = kCaptureStart;
    if (info->si_value.sival_int == kCaptureSignalStop) command = kCaptureStop;
  }
  g_control->Send(command);
}

}  // namespace

Status InstallCaptureSignal(int signo, const CaptureControlThread* control) {
  g_control = control;
  g_owner = getpid();
  struct sigaction action {};
  action.sa_sigaction = &OnCaptureSignal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(signo, &action, nullptr) != 0) {
    return Status::Error("cannot install the capture signal handler for signal " +
                         std::to_string(signo));
  }
  return Status();
}

}  // namespace kp
