#include "tools/reader/chunk_decoder.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>

#include <array>
#include <cstring>

namespace kp {
namespace {

using google::protobuf::FieldDescriptor;

constexpr uint64_t kWireVarint = 0;
constexpr uint64_t kWireFixed64 = 1;
constexpr uint64_t kWireLength = 2;
constexpr uint64_t kWireFixed32 = 5;
constexpr int kRecordDepth = 1;  // records are fields of the chunk (depth 0)

constexpr uint64_t Tag(int number, uint64_t wire_type) {
  return (static_cast<uint64_t>(number) << 3) | wire_type;
}

// proto3 scalar conversions from a varint, as libprotobuf does them.
inline int64_t S64(uint64_t v) { return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1)); }
inline uint32_t U32(uint64_t v) { return static_cast<uint32_t>(v); }
inline int32_t I32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
inline bool Bool(uint64_t v) { return v != 0; }
template <typename E>
inline E Enum(uint64_t v) {
  return static_cast<E>(I32(v));
}

// The budget types of the chunk's fields, looked up once.
struct Types {
  static constexpr int kMaxChunkField = 64;
  const BudgetType* chunk = ChunkBudget::ChunkType();
  std::array<const BudgetType*, kMaxChunkField> field{};      // message type per chunk field
  std::array<uint64_t, kMaxChunkField> record_cost{};         // slot + object, repeated fields
  std::array<const FieldDescriptor*, kMaxChunkField> desc{};  // for libprotobuf's parse
  const BudgetType* payload = nullptr;
  uint64_t payload_cost = 0;
  Types() {
    const google::protobuf::Descriptor* d = Chunk::descriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      if (f->number() >= kMaxChunkField) continue;
      const auto n = static_cast<size_t>(f->number());
      desc[n] = f;
      field[n] = ChunkBudget::FieldType(chunk, n);
      if (field[n] != nullptr) record_cost[n] = ChunkBudget::ObjectCost(field[n], f->is_repeated());
    }
    payload = ChunkBudget::FieldType(field[Chunk::kNvtxRangesFieldNumber],
                                     NvtxRange::kPayloadFieldNumber);
    payload_cost = ChunkBudget::ObjectCost(payload, false);
  }
};

const Types& TheTypes() {
  static const Types types;
  return types;
}

// The fields kernels, copies and memsets share (their numbers come from each message type).
template <typename R>
bool SetGpuRecordField(R* m, uint64_t n, uint64_t v) {
  switch (n) {
    case R::kStartFieldNumber:
      m->set_start(S64(v));
      return true;
    case R::kDurationFieldNumber:
      m->set_duration(S64(v));
      return true;
    case R::kStreamFieldNumber:
      m->set_stream(U32(v));
      return true;
    case R::kCorrelationFieldNumber:
      m->set_correlation(S64(v));
      return true;
    case R::kContextFieldNumber:
      m->set_context(U32(v));
      return true;
    case R::kDeviceFieldNumber:
      m->set_device(U32(v));
      return true;
    case R::kFlagsFieldNumber:
      m->set_flags(U32(v));
      return true;
    case R::kGraphIdFieldNumber:
      m->set_graph_id(U32(v));
      return true;
    case R::kGraphNodeIdFieldNumber:
      m->set_graph_node_id(v);
      return true;
    default:
      return false;
  }
}

// The fields NVTX ranges and marks share.
template <typename R>
bool SetNvtxField(R* m, uint64_t n, uint64_t v) {
  switch (n) {
    case R::kNameFieldNumber:
      m->set_name(U32(v));
      return true;
    case R::kDomainFieldNumber:
      m->set_domain(U32(v));
      return true;
    case R::kThreadIdFieldNumber:
      m->set_thread_id(U32(v));
      return true;
    case R::kCategoryFieldNumber:
      m->set_category(U32(v));
      return true;
    case R::kColorFieldNumber:
      m->set_color(U32(v));
      return true;
    case R::kHasColorFieldNumber:
      m->set_has_color(Bool(v));
      return true;
    default:
      return false;
  }
}

// Decodes the fields of one record of type M in p[0..end). `set(m, number, value)` stores a
// varint field the decoder knows and returns true; `other(m, tag, &p)` may take a field of
// another wire type (returns 1 taken, 0 not taken, -1 error). Everything else goes to the budget.
template <typename M, typename Set, typename Other>
bool DecodeFields(ChunkBudget& b, const BudgetType* t, uint8_t* p, const uint8_t* end, M* m,
                  int depth, Set set, Other other) {
  while (p < end) {
    uint64_t tag;
    if (!ReadWireVarint(&p, end, &tag)) return b.Malformed();
    if ((tag & 7) == kWireVarint) {
      uint8_t* at = p;
      uint64_t v;
      if (!ReadWireVarint(&p, end, &v)) return b.Malformed();
      if (set(m, tag >> 3, v)) continue;
      p = at;
    } else {
      const int taken = other(m, tag, &p, end);
      if (taken < 0) return false;
      if (taken > 0) continue;
    }
    if (!b.Field(t, tag, &p, end, depth)) return false;
  }
  return true;
}

constexpr auto kNoOther = [](auto*, uint64_t, uint8_t**, const uint8_t*) { return 0; };

bool DecodePayload(ChunkBudget& b, const BudgetType* t, uint8_t* p, const uint8_t* end,
                   NvtxPayload* m) {
  using P = NvtxPayload;
  return DecodeFields(
      b, t, p, end, m, kRecordDepth + 1,
      [](P* m, uint64_t number, uint64_t v) {
        switch (number) {
          case P::kU64FieldNumber:
            m->set_u64(v);
            return true;
          case P::kI64FieldNumber:
            m->set_i64(static_cast<int64_t>(v));
            return true;
          case P::kU32FieldNumber:
            m->set_u32(U32(v));
            return true;
          case P::kI32FieldNumber:
            m->set_i32(I32(v));
            return true;
          default:
            return false;
        }
      },
      [](P* m, uint64_t tag, uint8_t** pp, const uint8_t* end) {
        if (tag == Tag(P::kF64FieldNumber, kWireFixed64) && end - *pp >= 8) {
          double d;
          std::memcpy(&d, *pp, 8);
          m->set_f64(d);
          *pp += 8;
          return 1;
        }
        if (tag == Tag(P::kF32FieldNumber, kWireFixed32) && end - *pp >= 4) {
          float f;
          std::memcpy(&f, *pp, 4);
          m->set_f32(f);
          *pp += 4;
          return 1;
        }
        return 0;
      });
}

// An NVTX record's payload field (length-delimited): charged like libprotobuf's object, then
// decoded into the record's payload (merging, as libprotobuf does with a repeated field).
template <typename M>
int TakePayload(ChunkBudget& b, M* m, uint64_t tag, uint8_t** pp, const uint8_t* end) {
  if (tag != Tag(M::kPayloadFieldNumber, kWireLength)) return 0;
  const Types& ty = TheTypes();
  uint64_t len;
  if (!ReadWireVarint(pp, end, &len) || len > static_cast<uint64_t>(end - *pp)) {
    b.Malformed();
    return -1;
  }
  uint8_t* body = *pp;
  *pp += len;
  if (!b.Add(ty.payload_cost)) return -1;
  return DecodePayload(b, ty.payload, body, body + len, m->mutable_payload()) ? 1 : -1;
}

// Decodes one record of Chunk field `number` into the list's new element.
bool DecodeRecord(ChunkBudget& b, uint64_t number, uint8_t* p, const uint8_t* end, Chunk* c) {
  const Types& ty = TheTypes();
  const BudgetType* t = ty.field[number];
  const int d = kRecordDepth;
  switch (number) {
    case Chunk::kStringsFieldNumber: {
      InternedString* m = c->add_strings();
      return DecodeFields(
          b, t, p, end, m, d,
          [](InternedString* m, uint64_t n, uint64_t v) {
            if (n != InternedString::kIdFieldNumber) return false;
            m->set_id(U32(v));
            return true;
          },
          [&b, t](InternedString* m, uint64_t tag, uint8_t** pp, const uint8_t* end) {
            if (tag != Tag(InternedString::kValueFieldNumber, kWireLength)) return 0;
            uint8_t* at = *pp;
            if (!b.Field(t, tag, pp, end, kRecordDepth)) return -1;  // charges and repairs
            uint64_t len;
            ReadWireVarint(&at, end, &len);
            m->mutable_value()->assign(reinterpret_cast<const char*>(at), len);
            return 1;
          });
    }
    case Chunk::kKernelShapesFieldNumber: {
      using S = KernelShape;
      return DecodeFields(
          b, t, p, end, c->add_kernel_shapes(), d,
          [](S* m, uint64_t n, uint64_t v) {
            switch (n) {
              case S::kIdFieldNumber:
                m->set_id(U32(v));
                return true;
              case S::kNameFieldNumber:
                m->set_name(U32(v));
                return true;
              case S::kDemangledFieldNumber:
                m->set_demangled(U32(v));
                return true;
              case S::kGridXFieldNumber:
                m->set_grid_x(U32(v));
                return true;
              case S::kGridYFieldNumber:
                m->set_grid_y(U32(v));
                return true;
              case S::kGridZFieldNumber:
                m->set_grid_z(U32(v));
                return true;
              case S::kBlockXFieldNumber:
                m->set_block_x(U32(v));
                return true;
              case S::kBlockYFieldNumber:
                m->set_block_y(U32(v));
                return true;
              case S::kBlockZFieldNumber:
                m->set_block_z(U32(v));
                return true;
              case S::kClusterXFieldNumber:
                m->set_cluster_x(U32(v));
                return true;
              case S::kClusterYFieldNumber:
                m->set_cluster_y(U32(v));
                return true;
              case S::kClusterZFieldNumber:
                m->set_cluster_z(U32(v));
                return true;
              case S::kRegistersPerThreadFieldNumber:
                m->set_registers_per_thread(U32(v));
                return true;
              case S::kStaticSharedBytesFieldNumber:
                m->set_static_shared_bytes(U32(v));
                return true;
              case S::kDynamicSharedBytesFieldNumber:
                m->set_dynamic_shared_bytes(U32(v));
                return true;
              case S::kLocalBytesPerThreadFieldNumber:
                m->set_local_bytes_per_thread(U32(v));
                return true;
              case S::kSharedExecutedBytesFieldNumber:
                m->set_shared_executed_bytes(U32(v));
                return true;
              case S::kDeviceFieldNumber:
                m->set_device(U32(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    case Chunk::kKernelsFieldNumber: {
      using K = Kernel;
      return DecodeFields(
          b, t, p, end, c->add_kernels(), d,
          [](K* m, uint64_t n, uint64_t v) {
            if (SetGpuRecordField(m, n, v)) return true;
            switch (n) {
              case K::kShapeFieldNumber:
                m->set_shape(U32(v));
                return true;
              case K::kLaunchTypeFieldNumber:
                m->set_launch_type(U32(v));
                return true;
              case K::kChannelFieldNumber:
                m->set_channel(U32(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    case Chunk::kMemcpysFieldNumber: {
      using M = Memcpy;
      return DecodeFields(
          b, t, p, end, c->add_memcpys(), d,
          [](M* m, uint64_t n, uint64_t v) {
            if (SetGpuRecordField(m, n, v)) return true;
            switch (n) {
              case M::kBytesFieldNumber:
                m->set_bytes(v);
                return true;
              case M::kCopyKindFieldNumber:
                m->set_copy_kind(Enum<CopyKind>(v));
                return true;
              case M::kSrcKindFieldNumber:
                m->set_src_kind(Enum<MemoryKind>(v));
                return true;
              case M::kDstKindFieldNumber:
                m->set_dst_kind(Enum<MemoryKind>(v));
                return true;
              case M::kPeerFieldNumber:
                m->set_peer(Bool(v));
                return true;
              case M::kSrcDeviceFieldNumber:
                m->set_src_device(U32(v));
                return true;
              case M::kDstDeviceFieldNumber:
                m->set_dst_device(U32(v));
                return true;
              case M::kSrcContextFieldNumber:
                m->set_src_context(U32(v));
                return true;
              case M::kDstContextFieldNumber:
                m->set_dst_context(U32(v));
                return true;
              case M::kCopyCountFieldNumber:
                m->set_copy_count(U32(v));
                return true;
              case M::kChannelFieldNumber:
                m->set_channel(U32(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    case Chunk::kMemsetsFieldNumber: {
      using M = Memset;
      return DecodeFields(
          b, t, p, end, c->add_memsets(), d,
          [](M* m, uint64_t n, uint64_t v) {
            if (SetGpuRecordField(m, n, v)) return true;
            switch (n) {
              case M::kBytesFieldNumber:
                m->set_bytes(v);
                return true;
              case M::kValueFieldNumber:
                m->set_value(U32(v));
                return true;
              case M::kMemoryKindFieldNumber:
                m->set_memory_kind(Enum<MemoryKind>(v));
                return true;
              case M::kChannelFieldNumber:
                m->set_channel(U32(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    case Chunk::kApiCallsFieldNumber: {
      using A = ApiCall;
      return DecodeFields(
          b, t, p, end, c->add_api_calls(), d,
          [](A* m, uint64_t n, uint64_t v) {
            switch (n) {
              case A::kStartFieldNumber:
                m->set_start(S64(v));
                return true;
              case A::kDurationFieldNumber:
                m->set_duration(S64(v));
                return true;
              case A::kNameFieldNumber:
                m->set_name(U32(v));
                return true;
              case A::kDomainFieldNumber:
                m->set_domain(Enum<ApiDomain>(v));
                return true;
              case A::kCbidFieldNumber:
                m->set_cbid(U32(v));
                return true;
              case A::kThreadIdFieldNumber:
                m->set_thread_id(U32(v));
                return true;
              case A::kCorrelationFieldNumber:
                m->set_correlation(S64(v));
                return true;
              case A::kReturnValueFieldNumber:
                m->set_return_value(I32(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    case Chunk::kNvtxRangesFieldNumber: {
      using R = NvtxRange;
      return DecodeFields(
          b, t, p, end, c->add_nvtx_ranges(), d,
          [](R* m, uint64_t n, uint64_t v) {
            if (SetNvtxField(m, n, v)) return true;
            switch (n) {
              case R::kStartFieldNumber:
                m->set_start(S64(v));
                return true;
              case R::kDurationFieldNumber:
                m->set_duration(S64(v));
                return true;
              case R::kEndThreadIdFieldNumber:
                m->set_end_thread_id(U32(v));
                return true;
              case R::kFlagsFieldNumber:
                m->set_flags(U32(v));
                return true;
              case R::kIdFieldNumber:
                m->set_id(v);
                return true;
              default:
                return false;
            }
          },
          [&b](R* m, uint64_t tag, uint8_t** pp, const uint8_t* end) {
            return TakePayload(b, m, tag, pp, end);
          });
    }
    case Chunk::kNvtxMarksFieldNumber: {
      using K = NvtxMark;
      return DecodeFields(
          b, t, p, end, c->add_nvtx_marks(), d,
          [](K* m, uint64_t n, uint64_t v) {
            if (SetNvtxField(m, n, v)) return true;
            switch (n) {
              case K::kTimeFieldNumber:
                m->set_time(S64(v));
                return true;
              default:
                return false;
            }
          },
          [&b](K* m, uint64_t tag, uint8_t** pp, const uint8_t* end) {
            return TakePayload(b, m, tag, pp, end);
          });
    }
    case Chunk::kSyncsFieldNumber: {
      using S = Synchronization;
      return DecodeFields(
          b, t, p, end, c->add_syncs(), d,
          [](S* m, uint64_t n, uint64_t v) {
            switch (n) {
              case S::kStartFieldNumber:
                m->set_start(S64(v));
                return true;
              case S::kDurationFieldNumber:
                m->set_duration(S64(v));
                return true;
              case S::kTypeFieldNumber:
                m->set_type(Enum<SyncType>(v));
                return true;
              case S::kStreamFieldNumber:
                m->set_stream(U32(v));
                return true;
              case S::kContextFieldNumber:
                m->set_context(U32(v));
                return true;
              case S::kCorrelationFieldNumber:
                m->set_correlation(S64(v));
                return true;
              case S::kEventIdFieldNumber:
                m->set_event_id(U32(v));
                return true;
              case S::kReturnValueFieldNumber:
                m->set_return_value(I32(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    case Chunk::kOverheadsFieldNumber: {
      using O = Overhead;
      return DecodeFields(
          b, t, p, end, c->add_overheads(), d,
          [](O* m, uint64_t n, uint64_t v) {
            switch (n) {
              case O::kStartFieldNumber:
                m->set_start(S64(v));
                return true;
              case O::kDurationFieldNumber:
                m->set_duration(S64(v));
                return true;
              case O::kKindFieldNumber:
                m->set_kind(U32(v));
                return true;
              case O::kNameFieldNumber:
                m->set_name(U32(v));
                return true;
              case O::kThreadIdFieldNumber:
                m->set_thread_id(U32(v));
                return true;
              case O::kDeviceFieldNumber:
                m->set_device(U32(v));
                return true;
              case O::kCorrelationFieldNumber:
                m->set_correlation(S64(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    case Chunk::kGraphLaunchesFieldNumber: {
      using G = GraphLaunch;
      return DecodeFields(
          b, t, p, end, c->add_graph_launches(), d,
          [](G* m, uint64_t n, uint64_t v) {
            switch (n) {
              case G::kStartFieldNumber:
                m->set_start(S64(v));
                return true;
              case G::kDurationFieldNumber:
                m->set_duration(S64(v));
                return true;
              case G::kGraphIdFieldNumber:
                m->set_graph_id(U32(v));
                return true;
              case G::kDeviceFieldNumber:
                m->set_device(U32(v));
                return true;
              case G::kContextFieldNumber:
                m->set_context(U32(v));
                return true;
              case G::kStreamFieldNumber:
                m->set_stream(U32(v));
                return true;
              case G::kCorrelationFieldNumber:
                m->set_correlation(S64(v));
                return true;
              default:
                return false;
            }
          },
          kNoOther);
    }
    default:
      return false;
  }
}

bool IsDecodedHere(uint64_t number) {
  switch (number) {
    case Chunk::kStringsFieldNumber:
    case Chunk::kKernelShapesFieldNumber:
    case Chunk::kKernelsFieldNumber:
    case Chunk::kMemcpysFieldNumber:
    case Chunk::kMemsetsFieldNumber:
    case Chunk::kApiCallsFieldNumber:
    case Chunk::kNvtxRangesFieldNumber:
    case Chunk::kNvtxMarksFieldNumber:
    case Chunk::kSyncsFieldNumber:
    case Chunk::kOverheadsFieldNumber:
    case Chunk::kGraphLaunchesFieldNumber:
      return true;
    default:
      return false;
  }
}

// A message field of the chunk left to libprotobuf: body[0..n) parsed into the field (a new
// element of a repeated field; merged into a singular one, as a parse of the chunk would).
bool ParseMessageField(const FieldDescriptor* f, const uint8_t* body, size_t n, Chunk* c) {
  const google::protobuf::Reflection* r = c->GetReflection();
  google::protobuf::Message* m = f->is_repeated() ? r->AddMessage(c, f) : r->MutableMessage(c, f);
  google::protobuf::io::CodedInputStream in(body, static_cast<int>(n));
  return m->MergeFromCodedStream(&in) && in.ConsumedEntireMessage();
}

bool IsColumnTable(uint64_t tag) {
  return tag == Tag(Chunk::kKernelColumnsFieldNumber, kWireLength) ||
         tag == Tag(Chunk::kApiCallColumnsFieldNumber, kWireLength);
}

int ColumnCount(uint64_t number) {
  return number == Chunk::kKernelColumnsFieldNumber
             ? static_cast<int>(KernelColumns::kChannelFieldNumber)
             : static_cast<int>(ApiCallColumns::kReturnValueFieldNumber);
}

// A column table met again after its first message was left in spans: libprotobuf merges the
// two, so the first goes to it too (already charged when it was left in spans), and the spans
// are dropped.
bool ParseSpannedTable(ChunkBudget& b, uint64_t tag, ColumnSpans::Table* t, const uint8_t* end,
                       Chunk* c) {
  uint8_t* at = t->field;
  uint64_t len;
  ReadWireVarint(&at, end, &len);
  *t = ColumnSpans::Table{};
  if (!ParseMessageField(TheTypes().desc[tag >> 3], at, static_cast<size_t>(len), c)) {
    return b.Malformed();
  }
  return true;
}

// The objects the chunk's top level asks for (records and other messages, slot and object, not
// their contents): a lower bound of the full charge, read from the framing alone, so that a
// chunk of millions of empty records is refused before any of them is allocated. False if it
// passes `budget_bytes`. Damaged framing ends the estimate; the decode then finds it.
bool TopLevelFits(const uint8_t* p, const uint8_t* end, uint64_t budget_bytes) {
  const Types& ty = TheTypes();
  uint64_t cost = ChunkBudget::ObjectCost(ty.chunk, false);
  auto* q = const_cast<uint8_t*>(p);
  while (q < end) {
    uint64_t tag, v;
    if (!ReadWireVarint(&q, end, &tag)) return true;
    switch (tag & 7) {
      case kWireVarint:
        if (!ReadWireVarint(&q, end, &v)) return true;
        break;
      case kWireFixed64:
        if (end - q < 8) return true;
        q += 8;
        break;
      case kWireFixed32:
        if (end - q < 4) return true;
        q += 4;
        break;
      case kWireLength: {
        if (!ReadWireVarint(&q, end, &v) || v > static_cast<uint64_t>(end - q)) return true;
        q += v;
        const uint64_t number = tag >> 3;
        if (number < Types::kMaxChunkField) cost += ty.record_cost[number];
        if (cost > budget_bytes) return false;
        break;
      }
      default:
        return true;
    }
  }
  return true;
}

}  // namespace

ChunkScanResult DecodeChunk(uint8_t* msg, size_t n, uint64_t budget_bytes, Chunk* chunk,
                            ColumnSpans* spans) {
  const Types& ty = TheTypes();
  ChunkScanResult r;
  ChunkBudget b(budget_bytes, &r);
  if (spans != nullptr) {
    // The kernels and API calls of the chunk decoded before are kept, uncleared: the column
    // rows of this one overwrite them, or ExpandColumns or a row-form record clears them.
    *spans = ColumnSpans{};
    google::protobuf::RepeatedPtrField<Kernel> kernels;
    google::protobuf::RepeatedPtrField<ApiCall> api_calls;
    kernels.Swap(chunk->mutable_kernels());
    api_calls.Swap(chunk->mutable_api_calls());
    chunk->Clear();
    chunk->mutable_kernels()->Swap(&kernels);
    chunk->mutable_api_calls()->Swap(&api_calls);
    spans->stale_kernels = !chunk->kernels().empty();
    spans->stale_api_calls = !chunk->api_calls().empty();
  } else {
    chunk->Clear();
  }
  if (!TopLevelFits(msg, msg + n, budget_bytes)) {
    r.over_budget = true;
    return r;
  }
  if (!b.Add(ChunkBudget::ObjectCost(ty.chunk, false))) return r;
  uint8_t* p = msg;
  const uint8_t* end = msg + n;
  while (p < end) {
    uint64_t tag;
    if (!ReadWireVarint(&p, end, &tag)) {
      b.Malformed();
      return r;
    }
    const uint64_t number = tag >> 3;
    uint8_t* at = p;
    if (tag == Tag(Chunk::kSequenceFieldNumber, kWireVarint) ||
        tag == Tag(Chunk::kTimeBaseNsFieldNumber, kWireVarint)) {
      uint64_t v;
      if (!ReadWireVarint(&p, end, &v)) {
        b.Malformed();
        return r;
      }
      if (number == Chunk::kSequenceFieldNumber) {
        chunk->set_sequence(v);
      } else {
        chunk->set_time_base_ns(v);
      }
      continue;
    }
    // A length-delimited field's body at p (p then past it); false if it passes the end.
    uint8_t* body = nullptr;
    uint64_t len = 0;
    auto take_body = [&] {
      if (!ReadWireVarint(&p, end, &len) || len > static_cast<uint64_t>(end - p)) {
        return b.Malformed();
      }
      body = p;
      p += len;
      return true;
    };
    if ((tag & 7) == kWireLength && IsDecodedHere(number)) {
      if (!take_body()) return r;
      if (!b.Add(ty.record_cost[number])) return r;
      if (spans != nullptr && number == Chunk::kKernelsFieldNumber && spans->stale_kernels) {
        chunk->clear_kernels();  // a row-form kernel: the last chunk's go
        spans->stale_kernels = false;
      }
      if (spans != nullptr && number == Chunk::kApiCallsFieldNumber && spans->stale_api_calls) {
        chunk->clear_api_calls();
        spans->stale_api_calls = false;
      }
      if (!DecodeRecord(b, number, body, body + len, chunk)) return r;
      continue;
    }
    if (spans != nullptr && IsColumnTable(tag)) {
      ColumnSpans::Table* t =
          number == Chunk::kKernelColumnsFieldNumber ? &spans->kernels : &spans->api_calls;
      if (!take_body()) return r;
      const bool parsed = number == Chunk::kKernelColumnsFieldNumber
                              ? chunk->has_kernel_columns()
                              : chunk->has_api_call_columns();
      if (!t->present && !parsed) {
        if (ScanColumnTable(body, len, ColumnCount(number), t)) {
          t->field = at;
          // Charged as libprotobuf's parse of it would be, so that the budget decides alike.
          uint8_t* q = at;
          if (!b.Field(ty.chunk, tag, &q, end, 0)) return r;
          continue;
        }
      } else if (t->present && !ParseSpannedTable(b, tag, t, end, chunk)) {
        return r;
      }
      p = at;  // left to libprotobuf, as is every later message of the field
    }
    // Anything else: charged (and walked, repaired) by the budget; a message field is then
    // parsed from its bytes by libprotobuf, other fields are skipped.
    if (!b.Field(ty.chunk, tag, &p, end, 0)) return r;
    if ((tag & 7) == kWireLength && number < Types::kMaxChunkField && ty.field[number] != nullptr) {
      uint64_t size;
      ReadWireVarint(&at, end, &size);
      if (!ParseMessageField(ty.desc[number], at, static_cast<size_t>(size), chunk)) {
        b.Malformed();
        return r;
      }
    }
  }
  return r;
}

}  // namespace kp
