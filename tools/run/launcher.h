// launcher.h: `kptrace run [flags] -- CMD ARGS...`, the nsys-style front end of libkpinject.
//
// It turns flags into the KP_* variables of docs/configuration.md, points
// CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH (and, with --preload, LD_PRELOAD) at
// libkpinject.so, then fork+execvp's the command and hands back its exit status. Values are
// not validated here: libkpinject parses them and names any bad one (one place, one message).
// The entry point is kp::cli::RunLauncher (tools/kptrace/commands.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kp {

struct LaunchPlan {
  std::vector<std::pair<std::string, std::string>> env;  // set in the child, in this order
  std::vector<std::string> command;                      // argv of the child
  std::string library;  // libkpinject.so to inject (from --lib, else next to kptrace)
  bool preload = false;
  bool help = false;
};

// Parses the arguments after "run". False with *error (one line, naming the flag) on a usage
// error. Does not look at the file system.
bool ParseLaunchArgs(int argc, char** argv, LaunchPlan* plan, std::string* error);

// <dir of /proc/self/exe>/../lib/libkpinject.so
std::string DefaultInjectionLibrary();

}  // namespace kp
