// perfetto_exporter.h: writes a merged timeline of one or more kp traces as a native Perfetto
// trace (a run of TracePacket records; docs/timeline.md says what it shows).
//
// Packets are written with the shared wire writer (common/proto_wire.h), one packet at a time,
// straight into an output buffer: no libprotobuf message per event and no state that grows with
// the trace beyond the small per-track and interning tables. Each input file is one process
// with a packet sequence of its own (descriptors, marks, counters, metric ranges, syncs,
// overheads, capture windows), and each of its stream lanes and threads has one for its slices
// (the track and an incremental clock as the sequence's defaults: no track uuid and no 64-bit
// time per event), each with interned event and annotation names. Its ids (sequences, track
// uuids, arrow ids) derive from the host, pid and start time in its header, so separately
// converted files can be concatenated into one trace.
//
// The layout (tracks, lanes, nesting) is TimelineLayout's, shared with the Chrome exporter; the
// arguments of each record kind are record_args.h's tables.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/proto_wire.h"
#include "kptrace.pb.h"
#include "tools/export/exporter.h"
#include "tools/export/output_buffer.h"
#include "tools/export/timeline_layout.h"

namespace kp {

// Fields the Perfetto exporter writes again and again with one value (a sequence id with its
// flags, a track's uuid): encoded once, then copied with one fixed-size store. Append adds a
// varint field; what is appended must fit kCopyBytes (a one-byte tag and a 64-bit value take
// 11 bytes, a sequence id below 2^32 with its flags 8).
struct EncodedField {
  static constexpr size_t kCopyBytes = 16;
  uint8_t size = 0;
  uint8_t bytes[kCopyBytes] = {};
  void Append(uint32_t field, uint64_t v) {
    uint8_t encoded[wire::kMaxScalarFieldBytes];
    wire::WireWriter w(encoded);
    w.UintAlways(field, v);
    if (size + w.size() > kCopyBytes) std::abort();  // a caller's mistake, never the data's
    std::memcpy(bytes + size, encoded, w.size());
    size = static_cast<uint8_t>(size + w.size());
  }
};

class PerfettoExporter final : public Exporter {
 public:
  explicit PerfettoExporter(const ExportOptions& options);
  ~PerfettoExporter() override;
  Status Begin() override;
  void BeginFile(int file_index, TraceReader& reader) override;
  void AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) override;
  Status End() override;

  const TimelineAnomalies& anomalies() const { return layout_.anomalies(); }

 private:
  struct Process;
  struct Sequence;
  Process& ProcessFor(int file_index, TraceReader& reader);
  // The packet sequence of a stream lane's or a thread's track: started (with its defaults,
  // interned annotation names and clock) on first use.
  Sequence& TrackSequence(Process& p, uint64_t track);
  // `id`, or the next trusted_packet_sequence_id after it not yet used in this conversion.
  uint32_t UniqueSequenceId(uint32_t id);
  void FlushIfFull();
  bool FlushBuffer();

  // One emitter per record kind.
  void EmitThreadNames(Process& p, const Chunk& chunk);
  void EmitGpuWork(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitCpuSlices(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitNvtxMarks(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitSyncs(Process& p, const Chunk& chunk);
  void EmitOverheads(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitCaptureWindows(Process& p, const Chunk& chunk);
  void EmitMetricRanges(Process& p, TraceReader& reader, const Chunk& chunk);
  void EmitPmSamples(Process& p, TraceReader& reader, const Chunk& chunk);

  // Tracks, described on first use.
  struct ChildTrack {
    uint64_t uuid, parent;
    std::string_view name;
    bool counter;          // a counter track
    bool order_children;   // children ordered by their sibling_order_rank
    int64_t sibling_rank;  // -1: none
    bool keep_apart;       // never merged with a sibling of the same name
  };
  void DescribeChildTrack(const Process& p, const ChildTrack& t);
  uint64_t ThreadTrack(Process& p, uint32_t tid);
  uint64_t GpuTrack(Process& p, TraceReader& reader, uint32_t device);
  uint64_t StreamTrack(Process& p, TraceReader& reader, uint64_t key, uint32_t lane);
  uint64_t ProcessChildTrack(Process& p, uint64_t kind, const char* name, uint32_t lane);

  // An event packet: BeginEventPacket, then any Intern* (their entries go into the packet's
  // one interned_data), then BeginTrackEvent, the event's fields, EndEventPacket. On a track's
  // own sequence the event's track is the sequence's and its time an increment on its clock.
  void BeginEventPacket(Sequence& s, uint64_t ts);
  uint32_t InternName(Sequence& s, TraceReader& reader, uint32_t string_id, bool internal);
  uint32_t InternText(Sequence& s, const std::string& name);
  uint32_t InternArg(Sequence& s, const std::string& name);
  // The iid of `text` in `table`, interned into the open packet's `field` list when new.
  uint32_t Intern(std::unordered_map<std::string, uint32_t>* table, uint32_t* next_iid,
                  uint32_t field, std::string_view text);
  // An interned debug-annotation string value (InternedData.debug_annotation_string_values).
  uint32_t InternStringValue(Sequence& s, std::string_view text);
  // The interned values of a copy kind's and a memory kind's names (cached per kind).
  uint32_t CopyKindValue(Sequence& s, int kind);
  uint32_t MemoryKindValue(Sequence& s, int kind);
  // Their shared cache: iids[kind] once interned; a kind past `count` is interned each time.
  uint32_t KindValue(Sequence& s, uint32_t* iids, size_t count, int kind, const char* (*name)(int));
  // A kernel shape's KernelShapeArgs as encoded debug annotations, their string values
  // interned: made once per shape, copied into every launch of it.
  std::string_view KernelShapeAnnotations(Sequence& s, TraceReader& reader, uint32_t shape_id,
                                          const KernelShape& shape);
  void BeginTrackEvent(const Sequence& s, uint32_t type, uint64_t track, uint32_t name_iid);
  void EndEventPacket();
  // A slice's end; `track` names the slice's track on the file's own sequence (a track
  // sequence's events take the sequence's).
  void EndSlice(Sequence& s, uint64_t ts, uint64_t track);
  // Writes the ends of a thread track's open slices that end at or before `up_to`.
  void EndOpenSlices(Sequence& s, uint64_t up_to);
  size_t OpenInterned();
  // The track_uuid field of `uuid`, encoded once while consecutive events share the track.
  const EncodedField& TrackField(uint64_t uuid);

  ExportOptions options_;
  FILE* out_ = nullptr;
  bool write_failed_ = false;
  OutputBuffer buf_;  // whole packets only
  std::vector<std::unique_ptr<Process>> processes_;
  std::unordered_map<uint32_t, int> pids_used_;  // pid -> number of files that had it
  TimelineIdAllocator ids_;
  TimelineLayout layout_;
  LaunchCorrelations launches_;  // of the file being converted
  int launches_file_ = -1;
  uint64_t last_snapshot_ns_ = 0;
  std::unordered_set<uint32_t> sequence_ids_;  // every sequence's id, files' and tracks'
  std::vector<LaidOutSlice> gpu_, cpu_, metrics_, sync_, overhead_;
  // The event packet being written.
  size_t packet_ = 0, interned_ = 0, event_ = 0;
  EncodedField track_field_;  // TrackField's last
  uint64_t track_field_uuid_ = 0;
};

}  // namespace kp
