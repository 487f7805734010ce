// step_ranges.h: finds the training-step NVTX range of a several-process summary (a torchrun job)
// and each process's step durations, in bounded memory.
//
// The step range is the outermost range (no other range of its thread encloses it; not a
// library's NCCL domain) that repeats at least twice in the most processes; ties go to the one
// with the most time in the first process. Each process's occurrences are sorted by (thread,
// start) in an ExternalIntervalSort (interval_sort.h) as they are added; when the process ends
// (FinishFile), one sweep marks the outermost ones, counts and times them per range name, and
// files them, by (process, name, start), in a second sorter shared by all processes. Choose
// then reads them back run after run (no merge) and keeps only the chosen range's. Memory: a
// process's occurrences in runs of 262,144 (8 MiB, as much again while one is sorted, and 64 KiB
// per run while they are merged at the end of the process), the outermost ones in runs of 65,536
// (2 MiB, as much again while one is sorted, one 64 KiB buffer to read them back), each
// process's table of range names, and the answer (the step durations).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tools/summary/interval_sort.h"

namespace kp {

class StepRanges {
 public:
  static constexpr size_t kRunEntries = size_t{1} << 18;       // a process's occurrences
  static constexpr size_t kOuterRunEntries = size_t{1} << 16;  // the outermost ones
  using Name = std::pair<std::string, std::string>;            // (name, domain)

  explicit StepRanges(size_t files, size_t run_entries = kRunEntries);
  ~StepRanges();
  StepRanges(const StepRanges&) = delete;
  StepRanges& operator=(const StepRanges&) = delete;

  // One occurrence in file `fi` of the range `name`, begun and ended on thread `thread`. `key`
  // is the caller's small number for `name` (the same key always names the same range), so
  // that `name` is read only the first time a file has the key.
  void Add(size_t fi, uint32_t key, const Name& name, uint32_t thread, uint64_t start,
           uint64_t end);
  // After file fi's last Add: finds its outermost occurrences. An error if a temporary sort
  // file could not be read back (the file then takes no part in the choice).
  Status FinishFile(size_t fi);
  // The step range (an empty name if no range qualifies) and, per file, the durations of its
  // outermost occurrences in start order. After every FinishFile; once. An error (and no step
  // range) if the temporary sort file could not be read back.
  Status Choose(Name* step, std::vector<std::vector<double>>* steps);

 private:
  struct File;
  // Outermost occurrences are filed under (file index, name index).
  static uint64_t OuterKey(size_t fi, uint32_t id) { return (uint64_t{fi} << 32) | id; }
  size_t run_entries_;
  std::vector<std::unique_ptr<File>> files_;
  ExternalIntervalSort outermost_;  // key OuterKey
};

}  // namespace kp
