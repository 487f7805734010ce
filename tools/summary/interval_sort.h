// interval_sort.h: sorts (key, start, end, tag) intervals by key, then start, in bounded memory,
// for the summary's GPU-busy and per-stream gap analysis (the tag rides along unsorted).
//
// Intervals collect in a buffer of kRunEntries; a full buffer is sorted and written to an
// anonymous temporary file as one run (varint deltas, ~6 bytes an interval), and ForEachSorted
// merges the runs (a small read buffer each). A trace that fits the buffer never touches the
// disk. Memory: the buffer (32 MiB), a second one for sorting (32 MiB, kept from the first run's
// sort to the end), 1 MiB while a run is written, and 64 KiB per run while merging (a run is
// 1,048,576 intervals). If no temporary file can be created the buffer keeps growing instead
// (and a note says so), so the answer is the same either way.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kp {

struct KeyedInterval {
  uint64_t key, start, end, tag;
};

class ExternalIntervalSort {
 public:
  static constexpr size_t kRunEntries = size_t{1} << 20;
  explicit ExternalIntervalSort(size_t run_entries = kRunEntries) : run_entries_(run_entries) {}
  ~ExternalIntervalSort();
  ExternalIntervalSort(const ExternalIntervalSort&) = delete;
  ExternalIntervalSort& operator=(const ExternalIntervalSort&) = delete;

  void Add(uint64_t key, uint64_t start, uint64_t end, uint64_t tag = 0) {
    buffer_.push_back({key, start, end, tag});
    if (buffer_.size() >= run_entries_) Spill();
  }
  uint64_t size() const { return size_ + buffer_.size(); }
  // Calls `f` on every interval in (key, start) order, a batch at a time (`n` intervals from
  // `batch`, in order), then empties the sorter. An error if a temporary file could not be read
  // back.
  Status ForEachSorted(const std::function<void(const KeyedInterval* batch, size_t n)>& f);
  // The same without the merge, for a caller that keeps a few and orders them itself: every
  // interval once, the runs on disk one after another (each in (key, start) order) through one
  // read buffer, then those still in memory in arrival order; then empties the sorter.
  Status ForEachInRunOrder(const std::function<void(const KeyedInterval* batch, size_t n)>& f);
  // Set when the disk could not take a run and memory was used instead.
  bool spill_failed() const { return spill_failed_; }

 private:
  void Spill();
  // Empties the sorter after a read-back; the error if it failed.
  Status Reset(bool read_ok);
  size_t run_entries_;
  struct SpilledRun {
    uint64_t offset, bytes, entries;  // where in the file, its encoded size, its entries
  };
  std::vector<KeyedInterval> buffer_;
  std::vector<KeyedInterval> scratch_;  // the sort's second buffer, reused run after run
  FILE* file_ = nullptr;
  std::vector<SpilledRun> runs_;  // in file order
  uint64_t file_bytes_ = 0;
  uint64_t size_ = 0;  // entries in runs
  bool spill_failed_ = false;
};

}  // namespace kp
