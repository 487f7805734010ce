// chrome_exporter.h: writes a merged timeline of one or more kp traces in the Chrome
// trace-event JSON format (chrome://tracing, ui.perfetto.dev), streamed event by event.
//
// Same slices as the Perfetto exporter (TimelineLayout) and the same arguments (record_args.h):
// one process group per input process, named and ordered by rank, holding its CPU threads (CUDA
// API calls, NVTX ranges), one thread per GPU stream and lane (kernels, copies, memsets), and the
// "CUDA sync", "CUPTI overhead" and "metrics" threads; launch -> GPU arrows (flow events v2:
// a "bind_id" on the two slices); metrics as counters. Times are µs relative to the earliest
// input's start (a double cannot hold epoch µs with ns fractions), written exactly from integer ns
// with three decimals.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tools/export/exporter.h"
#include "tools/export/json_writer.h"
#include "tools/export/shape_text_cache.h"
#include "tools/export/timeline_layout.h"

namespace kp {

class ChromeExporter final : public Exporter {
 public:
  explicit ChromeExporter(const ExportOptions& options);
  ~ChromeExporter() override;
  Status Begin() override;
  void BeginFile(int file_index, TraceReader& reader) override;
  void AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) override;
  Status End() override;

  const TimelineAnomalies& anomalies() const { return layout_.anomalies(); }

 private:
  struct Process {
    int32_t pid = 0;
    std::string name;
    TimelineIds ids;
    Header header;
    bool have_header = false;
    std::string path;
    std::unordered_set<uint32_t> threads_named;
    std::unordered_map<uint32_t, std::string> thread_names;
    // GPU stream lanes as threads of the process: (device, stream, lane) -> tid.
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, int64_t> gpu_tids;
    std::tuple<uint32_t, uint32_t, uint32_t> last_gpu_key{~0u, ~0u, ~0u};
    int64_t last_gpu_tid = 0;
    std::unordered_set<int64_t> process_tracks_named;  // sync, overhead, metrics and lanes
    std::unordered_map<uint32_t, std::vector<std::string>> metric_names;
    // Hot-path caches by reader string id (ids are stable within a file): whether the name
    // needs JSON escaping (0 unknown, 1 plain, 2 escape) and whether an API call starts GPU
    // work (0 unknown, 1 yes, 2 no); the last CPU thread named.
    std::vector<int8_t> name_plain, api_flow;
    // A kernel shape's arguments (KernelShapeArgs) as JSON members, copied into every launch.
    ShapeTextCache shape_members;
    // An event's first members, "ph":"X","cat":"<category>","name":"<name>", made once: per
    // kernel shape, per API name (runtime, driver) and per NVTX range name (by string id, below
    // kMaxCachedHeadId). Used only for a name that needs no escaping and that the chunk has
    // (TraceReader::HasStr), so a name a damaged chunk lacks is still written and counted as
    // unknown.
    ShapeTextCache kernel_heads, runtime_heads, driver_heads, nvtx_heads;
    // The reader's count of reused sequence numbers when the caches above were last valid: a
    // file that holds a second trace (a reused sequence number with other content) may give
    // its ids other strings, so every cache by string or shape id starts again.
    uint64_t sequence_reused = 0;
    uint32_t last_named_tid = 0;
    bool have_named_tid = false;
    std::unordered_map<uint32_t, std::vector<std::string>> pm_counter_names;
  };
  Process& ProcessFor(int file_index, TraceReader& reader);
  void Meta(const char* name, int32_t pid, int64_t tid, std::string_view key,
            std::string_view value);
  void SortIndex(const char* name, int32_t pid, int64_t tid, int64_t index);
  int64_t Rel(uint64_t ns) const;
  // `"pid":P,"tid":T` (members written together on every event), kept for the last pair: a
  // track's events follow each other.
  std::string_view PidTid(int32_t pid, int64_t tid);
  // A kernel's "stream","device","context" members (KernelPlacementArgs), kept for the last
  // triple: a track's kernels follow each other.
  std::string_view PlacementMembers(uint32_t stream, uint32_t device, uint32_t context);

  // One emitter per record kind.
  void EmitGpuWork(int file_index, Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitCpuSlices(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitNvtxMarks(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitSyncs(Process& p, const Chunk& chunk);
  void EmitOverheads(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitCaptureWindows(Process& p, const Chunk& chunk);
  void EmitMetricRanges(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitPmSamples(Process& p, const Chunk& chunk);

  void NameThread(Process& p, uint32_t tid);
  int64_t GpuThread(Process& p, TraceReader& reader, uint64_t key, uint32_t lane);
  int64_t ProcessTrackThread(Process& p, int64_t tid, const char* name, uint32_t lane);
  // The start of an "X" event; the caller writes "args" and closes the object.
  // `members` is the event's fixed start, "ph":"X","cat":"<category>" (kCat* in the .cc);
  // `plain`: the name needs no escaping (JsonWriter::IsPlain).
  void BeginComplete(std::string_view members, std::string_view name, int32_t pid, int64_t tid,
                     uint64_t start, uint64_t end, bool plain = false);
  // The same from a head made by Head: the members, then the name's string.
  void BeginCompleteWithHead(std::string_view head, int32_t pid, int64_t tid, uint64_t start,
                             uint64_t end);
  // The head of an event named by reader string `sid` (BeginComplete's first members), from
  // `heads` by `key` (made the first time); empty where it is not cached (see Process), and the
  // caller then calls BeginComplete.
  std::string_view CachedHead(Process& p, TraceReader& reader, ShapeTextCache& heads, uint32_t key,
                              std::string_view members, uint32_t sid);
  // CachedHead's first time for `key`: makes the head of a plain name (else empty).
  std::string_view MakeHead(Process& p, TraceReader& reader, ShapeTextCache& heads, uint32_t key,
                            std::string_view members, uint32_t sid);
  // Ids past this take BeginComplete every time: a trace whose names are all distinct (an NVTX
  // range name per call) would otherwise keep a head per event.
  static constexpr uint32_t kMaxCachedHeadId = 1u << 16;
  // Whether reader string `sid` (the current file's) needs no JSON escaping; cached.
  bool NamePlain(Process& p, TraceReader& reader, uint32_t sid);
  // The JSON members of a kernel shape's arguments, cached per shape id.
  std::string_view ShapeMembers(Process& p, TraceReader& reader, uint32_t shape_id,
                                const KernelShape& shape);
  // Writes "bind_id" and "flow_out" (on a launch call: `out`) or "flow_in" (on a GPU record)
  // into the open "X" event.
  void BindFlow(bool out, uint64_t id);

  ExportOptions options_;
  FILE* out_ = nullptr;
  std::unique_ptr<JsonWriter> json_;
  bool have_base_ = false;
  uint64_t base_ns_ = 0;
  int32_t pid_tid_pid_ = 0;  // PidTid's last pair and its text ("" = none yet)
  int64_t pid_tid_tid_ = 0;
  std::string pid_tid_text_;
  std::string placement_text_;  // PlacementMembers' last triple and its text
  uint32_t placement_stream_ = 0, placement_device_ = 0, placement_context_ = 0;
  std::vector<std::unique_ptr<Process>> processes_;
  std::unordered_map<uint32_t, int> pids_used_;
  TimelineIdAllocator ids_;
  TimelineLayout layout_;
  LaunchCorrelations launches_;  // of the file being converted
  int launches_file_ = -1;
  std::vector<LaidOutSlice> gpu_, cpu_, metrics_, sync_, overhead_;
};

}  // namespace kp
