// chrome_exporter.h: writes a merged timeline of one or more kp traces in the Chrome
// trace-event JSON format (chrome://tracing, ui.perfetto.dev), streamed event by event.
//
// Same slices as the Perfetto exporter (TimelineLayout): per process its CPU threads with CUDA
// API calls and NVTX ranges; per (process, device) a GPU "process" whose threads are the streams
// holding kernels, copies and memsets; launch -> GPU flows ("ac2g"); metrics as counters.
// Times are µs relative to the first input's start (docs/outputs.md: a double cannot hold epoch µs
// with ns fractions), written exactly from integer ns with three decimals.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tools/export/exporter.h"
#include "tools/export/output_buffer.h"
#include "tools/export/perfetto_exporter.h"

namespace kp {

// A streaming JSON writer: commas, nesting and string escaping (control characters, quotes,
// backslashes; invalid UTF-8 becomes U+FFFD) are its job, never the caller's.
class JsonWriter {
 public:
  explicit JsonWriter(FILE* out) : out_(out) { buf_.Reserve(1u << 20); }
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view s);
  void UInt(uint64_t v);
  void Int(int64_t v);
  void Double(double v);
  void Bool(bool v);
  // A number of ns written as µs with exactly three decimals ("12.345").
  void MicrosFromNs(int64_t ns);
  // Writes out the buffer if it is large (or always, with force). False after a write error.
  bool Flush(bool force = false);
  // A line break outside any value (the end of the document).
  void Newline() { buf_.Put('\n'); }
  std::string buffer() const { return std::string(buf_.view()); }  // tests

 private:
  void Separator();
  void Digits(uint64_t v);
  FILE* out_;
  OutputBuffer buf_;
  std::vector<char>
      first_;  // per open container: nothing written in it yet (not vector<bool>: hot)
  bool after_key_ = false;
  bool failed_ = false;
};

class ChromeExporter final : public Exporter {
 public:
  explicit ChromeExporter(const ExportOptions& options);
  ~ChromeExporter() override;
  bool Begin(std::string* err) override;
  void BeginFile(int file_index, TraceReader& reader) override;
  void AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) override;
  bool End(std::string* err) override;

  const TimelineAnomalies& anomalies() const { return layout_.anomalies(); }

 private:
  struct Process {
    int32_t pid = 0;
    std::string name;
    Header header;
    bool have_header = false;
    std::string path;
    std::unordered_set<uint32_t> threads_named;
    std::unordered_map<uint32_t, std::string> thread_names;
    std::unordered_set<uint32_t> gpus_named;
    std::unordered_set<uint64_t> streams_named;
    std::unordered_map<uint32_t, std::vector<std::string>> metric_names;
    bool metrics_thread_named = false;
    bool sync_thread_named = false;
    bool overhead_thread_named = false;
  };
  Process& ProcessFor(int file_index, TraceReader& reader);
  int32_t GpuPid(int file_index, uint32_t device) const;
  void Meta(const char* name, int32_t pid, int64_t tid, std::string_view key,
            std::string_view value);
  void SortIndex(int32_t pid, int64_t index);
  int64_t Rel(uint64_t ns) const { return static_cast<int64_t>(ns - base_ns_); }

  ExportOptions options_;
  FILE* out_ = nullptr;
  std::unique_ptr<JsonWriter> json_;
  bool have_base_ = false;
  uint64_t base_ns_ = 0;
  std::vector<std::unique_ptr<Process>> processes_;
  std::unordered_map<uint32_t, int> pids_used_;
  TimelineLayout layout_;
  std::vector<LaidOutSlice> gpu_, cpu_, metrics_, sync_, overhead_;
};

}  // namespace kp
