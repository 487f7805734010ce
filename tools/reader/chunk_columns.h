// chunk_columns.h: format version 3's record columns (kp.KernelColumns, kp.ApiCallColumns) turned
// back into records. A chunk's kernels are its `kernels` followed by the rows of
// `kernel_columns` (and likewise for API calls), so the rows are appended to the record lists,
// and the reader undoes their delta coding as they are made.
#pragma once

#include <cstdint>

#include "kptrace.pb.h"
#include "tools/reader/start_keys.h"

namespace kp {

enum class ColumnsResult { kOk, kMalformed, kOverBudget };

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
ColumnsResult ExpandColumns(Chunk* chunk, uint64_t budget_left, RowDeltas* kernel_deltas = nullptr,
                            RowDeltas* api_deltas = nullptr);

// The inverse, as the injector writes version 3: moves the chunk's kernels and API calls (after
// any rows already in its columns) into `kernel_columns` and `api_call_columns`, leaving out
// the columns whose values are all 0. For writers of test traces (ProtoTraceWriter).
void MoveToColumns(Chunk* chunk);

}  // namespace kp
