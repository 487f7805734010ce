// metric_plan.h: metric-name validation and pass planning, shared by `kptrace metrics check`
// and libkpinject (KP_METRICS), so both say exactly the same thing about the same name.
//
// Two levels. The syntactic check needs nothing (no CUPTI): it catches empty names, names with
// no rollup (`dram__bytes_read`), and Nsight Compute `launch__*` attributes, which are not
// counters. The semantic check drives the CUPTI Profiler Host API (cupti_profiler_host.h) for
// one chip: it needs only the chip name ("GH100"), not a GPU (docs/cupti.md), so it also runs
// in CI. A bad name is found by adding each name on its own to a fresh config (the API rejects a
// whole list without saying which name), and the message suggests the nearest valid name.
//
// No libprotobuf here: this library is linked into the injector.
#pragma once

#include <cupti_profiler_host.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace kp {

// Splits comma-separated arguments, trims blanks, drops empties and expands "sol" into the
// speed-of-light set (SpeedOfLightMetrics() in inject/config/config.h). Order is kept and
// duplicates are removed (CUPTI rejects a repeated name).
std::vector<std::string> ExpandMetricList(const std::vector<std::string>& args);

// The syntactic check. An error says why (no "kp:" prefix), e.g. "launch__* names are Nsight
// Compute launch attributes, not CUPTI counters; kp records the launch configuration ...".
Status CheckMetricNameSyntax(const std::string& name);

// Levenshtein distance; the suggestion picks the smallest (ties: the shorter name).
size_t EditDistance(const std::string& a, const std::string& b);

// A Profiler Host API object for one chip and profiler type. Not thread-safe; cheap enough to
// create per query (about a millisecond offline).
class MetricHost {
 public:
  // `counter_availability` may be empty (offline: every counter assumed available).
  static StatusOr<std::unique_ptr<MetricHost>> Create(
      const std::string& chip, CUpti_ProfilerType type,
      const std::vector<uint8_t>& counter_availability);
  ~MetricHost();
  MetricHost(const MetricHost&) = delete;
  MetricHost& operator=(const MetricHost&) = delete;

  CUpti_Profiler_Host_Object* raw() const { return host_; }
  const std::string& chip() const { return chip_; }
  CUpti_ProfilerType type() const { return type_; }

  // Base metric names of one type, without the prefixed entries ("LTS.Triage…", rejected by
  // ConfigAddMetrics), sorted.
  std::vector<std::string> BaseMetrics(CUpti_MetricType type) const;
  // Base metrics of all three types (cached).
  const std::vector<std::string>& AllBaseMetrics() const;
  // Valid suffixes for a base metric ("sum", "avg.pct_of_peak_sustained_elapsed", ...).
  std::vector<std::string> SubMetrics(const std::string& base, CUpti_MetricType type) const;

  // Validates every name (syntax, then the Host API one name at a time). The first invalid
  // name gives "unknown metric 'x' for GH100: <reason>; did you mean 'y'? (kptrace metrics list
  // --chip GH100 --filter z)".
  Status Validate(const std::vector<std::string>& names) const;

  // The nearest valid full metric name ("" if none is close).
  std::string Suggest(const std::string& name) const;

 private:
  MetricHost() = default;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  std::string chip_;
  CUpti_ProfilerType type_ = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  std::vector<uint8_t> availability_;
  mutable std::vector<std::string> all_base_;
};

// A config image for a validated metric set, with its pass count.
struct MetricPlan {
  std::vector<std::string> names;
  std::vector<uint8_t> config_image;
  size_t num_passes = 0;
  std::unique_ptr<MetricHost> host;  // the object that built the image; evaluates values
};

// Builds the config image for `names` on a fresh host object (ConfigAddMetrics accumulates, so
// the object is used once). Validates first: an invalid name gives the Validate message.
StatusOr<MetricPlan> BuildMetricPlan(const std::string& chip, CUpti_ProfilerType type,
                                     const std::vector<uint8_t>& counter_availability,
                                     const std::vector<std::string>& names);

// Why hardware counters cannot be read, and the fix (docs/cupti.md), for the CUPTI results
// that mean "this machine or process may not profile": INSUFFICIENT_PRIVILEGES, virtualized
// GPU, MIG, confidential computing, CMP, SLI, WSL, HARDWARE_BUSY, MULTIPLE_SUBSCRIBERS.
// Returns "" for other results.
std::string ExplainCounterAccessError(CUptiResult result);

// The same for cuptiProfilerDeviceSupported's per-feature levels (CUpti_Profiler_Support_Level
// values, 3 = SUPPORTED). Returns "" when everything is supported.
struct DeviceSupportLevels {
  int overall = 3, architecture = 3, sli = 3, vgpu = 3, confidential_compute = 3, cmp = 3, wsl = 3;
};
std::string ExplainDeviceSupport(const DeviceSupportLevels& levels);

// "<call> failed: <cuptiGetResultString> (<code>)".
std::string CuptiCallError(const char* call, CUptiResult result);

}  // namespace kp
