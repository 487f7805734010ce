// start_keys.h: the key each record's `start` is coded against in format versions 2 and 3
// (common/start_predictor.h), for the libprotobuf record classes: a kernel's, copy's or memset's
// stream, an API call's thread; and RowDeltas, which undoes a keyed list's coding record by
// record. Shared by the reader, the reference writer and the tests that undo the coding
// themselves.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/start_predictor.h"
#include "kptrace.pb.h"

namespace kp {

inline uint64_t StartKeyOf(const Kernel& r) { return StreamKey(r.context(), r.stream()); }
inline uint64_t StartKeyOf(const Memcpy& r) { return StreamKey(r.context(), r.stream()); }
inline uint64_t StartKeyOf(const Memset& r) { return StreamKey(r.context(), r.stream()); }
inline uint64_t StartKeyOf(const ApiCall& r) { return r.thread_id(); }

// The record lists coded by key; the others code `start` from the previous record's start.
template <typename R>
inline constexpr bool kStartIsKeyed = std::is_same_v<R, Kernel> || std::is_same_v<R, Memcpy> ||
                                      std::is_same_v<R, Memset> || std::is_same_v<R, ApiCall>;

// Undoes the coding of one keyed list (versions 2 and 3), one record at a time in list order:
// `start` from the end of the previous record with the same key, `correlation` from the previous
// record's. Counts the records whose duration is negative.
class RowDeltas {
 public:
  RowDeltas(uint64_t time_base, uint64_t* negative_durations)
      : starts_(time_base), negative_durations_(negative_durations) {}
  template <typename R>
  void Undo(R* r) {
    r->set_start(static_cast<int64_t>(starts_.Next(r->start(), StartKeyOf(*r), r->duration())));
    if (r->duration() < 0) ++*negative_durations_;
    correlation_ += static_cast<uint64_t>(r->correlation());
    r->set_correlation(static_cast<int64_t>(correlation_));
  }

 private:
  KeyedStartDecoder starts_;
  uint64_t correlation_ = 0;
  uint64_t* negative_durations_;
};

}  // namespace kp
