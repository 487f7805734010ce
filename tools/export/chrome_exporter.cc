#include "tools/export/chrome_exporter.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/pm_counters.h"
#include "common/time_math.h"
#include "tools/capture/capture_window_text.h"
#include "tools/export/decimal_text.h"
#include "tools/export/nvtx_payload_text.h"
#include "tools/export/record_args.h"
#include "tools/export/record_naming.h"

namespace kp {
namespace {

// Synthetic thread ids, above the Linux pid range (2^22): GPU stream lanes, numbered in order of
// first use per process; the per-process "metrics", "CUDA sync" and "CUPTI overhead" threads
// (TimelineLayout::LayOutProcessTracks says why these records get tracks of their own) and the
// extra lanes of the last two.
constexpr int64_t kGpuTidBase = 0x40000000;
constexpr int64_t kProcessLaneTidBase = 0x70000000;
constexpr int64_t kMetricsTid = 0x7fffffff;
constexpr int64_t kSyncTid = 0x7ffffffe;
constexpr int64_t kOverheadTid = 0x7ffffffd;
constexpr int64_t kCaptureTid = 0x7ffffffc;  // capture windows: one track, never overlapping
// Thread order inside a process group: CPU threads first (sort index 0), then the GPU lanes by
// device, stream and lane, then the per-process tracks.
// Sort indices are read as 32-bit integers.
constexpr int64_t kGpuSortBase = int64_t{1} << 28;
constexpr int64_t kProcessTrackSortBase = int64_t{1} << 30;

void PayloadValue(JsonWriter& j, const NvtxPayload& p) {
  switch (p.value_case()) {
    case NvtxPayload::kU64:
      j.UInt(p.u64());
      break;
    case NvtxPayload::kI64:
      j.Int(p.i64());
      break;
    case NvtxPayload::kF64:
      j.Double(p.f64());
      break;
    case NvtxPayload::kU32:
      j.UInt(p.u32());
      break;
    case NvtxPayload::kI32:
      j.Int(p.i32());
      break;
    case NvtxPayload::kF32:
      j.Double(p.f32());
      break;
    default:  // a payload kind added to the schema later: its text form
      j.String(NvtxPayloadText(p));
      break;
  }
}

// The argument names with their lengths (KeyPlain would otherwise measure them every time).
struct ArgKeys {
  std::string_view name[kArgCount];
  ArgKeys() {
    for (uint32_t i = 0; i < kArgCount; ++i) name[i] = kArgNames[i] ? kArgNames[i] : "";
  }
};
const ArgKeys& Keys() {
  static const ArgKeys keys;
  return keys;
}

// The fixed start of each kind of "X" event.
constexpr std::string_view kCatKernel = R"("ph":"X","cat":"kernel")";
constexpr std::string_view kCatMemcpy = R"("ph":"X","cat":"gpu_memcpy")";
constexpr std::string_view kCatMemset = R"("ph":"X","cat":"gpu_memset")";
constexpr std::string_view kCatDriver = R"("ph":"X","cat":"cuda_driver")";
constexpr std::string_view kCatRuntime = R"("ph":"X","cat":"cuda_runtime")";
constexpr std::string_view kCatNvtx = R"("ph":"X","cat":"nvtx")";
constexpr std::string_view kCatSync = R"("ph":"X","cat":"cuda_sync")";
constexpr std::string_view kCatOverhead = R"("ph":"X","cat":"cupti_overhead")";
constexpr std::string_view kCatMetrics = R"("ph":"X","cat":"kp_metrics")";
// A launch arrow's two ends, as members of the two slices it joins (flow events v2: one
// "bind_id" shared by the launch call, "flow_out", and each of its GPU records, "flow_in").
constexpr std::string_view kFlowOut = R"("flow_out":true)";
constexpr std::string_view kFlowIn = R"("flow_in":true)";

// Writes record_args.h's arguments as JSON members of "args".
struct JsonArgs {
  JsonWriter& j;
  const ArgKeys& keys = Keys();
  void UInt(uint32_t id, uint64_t v) { j.UIntMember(keys.name[id], v); }
  void Int(uint32_t id, int64_t v) { j.IntMember(keys.name[id], v); }
  void Double(uint32_t id, double v) {
    j.KeyPlain(keys.name[id]);
    j.Double(v);
  }
  void Bool(uint32_t id, bool v) {
    j.KeyPlain(keys.name[id]);
    j.Bool(v);
  }
  void Str(uint32_t id, std::string_view v) {
    j.KeyPlain(keys.name[id]);
    j.String(v);
  }
  // Once per kernel shape (ShapeMembers), so a string per call is fine.
  void Dim3(uint32_t id, uint32_t x, uint32_t y, uint32_t z) {
    j.KeyPlain(keys.name[id]);
    j.PlainString(kp::Dim3(x, y, z));
  }
  void Payload(uint32_t id, const NvtxPayload& p) {
    if (p.value_case() == NvtxPayload::VALUE_NOT_SET) return;
    j.KeyPlain(keys.name[id]);
    PayloadValue(j, p);
  }
};

// The members that `write(sink)` puts into an object (record_args.h arguments), as text to copy
// into events: made once per shape or per change, never per event.
template <typename Write>
std::string ArgsMembers(Write write) {
  JsonWriter w(nullptr, 256);  // never flushed: only its buffer is read
  JsonArgs sink{w};
  w.BeginObject();
  write(sink);
  return w.buffer().substr(1);  // without the "{"
}

// "Memcpy <kind>" for every copy kind, built once.
const std::string& MemcpyName(int kind) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int k = 0; k <= 10; ++k) v.push_back(std::string("Memcpy ") + CopyKindName(k));
    return v;
  }();
  return names[kind >= 0 && kind <= 10 ? static_cast<size_t>(kind) : 0];  // as CopyKindName
}

}  // namespace

ChromeExporter::ChromeExporter(const ExportOptions& options) : options_(options) {
  if (options_.time_base_ns != 0) {
    base_ns_ = options_.time_base_ns;
    have_base_ = true;
  }
}

ChromeExporter::~ChromeExporter() {
  if (out_ != nullptr) std::fclose(out_);
}

Status ChromeExporter::Begin() {
  out_ = std::fopen(options_.output.c_str(), "wb");
  if (out_ == nullptr) {
    return Status::Error("cannot write '" + options_.output + "': " + std::strerror(errno));
  }
  json_ = std::make_unique<JsonWriter>(out_);
  json_->BeginObject();
  json_->KeyPlain("displayTimeUnit");
  json_->String("ns");
  json_->KeyPlain("traceEvents");
  json_->BeginArray();
  return Status();
}

int64_t ChromeExporter::Rel(uint64_t ns) const {
  return SaturatingSub(static_cast<int64_t>(ns), static_cast<int64_t>(base_ns_));
}

void ChromeExporter::Meta(const char* name, int32_t pid, int64_t tid, std::string_view key,
                          std::string_view value) {
  JsonWriter& j = *json_;
  j.BeginObject();
  j.KeyPlain("ph");
  j.String("M");
  j.KeyPlain("name");
  j.String(name);
  j.KeyPlain("pid");
  j.Int(pid);
  j.KeyPlain("tid");
  j.Int(tid);
  j.KeyPlain("args");
  j.BeginObject();
  j.Key(key);
  j.String(value);
  j.EndObject();
  j.EndObject();
}

void ChromeExporter::SortIndex(const char* name, int32_t pid, int64_t tid, int64_t index) {
  JsonWriter& j = *json_;
  j.BeginObject();
  j.KeyPlain("ph");
  j.String("M");
  j.KeyPlain("name");
  j.String(name);
  j.KeyPlain("pid");
  j.Int(pid);
  j.KeyPlain("tid");
  j.Int(tid);
  j.KeyPlain("args");
  j.BeginObject();
  j.KeyPlain("sort_index");
  j.Int(index);
  j.EndObject();
  j.EndObject();
}

ChromeExporter::Process& ChromeExporter::ProcessFor(int file_index, TraceReader& reader) {
  if (static_cast<size_t>(file_index) < processes_.size() && processes_[file_index] != nullptr) {
    return *processes_[file_index];
  }
  if (static_cast<size_t>(file_index) >= processes_.size()) processes_.resize(file_index + 1);
  auto p = std::make_unique<Process>();
  const Header* header = reader.header();
  if (header != nullptr) {
    p->header = *header;
    p->have_header = true;
    if (!have_base_ && header->start_time_trace_ns() != 0) {
      base_ns_ = header->start_time_trace_ns();
      have_base_ = true;
    }
  }
  p->ids = ids_.ForFile(header, file_index);
  p->path = reader.path();
  uint32_t pid = header != nullptr ? header->pid() : 0;
  if (pid == 0) pid = 100000 + static_cast<uint32_t>(file_index);
  int seen = pids_used_[pid]++;
  p->pid =
      static_cast<int32_t>(seen == 0 ? pid : pid + (static_cast<uint32_t>(file_index + 1) << 22));
  p->name = ProcessGroupName(header, pid);
  Meta("process_name", p->pid, 0, "name", p->name);
  SortIndex("process_sort_index", p->pid, 0, ProcessSortIndex(header, file_index));
  processes_[file_index] = std::move(p);
  return *processes_[file_index];
}

void ChromeExporter::BeginFile(int file_index, TraceReader& reader) {
  ProcessFor(file_index, reader);
}

void ChromeExporter::NameThread(Process& p, uint32_t tid) {
  if (p.have_named_tid && p.last_named_tid == tid) return;  // consecutive slices share a thread
  p.have_named_tid = true;
  p.last_named_tid = tid;
  if (p.threads_named.insert(tid).second) {
    auto it = p.thread_names.find(tid);
    Meta("thread_name", p.pid, tid, "name",
         ThreadLabel(tid, it != p.thread_names.end() ? it->second : ""));
  }
}

int64_t ChromeExporter::GpuThread(Process& p, TraceReader& reader, uint64_t key, uint32_t lane) {
  const uint32_t device = static_cast<uint32_t>(key >> 32);
  const uint32_t stream = static_cast<uint32_t>(key);
  const auto k = std::make_tuple(device, stream, lane);
  if (k == p.last_gpu_key) return p.last_gpu_tid;
  auto [it, added] = p.gpu_tids.emplace(k, kGpuTidBase + static_cast<int64_t>(p.gpu_tids.size()));
  if (added) {
    std::string dev_name = "GPU";
    for (const Device& d : reader.devices()) {
      if (d.id() == device) dev_name = d.name();
    }
    std::string name =
        "GPU " + std::to_string(device) + " (" + dev_name + ") stream " + std::to_string(stream);
    if (lane != 0) name = LaneName(name, lane);
    Meta("thread_name", p.pid, it->second, "name", name);
    SortIndex("thread_sort_index", p.pid, it->second,
              kGpuSortBase + (static_cast<int64_t>(device & 0xff) << 20) +
                  (static_cast<int64_t>(std::min<uint32_t>(stream, 0xffff)) << 4) +
                  std::min<uint32_t>(lane, 15));
  }
  p.last_gpu_key = k;
  p.last_gpu_tid = it->second;
  return it->second;
}

int64_t ChromeExporter::ProcessTrackThread(Process& p, int64_t tid, const char* name,
                                           uint32_t lane) {
  const int64_t track_tid =
      lane == 0 ? tid : kProcessLaneTidBase + static_cast<int64_t>(lane) * 4 + (kMetricsTid - tid);
  if (p.process_tracks_named.insert(track_tid).second) {
    Meta("thread_name", p.pid, track_tid, "name",
         lane == 0 ? std::string(name) : LaneName(name, lane));
    SortIndex("thread_sort_index", p.pid, track_tid,
              kProcessTrackSortBase + (kMetricsTid - tid) * 4096 + lane);
  }
  return track_tid;
}

bool ChromeExporter::NamePlain(Process& p, TraceReader& reader, uint32_t sid) {
  if (sid >= (1u << 24)) return JsonWriter::IsPlain(reader.Str(sid));
  if (sid >= p.name_plain.size()) p.name_plain.resize(sid + 1, 0);
  if (p.name_plain[sid] == 0) p.name_plain[sid] = JsonWriter::IsPlain(reader.Str(sid)) ? 1 : 2;
  return p.name_plain[sid] == 1;
}

std::string_view ChromeExporter::ShapeMembers(Process& p, TraceReader& reader, uint32_t shape_id,
                                              const KernelShape& shape) {
  return p.shape_members.Get(shape_id, [&] {
    return ArgsMembers(
        [&](JsonArgs& sink) { KernelShapeArgs(shape, reader.Str(shape.name()), sink); });
  });
}

void ChromeExporter::BeginComplete(std::string_view members, std::string_view name, int32_t pid,
                                   int64_t tid, uint64_t start, uint64_t end, bool plain) {
  JsonWriter& j = *json_;
  j.BeginObject();
  j.PlainMembers(members);
  j.KeyPlain("name");
  if (plain) {
    j.PlainString(name);
  } else {
    j.String(name);
  }
  j.PlainMembers(PidTid(pid, tid));
  j.MicrosMembers("ts", Rel(start), "dur", static_cast<int64_t>(end - start));
}

void ChromeExporter::BeginCompleteWithHead(std::string_view head, int32_t pid, int64_t tid,
                                           uint64_t start, uint64_t end) {
  JsonWriter& j = *json_;
  j.BeginObject();
  j.PlainMembers(head);
  j.PlainMembers(PidTid(pid, tid));
  j.MicrosMembers("ts", Rel(start), "dur", static_cast<int64_t>(end - start));
}

// Inlined into the emit loops: the head is found in a few instructions on all but each name's
// first event (MakeHead).
[[gnu::always_inline]] inline std::string_view ChromeExporter::CachedHead(
    Process& p, TraceReader& reader, ShapeTextCache& heads, uint32_t key, std::string_view members,
    uint32_t sid) {
  if (key >= kMaxCachedHeadId || !reader.HasStr(sid)) return {};
  if (const std::string* head = heads.Find(key)) return *head;  // only plain names are kept
  return MakeHead(p, reader, heads, key, members, sid);
}

std::string_view ChromeExporter::MakeHead(Process& p, TraceReader& reader, ShapeTextCache& heads,
                                          uint32_t key, std::string_view members, uint32_t sid) {
  if (!NamePlain(p, reader, sid)) return {};
  return heads.Get(key, [&] {
    // As BeginComplete writes them: the members, then "name" and the plain name in quotes.
    const std::string_view name = reader.Str(sid);
    std::string head;
    head.reserve(members.size() + name.size() + 10);
    head.append(members).append(R"(,"name":")").append(name).append("\"");
    return head;
  });
}

std::string_view ChromeExporter::PidTid(int32_t pid, int64_t tid) {
  if (pid_tid_text_.empty() || pid != pid_tid_pid_ || tid != pid_tid_tid_) {
    pid_tid_pid_ = pid;
    pid_tid_tid_ = tid;
    char text[64];
    char* p = text;
    std::memcpy(p, R"("pid":)", 6);
    p = WriteSignedDecimal(p + 6, pid);
    std::memcpy(p, R"(,"tid":)", 7);
    p = WriteSignedDecimal(p + 7, tid);
    pid_tid_text_.assign(text, static_cast<size_t>(p - text));
  }
  return pid_tid_text_;
}

std::string_view ChromeExporter::PlacementMembers(uint32_t stream, uint32_t device,
                                                  uint32_t context) {
  if (placement_text_.empty() || stream != placement_stream_ || device != placement_device_ ||
      context != placement_context_) {
    placement_stream_ = stream;
    placement_device_ = device;
    placement_context_ = context;
    placement_text_ =
        ArgsMembers([&](JsonArgs& sink) { KernelPlacementArgs(stream, device, context, sink); });
  }
  return placement_text_;
}

void ChromeExporter::BindFlow(bool out, uint64_t id) {
  json_->UIntMemberThen("bind_id", id, out ? kFlowOut : kFlowIn);
}

void ChromeExporter::AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) {
  Process& p = ProcessFor(file_index, reader);
  if (reader.stats().chunks_sequence_reused != p.sequence_reused) {
    p.sequence_reused = reader.stats().chunks_sequence_reused;
    p.name_plain.clear();
    p.api_flow.clear();
    for (ShapeTextCache* c :
         {&p.shape_members, &p.kernel_heads, &p.runtime_heads, &p.driver_heads, &p.nvtx_heads}) {
      c->Clear();
    }
  }
  JsonWriter& j = *json_;
  if (!have_base_) {
    // No header (damaged file): the chunk's time base is the earliest time we can know.
    base_ns_ = chunk.time_base_ns();
    have_base_ = true;
  }
  if (launches_file_ != file_index) {
    launches_.Clear();
    launches_file_ = file_index;
  }
  for (const ThreadInfo& t : chunk.threads()) p.thread_names[t.thread_id()] = t.name();
  for (const MetricConfig& c : chunk.metric_configs()) {
    p.metric_names[c.id()].assign(c.metric_names().begin(), c.metric_names().end());
  }
  // Thread names can arrive after a thread's first event: a later M event renames it.
  for (const ThreadInfo& t : chunk.threads()) {
    if (p.threads_named.count(t.thread_id()) != 0) {
      Meta("thread_name", p.pid, t.thread_id(), "name", ThreadLabel(t.thread_id(), t.name()));
    }
  }
  layout_.LayOut(file_index, chunk, &gpu_, &cpu_, &metrics_);
  // Launch calls first: a GPU record gets an arrow only when its launch call is known.
  EmitCpuSlices(p, reader, chunk);
  EmitGpuWork(file_index, p, reader, chunk);
  EmitNvtxMarks(p, reader, chunk);
  layout_.LayOutProcessTracks(file_index, chunk, &sync_, &overhead_);
  EmitSyncs(p, chunk);
  EmitOverheads(p, reader, chunk);
  EmitMetricRanges(p, reader, chunk);
  EmitCaptureWindows(p, chunk);
  EmitPmSamples(p, chunk);
  j.Flush();
}

void ChromeExporter::EmitCaptureWindows(Process& p, const Chunk& chunk) {
  JsonWriter& j = *json_;
  for (const CaptureWindow& w : chunk.capture_windows()) {
    if (w.end_ns() < w.start_ns()) continue;
    const int64_t tid = ProcessTrackThread(p, kCaptureTid, "kp capture windows", 0);
    std::string name = std::string("capture #") + std::to_string(w.index()) + " (" +
                       CaptureTriggerText(w.trigger()) + ")";
    BeginComplete(R"("ph":"X","cat":"kp_capture")", name, p.pid, tid, w.start_ns(), w.end_ns());
    j.KeyPlain("args");
    j.BeginObject();
    j.KeyPlain("range");
    j.String(w.range());
    j.KeyPlain("first_step");
    j.UInt(w.first_step());
    j.KeyPlain("last_step");
    j.UInt(w.last_step());
    j.KeyPlain("end_reason");
    j.String(w.end_reason());
    j.EndObject();
    j.EndObject();
  }
}

void ChromeExporter::EmitGpuWork(int file_index, Process& p, TraceReader& reader,
                                 const Chunk& chunk) {
  (void)file_index;
  JsonWriter& j = *json_;
  JsonArgs args{j};
  std::string internal_name;
  const RecordPrefetcher prefetch(chunk);
  for (size_t i = 0; i < gpu_.size(); ++i) {
    prefetch.Ahead(gpu_, i);
    const LaidOutSlice& s = gpu_[i];
    const int64_t tid = GpuThread(p, reader, s.track, s.lane);
    if (s.kind == SliceKind::kKernel) {
      const Kernel& k = chunk.kernels(s.index);
      const KernelShape* shape = reader.Shape(k.shape());
      const uint32_t sid =
          shape != nullptr ? (shape->demangled() != 0 ? shape->demangled() : shape->name()) : 0;
      const std::string_view head =
          shape != nullptr && (k.flags() & RECORD_FLAG_PROFILER_INTERNAL) == 0
              ? CachedHead(p, reader, p.kernel_heads, k.shape(), kCatKernel, sid)
              : std::string_view();
      if (!head.empty()) {
        BeginCompleteWithHead(head, p.pid, tid, s.start, s.end);
      } else {
        std::string_view name =
            shape != nullptr ? reader.Str(sid) : std::string_view("<unknown kernel>");
        bool plain = shape != nullptr && NamePlain(p, reader, sid);
        if ((k.flags() & RECORD_FLAG_PROFILER_INTERNAL) != 0) {
          internal_name.assign("[kp profiler] ").append(name);  // rare: no allocation per kernel
          name = internal_name;
        }
        BeginComplete(kCatKernel, name, p.pid, tid, s.start, s.end, plain);
      }
      if (launches_.Contains(k.correlation())) BindFlow(false, p.ids.FlowId(k.correlation()));
      j.KeyPlain("args");
      j.BeginObject();
      if (shape != nullptr) j.PlainMembers(ShapeMembers(p, reader, k.shape(), *shape));
      // KernelLaunchArgs, with the placement members kept from the kernel before.
      args.UInt(kArgCorrelation, k.correlation());
      j.PlainMembers(PlacementMembers(k.stream(), k.device(), k.context()));
      GraphArgs(k.graph_id(), k.graph_node_id(), args);
      j.EndObject();
      j.EndObject();
    } else if (s.kind == SliceKind::kMemcpy) {
      const Memcpy& m = chunk.memcpys(s.index);
      BeginComplete(kCatMemcpy, MemcpyName(m.copy_kind()), p.pid, tid, s.start, s.end, true);
      if (launches_.Contains(m.correlation())) BindFlow(false, p.ids.FlowId(m.correlation()));
      j.KeyPlain("args");
      j.BeginObject();
      MemcpyArgs(m, args);
      j.EndObject();
      j.EndObject();
    } else {
      const Memset& m = chunk.memsets(s.index);
      BeginComplete(kCatMemset, "Memset", p.pid, tid, s.start, s.end, true);
      if (launches_.Contains(m.correlation())) BindFlow(false, p.ids.FlowId(m.correlation()));
      j.KeyPlain("args");
      j.BeginObject();
      MemsetArgs(m, args);
      j.EndObject();
      j.EndObject();
    }
    j.Flush();
  }
}

void ChromeExporter::EmitCpuSlices(Process& p, TraceReader& reader, const Chunk& chunk) {
  JsonWriter& j = *json_;
  JsonArgs args{j};
  const RecordPrefetcher prefetch(chunk);
  for (size_t i = 0; i < cpu_.size(); ++i) {
    prefetch.Ahead(cpu_, i);
    const LaidOutSlice& s = cpu_[i];
    uint32_t tid = static_cast<uint32_t>(s.track);
    NameThread(p, tid);
    if (s.kind == SliceKind::kApi) {
      const ApiCall& a = chunk.api_calls(s.index);
      std::string_view name = reader.Str(a.name());
      bool flow;
      if (a.name() < (1u << 24)) {
        if (a.name() >= p.api_flow.size()) p.api_flow.resize(a.name() + 1, 0);
        if (p.api_flow[a.name()] == 0) p.api_flow[a.name()] = ApiStartsGpuWork(name) ? 1 : 2;
        flow = p.api_flow[a.name()] == 1;
      } else {
        flow = ApiStartsGpuWork(name);
      }
      const bool driver = a.domain() == API_DRIVER;
      const std::string_view head =
          CachedHead(p, reader, driver ? p.driver_heads : p.runtime_heads, a.name(),
                     driver ? kCatDriver : kCatRuntime, a.name());
      if (!head.empty()) {
        BeginCompleteWithHead(head, p.pid, tid, s.start, s.end);
      } else {
        BeginComplete(driver ? kCatDriver : kCatRuntime, name, p.pid, tid, s.start, s.end,
                      NamePlain(p, reader, a.name()));
      }
      if (a.correlation() != 0 && flow) {
        launches_.Add(a.correlation());
        BindFlow(true, p.ids.FlowId(a.correlation()));
      }
      j.KeyPlain("args");
      j.BeginObject();
      ApiArgs(a, args);
      j.EndObject();
      j.EndObject();
    } else {
      const NvtxRange& r = chunk.nvtx_ranges(s.index);
      if ((r.flags() & RECORD_FLAG_OPEN) != 0) {
        BeginComplete(kCatNvtx, std::string(reader.Str(r.name())) + std::string(kOpenRangeSuffix),
                      p.pid, tid, s.start, s.end);
      } else if (const std::string_view head =
                     CachedHead(p, reader, p.nvtx_heads, r.name(), kCatNvtx, r.name());
                 !head.empty()) {
        BeginCompleteWithHead(head, p.pid, tid, s.start, s.end);
      } else {
        BeginComplete(kCatNvtx, reader.Str(r.name()), p.pid, tid, s.start, s.end,
                      NamePlain(p, reader, r.name()));
      }
      j.KeyPlain("args");
      j.BeginObject();
      NvtxRangeArgs(r, reader.Str(r.domain()), args);
      j.EndObject();
      j.EndObject();
    }
    j.Flush();
  }
}

void ChromeExporter::EmitNvtxMarks(Process& p, TraceReader& reader, const Chunk& chunk) {
  JsonWriter& j = *json_;
  JsonArgs args{j};
  for (const NvtxMark& m : chunk.nvtx_marks()) {
    NameThread(p, m.thread_id());
    j.BeginObject();
    j.KeyPlain("ph");
    j.String("i");
    j.KeyPlain("s");
    j.String("t");
    j.KeyPlain("cat");
    j.String("nvtx");
    j.KeyPlain("name");
    j.String(reader.Str(m.name()));
    j.KeyPlain("pid");
    j.Int(p.pid);
    j.KeyPlain("tid");
    j.UInt(m.thread_id());
    j.KeyPlain("ts");
    j.MicrosFromNs(Rel(static_cast<uint64_t>(m.time())));
    j.KeyPlain("args");
    j.BeginObject();
    NvtxMarkArgs(m, reader.Str(m.domain()), args);
    j.EndObject();
    j.EndObject();
  }
}

void ChromeExporter::EmitSyncs(Process& p, const Chunk& chunk) {
  JsonWriter& j = *json_;
  JsonArgs args{j};
  for (const LaidOutSlice& s : sync_) {
    const Synchronization& y = chunk.syncs(s.index);
    const int64_t tid = ProcessTrackThread(p, kSyncTid, "CUDA sync", s.lane);
    BeginComplete(kCatSync, SyncTypeLabel(y.type()), p.pid, tid, s.start, s.end);
    j.KeyPlain("args");
    j.BeginObject();
    SyncArgs(y, args);
    j.EndObject();
    j.EndObject();
  }
}

void ChromeExporter::EmitOverheads(Process& p, TraceReader& reader, const Chunk& chunk) {
  JsonWriter& j = *json_;
  JsonArgs args{j};
  for (const LaidOutSlice& s : overhead_) {
    const Overhead& o = chunk.overheads(s.index);
    const int64_t tid = ProcessTrackThread(p, kOverheadTid, "CUPTI overhead", s.lane);
    BeginComplete(kCatOverhead, OverheadLabel(reader.Str(o.name()), o.kind()), p.pid, tid, s.start,
                  s.end);
    j.KeyPlain("args");
    j.BeginObject();
    OverheadArgs(o, args);
    j.EndObject();
    j.EndObject();
  }
}

void ChromeExporter::EmitMetricRanges(Process& p, TraceReader& reader, const Chunk& chunk) {
  JsonWriter& j = *json_;
  JsonArgs args{j};
  for (const LaidOutSlice& s : metrics_) {
    const MetricRange& m = chunk.metric_ranges(s.index);
    const int64_t tid = ProcessTrackThread(p, kMetricsTid, "metrics", 0);
    auto cfg = p.metric_names.find(m.config());
    auto metric_name = [&](int i) {
      return cfg != p.metric_names.end() && i < static_cast<int>(cfg->second.size())
                 ? cfg->second[i]
                 : "metric " + std::to_string(i);
    };
    BeginComplete(kCatMetrics, reader.Str(m.name()), p.pid, tid, s.start, s.end);
    j.KeyPlain("args");
    j.BeginObject();
    MetricRangeArgs(m, reader.Str(m.domain()), args);
    for (int i = 0; i < m.values_size(); ++i) {
      j.Key(metric_name(i));
      j.Double(m.values(i));
    }
    j.EndObject();
    j.EndObject();
    for (int i = 0; i < m.values_size(); ++i) {
      if (!std::isfinite(m.values(i))) continue;
      j.BeginObject();
      j.KeyPlain("ph");
      j.String("C");
      j.KeyPlain("name");
      j.String(metric_name(i));
      j.KeyPlain("pid");
      j.Int(p.pid);
      j.KeyPlain("tid");
      j.Int(0);
      j.KeyPlain("ts");
      j.MicrosFromNs(Rel(s.start));
      j.KeyPlain("args");
      j.BeginObject();
      j.KeyPlain("value");
      j.Double(m.values(i));
      j.EndObject();
      j.EndObject();
    }
  }
}

// PM samples: a counter event ("ph":"C") per sample and counter, named after the GPU and the
// counter so each GPU's counters chart apart (byte counters as rates, common/pm_counters.h).
void ChromeExporter::EmitPmSamples(Process& p, const Chunk& chunk) {
  for (const PmSampleConfig& c : chunk.pm_sample_configs()) {
    p.pm_counter_names[c.id()].assign(c.counter_names().begin(), c.counter_names().end());
  }
  JsonWriter& j = *json_;
  static const std::vector<std::string> kNone;
  std::vector<std::string> labels;
  uint32_t labels_config = 0, labels_device = ~0u;
  for (const PmSample& s : chunk.pm_samples()) {
    auto cfg = p.pm_counter_names.find(s.config());
    const std::vector<std::string>& names = cfg == p.pm_counter_names.end() ? kNone : cfg->second;
    if (s.config() != labels_config || s.device() != labels_device) {
      labels_config = s.config();
      labels_device = s.device();
      labels.clear();
      for (const std::string& n : names) {
        labels.push_back("GPU " + std::to_string(s.device()) + " " + PmCounterLabel(n));
      }
    }
    const uint64_t duration = s.duration() > 0 ? static_cast<uint64_t>(s.duration()) : 0;
    for (int i = 0; i < s.values_size() && i < static_cast<int>(labels.size()); ++i) {
      if (!std::isfinite(s.values(i))) continue;
      j.BeginObject();
      j.KeyPlain("ph");
      j.String("C");
      j.KeyPlain("name");
      j.String(labels[i]);
      j.KeyPlain("cat");
      j.String("pm_sampling");
      j.KeyPlain("pid");
      j.Int(p.pid);
      j.KeyPlain("ts");
      j.MicrosFromNs(Rel(static_cast<uint64_t>(s.start())));
      j.KeyPlain("args");
      j.BeginObject();
      j.KeyPlain("value");
      j.Double(PmCounterShownValue(names[i], s.values(i), duration));
      j.EndObject();
      j.EndObject();
    }
  }
}

Status ChromeExporter::End() {
  JsonWriter& j = *json_;
  j.EndArray();
  // The headers of every input, so the JSON says where it came from.
  j.KeyPlain("kp");
  j.BeginObject();
  j.KeyPlain("time_base_ns");
  j.UInt(base_ns_);
  j.KeyPlain("files");
  j.BeginArray();
  for (const auto& p : processes_) {
    if (p == nullptr) continue;
    j.BeginObject();
    j.KeyPlain("path");
    j.String(p->path);
    j.KeyPlain("pid");
    j.Int(p->pid);
    if (p->have_header) {
      const Header& h = p->header;
      j.KeyPlain("kp_version");
      j.String(h.kp_version());
      j.KeyPlain("hostname");
      j.String(h.hostname());
      j.KeyPlain("original_pid");
      j.UInt(h.pid());
      j.KeyPlain("command_line");
      j.BeginArray();
      for (const std::string& a : h.command_line()) j.String(a);
      j.EndArray();
      j.KeyPlain("rank");
      j.Int(h.rank());
      j.KeyPlain("start_time_unix_ns");
      j.UInt(h.start_time_unix_ns());
      j.KeyPlain("start_time_trace_ns");
      j.UInt(h.start_time_trace_ns());
      j.KeyPlain("clock");
      j.String(h.clock());
      j.KeyPlain("driver_version");
      j.String(h.driver_version());
      j.KeyPlain("cuda_driver_version");
      j.Int(h.cuda_driver_version());
      j.KeyPlain("injection_mode");
      j.String(h.injection_mode());
      j.KeyPlain("config");
      j.BeginObject();
      for (const KeyValue& kv : h.config()) {
        j.Key(kv.key());
        j.String(kv.value());
      }
      j.EndObject();
    }
    j.EndObject();
  }
  j.EndArray();
  j.KeyPlain("anomalies");
  j.BeginArray();
  for (const std::string& line : layout_.anomalies().Describe()) j.String(line);
  j.EndArray();
  j.EndObject();
  j.EndObject();
  j.Newline();
  bool ok = j.Flush(true);
  if (std::fclose(out_) != 0) ok = false;
  out_ = nullptr;
  for (const std::string& line : layout_.anomalies().Describe()) {
    std::fprintf(stderr, "kptrace convert: chrome: %s\n", line.c_str());
  }
  if (!ok) return Status::Error("error writing '" + options_.output + "': " + std::strerror(errno));
  return Status();
}

std::unique_ptr<Exporter> MakeChromeExporter(const ExportOptions& options) {
  return std::make_unique<ChromeExporter>(options);
}

}  // namespace kp
