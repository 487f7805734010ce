// step_trace_builder.h: synthetic training-loop traces with known timings for the diff and report
// tests: `steps` NVTX "step" ranges, each holding a "gemm" and a "relu" kernel back to back on one
// GPU, plus one range-mode metric record per step. Durations are base x scale x (1 + noise),
// noise uniform in [-noise, +noise] from a fixed-seed generator, so every run is reproducible.
#pragma once

#include <cstdint>
#include <string>

namespace kp {

struct StepTraceSpec {
  int steps = 200;
  double scale = 1.0;   // multiplies every kernel duration (1.20 = 20 % slower)
  double noise = 0.02;  // half-width of the uniform relative noise
  uint64_t seed = 1;
  int rank = -1;               // header rank (-1 unknown)
  double slow_from_step = -1;  // >= 0: steps from this index on take slow_factor longer
  double slow_factor = 1.0;
  std::string gpu = "NVIDIA H200";
  std::string driver = "580.159.03";
  uint32_t core_clock_khz = 1980000;
  double sm_pct = 60, mem_pct = 30;  // metric values per step (noise applied too)
};

// The complete .kptrace bytes (written with tools/reader's ProtoTraceWriter).
std::string BuildStepTrace(const StepTraceSpec& spec);

// Writes `bytes` to a file named after `name` and the pid in the test temporary directory and
// returns its path; every such file is removed when the test program ends.
std::string WriteTestTrace(const std::string& name, const std::string& bytes);

}  // namespace kp
