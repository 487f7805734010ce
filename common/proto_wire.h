// proto_wire.h: a tiny zero-allocation protobuf wire writer (in the spirit of Perfetto's
// protozero), shared by the injector and kptrace. The injector must not load libprotobuf into the
// host process, so its TraceEncoder writes kp.Chunk bytes with this; kptrace's Perfetto exporter
// writes TracePackets with the same writer.
//
// Two pieces:
// - WireWriter writes fields through a raw pointer into memory the caller has sized (a stack
//   array for a fixed-size record, or space reserved in a WireBuffer). No bounds checks: the
//   caller reserves the worst case (MaxFieldBytes and friends give it).
// - WireBuffer is a growing byte buffer reused across chunks. Reserve() grows it by resizing,
//   which zero-fills, and Commit() only ever advances over bytes a WireWriter wrote, so the
//   buffer never holds uninitialised bytes.
// A nested message is written into a scratch buffer first, then copied as tag+length+bytes
// (AppendMessage), which keeps every length varint minimal. A writer that streams nested
// messages in one pass instead (the Perfetto exporter) reserves room after the tag and fills the
// length in afterwards: PatchLength (a redundant 4-byte varint, which every protobuf parser
// accepts; protozero does the same) or PatchShortLength (2 bytes, for messages below 16 KiB).
// Implicit-presence (proto3) rule: the Uint/Sint/Int/Bool/Double helpers skip default values;
// the *Always variants write them (needed for oneof members and packed values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace kp::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

inline constexpr size_t kMaxVarintBytes = 10;
// Tag (field numbers below 2^28 need at most 5 bytes) + the longest value of a scalar field.
inline constexpr size_t kMaxScalarFieldBytes = 5 + kMaxVarintBytes;

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

// Worst-case bytes of a length-delimited field holding `payload` bytes.
inline size_t MaxLengthDelimitedBytes(size_t payload) { return 5 + kMaxVarintBytes + payload; }

// Room for a length patched in after the nested message is written: up to 2^28 - 1 bytes.
inline constexpr size_t kPatchedLengthBytes = 4;
inline void PatchLength(uint8_t* p, size_t len) {
  p[0] = static_cast<uint8_t>((len & 0x7f) | 0x80);
  p[1] = static_cast<uint8_t>(((len >> 7) & 0x7f) | 0x80);
  p[2] = static_cast<uint8_t>(((len >> 14) & 0x7f) | 0x80);
  p[3] = static_cast<uint8_t>((len >> 21) & 0x7f);
}
// The same in two bytes, for a nested message expected to stay below 2^14 bytes (a writer that
// finds it longer moves the message up by kPatchedLengthBytes - kShortLengthBytes and uses
// PatchLength instead).
inline constexpr size_t kShortLengthBytes = 2;
inline constexpr size_t kMaxShortLength = (size_t{1} << 14) - 1;
inline void PatchShortLength(uint8_t* p, size_t len) {
  p[0] = static_cast<uint8_t>((len & 0x7f) | 0x80);
  p[1] = static_cast<uint8_t>(len >> 7);
}

class WireWriter {
 public:
  explicit WireWriter(uint8_t* out) : begin_(out), p_(out) {}

  size_t size() const { return static_cast<size_t>(p_ - begin_); }
  uint8_t* data() const { return begin_; }

  void RawVarint(uint64_t v) {
    if (v >= kLongVarint) return RawLongVarint(v);
    while (v >= 0x80) {
      *p_++ = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<uint8_t>(v);
  }
  void Tag(uint32_t field, WireType type) { RawVarint((uint64_t{field} << 3) | type); }
  // The low 56 bits of v as eight 7-bit groups, one in the low bits of each byte (group 0 in
  // the lowest byte), in three halvings: 28-bit halves into 32-bit lanes, 14-bit quarters into
  // 16-bit lanes, 7-bit groups into bytes (bits 56-63 are left out by the first masks).
  static uint64_t SpreadGroups(uint64_t v) {
    uint64_t x = (v & 0x000000000fffffffull) | ((v & 0x00fffffff0000000ull) << 4);
    x = (x & 0x00003fff00003fffull) | ((x & 0x0fffc0000fffc000ull) << 2);
    return (x & 0x007f007f007f007full) | ((x & 0x3f803f803f803f80ull) << 1);
  }
  // A varint of 9 or 10 bytes (timestamps, hashed ids): its first eight bytes in one store.
  static constexpr uint64_t kLongVarint = uint64_t{1} << 56;
  void RawLongVarint(uint64_t v) {
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store puts group 0 first");
    const uint64_t w = SpreadGroups(v) | 0x8080808080808080ull;
    std::memcpy(p_, &w, 8);
    p_ += 8;
    v >>= 56;
    if (v >= 0x80) {
      *p_++ = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<uint8_t>(v);
  }
  // RawVarint for a caller that has room for kMaxVarintBytes at the write position whatever
  // the value: a value of 2 to 8 bytes (below 2^56) is made in one 8-byte store of which only
  // its own bytes are kept (arrow ids, 5 to 8 bytes); a longer one as RawLongVarint.
  void RawVarintFullRoom(uint64_t v) {
    if (v < 0x80) {
      *p_++ = static_cast<uint8_t>(v);
      return;
    }
    if (v >= kLongVarint) return RawLongVarint(v);
    const int bytes = (64 - __builtin_clzll(v) + 6) / 7;  // 2 .. 8
    const uint64_t w = (SpreadGroups(v) | 0x8080808080808080ull) &
                       ~(uint64_t{0x80} << (8 * (bytes - 1)));  // the last byte ends the value
    std::memcpy(p_, &w, 8);
    p_ += bytes;
  }
  void RawFixed32(uint32_t v) {
    for (int i = 0; i < 4; ++i) *p_++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void RawFixed64(uint64_t v) {
    for (int i = 0; i < 8; ++i) *p_++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void RawBytes(const void* data, size_t size) {
    if (size == 0) return;  // memcpy with a null source is undefined even for size 0
    std::memcpy(p_, data, size);
    p_ += size;
  }

  // uint32/uint64/enum/bool fields.
  void UintAlways(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    RawVarint(v);
  }
  void Uint(uint32_t field, uint64_t v) {
    if (v != 0) UintAlways(field, v);
  }
  void Bool(uint32_t field, bool v) {
    if (v) UintAlways(field, 1);
  }
  // int32/int64 fields: negative values are sign-extended to 64 bits (10 bytes), as protobuf
  // requires for int32.
  void IntAlways(uint32_t field, int64_t v) { UintAlways(field, static_cast<uint64_t>(v)); }
  void Int(uint32_t field, int64_t v) {
    if (v != 0) IntAlways(field, v);
  }
  // sint32/sint64 fields.
  void SintAlways(uint32_t field, int64_t v) { UintAlways(field, ZigZag(v)); }
  void Sint(uint32_t field, int64_t v) {
    if (v != 0) SintAlways(field, v);
  }
  void Fixed32Always(uint32_t field, uint32_t v) {
    Tag(field, kFixed32);
    RawFixed32(v);
  }
  void Fixed64Always(uint32_t field, uint64_t v) {
    Tag(field, kFixed64);
    RawFixed64(v);
  }
  void DoubleAlways(uint32_t field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    Fixed64Always(field, bits);
  }
  void FloatAlways(uint32_t field, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    Fixed32Always(field, bits);
  }
  // string/bytes/sub-message fields; an empty value is skipped (proto3 default).
  void Bytes(uint32_t field, const void* data, size_t size) {
    if (size != 0) BytesAlways(field, data, size);
  }
  void BytesAlways(uint32_t field, const void* data, size_t size) {
    Tag(field, kLengthDelimited);
    RawVarint(size);
    RawBytes(data, size);
  }
  void String(uint32_t field, std::string_view s) { Bytes(field, s.data(), s.size()); }
  void StringAlways(uint32_t field, std::string_view s) { BytesAlways(field, s.data(), s.size()); }
  // A sub-message written into another WireWriter's memory (always written: an empty
  // sub-message still marks the field present).
  void Message(uint32_t field, const WireWriter& sub) {
    BytesAlways(field, sub.data(), sub.size());
  }
  // A packed repeated double field.
  void PackedDoubles(uint32_t field, const double* values, size_t n) {
    if (n == 0) return;
    Tag(field, kLengthDelimited);
    RawVarint(n * 8);
    for (size_t i = 0; i < n; ++i) {
      uint64_t bits;
      std::memcpy(&bits, &values[i], sizeof bits);
      RawFixed64(bits);
    }
  }

 private:
  uint8_t* begin_;
  uint8_t* p_;
};

// Growing byte buffer, reused: Clear() keeps the capacity, so steady state allocates nothing.
class WireBuffer {
 public:
  size_t size() const { return used_; }
  const uint8_t* data() const { return bytes_.data(); }
  void Clear() { used_ = 0; }

  // Returns a writer with room for at least `max_bytes`; call Commit(writer) when done.
  WireWriter Reserve(size_t max_bytes) {
    if (bytes_.size() - used_ < max_bytes) Grow(max_bytes);
    return WireWriter(bytes_.data() + used_);
  }
  void Commit(const WireWriter& w) { used_ += w.size(); }

  // Appends tag + length + the bytes of a message encoded elsewhere.
  void AppendMessage(uint32_t field, const uint8_t* data, size_t size) {
    WireWriter w = Reserve(MaxLengthDelimitedBytes(size));
    w.BytesAlways(field, data, size);
    Commit(w);
  }
  void AppendMessage(uint32_t field, const WireBuffer& sub) {
    AppendMessage(field, sub.data(), sub.size());
  }
  void AppendRaw(const uint8_t* data, size_t size) {
    WireWriter w = Reserve(size);
    w.RawBytes(data, size);
    Commit(w);
  }

 private:
  void Grow(size_t max_bytes) {
    size_t want = used_ + max_bytes;
    size_t doubled = bytes_.size() * 2;
    bytes_.resize(want > doubled ? want : doubled);  // value-initialises: no garbage bytes
  }
  std::vector<uint8_t> bytes_;
  size_t used_ = 0;
};

}  // namespace kp::wire
