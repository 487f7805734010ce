// trace_file_claim.h: gives this process a trace file nobody else writes (common/run_files.h
// describes the names).
//
// The requested path is created with O_EXCL and flock()ed at once, so two processes can never
// both write or truncate it, whatever the timing. When it exists already:
// - a live kp process holds it (or it is the root of our own run, same KP_RUN_ID, or it was
//   created a moment ago and is still empty): this process joins that run and writes a member
//   file next to it (t.r1.host.pid.kptrace);
// - it was left by an earlier run: it is kept untouched, and this process tries the next root
//   name (t.2.kptrace, t.3.kptrace, ...) with the same rules.
// The caller prints `note` (one line) when the file differs from the requested one.
// Called on kp's writer thread only (it does file I/O).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kp {

struct ClaimRequest {
  std::string requested;  // the expanded KP_OUTPUT
  std::string run_id;     // KP_RUN_ID or a launcher's job id; may be empty
  int rank = -1;
  std::string host;
  uint32_t pid = 0;
};

struct ClaimedFile {
  int fd = -1;       // write-only, O_CLOEXEC, flock(LOCK_EX) held until the process ends
  std::string path;  // the file this process writes
  std::string root;  // the run's root file (== path for the root itself)
  bool is_root = false;
  std::string note;  // "kp: ..." when path != requested, else empty
};

// An error naming the path, the reason and the fix when no file could be created.
StatusOr<ClaimedFile> ClaimTraceFile(const ClaimRequest& request);

// The run id in the header of the trace at `root_path` (its first chunk), or "" when it has
// none or the chunk cannot be read.
std::string RootRunId(const std::string& root_path);

}  // namespace kp
