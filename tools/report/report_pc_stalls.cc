#include "tools/report/report_pc_stalls.h"

#include <cinttypes>

#include "tools/report/html_report.h"
#include "tools/summary/text_format.h"

namespace kp {
namespace {

constexpr size_t kMaxKernels = 20;
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

}  // namespace

std::string PcStallsSection(const TraceSummary& s) {
  std::string o = "<section id=\"stalls\"><h2>Warp stalls (PC sampling)</h2>";
  const std::vector<PcStallKernel> kernels = s.pc_stalls.Kernels(3);
  if (kernels.empty()) {
    return o +
           "<p class=\"note\">No PC samples in the trace (run with KP_PC_SAMPLING=stall or "
           "kptrace run --pc-sampling to see why warps wait).</p></section>";
  }
  o += "<p class=\"note\">Share of each kernel's warp samples per stall reason, all launches "
       "together. Reasons under 1 % are left out of the bar.</p>";
  o += "<table class=\"sortable\"><thead><tr><th class=\"name\">kernel</th><th>GPU</th>"
       "<th>samples</th><th>stall reasons</th><th>top reason: reading</th><th>hottest PCs</th>"
       "</tr></thead><tbody>";
  size_t shown = 0;
  for (const PcStallKernel& k : kernels) {
    if (shown++ == kMaxKernels) break;
    const std::string name = DemangledKernelName(k.kernel);
    const std::string short_name = ShortKernelName(name, 100);
    o += "<tr><td class=\"name\" title=\"" + HtmlEscape(name) + "\">" + HtmlEscape(short_name) +
         "</td>";
    o += StringPrintf("<td data-v=\"%u\">%u</td>", k.device, k.device);
    o += StringPrintf("<td data-v=\"%" PRIu64 "\">%" PRIu64 "</td>", k.samples, k.samples);
    // A stacked bar (inline SVG, 300 px) and the legend as text.
    std::string bar = "<svg class=\"stallbar\" width=\"300\" height=\"14\" role=\"img\">";
    std::string legend;
    double x = 0;
    size_t color = 0;
    std::string top_name;
    for (const PcStallReasonShare& r : k.reasons) {
      if (IsNotIssuedReason(r.name) || r.fraction < 0.01) continue;
      if (top_name.empty()) top_name = r.name;
      const double w = r.fraction * 300;
      bar += StringPrintf("<rect x=\"%.1f\" y=\"0\" width=\"%.1f\" height=\"14\" fill=\"%s\">", x,
                          w, kColors[color % 10]) +
             "<title>" + HtmlEscape(r.display) + StringPrintf(" %.1f %%", r.fraction * 100) +
             "</title></rect>";
      legend +=
          (legend.empty() ? "" : ", ") + r.display + StringPrintf(" %.0f %%", r.fraction * 100);
      x += w;
      ++color;
    }
    bar += "</svg>";
    o += "<td class=\"text\">" + bar + "<br>" + HtmlEscape(legend) + "</td>";
    const char* reading = top_name.empty() ? "" : PcStallReading(top_name);
    o += "<td class=\"text\">" +
         HtmlEscape(top_name.empty() ? "" : PcStallDisplayName(top_name) + ": " + reading) +
         "</td>";
    std::string pcs;
    for (const PcStallLine& pc : k.top_pcs) {
      if (!pcs.empty()) pcs += "<br>";
      pcs += HtmlEscape(StringPrintf("+0x%04" PRIx64 " %.0f %% %s", pc.pc_offset,
                                     100.0 * pc.samples / k.samples, pc.top_reason.c_str()));
      if (!pc.file.empty()) pcs += " " + HtmlEscape(pc.file + ":" + std::to_string(pc.line));
    }
    o += "<td class=\"text\">" + pcs + "</td></tr>";
  }
  return o + "</tbody></table></section>";
}

}  // namespace kp
