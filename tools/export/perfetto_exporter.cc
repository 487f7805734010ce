#include "tools/export/perfetto_exporter.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "tools/export/nvtx_payload_text.h"

namespace kp {

// ---------------------------------------------------------------------------------------------
// Timeline layout (shared with the Chrome exporter)

std::vector<std::string> TimelineAnomalies::Describe() const {
  std::vector<std::string> out;
  auto add = [&out](uint64_t n, const char* what) {
    if (n != 0) out.push_back(std::to_string(n) + " " + what);
  };
  add(gpu_overlaps_clamped, "GPU records overlapped the previous record on their stream: clamped");
  add(cpu_overlaps_clamped, "API/NVTX slices overlapped their parent slice: clamped");
  add(negative_durations, "records ended before they started: drawn with zero duration");
  add(untimed_records_skipped, "GPU records without timestamps: skipped");
  add(metric_overlaps_clamped, "metric ranges overlapped another metric range: clamped");
  add(sync_overlaps_clamped, "synchronization records overlapped another one: clamped");
  add(overhead_overlaps_clamped, "CUPTI overhead records overlapped another one: clamped");
  return out;
}

bool SliceNester::Place(uint64_t* start, uint64_t* end) {
  bool changed = false;
  while (!open_ends_.empty() && open_ends_.back() <= *start) {
    floor_ = std::max(floor_, open_ends_.back());
    open_ends_.pop_back();
  }
  if (*start < floor_) {
    *start = floor_;
    if (*end < *start) *end = *start;
    changed = true;
  }
  if (!open_ends_.empty() && *end > open_ends_.back()) {
    *end = open_ends_.back();
    changed = true;
  }
  open_ends_.push_back(*end);
  return changed;
}

namespace {

// A function object (not a function pointer) so std::sort inlines the comparison.
struct SliceOrder {
  bool operator()(const LaidOutSlice& a, const LaidOutSlice& b) const {
    if (a.track != b.track) return a.track < b.track;
    if (a.start != b.start) return a.start < b.start;
    return a.end > b.end;
  }
};

void SortSlices(std::vector<LaidOutSlice>* slices) {
  std::sort(slices->begin(), slices->end(), SliceOrder());
}

template <typename R>
void CollectTimed(const R& records, SliceKind kind, bool gpu,
                  uint64_t (*track)(const typename R::value_type&), std::vector<LaidOutSlice>* out,
                  TimelineAnomalies* anomalies) {
  int i = 0;
  for (const auto& r : records) {
    uint64_t start = static_cast<uint64_t>(r.start());
    int64_t duration = r.duration();
    if (gpu && start == 0) {
      ++anomalies->untimed_records_skipped;
      ++i;
      continue;
    }
    if (duration < 0) {
      ++anomalies->negative_durations;
      duration = 0;
    }
    out->push_back({kind, i, track(r), start, start + static_cast<uint64_t>(duration)});
    ++i;
  }
}

uint64_t GpuTrack(uint32_t device, uint32_t stream) {
  return (static_cast<uint64_t>(device) << 32) | stream;
}

}  // namespace

void TimelineLayout::LayOut(int file_index, const Chunk& chunk, std::vector<LaidOutSlice>* gpu,
                            std::vector<LaidOutSlice>* cpu, std::vector<LaidOutSlice>* metrics) {
  gpu->clear();
  cpu->clear();
  metrics->clear();
  CollectTimed(
      chunk.kernels(), SliceKind::kKernel, true,
      +[](const Kernel& k) { return GpuTrack(k.device(), k.stream()); }, gpu, &anomalies_);
  CollectTimed(
      chunk.memcpys(), SliceKind::kMemcpy, true,
      +[](const Memcpy& m) { return GpuTrack(m.device(), m.stream()); }, gpu, &anomalies_);
  CollectTimed(
      chunk.memsets(), SliceKind::kMemset, true,
      +[](const Memset& m) { return GpuTrack(m.device(), m.stream()); }, gpu, &anomalies_);
  SortSlices(gpu);
  if (static_cast<size_t>(file_index) >= gpu_track_ends_.size()) {
    gpu_track_ends_.resize(file_index + 1);
  }
  auto& ends = gpu_track_ends_[file_index];
  for (LaidOutSlice& s : *gpu) {
    uint64_t& last_end = ends[s.track];
    if (s.start < last_end) {
      ++anomalies_.gpu_overlaps_clamped;
      s.start = last_end;
      if (s.end < s.start) s.end = s.start;
    }
    last_end = s.end;
  }

  CollectTimed(
      chunk.api_calls(), SliceKind::kApi, false,
      +[](const ApiCall& a) { return static_cast<uint64_t>(a.thread_id()); }, cpu, &anomalies_);
  CollectTimed(
      chunk.nvtx_ranges(), SliceKind::kNvtx, false,
      +[](const NvtxRange& r) { return static_cast<uint64_t>(r.thread_id()); }, cpu, &anomalies_);
  SortSlices(cpu);
  {
    SliceNester nester;
    uint64_t track = ~0ull;
    for (LaidOutSlice& s : *cpu) {
      if (s.track != track) {
        nester = SliceNester();
        track = s.track;
      }
      if (nester.Place(&s.start, &s.end)) ++anomalies_.cpu_overlaps_clamped;
    }
  }

  CollectTimed(
      chunk.metric_ranges(), SliceKind::kMetric, false,
      +[](const MetricRange&) { return uint64_t{0}; }, metrics, &anomalies_);
  SortSlices(metrics);
  {
    SliceNester nester;
    for (LaidOutSlice& s : *metrics) {
      if (nester.Place(&s.start, &s.end)) ++anomalies_.metric_overlaps_clamped;
    }
  }
}

void TimelineLayout::LayOutProcessTracks(int file_index, const Chunk& chunk,
                                         std::vector<LaidOutSlice>* sync,
                                         std::vector<LaidOutSlice>* overhead) {
  sync->clear();
  overhead->clear();
  if (static_cast<size_t>(file_index) >= sync_nesters_.size()) {
    sync_nesters_.resize(file_index + 1);
    overhead_nesters_.resize(file_index + 1);
  }
  CollectTimed(
      chunk.syncs(), SliceKind::kSync, false, +[](const Synchronization&) { return uint64_t{0}; },
      sync, &anomalies_);
  SortSlices(sync);
  for (LaidOutSlice& s : *sync) {
    if (sync_nesters_[file_index].Place(&s.start, &s.end)) ++anomalies_.sync_overlaps_clamped;
  }
  CollectTimed(
      chunk.overheads(), SliceKind::kOverhead, false, +[](const Overhead&) { return uint64_t{0}; },
      overhead, &anomalies_);
  SortSlices(overhead);
  for (LaidOutSlice& s : *overhead) {
    if (overhead_nesters_[file_index].Place(&s.start, &s.end)) {
      ++anomalies_.overhead_overlaps_clamped;
    }
  }
}

const char* SyncTypeLabel(int type) {
  static const char* const kNames[] = {"Synchronize (unknown kind)", "cudaEventSynchronize",
                                       "cudaStreamWaitEvent", "cudaStreamSynchronize",
                                       "cudaDeviceSynchronize"};
  return type >= 0 && type <= 4 ? kNames[type] : kNames[0];
}

std::string OverheadLabel(std::string_view name, uint32_t kind) {
  if (!name.empty()) return "CUPTI overhead: " + std::string(name);
  return "CUPTI overhead (kind " + std::to_string(kind) + ")";
}

const char* CopyKindName(int kind) {
  static const char* const kNames[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                       "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return kind >= 0 && kind <= 10 ? kNames[kind] : "unknown";
}

const char* MemoryKindName(int kind) {
  static const char* const kNames[] = {"unknown", "pageable", "pinned",        "device",
                                       "array",   "managed",  "device static", "managed static"};
  return kind >= 0 && kind <= 7 ? kNames[kind] : "unknown";
}

bool ApiStartsGpuWork(std::string_view name) {
  return name.find("Launch") != std::string_view::npos ||
         name.find("Memcpy") != std::string_view::npos ||
         name.find("Memset") != std::string_view::npos;
}

std::string Dim3(uint32_t x, uint32_t y, uint32_t z) {
  // Hot (three per kernel): plain digit writing, no snprintf.
  char buf[40];
  char* p = buf;
  *p++ = '(';
  const uint32_t v[3] = {x, y, z};
  for (int i = 0; i < 3; ++i) {
    char tmp[10];
    int n = 0;
    uint32_t a = v[i];
    do {
      tmp[n++] = static_cast<char>('0' + a % 10);
      a /= 10;
    } while (a != 0);
    while (n > 0) *p++ = tmp[--n];
    *p++ = i < 2 ? ',' : ')';
  }
  return std::string(buf, p - buf);
}

// ---------------------------------------------------------------------------------------------
// Perfetto wire writing

namespace {

// Appends protobuf wire data to the output buffer. Nested messages get a 4-byte (redundant)
// varint length patched in afterwards, so a packet is written in one pass (protozero does the
// same).
class Wire {
 public:
  explicit Wire(OutputBuffer* b) : b_(b) {}
  // Inlined into every field write: most values fit in one byte.
  __attribute__((always_inline)) void Varint(uint64_t v) {
    b_->Reserve(10);
    if (v < 0x80) {
      *b_->Tail() = static_cast<char>(v);
      b_->Advance(1);
      return;
    }
    char* p = b_->Tail();
    char* start = p;
    while (v >= 0x80) {
      *p++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    b_->Advance(static_cast<size_t>(p - start));
  }
  void Tag(uint32_t field, uint32_t wire_type) { Varint((uint64_t{field} << 3) | wire_type); }
  void UInt(uint32_t field, uint64_t v) {
    Tag(field, 0);
    Varint(v);
  }
  void Int(uint32_t field, int64_t v) { UInt(field, static_cast<uint64_t>(v)); }
  void Fixed64(uint32_t field, uint64_t v) {
    Tag(field, 1);
    char tmp[8];
    for (int i = 0; i < 8; ++i) tmp[i] = static_cast<char>(v >> (8 * i));
    b_->Append(tmp, 8);
  }
  void Double(uint32_t field, double v) {
    uint64_t u;
    std::memcpy(&u, &v, sizeof(u));
    Fixed64(field, u);
  }
  void Bytes(uint32_t field, std::string_view s) {
    Tag(field, 2);
    Varint(s.size());
    b_->Append(s);
  }
  // "(x,y,z)" as a length-delimited field, written in place (three per kernel: hot).
  void Dim3Bytes(uint32_t field, uint32_t x, uint32_t y, uint32_t z) {
    Tag(field, 2);
    b_->Reserve(1 + 3 * 10 + 4);
    char* len = b_->Tail();
    char* p = len + 1;
    *p++ = '(';
    p = WriteDecimal(p, x);
    *p++ = ',';
    p = WriteDecimal(p, y);
    *p++ = ',';
    p = WriteDecimal(p, z);
    *p++ = ')';
    *len = static_cast<char>(p - len - 1);  // at most 35 bytes: a one-byte varint
    b_->Advance(static_cast<size_t>(p - len));
  }
  size_t Begin(uint32_t field) {
    Tag(field, 2);
    size_t pos = b_->size();
    b_->Reserve(4);
    b_->Advance(4);
    return pos;
  }
  void End(size_t pos) {
    size_t len = b_->size() - pos - 4;
    char* p = b_->At(pos);
    p[0] = static_cast<char>((len & 0x7f) | 0x80);
    p[1] = static_cast<char>(((len >> 7) & 0x7f) | 0x80);
    p[2] = static_cast<char>(((len >> 14) & 0x7f) | 0x80);
    p[3] = static_cast<char>((len >> 21) & 0x7f);
  }

 private:
  OutputBuffer* b_;
};

// Field numbers (docs/outputs.md, "Perfetto packets").
enum : uint32_t {
  kTracePacket = 1,
  kPktTimestamp = 8,
  kPktSequenceId = 10,
  kPktTrackEvent = 11,
  kPktInternedData = 12,
  kPktSequenceFlags = 13,
  kPktTrackDescriptor = 60,
  kSeqIncrementalStateCleared = 1,
  kSeqNeedsIncrementalState = 2,
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
  kProcName = 6,
  kThrPid = 1,
  kThrTid = 2,
  kThrName = 5,
  kTeDebugAnnotations = 4,
  kTeType = 9,
  kTeNameIid = 10,
  kTeTrackUuid = 11,
  kTeCounterValueDouble = 44,
  kTeFlowIds = 47,
  kTeTerminatingFlowIds = 48,
  kSliceBegin = 1,
  kSliceEnd = 2,
  kInstant = 3,
  kCounter = 4,
  kDaNameIid = 1,
  kDaUint = 3,
  kDaInt = 4,
  kDaDouble = 5,
  kDaString = 6,
  kIdEventNames = 2,
  kIdDebugAnnotationNames = 3,
  kIdIid = 1,
  kIdName = 2,
};

// Debug annotation names, interned once per sequence in its first packet.
enum Arg : uint32_t {
  kArgGrid = 1,
  kArgBlock,
  kArgCluster,
  kArgRegisters,
  kArgStaticShared,
  kArgDynamicShared,
  kArgCorrelation,
  kArgStream,
  kArgDevice,
  kArgGraphId,
  kArgGraphNodeId,
  kArgMangledName,
  kArgKind,
  kArgBytes,
  kArgBandwidth,
  kArgSrcKind,
  kArgDstKind,
  kArgValue,
  kArgMemoryKind,
  kArgDomain,
  kArgCategory,
  kArgPayload,
  kArgReturnValue,
  kArgOccurrence,
  kArgOccurrencesUsed,
  kArgSmClock,
  kArgContext,
  kArgSrcDevice,
  kArgDstDevice,
  kArgEndThread,
  kArgCount  // first free iid (metric names follow)
};
const char* const kArgNames[] = {
    "",
    "grid",
    "block",
    "cluster",
    "registers per thread",
    "static shared memory (bytes)",
    "dynamic shared memory (bytes)",
    "correlation",
    "stream",
    "device",
    "graph id",
    "graph node id",
    "mangled name",
    "kind",
    "bytes",
    "bandwidth (GB/s)",
    "src memory",
    "dst memory",
    "value",
    "memory kind",
    "domain",
    "category",
    "payload",
    "return value",
    "occurrence",
    "occurrences used",
    "SM clock (kHz)",
    "context",
    "src device",
    "dst device",
    "end thread",
};
static_assert(sizeof(kArgNames) / sizeof(kArgNames[0]) == kArgCount, "one name per Arg");

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

enum TrackKind : uint64_t {
  kProcessTrack = 1,
  kThreadTrack,
  kGpuTrack,
  kStreamTrack,
  kMetricsTrack,
  kCounterTrack,
  kSyncTrack,
  kOverheadTrack
};

uint64_t TrackUuid(int file_index, TrackKind kind, uint64_t a, uint64_t b = 0) {
  return Mix(Mix(Mix(static_cast<uint64_t>(file_index) * 16 + kind) ^ a) ^ (b * 31 + 7));
}

std::string ProcessName(const Header* header) {
  if (header == nullptr || header->command_line_size() == 0) return "unknown process";
  std::string name = header->command_line(0);
  size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  for (int i = 1; i < header->command_line_size(); ++i) {
    name += ' ';
    name += header->command_line(i);
  }
  if (name.size() > 160) name = name.substr(0, 157) + "...";
  return name;
}

}  // namespace

struct PerfettoExporter::Process {
  int file_index = 0;
  uint32_t seq = 0;
  int32_t pid = 0;
  uint64_t uuid = 0;
  std::string name;
  // Event names interned by reader string id (ids are stable for a file); 0 = not yet.
  std::vector<uint32_t> name_iid, internal_name_iid;
  std::unordered_map<std::string, uint32_t> other_names;  // metric names, unknown ids
  uint32_t next_name_iid = 1;
  std::unordered_map<std::string, uint32_t> arg_iids;  // metric-name annotations
  uint32_t next_arg_iid = kArgCount;
  std::vector<int8_t> api_flow;  // by string id: 0 unknown, 1 starts a flow, 2 does not
  std::unordered_map<uint32_t, std::string> thread_names;
  std::unordered_map<uint32_t, std::string> threads_described;
  std::unordered_set<uint32_t> gpus_described;
  std::unordered_set<uint64_t> streams_described;
  std::unordered_map<uint32_t, std::vector<std::string>> metric_names;  // config id -> names
  std::unordered_map<std::string, uint64_t> counter_tracks;
  bool metrics_track_described = false;
  // Hot-path caches: event-name iids of the fixed GPU names (0 = not interned yet), and the
  // last track looked up (consecutive slices mostly share one).
  uint32_t memcpy_iid[11] = {};
  uint32_t memset_iid = 0;
  uint32_t sync_iid[5] = {};
  bool sync_track_described = false, overhead_track_described = false;
  uint64_t last_stream_key = ~0ull, last_stream_uuid = 0;
  uint32_t last_tid = 0;
  uint64_t last_thread_uuid = 0;
  bool have_last_tid = false;
};

PerfettoExporter::PerfettoExporter(const ExportOptions& options) : options_(options) {}

PerfettoExporter::~PerfettoExporter() {
  if (out_ != nullptr) std::fclose(out_);
}

bool PerfettoExporter::Begin(std::string* err) {
  out_ = std::fopen(options_.output.c_str(), "wb");
  if (out_ == nullptr) {
    *err = "cannot write '" + options_.output + "': " + std::strerror(errno);
    return false;
  }
  buf_.Reserve(8u << 20);
  return true;
}

bool PerfettoExporter::FlushBuffer() {
  if (!write_failed_) {
    if (!buf_.WriteTo(out_)) write_failed_ = true;
  }
  buf_.clear();
  return !write_failed_;
}

void PerfettoExporter::FlushIfFull() {
  if (buf_.size() >= (4u << 20)) FlushBuffer();
}

namespace {

// Writes the packet header fields shared by every packet of a sequence.
size_t BeginPacket(Wire& w, uint32_t seq, uint32_t flags) {
  size_t pk = w.Begin(kTracePacket);
  w.UInt(kPktSequenceId, seq);
  if (flags != 0) w.UInt(kPktSequenceFlags, flags);
  return pk;
}

void ArgUInt(Wire& w, uint32_t iid, uint64_t v) {
  size_t d = w.Begin(kTeDebugAnnotations);
  w.UInt(kDaNameIid, iid);
  w.UInt(kDaUint, v);
  w.End(d);
}
void ArgInt(Wire& w, uint32_t iid, int64_t v) {
  size_t d = w.Begin(kTeDebugAnnotations);
  w.UInt(kDaNameIid, iid);
  w.Int(kDaInt, v);
  w.End(d);
}
void ArgDouble(Wire& w, uint32_t iid, double v) {
  size_t d = w.Begin(kTeDebugAnnotations);
  w.UInt(kDaNameIid, iid);
  w.Double(kDaDouble, v);
  w.End(d);
}
void ArgStr(Wire& w, uint32_t iid, std::string_view v) {
  size_t d = w.Begin(kTeDebugAnnotations);
  w.UInt(kDaNameIid, iid);
  w.Bytes(kDaString, v);
  w.End(d);
}

void ArgDim3(Wire& w, uint32_t iid, uint32_t x, uint32_t y, uint32_t z) {
  size_t d = w.Begin(kTeDebugAnnotations);
  w.UInt(kDaNameIid, iid);
  w.Dim3Bytes(kDaString, x, y, z);
  w.End(d);
}

void InternedEntry(Wire& w, uint32_t field, uint32_t iid, std::string_view name) {
  size_t e = w.Begin(field);
  w.UInt(kIdIid, iid);
  w.Bytes(kIdName, name);
  w.End(e);
}

}  // namespace

PerfettoExporter::Process& PerfettoExporter::ProcessFor(int file_index, TraceReader& reader) {
  if (file_index >= 0 && static_cast<size_t>(file_index) < processes_.size() &&
      processes_[file_index] != nullptr) {
    return *processes_[file_index];
  }
  if (static_cast<size_t>(file_index) >= processes_.size()) processes_.resize(file_index + 1);
  auto p = std::make_unique<Process>();
  p->file_index = file_index;
  p->seq = static_cast<uint32_t>(file_index) + 1;
  const Header* header = reader.header();
  uint32_t pid = header != nullptr ? header->pid() : 0;
  if (pid == 0) pid = 100000 + static_cast<uint32_t>(file_index);
  // Two files with one pid (two hosts, or pid reuse): keep them apart with a synthetic pid
  // above the Linux pid range (2^22).
  int seen = pids_used_[pid]++;
  p->pid =
      static_cast<int32_t>(seen == 0 ? pid : pid + (static_cast<uint32_t>(file_index + 1) << 22));
  p->uuid = TrackUuid(file_index, kProcessTrack, 0);
  p->name = ProcessName(header);

  // First packet of the sequence: clears incremental state, interns the annotation names, and
  // describes the process track.
  Wire w(&buf_);
  size_t pk = BeginPacket(w, p->seq, kSeqIncrementalStateCleared);
  size_t id = w.Begin(kPktInternedData);
  for (uint32_t i = 1; i < kArgCount; ++i)
    InternedEntry(w, kIdDebugAnnotationNames, i, kArgNames[i]);
  w.End(id);
  size_t td = w.Begin(kPktTrackDescriptor);
  w.UInt(kTdUuid, p->uuid);
  size_t pd = w.Begin(kTdProcess);
  w.Int(kProcPid, p->pid);
  if (header != nullptr) {
    for (const std::string& arg : header->command_line()) w.Bytes(kProcCmdline, arg);
  }
  w.Bytes(kProcName, p->name);
  w.End(pd);
  if (header != nullptr) {
    w.Bytes(kTdDescription, "host " + header->hostname() + ", file " + reader.path());
  }
  w.End(td);
  w.End(pk);
  processes_[file_index] = std::move(p);
  return *processes_[file_index];
}

void PerfettoExporter::BeginFile(int file_index, TraceReader& reader) {
  ProcessFor(file_index, reader);
}

void PerfettoExporter::AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) {
  Process& p = ProcessFor(file_index, reader);
  Wire w(&buf_);

  for (const ThreadInfo& t : chunk.threads()) p.thread_names[t.thread_id()] = t.name();
  for (const MetricConfig& c : chunk.metric_configs()) {
    p.metric_names[c.id()].assign(c.metric_names().begin(), c.metric_names().end());
  }
  // Thread names may arrive after the thread's first event: describe the track again.
  for (auto& [tid, described] : p.threads_described) {
    auto it = p.thread_names.find(tid);
    if (it != p.thread_names.end() && it->second != described) {
      described = it->second;
      size_t pk = BeginPacket(w, p.seq, 0);
      size_t td = w.Begin(kPktTrackDescriptor);
      w.UInt(kTdUuid, TrackUuid(file_index, kThreadTrack, tid));
      size_t th = w.Begin(kTdThread);
      w.Int(kThrPid, p.pid);
      w.Int(kThrTid, static_cast<int32_t>(tid));
      w.Bytes(kThrName, described);
      w.End(th);
      w.End(td);
      w.End(pk);
    }
  }

  auto thread_track = [&](uint32_t tid) {
    if (p.have_last_tid && p.last_tid == tid) return p.last_thread_uuid;
    uint64_t uuid = TrackUuid(file_index, kThreadTrack, tid);
    p.have_last_tid = true;
    p.last_tid = tid;
    p.last_thread_uuid = uuid;
    if (p.threads_described.count(tid) == 0) {
      auto it = p.thread_names.find(tid);
      std::string name = it != p.thread_names.end() ? it->second : std::string();
      size_t pk = BeginPacket(w, p.seq, 0);
      size_t td = w.Begin(kPktTrackDescriptor);
      w.UInt(kTdUuid, uuid);
      size_t th = w.Begin(kTdThread);
      w.Int(kThrPid, p.pid);
      w.Int(kThrTid, static_cast<int32_t>(tid));
      if (!name.empty()) w.Bytes(kThrName, name);
      w.End(th);
      w.End(td);
      w.End(pk);
      p.threads_described[tid] = name;
    }
    return uuid;
  };
  auto stream_track = [&](uint32_t device, uint32_t stream) {
    uint64_t key = GpuTrack(device, stream);
    if (key == p.last_stream_key) return p.last_stream_uuid;
    uint64_t root = TrackUuid(file_index, kGpuTrack, device);
    uint64_t uuid = TrackUuid(file_index, kStreamTrack, key);
    if (p.gpus_described.insert(device).second) {
      std::string dev_name = "GPU";
      for (const Device& d : reader.devices()) {
        if (d.id() == device) dev_name = d.name();
      }
      size_t pk = BeginPacket(w, p.seq, 0);
      size_t td = w.Begin(kPktTrackDescriptor);
      w.UInt(kTdUuid, root);
      w.Bytes(kTdName, "GPU " + std::to_string(device) + ": " + dev_name + " (pid " +
                           std::to_string(p.pid) + ")");
      w.UInt(kTdChildOrdering, kChildOrderingExplicit);
      w.UInt(kTdSiblingMergeBehavior, kSiblingMergeNone);
      w.Bytes(kTdDescription, "process " + p.name);
      w.End(td);
      w.End(pk);
    }
    if (p.streams_described.insert(key).second) {
      size_t pk = BeginPacket(w, p.seq, 0);
      size_t td = w.Begin(kPktTrackDescriptor);
      w.UInt(kTdUuid, uuid);
      w.UInt(kTdParentUuid, root);
      w.Bytes(kTdName, "stream " + std::to_string(stream));
      w.Int(kTdSiblingOrderRank, static_cast<int32_t>(stream));
      w.UInt(kTdSiblingMergeBehavior, kSiblingMergeNone);
      w.End(td);
      w.End(pk);
    }
    p.last_stream_key = key;
    p.last_stream_uuid = uuid;
    return uuid;
  };
  // Returns the iid of a reader string id, writing the interned entry into the current packet's
  // interned_data when it is new. Must be called after BeginPacket and before the track event.
  auto intern_id = [&](uint32_t sid, bool internal) -> uint32_t {
    std::vector<uint32_t>& table = internal ? p.internal_name_iid : p.name_iid;
    if (sid < (1u << 24)) {
      if (sid >= table.size()) table.resize(sid + 1, 0);
      if (table[sid] != 0) return table[sid];
    }
    std::string name = std::string(internal ? "[kp profiler] " : "") + std::string(reader.Str(sid));
    auto [it, added] = p.other_names.emplace(name, p.next_name_iid);
    if (added) {
      ++p.next_name_iid;
      size_t id = w.Begin(kPktInternedData);
      InternedEntry(w, kIdEventNames, it->second, name);
      w.End(id);
    }
    if (sid < (1u << 24)) table[sid] = it->second;
    return it->second;
  };
  auto intern_text = [&](const std::string& name) -> uint32_t {
    auto [it, added] = p.other_names.emplace(name, p.next_name_iid);
    if (added) {
      ++p.next_name_iid;
      size_t id = w.Begin(kPktInternedData);
      InternedEntry(w, kIdEventNames, it->second, name);
      w.End(id);
    }
    return it->second;
  };
  auto end_slice = [&](uint64_t ts, uint64_t track) {
    size_t pk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
    w.UInt(kPktTimestamp, ts);
    size_t te = w.Begin(kPktTrackEvent);
    w.UInt(kTeType, kSliceEnd);
    w.UInt(kTeTrackUuid, track);
    w.End(te);
    w.End(pk);
  };

  layout_.LayOut(file_index, chunk, &gpu_, &cpu_, &metrics_);

  // GPU work, per stream.
  for (const LaidOutSlice& s : gpu_) {
    uint32_t device = static_cast<uint32_t>(s.track >> 32);
    uint64_t track = stream_track(device, static_cast<uint32_t>(s.track));
    size_t pk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
    w.UInt(kPktTimestamp, s.start);
    uint32_t iid = 0;
    uint64_t correlation = 0;
    const KernelShape* shape = nullptr;
    if (s.kind == SliceKind::kKernel) {
      const Kernel& k = chunk.kernels(s.index);
      shape = reader.Shape(k.shape());
      bool internal = (k.flags() & RECORD_FLAG_PROFILER_INTERNAL) != 0;
      iid = shape != nullptr
                ? intern_id(shape->demangled() != 0 ? shape->demangled() : shape->name(), internal)
                : intern_text("<unknown kernel>");
      correlation = k.correlation();
    } else if (s.kind == SliceKind::kMemcpy) {
      const Memcpy& m = chunk.memcpys(s.index);
      const int kind = m.copy_kind() >= 0 && m.copy_kind() <= 10 ? m.copy_kind() : 0;
      if (p.memcpy_iid[kind] == 0) {
        p.memcpy_iid[kind] = intern_text(std::string("Memcpy ") + CopyKindName(kind));
      }
      iid = p.memcpy_iid[kind];
      correlation = m.correlation();
    } else {
      if (p.memset_iid == 0) p.memset_iid = intern_text("Memset");
      iid = p.memset_iid;
      correlation = chunk.memsets(s.index).correlation();
    }
    size_t te = w.Begin(kPktTrackEvent);
    w.UInt(kTeType, kSliceBegin);
    w.UInt(kTeTrackUuid, track);
    w.UInt(kTeNameIid, iid);
    if (correlation != 0) w.Fixed64(kTeTerminatingFlowIds, LaunchFlowId(file_index, correlation));
    if (s.kind == SliceKind::kKernel) {
      const Kernel& k = chunk.kernels(s.index);
      if (shape != nullptr) {
        ArgDim3(w, kArgGrid, shape->grid_x(), shape->grid_y(), shape->grid_z());
        ArgDim3(w, kArgBlock, shape->block_x(), shape->block_y(), shape->block_z());
        ArgDim3(w, kArgCluster, shape->cluster_x(), shape->cluster_y(), shape->cluster_z());
        ArgUInt(w, kArgRegisters, shape->registers_per_thread());
        ArgUInt(w, kArgStaticShared, shape->static_shared_bytes());
        ArgUInt(w, kArgDynamicShared, shape->dynamic_shared_bytes());
        ArgStr(w, kArgMangledName, reader.Str(shape->name()));
      }
      ArgUInt(w, kArgCorrelation, k.correlation());
      ArgUInt(w, kArgStream, k.stream());
      ArgUInt(w, kArgDevice, k.device());
      ArgUInt(w, kArgContext, k.context());
      if (k.graph_id() != 0) {
        ArgUInt(w, kArgGraphId, k.graph_id());
        ArgUInt(w, kArgGraphNodeId, k.graph_node_id());
      }
    } else if (s.kind == SliceKind::kMemcpy) {
      const Memcpy& m = chunk.memcpys(s.index);
      ArgStr(w, kArgKind, CopyKindName(m.copy_kind()));
      ArgUInt(w, kArgBytes, m.bytes());
      ArgDouble(
          w, kArgBandwidth,
          BandwidthGBs(m.bytes(), static_cast<uint64_t>(m.start()),
                       static_cast<uint64_t>(m.start() + std::max<int64_t>(m.duration(), 0))));
      ArgStr(w, kArgSrcKind, MemoryKindName(m.src_kind()));
      ArgStr(w, kArgDstKind, MemoryKindName(m.dst_kind()));
      ArgUInt(w, kArgCorrelation, m.correlation());
      ArgUInt(w, kArgStream, m.stream());
      ArgUInt(w, kArgDevice, m.device());
      if (m.peer()) {
        ArgUInt(w, kArgSrcDevice, m.src_device());
        ArgUInt(w, kArgDstDevice, m.dst_device());
      }
      if (m.graph_id() != 0) {
        ArgUInt(w, kArgGraphId, m.graph_id());
        ArgUInt(w, kArgGraphNodeId, m.graph_node_id());
      }
    } else {
      const Memset& m = chunk.memsets(s.index);
      ArgUInt(w, kArgBytes, m.bytes());
      ArgUInt(w, kArgValue, m.value());
      ArgStr(w, kArgMemoryKind, MemoryKindName(m.memory_kind()));
      ArgUInt(w, kArgCorrelation, m.correlation());
      ArgUInt(w, kArgStream, m.stream());
      ArgUInt(w, kArgDevice, m.device());
      if (m.graph_id() != 0) {
        ArgUInt(w, kArgGraphId, m.graph_id());
        ArgUInt(w, kArgGraphNodeId, m.graph_node_id());
      }
    }
    w.End(te);
    w.End(pk);
    end_slice(s.end, track);
  }

  // CPU threads: API calls and NVTX ranges.
  for (const LaidOutSlice& s : cpu_) {
    uint64_t track = thread_track(static_cast<uint32_t>(s.track));
    size_t pk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
    w.UInt(kPktTimestamp, s.start);
    if (s.kind == SliceKind::kApi) {
      const ApiCall& a = chunk.api_calls(s.index);
      uint32_t iid = intern_id(a.name(), false);
      if (a.name() >= p.api_flow.size() && a.name() < (1u << 24))
        p.api_flow.resize(a.name() + 1, 0);
      bool flow = false;
      if (a.name() < p.api_flow.size()) {
        if (p.api_flow[a.name()] == 0)
          p.api_flow[a.name()] = ApiStartsGpuWork(reader.Str(a.name())) ? 1 : 2;
        flow = p.api_flow[a.name()] == 1;
      }
      size_t te = w.Begin(kPktTrackEvent);
      w.UInt(kTeType, kSliceBegin);
      w.UInt(kTeTrackUuid, track);
      w.UInt(kTeNameIid, iid);
      if (flow && a.correlation() != 0)
        w.Fixed64(kTeFlowIds, LaunchFlowId(file_index, a.correlation()));
      ArgUInt(w, kArgCorrelation, a.correlation());
      ArgInt(w, kArgReturnValue, a.return_value());
      w.End(te);
    } else {
      const NvtxRange& r = chunk.nvtx_ranges(s.index);
      uint32_t iid = intern_id(r.name(), false);
      size_t te = w.Begin(kPktTrackEvent);
      w.UInt(kTeType, kSliceBegin);
      w.UInt(kTeTrackUuid, track);
      w.UInt(kTeNameIid, iid);
      if (r.domain() != 0) ArgStr(w, kArgDomain, reader.Str(r.domain()));
      if (r.category() != 0) ArgUInt(w, kArgCategory, r.category());
      if (r.has_payload() && r.payload().value_case() != NvtxPayload::VALUE_NOT_SET) {
        ArgStr(w, kArgPayload, NvtxPayloadText(r.payload()));
      }
      if (r.end_thread_id() != 0 && r.end_thread_id() != r.thread_id()) {
        ArgUInt(w, kArgEndThread, r.end_thread_id());
      }
      w.End(te);
    }
    w.End(pk);
    end_slice(s.end, track);
  }

  // NVTX marks: instants on their thread.
  for (const NvtxMark& m : chunk.nvtx_marks()) {
    uint64_t track = thread_track(m.thread_id());
    size_t pk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
    w.UInt(kPktTimestamp, static_cast<uint64_t>(m.time()));
    uint32_t iid = intern_id(m.name(), false);
    size_t te = w.Begin(kPktTrackEvent);
    w.UInt(kTeType, kInstant);
    w.UInt(kTeTrackUuid, track);
    w.UInt(kTeNameIid, iid);
    if (m.domain() != 0) ArgStr(w, kArgDomain, reader.Str(m.domain()));
    if (m.has_payload() && m.payload().value_case() != NvtxPayload::VALUE_NOT_SET) {
      ArgStr(w, kArgPayload, NvtxPayloadText(m.payload()));
    }
    w.End(te);
    w.End(pk);
  }

  // Synchronization and CUPTI overhead records: one track each per process (see
  // TimelineLayout::LayOutProcessTracks for why not on a thread or stream track).
  layout_.LayOutProcessTracks(file_index, chunk, &sync_, &overhead_);
  auto process_child_track = [&](TrackKind kind, const char* name, bool* described) {
    uint64_t uuid = TrackUuid(file_index, kind, 0);
    if (!*described) {
      *described = true;
      size_t pk = BeginPacket(w, p.seq, 0);
      size_t td = w.Begin(kPktTrackDescriptor);
      w.UInt(kTdUuid, uuid);
      w.UInt(kTdParentUuid, p.uuid);
      w.Bytes(kTdName, name);
      w.End(td);
      w.End(pk);
    }
    return uuid;
  };
  // Annotation names beyond the fixed set are interned on first use (like metric names), so
  // traces without these records keep their exact bytes.
  auto extra_arg = [&](const std::string& name, size_t* interned) {
    auto [it, added] = p.arg_iids.emplace(name, p.next_arg_iid);
    if (added) {
      ++p.next_arg_iid;
      if (*interned == 0) *interned = w.Begin(kPktInternedData);
      InternedEntry(w, kIdDebugAnnotationNames, it->second, name);
    }
    return it->second;
  };
  if (!sync_.empty()) {
    uint64_t track = process_child_track(kSyncTrack, "CUDA sync", &p.sync_track_described);
    for (const LaidOutSlice& s : sync_) {
      const Synchronization& y = chunk.syncs(s.index);
      const int type = y.type() >= 0 && y.type() <= 4 ? y.type() : 0;
      size_t pk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
      w.UInt(kPktTimestamp, s.start);
      if (p.sync_iid[type] == 0) p.sync_iid[type] = intern_text(SyncTypeLabel(type));
      size_t interned = 0;
      uint32_t event_iid = y.event_id() != 0 ? extra_arg("event id", &interned) : 0;
      if (interned != 0) w.End(interned);
      size_t te = w.Begin(kPktTrackEvent);
      w.UInt(kTeType, kSliceBegin);
      w.UInt(kTeTrackUuid, track);
      w.UInt(kTeNameIid, p.sync_iid[type]);
      ArgUInt(w, kArgStream, y.stream());
      ArgUInt(w, kArgContext, y.context());
      ArgUInt(w, kArgCorrelation, y.correlation());
      if (event_iid != 0) ArgUInt(w, event_iid, y.event_id());
      ArgInt(w, kArgReturnValue, y.return_value());
      w.End(te);
      w.End(pk);
      end_slice(s.end, track);
    }
  }
  if (!overhead_.empty()) {
    uint64_t track =
        process_child_track(kOverheadTrack, "CUPTI overhead", &p.overhead_track_described);
    for (const LaidOutSlice& s : overhead_) {
      const Overhead& o = chunk.overheads(s.index);
      size_t pk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
      w.UInt(kPktTimestamp, s.start);
      uint32_t iid = intern_text(OverheadLabel(reader.Str(o.name()), o.kind()));
      size_t interned = 0;
      uint32_t thread_iid = o.thread_id() != 0 ? extra_arg("thread", &interned) : 0;
      if (interned != 0) w.End(interned);
      size_t te = w.Begin(kPktTrackEvent);
      w.UInt(kTeType, kSliceBegin);
      w.UInt(kTeTrackUuid, track);
      w.UInt(kTeNameIid, iid);
      ArgUInt(w, kArgKind, o.kind());
      if (thread_iid != 0) ArgUInt(w, thread_iid, o.thread_id());
      ArgUInt(w, kArgDevice, o.device());
      ArgUInt(w, kArgCorrelation, o.correlation());
      w.End(te);
      w.End(pk);
      end_slice(s.end, track);
    }
  }

  // Metric ranges: a slice per measured range on the process's "metrics" track, carrying the
  // values, and one counter track per metric name holding the value at the range start.
  if (!metrics_.empty()) {
    uint64_t metrics_uuid = TrackUuid(file_index, kMetricsTrack, 0);
    if (!p.metrics_track_described) {
      p.metrics_track_described = true;
      size_t pk = BeginPacket(w, p.seq, 0);
      size_t td = w.Begin(kPktTrackDescriptor);
      w.UInt(kTdUuid, metrics_uuid);
      w.UInt(kTdParentUuid, p.uuid);
      w.Bytes(kTdName, "metrics");
      w.End(td);
      w.End(pk);
    }
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
          uint64_t uuid = TrackUuid(file_index, kCounterTrack, std::hash<std::string>()(name));
          p.counter_tracks[name] = uuid;
          size_t pk = BeginPacket(w, p.seq, 0);
          size_t td = w.Begin(kPktTrackDescriptor);
          w.UInt(kTdUuid, uuid);
          w.UInt(kTdParentUuid, p.uuid);
          w.Bytes(kTdName, name);
          size_t cd = w.Begin(kTdCounter);
          w.End(cd);
          w.End(td);
          w.End(pk);
        }
      }
      size_t pk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
      w.UInt(kPktTimestamp, s.start);
      uint32_t iid = intern_id(m.name(), false);
      // Annotation names for metrics: interned on first use in this packet.
      std::vector<uint32_t> arg_iid(m.values_size());
      size_t interned = 0;
      for (int i = 0; i < m.values_size(); ++i) {
        std::string name = metric_name(i);
        auto [it, added] = p.arg_iids.emplace(name, p.next_arg_iid);
        if (added) {
          ++p.next_arg_iid;
          if (interned == 0) interned = w.Begin(kPktInternedData);
          InternedEntry(w, kIdDebugAnnotationNames, it->second, name);
        }
        arg_iid[i] = it->second;
      }
      if (interned != 0) w.End(interned);
      size_t te = w.Begin(kPktTrackEvent);
      w.UInt(kTeType, kSliceBegin);
      w.UInt(kTeTrackUuid, metrics_uuid);
      w.UInt(kTeNameIid, iid);
      if (m.domain() != 0) ArgStr(w, kArgDomain, reader.Str(m.domain()));
      ArgUInt(w, kArgOccurrence, m.occurrence());
      ArgUInt(w, kArgOccurrencesUsed, m.occurrences_used());
      if (m.sm_clock_khz() != 0) ArgUInt(w, kArgSmClock, m.sm_clock_khz());
      for (int i = 0; i < m.values_size(); ++i) ArgDouble(w, arg_iid[i], m.values(i));
      w.End(te);
      w.End(pk);
      end_slice(s.end, metrics_uuid);
      for (int i = 0; i < m.values_size(); ++i) {
        if (m.values(i) != m.values(i)) continue;  // NaN: not collected
        size_t cpk = BeginPacket(w, p.seq, kSeqNeedsIncrementalState);
        w.UInt(kPktTimestamp, s.start);
        size_t cte = w.Begin(kPktTrackEvent);
        w.UInt(kTeType, kCounter);
        w.UInt(kTeTrackUuid, p.counter_tracks[metric_name(i)]);
        w.Double(kTeCounterValueDouble, m.values(i));
        w.End(cte);
        w.End(cpk);
      }
    }
  }
  FlushIfFull();
}

bool PerfettoExporter::End(std::string* err) {
  bool ok = FlushBuffer();
  if (out_ != nullptr) {
    if (std::fclose(out_) != 0) ok = false;
    out_ = nullptr;
  }
  for (const std::string& line : layout_.anomalies().Describe()) {
    std::fprintf(stderr, "kptrace convert: perfetto: %s\n", line.c_str());
  }
  if (!ok) {
    *err = "error writing '" + options_.output + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

std::unique_ptr<Exporter> MakePerfettoExporter(const ExportOptions& options) {
  return std::make_unique<PerfettoExporter>(options);
}

}  // namespace kp
