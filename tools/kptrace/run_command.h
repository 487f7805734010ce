// run_command.h: the flags of `kptrace run` (run_command.cc), for tests.
#pragma once

#include "common/status.h"
#include "tools/run/launcher.h"

namespace kp {

// Parses the arguments after "run". An error (one line, naming the flag) on a usage error.
// Does not look at the file system.
StatusOr<LaunchPlan> ParseLaunchArgs(int argc, char** argv);

}  // namespace kp
