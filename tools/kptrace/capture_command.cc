// capture_command.cc: `kptrace start PID` / `kptrace stop PID` (tools/capture/capture_targets.h
// finds the processes; docs/capture-windows.md).
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/capture/capture_targets.h"
#include "tools/kptrace/commands.h"

namespace kp::cli {
namespace {

int RunCapture(int argc, char** argv, bool start) {
  const char* verb = start ? "start" : "stop";
  if (argc != 1 || std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0) {
    std::fprintf(argc == 1 ? stdout : stderr,
                 "usage: kptrace %s PID\n\n"
                 "%s an on-demand capture window in process PID and in the processes below it\n"
                 "that kp traces with KP_CAPTURE=signal (kptrace run --capture signal).\n",
                 verb, start ? "Opens" : "Closes");
    return argc == 1 ? 0 : 2;
  }
  char* end = nullptr;
  const long pid = std::strtol(argv[0], &end, 10);
  if (end == argv[0] || *end != '\0' || pid <= 0 || pid > 4194304) {
    std::fprintf(stderr, "kptrace %s: '%s' is not a process id\n", verb, argv[0]);
    return 2;
  }
  StatusOr<std::vector<CaptureTarget>> targets = FindCaptureTargets(static_cast<int>(pid));
  if (!targets.ok()) {
    std::fprintf(stderr, "kptrace %s: %s\n", verb, targets.status().message().c_str());
    return 1;
  }
  int failed = 0;
  for (const CaptureTarget& t : targets.value()) {
    sigval value{};
    value.sival_int = start ? 1 : 2;  // inject/capture/capture_signal.h
    if (sigqueue(t.pid, t.signo, value) != 0) {
      std::fprintf(stderr, "kptrace %s: cannot signal process %d: %s\n", verb, t.pid,
                   std::strerror(errno));
      ++failed;
      continue;
    }
    std::printf("kptrace %s: process %d asked to %s capture (signal %d)\n", verb, t.pid,
                start ? "start" : "stop", t.signo);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int RunCaptureStart(int argc, char** argv) { return RunCapture(argc, argv, true); }
int RunCaptureStop(int argc, char** argv) { return RunCapture(argc, argv, false); }

}  // namespace kp::cli
