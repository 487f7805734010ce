// capture_signal_name.h: KP_CAPTURE_SIGNAL's syntax, shared by the injector (which listens to
// the signal) and `kptrace start|stop` (which sends it).
#pragma once

#include <string_view>

namespace kp {

// SIGRTMIN+6 (40 with glibc): no signal PyTorch, torchrun, SLURM or Python uses.
int DefaultCaptureSignal();

// A number, SIGRTMIN, SIGRTMIN+K, SIGRTMAX, SIGRTMAX-K, SIGUSR1 or SIGUSR2; only real-time
// signals and SIGUSR1/2 are accepted (any other would change what the process does). 0 if bad.
int ParseCaptureSignal(std::string_view text);

}  // namespace kp
