#include "inject/pc_sampling/pc_stall_aggregator.h"

#include <algorithm>

namespace kp {

void PcStallAggregator::Add(uint32_t device, const char* kernel, uint64_t cubin_crc,
                            uint64_t pc_offset, const uint32_t* reasons, const uint32_t* samples,
                            size_t n) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += samples[i];
  if (total == 0) return;
  Kernel& k = kernels_[{device, kernel != nullptr ? kernel : ""}];
  auto& pc = k.pcs[PcKey{cubin_crc, pc_offset}];
  for (size_t i = 0; i < n; ++i) {
    if (samples[i] == 0) continue;
    k.reasons[reasons[i]] += samples[i];
    pc[reasons[i]] += samples[i];
  }
}

std::vector<KernelStallTotals> PcStallAggregator::Take(size_t max_pcs) {
  std::vector<KernelStallTotals> out;
  out.reserve(kernels_.size());
  for (auto& [key, k] : kernels_) {
    KernelStallTotals t;
    t.device = key.first;
    t.kernel = key.second;
    for (const auto& [reason, n] : k.reasons) {
      t.reasons.push_back({reason, n});
      t.samples += n;
    }
    std::vector<PcStallPcTotals> pcs;
    pcs.reserve(k.pcs.size());
    for (const auto& [pc_key, reasons] : k.pcs) {
      PcStallPcTotals pc;
      pc.cubin_crc = pc_key.cubin_crc;
      pc.pc_offset = pc_key.pc_offset;
      for (const auto& [reason, n] : reasons) {
        pc.reasons.push_back({reason, n});
        pc.samples += n;
      }
      pcs.push_back(std::move(pc));
    }
    // Most samples first; equal counts by offset, so the choice is deterministic.
    std::sort(pcs.begin(), pcs.end(), [](const PcStallPcTotals& a, const PcStallPcTotals& b) {
      return a.samples != b.samples ? a.samples > b.samples : a.pc_offset < b.pc_offset;
    });
    if (pcs.size() > max_pcs) pcs.resize(max_pcs);
    t.top_pcs = std::move(pcs);
    out.push_back(std::move(t));
  }
  kernels_.clear();
  return out;
}

}  // namespace kp
