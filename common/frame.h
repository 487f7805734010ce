// frame.h: the chunk framing of a .kptrace file, shared by the writer (inject/) and the reader
// (tools/). See proto/kptrace.proto for the layout. No dependencies beyond the C++ library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kp {

// The last byte is the format version. Version 3 (written now) writes the kernels and API calls
// of a chunk as columns; version 2 codes the `start` of kernels, copies, memsets and API calls
// from the previous record of the same stream or thread (common/start_predictor.h), as version
// 3 does; readers read versions 1, 2 and 3.
inline constexpr char kFileMagic[8] = {'K', 'P', 'T', 'R', 'A', 'C', 'E', '3'};
inline constexpr char kFormatVersion1 = '1';
inline constexpr char kFormatVersion2 = '2';
inline constexpr size_t kFileMagicSize = 8;
inline constexpr uint32_t kChunkMagic = 0x4B43504Bu;  // "KPCK" read as little-endian u32
inline constexpr size_t kFrameHeaderSize = 24;
inline constexpr uint32_t kFrameFlagZstd = 1u;
// A reader refuses frames that claim more than this; the writer never produces them.
inline constexpr uint32_t kMaxChunkBytes = 256u << 20;

struct FrameHeader {
  uint32_t magic = kChunkMagic;
  uint32_t flags = 0;
  uint32_t stored_size = 0;
  uint32_t raw_size = 0;
  uint32_t payload_crc = 0;
  uint32_t header_crc = 0;
};

// CRC-32C (Castagnoli), software table; `crc` continues a previous call (start with 0).
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

// Writes the 24 header bytes, computing header_crc from the other fields.
void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]);

enum class FrameHeaderStatus { kOk, kBadMagic, kBadHeaderCrc, kTooLarge };
// Parses 24 bytes; does not check the payload.
FrameHeaderStatus DecodeFrameHeader(const uint8_t in[kFrameHeaderSize], FrameHeader* h);

}  // namespace kp
