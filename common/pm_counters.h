// pm_counters.h: the PM-sampling counter set `gpu` (KP_PM_SAMPLING=gpu) and how a sampled
// counter is shown. Shared by the injector (which samples the raw values) and kptrace (exports
// and summary, which show byte counters as rates); no dependencies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kp {

// One pass in PM-sampling mode on GH100 (H100/H200), checked with the Profiler Host API
// (`kptrace metrics check --mode pm`). sm__throughput needs 19 passes in PM mode, so SM
// throughput is read as instructions per active cycle and warp occupancy instead; the
// *_realtime variants are the ones PM sampling reads without extra passes. Byte counters are
// sampled as sums and shown as rates (PmCounterIsRate). Counters a device does not have (no
// NVLink) are left out of the set on that device.
inline const std::vector<std::string>& PmGpuCounterSet() {
  static const std::vector<std::string> kCounters = {
      "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
      "sm__inst_executed_realtime.avg.per_cycle_active",
      "sm__warps_active_realtime.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "lts__t_bytes.sum",
      "pcie__read_bytes.sum",
      "pcie__write_bytes.sum",
      "nvlrx__bytes.sum",
      "nvltx__bytes.sum",
  };
  return kCounters;
}

// A byte counter summed over the sample (`<unit>__...bytes....sum`): shown as bytes per second
// of the sample, under the name "<counter>.per_second".
inline bool PmCounterIsRate(std::string_view name) {
  constexpr std::string_view kSum = ".sum";
  if (name.size() <= kSum.size() || name.substr(name.size() - kSum.size()) != kSum) return false;
  std::string_view base = name.substr(0, name.size() - kSum.size());
  return base.find('.') == std::string_view::npos && base.find("bytes") != std::string_view::npos;
}

// The name exports and the summary use for a counter.
inline std::string PmCounterLabel(std::string_view name) {
  std::string label(name);
  if (PmCounterIsRate(name)) label += ".per_second";
  return label;
}

// The value shown for a sampled counter (rates: value / sample seconds; 0 for an empty sample).
inline double PmCounterShownValue(std::string_view name, double value, uint64_t duration_ns) {
  if (!PmCounterIsRate(name)) return value;
  if (duration_ns == 0) return 0;
  return value * 1e9 / static_cast<double>(duration_ns);
}

}  // namespace kp
