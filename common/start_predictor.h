// start_predictor.h: the base a record's `start` is delta-coded from in format version 2
// (proto/kptrace.proto, ENCODING RULES), shared by the writer (inject/trace/trace_encoder.cc,
// tools/reader/proto_trace_writer.cc) and the reader (tools/reader/trace_reader.cc), so that both
// sides apply the same rule. No dependencies beyond the C++ library; no allocation.
//
// Kernels, copies and memsets of one stream, and API calls of one thread, follow each other: the
// next one usually starts a short, steady gap after the previous one ended. Coding `start` from
// that end instead of from the previous record's start leaves only the gap, and spares the file
// the previous record's duration a second time. The table remembers the last end per key in
// 64 direct-mapped slots (a key that meets another key's slot has no remembered end); it is
// emptied at every chunk, so chunks stay self-contained.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kp {

// The key of a GPU record's queue: its stream within its context.
inline uint64_t StreamKey(uint32_t context, uint32_t stream) {
  return (uint64_t{context} << 32) | stream;
}

class StartPredictor {
 public:
  static constexpr size_t kSlots = 64;

  void Reset() {
    for (Slot& s : slots_) s.used = false;
  }
  // The base of a record with `key`: the end of the previous record with that key in this
  // chunk, else `fallback` (the previous record's start in the list, or the chunk's time base).
  uint64_t Base(uint64_t key, uint64_t fallback) const {
    const Slot& s = slots_[Index(key)];
    return s.used && s.key == key ? s.end : fallback;
  }
  void Update(uint64_t key, uint64_t end) {
    Slot& s = slots_[Index(key)];
    s.used = true;
    s.key = key;
    s.end = end;
  }

 private:
  struct Slot {
    bool used = false;
    uint64_t key = 0;
    uint64_t end = 0;
  };
  static size_t Index(uint64_t key) {
    return static_cast<size_t>(((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull) >> 58);  // 6 bits
  }
  Slot slots_[kSlots];
};

// Reading side of one keyed list (kernels, memcpys, memsets: StreamKey; API calls: thread id):
// the absolute start of each record in list order, from its coded `start`, key and duration.
class KeyedStartDecoder {
 public:
  explicit KeyedStartDecoder(uint64_t time_base) : prev_start_(time_base) {}
  uint64_t Next(int64_t coded_start, uint64_t key, int64_t duration) {
    const uint64_t start = ends_.Base(key, prev_start_) + static_cast<uint64_t>(coded_start);
    prev_start_ = start;
    ends_.Update(key, start + static_cast<uint64_t>(duration));
    return start;
  }

 private:
  uint64_t prev_start_;
  StartPredictor ends_;
};

// Writing side, for writers that hold a whole list (the injector's encoder keeps the same state
// per list in trace_encoder.cc): the coded `start` of each record in list order.
class KeyedStartEncoder {
 public:
  explicit KeyedStartEncoder(uint64_t time_base) : prev_start_(time_base) {}
  int64_t Next(uint64_t start, uint64_t key, int64_t duration) {
    const uint64_t base = ends_.Base(key, prev_start_);
    prev_start_ = start;
    ends_.Update(key, start + static_cast<uint64_t>(duration));
    return static_cast<int64_t>(start - base);
  }

 private:
  uint64_t prev_start_;
  StartPredictor ends_;
};

}  // namespace kp
