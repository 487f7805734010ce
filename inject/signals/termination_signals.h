// termination_signals.h: SIGTERM, SIGINT, SIGHUP and SIGQUIT finish the trace, then the
// application's own disposition happens, so its behaviour and exit status stay unchanged.
//
// The handler only does async-signal-safe things: it writes the signal number into a pipe and
// waits (poll, at most timeout_ms) until kp's signal thread has run `finish` (flush CUPTI, write
// the last chunk and a footer naming the signal); then it chains to the handler that was in
// place before kp's, or, when that was the default action, restores it and re-raises the
// signal. A signal that arrives while another one is being finished waits for the same finish.
//
// Applications install handlers before kp (Python's SIGINT handler) and after it (a training
// script's SIGTERM handler installed after CUDA start-up, or any handler when kp came in early
// through LD_PRELOAD or NVTX). The signal thread re-reads the dispositions every 200 ms with
// sigaction() and wraps any new handler again, remembering it as the one to chain to. A signal
// set to SIG_IGN is left alone. A forked child (a DataLoader worker) only chains: the trace
// belongs to the parent. No CUDA dependency: unit-tested on CPU.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kp {

// Runs on kp's signal thread. Must return within the handler's wait for the trace to be whole.
using SignalFinishFn = void (*)(int signo);

// Installs the handlers and starts the signal thread. An error if it cannot start.
Status InstallTerminationSignals(SignalFinishFn finish, uint32_t timeout_ms);

// From now on the handlers only chain (the trace is being finished by a normal exit). The
// signal thread ends at its next wake-up.
void DisarmTerminationSignals();

// "SIGTERM" for SIGTERM, ..., "signal N" for others (async-signal-safe: static strings).
const char* TerminationSignalName(int signo);

}  // namespace kp
