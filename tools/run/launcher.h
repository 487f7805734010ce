// launcher.h: runs a program under libkpinject, the engine of `kptrace run [flags] -- CMD ARGS`
// (tools/kptrace/run_command.cc turns the flags into the KP_* variables of
// docs/configuration.md). It points CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH (and, with
// --preload, LD_PRELOAD) at libkpinject.so, then fork+execvp's the command and hands back its
// exit status. Values are not validated here: libkpinject parses them and names any bad one
// (one place, one message).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kp {

struct LaunchPlan {
  std::vector<std::pair<std::string, std::string>> env;  // set in the child, in this order
  std::vector<std::string> command;                      // argv of the child
  std::string library;  // libkpinject.so to inject (from --lib, else next to kptrace)
  bool preload = false;
  bool force = false;  // --force: replace a run left at the same -o path
  bool help = false;
};

// The -o/--output value given, or "" (the injector's default pattern).
std::string RequestedOutput(const LaunchPlan& plan);

// True when `pattern` names one path for every process (no %p, %h, %r or %t).
bool IsFixedOutputPath(const std::string& pattern);

// Removes the run rooted at `root` (its file, every member listed in its manifest and the
// manifest). An error when one of them is being written by a live process or cannot be
// removed; nothing is removed then unless it could be removed safely.
Status RemoveEarlierRun(const std::string& root);

// <dir of /proc/self/exe>/../lib/libkpinject.so
std::string DefaultInjectionLibrary();

// The real path of the library to inject (--lib, else DefaultInjectionLibrary()).
StatusOr<std::string> ResolveInjectionLibrary(const LaunchPlan& plan);

// For a fixed -o path (one file for every process): the path, after removing an earlier run
// left there when plan.force (an error without --force). "" for a pattern.
StatusOr<std::string> ClaimFixedOutput(const LaunchPlan& plan);

// Runs plan.command with plan.env and the injection variables pointing at `library`; forwards
// SIGTERM and SIGHUP to it and ignores SIGINT/SIGQUIT meanwhile (the terminal sends those to
// the program too). Returns the program's exit code (128 + signal when killed).
StatusOr<int> RunProfiled(const LaunchPlan& plan, const std::string& library);

// After the program: one line about the trace files a fixed -o path `root` left (none written,
// or several processes listed in the run's manifest), or "" when there is nothing to say.
std::string DescribeRunFiles(const std::string& root);

}  // namespace kp
