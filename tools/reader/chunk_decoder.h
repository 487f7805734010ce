// chunk_decoder.h: decodes one serialized kp.Chunk in a single pass over its wire bytes,
// charging the decode budget (chunk_budget.h) before each record or message is stored. Before
// that pass, the chunk's top-level framing alone (a tag and a length per record) is checked
// against the budget, so a chunk of millions of tiny records is refused before anything is
// allocated for it; what the decode then stores stays within the budget as it goes.
//
// The record lists every exporter reads (strings, kernel shapes, kernels, copies, memsets, API
// calls, NVTX ranges and marks, synchronizations, overheads, graph launches) and the chunk's own
// scalars are decoded here, field by field, with the field numbers of proto/kptrace.proto (the
// generated classes' k*FieldNumber constants). Every other field of the chunk (header, devices,
// stats, footer, metric and PM sample records, format version 3's kernel and API-call columns,
// ...) is walked by the budget and then parsed by libprotobuf from its own bytes; TraceReader
// turns the columns into records afterwards (chunk_columns.h), reading them straight from the
// chunk's bytes when they have the writers' form (see `spans` below).
//
// Fields the schema does not know, and known fields sent with another wire type, are charged
// as libprotobuf would store them and skipped. Invalid UTF-8 in any string field is repaired in
// place ('?' per bad byte). Deltas are left as encoded: TraceReader undoes them afterwards.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kptrace.pb.h"
#include "tools/reader/chunk_budget.h"
#include "tools/reader/chunk_columns.h"

namespace kp {

// Clears *chunk and decodes msg[0..n) into it. The result says whether the bytes were well
// formed and inside `budget_bytes` (decoding stops at the first problem; *chunk is then partly
// filled and must not be used) and how many strings were repaired.
//
// With `spans`, format version 3's column messages in the form writers give them are not
// parsed: *spans says where their columns lie in msg (which ExpandColumns then reads, so msg
// must outlive that); they are charged as libprotobuf's parse of them would be. Other forms go
// to libprotobuf. The chunk's kernels and API calls from the last decode into *chunk are then
// kept uncleared unless a row-form record comes (ColumnSpans::stale_*): the caller must pass
// `spans` to ExpandColumns, which overwrites or clears them.
ChunkScanResult DecodeChunk(uint8_t* msg, size_t n, uint64_t budget_bytes, Chunk* chunk,
                            ColumnSpans* spans = nullptr);

}  // namespace kp
