// capture_signal.h: the on-demand trigger's signal (KP_CAPTURE=signal, KP_CAPTURE_SIGNAL).
//
// `kptrace start PID` / `kptrace stop PID` send it with sigqueue() and a value (1 start,
// 2 stop); a plain `kill -SIG PID` toggles. The handler only writes one byte into the capture
// control thread's pipe (async-signal-safe); the thread switches tracing. A real-time signal is
// used by default (SIGRTMIN+6): PyTorch, torchrun/torchelastic, SLURM and Python use SIGUSR1/2,
// SIGTERM, SIGINT and friends, never the real-time ones, and real-time signals queue instead of
// merging, so a start followed at once by a stop is not lost. A forked child ignores it.
#pragma once

#include "common/status.h"

namespace kp {

class CaptureControlThread;

constexpr int kCaptureSignalStart = 1;  // sigqueue value
constexpr int kCaptureSignalStop = 2;

// Installs the handler for `signo`, which forwards to `control`.
Status InstallCaptureSignal(int signo, const CaptureControlThread* control);

}  // namespace kp
