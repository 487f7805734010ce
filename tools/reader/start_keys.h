// start_keys.h: the key each record's `start` is coded against in format version 2
// (common/start_predictor.h), for the libprotobuf record classes: a kernel's, copy's or memset's
// stream, an API call's thread. Shared by the reader, the reference writer and the tests that
// undo the coding themselves.
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

}  // namespace kp
