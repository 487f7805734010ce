// Termination signals on CPU, each case in a forked child so that the real signal dispositions
// and exit statuses are checked: the finish runs before the process ends by the signal's
// default action; handlers installed before and after kp's still run; an ignored signal stays
// ignored; a forked grandchild only chains; a finish that hangs is cut at the timeout.
#include "inject/signals/termination_signals.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

namespace kp {
namespace {

int g_report = -1;  // pipe to the parent: what happened, one byte per event

void Report(char what) {
  if (write(g_report, &what, 1) != 1) {
  }
}

void FinishReportsTheSignal(int signo) {
  Report(signo == SIGTERM ? 'T' : signo == SIGINT ? 'I' : 'F');
}

void FinishHangs(int) {
  Report('H');
  sleep(30);
}

void AppHandler(int) {
  Report('A');
  _exit(43);
}

struct Outcome {
  int status = 0;
  std::string events;
  double seconds = 0;
};

// Runs `body` in a child (after installing kp's handlers with `finish`), sends `signo` once the
// child says it is ready, and collects the child's reports and status.
template <typename Body>
Outcome RunChild(SignalFinishFn finish, int signo, Body body, int delay_ms = 0) {
  int report[2], ready[2];
  EXPECT_EQ(pipe(report), 0);
  EXPECT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    close(ready[0]);
    g_report = report[1];
    if (!InstallTerminationSignals(finish, 1000).ok()) _exit(90);
    body();
    if (write(ready[1], "r", 1) != 1) _exit(91);
    for (int i = 0; i < 20; ++i) usleep(100000);  // 2 s at most
    _exit(92);
  }
  close(report[1]);
  close(ready[1]);
  char byte;
  EXPECT_EQ(read(ready[0], &byte, 1), 1);
  if (delay_ms > 0) usleep(static_cast<useconds_t>(delay_ms) * 1000);
  const auto start = std::chrono::steady_clock::now();
  kill(pid, signo);
  Outcome out;
  EXPECT_EQ(waitpid(pid, &out.status, 0), pid);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char buf[64];
  ssize_t n;
  while ((n = read(report[0], buf, sizeof buf)) > 0) out.events.append(buf, static_cast<size_t>(n));
  close(report[0]);
  close(ready[0]);
  return out;
}

TEST(TerminationSignals, DefaultActionAfterTheFinishKeepsTheStatus) {
  Outcome o = RunChild(&FinishReportsTheSignal, SIGTERM, [] {});
  EXPECT_TRUE(WIFSIGNALED(o.status));
  EXPECT_EQ(WTERMSIG(o.status), SIGTERM);  // a shell shows 143
  EXPECT_EQ(o.events, "T");
  Outcome i = RunChild(&FinishReportsTheSignal, SIGINT, [] {});
  EXPECT_TRUE(WIFSIGNALED(i.status));
  EXPECT_EQ(WTERMSIG(i.status), SIGINT);  // 130
  EXPECT_EQ(i.events, "I");
  Outcome h = RunChild(&FinishReportsTheSignal, SIGHUP, [] {});
  EXPECT_EQ(WTERMSIG(h.status), SIGHUP);
  EXPECT_EQ(h.events, "F");
}

// Runs `body` (which ends with _exit) in a child and collects its reports and status.
template <typename Body>
Outcome RunToEnd(Body body) {
  int report[2];
  EXPECT_EQ(pipe(report), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    g_report = report[1];
    body();
    _exit(95);
  }
  close(report[1]);
  Outcome out;
  EXPECT_EQ(waitpid(pid, &out.status, 0), pid);
  char buf[64];
  ssize_t n;
  while ((n = read(report[0], buf, sizeof buf)) > 0) out.events.append(buf, static_cast<size_t>(n));
  close(report[0]);
  return out;
}

TEST(TerminationSignals, HandlerInstalledBeforeKpRunsAfterTheFinish) {
  Outcome o = RunToEnd([] {
    signal(SIGTERM, &AppHandler);  // before kp
    if (!InstallTerminationSignals(&FinishReportsTheSignal, 1000).ok()) _exit(90);
    raise(SIGTERM);
    _exit(92);
  });
  EXPECT_EQ(o.events, "TA");
  EXPECT_TRUE(WIFEXITED(o.status));
  EXPECT_EQ(WEXITSTATUS(o.status), 43);
}

TEST(TerminationSignals, HandlerInstalledAfterKpIsWrappedAgain) {
  // The application replaces kp's handler; within kp's re-check period kp wraps it again.
  Outcome o = RunChild(
      &FinishReportsTheSignal, SIGTERM, [] { signal(SIGTERM, &AppHandler); }, 600);
  EXPECT_EQ(o.events, "TA");
  EXPECT_TRUE(WIFEXITED(o.status));
  EXPECT_EQ(WEXITSTATUS(o.status), 43);
}

TEST(TerminationSignals, AnIgnoredSignalStaysIgnored) {
  Outcome o = RunChild(
      &FinishReportsTheSignal, SIGHUP, [] { signal(SIGHUP, SIG_IGN); }, 600);
  // The child lives on (it exits 92 after its wait) and the trace is not finished.
  EXPECT_TRUE(WIFEXITED(o.status));
  EXPECT_EQ(WEXITSTATUS(o.status), 92);
  EXPECT_EQ(o.events, "");
}

TEST(TerminationSignals, AForkedChildOnlyChains) {
  Outcome o = RunToEnd([] {
    if (!InstallTerminationSignals(&FinishReportsTheSignal, 1000).ok()) _exit(90);
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      raise(SIGTERM);  // the handlers are inherited; the trace is the parent's
      _exit(93);
    }
    int status = 0;
    waitpid(grandchild, &status, 0);
    _exit(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM ? 0 : 94);
  });
  EXPECT_TRUE(WIFEXITED(o.status));
  EXPECT_EQ(WEXITSTATUS(o.status), 0);
  EXPECT_EQ(o.events, "");  // no finish
}

TEST(TerminationSignals, AFinishThatHangsIsCutAtTheTimeout) {
  Outcome o = RunChild(&FinishHangs, SIGTERM, [] {});
  EXPECT_TRUE(WIFSIGNALED(o.status));
  EXPECT_EQ(WTERMSIG(o.status), SIGTERM);
  EXPECT_EQ(o.events, "H");
  EXPECT_LT(o.seconds, 1.8);
  EXPECT_GT(o.seconds, 0.9);
}

TEST(TerminationSignals, DisarmedHandlersOnlyChain) {
  Outcome o = RunChild(&FinishReportsTheSignal, SIGTERM, [] { DisarmTerminationSignals(); });
  EXPECT_EQ(WTERMSIG(o.status), SIGTERM);
  EXPECT_EQ(o.events, "");
}

}  // namespace
}  // namespace kp
