// csv_exporter.h: `kptrace convert --to csv`: one RFC 4180 file per record kind in an output
// directory (kernels.csv, memcpy.csv, memset.csv, api.csv, nvtx_ranges.csv, nvtx_marks.csv,
// sync.csv, overhead.csv, metrics.csv, devices.csv, processes.csv), loadable by pandas as is.
//
// Column names carry units (start_ns, duration_ns, bytes, bandwidth_gbps, ...). Times are
// absolute trace-clock ns plus t_ms, milliseconds since the file's own start (header
// start_time_trace_ns). GPU rows name the API call that launched them (launch_api,
// launch_thread_id) when that call was seen: a direct-mapped cache indexed by correlation id
// keeps the latest kCorrelationCacheSize calls, so memory stays bounded on any trace.
// metrics.csv has one column per metric name over all configurations; since names are only all
// known at the end, its rows are spilled to an unnamed temporary file and written out by End().
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "tools/export/exporter.h"

namespace kp {

inline constexpr size_t kCorrelationCacheSize = size_t{1} << 18;

// Appends `field` to `out`, quoted per RFC 4180 when it holds a comma, quote, CR or LF
// (quotes doubled).
void AppendCsvField(std::string* out, std::string_view field);

}  // namespace kp
