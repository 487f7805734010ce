// write_error_advice.h: what the user can do about a trace file that cannot be created or
// written, by errno: the advice every trace-file error message ends with, written once.
#pragma once

namespace kp {

// "free disk space or set KP_OUTPUT to a path on another file system" for ENOSPC, and so on.
const char* WriteErrorFix(int err);

}  // namespace kp
