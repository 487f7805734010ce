// pc_stall_aggregator.h: sums PC-sampling rows into per-kernel stall counts between two reads.
//
// CUPTI's continuous mode reports samples per (cubin, function, PC offset) and stall reason, with
// no launch identity. kp keeps per kernel name the sum per reason and per PC; Take() hands over
// what was added since the previous Take (records in the trace add up) with the PCs that hold
// the most samples. Runs on kp's PC-sampling collector thread only: allocation is fine here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kp {

struct PcStallCount {
  uint32_t reason = 0;  // CUPTI stall-reason index
  uint64_t samples = 0;
};

struct PcStallPcTotals {
  uint64_t cubin_crc = 0;
  uint64_t pc_offset = 0;
  uint64_t samples = 0;  // all reasons
  std::vector<PcStallCount> reasons;
  std::string file;  // filled by the caller when line info is found
  uint32_t line = 0;
};

struct KernelStallTotals {
  uint32_t device = 0;
  std::string kernel;
  uint64_t samples = 0;
  std::vector<PcStallCount> reasons;     // by reason index, only non-zero ones
  std::vector<PcStallPcTotals> top_pcs;  // most samples first
};

class PcStallAggregator {
 public:
  // One sampled PC: `reasons`/`samples` are parallel, `n` long.
  void Add(uint32_t device, const char* kernel, uint64_t cubin_crc, uint64_t pc_offset,
           const uint32_t* reasons, const uint32_t* samples, size_t n);
  // Everything added since the last Take, per kernel (kernel name order), keeping at most
  // `max_pcs` PCs per kernel. Clears the aggregator.
  std::vector<KernelStallTotals> Take(size_t max_pcs);
  bool empty() const { return kernels_.empty(); }

 private:
  struct PcKey {
    uint64_t cubin_crc, pc_offset;
    bool operator<(const PcKey& o) const {
      return cubin_crc != o.cubin_crc ? cubin_crc < o.cubin_crc : pc_offset < o.pc_offset;
    }
  };
  struct Kernel {
    std::map<uint32_t, uint64_t> reasons;
    std::map<PcKey, std::map<uint32_t, uint64_t>> pcs;
  };
  std::map<std::pair<uint32_t, std::string>, Kernel> kernels_;
};

}  // namespace kp
