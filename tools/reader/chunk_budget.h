// chunk_budget.h: the reader's decode budget. Before libprotobuf parses a chunk, its wire bytes
// are walked once (guided by the schema's descriptors, allocating nothing) to estimate the memory
// the parsed message will take -- every record, every nested message and every repeated entry
// at any depth (header command line, config, metric names...) -- and to repair string fields
// that are not valid UTF-8, which libprotobuf would otherwise reject together with the chunk.
//
// Limits (docs/robustness.md states them as each command's memory bound):
//   stored payload   <= kMaxStoredChunkBytes
//   decompressed     <= kMaxRawChunkBytes and <= kMaxCompressionRatio x stored payload
//   decoded estimate <= kMaxDecodedChunkBytes and <= kMaxDecodedBytesPerRawByte x decompressed
// A chunk over any limit is skipped and counted as damage; the writer's own chunks (4 MiB
// target, 64 MiB hard limit, records of 5+ bytes) stay far inside every one of them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kp {

inline constexpr uint64_t kMaxStoredChunkBytes = 96ull << 20;
inline constexpr uint64_t kMaxRawChunkBytes = 96ull << 20;
inline constexpr uint64_t kMaxCompressionRatio = 64;
inline constexpr uint64_t kMaxDecodedChunkBytes = 1ull << 30;
inline constexpr uint64_t kMaxDecodedBytesPerRawByte = 24;

struct ChunkScanResult {
  bool well_formed = true;        // false: malformed wire data (the parse would fail too)
  bool over_budget = false;       // the decoded estimate passed the budget (scan stopped there)
  uint64_t entries = 0;           // messages and repeated entries at every depth
  uint64_t decoded_bytes = 0;     // estimated memory of the parsed Chunk
  uint64_t strings_repaired = 0;  // string fields whose invalid UTF-8 bytes became '?'
};

// The decode budget of a chunk of `raw_bytes` serialized bytes.
uint64_t DecodeBudget(uint64_t raw_bytes);

// Walks a serialized kp.Chunk in msg[0..n), repairing invalid UTF-8 in string fields in place,
// and stops as soon as the decoded estimate exceeds `budget_bytes`.
ChunkScanResult ScanChunk(uint8_t* msg, size_t n, uint64_t budget_bytes);

}  // namespace kp
