#include "inject/trace/trace_encoder.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/proto_wire.h"
#include "common/start_predictor.h"
#include "common/utf8.h"
#include "inject/trace/chunk_writer.h"

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

// Field numbers and enum values come from proto/kptrace.proto (generated kptrace_schema.h).
using ChunkField = schema::Chunk;

// GPU records CUPTI gave no timestamps (start = end = 0) are flagged and counted.
uint32_t GpuRecordFlags(uint32_t flags, uint64_t start, uint64_t end, EncoderStats* stats) {
  if (start != 0 || end != 0) return flags;
  ++stats->zero_timestamp_records;
  return flags | schema::RecordFlag::kNoTiming;
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
  kPcStalls,
  kPmSamples,
  kNumRecordKinds
};

struct ShapeKey {
  // name, grid[3], block[3], cluster[3], regs, static, dynamic, local, shared_executed, device:
  // the KernelShape fields of kShapeKeyFields, in order.
  uint32_t v[16];
  bool operator==(const ShapeKey& o) const { return std::memcmp(v, o.v, sizeof v) == 0; }
};

// The KernelShape field each ShapeKey value is written to.
constexpr uint32_t kShapeKeyFields[16] = {
    schema::KernelShape::kName,
    schema::KernelShape::kGridX,
    schema::KernelShape::kGridY,
    schema::KernelShape::kGridZ,
    schema::KernelShape::kBlockX,
    schema::KernelShape::kBlockY,
    schema::KernelShape::kBlockZ,
    schema::KernelShape::kClusterX,
    schema::KernelShape::kClusterY,
    schema::KernelShape::kClusterZ,
    schema::KernelShape::kRegistersPerThread,
    schema::KernelShape::kStaticSharedBytes,
    schema::KernelShape::kDynamicSharedBytes,
    schema::KernelShape::kLocalBytesPerThread,
    schema::KernelShape::kSharedExecutedBytes,
    schema::KernelShape::kDevice,
};

// Format version 3: the kernels or API calls of the current chunk as columns (kp.KernelColumns,
// kp.ApiCallColumns): the column of field f (1..N) holds that field of every record as packed
// varints. A column whose values are all 0 is left out at the flush.
template <size_t N, uint32_t kCountField>
struct ColumnSet {
  WireBuffer columns[N];
  bool nonzero[N] = {};
  uint32_t count = 0;
  size_t bytes = 0;  // of the columns that will be written (those with a value other than 0)

  void Put(uint32_t field, uint64_t v) {
    const size_t i = field - 1;
    WireWriter w = columns[i].Reserve(wire::kMaxVarintBytes);
    w.RawVarint(v);
    columns[i].Commit(w);
    if (nonzero[i]) {
      bytes += w.size();
    } else if (v != 0) {
      nonzero[i] = true;
      bytes += columns[i].size();  // the zeros before it are written too
    }
  }
  // Appends the columns message as field `field` of `chunk` (nothing when there are no records).
  void AppendTo(uint32_t field, WireBuffer* chunk, WireBuffer* scratch) {
    if (count == 0) return;
    scratch->Clear();
    WireWriter w = scratch->Reserve(wire::kMaxScalarFieldBytes);
    w.UintAlways(kCountField, count);
    scratch->Commit(w);
    for (size_t i = 0; i < N; ++i) {
      if (nonzero[i]) scratch->AppendMessage(static_cast<uint32_t>(i + 1), columns[i]);
      columns[i].Clear();
      nonzero[i] = false;
    }
    chunk->AppendMessage(field, *scratch);
    count = 0;
    bytes = 0;
  }
};

// Delta-coding state of one record list in the current chunk.
struct ListDelta {
  bool started = false;
  uint64_t prev_time = 0;
  uint32_t prev_correlation = 0;
  StartPredictor ends;  // kernels, copies, memsets: per stream; API calls: per thread
};

}  // namespace

struct TraceEncoder::Impl {
  ChunkSink* sink;
  WireBuffer chunk;
  // Fixed-field records, one buffer per Chunk field, appended to the chunk at Flush in field
  // order: each list's records lie together, which zstd compresses ~10 % better than records of
  // all kinds interleaved in arrival order (protobuf merges a repeated field wherever its
  // elements are; order within a list is kept, so delta coding is unchanged).
  static constexpr uint32_t kGroupedFields = 32;
  WireBuffer grouped[kGroupedFields];
  size_t grouped_bytes = 0;
  ColumnSet<schema::KernelColumns::kChannel, schema::KernelColumns::kCount> kernel_columns;
  ColumnSet<schema::ApiCallColumns::kReturnValue, schema::ApiCallColumns::kCount> api_columns;
  size_t PendingBytes() const {
    return chunk.size() + grouped_bytes + kernel_columns.bytes + api_columns.bytes;
  }
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
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> pc_stall_reasons;
  std::vector<std::vector<uint8_t>> pm_sample_configs;

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
    // An InternedString written straight into the chunk (both tags are one byte).
    static_assert(schema::InternedString::kId < 16 && schema::InternedString::kValue < 16);
    size_t body = 1 + wire::VarintSize(id) + 1 + wire::VarintSize(s.size()) + s.size();
    WireWriter w = chunk.Reserve(wire::MaxLengthDelimitedBytes(body));
    w.Tag(ChunkField::kStrings, wire::kLengthDelimited);
    w.RawVarint(body);
    w.UintAlways(schema::InternedString::kId, id);
    w.StringAlways(schema::InternedString::kValue, s);
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
    using F = schema::KernelShape;
    w.Uint(F::kId, id);
    w.Uint(F::kName, k.v[0]);
    w.Uint(F::kDemangled, demangled);
    for (uint32_t f = 1; f < 16; ++f) w.Uint(kShapeKeyFields[f], k.v[f]);
    AppendRecord(ChunkField::kKernelShapes, w);
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
  // Format version 2: `start` from the end of the previous record with the same key
  // (common/start_predictor.h), else from the previous record's start.
  int64_t KeyedTimeDelta(RecordKind kind, uint64_t key, uint64_t start, uint64_t end) {
    if (!time_base_set) {
      time_base_set = true;
      time_base = start;
    }
    ListDelta& l = lists[kind];
    const uint64_t base = l.ends.Base(key, l.started ? l.prev_time : time_base);
    l.started = true;
    l.prev_time = start;
    l.ends.Update(key, end);
    return static_cast<int64_t>(start - base);
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
    WireBuffer& list = field < kGroupedFields ? grouped[field] : chunk;
    const size_t before = list.size();
    list.AppendMessage(field, w.data(), w.size());
    if (field < kGroupedFields) grouped_bytes += list.size() - before;
  }
  // Strings stay in `chunk` as they are first used, so they precede every record list.
  void AppendGroupedRecords() {
    for (WireBuffer& list : grouped) {
      if (list.size() == 0) continue;
      chunk.AppendRaw(list.data(), list.size());
      list.Clear();
    }
    grouped_bytes = 0;
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
        sub.UintAlways(schema::NvtxPayload::kU64, p.u64);
        break;
      case NvtxPayloadValue::kI64:
        sub.IntAlways(schema::NvtxPayload::kI64, p.i64);
        break;
      case NvtxPayloadValue::kF64:
        sub.DoubleAlways(schema::NvtxPayload::kF64, p.f64);
        break;
      case NvtxPayloadValue::kU32:
        sub.UintAlways(schema::NvtxPayload::kU32, p.u32);
        break;
      case NvtxPayloadValue::kI32:
        sub.IntAlways(schema::NvtxPayload::kI32, p.i32);
        break;
      case NvtxPayloadValue::kF32:
        sub.FloatAlways(schema::NvtxPayload::kF32, p.f32);
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
    WireWriter w = scratch.Reserve(schema::kNumStatFields * wire::kMaxScalarFieldBytes);
    for (const schema::StatField& f : schema::kStatFields) w.Uint(f.field, s.*f.counter);
    scratch.Commit(w);
  }
};

TraceEncoder::TraceEncoder(ChunkSink* sink, Options options)
    : impl_(new Impl(sink)), options_(options) {}

TraceEncoder::~TraceEncoder() { delete impl_; }

size_t TraceEncoder::pending_bytes() const { return impl_->PendingBytes(); }

void TraceEncoder::SetHeader(const HeaderInfo& h) {
  using F = schema::Header;
  size_t bound = 512 + Utf8Bound(h.kp_version) + Utf8Bound(h.hostname) + Utf8Bound(h.clock) +
                 Utf8Bound(h.driver_version) + Utf8Bound(h.injection_mode) +
                 Utf8Bound(h.output_path) + Utf8Bound(h.run_id) + Utf8Bound(h.boot_id);
  for (const auto& arg : h.command_line) bound += Utf8Bound(arg) + 16;
  for (const auto& kv : h.config) bound += Utf8Bound(kv.first) + Utf8Bound(kv.second) + 48;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(bound);
  Utf8Field(w, F::kKpVersion, h.kp_version);
  w.Uint(F::kPid, h.pid);
  w.Uint(F::kPpid, h.ppid);
  Utf8Field(w, F::kHostname, h.hostname);
  for (const auto& arg : h.command_line) Utf8Field(w, F::kCommandLine, arg, /*always=*/true);
  w.Int(F::kRank, h.rank);
  w.Int(F::kLocalRank, h.local_rank);
  w.Int(F::kWorldSize, h.world_size);
  w.Uint(F::kStartTimeUnixNs, h.start_time_unix_ns);
  w.Uint(F::kStartTimeTraceNs, h.start_time_trace_ns);
  Utf8Field(w, F::kClock, h.clock);
  for (const auto& kv : h.config) {
    WireBuffer& sub = impl_->sub_scratch;
    sub.Clear();
    WireWriter sw = sub.Reserve(Utf8Bound(kv.first) + Utf8Bound(kv.second) + 32);
    Utf8Field(sw, schema::KeyValue::kKey, kv.first);
    Utf8Field(sw, schema::KeyValue::kValue, kv.second);
    w.Message(F::kConfig, sw);
  }
  w.Uint(F::kCuptiApiVersion, h.cupti_api_version);
  w.Int(F::kCudaDriverVersion, h.cuda_driver_version);
  Utf8Field(w, F::kDriverVersion, h.driver_version);
  Utf8Field(w, F::kInjectionMode, h.injection_mode);
  Utf8Field(w, F::kOutputPath, h.output_path);
  Utf8Field(w, F::kRunId, h.run_id);
  w.Uint(F::kStartTimeMonotonicNs, h.start_time_monotonic_ns);
  Utf8Field(w, F::kBootId, h.boot_id);
  b.Commit(w);
  impl_->header_bytes.assign(b.data(), b.data() + b.size());
  impl_->has_header = true;
  if (impl_->sequence == 0) impl_->dirty = true;
}

void TraceEncoder::AddDevice(const DeviceInfo& d) {
  using F = schema::Device;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(512 + Utf8Bound(d.name) + Utf8Bound(d.pci_bus_id));
  w.Uint(F::kId, d.id);
  Utf8Field(w, F::kName, d.name);
  w.BytesAlways(F::kUuid, d.uuid, sizeof d.uuid);
  w.Uint(F::kComputeCapabilityMajor, d.cc_major);
  w.Uint(F::kComputeCapabilityMinor, d.cc_minor);
  w.Uint(F::kSmCount, d.sm_count);
  w.Uint(F::kGlobalMemoryBytes, d.global_memory_bytes);
  w.Uint(F::kGlobalMemoryBandwidthKbps, d.global_memory_bandwidth_kbps);
  w.Uint(F::kCoreClockKhz, d.core_clock_khz);
  w.Uint(F::kMemoryClockKhz, d.memory_clock_khz);
  w.Uint(F::kMaxThreadsPerBlock, d.max_threads_per_block);
  w.Uint(F::kMaxSharedMemoryPerBlock, d.max_shared_memory_per_block);
  w.Uint(F::kMaxRegistersPerBlock, d.max_registers_per_block);
  w.Uint(F::kL2CacheBytes, d.l2_cache_bytes);
  w.Uint(F::kMaxWarpsPerSm, d.max_warps_per_sm);
  w.Uint(F::kNumThreadsPerWarp, d.num_threads_per_warp);
  Utf8Field(w, F::kPciBusId, d.pci_bus_id);
  w.Bool(F::kIsMig, d.is_mig);
  b.Commit(w);
  Impl::Store(&impl_->devices, d.id, b);
  impl_->dirty = true;
}

void TraceEncoder::AddContext(const ContextInfo& c) {
  using F = schema::Context;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(64);
  w.Uint(F::kId, c.id);
  w.Uint(F::kDevice, c.device);
  w.Uint(F::kNullStream, c.null_stream);
  w.Bool(F::kIsGreen, c.is_green);
  b.Commit(w);
  Impl::Store(&impl_->contexts, c.id, b);
  impl_->dirty = true;
}

void TraceEncoder::AddThreadName(uint32_t thread_id, std::string_view name) {
  using F = schema::ThreadInfo;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(64 + Utf8Bound(name));
  w.Uint(F::kThreadId, thread_id);
  Utf8Field(w, F::kName, name);
  b.Commit(w);
  Impl::Store(&impl_->threads, thread_id, b);
  impl_->dirty = true;
}

void TraceEncoder::AddNotice(int severity, std::string_view component, std::string_view message,
                             uint64_t time_ns) {
  using F = schema::Notice;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(64 + Utf8Bound(component) + Utf8Bound(message));
  w.Int(F::kSeverity, severity);
  Utf8Field(w, F::kComponent, component);
  Utf8Field(w, F::kMessage, message);
  w.Uint(F::kTimeNs, time_ns);
  b.Commit(w);
  impl_->chunk.AppendMessage(ChunkField::kNotices, b);
  impl_->dirty = true;
}

void TraceEncoder::AddCaptureWindow(const CaptureWindowRecord& r) {
  using F = schema::CaptureWindow;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w =
      b.Reserve(8 * wire::kMaxScalarFieldBytes + Utf8Bound(r.range) + Utf8Bound(r.end_reason));
  w.Uint(F::kIndex, r.index);
  w.Int(F::kTrigger, static_cast<int>(r.trigger));
  w.Uint(F::kStartNs, r.start_ns);
  w.Uint(F::kEndNs, r.end_ns);
  Utf8Field(w, F::kRange, r.range);
  w.Uint(F::kFirstStep, r.first_step);
  w.Uint(F::kLastStep, r.last_step);
  Utf8Field(w, F::kEndReason, r.end_reason);
  b.Commit(w);
  impl_->chunk.AppendMessage(ChunkField::kCaptureWindows, b);
  impl_->dirty = true;
}

uint32_t TraceEncoder::AddMetricConfig(const MetricConfigInfo& c) {
  using F = schema::MetricConfig;
  size_t bound = 128 + Utf8Bound(c.mode) + Utf8Bound(c.chip);
  for (const auto& m : c.metric_names) bound += Utf8Bound(m) + 16;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  uint32_t id = static_cast<uint32_t>(impl_->metric_configs.size() + 1);
  WireWriter w = b.Reserve(bound);
  w.Uint(F::kId, id);
  for (const auto& m : c.metric_names) Utf8Field(w, F::kMetricNames, m, /*always=*/true);
  w.Uint(F::kNumPasses, c.num_passes);
  Utf8Field(w, F::kMode, c.mode);
  w.Uint(F::kDevice, c.device);
  Utf8Field(w, F::kChip, c.chip);
  w.Uint(F::kSkip, c.skip);
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
  using C = schema::KernelColumns;
  auto& c = m.kernel_columns;
  c.Put(C::kStart,
        wire::ZigZag(m.KeyedTimeDelta(kKernels, StreamKey(r.context, r.stream), r.start, r.end)));
  c.Put(C::kDuration, wire::ZigZag(Impl::Duration(r.start, r.end)));
  c.Put(C::kShape, shape);
  c.Put(C::kStream, r.stream);
  c.Put(C::kCorrelation, wire::ZigZag(m.CorrelationDelta(kKernels, r.correlation)));
  c.Put(C::kContext, r.context);
  c.Put(C::kDevice, r.device);
  c.Put(C::kGraphId, r.graph_id);
  c.Put(C::kGraphNodeId, r.graph_node_id);
  c.Put(C::kFlags, flags);
  c.Put(C::kLaunchType, r.launch_type);
  c.Put(C::kChannel, r.channel);
  ++c.count;
  m.CountRecord(kKernels);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddMemcpy(const MemcpyRecord& r) {
  using F = schema::Memcpy;
  Impl& m = *impl_;
  const uint32_t flags = GpuRecordFlags(r.flags, r.start, r.end, &stats_);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(F::kStart, m.KeyedTimeDelta(kMemcpys, StreamKey(r.context, r.stream), r.start, r.end));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.Uint(F::kBytes, r.bytes);
  w.Uint(F::kCopyKind, r.copy_kind);
  w.Uint(F::kSrcKind, r.src_kind);
  w.Uint(F::kDstKind, r.dst_kind);
  w.Uint(F::kStream, r.stream);
  w.Sint(F::kCorrelation, m.CorrelationDelta(kMemcpys, r.correlation));
  w.Uint(F::kContext, r.context);
  w.Uint(F::kDevice, r.device);
  w.Uint(F::kFlags, flags);
  w.Uint(F::kGraphId, r.graph_id);
  w.Uint(F::kGraphNodeId, r.graph_node_id);
  w.Bool(F::kPeer, r.peer);
  w.Uint(F::kSrcDevice, r.src_device);
  w.Uint(F::kDstDevice, r.dst_device);
  w.Uint(F::kSrcContext, r.src_context);
  w.Uint(F::kDstContext, r.dst_context);
  w.Uint(F::kCopyCount, r.copy_count);
  w.Uint(F::kChannel, r.channel);
  m.AppendRecord(ChunkField::kMemcpys, w);
  m.CountRecord(kMemcpys);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddMemset(const MemsetRecord& r) {
  using F = schema::Memset;
  Impl& m = *impl_;
  const uint32_t flags = GpuRecordFlags(r.flags, r.start, r.end, &stats_);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(F::kStart, m.KeyedTimeDelta(kMemsets, StreamKey(r.context, r.stream), r.start, r.end));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.Uint(F::kBytes, r.bytes);
  w.Uint(F::kValue, r.value);
  w.Uint(F::kMemoryKind, r.memory_kind);
  w.Uint(F::kStream, r.stream);
  w.Sint(F::kCorrelation, m.CorrelationDelta(kMemsets, r.correlation));
  w.Uint(F::kContext, r.context);
  w.Uint(F::kDevice, r.device);
  w.Uint(F::kFlags, flags);
  w.Uint(F::kGraphId, r.graph_id);
  w.Uint(F::kGraphNodeId, r.graph_node_id);
  w.Uint(F::kChannel, r.channel);
  m.AppendRecord(ChunkField::kMemsets, w);
  m.CountRecord(kMemsets);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddApi(const ApiRecord& r) {
  Impl& m = *impl_;
  uint32_t name = m.InternStable(r.name);
  m.UseString(name);
  using C = schema::ApiCallColumns;
  auto& c = m.api_columns;
  c.Put(C::kStart, wire::ZigZag(m.KeyedTimeDelta(kApiCalls, r.thread_id, r.start, r.end)));
  c.Put(C::kDuration, wire::ZigZag(Impl::Duration(r.start, r.end)));
  c.Put(C::kName, name);
  c.Put(C::kDomain, r.domain);
  c.Put(C::kCbid, r.cbid);
  c.Put(C::kThreadId, r.thread_id);
  c.Put(C::kCorrelation, wire::ZigZag(m.CorrelationDelta(kApiCalls, r.correlation)));
  // int32: a negative value is sign-extended to 64 bits, as in a record.
  c.Put(C::kReturnValue, static_cast<uint64_t>(static_cast<int64_t>(r.return_value)));
  ++c.count;
  m.CountRecord(kApiCalls);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddNvtxRange(const NvtxRangeRecord& r) {
  using F = schema::NvtxRange;
  Impl& m = *impl_;
  uint32_t name = m.InternVolatile(r.name);
  uint32_t domain = m.InternVolatile(r.domain);
  m.UseString(name);
  m.UseString(domain);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(F::kStart, m.TimeDelta(kNvtxRanges, r.start));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.Uint(F::kName, name);
  w.Uint(F::kDomain, domain);
  w.Uint(F::kThreadId, r.thread_id);
  w.Uint(F::kEndThreadId, r.end_thread_id);
  w.Uint(F::kCategory, r.category);
  w.Uint(F::kColor, r.color);
  w.Bool(F::kHasColor, r.has_color);
  Impl::WritePayload(w, F::kPayload, r.payload);
  w.Uint(F::kFlags, r.flags);
  w.Uint(F::kId, r.id);
  m.AppendRecord(ChunkField::kNvtxRanges, w);
  m.CountRecord(kNvtxRanges);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddNvtxMark(const NvtxMarkRecord& r) {
  using F = schema::NvtxMark;
  Impl& m = *impl_;
  uint32_t name = m.InternVolatile(r.name);
  uint32_t domain = m.InternVolatile(r.domain);
  m.UseString(name);
  m.UseString(domain);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(F::kTime, m.TimeDelta(kNvtxMarks, r.time));
  w.Uint(F::kName, name);
  w.Uint(F::kDomain, domain);
  w.Uint(F::kThreadId, r.thread_id);
  w.Uint(F::kCategory, r.category);
  w.Uint(F::kColor, r.color);
  w.Bool(F::kHasColor, r.has_color);
  Impl::WritePayload(w, F::kPayload, r.payload);
  m.AppendRecord(ChunkField::kNvtxMarks, w);
  m.CountRecord(kNvtxMarks);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddSync(const SyncRecord& r) {
  using F = schema::Synchronization;
  Impl& m = *impl_;
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(F::kStart, m.TimeDelta(kSyncs, r.start));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.Uint(F::kType, r.type);
  w.Uint(F::kStream, r.stream);
  w.Uint(F::kContext, r.context);
  w.Sint(F::kCorrelation, m.CorrelationDelta(kSyncs, r.correlation));
  w.Uint(F::kEventId, r.event_id);
  w.Int(F::kReturnValue, r.return_value);
  m.AppendRecord(ChunkField::kSyncs, w);
  m.CountRecord(kSyncs);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddOverhead(const OverheadRecord& r) {
  using F = schema::Overhead;
  Impl& m = *impl_;
  uint32_t name = m.InternStable(r.name);
  m.UseString(name);
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(F::kStart, m.TimeDelta(kOverheads, r.start));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.Uint(F::kKind, r.kind);
  w.Uint(F::kName, name);
  w.Uint(F::kThreadId, r.thread_id);
  w.Uint(F::kDevice, r.device);
  w.Sint(F::kCorrelation, m.CorrelationDelta(kOverheads, r.correlation));
  m.AppendRecord(ChunkField::kOverheads, w);
  m.CountRecord(kOverheads);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddGraphLaunch(const GraphLaunchRecord& r) {
  using F = schema::GraphLaunch;
  Impl& m = *impl_;
  uint8_t buf[kRecordScratchBytes];
  WireWriter w(buf);
  w.Sint(F::kStart, m.TimeDelta(kGraphLaunches, r.start));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.Uint(F::kGraphId, r.graph_id);
  w.Uint(F::kDevice, r.device);
  w.Uint(F::kContext, r.context);
  w.Uint(F::kStream, r.stream);
  w.Sint(F::kCorrelation, m.CorrelationDelta(kGraphLaunches, r.correlation));
  m.AppendRecord(ChunkField::kGraphLaunches, w);
  m.CountRecord(kGraphLaunches);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddMetricRange(const MetricRangeRecord& r) {
  using F = schema::MetricRange;
  Impl& m = *impl_;
  uint32_t name = m.InternVolatile(r.name);
  uint32_t domain = m.InternVolatile(r.domain);
  m.UseString(name);
  m.UseString(domain);
  uint32_t num_values = r.values == nullptr ? 0 : r.num_values;
  WireBuffer& b = m.scratch;
  b.Clear();
  WireWriter w = b.Reserve(17 * wire::kMaxScalarFieldBytes + 8 * size_t{num_values});
  w.Uint(F::kConfig, r.config);
  w.Uint(F::kName, name);
  w.Uint(F::kDomain, domain);
  w.Uint(F::kOccurrence, r.occurrence);
  w.Uint(F::kOccurrencesUsed, r.occurrences_used);
  w.Sint(F::kStart, m.TimeDelta(kMetricRanges, r.start));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.PackedDoubles(F::kValues, r.values, num_values);
  w.Uint(F::kThreadId, r.thread_id);
  w.Uint(F::kDevice, r.device);
  w.Uint(F::kContext, r.context);
  w.Sint(F::kCorrelation, r.correlation);  // absolute in kernel mode (proto: not delta-coded)
  w.Uint(F::kNestingLevel, r.nesting_level);
  w.Uint(F::kSmClockKhz, r.sm_clock_khz);
  w.Uint(F::kOccurrenceMinNs, r.occurrence_min_ns);
  w.Uint(F::kOccurrenceMaxNs, r.occurrence_max_ns);
  w.Bool(F::kInconsistent, r.inconsistent);
  b.Commit(w);
  m.chunk.AppendMessage(ChunkField::kMetricRanges, b);
  m.CountRecord(kMetricRanges);
  if (m.PendingBytes() > kHardChunkLimit) Flush();
}

void TraceEncoder::AddPcStallReason(uint32_t device, uint32_t index, std::string_view name) {
  using F = schema::PcStallReason;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  WireWriter w = b.Reserve(2 * wire::kMaxScalarFieldBytes + 8 + Utf8Bound(name));
  w.UintAlways(F::kDevice, device);
  w.UintAlways(F::kIndex, index);
  Utf8Field(w, F::kName, name);
  b.Commit(w);
  Impl::Store(&impl_->pc_stall_reasons, (device << 16) ^ index, b);
  impl_->dirty = true;
}

void TraceEncoder::AddPcStalls(const PcStallsRecord& r) {
  using F = schema::PcStalls;
  using P = schema::PcStallPc;
  Impl& m = *impl_;
  const std::string_view kernel = r.kernel == nullptr ? std::string_view() : r.kernel;
  size_t bound = 8 * wire::kMaxScalarFieldBytes + 8 + Utf8Bound(kernel) +
                 2 * size_t{r.num_reasons} * wire::kMaxScalarFieldBytes;
  for (uint32_t i = 0; i < r.num_pcs; ++i) {
    const PcStallsRecord::Pc& pc = r.pcs[i];
    bound += 8 * wire::kMaxScalarFieldBytes + 16 +
             Utf8Bound(pc.file == nullptr ? std::string_view() : pc.file) +
             2 * size_t{pc.num_reasons} * wire::kMaxScalarFieldBytes;
  }
  WireBuffer& b = m.scratch;
  b.Clear();
  WireWriter w = b.Reserve(bound);
  w.UintAlways(F::kDevice, r.device);
  Utf8Field(w, F::kKernel, kernel);
  for (uint32_t i = 0; i < r.num_reasons; ++i) {
    w.UintAlways(F::kReasonIndex, r.reason_index[i]);
    w.UintAlways(F::kSamples, r.samples[i]);
  }
  for (uint32_t i = 0; i < r.num_pcs; ++i) {
    const PcStallsRecord::Pc& pc = r.pcs[i];
    WireBuffer& sb = m.sub_scratch;
    sb.Clear();
    WireWriter sub = sb.Reserve(bound);
    sub.UintAlways(P::kPcOffset, pc.pc_offset);
    for (uint32_t k = 0; k < pc.num_reasons; ++k) {
      sub.UintAlways(P::kReasonIndex, pc.reason_index[k]);
      sub.UintAlways(P::kSamples, pc.samples[k]);
    }
    if (pc.file != nullptr) Utf8Field(sub, P::kFile, pc.file);
    sub.Uint(P::kLine, pc.line);
    w.Message(F::kTopPcs, sub);
  }
  w.Uint(F::kTimeNs, r.time_ns);
  w.Uint(F::kSamplingPeriod, r.sampling_period);
  b.Commit(w);
  m.chunk.AppendMessage(ChunkField::kPcStalls, b);
  m.CountRecord(kPcStalls);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

uint32_t TraceEncoder::AddPmSampleConfig(const PmSampleConfigInfo& c) {
  using F = schema::PmSampleConfig;
  size_t bound = 128 + Utf8Bound(c.chip);
  for (const auto& n : c.counter_names) bound += Utf8Bound(n) + 16;
  WireBuffer& b = impl_->scratch;
  b.Clear();
  uint32_t id = static_cast<uint32_t>(impl_->pm_sample_configs.size() + 1);
  WireWriter w = b.Reserve(bound);
  w.Uint(F::kId, id);
  w.Uint(F::kDevice, c.device);
  for (const auto& n : c.counter_names) Utf8Field(w, F::kCounterNames, n, /*always=*/true);
  w.Uint(F::kIntervalNs, c.interval_ns);
  Utf8Field(w, F::kChip, c.chip);
  b.Commit(w);
  impl_->pm_sample_configs.emplace_back(b.data(), b.data() + b.size());
  impl_->dirty = true;
  return id;
}

void TraceEncoder::AddPmSample(const PmSampleRecord& r) {
  using F = schema::PmSample;
  Impl& m = *impl_;
  uint32_t num_values = r.values == nullptr ? 0 : r.num_values;
  WireBuffer& b = m.scratch;
  b.Clear();
  WireWriter w = b.Reserve(5 * wire::kMaxScalarFieldBytes + 8 * size_t{num_values});
  w.Uint(F::kConfig, r.config);
  w.Sint(F::kStart, m.TimeDelta(kPmSamples, r.start));
  w.Sint(F::kDuration, Impl::Duration(r.start, r.end));
  w.PackedDoubles(F::kValues, r.values, num_values);
  w.Uint(F::kDevice, r.device);
  b.Commit(w);
  m.chunk.AppendMessage(ChunkField::kPmSamples, b);
  m.CountRecord(kPmSamples);
  if (m.chunk.size() > kHardChunkLimit) Flush();
}

void TraceEncoder::Flush(bool force) {
  Impl& m = *impl_;
  if (m.finished) return;
  if (m.records_in_chunk == 0 && !m.dirty && !force) return;

  m.AppendGroupedRecords();
  m.kernel_columns.AppendTo(ChunkField::kKernelColumns, &m.chunk, &m.sub_scratch);
  m.api_columns.AppendTo(ChunkField::kApiCallColumns, &m.chunk, &m.sub_scratch);
  if (m.sequence == 0 && m.has_header) {
    m.chunk.AppendMessage(ChunkField::kHeader, m.header_bytes.data(), m.header_bytes.size());
  }
  {
    WireWriter w = m.chunk.Reserve(2 * wire::kMaxScalarFieldBytes);
    w.Uint(ChunkField::kSequence, m.sequence);
    w.Uint(ChunkField::kTimeBaseNs, m.time_base);
    m.chunk.Commit(w);
  }
  m.AppendStored(ChunkField::kDevices, m.devices);
  m.AppendStored(ChunkField::kContexts, m.contexts);
  m.AppendStored(ChunkField::kThreads, m.threads);
  for (const auto& c : m.metric_configs)
    m.chunk.AppendMessage(ChunkField::kMetricConfigs, c.data(), c.size());
  m.AppendStored(ChunkField::kPcStallReasons, m.pc_stall_reasons);
  for (const auto& c : m.pm_sample_configs)
    m.chunk.AppendMessage(ChunkField::kPmSampleConfigs, c.data(), c.size());

  stats_.bytes_written = m.sink->bytes_written();
  stats_.chunks_written = m.sequence;
  m.scratch.Clear();
  m.EncodeStats(stats_);
  m.chunk.AppendMessage(ChunkField::kStats, m.scratch);

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
  using F = schema::Footer;
  Impl& m = *impl_;
  if (m.finished) return;
  WireBuffer& b = m.scratch;
  b.Clear();
  WireWriter w = b.Reserve(16 * wire::kMaxScalarFieldBytes + Utf8Bound(footer.end_reason));
  w.Bool(F::kCleanEnd, true);
  w.Uint(F::kEndTimeNs, footer.end_time_ns);
  Utf8Field(w, F::kEndReason, footer.end_reason);
  w.Uint(F::kKernels, m.totals[kKernels]);
  w.Uint(F::kMemcpys, m.totals[kMemcpys]);
  w.Uint(F::kMemsets, m.totals[kMemsets]);
  w.Uint(F::kApiCalls, m.totals[kApiCalls]);
  w.Uint(F::kNvtxRanges, m.totals[kNvtxRanges]);
  w.Uint(F::kNvtxMarks, m.totals[kNvtxMarks]);
  w.Uint(F::kSyncs, m.totals[kSyncs]);
  w.Uint(F::kOverheads, m.totals[kOverheads]);
  w.Uint(F::kMetricRanges, m.totals[kMetricRanges]);
  w.Uint(F::kGraphLaunches, m.totals[kGraphLaunches]);
  w.Uint(F::kChunks, m.sequence + 1);
  w.Uint(F::kPcStalls, m.totals[kPcStalls]);
  w.Uint(F::kPmSamples, m.totals[kPmSamples]);
  b.Commit(w);
  m.chunk.AppendMessage(ChunkField::kFooter, b);
  Flush(true);
  m.finished = true;
}

}  // namespace kp
