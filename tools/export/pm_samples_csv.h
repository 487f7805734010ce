// pm_samples_csv.h: pm_samples.csv for `kptrace convert --to csv`: one row per PM sample
// (KP_PM_SAMPLING), one column per counter over every file and device. Byte counters appear as
// rates ("<counter>.per_second", common/pm_counters.h). Counter names are all known only at
// the end, so rows are spilled to an unnamed temporary file and written out by End().
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kptrace.pb.h"

namespace kp {

class PmSamplesCsv {
 public:
  PmSamplesCsv() = default;
  ~PmSamplesCsv();
  PmSamplesCsv(const PmSamplesCsv&) = delete;
  PmSamplesCsv& operator=(const PmSamplesCsv&) = delete;

  Status Begin();
  // `base_ns`: the file's start on the trace clock (for t_ms).
  void AddChunk(int file_index, uint32_t pid, uint64_t base_ns, const Chunk& chunk);
  Status End(const std::string& path);

 private:
  std::FILE* spill_ = nullptr;
  bool spill_failed_ = false;
  std::map<std::pair<int, uint32_t>, std::vector<size_t>> config_columns_;  // -> column index
  std::vector<std::string> counters_;                                       // raw names
  std::unordered_map<std::string, size_t> column_of_;
  std::vector<std::vector<size_t>> column_sets_;  // spilled rows refer to these by index
  std::map<std::pair<int, uint32_t>, size_t> column_set_of_;
};

}  // namespace kp
