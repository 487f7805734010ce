#include "common/frame.h"

#include <cstring>

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

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
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
