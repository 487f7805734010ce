// clock_alignment.h: puts the traces of several hosts on one time line.
//
// Each process stamps its records with its host's CLOCK_REALTIME (CUPTI's default), and hosts'
// clocks differ by up to milliseconds. A collective (NCCL all-reduce, all-gather, ...) ends at
// nearly the same moment on every rank that takes part, so the k-th collective kernel of a
// given name on one rank is matched with the k-th of that name on the reference rank (the first
// file) and the median difference of their end times is that rank's clock offset. Files of the
// reference's host (same boot id) are left as they are: they share its clock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kptrace.pb.h"

namespace kp {

struct ClockAlignment {
  std::vector<int64_t> offset_ns;  // per file: add to every time stamp; 0 for the reference
  std::vector<uint64_t> matched;   // per file: collective kernel ends matched
  std::vector<double> spread_ns;   // per file: median |residual| after the offset
  std::vector<std::string> lines;  // one line per file, for stderr / the summary
};

// Collective kernels: names containing "nccl" (any case).
bool IsCollectiveKernelName(const std::string& name);

// Reads each file's collective kernels (one streaming pass per file).
ClockAlignment AlignOnCollectives(const std::vector<std::string>& files);

// Adds offset_ns to every timestamp of `chunk` as the reader delivers it (absolute `start` and
// `time` fields of every record, the chunk's time base, the header's trace-clock start and the
// footer's end).
void ShiftChunkTimes(Chunk* chunk, int64_t offset_ns);

}  // namespace kp
