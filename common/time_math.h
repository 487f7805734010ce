// Checked arithmetic on trace timestamps and durations.
// Records carry int64 start and duration fields that come from files of any origin: a corrupt or
// hostile trace can hold values whose sum overflows. Every end time the tools derive goes through
// these helpers, which saturate instead of overflowing (signed overflow is undefined behaviour).
#pragma once

#include <cstdint>
#include <limits>

namespace kp {

// a + b, clamped to [INT64_MIN, INT64_MAX].
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

// a - b, clamped to [INT64_MIN, INT64_MAX].
inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) {
    return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

// The end of a record: start + duration, saturated.
inline int64_t EndTime(int64_t start, int64_t duration) { return SaturatingAdd(start, duration); }

}  // namespace kp
