// proto_trace_writer.h: writes a .kptrace from libprotobuf Chunk messages that hold absolute
// times and correlation ids, applying the ENCODING RULES of proto/kptrace.proto and the framing
// of common/frame.h.
//
// It is the reference writer the tools' tests build fixed traces with: written from the schema,
// independently of the injector's allocation-free TraceEncoder, so a test that round-trips
// through it checks the reader against the format rather than against one implementation.
#pragma once

#include <cstdint>
#include <string>

#include "common/frame.h"
#include "common/status.h"
#include "kptrace.pb.h"

namespace kp {

class ProtoTraceWriter {
 public:
  // zstd_level 0 = payloads stored uncompressed. format_version: the last byte of the file
  // magic, whose encoding rules Add applies ('3' now: kernels and API calls as columns; '2',
  // '1' for the files older kp wrote).
  explicit ProtoTraceWriter(int zstd_level = 0, char format_version = kFileMagic[7]);
  // Delta-codes a copy of `chunk` (absolute start/time/correlation in, deltas out) and appends
  // it as one framed chunk.
  void Add(const Chunk& chunk);
  // magic + framed chunks so far.
  const std::string& bytes() const { return bytes_; }
  Status WriteFile(const std::string& path) const;

 private:
  int zstd_level_;
  char format_version_;
  std::string bytes_;
};

}  // namespace kp
