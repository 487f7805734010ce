// report_pc_stalls.h: the report's "stalls" section: KP_PC_SAMPLING's warp-stall reasons per
// kernel (tools/pc_stalls/pc_stall_table.h), a stacked bar per kernel plus a table with the
// reading of each kernel's top reason.
#pragma once

#include <string>

#include "tools/summary/trace_summary.h"

namespace kp {

std::string PcStallsSection(const TraceSummary& summary);

}  // namespace kp
