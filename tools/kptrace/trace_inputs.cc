#include "tools/kptrace/trace_inputs.h"

#include "tools/run/run_inputs.h"

namespace kp {

StatusOr<std::vector<std::string>> ListTraceInputs(const std::vector<std::string>& args,
                                                   std::vector<std::string>* notes) {
  TraceInputs inputs = ExpandTraceInputs(args);
  if (notes != nullptr) notes->insert(notes->end(), inputs.notes.begin(), inputs.notes.end());
  if (!inputs.errors.empty()) return Status::Error(inputs.errors.front());
  return std::move(inputs.files);
}

StatusOr<bool> TakeRunInputFlag(int argc, char** argv, int* i, RunInputFlags* flags) {
  const std::string a = argv[*i];
  if (a == "--file-only") {
    flags->file_only = true;
    return true;
  }
  if (a != "--align" || *i + 1 >= argc) return false;
  const std::string what = argv[++*i];
  if (what != "collectives" && what != "none") {
    return Status::Error("--align takes collectives or none (not '" + what + "')");
  }
  flags->align_collectives = what == "collectives";
  return true;
}

}  // namespace kp
