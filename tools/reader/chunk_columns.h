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
  static constexpr int kMaxColumn = 12;  // the kernels' columns are fields 1..12, the API's 1..8
  struct Table {
    bool present = false;
    uint8_t* field = nullptr;  // the message's length in the chunk (past its tag)
    uint32_t count = 0;
    std::array<const uint8_t*, kMaxColumn + 1> begin{};  // nullptr: absent (all 0)
    std::array<const uint8_t*, kMaxColumn + 1> end{};
  };
  Table kernels, api_calls;
  // The chunk's kernels (API calls) are still the records of the chunk decoded before into the
  // same object, kept uncleared: ExpandColumns overwrites them with this chunk's column rows
  // (every field is set) or clears them. Clearing every record object of every chunk was most
  // of what clearing a chunk cost.
  bool stale_kernels = false, stale_api_calls = false;
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
// With `spans` (from DecodeChunk), a table present there is read from its spans (the chunk's
// bytes, which must still be alive) instead of the chunk's column field, into the stale records
// the chunk still holds where it has them (ColumnSpans::stale_*), which are cleared otherwise;
// a column whose values are cut short, or longer than 10 bytes, is kMalformed, as libprotobuf's
// parse of it would fail. (Such a column in a chunk that is also over budget is kOverBudget:
// the values are read after the budget check.)
ColumnsResult ExpandColumns(Chunk* chunk, uint64_t budget_left, RowDeltas* kernel_deltas = nullptr,
                            RowDeltas* api_deltas = nullptr, const ColumnSpans* spans = nullptr);

// The inverse, as the injector writes version 3: moves the chunk's kernels and API calls (after
// any rows already in its columns) into `kernel_columns` and `api_call_columns`, leaving out
// the columns whose values are all 0. For writers of test traces (ProtoTraceWriter).
void MoveToColumns(Chunk* chunk);

}  // namespace kp
