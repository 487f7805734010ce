// sort_runs.h: sort a range that arrives as a few runs already in order.
//
// The exporters and the summary sort each stream's or thread's records by start time. Those
// records come as a handful of runs already in order (a stream's kernels, then its copies, then
// its memsets; a thread's API calls, then its NVTX ranges): merging the runs costs one pass per
// merge level (log2 of the runs), where a general sort costs a pass per halving of the range. Past
// kMaxRuns runs it sorts.
#pragma once

#include <algorithm>
#include <cstddef>

namespace kp {

template <typename It, typename Less>
void SortRuns(It first, It last, Less less) {
  constexpr size_t kMaxRuns = 64;
  It bounds[kMaxRuns + 1];
  size_t runs = 0;
  bounds[0] = first;
  for (It it = first; it != last; ++it) {
    if (it != first && less(*it, *(it - 1))) {
      if (++runs == kMaxRuns) {
        std::sort(first, last, less);
        return;
      }
      bounds[runs] = it;
    }
  }
  bounds[++runs] = last;
  while (runs > 1) {  // merge neighbouring runs pairwise until one is left
    size_t merged = 0;
    for (size_t r = 0; r + 1 < runs; r += 2) {
      std::inplace_merge(bounds[r], bounds[r + 1], bounds[r + 2], less);
      bounds[merged++] = bounds[r];
    }
    if (runs % 2 == 1) bounds[merged++] = bounds[runs - 1];
    bounds[merged] = last;
    runs = merged;
  }
}

}  // namespace kp
