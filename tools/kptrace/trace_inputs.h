// trace_inputs.h: the input arguments of kptrace's reading commands. ListTraceInputs turns them
// into the list of trace files to read (report, diff); it goes through ExpandTraceInputs
// (tools/run/run_inputs.h), the expansion info, summary and convert use, so a run (several
// processes of one job) is one argument everywhere. TakeRunInputFlag parses the flags those
// commands share.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace kp {

// Expands every argument (a trace file, or a run: its first file, any member or its .procs
// directory) into paths, in rank order per run. Notes about gathered runs go to *notes when
// given. An error naming the argument and the problem when an argument names nothing readable.
StatusOr<std::vector<std::string>> ListTraceInputs(const std::vector<std::string>& args,
                                                   std::vector<std::string>* notes = nullptr);

// The flags every multi-file command shares: --file-only and --align collectives|none.
struct RunInputFlags {
  bool file_only = false;
  bool align_collectives = false;
};
// Takes argv[*i] (and its value, advancing *i) when it is one of those flags: true when taken,
// false when argv[*i] is another argument, an error (one line naming the flag and its accepted
// values) for a bad value.
StatusOr<bool> TakeRunInputFlag(int argc, char** argv, int* i, RunInputFlags* flags);

}  // namespace kp
