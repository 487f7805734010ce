#include "tools/export/chrome_exporter.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "tools/export/nvtx_payload_text.h"

namespace kp {

// ---------------------------------------------------------------------------------------------
// JsonWriter

namespace {

// True if none of the 8 bytes at p needs escaping: no control character, no '"', no '\\' and
// no byte >= 0x80 (SWAR: one test per word instead of four per byte).
inline bool PlainAscii8(const unsigned char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  const uint64_t below_space = x - kOnes * 0x20;
  const uint64_t quote = (x ^ (kOnes * '"')) - kOnes;
  const uint64_t backslash = (x ^ (kOnes * '\\')) - kOnes;
  // A byte >= 0x80 sets its high bit in x; otherwise a high bit in one of the differences
  // marks a byte < 0x20, == '"' or == '\\' (all bytes < 0x80, so no false borrows).
  return ((x | ((below_space | quote | backslash) & ~x)) & kHigh) == 0;
}

}  // namespace

void JsonWriter::Separator() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) buf_.Put(',');
    first_.back() = false;
  }
}

void JsonWriter::BeginObject() {
  Separator();
  buf_.Put('{');
  first_.push_back(true);
}
void JsonWriter::EndObject() {
  buf_.Put('}');
  first_.pop_back();
}
void JsonWriter::BeginArray() {
  Separator();
  buf_.Put('[');
  first_.push_back(true);
}
void JsonWriter::EndArray() {
  buf_.Put(']');
  first_.pop_back();
}

void JsonWriter::Key(std::string_view key) {
  String(key);
  buf_.Put(':');
  after_key_ = true;
}

void JsonWriter::String(std::string_view s) {
  Separator();
  static const char kHex[] = "0123456789abcdef";
  buf_.Put('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (p < end) {
    unsigned char c = *p;
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      // Copy the run of plain ASCII in one go, finding its end 8 bytes at a time.
      const unsigned char* run = p;
      while (end - p >= 8 && PlainAscii8(p)) p += 8;
      while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') ++p;
      buf_.Append(reinterpret_cast<const char*>(run), p - run);
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '"':
          buf_.Append("\\\"");
          break;
        case '\\':
          buf_.Append("\\\\");
          break;
        case '\n':
          buf_.Append("\\n");
          break;
        case '\r':
          buf_.Append("\\r");
          break;
        case '\t':
          buf_.Append("\\t");
          break;
        case '\b':
          buf_.Append("\\b");
          break;
        case '\f':
          buf_.Append("\\f");
          break;
        default: {
          char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
          buf_.Append(esc, 6);
        }
      }
      ++p;
      continue;
    }
    // UTF-8 sequence: validate (no overlongs, no surrogates, <= U+10FFFF), else U+FFFD.
    int len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    }
    bool valid = len != 0 && end - p >= len;
    for (int i = 1; valid && i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (valid) {
      if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
          (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        valid = false;
      }
    }
    if (valid) {
      buf_.Append(reinterpret_cast<const char*>(p), len);
      p += len;
    } else {
      buf_.Append("\xEF\xBF\xBD");
      ++p;  // resynchronise on the next byte
    }
  }
  buf_.Put('"');
}

void JsonWriter::Digits(uint64_t v) {
  buf_.Reserve(20);
  char* p = buf_.Tail();
  buf_.Advance(static_cast<size_t>(WriteDecimal(p, v) - p));
}

void JsonWriter::UInt(uint64_t v) {
  Separator();
  Digits(v);
}

void JsonWriter::Int(int64_t v) {
  Separator();
  if (v < 0) {
    buf_.Put('-');
    Digits(0 - static_cast<uint64_t>(v));
  } else {
    Digits(static_cast<uint64_t>(v));
  }
}

void JsonWriter::Double(double v) {
  Separator();
  if (!std::isfinite(v)) {
    buf_.Append("null");  // JSON has no NaN/Inf
    return;
  }
  // printf's "%.*g" with the least precision (at least 6) that reads back exactly. The shortest
  // round-trip digit count comes from to_chars; to_chars with a precision is printf's %g.
  char tmp[48];
  auto shortest = std::to_chars(tmp, tmp + sizeof(tmp), v, std::chars_format::scientific);
  int digits = 0;
  for (const char* c = tmp; c < shortest.ptr && *c != 'e'; ++c) digits += (*c >= '0' && *c <= '9');
  auto r =
      std::to_chars(tmp, tmp + sizeof(tmp), v, std::chars_format::general, std::max(digits, 6));
  buf_.Append(tmp, static_cast<size_t>(r.ptr - tmp));
}

void JsonWriter::Bool(bool v) {
  Separator();
  buf_.Append(v ? "true" : "false");
}

void JsonWriter::MicrosFromNs(int64_t ns) {
  Separator();
  uint64_t a = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) buf_.Put('-');
  Digits(a / 1000);
  uint32_t frac = static_cast<uint32_t>(a % 1000);
  char f[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
               static_cast<char>('0' + frac % 10)};
  buf_.Append(f, 4);
}

bool JsonWriter::Flush(bool force) {
  if (!force && buf_.size() < (4u << 20)) return !failed_;
  if (!failed_ && out_ != nullptr && !buf_.WriteTo(out_)) failed_ = true;
  buf_.clear();
  return !failed_;
}

// ---------------------------------------------------------------------------------------------
// ChromeExporter

namespace {

// GPU "processes" get pids above the Linux pid range (2^22) and above synthetic CPU pids.
constexpr int32_t kGpuPidBase = 1 << 30;
// The per-process "metrics" thread.
constexpr int64_t kMetricsTid = 0x7fffffff;
// The per-process "CUDA sync" and "CUPTI overhead" threads (TimelineLayout::LayOutProcessTracks
// says why these records get tracks of their own).
constexpr int64_t kSyncTid = 0x7ffffffe;
constexpr int64_t kOverheadTid = 0x7ffffffd;

std::string ProcessLabel(const Header* header) {
  if (header == nullptr || header->command_line_size() == 0) return "unknown process";
  std::string name = header->command_line(0);
  size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  for (int i = 1; i < header->command_line_size(); ++i) name += " " + header->command_line(i);
  if (name.size() > 160) name = name.substr(0, 157) + "...";
  return name;
}

void PayloadArg(JsonWriter& j, const NvtxPayload& p) {
  if (p.value_case() == NvtxPayload::VALUE_NOT_SET) return;
  j.Key("payload");
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

bool ChromeExporter::Begin(std::string* err) {
  out_ = std::fopen(options_.output.c_str(), "wb");
  if (out_ == nullptr) {
    *err = "cannot write '" + options_.output + "': " + std::strerror(errno);
    return false;
  }
  json_ = std::make_unique<JsonWriter>(out_);
  json_->BeginObject();
  json_->Key("displayTimeUnit");
  json_->String("ns");
  json_->Key("traceEvents");
  json_->BeginArray();
  return true;
}

void ChromeExporter::Meta(const char* name, int32_t pid, int64_t tid, std::string_view key,
                          std::string_view value) {
  JsonWriter& j = *json_;
  j.BeginObject();
  j.Key("ph");
  j.String("M");
  j.Key("name");
  j.String(name);
  j.Key("pid");
  j.Int(pid);
  j.Key("tid");
  j.Int(tid);
  j.Key("args");
  j.BeginObject();
  j.Key(key);
  j.String(value);
  j.EndObject();
  j.EndObject();
}

void ChromeExporter::SortIndex(int32_t pid, int64_t index) {
  JsonWriter& j = *json_;
  j.BeginObject();
  j.Key("ph");
  j.String("M");
  j.Key("name");
  j.String("process_sort_index");
  j.Key("pid");
  j.Int(pid);
  j.Key("tid");
  j.Int(0);
  j.Key("args");
  j.BeginObject();
  j.Key("sort_index");
  j.Int(index);
  j.EndObject();
  j.EndObject();
}

int32_t ChromeExporter::GpuPid(int file_index, uint32_t device) const {
  return kGpuPidBase + file_index * 256 + static_cast<int32_t>(device & 0xff);
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
  p->path = reader.path();
  uint32_t pid = header != nullptr ? header->pid() : 0;
  if (pid == 0) pid = 100000 + static_cast<uint32_t>(file_index);
  int seen = pids_used_[pid]++;
  p->pid =
      static_cast<int32_t>(seen == 0 ? pid : pid + (static_cast<uint32_t>(file_index + 1) << 22));
  p->name = ProcessLabel(header);
  Meta("process_name", p->pid, 0, "name", p->name);
  SortIndex(p->pid, file_index * 512);
  processes_[file_index] = std::move(p);
  return *processes_[file_index];
}

void ChromeExporter::BeginFile(int file_index, TraceReader& reader) {
  ProcessFor(file_index, reader);
}

void ChromeExporter::AddChunk(int file_index, TraceReader& reader, const Chunk& chunk) {
  Process& p = ProcessFor(file_index, reader);
  JsonWriter& j = *json_;
  if (!have_base_) {
    // No header (damaged file): the chunk's time base is the earliest time we can know.
    base_ns_ = chunk.time_base_ns();
    have_base_ = true;
  }
  for (const ThreadInfo& t : chunk.threads()) p.thread_names[t.thread_id()] = t.name();
  for (const MetricConfig& c : chunk.metric_configs()) {
    p.metric_names[c.id()].assign(c.metric_names().begin(), c.metric_names().end());
  }
  // Thread names can arrive after a thread's first event: a later M event renames it.
  for (const ThreadInfo& t : chunk.threads()) {
    if (p.threads_named.count(t.thread_id()) != 0) {
      Meta("thread_name", p.pid, t.thread_id(), "name", t.name());
    }
  }
  auto name_thread = [&](uint32_t tid) {
    if (p.threads_named.insert(tid).second) {
      auto it = p.thread_names.find(tid);
      Meta("thread_name", p.pid, tid, "name",
           it != p.thread_names.end() ? it->second : "thread " + std::to_string(tid));
    }
  };
  auto name_stream = [&](uint32_t device, uint32_t stream) {
    int32_t gpid = GpuPid(file_index, device);
    if (p.gpus_named.insert(device).second) {
      std::string dev_name = "GPU";
      for (const Device& d : reader.devices()) {
        if (d.id() == device) dev_name = d.name();
      }
      Meta("process_name", gpid, 0, "name",
           "GPU " + std::to_string(device) + ": " + dev_name + " (pid " + std::to_string(p.pid) +
               ")");
      SortIndex(gpid, file_index * 512 + 1 + device);
    }
    if (p.streams_named.insert((static_cast<uint64_t>(device) << 32) | stream).second) {
      Meta("thread_name", gpid, stream, "name", "stream " + std::to_string(stream));
      j.BeginObject();
      j.Key("ph");
      j.String("M");
      j.Key("name");
      j.String("thread_sort_index");
      j.Key("pid");
      j.Int(gpid);
      j.Key("tid");
      j.UInt(stream);
      j.Key("args");
      j.BeginObject();
      j.Key("sort_index");
      j.UInt(stream);
      j.EndObject();
      j.EndObject();
    }
    return gpid;
  };
  auto begin_x = [&](const char* cat, std::string_view name, int32_t pid, int64_t tid,
                     uint64_t start, uint64_t end) {
    j.BeginObject();
    j.Key("ph");
    j.String("X");
    j.Key("cat");
    j.String(cat);
    j.Key("name");
    j.String(name);
    j.Key("pid");
    j.Int(pid);
    j.Key("tid");
    j.Int(tid);
    j.Key("ts");
    j.MicrosFromNs(Rel(start));
    j.Key("dur");
    j.MicrosFromNs(static_cast<int64_t>(end - start));
    // caller writes "args" and closes the object
  };
  auto flow = [&](const char* ph, uint64_t id, int32_t pid, int64_t tid, uint64_t ts) {
    j.BeginObject();
    j.Key("ph");
    j.String(ph);
    j.Key("cat");
    j.String("ac2g");
    j.Key("name");
    j.String("ac2g");
    j.Key("id");
    j.UInt(id);
    j.Key("pid");
    j.Int(pid);
    j.Key("tid");
    j.Int(tid);
    j.Key("ts");
    j.MicrosFromNs(Rel(ts));
    if (ph[0] == 'f') {
      j.Key("bp");
      j.String("e");
    }
    j.EndObject();
  };

  layout_.LayOut(file_index, chunk, &gpu_, &cpu_, &metrics_);

  std::string internal_name;
  for (const LaidOutSlice& s : gpu_) {
    uint32_t device = static_cast<uint32_t>(s.track >> 32);
    uint32_t stream = static_cast<uint32_t>(s.track);
    int32_t gpid = name_stream(device, stream);
    uint64_t correlation = 0;
    if (s.kind == SliceKind::kKernel) {
      const Kernel& k = chunk.kernels(s.index);
      const KernelShape* shape = reader.Shape(k.shape());
      std::string_view name =
          shape != nullptr
              ? reader.Str(shape->demangled() != 0 ? shape->demangled() : shape->name())
              : std::string_view("<unknown kernel>");
      if ((k.flags() & RECORD_FLAG_PROFILER_INTERNAL) != 0) {
        internal_name.assign("[kp profiler] ").append(name);  // rare: no allocation per kernel
        name = internal_name;
      }
      begin_x("kernel", name, gpid, stream, s.start, s.end);
      j.Key("args");
      j.BeginObject();
      if (shape != nullptr) {
        j.Key("grid");
        j.String(Dim3(shape->grid_x(), shape->grid_y(), shape->grid_z()));
        j.Key("block");
        j.String(Dim3(shape->block_x(), shape->block_y(), shape->block_z()));
        j.Key("cluster");
        j.String(Dim3(shape->cluster_x(), shape->cluster_y(), shape->cluster_z()));
        j.Key("registers per thread");
        j.UInt(shape->registers_per_thread());
        j.Key("static shared memory (bytes)");
        j.UInt(shape->static_shared_bytes());
        j.Key("dynamic shared memory (bytes)");
        j.UInt(shape->dynamic_shared_bytes());
        j.Key("mangled name");
        j.String(reader.Str(shape->name()));
      }
      j.Key("correlation");
      j.UInt(k.correlation());
      j.Key("stream");
      j.UInt(k.stream());
      j.Key("device");
      j.UInt(k.device());
      j.Key("context");
      j.UInt(k.context());
      if (k.graph_id() != 0) {
        j.Key("graph id");
        j.UInt(k.graph_id());
        j.Key("graph node id");
        j.UInt(k.graph_node_id());
      }
      j.EndObject();
      j.EndObject();
      correlation = k.correlation();
    } else if (s.kind == SliceKind::kMemcpy) {
      const Memcpy& m = chunk.memcpys(s.index);
      begin_x("gpu_memcpy", std::string("Memcpy ") + CopyKindName(m.copy_kind()), gpid, stream,
              s.start, s.end);
      j.Key("args");
      j.BeginObject();
      j.Key("kind");
      j.String(CopyKindName(m.copy_kind()));
      j.Key("bytes");
      j.UInt(m.bytes());
      j.Key("bandwidth (GB/s)");
      j.Double(BandwidthGBs(m.bytes(), static_cast<uint64_t>(m.start()),
                            static_cast<uint64_t>(m.start()) +
                                static_cast<uint64_t>(std::max<int64_t>(m.duration(), 0))));
      j.Key("src memory");
      j.String(MemoryKindName(m.src_kind()));
      j.Key("dst memory");
      j.String(MemoryKindName(m.dst_kind()));
      j.Key("correlation");
      j.UInt(m.correlation());
      j.Key("stream");
      j.UInt(m.stream());
      j.Key("device");
      j.UInt(m.device());
      if (m.peer()) {
        j.Key("src device");
        j.UInt(m.src_device());
        j.Key("dst device");
        j.UInt(m.dst_device());
      }
      if (m.graph_id() != 0) {
        j.Key("graph id");
        j.UInt(m.graph_id());
        j.Key("graph node id");
        j.UInt(m.graph_node_id());
      }
      j.EndObject();
      j.EndObject();
      correlation = m.correlation();
    } else {
      const Memset& m = chunk.memsets(s.index);
      begin_x("gpu_memset", "Memset", gpid, stream, s.start, s.end);
      j.Key("args");
      j.BeginObject();
      j.Key("bytes");
      j.UInt(m.bytes());
      j.Key("value");
      j.UInt(m.value());
      j.Key("memory kind");
      j.String(MemoryKindName(m.memory_kind()));
      j.Key("correlation");
      j.UInt(m.correlation());
      j.Key("stream");
      j.UInt(m.stream());
      j.Key("device");
      j.UInt(m.device());
      if (m.graph_id() != 0) {
        j.Key("graph id");
        j.UInt(m.graph_id());
        j.Key("graph node id");
        j.UInt(m.graph_node_id());
      }
      j.EndObject();
      j.EndObject();
      correlation = m.correlation();
    }
    if (correlation != 0) flow("f", LaunchFlowId(file_index, correlation), gpid, stream, s.start);
    j.Flush();
  }

  for (const LaidOutSlice& s : cpu_) {
    uint32_t tid = static_cast<uint32_t>(s.track);
    name_thread(tid);
    if (s.kind == SliceKind::kApi) {
      const ApiCall& a = chunk.api_calls(s.index);
      std::string_view name = reader.Str(a.name());
      begin_x(a.domain() == API_DRIVER ? "cuda_driver" : "cuda_runtime", name, p.pid, tid, s.start,
              s.end);
      j.Key("args");
      j.BeginObject();
      j.Key("correlation");
      j.UInt(a.correlation());
      j.Key("return value");
      j.Int(a.return_value());
      j.EndObject();
      j.EndObject();
      if (a.correlation() != 0 && ApiStartsGpuWork(name)) {
        flow("s", LaunchFlowId(file_index, a.correlation()), p.pid, tid, s.start);
      }
    } else {
      const NvtxRange& r = chunk.nvtx_ranges(s.index);
      begin_x("nvtx", reader.Str(r.name()), p.pid, tid, s.start, s.end);
      j.Key("args");
      j.BeginObject();
      if (r.domain() != 0) {
        j.Key("domain");
        j.String(reader.Str(r.domain()));
      }
      if (r.category() != 0) {
        j.Key("category");
        j.UInt(r.category());
      }
      if (r.has_payload()) PayloadArg(j, r.payload());
      if (r.end_thread_id() != 0 && r.end_thread_id() != r.thread_id()) {
        j.Key("end thread");
        j.UInt(r.end_thread_id());
      }
      j.EndObject();
      j.EndObject();
    }
    j.Flush();
  }

  for (const NvtxMark& m : chunk.nvtx_marks()) {
    name_thread(m.thread_id());
    j.BeginObject();
    j.Key("ph");
    j.String("i");
    j.Key("s");
    j.String("t");
    j.Key("cat");
    j.String("nvtx");
    j.Key("name");
    j.String(reader.Str(m.name()));
    j.Key("pid");
    j.Int(p.pid);
    j.Key("tid");
    j.UInt(m.thread_id());
    j.Key("ts");
    j.MicrosFromNs(Rel(static_cast<uint64_t>(m.time())));
    j.Key("args");
    j.BeginObject();
    if (m.domain() != 0) {
      j.Key("domain");
      j.String(reader.Str(m.domain()));
    }
    if (m.has_payload()) PayloadArg(j, m.payload());
    j.EndObject();
    j.EndObject();
  }

  layout_.LayOutProcessTracks(file_index, chunk, &sync_, &overhead_);
  for (const LaidOutSlice& s : sync_) {
    const Synchronization& y = chunk.syncs(s.index);
    if (!p.sync_thread_named) {
      p.sync_thread_named = true;
      Meta("thread_name", p.pid, kSyncTid, "name", "CUDA sync");
    }
    begin_x("cuda_sync", SyncTypeLabel(y.type()), p.pid, kSyncTid, s.start, s.end);
    j.Key("args");
    j.BeginObject();
    j.Key("stream");
    j.UInt(y.stream());
    j.Key("context");
    j.UInt(y.context());
    j.Key("correlation");
    j.UInt(y.correlation());
    if (y.event_id() != 0) {
      j.Key("event id");
      j.UInt(y.event_id());
    }
    j.Key("return value");
    j.Int(y.return_value());
    j.EndObject();
    j.EndObject();
  }
  for (const LaidOutSlice& s : overhead_) {
    const Overhead& o = chunk.overheads(s.index);
    if (!p.overhead_thread_named) {
      p.overhead_thread_named = true;
      Meta("thread_name", p.pid, kOverheadTid, "name", "CUPTI overhead");
    }
    begin_x("cupti_overhead", OverheadLabel(reader.Str(o.name()), o.kind()), p.pid, kOverheadTid,
            s.start, s.end);
    j.Key("args");
    j.BeginObject();
    j.Key("kind");
    j.UInt(o.kind());
    if (o.thread_id() != 0) {
      j.Key("thread");
      j.UInt(o.thread_id());
    }
    j.Key("device");
    j.UInt(o.device());
    j.Key("correlation");
    j.UInt(o.correlation());
    j.EndObject();
    j.EndObject();
  }

  for (const LaidOutSlice& s : metrics_) {
    const MetricRange& m = chunk.metric_ranges(s.index);
    if (!p.metrics_thread_named) {
      p.metrics_thread_named = true;
      Meta("thread_name", p.pid, kMetricsTid, "name", "metrics");
    }
    auto cfg = p.metric_names.find(m.config());
    auto metric_name = [&](int i) {
      return cfg != p.metric_names.end() && i < static_cast<int>(cfg->second.size())
                 ? cfg->second[i]
                 : "metric " + std::to_string(i);
    };
    begin_x("kp_metrics", reader.Str(m.name()), p.pid, kMetricsTid, s.start, s.end);
    j.Key("args");
    j.BeginObject();
    if (m.domain() != 0) {
      j.Key("domain");
      j.String(reader.Str(m.domain()));
    }
    j.Key("occurrence");
    j.UInt(m.occurrence());
    j.Key("occurrences used");
    j.UInt(m.occurrences_used());
    if (m.sm_clock_khz() != 0) {
      j.Key("SM clock (kHz)");
      j.UInt(m.sm_clock_khz());
    }
    for (int i = 0; i < m.values_size(); ++i) {
      j.Key(metric_name(i));
      j.Double(m.values(i));
    }
    j.EndObject();
    j.EndObject();
    for (int i = 0; i < m.values_size(); ++i) {
      if (!std::isfinite(m.values(i))) continue;
      j.BeginObject();
      j.Key("ph");
      j.String("C");
      j.Key("name");
      j.String(metric_name(i));
      j.Key("pid");
      j.Int(p.pid);
      j.Key("tid");
      j.Int(0);
      j.Key("ts");
      j.MicrosFromNs(Rel(s.start));
      j.Key("args");
      j.BeginObject();
      j.Key("value");
      j.Double(m.values(i));
      j.EndObject();
      j.EndObject();
    }
  }
  j.Flush();
}

bool ChromeExporter::End(std::string* err) {
  JsonWriter& j = *json_;
  j.EndArray();
  // The headers of every input, so the JSON says where it came from.
  j.Key("kp");
  j.BeginObject();
  j.Key("time_base_ns");
  j.UInt(base_ns_);
  j.Key("files");
  j.BeginArray();
  for (const auto& p : processes_) {
    if (p == nullptr) continue;
    j.BeginObject();
    j.Key("path");
    j.String(p->path);
    j.Key("pid");
    j.Int(p->pid);
    if (p->have_header) {
      const Header& h = p->header;
      j.Key("kp_version");
      j.String(h.kp_version());
      j.Key("hostname");
      j.String(h.hostname());
      j.Key("original_pid");
      j.UInt(h.pid());
      j.Key("command_line");
      j.BeginArray();
      for (const std::string& a : h.command_line()) j.String(a);
      j.EndArray();
      j.Key("rank");
      j.Int(h.rank());
      j.Key("start_time_unix_ns");
      j.UInt(h.start_time_unix_ns());
      j.Key("start_time_trace_ns");
      j.UInt(h.start_time_trace_ns());
      j.Key("clock");
      j.String(h.clock());
      j.Key("driver_version");
      j.String(h.driver_version());
      j.Key("cuda_driver_version");
      j.Int(h.cuda_driver_version());
      j.Key("injection_mode");
      j.String(h.injection_mode());
      j.Key("config");
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
  j.Key("anomalies");
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
  if (!ok) {
    *err = "error writing '" + options_.output + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

std::unique_ptr<Exporter> MakeChromeExporter(const ExportOptions& options) {
  return std::make_unique<ChromeExporter>(options);
}

}  // namespace kp
