#include "inject/trace/trace_encoder.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/proto_wire.h"

namespace kp {
namespace {

// Returns s[0..n) with every byte that is not part of a well-formed UTF-8 sequence replaced by
// U+FFFD (interned strings are stored once, when first seen).
std::string ToValidUtf8(const char* s, size_t n) {
  std::string out(RepairedUtf8Size(s, n), '\0');
  WriteRepairedUtf8(s, n, &out[0]);
  return out;
}

using wire::WireBuffer;
using wire::WireWriter;

// Every string field the encoder writes goes through here: proto3 `string` fields must hold
// UTF-8 (libprotobuf rejects the whole chunk otherwise), and command lines, host names, paths
// and names from the program can hold any bytes. Bad bytes become U+FFFD, so the caller's
// Reserve must allow 3 bytes per input byte (Utf8Bound). Nothing is allocated.
size_t Utf8Bound(std::string_view s) { return 3 * s.size(); }
void Utf8Field(WireWriter& w, uint32_t field, std::string_view s, bool always = false) {
  if (s.empty() && !always) return;
  if (IsValidUtf8(s.data(), s.size())) {
    w.BytesAlways(field, s.data(), s.size());
    return;
  }
  w.Tag(field, wire::kLengthDelimited);
  w.RawVarint(RepairedUtf8Size(s.data(), s.size()));
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, run = 0;  // [run, i) is valid and not yet written
  while (i < s.size()) {
    const size_t len = Utf8SequenceLength(p + i, s.size() - i);
    if (len != 0) {
      i += len;
      continue;
    }
    w.RawBytes(s.data() + run, i - run);
    w.RawBytes("\xEF\xBF\xBD", 3);
    run = ++i;
  }
  w.RawBytes(s.data() + run, i - run);
}

// Field numbers of kp.Chunk (proto/kptrace.proto).
enum ChunkField : uint32_t {
  kChunkSequence = 1,
  kChunkTimeBase = 2,
  kChunkStrings = 3,
  kChunkHeader = 4,
  kChunkDevices = 5,
  kChunkContexts = 6,
  kChunkKernelShapes = 7,
  kChunkKernels = 8,
  kChunkMemcpys = 9,
  kChunkMemsets = 10,
  kChunkApiCalls = 11,
  kChunkNvtxRanges = 12,
  kChunkNvtxMarks = 13,
  kChunkSyncs = 14,
  kChunkOverheads = 15,
  kChunkMetricRanges = 16,
  kChunkGraphLaunches = 17,
  kChunkStats = 18,
  kChunkFooter = 19,
  kChunkThreads = 20,
  kChunkMetricConfigs = 21,
  kChunkNotices = 22,
};

constexpr uint32_t kFlagNoTiming = 1;  // kp.RECORD_FLAG_NO_TIMING

// GPU records CUPTI gave no timestamps (start = end = 0) are flagged and counted.
uint32_t GpuRecordFlags(uint32_t flags, uint64_t start, uint64_t end, EncoderStats* stats) {
  if (start != 0 || end != 0) return flags;
  ++stats->zero_timestamp_records;
  return flags | kFlagNoTiming;
}
// Safety net for a caller that never checks FlushDue(): stay far below kMaxChunkBytes.
constexpr size_t kHardChunkLimit = 64u << 20;
// Fixed-field records fit in this stack scratch (at most 20 scalar fields + one small
// sub-message); static_asserts below keep that true.
constexpr size_t kRecordScratchBytes = 512;
static_assert(20 * wire::kMaxScalarFieldBytes + 32 <= kRecordScratchBytes);

uint64_t HashBytes(const void* data, size_t n) {
  const auto* s = static_cast<const uint8_t*>(data);
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, s, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
    s += 8;
    n -= 8;
  }
  uint64_t w = 0;
  if (n != 0) std::memcpy(&w, s, n);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 29;
  return h;
}

enum RecordKind : int {
  kKernels,
  kMemcpys,
  kMemsets,
  kApiCalls,
  kNvtxRanges,
  kNvtxMarks,
  kSyncs,
  kOverheads,
  kMetricRanges,
  kGraphLaunches,
  kNumRecordKinds
};

struct ShapeKey {
  // name, grid[3], block[3], cluster[3], regs, static, dynamic, local, shared_executed, device:
  // KernelShape fields 2 and 4..18 in order.
  uint32_t v[16];
  bool operator==(const ShapeKey& o) const { return std::memcmp(v, o.v, sizeof v) == 0; }
};

// Delta-coding state of one record list in the current chunk.
struct ListDelta {
  bool started = false;
  uint64_t prev_time = 0;
  uint32_t prev_correlation = 0;
};

}  // namespace

struct TraceEncoder::Impl {
  ChunkSink* sink;
  WireBuffer chunk;
  WireBuffer scratch;      // header/device/... and variable-size records
  WireBuffer sub_scratch;  // messages nested inside `scratch`

  uint64_t sequence = 0;
  bool time_base_set = false;
  uint64_t time_base = 0;
  ListDelta lists[kNumRecordKinds];
  uint64_t records_in_chunk = 0;
  bool dirty = false;  // something other than records was added to this chunk
  bool finished = false;
  uint64_t totals[kNumRecordKinds] = {};

  // Strings: local index -> value; emitted_in[i] = 1 + sequence of the last chunk that defined
  // it. A string's id in the file is string_base + its local index. Unique NVTX messages
  // ("step 1234", emit_nvtx's "aten::mul, seq = ...") would grow these tables with the run, so
  // at a chunk boundary past kMaxInternedStrings / kMaxInternedBytes every table is dropped and
  // ids continue above the old ones: never reused, so a reader or exporter caching by id stays
  // right, and every chunk still defines what it uses.
  static constexpr size_t kMaxInternedStrings = 1u << 17;
  static constexpr size_t kMaxInternedBytes = 32u << 20;
  uint32_t string_base = 0;
  size_t string_bytes = 0;
  std::vector<std::string> strings{std::string()};
  std::vector<uint64_t> string_hash{0};
  std::vector<uint64_t> string_emitted_in{0};
  std::vector<uint32_t> demangled_of{0};  // kernel name id -> demangled id (0 = not yet)
  std::vector<uint32_t> content_slots = std::vector<uint32_t>(1024, 0);  // open addressing
  struct PointerSlot {
    const char* ptr = nullptr;
    uint32_t id = 0;
  };
  std::vector<PointerSlot> pointer_slots = std::vector<PointerSlot>(1024);
  size_t pointer_count = 0;

  uint32_t shape_base = 0;       // a shape's id is shape_base + its 1-based local index
  std::vector<ShapeKey> shapes;  // local index - 1 -> key
  std::vector<uint64_t> shape_hash;
  std::vector<uint64_t> shape_emitted_in;
  std::vector<uint32_t> shape_slots = std::vector<uint32_t>(1024, 0);

  std::vector<uint8_t> header_bytes;
  bool has_header = false;
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> devices, contexts, threads;
  std::vector<std::vector<uint8_t>> metric_configs;

  explicit Impl(ChunkSink* s) : sink(s) {}

  // ---- string interning ----
  uint32_t InternContent(const char* s, size_t n) {
    if (n == 0) return 0;
    uint64_t h = HashBytes(s, n);
    size_t mask = content_slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      uint32_t local = content_slots[i];
      if (local == 0) {
        local = static_cast<uint32_t>(strings.size());
        // proto3 `string` fields must hold UTF-8 or libprotobuf rejects the whole chunk: store
        // a repaired copy (keyed, via the hash, by the original bytes).
        strings.push_back(ToValidUtf8(s, n));
        string_bytes += n;
        string_hash.push_back(h);
        string_emitted_in.push_back(0);
        demangled_of.push_back(0);
        content_slots[i] = local;
        if (strings.size() * 2 > content_slots.size()) RehashContent();
        return string_base + local;
      }
      if (string_hash[local] == h && strings[local].size() == n &&
          std::memcmp(strings[local].data(), s, n) == 0) {
        return string_base + local;
      }
    }
  }
  void RehashContent() {
    std::vector<uint32_t> slots(content_slots.size() * 2, 0);
    size_t mask = slots.size() - 1;
    for (uint32_t id = 1; id < strings.size(); ++id) {
      size_t i = string_hash[id] & mask;
      while (slots[i] != 0) i = (i + 1) & mask;
      slots[i] = id;
    }
    content_slots.swap(slots);
  }
  static size_t PointerHash(const char* p) {
    auto v = reinterpret_cast<uintptr_t>(p);
    return static_cast<size_t>((v * 0x9E3779B97F4A7C15ull) >> 20);
  }
  // For strings whose pointer CUPTI keeps stable (kernel names, API names): a pointer hit
  // skips hashing the (often long) content.
  uint32_t InternStable(const char* s) {
    if (s == nullptr) return 0;
    size_t mask = pointer_slots.size() - 1;
    size_t i = PointerHash(s) & mask;
    for (;; i = (i + 1) & mask) {
      if (pointer_slots[i].ptr == s) return pointer_slots[i].id;
      if (pointer_slots[i].ptr == nullptr) break;
    }
    uint32_t id = InternContent(s, std::strlen(s));
    pointer_slots[i] = {s, id};
    if (++pointer_count * 2 > pointer_slots.size()) {
      std::vector<PointerSlot> old(pointer_slots.size() * 2);
      old.swap(pointer_slots);
      size_t m = pointer_slots.size() - 1;
      for (const PointerSlot& slot : old) {
        if (slot.ptr == nullptr) continue;
        size_t j = PointerHash(slot.ptr) & m;
        while (pointer_slots[j].ptr != nullptr) j = (j + 1) & m;
        pointer_slots[j] = slot;
      }
    }
    return id;
  }
  // For strings that live in reused CUPTI buffers (NVTX messages): content only.
  uint32_t InternVolatile(const char* s) {
    return s == nullptr ? 0 : InternContent(s, std::strlen(s));
  }
  // Ensures the current chunk defines string `id`.
  void UseString(uint32_t id) {
    if (id == 0) return;
    const uint32_t local = id - string_base;
    if (string_emitted_in[local] == sequence + 1) return;
    string_emitted_in[local] = sequence + 1;
    const std::string& s = strings[local];
    // InternedString { id = 1; value = 2; } written straight into the chunk.
    size_t body = 1 + wire::VarintSize(id) + 1 + wire::VarintSize(s.size()) + s.size();
    WireWriter w = chunk.Reserve(wire::MaxLengthDelimitedBytes(body));
    w.Tag(kChunkStrings, wire::kLengthDelimited);
    w.RawVarint(body);
    w.UintAlways(1, id);
    w.StringAlways(2, s);
    chunk.Commit(w);
  }
  // Demangled once per unique kernel name, off the per-record path.
  uint32_t DemangledOf(uint32_t name_id) {
    if (name_id == 0) return 0;
    uint32_t d = demangled_of[name_id - string_base];
    if (d != 0) return d;
    d = name_id;
    const std::string& mangled = strings[name_id - string_base];
    if (mangled.size() > 2 && mangled[0] == '_' && mangled[1] == 'Z') {
      int status = 0;
      char* out = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
      if (status == 0 && out != nullptr) d = InternContent(out, std::strlen(out));
      std::free(out);
      if (d == 0) d = name_id;
    }
    demangled_of[name_id - string_base] = d;  // InternContent may have grown it: index again
    return d;
  }

  // ---- kernel shapes ----
  uint32_t InternShape(const ShapeKey& key) {
    uint64_t h = HashBytes(key.v, sizeof key.v);
    size_t mask = shape_slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      uint32_t id = shape_slots[i];
      if (id == 0) {
        shapes.push_back(key);
        shape_hash.push_back(h);
        shape_emitted_in.push_back(0);
        id = static_cast<uint32_t>(shapes.size());  // local, 1-based
        shape_slots[i] = id;
        if (shapes.size() * 2 > shape_slots.size()) {
          std::vector<uint32_t> slots(shape_slots.size() * 2, 0);
          size_t m = slots.size() - 1;
          for (uint32_t sid = 1; sid <= shapes.size(); ++sid) {
            size_t j = shape_hash[sid - 1] & m;
            while (slots[j] != 0) j = (j + 1) & m;
            slots[j] = sid;
          }
          shape_slots.swap(slots);
        }
        return shape_base + id;
      }
      if (shape_hash[id - 1] == h && shapes[id - 1] == key) return shape_base + id;
    }
  }
  void UseShape(uint32_t id) {
    const uint32_t local = id - shape_base;
    if (shape_emitted_in[local - 1] == sequence + 1) return;
    shape_emitted_in[local - 1] = sequence + 1;
    const ShapeKey& k = shapes[local - 1];
    uint32_t demangled = DemangledOf(k.v[0]);
    UseString(k.v[0]);
    UseString(demangled);
    uint8_t buf[kRecordScratchBytes];
    WireWriter w(buf);
    w.Uint(1, id);
    w.Uint(2, k.v[0]);
    w.Uint(3, demangled);
    for (uint32_t f = 1; f < 16; ++f) w.Uint(3 + f, k.v[f]);
    AppendRecord(kChunkKernelShapes, w);
  }

  // At a chunk boundary only (see kMaxInternedStrings).
  void MaybeResetInterning() {
    if (strings.size() <= kMaxInternedStrings && string_bytes <= kMaxInternedBytes) return;
    string_base += static_cast<uint32_t>(strings.size() - 1);
    strings.assign(1, std::string());
    string_hash.assign(1, 0);
    string_emitted_in.assign(1, 0);
    demangled_of.assign(1, 0);
    string_bytes = 0;
    content_slots.assign(1024, 0);
    pointer_slots.assign(1024, PointerSlot());
    pointer_count = 0;
    shape_base += static_cast<uint32_t>(shapes.size());  // shapes name strings: reset together
    shapes.clear();
    shape_hash.clear();
    shape_emitted_in.clear();
    shape_slots.assign(1024, 0);
  }

  // ---- delta coding ----
  int64_t TimeDelta(RecordKind kind, uint64_t t) {
    if (!time_base_set) {
      time_base_set = true;
      time_base = t;
    }
    ListDelta& l = lists[kind];
    uint64_t prev = l.started ? l.prev_time : time_base;
    l.started = true;
    l.prev_time = t;
    return static_cast<int64_t>(t - prev);
  }
  int64_t CorrelationDelta(RecordKind kind, uint32_t c) {
    ListDelta& l = lists[kind];
    int64_t d = static_cast<int64_t>(c) - static_cast<int64_t>(l.prev_correlation);
    l.prev_correlation = c;
    return d;
  }
  static int64_t Duration(uint64_t start, uint64_t end) {
    return static_cast<int64_t>(end - start);
  }

  void AppendRecord(uint32_t field, const WireWriter& w) {
    chunk.AppendMessage(field, w.data(), w.size());
  }
  void CountRecord(RecordKind kind) {
    ++records_in_chunk;
    ++totals[kind];
  }

  static void WritePayload(WireWriter& w, uint32_t field, const NvtxPayloadValue& p) {
    if (p.kind == NvtxPayloadValue::kNone) return;
    uint8_t buf[16];
    WireWriter sub(buf);
    switch (p.kind) {
      case NvtxPayloadValue::kU64:
        sub.UintAlways(1, p.u64);
        break;
      case NvtxPayloadValue::kI64:
        sub.IntAlways(2, p.i64);
        break;
      case NvtxPayloadValue::kF64:
        sub.DoubleAlways(3, p.f64);
        break;
      case NvtxPayloadValue::kU32:
        sub.UintAlways(4, p.u32);
        break;
      case NvtxPayloadValue::kI32:
        sub.IntAlways(5, p.i32);
        break;
      case NvtxPayloadValue::kF32:
        sub.FloatAlways(6, p.f32);
        break;
      case NvtxPayloadValue::kNone:
        break;
    }
    w.Message(field, sub);
  }

  void AppendStored(uint32_t field,
                    const std::vector<std::pair<uint32_t, std::vector<uint8_t>>>& items) {
    for (const auto& item : items)
      chunk.AppendMessage(field, item.second.data(), item.second.size());
  }
  static void Store(std::vector<std::pair<uint32_t, std::vector<uint8_t>>>* items, uint32_t key,
                    const WireBuffer& bytes) {
    std::vector<uint8_t> copy(bytes.data(), bytes.data() + bytes.size());
    for (auto& item : *items) {
      if (item.first == key) {
        item.second.swap(copy);
        return;
      }
    }
    items->emplace_back(key, std::move(copy));
  }

  void EncodeStats(const EncoderStats& s) {
    WireWriter w = scratch.Reserve(15 * wire::kMaxScalarFieldBytes);
    const uint64_t values[15] = {s.cupti_dropped_records,    s.zero_timestamp_records,
                                 s.buffers_completed,        s.buffers_refused,
                                 s.nvtx_unmatched_ends,      s.nvtx_open_ranges,
                                 s.records_filtered,         s.bytes_written,
                                 s.chunks_written,           s.records_written,
                                 s.unknown_records,          s.write_errors,
                                 s.metric_ranges_dropped,    s.encoder_buffers_pending_max,
                                 s.profiler_internal_kernels};
    for (uint32_t i = 0; i < 15; ++i) w.Uint(i + 1, values[i]);
    scratch.Commit(w);
  }
};

TraceEncoder::TraceEncoder(ChunkSink* sink, Options options)
    : impl_(new Impl(sink)), options_(options) {}

TraceEncoder::~TraceEncoder() { delete impl_; }

size_t TraceEncoder::pending_bytes() const { return impl_->chunk.size(); }

void TraceEncoder::SetHeader(const HeaderInfo& h) {
  size_t bound = 512 + Utf8Bound(h.kp_version) + Utf8Bound(h.hostname) + Utf8Bound(h.clock) +
                 Utf8Bound(h.driver_version) + Utf8Bound(h.injection_mode) +
                 Utf8Bound(h.output_path);
  for (const auto& arg : h.command_line) bound += Utf8Bound(arg) + 16;
  for (const auto& kv : h.config) bound += Utf8Bound(kv.first) + Utf8Bound(kv.second) + 48;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(bound);
  Utf8Field(w, 1, h.kp_version);
  w.Uint(2, h.pid);
  w.Uint(3, h.ppid);
  Utf8Field(w, 4, h.hostname);
  for (const auto& arg : h.command_line) Utf8Field(w, 5, arg, /*always=*/true);
  w.Int(6, h.rank);
  w.Int(7, h.local_rank);
  w.Int(8, h.world_size);
  w.Uint(9, h.start_time_unix_ns);
  w.Uint(10, h.start_time_trace_ns);
  Utf8Field(w, 11, h.clock);
  for (const auto& kv : h.config) {
    WireBuffer& sub = impl_->sub_scratch;
    sub.Clear();
    WireWriter sw = sub.Reserve(Utf8Bound(kv.first) + Utf8Bound(kv.second) + 32);
    Utf8Field(sw, 1, kv.first);
    Utf8Field(sw, 2, kv.second);
    w.Message(12, sw);
  }
  w.Uint(13, h.cupti_api_version);
  w.Int(14, h.cuda_driver_version);
  Utf8Field(w, 15, h.driver_version);
  Utf8Field(w, 16, h.injection_mode);
  Utf8Field(w, 17, h.output_path);
  b.Commit(w);
  impl_->header_bytes.assign(b.data(), b.data() + b.size());
  impl_->has_header = true;
  if (impl_->sequence == 0) impl_->dirty = true;
}

void TraceEncoder::AddDevice(const DeviceInfo& d) {
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(512 + Utf8Bound(d.name) + Utf8Bound(d.pci_bus_id));
  w.Uint(1, d.id);
  Utf8Field(w, 2, d.name);
  w.BytesAlways(3, d.uuid, sizeof d.uuid);
  w.Uint(4, d.cc_major);
  w.Uint(5, d.cc_minor);
  w.Uint(6, d.sm_count);
  w.Uint(7, d.global_memory_bytes);
  w.Uint(8, d.global_memory_bandwidth_kbps);
  w.Uint(9, d.core_clock_khz);
  w.Uint(10, d.memory_clock_khz);
  w.Uint(11, d.max_threads_per_block);
  w.Uint(12, d.max_shared_memory_per_block);
  w.Uint(13, d.max_registers_per_block);
  w.Uint(14, d.l2_cache_bytes);
  w.Uint(15, d.max_warps_per_sm);
  w.Uint(16, d.num_threads_per_warp);
  Utf8Field(w, 17, d.pci_bus_id);
  w.Bool(18, d.is_mig);
  b.Commit(w);
  Impl::Store(&impl_->devices, d.id, b);
  impl_->dirty = true;
}

void TraceEncoder::AddContext(const ContextInfo& c) {
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(64);
  w.Uint(1, c.id);
  w.Uint(2, c.device);
  w.Uint(3, c.null_stream);
  w.Bool(4, c.is_green);
  b.Commit(w);
  Impl::Store(&impl_->contexts, c.id, b);
  impl_->dirty = true;
}

void TraceEncoder::AddThreadName(uint32_t thread_id, std::string_view name) {
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(64 + Utf8Bound(name));
  w.Uint(1, thread_id);
  Utf8Field(w, 2, name);
  b.Commit(w);
  Impl::Store(&impl_->threads, thread_id, b);
  impl_->dirty = true;
}

void TraceEncoder::AddNotice(int severity, std::string_view component, std::string_view message,
                             uint64_t time_ns) {
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(64 + Utf8Bound(component) + Utf8Bound(message));
  w.Int(1, severity);
  Utf8Field(w, 2, component);
  Utf8Field(w, 3, message);
  w.Uint(4, time_ns);
  b.Commit(w);
  impl_->chunk.AppendMessage(kChunkNotices, b);
  impl_->dirty = true;
}

uint32_t TraceEncoder::AddMetricConfig(const MetricConfigInfo& c) {
  size_t bound = 128 + Utf8Bound(c.mode) + Utf8Bound(c.chip);
  for (const auto& m : c.metric_names) bound += Utf8Bound(m) + 16;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  uint32_t id = static_cast<uint32_t>(impl_->metric_configs.size() + 1);
  WireWriter w = b.Reserve(bound);
  w.Uint(1, id);
  for (const auto& m : c.metric_names) Utf8Field(w, 2, m, /*always=*/true);
  w.Uint(3, c.num_passes);
  Utf8Field(w, 4, c.mode);
  w.Uint(5, c.device);
  Utf8Field(w, 6, c.chip);
  b.Commit(w);
  impl_->metric_configs.emplace_back(b.data(), b.data() + b.size());
  impl_->dirty = true;
  return id;
}

void TraceEncoder::AddKernel(const KernelRecord& r) {
  Impl& m = *impl_;
  const uint32_t flags = GpuRecordFlags(r.flags, r.start, r.end, &stats_);
  ShapeKey key = {{m.InternStable(r.name), r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1],
                   r.block[2], r.cluster[0], r.cluster[1], r.cluster[2], r.registers_per_thread,
                   r.static_shared, r.dynamic_shared, r.local_per_thread, r.shared_executed,
                   r.device}};
  uint32_t shape = m.InternShape(key);
  m.UseShape(shape);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kKernels, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, shape);
  w.Uint(4, r.stream);
  w.Sint(5, m.CorrelationDelta(kKernels, r.correlation));
  w.Uint(6, r.context);
  w.Uint(7, r.device);
  w.Uint(8, r.graph_id);
  w.Uint(9, r.graph_node_id);
  w.Uint(10, flags);
  w.Uint(11, r.launch_type);
  w.Uint(12, r.channel);
  m.AppendRecord(kChunkKernels, w);
  m.CountRecord(kKernels);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddMemcpy(const MemcpyRecord& r) {
  Impl& m = *impl_;
  const uint32_t flags = GpuRecordFlags(r.flags, r.start, r.end, &stats_);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kMemcpys, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, r.bytes);
  w.Uint(4, r.copy_kind);
  w.Uint(5, r.src_kind);
  w.Uint(6, r.dst_kind);
  w.Uint(7, r.stream);
  w.Sint(8, m.CorrelationDelta(kMemcpys, r.correlation));
  w.Uint(9, r.context);
  w.Uint(10, r.device);
  w.Uint(11, flags);
  w.Uint(12, r.graph_id);
  w.Uint(13, r.graph_node_id);
  w.Bool(14, r.peer);
  w.Uint(15, r.src_device);
  w.Uint(16, r.dst_device);
  w.Uint(17, r.src_context);
  w.Uint(18, r.dst_context);
  w.Uint(19, r.copy_count);
  w.Uint(20, r.channel);
  m.AppendRecord(kChunkMemcpys, w);
  m.CountRecord(kMemcpys);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddMemset(const MemsetRecord& r) {
  Impl& m = *impl_;
  const uint32_t flags = GpuRecordFlags(r.flags, r.start, r.end, &stats_);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kMemsets, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, r.bytes);
  w.Uint(4, r.value);
  w.Uint(5, r.memory_kind);
  w.Uint(6, r.stream);
  w.Sint(7, m.CorrelationDelta(kMemsets, r.correlation));
  w.Uint(8, r.context);
  w.Uint(9, r.device);
  w.Uint(10, flags);
  w.Uint(11, r.graph_id);
  w.Uint(12, r.graph_node_id);
  w.Uint(13, r.channel);
  m.AppendRecord(kChunkMemsets, w);
  m.CountRecord(kMemsets);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddApi(const ApiRecord& r) {
  Impl& m = *impl_;
  uint32_t name = m.InternStable(r.name);
  m.UseString(name);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kApiCalls, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, name);
  w.Uint(4, r.domain);
  w.Uint(5, r.cbid);
  w.Uint(6, r.thread_id);
  w.Sint(7, m.CorrelationDelta(kApiCalls, r.correlation));
  w.Int(8, r.return_value);
  m.AppendRecord(kChunkApiCalls, w);
  m.CountRecord(kApiCalls);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddNvtxRange(const NvtxRangeRecord& r) {
  Impl& m = *impl_;
  uint32_t name = m.InternVolatile(r.name);
  uint32_t domain = m.InternVolatile(r.domain);
  m.UseString(name);
  m.UseString(domain);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kNvtxRanges, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, name);
  w.Uint(4, domain);
  w.Uint(5, r.thread_id);
  w.Uint(6, r.end_thread_id);
  w.Uint(7, r.category);
  w.Uint(8, r.color);
  w.Bool(9, r.has_color);
  Impl::WritePayload(w, 10, r.payload);
  w.Uint(11, r.flags);
  w.Uint(12, r.id);
  m.AppendRecord(kChunkNvtxRanges, w);
  m.CountRecord(kNvtxRanges);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddNvtxMark(const NvtxMarkRecord& r) {
  Impl& m = *impl_;
  uint32_t name = m.InternVolatile(r.name);
  uint32_t domain = m.InternVolatile(r.domain);
  m.UseString(name);
  m.UseString(domain);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kNvtxMarks, r.time));
  w.Uint(2, name);
  w.Uint(3, domain);
  w.Uint(4, r.thread_id);
  w.Uint(5, r.category);
  w.Uint(6, r.color);
  w.Bool(7, r.has_color);
  Impl::WritePayload(w, 8, r.payload);
  m.AppendRecord(kChunkNvtxMarks, w);
  m.CountRecord(kNvtxMarks);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddSync(const SyncRecord& r) {
  Impl& m = *impl_;
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kSyncs, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, r.type);
  w.Uint(4, r.stream);
  w.Uint(5, r.context);
  w.Sint(6, m.CorrelationDelta(kSyncs, r.correlation));
  w.Uint(7, r.event_id);
  w.Int(8, r.return_value);
  m.AppendRecord(kChunkSyncs, w);
  m.CountRecord(kSyncs);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddOverhead(const OverheadRecord& r) {
  Impl& m = *impl_;
  uint32_t name = m.InternStable(r.name);
  m.UseString(name);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kOverheads, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, r.kind);
  w.Uint(4, name);
  w.Uint(5, r.thread_id);
  w.Uint(6, r.device);
  w.Sint(7, m.CorrelationDelta(kOverheads, r.correlation));
  m.AppendRecord(kChunkOverheads, w);
  m.CountRecord(kOverheads);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddGraphLaunch(const GraphLaunchRecord& r) {
  Impl& m = *impl_;
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(1, m.TimeDelta(kGraphLaunches, r.start));
  w.Sint(2, Impl::Duration(r.start, r.end));
  w.Uint(3, r.graph_id);
  w.Uint(4, r.device);
  w.Uint(5, r.context);
  w.Uint(6, r.stream);
  w.Sint(7, m.CorrelationDelta(kGraphLaunches, r.correlation));
  m.AppendRecord(kChunkGraphLaunches, w);
  m.CountRecord(kGraphLaunches);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddMetricRange(const MetricRangeRecord& r) {
  Impl& m = *impl_;
  uint32_t name = m.InternVolatile(r.name);
  uint32_t domain = m.InternVolatile(r.domain);
  m.UseString(name);
  m.UseString(domain);
  uint32_t num_values = r.values == nullptr ? 0 : r.num_values;
  WireBuffer& b = m.scratch;
  b.Clear();
  WireWriter w = b.Reserve(14 * wire::kMaxScalarFieldBytes + 8 * size_t{num_values});
  w.Uint(1, r.config);
  w.Uint(2, name);
  w.Uint(3, domain);
  w.Uint(4, r.occurrence);
  w.Uint(5, r.occurrences_used);
  w.Sint(6, m.TimeDelta(kMetricRanges, r.start));
  w.Sint(7, Impl::Duration(r.start, r.end));
  w.PackedDoubles(8, r.values, num_values);
  w.Uint(9, r.thread_id);
  w.Uint(10, r.device);
  w.Uint(11, r.context);
  w.Sint(12, r.correlation);  // absolute in kernel mode (proto: not delta-coded)
  w.Uint(13, r.nesting_level);
  w.Uint(14, r.sm_clock_khz);
  b.Commit(w);
  m.chunk.AppendMessage(kChunkMetricRanges, b);
  m.CountRecord(kMetricRanges);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::Flush(bool force) {
  Impl& m = *impl_;
  if (m.finished) return;
  if (m.records_in_chunk == 0 && !m.dirty && !force) return;

  if (m.sequence == 0 && m.has_header) {
    m.chunk.AppendMessage(kChunkHeader, m.header_bytes.data(), m.header_bytes.size());
  }
  {
    WireWriter w = m.chunk.Reserve(2 * wire::kMaxScalarFieldBytes);
    w.Uint(kChunkSequence, m.sequence);
    w.Uint(kChunkTimeBase, m.time_base);
    m.chunk.Commit(w);
  }
  m.AppendStored(kChunkDevices, m.devices);
  m.AppendStored(kChunkContexts, m.contexts);
  m.AppendStored(kChunkThreads, m.threads);
  for (const auto& c : m.metric_configs)
    m.chunk.AppendMessage(kChunkMetricConfigs, c.data(), c.size());

  stats_.bytes_written = m.sink->bytes_written();
  stats_.chunks_written = m.sequence;
  m.scratch.Clear();
  m.EncodeStats(stats_);
  m.chunk.AppendMessage(kChunkStats, m.scratch);

  // Only records that reached the file count as written (the exit line reports this number).
  if (m.sink->WriteChunk(m.chunk.data(), m.chunk.size())) {
    stats_.records_written += m.records_in_chunk;
  } else {
    ++stats_.write_errors;
  }

  ++m.sequence;
  m.chunk.Clear();
  m.time_base_set = false;
  m.time_base = 0;
  for (ListDelta& l : m.lists) l = ListDelta();
  m.records_in_chunk = 0;
  m.dirty = false;
  m.MaybeResetInterning();
}

size_t TraceEncoder::interned_strings() const { return impl_->strings.size() - 1; }

void TraceEncoder::Finish(const FooterInfo& footer) {
  Impl& m = *impl_;
  if (m.finished) return;
  WireBuffer& b = m.scratch;
  b.Clear();
  WireWriter w = b.Reserve(16 * wire::kMaxScalarFieldBytes + Utf8Bound(footer.end_reason));
  w.Bool(1, true);
  w.Uint(2, footer.end_time_ns);
  Utf8Field(w, 3, footer.end_reason);
  w.Uint(4, m.totals[kKernels]);
  w.Uint(5, m.totals[kMemcpys]);
  w.Uint(6, m.totals[kMemsets]);
  w.Uint(7, m.totals[kApiCalls]);
  w.Uint(8, m.totals[kNvtxRanges]);
  w.Uint(9, m.totals[kNvtxMarks]);
  w.Uint(10, m.totals[kSyncs]);
  w.Uint(11, m.totals[kOverheads]);
  w.Uint(12, m.totals[kMetricRanges]);
  w.Uint(13, m.totals[kGraphLaunches]);
  w.Uint(14, m.sequence + 1);
  b.Commit(w);
  m.chunk.AppendMessage(kChunkFooter, b);
  Flush(true);
  m.finished = true;
}

}  // namespace kp
