#include "inject/capture/capture_control_thread.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

namespace kp {

Status CaptureControlThread::Start() {
  if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::Error("cannot create the capture control pipe");
  }
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  bool ok = true;
  try {
    std::thread([this] { Run(); }).detach();
  } catch (const std::exception&) {
    ok = false;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!ok) return Status::Error("cannot start the capture control thread");
  return Status();
}

void CaptureControlThread::Send(CaptureCommand command) const {
  const unsigned char byte = command;
  const int saved = errno;
  if (write(pipe_[1], &byte, 1) != 1) {
  }
  errno = saved;
}

void CaptureControlThread::Run() {
  pthread_setname_np(pthread_self(), "kp-capture");  // as top -H, perf and gdb show it
  while (true) {
    const uint64_t deadline = callbacks_.next_deadline();
    int timeout_ms = -1;
    if (deadline != UINT64_MAX) {
      const uint64_t now = callbacks_.now_ns();
      // Rounded up, so the wake-up is never before the deadline.
      const uint64_t left = deadline > now ? (deadline - now + 999999) / 1000000 : 0;
      timeout_ms = left > 60000 ? 60000 : static_cast<int>(left);
    }
    pollfd p{pipe_[0], POLLIN, 0};
    const int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR) return;
    if (r > 0) {
      unsigned char bytes[16];
      const ssize_t n = read(pipe_[0], bytes, sizeof(bytes));
      for (ssize_t i = 0; i < n; ++i) {
        if (bytes[i] != kCaptureWake) callbacks_.on_command(static_cast<CaptureCommand>(bytes[i]));
      }
    }
    const uint64_t due = callbacks_.next_deadline();
    if (due != UINT64_MAX && callbacks_.now_ns() >= due) callbacks_.on_deadline();
  }
}

}  // namespace kp
