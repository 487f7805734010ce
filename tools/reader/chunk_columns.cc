#include "tools/reader/chunk_columns.h"

#include <climits>
#include <cstring>

#include "common/proto_wire.h"
#include "tools/reader/chunk_budget.h"

namespace kp {
namespace {

// Field `n` of every record: a column of `count` values, or absent (all 0).
template <typename Column>
bool Fits(const Column& column, uint32_t count) {
  return column.empty() || static_cast<uint32_t>(column.size()) == count;
}

template <typename T>
T At(const google::protobuf::RepeatedField<T>& column, uint32_t i) {
  return column.empty() ? T{0} : column.Get(static_cast<int>(i));
}

constexpr uint64_t kCountTag = (uint64_t{KernelColumns::kCountFieldNumber} << 3) | wire::kVarint;
static_assert(static_cast<int>(KernelColumns::kCountFieldNumber) ==
              static_cast<int>(ApiCallColumns::kCountFieldNumber));
static_assert(KernelColumns::kChannelFieldNumber <= ColumnSpans::kMaxColumn &&
              ApiCallColumns::kReturnValueFieldNumber <= ColumnSpans::kMaxColumn);

uint64_t RecordCost(uint64_t chunk_field) {
  return ChunkBudget::ObjectCost(ChunkBudget::FieldType(ChunkBudget::ChunkType(), chunk_field),
                                 /*repeated=*/true);
}

}  // namespace

bool ScanColumnTable(const uint8_t* body, size_t n, int columns, ColumnSpans::Table* t) {
  *t = ColumnSpans::Table{};
  auto* p = const_cast<uint8_t*>(body);
  const uint8_t* end = body + n;
  uint32_t seen = 0;  // columns met, even empty: a second run of one is concatenated
  while (p < end) {
    uint64_t tag, v;
    if (!ReadWireVarint(&p, end, &tag)) return false;
    const uint64_t number = tag >> 3;
    if (tag == kCountTag) {
      if (!ReadWireVarint(&p, end, &v)) return false;
      t->count = static_cast<uint32_t>(v);
      continue;
    }
    if ((tag & 7) != wire::kLengthDelimited || number < 1 ||
        number > static_cast<uint64_t>(columns) || (seen & (1u << number)) != 0 ||
        !ReadWireVarint(&p, end, &v) || v > static_cast<uint64_t>(end - p)) {
      return false;
    }
    seen |= 1u << number;
    if (v > 0) {
      t->begin[number] = p;
      t->end[number] = p + v;
    }
    p += v;
  }
  t->present = true;
  return true;
}

namespace {

// Whether a column's span holds exactly `count` values, the last one complete (absent: yes).
bool SpanHolds(const ColumnSpans::Table& t, int column, uint32_t count) {
  const uint8_t* p = t.begin[static_cast<size_t>(column)];
  const uint8_t* end = t.end[static_cast<size_t>(column)];
  if (p == nullptr) return true;
  if ((end[-1] & 0x80) != 0) return false;
  // One value ends at each byte without the continuation bit: counted eight bytes at a time
  // (each byte's clear top bit becomes a 1 in its lowest bit; the multiply sums the bytes).
  uint64_t values = 0;
  constexpr uint64_t kLow = 0x0101010101010101ull;
  for (; end - p >= 8; p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    values += (((~w >> 7) & kLow) * kLow) >> 56;
  }
  for (; p < end; ++p) values += *p < 0x80;
  return values == count;
}

bool SpansHold(const ColumnSpans::Table& t, int columns) {
  for (int c = 1; c <= columns; ++c) {
    if (!SpanHolds(t, c, t.count)) return false;
  }
  return true;
}

// Reads a column's values in turn. SpanHolds has checked that the span ends a value, and a
// table is read exactly `count` times, so a read never passes the span's last byte; a value
// longer than 10 bytes clears ok (libprotobuf refuses it) and reads on from its 11th byte.
class SpanColumn {
 public:
  SpanColumn(const ColumnSpans::Table& t, int column) : p_(t.begin[static_cast<size_t>(column)]) {}
  uint64_t Next(bool* ok) {
    if (p_ == nullptr) return 0;
    uint64_t b = *p_++;
    if (b < 0x80) return b;
    uint64_t v = b & 0x7f;
    for (int shift = 7; shift < 64; shift += 7) {
      b = *p_++;
      v |= (b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
    *ok = false;
    return 0;
  }

 private:
  const uint8_t* p_;
};

// The list the rows of a table go to: `stale` (ColumnSpans::stale_*) when it holds the records
// of the chunk decoded before, whose objects then take the rows (Row(i) is the i-th row's
// object); Trim drops the objects past the last row.
template <typename R>
class RowList {
 public:
  RowList(google::protobuf::RepeatedPtrField<R>* rows, bool stale, uint32_t count)
      : rows_(rows), reusable_(stale ? rows->size() : 0) {
    rows->Reserve(rows->size() - reusable_ + static_cast<int>(count));
  }
  R* Row(uint32_t i) {
    return static_cast<int>(i) < reusable_ ? rows_->Mutable(static_cast<int>(i)) : rows_->Add();
  }
  void Trim(uint32_t count) {
    while (reusable_ > static_cast<int>(count)) {
      rows_->RemoveLast();
      --reusable_;
    }
  }

 private:
  google::protobuf::RepeatedPtrField<R>* rows_;
  int reusable_;
};

bool KernelsFromSpans(const ColumnSpans::Table& t, bool stale, Chunk* chunk, RowDeltas* deltas) {
  using K = KernelColumns;
  SpanColumn start(t, K::kStartFieldNumber), duration(t, K::kDurationFieldNumber),
      shape(t, K::kShapeFieldNumber), stream(t, K::kStreamFieldNumber),
      correlation(t, K::kCorrelationFieldNumber), context(t, K::kContextFieldNumber),
      device(t, K::kDeviceFieldNumber), graph_id(t, K::kGraphIdFieldNumber),
      graph_node_id(t, K::kGraphNodeIdFieldNumber), flags(t, K::kFlagsFieldNumber),
      launch_type(t, K::kLaunchTypeFieldNumber), channel(t, K::kChannelFieldNumber);
  bool ok = true;
  RowList<Kernel> rows(chunk->mutable_kernels(), stale, t.count);
  for (uint32_t i = 0; i < t.count; ++i) {
    Kernel* r = rows.Row(i);  // every field is set below
    r->set_start(wire::UnZigZag(start.Next(&ok)));
    r->set_duration(wire::UnZigZag(duration.Next(&ok)));
    r->set_shape(static_cast<uint32_t>(shape.Next(&ok)));
    r->set_stream(static_cast<uint32_t>(stream.Next(&ok)));
    r->set_correlation(wire::UnZigZag(correlation.Next(&ok)));
    r->set_context(static_cast<uint32_t>(context.Next(&ok)));
    r->set_device(static_cast<uint32_t>(device.Next(&ok)));
    r->set_graph_id(static_cast<uint32_t>(graph_id.Next(&ok)));
    r->set_graph_node_id(graph_node_id.Next(&ok));
    r->set_flags(static_cast<uint32_t>(flags.Next(&ok)));
    r->set_launch_type(static_cast<uint32_t>(launch_type.Next(&ok)));
    r->set_channel(static_cast<uint32_t>(channel.Next(&ok)));
    if (deltas != nullptr) deltas->Undo(r);
  }
  rows.Trim(t.count);
  return ok;
}

bool ApiCallsFromSpans(const ColumnSpans::Table& t, bool stale, Chunk* chunk, RowDeltas* deltas) {
  using A = ApiCallColumns;
  SpanColumn start(t, A::kStartFieldNumber), duration(t, A::kDurationFieldNumber),
      name(t, A::kNameFieldNumber), domain(t, A::kDomainFieldNumber), cbid(t, A::kCbidFieldNumber),
      thread_id(t, A::kThreadIdFieldNumber), correlation(t, A::kCorrelationFieldNumber),
      return_value(t, A::kReturnValueFieldNumber);
  bool ok = true;
  RowList<ApiCall> rows(chunk->mutable_api_calls(), stale, t.count);
  for (uint32_t i = 0; i < t.count; ++i) {
    ApiCall* r = rows.Row(i);  // every field is set below
    r->set_start(wire::UnZigZag(start.Next(&ok)));
    r->set_duration(wire::UnZigZag(duration.Next(&ok)));
    r->set_name(static_cast<uint32_t>(name.Next(&ok)));
    r->set_domain(static_cast<ApiDomain>(static_cast<int32_t>(domain.Next(&ok))));
    r->set_cbid(static_cast<uint32_t>(cbid.Next(&ok)));
    r->set_thread_id(static_cast<uint32_t>(thread_id.Next(&ok)));
    r->set_correlation(wire::UnZigZag(correlation.Next(&ok)));
    r->set_return_value(static_cast<int32_t>(return_value.Next(&ok)));
    if (deltas != nullptr) deltas->Undo(r);
  }
  rows.Trim(t.count);
  return ok;
}

bool KernelsFit(const KernelColumns& k) {
  const uint32_t n = k.count();
  return Fits(k.start(), n) && Fits(k.duration(), n) && Fits(k.shape(), n) && Fits(k.stream(), n) &&
         Fits(k.correlation(), n) && Fits(k.context(), n) && Fits(k.device(), n) &&
         Fits(k.graph_id(), n) && Fits(k.graph_node_id(), n) && Fits(k.flags(), n) &&
         Fits(k.launch_type(), n) && Fits(k.channel(), n);
}

bool ApiCallsFit(const ApiCallColumns& a) {
  const uint32_t n = a.count();
  return Fits(a.start(), n) && Fits(a.duration(), n) && Fits(a.name(), n) && Fits(a.domain(), n) &&
         Fits(a.cbid(), n) && Fits(a.thread_id(), n) && Fits(a.correlation(), n) &&
         Fits(a.return_value(), n);
}

void KernelsFromMessage(const KernelColumns& k, Chunk* chunk, RowDeltas* deltas) {
  const uint32_t kn = k.count();
  auto* krows = chunk->mutable_kernels();
  krows->Reserve(krows->size() + static_cast<int>(kn));
  for (uint32_t i = 0; i < kn; ++i) {
    Kernel* r = krows->Add();
    r->set_start(At(k.start(), i));
    r->set_duration(At(k.duration(), i));
    r->set_shape(At(k.shape(), i));
    r->set_stream(At(k.stream(), i));
    r->set_correlation(At(k.correlation(), i));
    r->set_context(At(k.context(), i));
    r->set_device(At(k.device(), i));
    r->set_graph_id(At(k.graph_id(), i));
    r->set_graph_node_id(At(k.graph_node_id(), i));
    r->set_flags(At(k.flags(), i));
    r->set_launch_type(At(k.launch_type(), i));
    r->set_channel(At(k.channel(), i));
    if (deltas != nullptr) deltas->Undo(r);
  }
}

void ApiCallsFromMessage(const ApiCallColumns& a, Chunk* chunk, RowDeltas* deltas) {
  const uint32_t an = a.count();
  auto* arows = chunk->mutable_api_calls();
  arows->Reserve(arows->size() + static_cast<int>(an));
  for (uint32_t i = 0; i < an; ++i) {
    ApiCall* r = arows->Add();
    r->set_start(At(a.start(), i));
    r->set_duration(At(a.duration(), i));
    r->set_name(At(a.name(), i));
    r->set_domain(a.domain().empty() ? API_UNKNOWN : static_cast<ApiDomain>(a.domain(i)));
    r->set_cbid(At(a.cbid(), i));
    r->set_thread_id(At(a.thread_id(), i));
    r->set_correlation(At(a.correlation(), i));
    r->set_return_value(At(a.return_value(), i));
    if (deltas != nullptr) deltas->Undo(r);
  }
}

}  // namespace

ColumnsResult ExpandColumns(Chunk* chunk, uint64_t budget_left, RowDeltas* kernel_deltas,
                            RowDeltas* api_deltas, const ColumnSpans* spans) {
  const ColumnSpans::Table* ks =
      spans != nullptr && spans->kernels.present ? &spans->kernels : nullptr;
  const ColumnSpans::Table* as =
      spans != nullptr && spans->api_calls.present ? &spans->api_calls : nullptr;
  // Stale records that no column rows will overwrite are cleared first.
  if (spans != nullptr && spans->stale_kernels && ks == nullptr) chunk->clear_kernels();
  if (spans != nullptr && spans->stale_api_calls && as == nullptr) chunk->clear_api_calls();
  const bool kernels = ks != nullptr || chunk->has_kernel_columns();
  const bool apis = as != nullptr || chunk->has_api_call_columns();
  if (!kernels && !apis) return ColumnsResult::kOk;
  const KernelColumns& k = chunk->kernel_columns();
  const ApiCallColumns& a = chunk->api_call_columns();
  const uint32_t kn = ks != nullptr ? ks->count : k.count();
  const uint32_t an = as != nullptr ? as->count : a.count();
  if (!(ks != nullptr ? SpansHold(*ks, KernelColumns::kChannelFieldNumber) : KernelsFit(k)) ||
      !(as != nullptr ? SpansHold(*as, ApiCallColumns::kReturnValueFieldNumber) : ApiCallsFit(a))) {
    return ColumnsResult::kMalformed;
  }
  if (kn > INT_MAX || an > INT_MAX) return ColumnsResult::kOverBudget;
  const uint64_t cost =
      kn * RecordCost(Chunk::kKernelsFieldNumber) + an * RecordCost(Chunk::kApiCallsFieldNumber);
  if (cost > budget_left) return ColumnsResult::kOverBudget;

  if (ks != nullptr) {
    if (!KernelsFromSpans(*ks, spans->stale_kernels, chunk, kernel_deltas)) {
      return ColumnsResult::kMalformed;
    }
  } else {
    KernelsFromMessage(k, chunk, kernel_deltas);
  }
  if (as != nullptr) {
    if (!ApiCallsFromSpans(*as, spans->stale_api_calls, chunk, api_deltas)) {
      return ColumnsResult::kMalformed;
    }
  } else {
    ApiCallsFromMessage(a, chunk, api_deltas);
  }
  chunk->clear_kernel_columns();
  chunk->clear_api_call_columns();
  return ColumnsResult::kOk;
}

namespace {

// Drops each column whose values are all 0 (the reader takes an absent column as all 0).
template <typename T>
void DropIfZero(google::protobuf::RepeatedField<T>* column) {
  for (const T& v : *column) {
    if (v != T{0}) return;
  }
  column->Clear();
}
template <typename... Columns>
void DropZeroColumns(Columns*... columns) {
  (DropIfZero(columns), ...);
}

}  // namespace

void MoveToColumns(Chunk* chunk) {
  if (ExpandColumns(chunk, UINT64_MAX) != ColumnsResult::kOk) return;
  KernelColumns* k = chunk->mutable_kernel_columns();
  for (const Kernel& r : chunk->kernels()) {
    k->add_start(r.start());
    k->add_duration(r.duration());
    k->add_shape(r.shape());
    k->add_stream(r.stream());
    k->add_correlation(r.correlation());
    k->add_context(r.context());
    k->add_device(r.device());
    k->add_graph_id(r.graph_id());
    k->add_graph_node_id(r.graph_node_id());
    k->add_flags(r.flags());
    k->add_launch_type(r.launch_type());
    k->add_channel(r.channel());
  }
  k->set_count(static_cast<uint32_t>(chunk->kernels_size()));
  DropZeroColumns(k->mutable_start(), k->mutable_duration(), k->mutable_shape(),
                  k->mutable_stream(), k->mutable_correlation(), k->mutable_context(),
                  k->mutable_device(), k->mutable_graph_id(), k->mutable_graph_node_id(),
                  k->mutable_flags(), k->mutable_launch_type(), k->mutable_channel());
  ApiCallColumns* a = chunk->mutable_api_call_columns();
  for (const ApiCall& r : chunk->api_calls()) {
    a->add_start(r.start());
    a->add_duration(r.duration());
    a->add_name(r.name());
    a->add_domain(r.domain());
    a->add_cbid(r.cbid());
    a->add_thread_id(r.thread_id());
    a->add_correlation(r.correlation());
    a->add_return_value(r.return_value());
  }
  a->set_count(static_cast<uint32_t>(chunk->api_calls_size()));
  DropZeroColumns(a->mutable_start(), a->mutable_duration(), a->mutable_name(), a->mutable_domain(),
                  a->mutable_cbid(), a->mutable_thread_id(), a->mutable_correlation(),
                  a->mutable_return_value());
  chunk->clear_kernels();
  chunk->clear_api_calls();
  if (k->count() == 0) chunk->clear_kernel_columns();
  if (a->count() == 0) chunk->clear_api_call_columns();
}

}  // namespace kp
