// capture_targets.h: the processes `kptrace start PID` / `kptrace stop PID` signal to open or
// close an on-demand capture window (KP_CAPTURE=signal, docs/capture-windows.md): PID and every
// process below it that kp traces with that trigger (the ranks under torchrun or `kptrace run`).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace kp {

struct CaptureTarget {
  int pid = 0;
  int signo = 0;
};

// `pid` and its descendants that run kp with KP_CAPTURE=signal and catch the capture signal
// (KP_CAPTURE_SIGNAL from each process's environment, else the default). An error naming the
// reason when there is none: a process that does not catch the signal would be ended by it.
StatusOr<std::vector<CaptureTarget>> FindCaptureTargets(int pid);

// Whether /proc/PID/status's SigCgt has `signo`.
bool ProcessCatchesSignal(int pid, int signo);

}  // namespace kp
