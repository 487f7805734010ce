#include "common/frame.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace kp {
namespace {

struct Crc32cTable {
  uint32_t t[256];
  constexpr Crc32cTable() : t() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
  }
};
constexpr Crc32cTable kTable;

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

#if defined(__x86_64__)
namespace {
// SSE4.2's crc32 instruction computes exactly this polynomial, 8 bytes per instruction: the
// reader checks every payload byte of a trace, and the table loop was a twentieth of a
// conversion's time.
__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const uint8_t* p, size_t size,
                                                          uint32_t crc) {
  uint64_t c = crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; size > 0; --size, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
bool HaveSse42() {
  static const bool have = (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2"));
  return have;
}
}  // namespace
#endif

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (HaveSse42()) return ~Crc32cHardware(p, size, crc);
#endif
  for (size_t i = 0; i < size; ++i) crc = kTable.t[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]) {
  PutU32(out + 0, h.magic);
  PutU32(out + 4, h.flags);
  PutU32(out + 8, h.stored_size);
  PutU32(out + 12, h.raw_size);
  PutU32(out + 16, h.payload_crc);
  PutU32(out + 20, Crc32c(out, 20));
}

FrameHeaderStatus DecodeFrameHeader(const uint8_t in[kFrameHeaderSize], FrameHeader* h) {
  h->magic = GetU32(in + 0);
  if (h->magic != kChunkMagic) return FrameHeaderStatus::kBadMagic;
  h->flags = GetU32(in + 4);
  h->stored_size = GetU32(in + 8);
  h->raw_size = GetU32(in + 12);
  h->payload_crc = GetU32(in + 16);
  h->header_crc = GetU32(in + 20);
  if (h->header_crc != Crc32c(in, 20)) return FrameHeaderStatus::kBadHeaderCrc;
  if (h->stored_size > kMaxChunkBytes || h->raw_size > kMaxChunkBytes) {
    return FrameHeaderStatus::kTooLarge;
  }
  return FrameHeaderStatus::kOk;
}

}  // namespace kp
