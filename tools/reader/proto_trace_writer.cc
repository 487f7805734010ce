#include "tools/reader/proto_trace_writer.h"

#include <zstd.h>

#include <cstdio>

#include "common/frame.h"
#include "tools/reader/chunk_columns.h"
#include "tools/reader/start_keys.h"

namespace kp {
namespace {

template <typename List>
void EncodeStarts(List* list, uint64_t time_base) {
  uint64_t prev = time_base;
  for (auto& r : *list) {
    uint64_t abs = static_cast<uint64_t>(r.start());
    r.set_start(static_cast<int64_t>(abs - prev));
    prev = abs;
  }
}
// Kernels, copies, memsets (keyed by stream) and API calls (by thread), format version 2.
template <typename List>
void EncodeKeyedStarts(List* list, uint64_t time_base) {
  KeyedStartEncoder starts(time_base);
  for (auto& r : *list) {
    r.set_start(starts.Next(static_cast<uint64_t>(r.start()), StartKeyOf(r), r.duration()));
  }
}
template <typename List>
void EncodeCorrelations(List* list) {
  uint64_t prev = 0;
  for (auto& r : *list) {
    uint64_t abs = static_cast<uint64_t>(r.correlation());
    r.set_correlation(static_cast<int64_t>(abs - prev));
    prev = abs;
  }
}

}  // namespace

ProtoTraceWriter::ProtoTraceWriter(int zstd_level, char format_version)
    : zstd_level_(zstd_level), format_version_(format_version), bytes_(kFileMagic, kFileMagicSize) {
  bytes_[kFileMagicSize - 1] = format_version;
}

void ProtoTraceWriter::Add(const Chunk& absolute) {
  Chunk c = absolute;
  const uint64_t base = c.time_base_ns();
  if (format_version_ == kFormatVersion1) {
    EncodeStarts(c.mutable_kernels(), base);
    EncodeStarts(c.mutable_memcpys(), base);
    EncodeStarts(c.mutable_memsets(), base);
    EncodeStarts(c.mutable_api_calls(), base);
  } else {
    EncodeKeyedStarts(c.mutable_kernels(), base);
    EncodeKeyedStarts(c.mutable_memcpys(), base);
    EncodeKeyedStarts(c.mutable_memsets(), base);
    EncodeKeyedStarts(c.mutable_api_calls(), base);
  }
  EncodeStarts(c.mutable_nvtx_ranges(), base);
  EncodeStarts(c.mutable_syncs(), base);
  EncodeStarts(c.mutable_overheads(), base);
  EncodeStarts(c.mutable_graph_launches(), base);
  EncodeStarts(c.mutable_metric_ranges(), base);
  EncodeStarts(c.mutable_pm_samples(), base);
  uint64_t prev = base;
  for (NvtxMark& m : *c.mutable_nvtx_marks()) {
    uint64_t abs = static_cast<uint64_t>(m.time());
    m.set_time(static_cast<int64_t>(abs - prev));
    prev = abs;
  }
  EncodeCorrelations(c.mutable_kernels());
  EncodeCorrelations(c.mutable_memcpys());
  EncodeCorrelations(c.mutable_memsets());
  EncodeCorrelations(c.mutable_api_calls());
  EncodeCorrelations(c.mutable_syncs());
  EncodeCorrelations(c.mutable_overheads());
  EncodeCorrelations(c.mutable_graph_launches());
  if (format_version_ != kFormatVersion1 && format_version_ != kFormatVersion2) MoveToColumns(&c);

  std::string raw = c.SerializeAsString();
  std::string stored = raw;
  FrameHeader h;
  if (zstd_level_ > 0) {
    stored.resize(ZSTD_compressBound(raw.size()));
    size_t n = ZSTD_compress(stored.data(), stored.size(), raw.data(), raw.size(), zstd_level_);
    stored.resize(ZSTD_isError(n) ? 0 : n);
    h.flags = kFrameFlagZstd;
  }
  h.stored_size = static_cast<uint32_t>(stored.size());
  h.raw_size = static_cast<uint32_t>(raw.size());
  h.payload_crc = Crc32c(stored.data(), stored.size());
  uint8_t hdr[kFrameHeaderSize];
  EncodeFrameHeader(h, hdr);
  bytes_.append(reinterpret_cast<const char*>(hdr), kFrameHeaderSize);
  bytes_ += stored;
}

Status ProtoTraceWriter::WriteFile(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::Error(path + ": cannot create");
  bool ok = std::fwrite(bytes_.data(), 1, bytes_.size(), f) == bytes_.size();
  ok = (std::fclose(f) == 0) && ok;
  return ok ? Status() : Status::Error(path + ": write failed");
}

}  // namespace kp
