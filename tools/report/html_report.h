// html_report.h: `kptrace report`'s page: one self-contained HTML file (inline CSS, inline SVG
// charts drawn here, a little inline JavaScript for sortable tables and a self-check), so it
// opens offline and can be mailed or attached to CI results.
//
// Sections (each a <section> with this id): setup (header, GPUs, clocks, kp configuration,
// losses), utilisation (busy % over time per GPU), kernels (bar chart + table), ranges (NVTX
// breakdown + per-step lines per rank, stragglers marked), copies, sol (speed-of-light scatter
// with the verdict regions + metric tables), notices. The page's self-check script writes its
// result to <body data-selfcheck="ok|fail: ..."> and logs "kp-selfcheck: ..." to the console.
#pragma once

#include <string>

#include "tools/report/report_timeline.h"
#include "tools/summary/trace_summary.h"

namespace kp {

std::string RenderHtmlReport(const TraceSummary& summary, const ReportTimeline& timeline,
                             const std::string& kp_version);

// Text made safe for HTML element content and attribute values.
std::string HtmlEscape(const std::string& text);

}  // namespace kp
