// trace_inputs.h: turns the input arguments of kptrace's reading commands (report, diff) into the
// list of trace files to read. It goes through ExpandTraceInputs (tools/run/run_inputs.h), the
// expansion info, summary and convert use, so a run (several processes of one job) is one
// argument everywhere.
#pragma once

#include <string>
#include <vector>

namespace kp {

// Expands every argument (a trace file, or a run: its first file, any member or its .procs
// directory) into *paths, in rank order per run. Notes about gathered runs go to *notes when
// given. Returns false with *error naming the argument and the problem when an argument names
// nothing readable.
bool ListTraceInputs(const std::vector<std::string>& args, std::vector<std::string>* paths,
                     std::string* error, std::vector<std::string>* notes = nullptr);

}  // namespace kp
