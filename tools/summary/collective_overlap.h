// collective_overlap.h: how long a process had collective kernels (NCCL) running, and how much of
// that time compute kernels ran too, from its kernels in start order: one sweep, two running
// ends, no list of intervals (the kernels come from an ExternalIntervalSort, in bounded memory).
#pragma once

#include <algorithm>
#include <cstdint>

namespace kp {

class CollectiveOverlap {
 public:
  // The next kernel, [start, end); kernels must come in ascending start order.
  void Add(uint64_t start, uint64_t end, bool collective) {
    Advance(start);
    uint64_t& e = collective ? collective_end_ : compute_end_;
    e = std::max(e, end);
  }
  // After the last kernel: counts the time up to the last end.
  void Finish() { Advance(UINT64_MAX); }
  // The length of the union of the collective kernels, and of its intersection with the union of
  // the compute kernels.
  uint64_t collective_busy_ns() const { return collective_busy_; }
  uint64_t overlap_ns() const { return overlap_; }

 private:
  // Counts [now_, t): every kernel starting before t has been added, so a time x in it is
  // covered by collectives exactly when x < collective_end_ (and likewise for compute).
  void Advance(uint64_t t) {
    if (t <= now_) return;
    const uint64_t collective = std::min(t, collective_end_);
    if (collective > now_) collective_busy_ += collective - now_;
    const uint64_t both = std::min(collective, compute_end_);
    if (both > now_) overlap_ += both - now_;
    now_ = t;
  }
  uint64_t now_ = 0;
  uint64_t collective_end_ = 0, compute_end_ = 0;
  uint64_t collective_busy_ = 0, overlap_ = 0;
};

}  // namespace kp
