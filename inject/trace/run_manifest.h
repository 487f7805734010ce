// run_manifest.h: writes this process's entry in its run's manifest directory
// (<root>.procs/<host>.<pid>.json, one JSON object). Each process writes only its own entry, by
// writing a temporary file and renaming it over the entry, so any number of processes (and
// hosts sharing the directory) can write at once and a reader never sees half an entry.
// kptrace reads the entries back (tools/run/run_inputs.h). Called on kp's writer thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kp {

struct ManifestEntry {
  std::string run_id;
  bool root = false;  // this process writes the run's root file
  std::string file;   // the trace file's name, relative to the manifest's parent directory
  uint32_t pid = 0, ppid = 0;
  std::string host;
  int rank = -1, local_rank = -1, world_size = -1;
  std::vector<std::string> command;
  uint64_t start_unix_ns = 0;
  std::string state = "writing";  // "writing" while the process runs, "ended" after the footer
  std::string end_reason;         // the footer's end reason once ended ("exit", "signal SIGTERM")
};

// One JSON object (no newline inside; strings escaped so any parser accepts them).
std::string ManifestEntryJson(const ManifestEntry& entry);

// Creates the directory when needed and (re)writes <dir>/<host>.<pid>.json.
Status WriteManifestEntry(const std::string& dir, const ManifestEntry& entry);

}  // namespace kp
