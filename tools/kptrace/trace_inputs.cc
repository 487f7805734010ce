#include "tools/kptrace/trace_inputs.h"

#include "tools/run/run_inputs.h"

namespace kp {

bool ListTraceInputs(const std::vector<std::string>& args, std::vector<std::string>* paths,
                     std::string* error, std::vector<std::string>* notes) {
  TraceInputs inputs = ExpandTraceInputs(args);
  if (notes != nullptr) notes->insert(notes->end(), inputs.notes.begin(), inputs.notes.end());
  if (!inputs.errors.empty()) {
    *error = inputs.errors.front();
    return false;
  }
  paths->insert(paths->end(), inputs.files.begin(), inputs.files.end());
  return true;
}

}  // namespace kp
