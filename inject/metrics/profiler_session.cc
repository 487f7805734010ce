#include "inject/metrics/profiler_session.h"

#include <cstdio>

namespace kp {

std::string ProfilerSession::FormatCallTimes() const {
  static constexpr const char* kNames[static_cast<int>(SessionCall::kCount)] = {
      "Start",   "Stop", "PushRange", "PopRange", "decode+evaluate", "image re-init+SetConfig",
      "L2 sweep"};
  std::string out;
  for (int i = 0; i < static_cast<int>(SessionCall::kCount); ++i) {
    const CallTimes& t = times_[i];
    if (!t.count) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %llux %.3f ms (max %.3f)", out.empty() ? "" : ", ",
                  kNames[i], static_cast<unsigned long long>(t.count),
                  t.total_ms / static_cast<double>(t.count), t.max_ms);
    out += buf;
  }
  return out;
}

}  // namespace kp
