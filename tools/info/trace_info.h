// trace_info.h: `kptrace info`: what a trace holds (header, devices, versions, record counts by
// kind, time span, losses, notices, clean end) and what damage the reader met, as text or JSON.
// One streaming pass per file; memory does not grow with the trace.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kptrace.pb.h"
#include "tools/reader/trace_reader.h"

namespace kp {

struct TraceInfo {
  std::string path;
  bool opened = false;
  std::string open_error;  // set when !opened
  bool have_header = false;
  Header header;
  std::vector<Device> devices;
  std::vector<MetricConfig> metric_configs;
  std::map<std::string, uint64_t> counts;  // record kind -> records delivered
  uint64_t first_ns = 0, last_ns = 0;      // span over all timed records (0/0 = none)
  Stats stats;                             // latest cumulative Stats in the trace
  bool have_footer = false;
  Footer footer;
  std::vector<CaptureWindow> capture_windows;  // in index order
  std::vector<Notice> notices;                 // first kMaxNotices
  uint64_t notices_total = 0;
  ReaderStats reader;
  uint64_t records() const;
  // true when at least one chunk could be read.
  bool readable() const { return opened && reader.chunks_ok > 0; }
};

inline constexpr size_t kMaxNotices = 100;

TraceInfo CollectTraceInfo(const std::string& path);
std::string FormatTraceInfoText(const TraceInfo& info);
std::string FormatTraceInfoJson(const std::vector<TraceInfo>& infos);  // a JSON array
// One line per process (rank, pid, ppid, host, kernels, how it ended, file) for a run.
std::string FormatProcessTable(const std::vector<TraceInfo>& infos);

// Helpers shared with summary and the CSV exporter.
std::string FormatUtcDate(uint64_t unix_ns);       // "2023-11-14 22:13:20 UTC"
std::string FormatUuid(const std::string& bytes);  // "GPU-01234567-89ab-..."
std::string FormatCudaVersion(int32_t v);          // 13000 -> "13.0"
// Every non-zero Stats counter as "name: value", in schema order.
std::vector<std::pair<std::string, uint64_t>> NonZeroStats(const Stats& stats);

}  // namespace kp
