// record_naming.h: the names a timeline gives to records, enum values, processes and threads.
// Shared by the Chrome and Perfetto exporters (and CopyKindName by the CSV exporter and the
// summary), so every output spells a thing the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kptrace.pb.h"

namespace kp {

const char* CopyKindName(int kind);    // "HtoD", ...; "unknown" out of range
const char* MemoryKindName(int kind);  // "pinned", "device static", ...
const char* SyncTypeLabel(int type);   // "cudaStreamSynchronize"-style label of a SyncType
std::string OverheadLabel(std::string_view name, uint32_t kind);
// True for API calls that put work on the GPU (launches, copies, memsets): those start a flow.
bool ApiStartsGpuWork(std::string_view api_name);
// "(x,y,z)"
std::string Dim3(uint32_t x, uint32_t y, uint32_t z);
// Bytes per ns == GB/s.
inline double BandwidthGBs(uint64_t bytes, uint64_t start, uint64_t end) {
  return end > start ? static_cast<double>(bytes) / static_cast<double>(end - start) : 0.0;
}

// The command line, program base name first, at most 160 characters ("unknown process").
std::string CommandLabel(const Header* header);
// The process group of one input: "rank N (pid P, host H)", or "pid P (host H)" without a rank
// (rank < 0 or no header; `pid` is the header's pid, or the synthetic one without a header).
std::string ProcessGroupName(const Header* header, uint32_t pid);
// Sorts process groups by rank, then unranked ones in input order.
int64_t ProcessSortIndex(const Header* header, int file_index);
// A CPU thread: its recorded name, else "thread <tid>".
std::string ThreadLabel(uint32_t tid, std::string_view recorded_name);
// Appended to the name of an NVTX range that was still open when the program exited.
inline constexpr std::string_view kOpenRangeSuffix = " (open at exit)";
// A lane of a track beyond the first: "<track name> lane <lane + 1>".
std::string LaneName(std::string_view track_name, uint32_t lane);

}  // namespace kp
