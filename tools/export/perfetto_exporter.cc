#include "tools/export/perfetto_exporter.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <string_view>
#include <unordered_set>

#include "common/pm_counters.h"
#include "common/proto_wire.h"
#include "tools/capture/capture_window_text.h"
#include "tools/export/nvtx_payload_text.h"
#include "tools/export/record_args.h"
#include "tools/export/record_naming.h"
#include "tools/export/shape_text_cache.h"

namespace kp {
namespace {

// The buffer is written out between packets once it holds this much: small enough to stay in
// the CPU cache between being built and being copied to the file.
constexpr size_t kFlushBytes = 1u << 20;

// Perfetto's field numbers and enum values (TracePacket and the messages it holds; docs/outputs.md,
// "Perfetto packets").
enum : uint32_t {
  kTracePacket = 1,
  kPktClockSnapshot = 6,
  kPktTimestamp = 8,
  kPktSequenceId = 10,
  kPktTrackEvent = 11,
  kPktInternedData = 12,
  kPktSequenceFlags = 13,
  kPktTrackDescriptor = 60,
  kPktTimestampClockId = 58,
  kPktTracePacketDefaults = 59,
  kTpdTimestampClockId = 58,
  kTpdTrackEventDefaults = 11,
  kTedTrackUuid = 11,
  kSeqIncrementalStateCleared = 1,
  kSeqNeedsIncrementalState = 2,
  kCsClocks = 1,
  kClockId = 1,
  kClockTimestamp = 2,
  kClockIsIncremental = 3,
  kTrackClock = 64,  // a track sequence's own clock (sequence-scoped ids are 64..127)
  kBuiltinClockRealtime = 1,
  kBuiltinClockBoottime = 6,
  kTdUuid = 1,
  kTdName = 2,
  kTdProcess = 3,
  kTdThread = 4,
  kTdParentUuid = 5,
  kTdCounter = 8,
  kTdChildOrdering = 11,
  kTdSiblingOrderRank = 12,
  kTdDescription = 14,
  kTdSiblingMergeBehavior = 15,
  kChildOrderingExplicit = 3,
  kSiblingMergeNone = 2,
  kProcPid = 1,
  kProcCmdline = 2,
  kProcLegacySortIndex = 3,
  kProcName = 6,
  kThrPid = 1,
  kThrTid = 2,
  kThrName = 5,
  kTeDebugAnnotations = 4,
  kTeLegacyEvent = 6,
  kTeType = 9,
  kTeNameIid = 10,
  kTeTrackUuid = 11,
  kTeCounterValueDouble = 44,
  kLeBindId = 8,
  kLeFlowDirection = 13,
  kFlowIn = 1,
  kFlowOut = 2,
  kSliceBegin = 1,
  kSliceEnd = 2,
  kInstant = 3,
  kCounter = 4,
  kDaNameIid = 1,
  kDaBool = 2,
  kDaUint = 3,
  kDaInt = 4,
  kDaDouble = 5,
  kDaString = 6,
  kDaStringValueIid = 17,
  kIdEventNames = 2,
  kIdDebugAnnotationNames = 3,
  kIdDebugAnnotationStringValues = 29,
  kIdIid = 1,
  kIdName = 2,
};

static_assert(kTeDebugAnnotations < 16 && kDaNameIid < 16 && kTeLegacyEvent < 16 &&
                  kLeBindId < 16 && kLeFlowDirection < 16 && kPktTimestamp < 16 && kTeType < 16,
              "the hot fields' tags are one byte");
static_assert(kCounter < 0x80 && kFlowOut < 0x80, "one-byte enum values");

// Kinds of track, mixed into track uuids.
enum TrackKind : uint64_t {
  kProcessTrack = 1,
  kThreadTrack,
  kGpuTrack,
  kStreamTrack,
  kMetricsTrack,
  kCounterTrack,
  kSyncTrack,
  kOverheadTrack,
  kCaptureTrack,
  kPmCounterTrack
};

// Protobuf fields appended to an OutputBuffer through the shared wire writer: each write
// reserves its worst case first, so the writer itself never checks bounds.
class Proto {
 public:
  explicit Proto(OutputBuffer* b) : b_(b) {}
  void UInt(uint32_t field, uint64_t v) {
    auto w = Writer(wire::kMaxScalarFieldBytes);
    w.UintAlways(field, v);
    b_->Advance(w.size());
  }
  void Int(uint32_t field, int64_t v) { UInt(field, static_cast<uint64_t>(v)); }
  void Double(uint32_t field, double v) {
    auto w = Writer(wire::kMaxScalarFieldBytes);
    w.DoubleAlways(field, v);
    b_->Advance(w.size());
  }
  void Bytes(uint32_t field, std::string_view s) {
    auto w = Writer(wire::MaxLengthDelimitedBytes(s.size()));
    w.StringAlways(field, s);
    b_->Advance(w.size());
  }
  // A nested message: Begin returns where its length goes, End patches it in. Two bytes are
  // reserved for the length (nearly every message is below 16 KiB); a longer one is moved up to
  // make room for four.
  size_t Begin(uint32_t field) {
    auto w = Writer(wire::kMaxScalarFieldBytes + wire::kShortLengthBytes);
    w.Tag(field, wire::kLengthDelimited);
    b_->Advance(w.size());
    size_t pos = b_->size();
    b_->Advance(wire::kShortLengthBytes);
    return pos;
  }
  void End(size_t pos) {
    const size_t length = b_->size() - pos - wire::kShortLengthBytes;
    if (length <= wire::kMaxShortLength) [[likely]] {
      wire::PatchShortLength(reinterpret_cast<uint8_t*>(b_->At(pos)), length);
      return;
    }
    constexpr size_t kMore = wire::kPatchedLengthBytes - wire::kShortLengthBytes;
    b_->Reserve(kMore);
    char* body = b_->At(pos + wire::kShortLengthBytes);
    std::memmove(body + kMore, body, length);
    b_->Advance(kMore);
    wire::PatchLength(reinterpret_cast<uint8_t*>(b_->At(pos)), length);
  }
  // One debug annotation {name_iid, one varint value} (several per event: the hottest write).
  [[gnu::always_inline]] void VarintAnnotation(uint32_t iid, uint32_t value_field, uint64_t v) {
    if (iid >= 0x80 || value_field >= 16) {
      return TwoVarintMessage(kTeDebugAnnotations, kDaNameIid, iid, value_field, v);
    }
    // {tag, length, name_iid tag, iid, value tag}: five bytes, then the value.
    uint8_t* q = Reserved(5 + wire::kMaxVarintBytes);
    q[0] = OneByteTag(kTeDebugAnnotations, wire::kLengthDelimited);
    q[2] = OneByteTag(kDaNameIid, wire::kVarint);
    q[3] = static_cast<uint8_t>(iid);
    q[4] = static_cast<uint8_t>(value_field << 3 | wire::kVarint);
    wire::WireWriter value(q + 5);
    value.RawVarint(v);
    q[1] = static_cast<uint8_t>(3 + value.size());
    b_->Advance(5 + value.size());
  }
  // A legacy (v1) flow step {bind_id, flow_direction} in a track event.
  [[gnu::always_inline]] void FlowStep(uint64_t bind_id, uint32_t direction) {
    uint8_t* q = Reserved(3 + wire::kMaxVarintBytes + 2);
    q[0] = OneByteTag(kTeLegacyEvent, wire::kLengthDelimited);
    q[2] = OneByteTag(kLeBindId, wire::kVarint);
    wire::WireWriter body(q + 3);
    body.RawVarintFullRoom(bind_id);  // reserved: kMaxVarintBytes, then the 2-byte tail
    uint8_t* tail = q + 3 + body.size();
    tail[0] = OneByteTag(kLeFlowDirection, wire::kVarint);
    tail[1] = static_cast<uint8_t>(direction);  // kFlowIn or kFlowOut
    q[1] = static_cast<uint8_t>(1 + body.size() + 2);
    b_->Advance(3 + body.size() + 2);
  }
  // An event packet's head in one write: the packet's tag and a two-byte length to patch
  // (returned: where it goes), its sequence field (`seq`) and its timestamp; `boottime`: the
  // timestamp is on BOOTTIME, not on the sequence's default clock.
  size_t PacketHead(const EncodedField& seq, uint64_t ts, bool boottime) {
    static_assert(kTracePacket < 16 && kPktTimestamp < 16, "one-byte tags");
    uint8_t* q = Reserved(1 + wire::kShortLengthBytes + EncodedField::kCopyBytes + 1 +
                          wire::kMaxVarintBytes + kClockOverrideBytes);
    q[0] = OneByteTag(kTracePacket, wire::kLengthDelimited);
    const size_t length_at = b_->size() + 1;
    std::memcpy(q + 1 + wire::kShortLengthBytes, seq.bytes, EncodedField::kCopyBytes);
    uint8_t* t = q + 1 + wire::kShortLengthBytes + seq.size;
    t[0] = OneByteTag(kPktTimestamp, wire::kVarint);
    wire::WireWriter value(t + 1);
    value.RawVarint(ts);
    uint8_t* end = t + 1 + value.size();
    if (boottime) end = ClockOverride(end);
    b_->Advance(static_cast<size_t>(end - q));
    return length_at;
  }
  // The timestamp_clock_id field naming BOOTTIME, at q; returns its end.
  static constexpr size_t kClockOverrideBytes = 3;
  static uint8_t* ClockOverride(uint8_t* q) {
    static_assert((kPktTimestampClockId << 3) < (1u << 14) && kBuiltinClockBoottime < 0x80,
                  "a two-byte tag and a one-byte value");
    q[0] = static_cast<uint8_t>((kPktTimestampClockId << 3 | wire::kVarint) | 0x80);
    q[1] = static_cast<uint8_t>((kPktTimestampClockId << 3 | wire::kVarint) >> 7);
    q[2] = kBuiltinClockBoottime;
    return q + kClockOverrideBytes;
  }
  // A track event's head in one write: its tag and a two-byte length to patch (returned: where
  // it goes), its type, its track's field and, when not 0, its name_iid.
  size_t TrackEventHead(uint32_t type, const EncodedField& track, uint32_t name_iid) {
    static_assert(kPktTrackEvent < 16 && kTeType < 16 && kTeNameIid < 16, "one-byte tags");
    uint8_t* q = Reserved(1 + wire::kShortLengthBytes + 2 + EncodedField::kCopyBytes + 1 +
                          wire::kMaxVarintBytes);
    q[0] = OneByteTag(kPktTrackEvent, wire::kLengthDelimited);
    const size_t length_at = b_->size() + 1;
    uint8_t* h = q + 1 + wire::kShortLengthBytes;
    h[0] = OneByteTag(kTeType, wire::kVarint);
    h[1] = static_cast<uint8_t>(type);  // kSliceBegin .. kCounter
    std::memcpy(h + 2, track.bytes, EncodedField::kCopyBytes);
    uint8_t* n = h + 2 + track.size;
    if (name_iid != 0) {
      n[0] = OneByteTag(kTeNameIid, wire::kVarint);
      wire::WireWriter value(n + 1);
      value.RawVarint(name_iid);
      n += 1 + value.size();
    }
    b_->Advance(static_cast<size_t>(n - q));
    return length_at;
  }
  static constexpr uint8_t OneByteTag(uint32_t field, wire::WireType type) {
    return static_cast<uint8_t>(field << 3 | type);
  }
  // The end of a slice: a whole packet {sequence id (and flags), timestamp (and, with
  // `boottime`, its clock), track_event {type, track}}. Its lengths are one byte each: the
  // packet's body is at most 8 + 11 + 3 + 2 + 2 + 11 = 37 bytes (a 32-bit sequence id's field
  // and the flags', the timestamp's, the clock's, the event's tag and length, its type, its
  // track's field; a track sequence's event has no track field).
  void SliceEndPacket(const EncodedField& seq, uint64_t ts, bool boottime,
                      const EncodedField& track) {
    static_assert(kTracePacket < 16 && kPktTrackEvent < 16 && kTeType < 16, "one-byte tags");
    uint8_t* base = Reserved(4 * EncodedField::kCopyBytes);
    base[0] = kTracePacket << 3 | wire::kLengthDelimited;
    std::memcpy(base + 2, seq.bytes, EncodedField::kCopyBytes);
    wire::WireWriter pk(base + 2 + seq.size);
    pk.UintAlways(kPktTimestamp, ts);
    uint8_t* event = pk.data() + pk.size();
    if (boottime) event = ClockOverride(event);
    event[0] = kPktTrackEvent << 3 | wire::kLengthDelimited;
    event[2] = kTeType << 3 | wire::kVarint;
    event[3] = kSliceEnd;
    std::memcpy(event + 4, track.bytes, EncodedField::kCopyBytes);
    event[1] = static_cast<uint8_t>(2 + track.size);
    const size_t end = static_cast<size_t>(event + 4 + track.size - base);
    base[1] = static_cast<uint8_t>(end - 2);
    b_->Advance(end);
  }

 private:
  // A nested message of two varint fields, with one bounds check. Its body is at most 2 x 15
  // bytes, so its length is one byte.
  [[gnu::always_inline]] void TwoVarintMessage(uint32_t field, uint32_t f1, uint64_t v1,
                                               uint32_t f2, uint64_t v2) {
    uint8_t* base = Reserved(3 * wire::kMaxScalarFieldBytes);
    wire::WireWriter head(base);
    head.Tag(field, wire::kLengthDelimited);
    uint8_t* length = base + head.size();
    wire::WireWriter body(length + 1);
    body.UintAlways(f1, v1);
    body.UintAlways(f2, v2);
    *length = static_cast<uint8_t>(body.size());
    b_->Advance(head.size() + 1 + body.size());
  }
  wire::WireWriter Writer(size_t max_bytes) { return wire::WireWriter(Reserved(max_bytes)); }
  uint8_t* Reserved(size_t max_bytes) {
    b_->Reserve(max_bytes);
    return reinterpret_cast<uint8_t*>(b_->Tail());
  }
  OutputBuffer* b_;
};

// Writes record_args.h's arguments as debug annotations (names interned by ArgId). A string or
// dim3 argument whose entry in `value_iids` is set is written as that interned value (a kernel's
// mangled name, grid, block and cluster; copy and memory kinds): they repeat on every record.
struct AnnotationSink {
  Proto& w;
  const uint32_t* value_iids = nullptr;  // kArgCount entries, 0 = written inline
  uint32_t ValueIid(uint32_t id) const { return value_iids != nullptr ? value_iids[id] : 0; }
  void UInt(uint32_t iid, uint64_t v) { w.VarintAnnotation(iid, kDaUint, v); }
  void Int(uint32_t iid, int64_t v) { w.VarintAnnotation(iid, kDaInt, static_cast<uint64_t>(v)); }
  void Double(uint32_t iid, double v) {
    size_t d = w.Begin(kTeDebugAnnotations);
    w.UInt(kDaNameIid, iid);
    w.Double(kDaDouble, v);
    w.End(d);
  }
  void Bool(uint32_t iid, bool v) { w.VarintAnnotation(iid, kDaBool, v ? 1 : 0); }
  void Str(uint32_t iid, std::string_view v) {
    if (uint32_t value = ValueIid(iid)) return w.VarintAnnotation(iid, kDaStringValueIid, value);
    size_t d = w.Begin(kTeDebugAnnotations);
    w.UInt(kDaNameIid, iid);
    w.Bytes(kDaString, v);
    w.End(d);
  }
  // Once per kernel shape (KernelShapeAnnotations), so a string per call is fine.
  void Dim3(uint32_t iid, uint32_t x, uint32_t y, uint32_t z) { Str(iid, kp::Dim3(x, y, z)); }
  void Payload(uint32_t iid, const NvtxPayload& p) {
    if (p.value_case() != NvtxPayload::VALUE_NOT_SET) Str(iid, NvtxPayloadText(p));
  }
};

void InternedEntry(Proto& w, uint32_t field, uint32_t iid, std::string_view name) {
  size_t e = w.Begin(field);
  w.UInt(kIdIid, iid);
  w.Bytes(kIdName, name);
  w.End(e);
}

// A track sequence's events' track field: none (the sequence's default track).
const EncodedField kSequenceTrack{};

// Writes the packet header fields shared by every packet of a sequence.
size_t BeginPacket(Proto& w, uint32_t seq, uint32_t flags) {
  size_t pk = w.Begin(kTracePacket);
  w.UInt(kPktSequenceId, seq);
  if (flags != 0) w.UInt(kPktSequenceFlags, flags);
  return pk;
}

// A sequence's first packet's interned data: the fixed annotation names (ArgId's iids).
void InternArgNames(Proto& w) {
  size_t id = w.Begin(kPktInternedData);
  for (uint32_t i = 1; i < kArgCount; ++i) {
    InternedEntry(w, kIdDebugAnnotationNames, i, kArgNames[i]);
  }
  w.End(id);
}

}  // namespace

// A packet sequence and what it has interned. Each file has its own (process, thread and
// track descriptors, marks, counters, metric ranges, syncs, overheads; absolute times), and
// each stream lane and thread track has one for its slices: their packets take the track from
// the sequence's trace_packet_defaults and their times as increments on its clock (kTrackClock),
// so an event carries neither a track uuid nor a 64-bit time.
struct PerfettoExporter::Sequence {
  EncodedField sequence;        // trusted_packet_sequence_id
  EncodedField event_sequence;  // the same, then sequence_flags: needs incremental state
  bool on_track_clock = false;  // a track's sequence: times on its incremental clock
  uint64_t clock = 0;           // that clock's time: the last increment's end
  // A thread track's slices begun and not yet ended in the file, their ends in descending
  // order (the next due last): an end is written once a later slice begins at or after it (or
  // at the end), so that the track's times mostly go forward and stay increments, and on a tie
  // an end comes before a begin, as when each end followed its begin.
  std::vector<uint64_t> open_ends;

  // The time field of a packet at `*ts` on this sequence: on a track's clock, the increment
  // since the clock's time, which moves to *ts; a time before the clock's (a slice that came
  // after one later in time) is left whole and true returned: it goes on BOOTTIME and leaves
  // the clock as it is.
  bool TakeTime(uint64_t* ts) {
    if (!on_track_clock) return false;
    if (*ts < clock) return true;
    const uint64_t increment = *ts - clock;
    clock = *ts;
    *ts = increment;
    return false;
  }
  // Keeps `end` among open_ends in descending order (a slice from a later chunk may end after
  // the slices still open).
  void AddOpenEnd(uint64_t end) {
    open_ends.insert(
        std::upper_bound(open_ends.begin(), open_ends.end(), end, std::greater<uint64_t>()), end);
  }
  // Event names interned by reader string id (ids are stable for a file): a direct-mapped
  // cache of kNameSlots slots (32 KiB a table, whatever the ids; a slot taken by another id
  // falls back to other_names, by text).
  struct NameSlot {
    uint32_t sid = 0;
    uint32_t iid = 0;  // 0: empty (iids start at 1)
  };
  static constexpr size_t kNameSlots = 4096;
  std::vector<NameSlot> name_slots, internal_name_slots;  // sized on first use
  std::unordered_map<std::string, uint32_t> other_names;  // fixed labels, unknown ids
  uint32_t next_name_iid = 1;
  std::unordered_map<std::string, uint32_t> arg_iids;  // metric-name annotations
  uint32_t next_arg_iid = kArgCount;
  // Interned debug-annotation string values: text -> iid.
  std::unordered_map<std::string, uint32_t> string_value_iids;
  uint32_t next_string_value_iid = 1;
  // Per kernel shape: its arguments (KernelShapeArgs) encoded as debug annotations, their
  // string values interned.
  ShapeTextCache shape_args;
  // Event-name iids of the fixed names (0 = not interned yet), interned values by kind.
  uint32_t memcpy_iid[11] = {};
  uint32_t memset_iid = 0;
  uint32_t copy_kind_value[11] = {};   // CopyKindName's interned value by kind (0 = not yet)
  uint32_t memory_kind_value[8] = {};  // MemoryKindName's likewise
  uint32_t sync_iid[5] = {};
};

struct PerfettoExporter::Process {
  int file_index = 0;
  TimelineIds ids;
  Sequence own;  // the file's own sequence
  int32_t pid = 0;
  uint64_t uuid = 0;
  std::string name;
  std::vector<int8_t> api_flow;  // by string id: 0 unknown, 1 starts a flow, 2 does not
  std::unordered_map<uint32_t, std::string> thread_names;
  std::unordered_map<uint32_t, std::string> threads_described;
  std::unordered_set<uint32_t> gpus_described;
  std::unordered_set<uint64_t> tracks_described;  // stream, lane and process-child tracks
  std::unordered_map<uint32_t, std::vector<std::string>> metric_names;  // config id -> names
  std::unordered_map<std::string, uint64_t> counter_tracks;
  std::unordered_map<uint32_t, std::vector<std::string>> pm_counter_names;  // config id -> names
  std::unordered_map<std::string, uint64_t> pm_tracks;  // "device/label" -> counter track uuid
  // The stream lanes' and threads' own sequences in the order they began, and by track uuid.
  std::vector<std::unique_ptr<Sequence>> track_sequences;
  std::unordered_map<uint64_t, Sequence*> track_sequence_of;
  // Hot-path caches: the last track and track sequence looked up (consecutive slices mostly
  // share one).
  uint64_t last_stream_key = ~0ull, last_stream_uuid = 0;
  uint32_t last_stream_lane = 0;
  uint32_t last_tid = 0;
  uint64_t last_thread_uuid = 0;
  bool have_last_tid = false;
  uint64_t last_sequence_track = 0;
  Sequence* last_sequence = nullptr;
  // The reader's count of reused sequence numbers when the caches by string and shape id were
  // last valid: a file that holds a second trace may give its ids other strings.
  uint64_t sequence_reused = 0;
};

PerfettoExporter::PerfettoExporter(const ExportOptions& options) : options_(options) {}

PerfettoExporter::~PerfettoExporter() {
  if (out_ != nullptr) std::fclose(out_);
}

Status PerfettoExporter::Begin() {
  out_ = std::fopen(options_.output.c_str(), "wb");
  if (out_ == nullptr) {
    return Status::Error("cannot write '" + options_.output + "': " + std::strerror(errno));
  }
  buf_.Reserve(8u << 20);
  return Status();
}

bool PerfettoExporter::FlushBuffer() {
  if (!write_failed_) {
    if (!buf_.WriteTo(out_)) write_failed_ = true;
  }
  buf_.clear();
  return !write_failed_;
}

void PerfettoExporter::FlushIfFull() {
  if (buf_.size() >= kFlushBytes) FlushBuffer();
}

PerfettoExporter::Process& PerfettoExporter::ProcessFor(int file_index, TraceReader& reader) {
  if (file_index >= 0 && static_cast<size_t>(file_index) < processes_.size() &&
      processes_[file_index] != nullptr) {
    return *processes_[file_index];
  }
  if (static_cast<size_t>(file_index) >= processes_.size()) processes_.resize(file_index + 1);
  auto p = std::make_unique<Process>();
  p->file_index = file_index;
  const Header* header = reader.header();
  p->ids = ids_.ForFile(header, file_index);
  // Unique also against the track sequences of the files before (TimelineIdAllocator keeps
  // the files' ids apart from each other).
  p->ids.sequence = UniqueSequenceId(p->ids.sequence);
  p->own.sequence.Append(kPktSequenceId, p->ids.sequence);
  p->own.event_sequence = p->own.sequence;
  p->own.event_sequence.Append(kPktSequenceFlags, kSeqNeedsIncrementalState);
  uint32_t pid = header != nullptr ? header->pid() : 0;
  if (pid == 0) pid = 100000 + static_cast<uint32_t>(file_index);
  // Two files with one pid (two hosts, or pid reuse): keep them apart with a synthetic pid
  // above the Linux pid range (2^22).
  int seen = pids_used_[pid]++;
  p->pid =
      static_cast<int32_t>(seen == 0 ? pid : pid + (static_cast<uint32_t>(file_index + 1) << 22));
  p->uuid = p->ids.TrackUuid(kProcessTrack, 0);
  p->name = ProcessGroupName(header, pid);

  // First packet of the sequence: clears incremental state, interns the annotation names, and
  // describes the process track.
  Proto w(&buf_);
  size_t pk = BeginPacket(w, p->ids.sequence, kSeqIncrementalStateCleared);
  InternArgNames(w);
  size_t td = w.Begin(kPktTrackDescriptor);
  w.UInt(kTdUuid, p->uuid);
  size_t pd = w.Begin(kTdProcess);
  w.Int(kProcPid, p->pid);
  if (header != nullptr) {
    for (const std::string& arg : header->command_line()) w.Bytes(kProcCmdline, arg);
  }
  w.Int(kProcLegacySortIndex, ProcessSortIndex(header, file_index));
  w.Bytes(kProcName, p->name);
  w.End(pd);
  w.Bytes(kTdDescription, CommandLabel(header) + " (file " + reader.path() + ")");
  w.End(td);
  w.End(pk);
  // The trace clock (CUPTI's, CLOCK_REALTIME by default) against the wall clock at the start, so
  // a viewer can show wall-clock time. Perfetto wants one clock's snapshots in increasing
  // order: a file that started before one already converted adds none.
  if (header != nullptr && header->start_time_trace_ns() != 0 &&
      header->start_time_unix_ns() != 0 && header->start_time_trace_ns() > last_snapshot_ns_) {
    last_snapshot_ns_ = header->start_time_trace_ns();
    size_t cpk = BeginPacket(w, p->ids.sequence, 0);
    size_t cs = w.Begin(kPktClockSnapshot);
    size_t c = w.Begin(kCsClocks);
    w.UInt(kClockId, kBuiltinClockBoottime);
    w.UInt(kClockTimestamp, header->start_time_trace_ns());
    w.End(c);
    c = w.Begin(kCsClocks);
    w.UInt(kClockId, kBuiltinClockRealtime);
    w.UInt(kClockTimestamp, header->start_time_unix_ns());
    w.End(c);
    w.End(cs);
    w.End(cpk);
  }
  processes_[file_index] = std::move(p);
  return *processes_[file_index];
}

void PerfettoExporter::BeginFile(int file_index, TraceReader& reader) {
  ProcessFor(file_index, reader);
}

// ---------------------------------------------------------------------------------------------
// Event packets and interning

[[gnu::always_inline]] inline void PerfettoExporter::BeginEventPacket(Sequence& s, uint64_t ts) {
  const bool boottime = s.TakeTime(&ts);
  packet_ = Proto(&buf_).PacketHead(s.event_sequence, ts, boottime);
  interned_ = 0;
}

[[gnu::always_inline]] inline const EncodedField& PerfettoExporter::TrackField(uint64_t uuid) {
  if (track_field_.size == 0 || uuid != track_field_uuid_) {
    track_field_ = EncodedField();
    track_field_.Append(kTeTrackUuid, uuid);
    track_field_uuid_ = uuid;
  }
  return track_field_;
}

size_t PerfettoExporter::OpenInterned() {
  if (interned_ == 0) interned_ = Proto(&buf_).Begin(kPktInternedData);
  return interned_;
}

uint32_t PerfettoExporter::InternName(Sequence& s, TraceReader& reader, uint32_t sid,
                                      bool internal) {
  std::vector<Sequence::NameSlot>& slots = internal ? s.internal_name_slots : s.name_slots;
  if (slots.empty()) slots.resize(Sequence::kNameSlots);
  Sequence::NameSlot& slot = slots[sid % Sequence::kNameSlots];
  if (slot.iid != 0 && slot.sid == sid) return slot.iid;
  std::string name = std::string(internal ? "[kp profiler] " : "") + std::string(reader.Str(sid));
  const uint32_t iid = InternText(s, name);
  // An id the chunk lacks ("<unknown string N>") is not kept for it: a later chunk may have it.
  // (A kept name stays right for later chunks, lacking it or not: ids are stable in a file.)
  if (reader.HasStr(sid)) slot = {sid, iid};
  return iid;
}

uint32_t PerfettoExporter::Intern(std::unordered_map<std::string, uint32_t>* table,
                                  uint32_t* next_iid, uint32_t field, std::string_view text) {
  auto [it, added] = table->emplace(std::string(text), *next_iid);
  if (added) {
    ++*next_iid;
    OpenInterned();
    Proto w(&buf_);
    InternedEntry(w, field, it->second, text);
  }
  return it->second;
}

uint32_t PerfettoExporter::InternText(Sequence& s, const std::string& name) {
  return Intern(&s.other_names, &s.next_name_iid, kIdEventNames, name);
}

uint32_t PerfettoExporter::InternStringValue(Sequence& s, std::string_view text) {
  return Intern(&s.string_value_iids, &s.next_string_value_iid, kIdDebugAnnotationStringValues,
                text);
}

uint32_t PerfettoExporter::KindValue(Sequence& s, uint32_t* iids, size_t count, int kind,
                                     const char* (*name)(int)) {
  if (kind < 0 || static_cast<size_t>(kind) >= count) return InternStringValue(s, name(kind));
  uint32_t& iid = iids[kind];
  if (iid == 0) iid = InternStringValue(s, name(kind));
  return iid;
}

uint32_t PerfettoExporter::CopyKindValue(Sequence& s, int kind) {
  return KindValue(s, s.copy_kind_value, std::size(s.copy_kind_value), kind, CopyKindName);
}

uint32_t PerfettoExporter::MemoryKindValue(Sequence& s, int kind) {
  return KindValue(s, s.memory_kind_value, std::size(s.memory_kind_value), kind, MemoryKindName);
}

uint32_t PerfettoExporter::InternArg(Sequence& s, const std::string& name) {
  return Intern(&s.arg_iids, &s.next_arg_iid, kIdDebugAnnotationNames, name);
}

std::string_view PerfettoExporter::KernelShapeAnnotations(Sequence& s, TraceReader& reader,
                                                          uint32_t shape_id,
                                                          const KernelShape& shape) {
  return s.shape_args.Get(shape_id, [&] {
    // The string values first (their interned entries go into the open packet), then the
    // annotations, encoded apart and kept.
    uint32_t values[kArgCount] = {};
    values[kArgGrid] = InternStringValue(s, Dim3(shape.grid_x(), shape.grid_y(), shape.grid_z()));
    values[kArgBlock] =
        InternStringValue(s, Dim3(shape.block_x(), shape.block_y(), shape.block_z()));
    values[kArgCluster] =
        InternStringValue(s, Dim3(shape.cluster_x(), shape.cluster_y(), shape.cluster_z()));
    const std::string_view mangled = reader.Str(shape.name());
    values[kArgMangledName] = InternStringValue(s, mangled);
    OutputBuffer encoded;
    Proto w(&encoded);
    AnnotationSink sink{w, values};
    KernelShapeArgs(shape, mangled, sink);
    return std::string(encoded.view());
  });
}

[[gnu::always_inline]] inline void PerfettoExporter::BeginTrackEvent(const Sequence& s,
                                                                     uint32_t type, uint64_t track,
                                                                     uint32_t name_iid) {
  Proto w(&buf_);
  if (interned_ != 0) w.End(interned_);  // the packet's one interned_data ends here
  interned_ = 0;
  event_ = w.TrackEventHead(type, s.on_track_clock ? kSequenceTrack : TrackField(track), name_iid);
}

[[gnu::always_inline]] inline void PerfettoExporter::EndEventPacket() {
  Proto w(&buf_);
  w.End(event_);
  w.End(packet_);
}

[[gnu::always_inline]] inline void PerfettoExporter::EndSlice(Sequence& s, uint64_t ts,
                                                              uint64_t track) {
  if (!s.on_track_clock) {
    // Refers to nothing interned: no sequence flags.
    Proto(&buf_).SliceEndPacket(s.sequence, ts, false, TrackField(track));
    return;
  }
  // Its track and clock are the sequence's incremental state: flag 2, as on every event there.
  const bool boottime = s.TakeTime(&ts);
  Proto(&buf_).SliceEndPacket(s.event_sequence, ts, boottime, kSequenceTrack);
}

void PerfettoExporter::EndOpenSlices(Sequence& s, uint64_t up_to) {
  for (; !s.open_ends.empty() && s.open_ends.back() <= up_to; s.open_ends.pop_back()) {
    EndSlice(s, s.open_ends.back(), /*track=*/0);  // a track sequence's events name no track
  }
}

PerfettoExporter::Sequence& PerfettoExporter::TrackSequence(Process& p, uint64_t track) {
  if (p.last_sequence != nullptr && p.last_sequence_track == track) return *p.last_sequence;
  Sequence*& slot = p.track_sequence_of[track];
  if (slot == nullptr) {
    p.track_sequences.push_back(std::make_unique<Sequence>());
    slot = p.track_sequences.back().get();
    Sequence& s = *slot;
    // Track uuids are already mixed: their high bits make the id.
    const uint32_t id = UniqueSequenceId(static_cast<uint32_t>((track >> 32) % 0x7ffffffeu) + 1);
    s.sequence.Append(kPktSequenceId, id);
    s.event_sequence = s.sequence;
    s.event_sequence.Append(kPktSequenceFlags, kSeqNeedsIncrementalState);
    s.on_track_clock = true;
    // The clock starts at 0, BOOTTIME's 0, on every track sequence: the same snapshot each time,
    // so that it is never out of order, not even where two separately converted files that
    // are concatenated share a sequence id. (The first increment is a whole time.)
    s.clock = 0;
    // First packet: clears the incremental state, sets the defaults (the track, the clock),
    // interns the annotation names and relates the clock to BOOTTIME.
    Proto w(&buf_);
    size_t pk = BeginPacket(w, id, kSeqIncrementalStateCleared);
    size_t d = w.Begin(kPktTracePacketDefaults);
    w.UInt(kTpdTimestampClockId, kTrackClock);
    size_t ted = w.Begin(kTpdTrackEventDefaults);
    w.UInt(kTedTrackUuid, track);
    w.End(ted);
    w.End(d);
    InternArgNames(w);
    size_t cs = w.Begin(kPktClockSnapshot);
    size_t c = w.Begin(kCsClocks);
    w.UInt(kClockId, kTrackClock);
    w.UInt(kClockTimestamp, s.clock);
    w.UInt(kClockIsIncremental, 1);
    w.End(c);
    c = w.Begin(kCsClocks);
    w.UInt(kClockId, kBuiltinClockBoottime);
    w.UInt(kClockTimestamp, s.clock);
    w.End(c);
    w.End(cs);
    w.End(pk);
  }
  p.last_sequence_track = track;
  p.last_sequence = slot;
  return *slot;
}

uint32_t PerfettoExporter::UniqueSequenceId(uint32_t id) {
  while (!sequence_ids_.insert(id).second) id = id % 0x7ffffffeu + 1;
  return id;
}

// ---------------------------------------------------------------------------------------------
// Tracks

uint64_t PerfettoExporter::ThreadTrack(Process& p, uint32_t tid) {
  if (p.have_last_tid && p.last_tid == tid) return p.last_thread_uuid;
  uint64_t uuid = p.ids.TrackUuid(kThreadTrack, tid);
  p.have_last_tid = true;
  p.last_tid = tid;
  p.last_thread_uuid = uuid;
  if (p.threads_described.count(tid) == 0) {
    auto it = p.thread_names.find(tid);
    std::string name = ThreadLabel(tid, it != p.thread_names.end() ? it->second : "");
    Proto w(&buf_);
    size_t pk = BeginPacket(w, p.ids.sequence, 0);
    size_t td = w.Begin(kPktTrackDescriptor);
    w.UInt(kTdUuid, uuid);
    size_t th = w.Begin(kTdThread);
    w.Int(kThrPid, p.pid);
    w.Int(kThrTid, static_cast<int32_t>(tid));
    w.Bytes(kThrName, name);
    w.End(th);
    w.End(td);
    w.End(pk);
    p.threads_described[tid] = name;
  }
  return uuid;
}

void PerfettoExporter::DescribeChildTrack(const Process& p, const ChildTrack& t) {
  Proto w(&buf_);
  size_t pk = BeginPacket(w, p.ids.sequence, 0);
  size_t td = w.Begin(kPktTrackDescriptor);
  w.UInt(kTdUuid, t.uuid);
  w.UInt(kTdParentUuid, t.parent);
  w.Bytes(kTdName, t.name);
  if (t.counter) w.End(w.Begin(kTdCounter));
  if (t.order_children) w.UInt(kTdChildOrdering, kChildOrderingExplicit);
  if (t.sibling_rank >= 0) w.Int(kTdSiblingOrderRank, t.sibling_rank);
  if (t.keep_apart) w.UInt(kTdSiblingMergeBehavior, kSiblingMergeNone);
  w.End(td);
  w.End(pk);
}

uint64_t PerfettoExporter::GpuTrack(Process& p, TraceReader& reader, uint32_t device) {
  const uint64_t root = p.ids.TrackUuid(kGpuTrack, device);
  if (p.gpus_described.insert(device).second) {
    std::string dev_name = "GPU";
    for (const Device& d : reader.devices()) {
      if (d.id() == device) dev_name = d.name();
    }
    const std::string name = "GPU " + std::to_string(device) + ": " + dev_name;
    DescribeChildTrack(p, {root, p.uuid, name, false, true, -1, true});
  }
  return root;
}

uint64_t PerfettoExporter::StreamTrack(Process& p, TraceReader& reader, uint64_t key,
                                       uint32_t lane) {
  if (key == p.last_stream_key && lane == p.last_stream_lane) return p.last_stream_uuid;
  const uint32_t device = static_cast<uint32_t>(key >> 32);
  const uint32_t stream = static_cast<uint32_t>(key);
  uint64_t root = GpuTrack(p, reader, device);
  uint64_t stream_uuid = p.ids.TrackUuid(kStreamTrack, key);
  uint64_t uuid = lane == 0 ? stream_uuid : p.ids.TrackUuid(kStreamTrack, key, lane);
  const std::string stream_name = "stream " + std::to_string(stream);
  if (p.tracks_described.insert(stream_uuid).second) {
    DescribeChildTrack(p, {stream_uuid, root, stream_name, false, true, stream, true});
  }
  if (lane != 0 && p.tracks_described.insert(uuid).second) {
    DescribeChildTrack(p,
                       {uuid, stream_uuid, LaneName(stream_name, lane), false, false, lane, true});
  }
  p.last_stream_key = key;
  p.last_stream_lane = lane;
  p.last_stream_uuid = uuid;
  return uuid;
}

uint64_t PerfettoExporter::ProcessChildTrack(Process& p, uint64_t kind, const char* name,
                                             uint32_t lane) {
  uint64_t track = p.ids.TrackUuid(kind, 0);
  uint64_t uuid = lane == 0 ? track : p.ids.TrackUuid(kind, 0, lane);
  if (p.tracks_described.insert(track).second) {
    DescribeChildTrack(p, {track, p.uuid, name, false, true, -1, false});
  }
  if (lane != 0 && p.tracks_described.insert(uuid).second) {
    DescribeChildTrack(p, {uuid, track, LaneName(name, lane), false, false, lane, false});
  }
  return uuid;
}

// ---------------------------------------------------------------------------------------------
// Emitters, one per record kind

void PerfettoExporter::AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) {
  Process& p = ProcessFor(file_index, reader);
  if (reader.stats().chunks_sequence_reused != p.sequence_reused) {
    p.sequence_reused = reader.stats().chunks_sequence_reused;
    p.api_flow.clear();
    auto forget = [](Sequence& s) {  // interned texts stay: their iids still name them
      s.name_slots.clear();
      s.internal_name_slots.clear();
      s.shape_args.Clear();
    };
    forget(p.own);
    for (const std::unique_ptr<Sequence>& q : p.track_sequences) forget(*q);
  }
  if (launches_file_ != file_index) {
    launches_.Clear();
    launches_file_ = file_index;
  }
  for (const ThreadInfo& t : chunk.threads()) p.thread_names[t.thread_id()] = t.name();
  for (const MetricConfig& c : chunk.metric_configs()) {
    p.metric_names[c.id()].assign(c.metric_names().begin(), c.metric_names().end());
  }
  EmitThreadNames(p, chunk);
  layout_.LayOut(file_index, chunk, &gpu_, &cpu_, &metrics_);
  // Launch calls first: a GPU record gets an arrow only when its launch call is known.
  EmitCpuSlices(p, reader, chunk);
  EmitGpuWork(p, reader, chunk);
  EmitNvtxMarks(p, reader, chunk);
  layout_.LayOutProcessTracks(file_index, chunk, &sync_, &overhead_);
  EmitSyncs(p, chunk);
  EmitOverheads(p, reader, chunk);
  EmitCaptureWindows(p, chunk);
  EmitMetricRanges(p, reader, chunk);
  EmitPmSamples(p, reader, chunk);
  FlushIfFull();
}

void PerfettoExporter::EmitThreadNames(Process& p, const Chunk& chunk) {
  // Thread names may arrive after the thread's first event: describe the track again.
  if (chunk.threads_size() == 0) return;
  Proto w(&buf_);
  for (auto& [tid, described] : p.threads_described) {
    auto it = p.thread_names.find(tid);
    if (it == p.thread_names.end()) continue;
    std::string name = ThreadLabel(tid, it->second);
    if (name == described) continue;
    described = name;
    size_t pk = BeginPacket(w, p.ids.sequence, 0);
    size_t td = w.Begin(kPktTrackDescriptor);
    w.UInt(kTdUuid, p.ids.TrackUuid(kThreadTrack, tid));
    size_t th = w.Begin(kTdThread);
    w.Int(kThrPid, p.pid);
    w.Int(kThrTid, static_cast<int32_t>(tid));
    w.Bytes(kThrName, described);
    w.End(th);
    w.End(td);
    w.End(pk);
  }
}

void PerfettoExporter::EmitGpuWork(Process& p, TraceReader& reader, const Chunk& chunk) {
  Proto w(&buf_);
  const RecordPrefetcher prefetch(chunk);
  for (size_t i = 0; i < gpu_.size(); ++i) {
    prefetch.Ahead(gpu_, i);
    const LaidOutSlice& s = gpu_[i];
    AnnotationSink args{w};
    // A copy's or memset's interned argument values, zeroed only for them: kernels, most of the
    // slices, have none, and need no clearing of the whole array.
    uint32_t values[kArgCount];
    uint64_t track = StreamTrack(p, reader, s.track, s.lane);
    Sequence& q = TrackSequence(p, track);
    BeginEventPacket(q, s.start);
    uint32_t iid = 0;
    uint64_t correlation = 0;
    const KernelShape* shape = nullptr;
    std::string_view shape_bytes;  // a kernel's shape annotations, encoded once per shape
    if (s.kind == SliceKind::kKernel) {
      const Kernel& k = chunk.kernels(s.index);
      shape = reader.Shape(k.shape());
      bool internal = (k.flags() & RECORD_FLAG_PROFILER_INTERNAL) != 0;
      iid = shape != nullptr
                ? InternName(q, reader,
                             shape->demangled() != 0 ? shape->demangled() : shape->name(), internal)
                : InternText(q, "<unknown kernel>");
      if (shape != nullptr) shape_bytes = KernelShapeAnnotations(q, reader, k.shape(), *shape);
      correlation = k.correlation();
    } else if (s.kind == SliceKind::kMemcpy) {
      const Memcpy& m = chunk.memcpys(s.index);
      const int kind = m.copy_kind() >= 0 && m.copy_kind() <= 10 ? m.copy_kind() : 0;
      if (q.memcpy_iid[kind] == 0) {
        q.memcpy_iid[kind] = InternText(q, std::string("Memcpy ") + CopyKindName(kind));
      }
      iid = q.memcpy_iid[kind];
      std::fill(std::begin(values), std::end(values), 0u);
      values[kArgKind] = CopyKindValue(q, m.copy_kind());
      values[kArgSrcKind] = MemoryKindValue(q, m.src_kind());
      values[kArgDstKind] = MemoryKindValue(q, m.dst_kind());
      args.value_iids = values;
      correlation = m.correlation();
    } else {
      if (q.memset_iid == 0) q.memset_iid = InternText(q, "Memset");
      iid = q.memset_iid;
      std::fill(std::begin(values), std::end(values), 0u);
      values[kArgMemoryKind] = MemoryKindValue(q, chunk.memsets(s.index).memory_kind());
      args.value_iids = values;
      correlation = chunk.memsets(s.index).correlation();
    }
    BeginTrackEvent(q, kSliceBegin, track, iid);
    if (launches_.Contains(correlation)) {
      // A legacy (v1) flow step into this slice: unlike terminating_flow_ids, it leaves the
      // flow open, so every GPU record of one launch (the nodes of a CUDA graph) gets an arrow
      // from the launch call.
      w.FlowStep(p.ids.FlowId(correlation), kFlowIn);
    }
    if (s.kind == SliceKind::kKernel) {
      buf_.Append(shape_bytes);
      KernelLaunchArgs(chunk.kernels(s.index), args);
    } else if (s.kind == SliceKind::kMemcpy) {
      MemcpyArgs(chunk.memcpys(s.index), args);
    } else {
      MemsetArgs(chunk.memsets(s.index), args);
    }
    EndEventPacket();
    EndSlice(q, s.end, track);
    FlushIfFull();
  }
}

void PerfettoExporter::EmitCpuSlices(Process& p, TraceReader& reader, const Chunk& chunk) {
  Proto w(&buf_);
  AnnotationSink args{w};
  const RecordPrefetcher prefetch(chunk);
  for (size_t i = 0; i < cpu_.size(); ++i) {
    prefetch.Ahead(cpu_, i);
    const LaidOutSlice& s = cpu_[i];
    uint64_t track = ThreadTrack(p, static_cast<uint32_t>(s.track));
    Sequence& q = TrackSequence(p, track);
    EndOpenSlices(q, s.start);  // an end first on a tie
    BeginEventPacket(q, s.start);
    if (s.kind == SliceKind::kApi) {
      const ApiCall& a = chunk.api_calls(s.index);
      uint32_t iid = InternName(q, reader, a.name(), false);
      if (a.name() >= p.api_flow.size() && a.name() < (1u << 24)) {
        p.api_flow.resize(a.name() + 1, 0);
      }
      bool flow = false;
      if (a.name() < p.api_flow.size()) {
        if (p.api_flow[a.name()] == 0) {
          p.api_flow[a.name()] = ApiStartsGpuWork(reader.Str(a.name())) ? 1 : 2;
        }
        flow = p.api_flow[a.name()] == 1;
      }
      BeginTrackEvent(q, kSliceBegin, track, iid);
      if (flow && a.correlation() != 0) {
        launches_.Add(a.correlation());
        w.FlowStep(p.ids.FlowId(a.correlation()), kFlowOut);
      }
      ApiArgs(a, args);
    } else {
      const NvtxRange& r = chunk.nvtx_ranges(s.index);
      uint32_t iid =
          (r.flags() & RECORD_FLAG_OPEN) != 0
              ? InternText(q, std::string(reader.Str(r.name())) + std::string(kOpenRangeSuffix))
              : InternName(q, reader, r.name(), false);
      BeginTrackEvent(q, kSliceBegin, track, iid);
      NvtxRangeArgs(r, reader.Str(r.domain()), args);
    }
    EndEventPacket();
    q.AddOpenEnd(s.end);
    FlushIfFull();
  }
}

void PerfettoExporter::EmitNvtxMarks(Process& p, TraceReader& reader, const Chunk& chunk) {
  Proto w(&buf_);
  AnnotationSink args{w};
  for (const NvtxMark& m : chunk.nvtx_marks()) {
    uint64_t track = ThreadTrack(p, m.thread_id());
    BeginEventPacket(p.own, static_cast<uint64_t>(m.time()));
    uint32_t iid = InternName(p.own, reader, m.name(), false);
    BeginTrackEvent(p.own, kInstant, track, iid);
    NvtxMarkArgs(m, reader.Str(m.domain()), args);
    EndEventPacket();
  }
}

void PerfettoExporter::EmitSyncs(Process& p, const Chunk& chunk) {
  Proto w(&buf_);
  AnnotationSink args{w};
  for (const LaidOutSlice& s : sync_) {
    uint64_t track = ProcessChildTrack(p, kSyncTrack, "CUDA sync", s.lane);
    const Synchronization& y = chunk.syncs(s.index);
    const int type = y.type() >= 0 && y.type() <= 4 ? y.type() : 0;
    BeginEventPacket(p.own, s.start);
    if (p.own.sync_iid[type] == 0) p.own.sync_iid[type] = InternText(p.own, SyncTypeLabel(type));
    BeginTrackEvent(p.own, kSliceBegin, track, p.own.sync_iid[type]);
    SyncArgs(y, args);
    EndEventPacket();
    EndSlice(p.own, s.end, track);
  }
}

// Capture windows: one slice per window on the process's "kp capture windows" track.
void PerfettoExporter::EmitCaptureWindows(Process& p, const Chunk& chunk) {
  for (const CaptureWindow& c : chunk.capture_windows()) {
    if (c.end_ns() < c.start_ns()) continue;
    uint64_t track = ProcessChildTrack(p, kCaptureTrack, "kp capture windows", 0);
    BeginEventPacket(p.own, c.start_ns());
    // The name says it all (DescribeCaptureWindow without the times the slice shows).
    std::string name = std::string("capture #") + std::to_string(c.index()) + " (" +
                       CaptureTriggerText(c.trigger());
    if (!c.range().empty()) name += " '" + c.range() + "'";
    if (c.trigger() == CAPTURE_WINDOW_TRIGGER_SCHEDULE) {
      name += " steps " + std::to_string(c.first_step()) + ".." + std::to_string(c.last_step());
    }
    name += ")";
    BeginTrackEvent(p.own, kSliceBegin, track, InternText(p.own, name));
    EndEventPacket();
    EndSlice(p.own, c.end_ns(), track);
  }
}

void PerfettoExporter::EmitOverheads(Process& p, TraceReader& reader, const Chunk& chunk) {
  Proto w(&buf_);
  AnnotationSink args{w};
  for (const LaidOutSlice& s : overhead_) {
    uint64_t track = ProcessChildTrack(p, kOverheadTrack, "CUPTI overhead", s.lane);
    const Overhead& o = chunk.overheads(s.index);
    BeginEventPacket(p.own, s.start);
    uint32_t iid = InternText(p.own, OverheadLabel(reader.Str(o.name()), o.kind()));
    BeginTrackEvent(p.own, kSliceBegin, track, iid);
    OverheadArgs(o, args);
    EndEventPacket();
    EndSlice(p.own, s.end, track);
  }
}

// Metric ranges: a slice per measured range on the process's "metrics" track, carrying the
// values, and one counter track per metric name holding the value at the range start.
void PerfettoExporter::EmitMetricRanges(Process& p, TraceReader& reader, const Chunk& chunk) {
  if (metrics_.empty()) return;
  Proto w(&buf_);
  AnnotationSink args{w};
  const uint64_t metrics_uuid = ProcessChildTrack(p, kMetricsTrack, "metrics", 0);
  for (const LaidOutSlice& s : metrics_) {
    const MetricRange& m = chunk.metric_ranges(s.index);
    const std::vector<std::string>* names = nullptr;
    auto cfg = p.metric_names.find(m.config());
    if (cfg != p.metric_names.end()) names = &cfg->second;
    auto metric_name = [&](int i) {
      return names != nullptr && i < static_cast<int>(names->size())
                 ? (*names)[i]
                 : "metric " + std::to_string(i);
    };
    // Counter descriptors first (they must precede the events on them).
    for (int i = 0; i < m.values_size(); ++i) {
      std::string name = metric_name(i);
      if (p.counter_tracks.count(name) == 0) {
        uint64_t uuid = p.ids.TrackUuid(kCounterTrack, std::hash<std::string>()(name));
        p.counter_tracks[name] = uuid;
        DescribeChildTrack(p, {uuid, p.uuid, name, true, false, -1, false});
      }
    }
    BeginEventPacket(p.own, s.start);
    uint32_t iid = InternName(p.own, reader, m.name(), false);
    std::vector<uint32_t> arg_iid(m.values_size());
    for (int i = 0; i < m.values_size(); ++i) arg_iid[i] = InternArg(p.own, metric_name(i));
    BeginTrackEvent(p.own, kSliceBegin, metrics_uuid, iid);
    MetricRangeArgs(m, reader.Str(m.domain()), args);
    for (int i = 0; i < m.values_size(); ++i) args.Double(arg_iid[i], m.values(i));
    EndEventPacket();
    EndSlice(p.own, s.end, metrics_uuid);
    for (int i = 0; i < m.values_size(); ++i) {
      if (m.values(i) != m.values(i)) continue;  // NaN: not collected
      BeginEventPacket(p.own, s.start);
      BeginTrackEvent(p.own, kCounter, p.counter_tracks[metric_name(i)], 0);
      w.Double(kTeCounterValueDouble, m.values(i));
      EndEventPacket();
    }
  }
}

// PM samples: one counter track per sampled counter under its GPU's track, a value at each
// sample's start (byte counters as rates, common/pm_counters.h).
void PerfettoExporter::EmitPmSamples(Process& p, TraceReader& reader, const Chunk& chunk) {
  for (const PmSampleConfig& c : chunk.pm_sample_configs()) {
    p.pm_counter_names[c.id()].assign(c.counter_names().begin(), c.counter_names().end());
  }
  if (chunk.pm_samples_size() == 0) return;
  Proto w(&buf_);
  static const std::vector<std::string> kNone;
  std::vector<uint64_t> tracks;
  uint32_t tracks_config = 0, tracks_device = ~0u;
  for (const PmSample& s : chunk.pm_samples()) {
    auto cfg = p.pm_counter_names.find(s.config());
    const std::vector<std::string>& names = cfg == p.pm_counter_names.end() ? kNone : cfg->second;
    if (s.config() != tracks_config || s.device() != tracks_device) {
      // Counter descriptors first (they must precede the events on them).
      tracks_config = s.config();
      tracks_device = s.device();
      tracks.clear();
      const uint64_t gpu = GpuTrack(p, reader, s.device());
      for (const std::string& n : names) {
        const std::string label = PmCounterLabel(n);
        const std::string key = std::to_string(s.device()) + "/" + label;
        auto it = p.pm_tracks.find(key);
        if (it == p.pm_tracks.end()) {
          const uint64_t uuid = p.ids.TrackUuid(kPmCounterTrack, std::hash<std::string>()(key));
          it = p.pm_tracks.emplace(key, uuid).first;
          DescribeChildTrack(p, {uuid, gpu, label, true, false, -1, false});
        }
        tracks.push_back(it->second);
      }
    }
    const uint64_t duration = s.duration() > 0 ? static_cast<uint64_t>(s.duration()) : 0;
    for (int i = 0; i < s.values_size() && i < static_cast<int>(tracks.size()); ++i) {
      if (std::isnan(s.values(i))) continue;
      BeginEventPacket(p.own, static_cast<uint64_t>(s.start()));
      BeginTrackEvent(p.own, kCounter, tracks[i], 0);
      w.Double(kTeCounterValueDouble, PmCounterShownValue(names[i], s.values(i), duration));
      EndEventPacket();
    }
    FlushIfFull();
  }
}

Status PerfettoExporter::End() {
  // The slices still open on the thread tracks end now, innermost first.
  for (const std::unique_ptr<Process>& p : processes_) {
    if (p == nullptr) continue;
    for (const std::unique_ptr<Sequence>& q : p->track_sequences) EndOpenSlices(*q, UINT64_MAX);
  }
  bool ok = FlushBuffer();
  if (out_ != nullptr) {
    if (std::fclose(out_) != 0) ok = false;
    out_ = nullptr;
  }
  for (const std::string& line : layout_.anomalies().Describe()) {
    std::fprintf(stderr, "kptrace convert: perfetto: %s\n", line.c_str());
  }
  if (!ok) return Status::Error("error writing '" + options_.output + "': " + std::strerror(errno));
  return Status();
}

std::unique_ptr<Exporter> MakePerfettoExporter(const ExportOptions& options) {
  return std::make_unique<PerfettoExporter>(options);
}

}  // namespace kp
