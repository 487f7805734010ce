// chunk_budget.h: the reader's decode budget. A chunk's wire bytes are charged, as they are
// decoded, with the memory the decoded message takes -- every record, every nested message and
// every repeated entry at any depth (header command line, config, metric names...) -- at what
// libprotobuf's objects cost; string fields that are not valid UTF-8 are repaired in place
// (libprotobuf would otherwise reject them together with the chunk). The chunk decoder
// (chunk_decoder.h) charges its records here before it stores them, and has ChunkBudget walk the
// sub-messages it leaves to libprotobuf before they are parsed.
//
// Limits (docs/robustness.md states them as each command's memory bound):
//   stored payload   <= kMaxStoredChunkBytes
//   decompressed     <= kMaxRawChunkBytes and <= kMaxCompressionRatio x stored payload
//   decoded estimate <= kMaxDecodedChunkBytes and <= kMaxDecodedBytesPerRawByte x decompressed
// A chunk over any limit is skipped and counted as damage; the writer's own chunks (4 MiB
// target, 64 MiB hard limit, records of 5+ bytes; in version 3 kernels and API calls as columns
// of ~6-10 bytes per record) stay inside every one of them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kp {

inline constexpr uint64_t kMaxStoredChunkBytes = 96ull << 20;
inline constexpr uint64_t kMaxRawChunkBytes = 96ull << 20;
inline constexpr uint64_t kMaxCompressionRatio = 64;
inline constexpr uint64_t kMaxDecodedChunkBytes = 1ull << 30;
inline constexpr uint64_t kMaxDecodedBytesPerRawByte = 24;
// Format version 3's columns (chunk_columns.h) are stored packed (a kernel in ~6-10 bytes) and
// expanded into records of ~100 bytes each: a chunk with columns may decode to this many bytes
// per decompressed byte, records and columns together (still within kMaxDecodedChunkBytes).
inline constexpr uint64_t kMaxDecodedBytesPerColumnByte = 64;

struct ChunkScanResult {
  bool well_formed = true;        // false: malformed wire data (the parse would fail too)
  bool over_budget = false;       // the decoded estimate passed the budget (scan stopped there)
  uint64_t entries = 0;           // messages and repeated entries at every depth
  uint64_t decoded_bytes = 0;     // estimated memory of the parsed Chunk
  uint64_t strings_repaired = 0;  // string fields whose invalid UTF-8 bytes became '?'
};

// The decode budget of a chunk of `raw_bytes` serialized bytes.
uint64_t DecodeBudget(uint64_t raw_bytes);
// The budget of the same chunk once its record columns are expanded
// (kMaxDecodedBytesPerColumnByte).
uint64_t ColumnsDecodeBudget(uint64_t raw_bytes);

// The cost model of one message type of the schema (built from libprotobuf's descriptors).
struct BudgetType;

// Charges decoded memory against a budget; the first charge past it stops the decode.
class ChunkBudget {
 public:
  ChunkBudget(uint64_t budget_bytes, ChunkScanResult* result) : budget_(budget_bytes), r_(result) {}

  // kp.Chunk, and the message type of field `number` of `t` (nullptr if it is not a message).
  static const BudgetType* ChunkType();
  static const BudgetType* FieldType(const BudgetType* t, uint64_t number);
  // Memory of one object of type t, held in a repeated field's slot when `repeated`.
  static uint64_t ObjectCost(const BudgetType* t, bool repeated);

  // Adds `cost`; false (and over_budget) once the total passes the budget.
  bool Add(uint64_t cost) {
    ++r_->entries;
    r_->decoded_bytes += cost;
    if (r_->decoded_bytes <= budget_) return true;
    r_->over_budget = true;
    return false;
  }
  // Marks the chunk malformed; returns false (to stop the decode).
  bool Malformed() {
    r_->well_formed = false;
    return false;
  }

  // Reads and charges one field of a message of type `t` whose tag was just read, at *pp
  // (advanced past it): what it costs when decoded by libprotobuf, walking (and repairing)
  // nested messages and strings. The chunk decoder calls it for every field it does not store
  // itself. False stops the decode (malformed or over budget).
  bool Field(const BudgetType* t, uint64_t tag, uint8_t** pp, const uint8_t* end, int depth);
  // Walks and charges the fields of one message of type `t` in p[0..n) (not the object itself).
  bool Walk(const BudgetType* t, uint8_t* p, size_t n, int depth);
  // Repairs a string field's bytes in place (counted once per string with a bad byte).
  void RepairString(uint8_t* p, size_t n);

  static constexpr int kMaxDepth = 16;  // the schema nests 3 deep

 private:
  uint64_t budget_;
  ChunkScanResult* r_;
};

// Walks a serialized kp.Chunk in msg[0..n), repairing invalid UTF-8 in string fields in place,
// and stops as soon as the decoded estimate exceeds `budget_bytes`. (The reader decodes and
// charges in one pass, chunk_decoder.h; this walk alone is for tests and tools.)
ChunkScanResult ScanChunk(uint8_t* msg, size_t n, uint64_t budget_bytes);

// Reads a base-128 varint at *pp (before end); false if it is cut short or longer than 10 bytes.
inline bool ReadWireVarint(uint8_t** pp, const uint8_t* end, uint64_t* v) {
  uint8_t* p = *pp;
  if (p < end && *p < 0x80) {  // most tags and values are one byte
    *v = *p;
    *pp = p + 1;
    return true;
  }
  *v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = *p++;
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *pp = p;
      return true;
    }
  }
  return false;
}

}  // namespace kp
