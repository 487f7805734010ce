// chunk_columns.h: format version 3's record columns (kp.KernelColumns, kp.ApiCallColumns) turned
// back into records. A chunk's kernels are its `kernels` followed by the rows of
// `kernel_columns` (and likewise for API calls), so the rows are appended to the record lists,
// and the reader undoes their delta coding as they are made.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kptrace.pb.h"
#include "tools/reader/start_keys.h"

namespace kp {

enum class ColumnsResult { kOk, kMalformed, kOverBudget };

// A column message (KernelColumns, ApiCallColumns) left unparsed in the chunk's bytes: where
// each column's packed values lie. The chunk decoder fills it (chunk_decoder.h) when the
// message has the form writers give it -- `count` and at most one packed run per column --
// and leaves any other form to libprotobuf, in the chunk's column fields.
struct ColumnSpans {
  static constexpr int kMaxColumn = 14;  // the columns are fields 1..12 (kernels), 1..8 (API)
  struct Table {
    bool present = false;
    uint8_t* field = nullptr;  // the message's length in the chunk (past its tag)
    uint32_t count = 0;
    std::array<const uint8_t*, kMaxColumn + 1> begin{};  // nullptr: absent (all 0)
    std::array<const uint8_t*, kMaxColumn + 1> end{};
  };
  Table kernels, api_calls;
};

// Records of earlier chunks kept for their objects: rows read from spans set every field, so
// an object that held an earlier record can take a new one without being cleared first (most
// of what clearing a chunk costs). The reader moves a chunk's kernels and API calls here before
// it decodes the next chunk into the same object.
struct RowPool {
  google::protobuf::RepeatedPtrField<Kernel> kernels;
  google::protobuf::RepeatedPtrField<ApiCall> api_calls;
  // Moves `chunk`'s kernels and API calls into the pool as they are (the pool's own, if it
  // still holds any, go back to the chunk, which clears them).
  void Take(Chunk* chunk) {
    kernels.Swap(chunk->mutable_kernels());
    api_calls.Swap(chunk->mutable_api_calls());
  }
};

// Scans the body of a column message whose columns are fields 1..`columns`: true, with *t
// filled, if it holds only `count` (field 15, a varint) and at most one packed run per column;
// false for any other form (and for damage, which libprotobuf's parse then finds).
bool ScanColumnTable(const uint8_t* body, size_t n, int columns, ColumnSpans::Table* t);

// Appends the rows of the chunk's column messages to its record lists and clears the columns.
// A column whose length is neither 0 nor the message's `count` is kMalformed. The rows'
// memory (at libprotobuf's cost per record) is charged against `budget_left` bytes first: past
// it, kOverBudget and nothing is appended. A `count` over INT_MAX is kOverBudget whatever the
// budget (protobuf's repeated fields hold no more); pass a real budget for untrusted input
// (TraceReader: ColumnsDecodeBudget of the chunk's size, less what its decode took).
//
// With `kernel_deltas` / `api_deltas`, each row is undone as it is made (versions 2 and 3: the
// states carry on from the chunk's row-form records, undone before); without, rows keep their
// coded values (a writer's MoveToColumns).
//
// With `spans`, a table present there is read from its spans (the chunk's bytes, which must
// still be alive) instead of the chunk's column field; a column whose values are cut short, or
// longer than 10 bytes, is kMalformed, as libprotobuf's parse of it would fail. With `pool`
// too, rows read from spans into a list that has no row-form records take the pool's objects
// first.
ColumnsResult ExpandColumns(Chunk* chunk, uint64_t budget_left, RowDeltas* kernel_deltas = nullptr,
                            RowDeltas* api_deltas = nullptr, const ColumnSpans* spans = nullptr,
                            RowPool* pool = nullptr);

// The inverse, as the injector writes version 3: moves the chunk's kernels and API calls (after
// any rows already in its columns) into `kernel_columns` and `api_call_columns`, leaving out
// the columns whose values are all 0. For writers of test traces (ProtoTraceWriter).
void MoveToColumns(Chunk* chunk);

}  // namespace kp
