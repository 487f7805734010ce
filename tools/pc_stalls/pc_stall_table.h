// pc_stall_table.h: the KP_PC_SAMPLING records of one or more traces, summed per kernel, and the
// way kptrace shows them: the summary's "Warp stalls" section, pc_stalls.csv and the report's
// table (docs/pc-sampling.md).
//
// PcStalls records add up (each holds the samples since the previous one of its kernel), so
// the table sums per (device, kernel) over every record, and per PC over the top PCs each
// record carried. Reason indexes are resolved through the PcStallReason table of the record's
// device. Samples whose reason is a "*_not_issued" counter are a subset of the reason without
// the suffix (warps sampled while not issuing): kept in the CSV, left out of the percentages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kptrace.pb.h"

namespace kp {

struct PcStallReasonShare {
  std::string name;     // CUPTI's, e.g. smsp__pcsamp_warps_issue_stalled_long_scoreboard
  std::string display;  // e.g. "Long Scoreboard"
  uint64_t samples = 0;
  double fraction = 0;  // of the kernel's samples (reasons without the _not_issued suffix)
};

struct PcStallLine {
  uint64_t pc_offset = 0;
  uint64_t samples = 0;
  std::string top_reason;  // display name
  std::string file;
  uint32_t line = 0;
};

struct PcStallKernel {
  uint32_t device = 0;
  std::string kernel;  // as recorded (mangled)
  uint64_t samples = 0;
  uint32_t sampling_period = 0;
  std::vector<PcStallReasonShare> reasons;  // most samples first
  std::vector<PcStallLine> top_pcs;         // most samples first
};

class PcStallTable {
 public:
  // Reads the chunk's reason tables and PcStalls records.
  void AddChunk(const Chunk& chunk);
  // Per kernel, most samples first.
  std::vector<PcStallKernel> Kernels(size_t max_pcs = 5) const;
  bool empty() const { return kernels_.empty(); }

 private:
  struct Accum {
    uint32_t period = 0;
    std::map<uint32_t, uint64_t> reasons;
    std::map<uint64_t, std::pair<std::map<uint32_t, uint64_t>, std::pair<std::string, uint32_t>>>
        pcs;
  };
  std::map<std::pair<uint32_t, uint32_t>, std::string> reason_names_;  // (device, index)
  std::map<std::pair<uint32_t, std::string>, Accum> kernels_;
  std::string ReasonName(uint32_t device, uint32_t index) const;
};

// "Long Scoreboard" for smsp__pcsamp_warps_issue_stalled_long_scoreboard (and for a bare
// "long_scoreboard").
std::string PcStallDisplayName(const std::string& cupti_name);
// What the reason means and what to try, from the profiling workflow; "" for unknown ones.
const char* PcStallReading(const std::string& cupti_name);
// True for the *_not_issued counters (subsets of another reason).
bool IsNotIssuedReason(const std::string& cupti_name);

// The demangled name of a recorded kernel name (the name itself when it is not mangled).
std::string DemangledKernelName(const std::string& mangled);
// The summary's "Warp stalls" section ("" when no kernel has samples).
std::string FormatPcStallsText(const PcStallTable& table, size_t top_kernels);
// `kptrace convert --to csv`: writes DIR/pc_stalls.csv (file,device,kernel,mangled_kernel,reason,
// cupti_reason,samples,percent: one row per kernel and reason) and DIR/pc_stall_pcs.csv
// (file,device,kernel,mangled_kernel,pc_offset,samples,top_reason,source_file,line), `tables`
// indexed by input file. An error names the file that could not be written.
Status WritePcStallsCsv(const std::string& dir, const std::map<int, PcStallTable>& tables);

}  // namespace kp
