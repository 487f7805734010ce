// trace_reader.h: streams a .kptrace file chunk by chunk, undoing the encoding rules of
// proto/kptrace.proto, and counts (never crashes on) damage.
//
// After Next(), every `start`/`time` field in the chunk holds an absolute trace-clock ns value,
// every `correlation` field an absolute id, and Str()/Shape() resolve the chunk's ids. Memory is
// one chunk at a time, within the decode budget of chunk_budget.h, plus small bounded tables,
// whatever the file holds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kptrace.pb.h"

namespace kp {

// Damage and anomalies seen while reading. Each one is counted and can be named.
struct ReaderStats {
  uint64_t file_bytes = 0;
  uint64_t chunks_ok = 0;
  uint64_t chunks_bad_crc = 0;          // payload CRC mismatch: chunk skipped
  uint64_t chunks_bad_header = 0;       // bad magic/header CRC where a chunk should start
  uint64_t chunks_undecodable = 0;      // zstd or protobuf parse failed
  uint64_t truncated_tail_bytes = 0;    // bytes of a torn final chunk, ignored
  uint64_t skipped_bytes = 0;           // bytes skipped while resynchronising
  uint64_t sequence_gaps = 0;           // chunks missing by sequence number (at the end)
  uint64_t chunks_over_budget = 0;      // over the decode budget (chunk_budget.h): skipped
  uint64_t chunks_duplicate = 0;        // same sequence number and CRC as one read: skipped
  uint64_t chunks_reordered = 0;        // arrived after a later chunk (read, nothing lost)
  uint64_t chunks_sequence_reused = 0;  // a passed sequence number with other content (read)
  uint64_t strings_repaired = 0;        // strings with invalid UTF-8 ('?' replaces bad bytes)
  uint64_t unknown_string_ids = 0;      // record referred to a string id its chunk lacks
  uint64_t unknown_shape_ids = 0;
  uint64_t negative_durations = 0;  // end before start
  uint64_t records = 0;             // records of all kinds delivered
  bool bad_file_magic = false;
  bool saw_footer = false;
  // One line per non-zero anomaly, e.g. "2 chunks skipped: payload CRC mismatch".
  std::vector<std::string> Describe() const;
};

class TraceReader {
 public:
  // An error naming the path and the problem if the file cannot be opened, is not a kp trace,
  // or is a kp trace of a format version this reader does not read.
  static StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path);
  ~TraceReader();

  // Reads the next good chunk. Returns false at the end of the file.
  bool Next(Chunk* chunk);

  // Resolve ids of the chunk last returned by Next(). Unknown ids are counted and come back as
  // "<unknown string N>" / nullptr.
  std::string_view Str(uint32_t id);
  // Whether the last chunk read has string `id` (0, the empty string, always): Str(id) is then
  // its text and counts nothing.
  bool HasStr(uint32_t id) const;
  const KernelShape* Shape(uint32_t id);

  const std::string& path() const { return path_; }
  const Header* header() const { return have_header_ ? &header_ : nullptr; }
  // Latest cumulative Stats seen, and the footer if the trace ended cleanly.
  const Stats& trace_stats() const { return trace_stats_; }
  const Footer* footer() const { return stats_.saw_footer ? &footer_ : nullptr; }
  // Devices and contexts seen so far (deduplicated by id).
  const std::vector<Device>& devices() const { return devices_; }
  const ReaderStats& stats() const { return stats_; }
  // Bytes consumed so far (for progress bars).
  uint64_t position() const { return pos_; }

 private:
  TraceReader() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  Header header_;
  bool have_header_ = false;
  Stats trace_stats_;
  uint64_t stats_sequence_ = 0;
  bool have_trace_stats_ = false;
  Footer footer_;
  std::vector<Device> devices_;
  ReaderStats stats_;
  uint64_t pos_ = 0;
};

}  // namespace kp
