#include "tools/export/csv_exporter.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

#include "common/time_math.h"
#include "tools/export/nvtx_payload_text.h"
#include "tools/export/output_buffer.h"
#include "tools/export/pm_samples_csv.h"
#include "tools/export/record_naming.h"
#include "tools/export/shape_text_cache.h"
#include "tools/info/trace_info.h"
#include "tools/pc_stalls/pc_stall_table.h"

namespace kp {

void AppendCsvField(std::string* out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out->append(field);
    return;
  }
  out->push_back('"');
  for (char c : field) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

namespace {

constexpr size_t kFlushBytes = 1u << 20;
constexpr size_t kMaxApiNames = 1u << 16;
constexpr uint32_t kFlatApiIds = 1u << 20;  // string ids below this index a flat table

// One CSV file written through a large buffer; rows are built in place.
class CsvFile {
 public:
  Status Open(const std::string& path, const char* header) {
    path_ = path;
    f_ = std::fopen(path.c_str(), "wb");
    if (f_ == nullptr) return Status::Error(path + ": cannot create: " + std::strerror(errno));
    buf_.Reserve(kFlushBytes + 4096);
    buf_.clear();
    buf_.Append(header, std::strlen(header));
    buf_.Append("\r\n", 2);
    return Status();
  }
  ~CsvFile() {
    if (f_ != nullptr) std::fclose(f_);
  }
  void Str(std::string_view s) {
    Sep();
    AppendField(s);
  }
  // Integers are written straight into the buffer (a kernel row has two dozen of them).
  void U(uint64_t v) {
    buf_.Reserve(22);
    char* p = buf_.Tail();
    if (!first_) *p++ = ',';
    first_ = false;
    if (v < 10) {  // ids, flags and zeros: most of a row's integers
      *p = static_cast<char>('0' + v);
      buf_.Advance(static_cast<size_t>(p + 1 - buf_.Tail()));
      return;
    }
    buf_.Advance(static_cast<size_t>(digits_.Write(p, v) - buf_.Tail()));
  }
  void I(int64_t v) {
    buf_.Reserve(23);
    char* p = buf_.Tail();
    if (!first_) *p++ = ',';
    first_ = false;
    if (v < 0) *p++ = '-';
    const uint64_t a = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    buf_.Advance(static_cast<size_t>(digits_.Write(p, a) - buf_.Tail()));
  }
  // ns / 1e6 with six decimals, as Fixed(ms, 6) prints it: for |ns| < 1e15 the double nearest
  // to ns / 1e6 rounds back to exactly these digits, so the integer path gives the same text.
  void MillisFromNs(bool negative, uint64_t ns) {
    if (ns >= 1000000000000000ull) {
      Fixed(negative ? -static_cast<double>(ns) / 1e6 : static_cast<double>(ns) / 1e6, 6);
      return;
    }
    buf_.Reserve(32);
    char* p = buf_.Tail();
    if (!first_) *p++ = ',';
    first_ = false;
    if (negative && ns != 0) *p++ = '-';
    p = WriteDecimal(p, ns / 1000000);
    *p++ = '.';
    // Six digits: the eight-digit word less its two leading zeros, stored whole (reserved).
    const uint64_t frac = EightDigitsWord(static_cast<uint32_t>(ns % 1000000)) >> 16;
    std::memcpy(p, &frac, 8);
    buf_.Advance(static_cast<size_t>(p + 6 - buf_.Tail()));
  }
  // Shortest round-trip form; NaN (not collected) as an empty field.
  void D(double v) {
    Sep();
    if (v != v) return;
    char tmp[32];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.Append(tmp, static_cast<size_t>(r.ptr - tmp));
  }
  void Fixed(double v, int precision) {
    Sep();
    char tmp[48];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v, std::chars_format::fixed, precision);
    buf_.Append(tmp, static_cast<size_t>(r.ptr - tmp));
  }
  void Empty() { Sep(); }
  // Already-formatted CSV fields.
  void Raw(std::string_view fields) {
    Sep();
    buf_.Append(fields);
  }
  // The fields written so far (a CsvFile never opened builds a fragment for Raw).
  std::string_view Written() const { return buf_.view(); }
  void EndRow() {
    buf_.Append("\r\n", 2);
    first_ = true;
    if (buf_.size() >= kFlushBytes) Flush();
  }
  void Flush() {
    if (f_ != nullptr && !buf_.WriteTo(f_)) failed_ = true;
    buf_.clear();
  }
  Status Close() {
    Flush();
    if (f_ != nullptr && std::fclose(f_) != 0) failed_ = true;
    f_ = nullptr;
    return failed_ ? Status::Error(path_ + ": write failed (disk full?)") : Status();
  }

 private:
  void Sep() {
    if (!first_) buf_.Put(',');
    first_ = false;
  }
  // AppendCsvField into the buffer. Demangled kernel names are long and full of commas, so
  // both the test for quoting and the quoting itself go a word or a run at a time.
  void AppendField(std::string_view field) {
    if (!NeedsQuotes(field)) {
      buf_.Append(field);
      return;
    }
    buf_.Reserve(field.size() * 2 + 2);
    buf_.Put('"');
    const char* p = field.data();
    const char* end = p + field.size();
    while (p < end) {
      const char* q = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(end - p)));
      const char* stop = q != nullptr ? q + 1 : end;  // a quote is copied, then doubled
      buf_.Append(p, static_cast<size_t>(stop - p));
      if (q != nullptr) buf_.Put('"');
      p = stop;
    }
    buf_.Put('"');
  }
  static bool NeedsQuotes(std::string_view field) {
    const auto* p = reinterpret_cast<const unsigned char*>(field.data());
    const unsigned char* end = p + field.size();
    constexpr uint64_t kOnes = 0x0101010101010101ull;
    constexpr uint64_t kHigh = 0x8080808080808080ull;
    auto has = [](uint64_t x, unsigned char c) {  // some byte of x equals c
      const uint64_t y = x ^ (kOnes * c);
      return ((y - kOnes) & ~y & kHigh) != 0;
    };
    for (; end - p >= 8; p += 8) {
      uint64_t x;
      std::memcpy(&x, p, 8);
      if (has(x, ',') || has(x, '"') || has(x, '\r') || has(x, '\n')) return true;
    }
    for (; p < end; ++p) {
      if (*p == ',' || *p == '"' || *p == '\r' || *p == '\n') return true;
    }
    return false;
  }
  FILE* f_ = nullptr;
  std::string path_;
  OutputBuffer buf_;
  DecimalColumn digits_;  // the file's integers: its timestamps share their leading digits
  bool first_ = true;
  bool failed_ = false;
};

// CSV spells memory kinds as identifiers ("device_static"), unlike the timelines' labels.
const char* MemoryKindColumn(int k) {
  static const char* const kNames[] = {"unknown", "pageable", "pinned",        "device",
                                       "array",   "managed",  "device_static", "managed_static"};
  return (k >= 0 && k <= 7) ? kNames[k] : "unknown";
}
const char* SyncTypeName(int k) {
  static const char* const kNames[] = {"unknown", "event_synchronize", "stream_wait_event",
                                       "stream_synchronize", "context_synchronize"};
  return (k >= 0 && k <= 4) ? kNames[k] : "unknown";
}
const char* ApiDomainName(int k) {
  return k == API_RUNTIME ? "runtime" : k == API_DRIVER ? "driver" : "unknown";
}

std::string ColorText(uint32_t argb) {
  char tmp[16];
  std::snprintf(tmp, sizeof tmp, "#%08x", argb);
  return tmp;
}

struct LaunchEntry {
  uint64_t correlation = 0;
  uint32_t name_index = 0;  // 1-based into api_names_; 0 = empty slot
  uint32_t thread_id = 0;
};

struct ProcessRow {
  std::string path;
  bool have_header = false;
  Header header;
  bool clean_end = false;
  uint64_t chunks = 0, records = 0;
};

class CsvExporter final : public Exporter {
 public:
  explicit CsvExporter(const ExportOptions& o) : options_(o) {}
  ~CsvExporter() override {
    if (metric_spill_ != nullptr) std::fclose(metric_spill_);
  }

  Status Begin() override {
    dir_ = options_.output;
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
    if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::Error(dir_ + ": cannot create directory: " + std::strerror(errno));
    }
    struct stat st;
    if (stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::Error(dir_ +
                           ": exists and is not a directory (CSV output is a directory of tables)");
    }
    const std::string d = dir_ + "/";
    static const char kGpuIds[] = "file,pid,device,context,stream,correlation,";
    Status opened;  // the first table that cannot be created ends Begin
    auto open = [&](CsvFile& table, const char* name, const std::string& header) {
      if (opened.ok()) opened = table.Open(d + name, header.c_str());
    };
    open(kernels_, "kernels.csv",
         std::string(kGpuIds) +
             "start_ns,end_ns,duration_ns,t_ms,name,mangled_name,grid_x,grid_y,"
             "grid_z,block_x,block_y,block_z,cluster_x,cluster_y,cluster_z,"
             "registers_per_thread,static_shared_bytes,dynamic_shared_bytes,"
             "local_bytes_per_thread,graph_id,graph_node_id,launch_type,channel,"
             "profiler_internal,launch_api,launch_thread_id");
    open(memcpy_, "memcpy.csv",
         std::string(kGpuIds) +
             "start_ns,end_ns,duration_ns,t_ms,copy_kind,src_kind,dst_kind,bytes,"
             "bandwidth_gbps,async,peer,src_device,dst_device,copy_count,graph_id,"
             "graph_node_id,launch_api,launch_thread_id");
    open(memset_, "memset.csv",
         std::string(kGpuIds) +
             "start_ns,end_ns,duration_ns,t_ms,bytes,bandwidth_gbps,value,"
             "memory_kind,async,graph_id,graph_node_id,launch_api,launch_thread_id");
    open(api_, "api.csv",
         "file,pid,thread_id,start_ns,end_ns,duration_ns,t_ms,name,domain,cbid,"
         "correlation,return_value");
    open(ranges_, "nvtx_ranges.csv",
         "file,pid,thread_id,end_thread_id,start_ns,end_ns,duration_ns,t_ms,name,"
         "domain,category,color,payload,open,id");
    open(marks_, "nvtx_marks.csv",
         "file,pid,thread_id,time_ns,t_ms,name,domain,category,color,payload");
    open(sync_, "sync.csv",
         "file,pid,context,stream,correlation,start_ns,end_ns,duration_ns,t_ms,type,"
         "event_id,return_value");
    open(overhead_, "overhead.csv",
         "file,pid,thread_id,device,correlation,start_ns,end_ns,duration_ns,t_ms,"
         "kind,name");
    if (!opened.ok()) return opened;
    metric_spill_ = std::tmpfile();
    if (metric_spill_ == nullptr) {
      return Status::Error(std::string("cannot create a temporary file for metrics.csv: ") +
                           std::strerror(errno));
    }
    launches_.assign(kCorrelationCacheSize, LaunchEntry{});
    return pm_samples_.Begin();
  }

  void BeginFile(int file_index, TraceReader& reader) override {
    file_ = file_index;
    shape_fields_.Clear();  // shape ids are the file's own, and string ids too
    std::fill(launches_.begin(), launches_.end(), LaunchEntry{});
    api_names_.clear();
    api_index_flat_.clear();
    api_index_.clear();
    unknown_api_index_.clear();
    ProcessRow row;
    row.path = reader.path();
    const Header* h = reader.header();
    pid_ = 0;
    base_ns_ = 0;
    if (h != nullptr) {
      row.have_header = true;
      row.header = *h;
      pid_ = h->pid();
      base_ns_ = h->start_time_trace_ns();
    }
    file_pid_ = std::to_string(file_) + "," + std::to_string(pid_);
    if (processes_.size() <= static_cast<size_t>(file_index)) processes_.resize(file_index + 1);
    processes_[file_index] = row;
  }

  void AddChunk(int file_index, TraceReader& reader, const Chunk& c) override {
    file_ = file_index;
    if (base_ns_ == 0) base_ns_ = c.time_base_ns();
    ProcessRow& proc = processes_[file_index];
    ++proc.chunks;
    if (c.has_footer() && c.footer().clean_end()) proc.clean_end = true;
    if (c.pc_stalls_size() > 0 || c.pc_stall_reasons_size() > 0) pc_stalls_[file_index].AddChunk(c);
    for (const Device& d : c.devices()) devices_[{file_index, d.id()}] = d;
    for (const MetricConfig& m : c.metric_configs()) {
      auto& names = metric_configs_[{file_index, m.id()}];
      names.assign(m.metric_names().begin(), m.metric_names().end());
      for (const std::string& n : names) {
        if (metric_column_.emplace(n, metric_names_.size()).second) metric_names_.push_back(n);
      }
    }
    // API first: a launch and its GPU work can share a chunk.
    for (const ApiCall& a : c.api_calls()) WriteApi(reader, a);
    for (const Kernel& k : c.kernels()) WriteKernel(reader, k);
    for (const Memcpy& m : c.memcpys()) WriteMemcpy(m);
    for (const Memset& m : c.memsets()) WriteMemset(m);
    for (const NvtxRange& r : c.nvtx_ranges()) WriteRange(reader, r);
    for (const NvtxMark& m : c.nvtx_marks()) WriteMark(reader, m);
    for (const Synchronization& s : c.syncs()) WriteSync(s);
    for (const Overhead& o : c.overheads()) WriteOverhead(reader, o);
    for (const MetricRange& m : c.metric_ranges()) SpillMetric(reader, m);
    pm_samples_.AddChunk(file_index, pid_, base_ns_, c);
    proc.records += c.api_calls_size() + c.kernels_size() + c.memcpys_size() + c.memsets_size() +
                    c.nvtx_ranges_size() + c.nvtx_marks_size() + c.syncs_size() +
                    c.overheads_size() + c.metric_ranges_size();
  }

  Status End() override {
    Status written = WriteDevices();
    if (written.ok()) written = WriteProcesses();
    if (written.ok()) written = WriteMetrics();
    if (written.ok()) written = WritePcStallsCsv(dir_, pc_stalls_);
    if (written.ok()) written = pm_samples_.End(dir_ + "/pm_samples.csv");
    for (CsvFile* f :
         {&kernels_, &memcpy_, &memset_, &api_, &ranges_, &marks_, &sync_, &overhead_}) {
      const Status closed = f->Close();
      if (written.ok()) written = closed;  // the first failure is the one reported
    }
    return written;
  }

 private:
  double Ms(uint64_t t) const {
    return t >= base_ns_ ? static_cast<double>(t - base_ns_) / 1e6
                         : -static_cast<double>(base_ns_ - t) / 1e6;
  }
  // The t_ms column: Ms(t) with six decimals.
  void MsField(CsvFile& f, uint64_t t) const {
    f.MillisFromNs(t < base_ns_, t >= base_ns_ ? t - base_ns_ : base_ns_ - t);
  }
  void Times(CsvFile& f, int64_t start, int64_t duration) {
    f.I(start);
    f.I(EndTime(start, duration));
    f.I(duration);
    MsField(f, static_cast<uint64_t>(start));
  }
  void GpuIds(CsvFile& f, uint32_t device, uint32_t context, uint32_t stream, int64_t corr) {
    f.Raw(file_pid_);
    f.U(device);
    f.U(context);
    f.U(stream);
    f.I(corr);
  }
  void Launch(CsvFile& f, int64_t corr) {
    const LaunchEntry& e = launches_[static_cast<uint64_t>(corr) & (kCorrelationCacheSize - 1)];
    if (corr != 0 && e.name_index != 0 && e.correlation == static_cast<uint64_t>(corr)) {
      f.Raw(api_names_[e.name_index - 1]);
      f.U(e.thread_id);
    } else {
      f.Empty();
      f.Empty();
    }
  }
  static double GbPerS(uint64_t bytes, int64_t duration_ns) {
    return duration_ns > 0 ? static_cast<double>(bytes) / static_cast<double>(duration_ns) : 0.0;
  }

  void WriteApi(TraceReader& reader, const ApiCall& a) {
    // A name the chunk has is quoted once per file (its id names one string in every chunk of
    // the file); a damaged trace's id without its string is resolved (and counted) per row.
    const bool known = reader.HasStr(a.name());
    const uint32_t idx = known ? KnownApiName(reader, a.name(), a.correlation() != 0) : 0;
    const std::string_view name = idx == 0 ? reader.Str(a.name()) : std::string_view();
    api_.Raw(file_pid_);
    api_.U(a.thread_id());
    Times(api_, a.start(), a.duration());
    if (idx != 0) {
      api_.Raw(api_names_[idx - 1]);
    } else {
      api_.Str(name);
    }
    api_.Raw(ApiDomainName(a.domain()));  // a fixed word: nothing to quote
    api_.U(a.cbid());
    api_.I(a.correlation());
    api_.I(a.return_value());
    api_.EndRow();
    if (a.correlation() == 0) return;
    const uint32_t launch = known ? idx : UnknownApiName(a.name(), name);
    if (launch == 0) return;  // past kMaxApiNames names: stop joining rather than grow
    LaunchEntry& e =
        launches_[static_cast<uint64_t>(a.correlation()) & (kCorrelationCacheSize - 1)];
    e.correlation = static_cast<uint64_t>(a.correlation());
    e.name_index = launch;
    e.thread_id = a.thread_id();
  }

  // 1 + the index in api_names_ of string `id`'s CSV field text, made on first use (when
  // `may_add`: names are kept for launch calls only); 0 if not there and not added, or once the
  // file has had kMaxApiNames names.
  uint32_t KnownApiName(TraceReader& reader, uint32_t id, bool may_add) {
    uint32_t* slot = nullptr;
    if (id < kFlatApiIds) {
      if (id >= api_index_flat_.size()) api_index_flat_.resize(id + 1, 0);
      slot = &api_index_flat_[id];
      if (*slot != 0) return *slot;
    } else if (auto it = api_index_.find(id); it != api_index_.end()) {
      return it->second;
    }
    const uint32_t idx = AddApiName(reader.Str(id), may_add);
    if (idx != 0) {
      if (slot != nullptr) {
        *slot = idx;
      } else {
        api_index_.emplace(id, idx);
      }
    }
    return idx;
  }
  // The same for an id its chunk lacked ("<unknown string N>"): kept while the text matches.
  uint32_t UnknownApiName(uint32_t id, std::string_view name) {
    CsvFile field;
    field.Str(name);
    auto it = unknown_api_index_.find(id);
    if (it != unknown_api_index_.end() && api_names_[it->second - 1] == field.Written()) {
      return it->second;
    }
    const uint32_t idx = AddApiName(name, true);
    if (idx != 0) unknown_api_index_[id] = idx;
    return idx;
  }
  uint32_t AddApiName(std::string_view name, bool may_add) {
    if (!may_add || api_names_.size() >= kMaxApiNames) return 0;
    CsvFile field;
    field.Str(name);
    api_names_.emplace_back(field.Written());
    return static_cast<uint32_t>(api_names_.size());
  }

  void WriteKernel(TraceReader& reader, const Kernel& k) {
    CsvFile& f = kernels_;
    GpuIds(f, k.device(), k.context(), k.stream(), k.correlation());
    Times(f, k.start(), k.duration());
    const KernelShape* s = reader.Shape(k.shape());
    if (s != nullptr) {
      f.Raw(ShapeFields(reader, k.shape(), *s));
    } else {
      for (int i = 0; i < 15; ++i) f.Empty();
    }
    f.U(k.graph_id());
    f.U(k.graph_node_id());
    f.U(k.launch_type());
    f.U(k.channel());
    f.U((k.flags() & RECORD_FLAG_PROFILER_INTERNAL) ? 1 : 0);
    Launch(f, k.correlation());
    f.EndRow();
  }

  // A kernel shape's 15 columns (names, grid, block, cluster, registers, shared and local
  // memory), formatted once per shape of the file and copied into each of its rows.
  std::string_view ShapeFields(TraceReader& reader, uint32_t shape_id, const KernelShape& s) {
    return shape_fields_.Get(shape_id, [&] {
      CsvFile fields;
      fields.Str(reader.Str(s.demangled()));
      fields.Str(reader.Str(s.name()));
      for (uint32_t v :
           {s.grid_x(), s.grid_y(), s.grid_z(), s.block_x(), s.block_y(), s.block_z(),
            s.cluster_x(), s.cluster_y(), s.cluster_z(), s.registers_per_thread(),
            s.static_shared_bytes(), s.dynamic_shared_bytes(), s.local_bytes_per_thread()}) {
        fields.U(v);
      }
      return std::string(fields.Written());
    });
  }

  void WriteMemcpy(const Memcpy& m) {
    CsvFile& f = memcpy_;
    GpuIds(f, m.device(), m.context(), m.stream(), m.correlation());
    Times(f, m.start(), m.duration());
    f.Str(CopyKindName(m.copy_kind()));
    f.Str(MemoryKindColumn(m.src_kind()));
    f.Str(MemoryKindColumn(m.dst_kind()));
    f.U(m.bytes());
    f.Fixed(GbPerS(m.bytes(), m.duration()), 3);
    f.U((m.flags() & RECORD_FLAG_ASYNC) ? 1 : 0);
    f.U(m.peer() ? 1 : 0);
    if (m.peer()) {
      f.U(m.src_device());
      f.U(m.dst_device());
    } else {
      f.Empty();
      f.Empty();
    }
    f.U(m.copy_count());
    f.U(m.graph_id());
    f.U(m.graph_node_id());
    Launch(f, m.correlation());
    f.EndRow();
  }

  void WriteMemset(const Memset& m) {
    CsvFile& f = memset_;
    GpuIds(f, m.device(), m.context(), m.stream(), m.correlation());
    Times(f, m.start(), m.duration());
    f.U(m.bytes());
    f.Fixed(GbPerS(m.bytes(), m.duration()), 3);
    f.U(m.value());
    f.Str(MemoryKindColumn(m.memory_kind()));
    f.U((m.flags() & RECORD_FLAG_ASYNC) ? 1 : 0);
    f.U(m.graph_id());
    f.U(m.graph_node_id());
    Launch(f, m.correlation());
    f.EndRow();
  }

  void WriteRange(TraceReader& reader, const NvtxRange& r) {
    CsvFile& f = ranges_;
    f.Raw(file_pid_);
    f.U(r.thread_id());
    if (r.end_thread_id() != 0) {
      f.U(r.end_thread_id());
    } else {
      f.Empty();
    }
    Times(f, r.start(), r.duration());
    f.Str(reader.Str(r.name()));
    f.Str(reader.Str(r.domain()));
    f.U(r.category());
    if (r.has_color()) {
      f.Str(ColorText(r.color()));
    } else {
      f.Empty();
    }
    f.Str(NvtxPayloadText(r.payload()));
    f.U((r.flags() & RECORD_FLAG_OPEN) ? 1 : 0);
    f.U(r.id());
    f.EndRow();
  }

  void WriteMark(TraceReader& reader, const NvtxMark& m) {
    CsvFile& f = marks_;
    f.Raw(file_pid_);
    f.U(m.thread_id());
    f.I(m.time());
    MsField(f, static_cast<uint64_t>(m.time()));
    f.Str(reader.Str(m.name()));
    f.Str(reader.Str(m.domain()));
    f.U(m.category());
    if (m.has_color()) {
      f.Str(ColorText(m.color()));
    } else {
      f.Empty();
    }
    f.Str(NvtxPayloadText(m.payload()));
    f.EndRow();
  }

  void WriteSync(const Synchronization& s) {
    CsvFile& f = sync_;
    f.Raw(file_pid_);
    f.U(s.context());
    f.U(s.stream());
    f.I(s.correlation());
    Times(f, s.start(), s.duration());
    f.Str(SyncTypeName(s.type()));
    f.U(s.event_id());
    f.I(s.return_value());
    f.EndRow();
  }

  void WriteOverhead(TraceReader& reader, const Overhead& o) {
    CsvFile& f = overhead_;
    f.Raw(file_pid_);
    f.U(o.thread_id());
    f.U(o.device());
    f.I(o.correlation());
    Times(f, o.start(), o.duration());
    f.U(o.kind());
    f.Str(reader.Str(o.name()));
    f.EndRow();
  }

  // Spill format: the row's leading columns already as CSV text, then the config key and the
  // raw values; End() appends the values in the final column order.
  void SpillMetric(TraceReader& reader, const MetricRange& m) {
    std::string row;
    auto num = [&row](auto v) {
      row += std::to_string(v);
      row += ',';
    };
    num(file_);
    num(pid_);
    AppendCsvField(&row, reader.Str(m.name()));
    row += ',';
    AppendCsvField(&row, reader.Str(m.domain()));
    row += ',';
    num(m.occurrence());
    num(m.occurrences_used());
    num(m.start());
    num(EndTime(m.start(), m.duration()));
    num(m.duration());
    char tmp[48];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, Ms(static_cast<uint64_t>(m.start())),
                           std::chars_format::fixed, 6);
    row.append(tmp, r.ptr);
    row += ',';
    num(m.device());
    num(m.thread_id());
    num(m.correlation());
    num(m.nesting_level());
    num(m.sm_clock_khz());
    // Multi-pass sets: 0 when the occurrences that gave the passes were unlike (their ratio
    // metrics combine counters of different work), with the shortest and longest occurrence.
    num(m.inconsistent() ? 0 : 1);
    num(m.occurrence_min_ns());
    num(m.occurrence_max_ns());
    row += std::to_string(m.config());
    uint32_t sizes[4] = {static_cast<uint32_t>(row.size()), static_cast<uint32_t>(file_),
                         m.config(), static_cast<uint32_t>(m.values_size())};
    bool ok = std::fwrite(sizes, sizeof sizes, 1, metric_spill_) == 1 &&
              std::fwrite(row.data(), 1, row.size(), metric_spill_) == row.size();
    if (m.values_size() > 0) {
      ok = ok && std::fwrite(m.values().data(), sizeof(double), m.values_size(), metric_spill_) ==
                     static_cast<size_t>(m.values_size());
    }
    if (!ok) spill_failed_ = true;
  }

  Status WriteMetrics() {
    CsvFile f;
    std::string header =
        "file,pid,range,domain,occurrence,occurrences_used,start_ns,end_ns,duration_ns,t_ms,"
        "device,thread_id,correlation,nesting_level,sm_clock_khz,consistent,occurrence_min_ns,"
        "occurrence_max_ns,config";
    for (const std::string& n : metric_names_) {
      header += ',';
      AppendCsvField(&header, n);
    }
    if (Status opened = f.Open(dir_ + "/metrics.csv", header.c_str()); !opened.ok()) {
      return opened;
    }
    std::rewind(metric_spill_);
    uint32_t sizes[4];
    std::string row;
    std::vector<double> values, columns(metric_names_.size());
    static const std::vector<std::string> kNoNames;
    while (std::fread(sizes, sizeof sizes, 1, metric_spill_) == 1) {
      row.resize(sizes[0]);
      values.resize(sizes[3]);
      if (std::fread(row.data(), 1, row.size(), metric_spill_) != row.size() ||
          (sizes[3] > 0 &&
           std::fread(values.data(), sizeof(double), sizes[3], metric_spill_) != sizes[3])) {
        spill_failed_ = true;
        break;
      }
      auto it = metric_configs_.find({static_cast<int>(sizes[1]), sizes[2]});
      const std::vector<std::string>& names = it == metric_configs_.end() ? kNoNames : it->second;
      std::fill(columns.begin(), columns.end(), std::numeric_limits<double>::quiet_NaN());
      for (size_t i = 0; i < values.size() && i < names.size(); ++i) {
        columns[metric_column_[names[i]]] = values[i];
      }
      f.Raw(row);  // the spilled prefix is already CSV
      for (double v : columns) f.D(v);
      f.EndRow();
    }
    std::fclose(metric_spill_);
    metric_spill_ = nullptr;
    if (spill_failed_) {
      return Status::Error("metrics.csv: the temporary spill file failed (disk full?)");
    }
    return f.Close();
  }

  Status WriteDevices() {
    CsvFile f;
    if (Status opened =
            f.Open(dir_ + "/devices.csv",
                   "file,pid,device,name,uuid,compute_capability,sm_count,memory_bytes,"
                   "memory_bandwidth_kbps,core_clock_khz,memory_clock_khz,l2_cache_bytes,"
                   "max_threads_per_block,pci_bus_id,is_mig");
        !opened.ok()) {
      return opened;
    }
    for (const auto& [key, d] : devices_) {
      const ProcessRow& p = processes_[key.first];
      f.I(key.first);
      f.U(p.have_header ? p.header.pid() : 0);
      f.U(d.id());
      f.Str(d.name());
      f.Str(FormatUuid(d.uuid()));
      f.Str(std::to_string(d.compute_capability_major()) + "." +
            std::to_string(d.compute_capability_minor()));
      f.U(d.sm_count());
      f.U(d.global_memory_bytes());
      f.U(d.global_memory_bandwidth_kbps());
      f.U(d.core_clock_khz());
      f.U(d.memory_clock_khz());
      f.U(d.l2_cache_bytes());
      f.U(d.max_threads_per_block());
      f.Str(d.pci_bus_id());
      f.U(d.is_mig() ? 1 : 0);
      f.EndRow();
    }
    return f.Close();
  }

  Status WriteProcesses() {
    CsvFile f;
    if (Status opened =
            f.Open(dir_ + "/processes.csv",
                   "file,path,pid,ppid,hostname,command,rank,local_rank,world_size,start_time_utc,"
                   "start_time_unix_ns,start_time_trace_ns,driver_version,cuda_driver_version,"
                   "cupti_api_version,injection_mode,clean_end,chunks,records");
        !opened.ok()) {
      return opened;
    }
    for (size_t i = 0; i < processes_.size(); ++i) {
      const ProcessRow& p = processes_[i];
      const Header& h = p.header;
      std::string cmd;
      for (const auto& a : h.command_line()) cmd += (cmd.empty() ? "" : " ") + a;
      f.U(i);
      f.Str(p.path);
      f.U(h.pid());
      f.U(h.ppid());
      f.Str(h.hostname());
      f.Str(cmd);
      f.I(p.have_header ? h.rank() : -1);
      f.I(p.have_header ? h.local_rank() : -1);
      f.I(p.have_header ? h.world_size() : -1);
      f.Str(p.have_header ? FormatUtcDate(h.start_time_unix_ns()) : "");
      f.U(h.start_time_unix_ns());
      f.U(h.start_time_trace_ns());
      f.Str(h.driver_version());
      f.Str(p.have_header ? FormatCudaVersion(h.cuda_driver_version()) : "");
      f.U(h.cupti_api_version());
      f.Str(h.injection_mode());
      f.U(p.clean_end ? 1 : 0);
      f.U(p.chunks);
      f.U(p.records);
      f.EndRow();
    }
    return f.Close();
  }

  ExportOptions options_;
  std::string dir_;
  CsvFile kernels_, memcpy_, memset_, api_, ranges_, marks_, sync_, overhead_;
  int file_ = 0;
  uint32_t pid_ = 0;
  std::string file_pid_ = "0,0";  // the first two columns of every row of this file, as text
  uint64_t base_ns_ = 0;
  std::vector<LaunchEntry> launches_;
  ShapeTextCache shape_fields_;           // of the file being converted
  std::vector<std::string> api_names_;    // API call names as CSV fields, of the file
  std::vector<uint32_t> api_index_flat_;  // string id -> api_names_ index + 1 (small ids)
  std::unordered_map<uint32_t, uint32_t> api_index_;          // the same for larger ids
  std::unordered_map<uint32_t, uint32_t> unknown_api_index_;  // ids a chunk lacked
  std::vector<ProcessRow> processes_;
  std::map<std::pair<int, uint32_t>, Device> devices_;
  std::map<std::pair<int, uint32_t>, std::vector<std::string>> metric_configs_;
  std::vector<std::string> metric_names_;
  std::unordered_map<std::string, size_t> metric_column_;
  FILE* metric_spill_ = nullptr;
  bool spill_failed_ = false;
  std::map<int, PcStallTable> pc_stalls_;  // by input file: pc_stalls.csv, pc_stall_pcs.csv
  PmSamplesCsv pm_samples_;
};

}  // namespace

std::unique_ptr<Exporter> MakeCsvExporter(const ExportOptions& options) {
  return std::make_unique<CsvExporter>(options);
}

}  // namespace kp
