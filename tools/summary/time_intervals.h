// time_intervals.h: GPU busy time as intervals on the trace clock, merged so that overlapping
// work (streams running side by side) counts once. Used by summary (busy fraction, metrics'
// busy share) and report (busy % over time).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kp {

struct TimeInterval {
  uint64_t start, end;
};

// Sorted, disjoint intervals covering exactly what `v` covers.
inline std::vector<TimeInterval> MergeIntervals(std::vector<TimeInterval> v) {
  std::sort(v.begin(), v.end(),
            [](const TimeInterval& a, const TimeInterval& b) { return a.start < b.start; });
  std::vector<TimeInterval> out;
  for (const TimeInterval& i : v) {
    if (!out.empty() && i.start <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

}  // namespace kp
