// run_inputs.h: turns the FILE arguments of every kptrace command that reads traces (info,
// summary, convert, report, diff) into the list of trace files to read.
//
// One argument can stand for a whole run (common/run_files.h): a run's root file, any member
// file, or the run's manifest directory (t.kptrace.procs) brings in every process of that run,
// in rank order (processes without a rank after, by pid). A directory that is not a manifest
// brings in every *.kptrace in it. Files named twice are read once. With `single_files` set
// (--file-only) a file argument is taken as it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kp {

// One process of a run, as its manifest entry describes it.
struct RunProcess {
  std::string run_id;
  bool root = false;
  std::string file;  // path of its trace file (manifest directory's parent + entry's file)
  uint32_t pid = 0, ppid = 0;
  std::string host;
  int rank = -1, local_rank = -1, world_size = -1;
  std::vector<std::string> command;
  uint64_t start_unix_ns = 0;
  std::string state;  // "writing" or "ended"
  std::string end_reason;
  bool file_exists = false;
};

struct RunManifest {
  std::string root;                   // the run's root file path
  std::string dir;                    // its manifest directory
  std::vector<RunProcess> processes;  // rank order
  std::vector<std::string> problems;  // unreadable entries, one line each
};

// Reads <root>.procs; false when there is no such directory.
bool ReadRunManifest(const std::string& root_path, RunManifest* manifest);

// The run `trace_path` belongs to: the manifest in its directory that lists it. False if none.
bool FindRunOf(const std::string& trace_path, RunManifest* manifest);

struct TraceInputs {
  std::vector<std::string> files;
  // One line per run gathered ("run t.kptrace: 3 processes (ranks 0-1, 1 without rank)"),
  // per manifest entry whose file is missing, and per unreadable entry.
  std::vector<std::string> notes;
  std::vector<std::string> errors;  // arguments that name nothing readable
};

TraceInputs ExpandTraceInputs(const std::vector<std::string>& args, bool single_files = false);

}  // namespace kp
