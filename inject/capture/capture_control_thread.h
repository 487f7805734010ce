// capture_control_thread.h: kp's thread for capture edges that no application call carries:
// the delay and duration timers, and the on-demand signal (capture_signal.h). It sleeps in
// poll() on a pipe until the next deadline or a command byte. No CUDA dependency.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace kp {

enum CaptureCommand : unsigned char {
  kCaptureWake = 'w',    // the deadline may have moved
  kCaptureStart = 's',   // kptrace start
  kCaptureStop = 'p',    // kptrace stop
  kCaptureToggle = 't',  // a plain kill -SIG: start when off, stop when on
};

class CaptureControlThread {
 public:
  struct Callbacks {
    std::function<uint64_t()> now_ns;         // the clock deadlines are in
    std::function<uint64_t()> next_deadline;  // UINT64_MAX: none
    std::function<void()> on_deadline;
    std::function<void(CaptureCommand)> on_command;
  };
  explicit CaptureControlThread(Callbacks callbacks) : callbacks_(std::move(callbacks)) {}

  // Creates the pipe and starts the (detached) thread with every signal blocked.
  Status Start();
  // Async-signal-safe: queues a command byte (dropped when the pipe is full).
  void Send(CaptureCommand command) const;
  int write_fd() const { return pipe_[1]; }

 private:
  void Run();
  Callbacks callbacks_;
  int pipe_[2] = {-1, -1};
};

}  // namespace kp
