#include "inject/signals/termination_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace kp {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
constexpr int kSignalCount = 4;
constexpr int kRewrapPeriodMs = 200;

// kExiting: the process is finishing the trace from exit (atexit); a signal then waits for that
// finish instead of cutting it (see BeginExitFinish).
enum State : int { kArmed = 0, kFinishing = 1, kDisarmed = 2, kExiting = 3 };

// The disposition each signal had before kp's handler, double-buffered so the handler never
// reads one the signal thread is writing.
struct sigaction g_previous[kSignalCount][2];
std::atomic<int> g_previous_slot[kSignalCount];
std::atomic<int> g_state{kDisarmed};
int g_request_pipe[2] = {-1, -1};
int g_done_pipe[2] = {-1, -1};  // written once when the finish is done; never read
pid_t g_owner_pid = 0;
uint32_t g_timeout_ms = 1000;
SignalFinishFn g_finish = nullptr;
// A signal that arrived during the exit finish, delivered again once it is done (or when it
// overruns its time); g_redelivered makes sure only one of the two does it.
std::atomic<int> g_deferred_signal{0};
std::atomic<bool> g_redelivered{false};

int IndexOf(int signo) {
  for (int i = 0; i < kSignalCount; ++i) {
    if (kSignals[i] == signo) return i;
  }
  return -1;
}

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Waits until the done pipe is readable or the time is up. Async-signal-safe.
void WaitForFinish() {
  const int64_t deadline = MonotonicMs() + g_timeout_ms;
  while (true) {
    const int64_t left = deadline - MonotonicMs();
    if (left <= 0) return;
    pollfd p{g_done_pipe[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r > 0 || (r < 0 && errno != EINTR)) return;
  }
}

void Chain(int index, int signo, siginfo_t* info, void* context) {
  const struct sigaction& previous =
      g_previous[index][g_previous_slot[index].load(std::memory_order_acquire)];
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(signo, info, context);
    return;
  }
  if (previous.sa_handler == SIG_IGN) return;
  if (previous.sa_handler == SIG_DFL) {
    // The default action (terminate, or core dump for SIGQUIT) with the signal's own status:
    // restore it and re-raise; the signal is blocked while this handler runs, so it arrives the
    // moment it is unblocked.
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signo, &default_action, nullptr);
    raise(signo);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    return;
  }
  previous.sa_handler(signo);
}

void OnTerminationSignal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int index = IndexOf(signo);
  if (index >= 0) {
    if (getpid() == g_owner_pid) {
      int expected = kArmed;
      if (g_state.compare_exchange_strong(expected, kFinishing)) {
        const unsigned char byte = static_cast<unsigned char>(signo);
        if (write(g_request_pipe[1], &byte, 1) == 1) WaitForFinish();
      } else if (expected == kFinishing) {
        WaitForFinish();
      } else if (expected == kExiting) {
        // The exit finish may be running on this very thread: never wait here. Defer the signal
        // to the end of that finish; kp's signal thread bounds the wait.
        int none = 0;
        if (g_deferred_signal.compare_exchange_strong(none, signo)) {
          const unsigned char byte = static_cast<unsigned char>(signo);
          if (write(g_request_pipe[1], &byte, 1) != 1) {
          }
        }
        errno = saved_errno;
        return;
      }
    }
    Chain(index, signo, info, context);
  }
  errno = saved_errno;
}

bool IsOurs(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) != 0 && action.sa_sigaction == &OnTerminationSignal;
}

// Puts kp's handler in front of whatever disposition each signal has now, unless it is ours
// already or SIG_IGN (an ignored signal must stay ignored: wrapping it would end the process).
void WrapHandlers() {
  for (int i = 0; i < kSignalCount; ++i) {
    struct sigaction current {};
    if (sigaction(kSignals[i], nullptr, &current) != 0 || IsOurs(current)) continue;
    if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_IGN) continue;
    const int slot = 1 - g_previous_slot[i].load(std::memory_order_relaxed);
    g_previous[i][slot] = current;
    g_previous_slot[i].store(slot, std::memory_order_release);
    struct sigaction ours {};
    ours.sa_sigaction = &OnTerminationSignal;
    ours.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigfillset(&ours.sa_mask);  // no other signal interrupts the hand-off
    struct sigaction replaced {};
    sigaction(kSignals[i], &ours, &replaced);
    if (!IsOurs(replaced) &&
        (replaced.sa_handler != current.sa_handler || replaced.sa_flags != current.sa_flags)) {
      // The application changed it between our two calls: chain to what it set last.
      const int again = 1 - slot;
      g_previous[i][again] = replaced;
      g_previous_slot[i].store(again, std::memory_order_release);
    }
  }
}

// Gives a deferred signal its own disposition again and sends it to the process: the default
// action ends the process with the signal's status; an application handler runs on one of the
// application's threads.
void Redeliver(int signo) {
  if (g_redelivered.exchange(true)) return;
  const int index = IndexOf(signo);
  if (index < 0) return;
  const struct sigaction& previous =
      g_previous[index][g_previous_slot[index].load(std::memory_order_acquire)];
  sigaction(signo, &previous, nullptr);
  // Process-directed: kp's signal thread blocks every signal, so an application thread takes it.
  kill(getpid(), signo);
}

// During the exit finish: waits for it up to the timeout, then delivers the signal anyway.
void WaitForExitFinish(int signo) {
  WaitForFinish();
  if (g_state.load() == kExiting) Redeliver(signo);
}

void SignalThread() {
  pthread_setname_np(pthread_self(), "kp-signals");  // as top -H, perf and gdb show it
  while (g_state.load() != kDisarmed || g_deferred_signal.load() != 0) {
    pollfd p{g_request_pipe[0], POLLIN, 0};
    const int r = poll(&p, 1, kRewrapPeriodMs);
    if (r > 0) {
      unsigned char byte = 0;
      if (read(g_request_pipe[0], &byte, 1) == 1) {
        if (g_state.load() == kExiting || g_state.load() == kDisarmed) {
          WaitForExitFinish(byte);
          return;
        }
        g_finish(byte);
        const char done = 1;
        if (write(g_done_pipe[1], &done, 1) != 1) {
        }
        return;  // the trace is finished: later signals only chain
      }
    }
    if (g_state.load() == kArmed) WrapHandlers();
    if (r == 0 && g_state.load() == kDisarmed) return;
  }
}

}  // namespace

const char* TerminationSignalName(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
    default:
      return "signal";
  }
}

Status InstallTerminationSignals(SignalFinishFn finish, uint32_t timeout_ms) {
  if (pipe2(g_request_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(g_done_pipe, O_CLOEXEC) != 0) {
    return Status::Error("cannot create the signal pipe");
  }
  g_finish = finish;
  g_timeout_ms = timeout_ms;
  g_owner_pid = getpid();
  for (int i = 0; i < kSignalCount; ++i) g_previous_slot[i].store(0);
  g_state.store(kArmed);
  // The thread starts with every signal blocked, so signals go to the application's threads.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  bool ok = true;
  try {
    std::thread(&SignalThread).detach();
  } catch (const std::exception&) {
    ok = false;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!ok) {
    g_state.store(kDisarmed);
    return Status::Error("cannot start the signal thread");
  }
  WrapHandlers();
  return Status();
}

void DisarmTerminationSignals() {
  int expected = kArmed;
  g_state.compare_exchange_strong(expected, kDisarmed);
}

bool BeginExitFinish() {
  int expected = kArmed;
  if (g_state.compare_exchange_strong(expected, kExiting)) return true;
  return expected == kDisarmed;  // never installed (or disarmed): the exit finish is ours
}

void EndExitFinish() {
  int expected = kExiting;
  if (!g_state.compare_exchange_strong(expected, kDisarmed)) return;
  const char done = 1;
  if (g_done_pipe[1] >= 0 && write(g_done_pipe[1], &done, 1) != 1) {
  }
  const int deferred = g_deferred_signal.load();
  if (deferred != 0) Redeliver(deferred);
}

}  // namespace kp
