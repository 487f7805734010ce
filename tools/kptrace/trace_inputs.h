// trace_inputs.h: turns the input arguments of kptrace's reading commands (summary, convert,
// report, diff) into the list of trace files to read. Every such command goes through this one
// function, so a new kind of input (e.g. a run directory) is accepted by all of them at once.
#pragma once

#include <string>
#include <vector>

namespace kp {

// Today every argument names one trace file, kept in command-line order. Returns false with
// *error naming the argument and the problem when an argument cannot be used.
bool ListTraceInputs(const std::vector<std::string>& args, std::vector<std::string>* paths,
                     std::string* error);

}  // namespace kp
