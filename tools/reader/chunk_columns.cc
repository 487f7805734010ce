#include "tools/reader/chunk_columns.h"

#include <climits>

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

uint64_t RecordCost(uint64_t chunk_field) {
  return ChunkBudget::ObjectCost(ChunkBudget::FieldType(ChunkBudget::ChunkType(), chunk_field),
                                 /*repeated=*/true);
}

}  // namespace

ColumnsResult ExpandColumns(Chunk* chunk, uint64_t budget_left, RowDeltas* kernel_deltas,
                            RowDeltas* api_deltas) {
  const bool kernels = chunk->has_kernel_columns();
  const bool apis = chunk->has_api_call_columns();
  if (!kernels && !apis) return ColumnsResult::kOk;
  const KernelColumns& k = chunk->kernel_columns();
  const ApiCallColumns& a = chunk->api_call_columns();
  const uint32_t kn = k.count(), an = a.count();
  if (!(Fits(k.start(), kn) && Fits(k.duration(), kn) && Fits(k.shape(), kn) &&
        Fits(k.stream(), kn) && Fits(k.correlation(), kn) && Fits(k.context(), kn) &&
        Fits(k.device(), kn) && Fits(k.graph_id(), kn) && Fits(k.graph_node_id(), kn) &&
        Fits(k.flags(), kn) && Fits(k.launch_type(), kn) && Fits(k.channel(), kn)) ||
      !(Fits(a.start(), an) && Fits(a.duration(), an) && Fits(a.name(), an) &&
        Fits(a.domain(), an) && Fits(a.cbid(), an) && Fits(a.thread_id(), an) &&
        Fits(a.correlation(), an) && Fits(a.return_value(), an))) {
    return ColumnsResult::kMalformed;
  }
  if (kn > INT_MAX || an > INT_MAX) return ColumnsResult::kOverBudget;
  const uint64_t cost =
      kn * RecordCost(Chunk::kKernelsFieldNumber) + an * RecordCost(Chunk::kApiCallsFieldNumber);
  if (cost > budget_left) return ColumnsResult::kOverBudget;

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
    if (kernel_deltas != nullptr) kernel_deltas->Undo(r);
  }
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
    if (api_deltas != nullptr) api_deltas->Undo(r);
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
