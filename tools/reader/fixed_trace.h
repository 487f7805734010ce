// fixed_trace.h: a small, fully specified trace (every record kind, awkward names, two chunks,
// a footer) built through ProtoTraceWriter. The tools' unit and golden tests read it, so its
// content must only change together with tests/data/golden/.
#pragma once

#include <string>

namespace kp {

struct FixedTraceOptions {
  bool footer = true;  // false: the trace ends without a clean-end footer (killed process)
  int zstd_level = 0;  // > 0: chunks are zstd-compressed
};

// The complete .kptrace file bytes.
std::string BuildFixedTrace(const FixedTraceOptions& options = {});

}  // namespace kp
