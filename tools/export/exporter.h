// exporter.h: the interface between `kptrace convert` and its output formats (CSV, Chrome
// trace JSON, Perfetto protobuf).
//
// convert streams each input file through a TraceReader and hands every chunk to one Exporter.
// An exporter keeps only bounded state, so a trace of any size converts in bounded memory.
// Call order: Begin, then per input file (in command-line order) BeginFile followed by that
// file's AddChunk calls, then End. convert reads a file's first chunk before calling
// BeginFile, so reader.header() and reader.devices() are already available there (header() may
// still be null for a damaged file that lacks chunk 0).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "kptrace.pb.h"
#include "tools/reader/trace_reader.h"

namespace kp {

struct ExportOptions {
  std::string output;     // a file or a directory, as the format needs; never empty
  bool progress = false;  // stderr is a tty and the user wants a progress bar
  // Earliest start (trace-clock ns) across ALL input files, found by convert from every file's
  // first chunk before anything is written; 0 = unknown (an exporter then uses the first file's
  // start). Chrome JSON times are relative to it, so no event gets a negative time when a later
  // file started earlier.
  uint64_t time_base_ns = 0;
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  // Opens outputs. An error (naming the path and the problem) aborts the conversion.
  virtual Status Begin() = 0;
  // One call per input file, before its chunks (file_index = position in the command line).
  virtual void BeginFile(int file_index, TraceReader& reader) = 0;
  // `chunk` is decoded (absolute times and correlations); resolve its ids through reader.Str()
  // and reader.Shape(), which refer to this chunk until the next reader.Next().
  virtual void AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) = 0;
  // Flushes and closes outputs. An error if anything could not be written.
  virtual Status End() = 0;
};

std::unique_ptr<Exporter> MakeCsvExporter(const ExportOptions& options);
std::unique_ptr<Exporter> MakeChromeExporter(const ExportOptions& options);    // "export"
std::unique_ptr<Exporter> MakePerfettoExporter(const ExportOptions& options);  // "export"

}  // namespace kp
