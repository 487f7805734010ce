#include "tests/robustness/reproducers.h"

#include <zstd.h>

#include <cstdint>
#include <cstring>

#include "common/frame.h"
#include "kptrace.pb.h"
#include "tools/reader/chunk_columns.h"

namespace kp {
namespace {

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string Frame(const std::string& payload, uint32_t raw_size, bool zstd) {
  FrameHeader h;
  h.flags = zstd ? kFrameFlagZstd : 0;
  h.stored_size = static_cast<uint32_t>(payload.size());
  h.raw_size = raw_size;
  h.payload_crc = Crc32c(payload.data(), payload.size());
  uint8_t header[kFrameHeaderSize];
  EncodeFrameHeader(h, header);
  return std::string(reinterpret_cast<const char*>(header), kFrameHeaderSize) + payload;
}

// `prefix` followed by `pattern` repeated `count` times, zstd-compressed as a stream (the
// decompressed message is never held in memory) and framed.
std::string CompressedRepeat(const std::string& prefix, const std::string& pattern,
                             uint64_t count) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
  const uint64_t raw = prefix.size() + pattern.size() * count;
  ZSTD_CCtx_setPledgedSrcSize(cctx, raw);
  std::string block;
  const uint64_t per_block = (1u << 16) / pattern.size();
  for (uint64_t i = 0; i < per_block; ++i) block += pattern;
  std::string out(ZSTD_CStreamOutSize(), '\0'), stored;
  auto feed = [&](const std::string& in, ZSTD_EndDirective mode) {
    ZSTD_inBuffer ib = {in.data(), in.size(), 0};
    size_t left;
    do {
      ZSTD_outBuffer ob = {&out[0], out.size(), 0};
      left = ZSTD_compressStream2(cctx, &ob, &ib, mode);
      stored.append(out.data(), ob.pos);
    } while (!ZSTD_isError(left) && (ib.pos < ib.size || (mode == ZSTD_e_end && left != 0)));
  };
  feed(prefix, ZSTD_e_continue);
  uint64_t left = count;
  while (left >= per_block) {
    feed(block, ZSTD_e_continue);
    left -= per_block;
  }
  std::string tail;
  for (uint64_t i = 0; i < left; ++i) tail += pattern;
  feed(tail, ZSTD_e_end);
  ZSTD_freeCCtx(cctx);
  return Frame(stored, static_cast<uint32_t>(raw > UINT32_MAX ? UINT32_MAX : raw), true);
}

std::string Magic() { return std::string(kFileMagic, kFileMagicSize); }

// The serialized Chunk inside one framed chunk (decompressed when it was stored with zstd).
std::string RawPayload(const std::string& framed) {
  FrameHeader h;
  DecodeFrameHeader(reinterpret_cast<const uint8_t*>(framed.data()), &h);
  std::string payload = framed.substr(kFrameHeaderSize);
  if (!(h.flags & kFrameFlagZstd)) return payload;
  std::string raw(h.raw_size, '\0');
  raw.resize(ZSTD_decompress(&raw[0], raw.size(), payload.data(), payload.size()));
  return raw;
}

}  // namespace

std::vector<std::string> SplitChunks(const std::string& file) {
  std::vector<std::string> chunks;
  size_t pos = kFileMagicSize;
  while (pos + kFrameHeaderSize <= file.size()) {
    FrameHeader h;
    if (DecodeFrameHeader(reinterpret_cast<const uint8_t*>(file.data() + pos), &h) !=
        FrameHeaderStatus::kOk) {
      break;
    }
    const size_t n = kFrameHeaderSize + h.stored_size;
    if (pos + n > file.size()) break;
    chunks.push_back(file.substr(pos, n));
    pos += n;
  }
  return chunks;
}

std::vector<std::pair<std::string, std::string>> BuildReproducers(const std::string& example) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::vector<std::string> chunks = SplitChunks(example);
  std::string all;
  for (const std::string& c : chunks) all += c;

  // 1. A header (Chunk.header = 4) holding 110 M empty command-line arguments (Header = 5), or
  //    empty config entries (Header.config = 12): a 20 KB file that once took over 10 GB.
  const uint64_t kNested = 110u << 20;
  out.emplace_back(
      "nested_command_line_bomb.kptrace",
      Magic() +
          CompressedRepeat("\x22" + Varint(2 * kNested), std::string("\x2a\x00", 2), kNested) +
          all);
  out.emplace_back(
      "nested_config_bomb.kptrace",
      Magic() +
          CompressedRepeat("\x22" + Varint(2 * kNested), std::string("\x62\x00", 2), kNested) +
          all);
  // 2. 16 M empty kernels (Chunk.kernels = 8) in a 3 KB chunk (once 1.75 GB).
  out.emplace_back("empty_kernels_bomb.kptrace",
                   Magic() + CompressedRepeat("", std::string("\x42\x00", 2), 16u << 20) + all);
  // 3. The same inside the compression-ratio limit: 4 M empty kernels stored uncompressed.
  {
    std::string raw;
    for (int i = 0; i < (4 << 20); ++i) raw.append("\x42\x00", 2);
    out.emplace_back("empty_kernels_stored.kptrace",
                     Magic() + Frame(raw, static_cast<uint32_t>(raw.size()), false) + all);
  }
  // 3b. Nested entries inside the limits too: 2 M empty header config entries, uncompressed.
  {
    std::string raw = "\x22" + Varint(2u * (2u << 20));
    for (int i = 0; i < (2 << 20); ++i) raw.append("\x62\x00", 2);
    out.emplace_back("nested_config_stored.kptrace",
                     Magic() + Frame(raw, static_cast<uint32_t>(raw.size()), false) + all);
  }
  // 4. A tiny file whose only chunk header claims 256 MiB (once 274 MB).
  {
    FrameHeader h;
    h.stored_size = kMaxChunkBytes;
    h.raw_size = kMaxChunkBytes;
    uint8_t header[kFrameHeaderSize];
    EncodeFrameHeader(h, header);
    out.emplace_back(
        "claims_256_mib.kptrace",
        Magic() + std::string(reinterpret_cast<const char*>(header), kFrameHeaderSize));
  }
  // 5. A header whose command line holds Latin-1 bytes (once: "nothing could be read").
  {
    Chunk c;
    std::string payload = chunks.empty() ? std::string() : chunks[0].substr(kFrameHeaderSize);
    FrameHeader h;
    if (!chunks.empty()) DecodeFrameHeader(reinterpret_cast<const uint8_t*>(chunks[0].data()), &h);
    std::string raw = payload;
    if (h.flags & kFrameFlagZstd) {
      raw.assign(h.raw_size, '\0');
      raw.resize(ZSTD_decompress(&raw[0], raw.size(), payload.data(), payload.size()));
    }
    // Appending a field merges into the message: Chunk.header.command_line += "caf\xe9".
    raw +=
        "\x22\x06\x2a\x04"
        "caf\xe9";
    std::string file = Magic() + Frame(raw, static_cast<uint32_t>(raw.size()), false);
    for (size_t i = 1; i < chunks.size(); ++i) file += chunks[i];
    out.emplace_back("latin1_command_line.kptrace", file);
  }
  // 6. Every chunk twice (once: counts doubled and "ended cleanly").
  {
    std::string file = Magic();
    for (const std::string& c : chunks) file += c + c;
    out.emplace_back("duplicated_chunks.kptrace", file);
  }
  // 7. The chunks in reverse order (once: "1 chunk missing ... records are lost").
  {
    std::string file = Magic();
    for (size_t i = chunks.size(); i-- > 0;) file += chunks[i];
    out.emplace_back("swapped_chunks.kptrace", file);
  }
  // 9. Not a reproducer: the example with every chunk stored uncompressed, so that mutations
  //    (fuzz/) reach the protobuf parse without first breaking zstd.
  {
    std::string file = Magic();
    for (const std::string& c : chunks) {
      const std::string payload = RawPayload(c);
      file += Frame(payload, static_cast<uint32_t>(payload.size()), false);
    }
    out.emplace_back("uncompressed_example.kptrace", file);
  }
  // 10. Format version 3: the example's chunks with their kernels and API calls moved into
  //     columns (as the injector writes them; chunk_columns.h), stored uncompressed so that
  //     mutations (fuzz/) reach the columns. Its starts keep the example's coding (version 1):
  //     the records are all there, their times are not meant to match.
  {
    std::string file = Magic();
    file[kFileMagicSize - 1] = '3';
    for (const std::string& c : chunks) {
      Chunk chunk;
      const std::string raw = RawPayload(c);
      if (!chunk.ParseFromString(raw)) continue;
      MoveToColumns(&chunk);
      const std::string moved = chunk.SerializeAsString();
      file += Frame(moved, static_cast<uint32_t>(moved.size()), false);
    }
    out.emplace_back("version_3_columns.kptrace", file);
  }
  // 11. Columns of a record list that disagree in length (three durations for two kernels),
  //     and a count of 2^31 - 1 kernels with no column at all (~200 GB of records expanded),
  //     each in a chunk of its own before the example's.
  {
    Chunk bad;
    KernelColumns* k = bad.mutable_kernel_columns();
    k->set_count(2);
    for (int i = 0; i < 2; ++i) k->add_start(100);
    for (int i = 0; i < 3; ++i) k->add_duration(10);
    const std::string raw = bad.SerializeAsString();
    out.emplace_back("column_length_mismatch.kptrace",
                     Magic() + Frame(raw, static_cast<uint32_t>(raw.size()), false) + all);
    Chunk bomb;
    bomb.mutable_kernel_columns()->set_count(0x7fffffffu);
    bomb.mutable_api_call_columns()->set_count(0x7fffffffu);
    const std::string braw = bomb.SerializeAsString();
    out.emplace_back("column_count_bomb.kptrace",
                     Magic() + Frame(braw, static_cast<uint32_t>(braw.size()), false) + all);
  }
  // 8. A later format version (once: "not a kp trace").
  {
    std::string file = example;
    if (file.size() >= kFileMagicSize) file[kFileMagicSize - 1] = '4';
    out.emplace_back("format_version_4.kptrace", file);
  }
  return out;
}

}  // namespace kp
