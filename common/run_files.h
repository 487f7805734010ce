// run_files.h: how the files of one run are named and how a trace file's owner is recognised.
// Shared by libkpinject (which claims the files) and kptrace (which finds them again).
//
// A run is a root trace file plus the files of the other processes that joined it, all listed
// in the root's manifest directory (one small entry per process):
//   t.kptrace                  the root: the first process of the run that created a CUDA context
//   t.r1.host.4242.kptrace     a member: another process of the same run (rank 1, pid 4242)
//   t.kptrace.procs/           the manifest: host.pid.json per process
// A root left by an earlier run is never reused: the next run's root is t.2.kptrace, t.3...
// Every trace file is created with O_EXCL and stays flock()ed by its writer until that process
// ends, so "held" means "a live process writes it".
#pragma once

#include <cstdint>
#include <string>

namespace kp {

// "dir/t.kptrace" -> "dir/t.kptrace.procs"
std::string ManifestDirFor(const std::string& root_path);
// The n-th root name for a requested path (n >= 2): "dir/t.kptrace" -> "dir/t.2.kptrace";
// a path without the .kptrace suffix gets ".2" appended.
std::string NumberedRootPath(const std::string& requested, int n);
// A member's file name next to its root: "dir/t.kptrace" + "r1.h.42" -> "dir/t.r1.h.42.kptrace".
std::string MemberPath(const std::string& root_path, const std::string& tag);
// "r<rank>.<host>.<pid>" (rank < 0: "<host>.<pid>"); the host keeps only [A-Za-z0-9_-].
std::string MemberTag(int rank, const std::string& host, uint32_t pid);
// "<host>.<pid>.json", the manifest entry of one process (host as in MemberTag).
std::string ManifestEntryName(const std::string& host, uint32_t pid);
// The last path component ("dir/t.kptrace" -> "t.kptrace") and the rest ("dir/", or "").
std::string BaseName(const std::string& path);
std::string DirName(const std::string& path);

enum class TraceFileState {
  kMissing,  // no such file
  kHeld,     // a live process holds the writer's lock
  kFree,     // exists, nobody writes it (an ended process's trace)
  kUnknown,  // cannot be opened or locked (permissions, a file system without locks)
};
TraceFileState ProbeTraceFile(const std::string& path);

}  // namespace kp
