// perfetto_exporter.h: writes a merged timeline of one or more kp traces as a native Perfetto
// trace (a run of TracePacket records; field numbers in docs/outputs.md).
//
// Packets are written by hand with a tiny wire writer, one packet at a time, straight into an
// output buffer: no libprotobuf message per event and no state that grows with the trace beyond
// the small per-track and interning tables. Each input file is one process and one packet
// sequence (trusted_packet_sequence_id = file index + 1) with interned event and annotation
// names.
//
// The timeline layout (which slice goes on which track, and the clamping that keeps slices on a
// track nested or disjoint) is shared with the Chrome JSON exporter and lives here too, as
// TimelineLayout, so both formats show exactly the same slices.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kptrace.pb.h"
#include "tools/export/exporter.h"
#include "tools/export/output_buffer.h"

namespace kp {

// Anomalies seen while laying out slices. Counted, reported at End (stderr), never fatal.
struct TimelineAnomalies {
  uint64_t gpu_overlaps_clamped = 0;     // GPU record overlapping the previous one on its stream
  uint64_t cpu_overlaps_clamped = 0;     // API/NVTX slice partially overlapping its parent
  uint64_t negative_durations = 0;       // end before start: drawn with zero duration
  uint64_t untimed_records_skipped = 0;  // GPU records CUPTI gave no timestamps (start = 0)
  uint64_t metric_overlaps_clamped = 0;
  uint64_t sync_overlaps_clamped = 0;      // synchronization records on the "CUDA sync" track
  uint64_t overhead_overlaps_clamped = 0;  // CUPTI overhead records on their track
  // One line per non-zero counter.
  std::vector<std::string> Describe() const;
};

enum class SliceKind : uint8_t {
  kKernel,
  kMemcpy,
  kMemset,
  kApi,
  kNvtx,
  kMetric,
  kSync,
  kOverhead
};

// One slice after layout: which record (kind + index into the chunk's list) and the times to
// draw. `track` is (device << 32 | stream) for GPU slices, the thread id for CPU slices, 0 for
// metric slices.
struct LaidOutSlice {
  SliceKind kind;
  int index;
  uint64_t track;
  uint64_t start, end;
};

// Keeps the slices of one track properly nested or disjoint. Input must come sorted by
// (start ascending, end descending). A slice that starts before the end of an earlier, already
// closed slice is moved to start at that end; one that ends after its parent is cut at the
// parent's end. Each adjustment is counted by the caller through the return value.
class SliceNester {
 public:
  // Adjusts [*start, *end]; returns true if anything had to change.
  bool Place(uint64_t* start, uint64_t* end);

 private:
  std::vector<uint64_t> open_ends_;
  uint64_t floor_ = 0;
};

// Lays out the records of one chunk. GPU stream tracks keep their nesting state across chunks
// (records of a stream arrive in order); CPU tracks are laid out per chunk, because an NVTX
// range is recorded when it ends, often chunks after the API calls inside it.
class TimelineLayout {
 public:
  // Fills *gpu (kernels, copies, memsets sorted by track then time), *cpu (API calls and NVTX
  // ranges) and *metrics (metric ranges), with adjusted times.
  // GPU records on one stream run one after another: one that starts before the previous one
  // ended is moved to start at that end (counted), so stream tracks hold disjoint slices.
  void LayOut(int file_index, const Chunk& chunk, std::vector<LaidOutSlice>* gpu,
              std::vector<LaidOutSlice>* cpu, std::vector<LaidOutSlice>* metrics);
  // Fills *sync and *overhead: one per-process track each ("CUDA sync", "CUPTI overhead").
  // Synchronization records carry no thread id, and a sync spans the GPU work it waits for, so
  // it can go neither on a CPU thread nor on a stream track (whose slices are disjoint): it gets
  // its own track per process. Slices there are kept nested across chunks (a slice that
  // overlaps an earlier one is clamped and counted), so the track stays well-formed even when
  // two threads synchronize at once.
  void LayOutProcessTracks(int file_index, const Chunk& chunk, std::vector<LaidOutSlice>* sync,
                           std::vector<LaidOutSlice>* overhead);
  TimelineAnomalies& anomalies() { return anomalies_; }
  const TimelineAnomalies& anomalies() const { return anomalies_; }

 private:
  // Per input file, per (device << 32 | stream): where the last slice ended.
  std::vector<std::unordered_map<uint64_t, uint64_t>> gpu_track_ends_;
  // Per input file: the sync and overhead tracks' nesting state.
  std::vector<SliceNester> sync_nesters_, overhead_nesters_;
  TimelineAnomalies anomalies_;
};

// Shared naming of enum values and of the launch calls that start a launch arrow.
const char* CopyKindName(int kind);
const char* MemoryKindName(int kind);
// True for API calls that put work on the GPU (launches, copies, memsets): those start a flow.
bool ApiStartsGpuWork(std::string_view api_name);
// Bytes per ns == GB/s.
inline double BandwidthGBs(uint64_t bytes, uint64_t start, uint64_t end) {
  return end > start ? static_cast<double>(bytes) / static_cast<double>(end - start) : 0.0;
}
// "(x,y,z)"
std::string Dim3(uint32_t x, uint32_t y, uint32_t z);

class PerfettoExporter final : public Exporter {
 public:
  explicit PerfettoExporter(const ExportOptions& options);
  ~PerfettoExporter() override;
  bool Begin(std::string* err) override;
  void BeginFile(int file_index, TraceReader& reader) override;
  void AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) override;
  bool End(std::string* err) override;

  const TimelineAnomalies& anomalies() const { return layout_.anomalies(); }

 private:
  struct Process;
  Process& ProcessFor(int file_index, TraceReader& reader);
  void FlushIfFull();
  bool FlushBuffer();

  ExportOptions options_;
  FILE* out_ = nullptr;
  bool write_failed_ = false;
  OutputBuffer buf_;  // whole packets only
  std::vector<std::unique_ptr<Process>> processes_;
  std::unordered_map<uint32_t, int> pids_used_;  // pid -> number of files that had it
  TimelineLayout layout_;
  std::vector<LaidOutSlice> gpu_, cpu_, metrics_, sync_, overhead_;
};

// Names shared by both timeline formats.
const char* SyncTypeLabel(int type);  // "cudaStreamSynchronize"-style label of a SyncType
std::string OverheadLabel(std::string_view name, uint32_t kind);

}  // namespace kp
