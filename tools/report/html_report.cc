#include "tools/report/html_report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>

#include "tools/info/trace_info.h"
#include "tools/metrics/speed_of_light.h"
#include "tools/report/report_pc_stalls.h"
#include "tools/summary/text_format.h"

namespace kp {
namespace {

constexpr const char* kRankColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                        "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79"};
constexpr size_t kTopKernelBars = 15;
constexpr size_t kMaxTableRows = 300;
constexpr size_t kMaxStepPoints = 2000;

constexpr char kStyle[] = R"css(
body{font:14px/1.4 system-ui,-apple-system,"DejaVu Sans",sans-serif;color:#222;margin:0;background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:12px 16px}
h1{font-size:20px;margin:8px 0}h2{font-size:17px;border-bottom:2px solid #ccd;padding-bottom:3px;margin-top:28px}
h3{font-size:15px;margin:14px 0 6px}
section{background:#fff;border:1px solid #e2e2e8;border-radius:6px;padding:4px 14px 12px;margin:14px 0}
table{border-collapse:collapse;font-size:13px;margin:6px 0;max-width:100%}
th,td{border-bottom:1px solid #e6e6ea;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f0f0f5;position:sticky;top:0}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th[data-dir=asc]::after{content:" \25B2"}table.sortable th[data-dir=desc]::after{content:" \25BC"}
td.name,th.name,td.text{text-align:left;word-break:break-all;max-width:560px}
td.text{word-break:normal}td[data-v]{white-space:nowrap}
.losses{background:#fff0f0;border:1px solid #e99;padding:6px 10px;border-radius:4px}
.ok{background:#f0fff0;border:1px solid #9c9;padding:6px 10px;border-radius:4px}
.note{color:#666;font-size:12.5px}.bad{color:#c00;font-weight:600}
svg{display:block;margin:6px 0;max-width:100%;height:auto}svg text{font-size:11px;fill:#333}
.kv td:first-child{text-align:left;color:#555;white-space:nowrap}.kv td{text-align:left}
details{margin:6px 0}
)css";

// Sorting: a click on a header sorts by that column, numbers by data-v when present.
// Self-check: the browser test reads its verdict from <body data-selfcheck>.
constexpr char kScript[] = R"js(
(function(){
var errors=[];
window.addEventListener('error',function(e){errors.push(String(e.message));document.body.dataset.errors=errors.length;});
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var asc=th.dataset.dir!=='asc';
      t.querySelectorAll('th').forEach(function(h){delete h.dataset.dir;});
      th.dataset.dir=asc?'asc':'desc';
      var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(x,y){
        var a=x.cells[i],b=y.cells[i];
        var va=a.dataset.v!==undefined?a.dataset.v:a.textContent,vb=b.dataset.v!==undefined?b.dataset.v:b.textContent;
        var na=parseFloat(va),nb=parseFloat(vb),c;
        if(!isNaN(na)&&!isNaN(nb)&&a.dataset.v!==undefined){c=na-nb;}else{c=String(va).localeCompare(String(vb));}
        return asc?c:-c;});
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
var problems=[];
['setup','utilisation','kernels','ranges','copies','sol','notices'].forEach(function(id){
  var s=document.getElementById(id);
  if(!s||s.tagName!=='SECTION'||!s.querySelector('h2'))problems.push('section '+id+' missing');
});
var charts=document.querySelectorAll('svg.chart');
charts.forEach(function(svg){
  var marks=svg.querySelectorAll('.mark').length;
  svg.setAttribute('data-marks',marks);
  var box=svg.getBoundingClientRect();
  if(marks===0)problems.push('chart '+svg.id+' has no data marks');
  if(box.width<50||box.height<20)problems.push('chart '+svg.id+' is not visible');
});
if(charts.length===0)problems.push('no charts');
if(document.documentElement.scrollWidth>window.innerWidth+1)problems.push('page wider than the window ('+document.documentElement.scrollWidth+' px)');
document.querySelectorAll('table.sortable').forEach(function(t){if(!t.tBodies[0]||t.tBodies[0].rows.length===0)problems.push('empty table');});
if(errors.length)problems.push(errors.length+' script errors');
document.body.dataset.charts=charts.length;
document.body.dataset.selfcheck=problems.length?'fail: '+problems.join('; '):'ok';
console.log('kp-selfcheck: '+document.body.dataset.selfcheck);
})();
)js";

std::string Num(double v, const char* fmt = "%.6g") { return StringPrintf(fmt, v); }

std::string Label(const std::string& domain, const std::string& name) {
  return domain.empty() ? name : domain + ": " + name;
}

// A table cell: shown text, sorted by `sort` (a number) when given.
std::string Td(const std::string& text, double sort) {
  return "<td data-v=\"" + Num(sort) + "\">" + HtmlEscape(text) + "</td>";
}
// Long C++ names are shortened for the page; the full name is the cell's tooltip.
std::string TdName(const std::string& text) {
  const std::string shown = ShortKernelName(text, 100);
  if (shown == text) return "<td class=\"name\">" + HtmlEscape(text) + "</td>";
  return "<td class=\"name\" title=\"" + HtmlEscape(text) + "\">" + HtmlEscape(shown) + "</td>";
}
std::string TdText(const std::string& text) {
  return "<td class=\"text\">" + HtmlEscape(text) + "</td>";
}
std::string Head(std::initializer_list<const char*> names, bool first_is_name = true) {
  std::string o = "<thead><tr>";
  bool first = true;
  for (const char* n : names) {
    o += (first && first_is_name) ? "<th class=\"name\">" : "<th>";
    o += n;
    o += "</th>";
    first = false;
  }
  return o + "</tr></thead>";
}

// Axis ticks at 1, 2 or 5 x 10^k, about `count` of them up to `max`.
double TickStep(double max, int count) {
  if (max <= 0) return 1;
  const double raw = max / count;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

// Picks ms or us for a time axis of length `max_ns`.
std::pair<double, const char*> TimeUnit(double max_ns) {
  if (max_ns >= 2e9) return {1e9, "s"};
  if (max_ns >= 2e6) return {1e6, "ms"};
  if (max_ns >= 2e3) return {1e3, "us"};
  return {1, "ns"};
}

std::string SetupSection(const TraceSummary& s, const std::string& version) {
  std::string o = "<section id=\"setup\"><h2>Setup</h2>";
  if (!s.losses.empty() || !s.errors.empty()) {
    o += "<div class=\"losses\"><b>Data loss or damage</b> &mdash; read the numbers below with "
         "this in mind:<ul>";
    for (const std::string& e : s.errors) o += "<li>" + HtmlEscape(e) + "</li>";
    for (const std::string& l : s.losses) o += "<li>" + HtmlEscape(l) + "</li>";
    o += "</ul></div>";
  } else {
    o += "<div class=\"ok\">No losses: every chunk read intact, nothing dropped, clean end.</div>";
  }
  o += "<table class=\"kv\"><tbody>";
  auto row = [&](const char* k, const std::string& v) {
    o += "<tr><td>" + std::string(k) + "</td><td>" + HtmlEscape(v) + "</td></tr>";
  };
  std::string files;
  for (const std::string& p : s.paths) files += (files.empty() ? "" : ", ") + p;
  row("traces", files);
  if (s.have_header) {
    const Header& h = s.header;
    std::string cmd;
    for (const auto& a : h.command_line()) cmd += (cmd.empty() ? "" : " ") + a;
    row("command", cmd);
    row("host", h.hostname() + ", pid " + std::to_string(h.pid()) +
                    (h.rank() >= 0 ? ", rank " + std::to_string(h.rank()) + " of " +
                                         std::to_string(h.world_size())
                                   : std::string()));
    row("date", FormatUtcDate(h.start_time_unix_ns()));
    row("driver", h.driver_version() + ", CUDA driver API " +
                      FormatCudaVersion(h.cuda_driver_version()) + ", CUPTI API " +
                      std::to_string(h.cupti_api_version()));
    row("clock", h.clock());
    row("recorded by", "kp " + h.kp_version() + " (" + h.injection_mode() + " mode)");
  }
  row("span", FormatDuration(s.span_ns) + ", " + std::to_string(s.records) +
                  " records, GPU kernel time " + FormatDuration(s.gpu_time_ns));
  row("report by", "kptrace " + version);
  o += "</tbody></table>";
  if (!s.devices.empty()) {
    o += "<h3>GPUs</h3><table>" +
         Head({"GPU", "name", "CC", "SMs", "memory", "max SM clock", "memory clock"}, false) +
         "<tbody>";
    for (const Device& d : s.devices) {
      o += "<tr>" + Td(std::to_string(d.id()), d.id()) + TdText(d.name()) +
           TdText(
               StringPrintf("%u.%u", d.compute_capability_major(), d.compute_capability_minor())) +
           Td(std::to_string(d.sm_count()), d.sm_count()) +
           Td(StringPrintf("%.0f GiB", d.global_memory_bytes() / (1024.0 * 1024 * 1024)),
              static_cast<double>(d.global_memory_bytes())) +
           Td(StringPrintf("%u MHz", d.core_clock_khz() / 1000), d.core_clock_khz()) +
           (d.memory_clock_khz() > 0
                ? Td(StringPrintf("%u MHz", d.memory_clock_khz() / 1000), d.memory_clock_khz())
                : TdText("unknown")) +
           "</tr>";
    }
    o += "</tbody></table>";
  }
  if (s.have_header && s.header.config_size() > 0) {
    o += "<details><summary>kp configuration (" + std::to_string(s.header.config_size()) +
         " settings)</summary><table class=\"kv\"><tbody>";
    for (const KeyValue& kv : s.header.config()) row(kv.key().c_str(), kv.value());
    o += "</tbody></table></details>";
  }
  return o + "</section>";
}

std::string UtilisationSection(const TraceSummary& s, const ReportTimeline& t) {
  std::string o = "<section id=\"utilisation\"><h2>GPU utilisation over time</h2>";
  if (t.strips.empty() || t.bins == 0) {
    return o + "<p class=\"note\">No timed GPU work in the trace.</p></section>";
  }
  o += "<p class=\"note\">Share of each time bin (" +
       FormatDuration(static_cast<double>(t.end_ns - t.start_ns) / static_cast<double>(t.bins)) +
       ") in which the GPU ran kernels, copies or memsets (overlap counted once).";
  bool any_pm = false;
  for (const UtilisationStrip& strip : t.strips) any_pm |= !strip.pm_counters.empty();
  o += any_pm ? " Lines: PM-sampling counters.</p>"
              : " PM-sampling counters: none in this trace.</p>";
  const int left = 150, width = 1040, strip_h = 56, gap = 14, axis = 28;
  const int height = static_cast<int>(t.strips.size()) * (strip_h + gap) + axis;
  o += StringPrintf(
      "<svg class=\"chart\" id=\"util-chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
      "role=\"img\" aria-label=\"GPU busy percent over time\">",
      left + width + 10, height, left + width + 10, height);
  const double dx = static_cast<double>(width) / static_cast<double>(t.bins);
  for (size_t i = 0; i < t.strips.size(); ++i) {
    const UtilisationStrip& strip = t.strips[i];
    const int y0 = static_cast<int>(i) * (strip_h + gap);
    double mean = 0;
    for (double v : strip.busy_pct) mean += v;
    mean /= static_cast<double>(std::max<size_t>(1, strip.busy_pct.size()));
    o += StringPrintf(
        "<text x=\"0\" y=\"%d\">%s</text><text x=\"0\" y=\"%d\">mean %.0f%% busy</text>", y0 + 22,
        HtmlEscape(strip.label).c_str(), y0 + 38, mean);
    o += StringPrintf(
        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f3f3f7\" stroke=\"#ccd\"/>",
        left, y0, width, strip_h);
    std::string path = StringPrintf("M%d %d", left, y0 + strip_h);
    for (size_t b = 0; b < strip.busy_pct.size(); ++b) {
      const double y = y0 + strip_h - strip.busy_pct[b] / 100.0 * strip_h;
      path += StringPrintf(" L%.1f %.1f L%.1f %.1f", left + dx * static_cast<double>(b), y,
                           left + dx * static_cast<double>(b + 1), y);
    }
    path += StringPrintf(" L%d %d Z", left + width, y0 + strip_h);
    o += "<path class=\"mark\" d=\"" + path + "\" fill=\"#3a7bd5\" fill-opacity=\"0.75\"><title>" +
         HtmlEscape(strip.label) + StringPrintf(": %.1f%% busy on average", mean) +
         "</title></path>";
    size_t series = 0;
    for (const auto& [name, values] : strip.pm_counters) {
      std::string line;
      for (size_t b = 0; b < values.size(); ++b) {
        line += StringPrintf("%s%.1f %.1f", b == 0 ? "M" : " L",
                             left + dx * (static_cast<double>(b) + 0.5),
                             y0 + strip_h - std::clamp(values[b], 0.0, 100.0) / 100.0 * strip_h);
      }
      o += "<path class=\"mark\" d=\"" + line + "\" fill=\"none\" stroke=\"" +
           kRankColours[(series++ + 1) % 10] + "\"><title>" + HtmlEscape(name) + "</title></path>";
    }
  }
  const double span = static_cast<double>(t.end_ns - t.start_ns);
  const auto [unit, unit_name] = TimeUnit(span);
  const double step = TickStep(span / unit, 8);
  const int ya = height - axis + 4;
  for (double v = 0; v <= span / unit + 1e-9; v += step) {
    const double x = left + v * unit / span * width;
    o += StringPrintf(
        "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#999\"/><text x=\"%.1f\" "
        "y=\"%d\" text-anchor=\"middle\">%g %s</text>",
        x, ya - 4, x, ya, x, ya + 14, v, unit_name);
  }
  o += "</svg>";
  if (!s.busy.empty()) {
    o += "<p>";
    for (const DeviceBusy& b : s.busy) {
      o += StringPrintf("GPU %u busy %.1f%% of the span. ", b.device, b.fraction * 100);
    }
    o += StringPrintf("Gaps between kernels: %.0f%% of the stream spans%s.</p>",
                      s.idle_between_kernels_fraction * 100,
                      s.idle_between_kernels_fraction > 0.2
                          ? " &mdash; launch- or CPU-bound: consider CUDA graphs, fewer syncs"
                          : " &mdash; the GPU is kept fed");
  }
  return o + "</section>";
}

std::string StatsTable(const std::vector<NamedStats>& rows, const char* share_name) {
  std::string o =
      "<table class=\"sortable\">" +
      Head({"name", "count", "total", share_name, "median", "p95", "max", "RSD", "stable"}) +
      "<tbody>";
  for (size_t i = 0; i < rows.size() && i < kMaxTableRows; ++i) {
    const NamedStats& n = rows[i];
    const DurationStats& d = n.stats;
    o += "<tr>" + TdName(Label(n.domain, n.name)) +
         Td(std::to_string(d.count), static_cast<double>(d.count)) +
         Td(FormatDuration(d.total), d.total) + Td(StringPrintf("%.1f%%", n.share * 100), n.share) +
         Td(FormatDuration(d.median), d.median) + Td(FormatDuration(d.p95), d.p95) +
         Td(FormatDuration(d.max), d.max) + Td(StringPrintf("%.1f%%", d.rel_std * 100), d.rel_std) +
         Td(d.stable ? "yes" : "no", d.stable ? 1 : 0) + "</tr>";
  }
  o += "</tbody></table>";
  if (rows.size() > kMaxTableRows) {
    o += StringPrintf(
        "<p class=\"note\">%zu more not shown (kptrace summary --format csv lists "
        "all).</p>",
        rows.size() - kMaxTableRows);
  }
  return o;
}

std::string KernelsSection(const TraceSummary& s) {
  std::string o = "<section id=\"kernels\"><h2>Top kernels by total time</h2>";
  if (s.kernels.empty()) return o + "<p class=\"note\">No timed kernels.</p></section>";
  const size_t n = std::min(kTopKernelBars, s.kernels.size());
  const int left = 460, width = 620, bar = 20, gap = 4;
  const int height = static_cast<int>(n) * (bar + gap) + 8;
  const double max = s.kernels[0].stats.total;
  o += StringPrintf(
      "<svg class=\"chart\" id=\"kernel-chart\" viewBox=\"0 0 %d %d\" width=\"%d\" "
      "height=\"%d\" role=\"img\" aria-label=\"kernels by total time\">",
      left + width + 120, height, left + width + 120, height);
  for (size_t i = 0; i < n; ++i) {
    const NamedStats& k = s.kernels[i];
    const int y = static_cast<int>(i) * (bar + gap) + 4;
    const double w = max > 0 ? k.stats.total / max * width : 0;
    o += StringPrintf("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", left - 6, y + 14,
                      HtmlEscape(ShortKernelName(k.name, 70)).c_str());
    o += StringPrintf(
        "<rect class=\"mark\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
        "fill=\"#3a7bd5\"><title>%s: %s total, %" PRIu64 " calls</title></rect>",
        left, y, std::max(1.0, w), bar, HtmlEscape(k.name).c_str(),
        FormatDuration(k.stats.total).c_str(), k.stats.count);
    o += StringPrintf("<text x=\"%.1f\" y=\"%d\">%s (%.1f%%)</text>", left + w + 6, y + 14,
                      FormatDuration(k.stats.total).c_str(), k.share * 100);
  }
  o += "</svg>";
  o += StatsTable(s.kernels, "share of GPU time");
  o += "<p class=\"note\">Per call. Median and p95 are nearest-rank; RSD = population standard "
       "deviation / mean; stable = RSD &lt; 2 %.";
  if (s.untimed_kernels > 0) {
    o += StringPrintf(" %" PRIu64
                      " kernels without timestamps (replayed for kernel-mode "
                      "metrics) are counted but not in the durations.",
                      s.untimed_kernels);
  }
  if (s.internal_kernels_excluded > 0) {
    o += StringPrintf(" %" PRIu64 " profiler-internal kernels excluded.",
                      s.internal_kernels_excluded);
  }
  return o + "</p></section>";
}

std::string StepsChart(const RangeSteps& r, size_t index) {
  const int left = 70, width = 1040, height = 200, top = 10, bottom = 26;
  size_t steps = 0;
  double max = 0;
  for (const RankSteps& k : r.ranks) {
    steps = std::max(steps, std::min(k.durations_ns.size(), kMaxStepPoints));
    for (size_t i = 0; i < k.durations_ns.size() && i < kMaxStepPoints; ++i) {
      max = std::max(max, k.durations_ns[i]);
    }
  }
  if (steps == 0 || max <= 0) return "";
  // A warm-up step (compilation, allocator growth) can be many times the steady state and would
  // flatten every other step into the axis: the axis stops at 3x the median step and taller
  // steps are drawn clipped, with a triangle and their value in the tooltip.
  std::vector<double> all;
  for (const RankSteps& k : r.ranks) {
    all.insert(all.end(), k.durations_ns.begin(),
               k.durations_ns.begin() +
                   static_cast<std::ptrdiff_t>(std::min(k.durations_ns.size(), kMaxStepPoints)));
  }
  std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(all.size() / 2),
                   all.end());
  const double cap = std::min(max, 3 * all[all.size() / 2]);
  const bool clipped = cap < max;
  const auto [unit, unit_name] = TimeUnit(cap);
  const double ymax = cap / unit * 1.05;
  const double ystep = TickStep(ymax, 4);
  std::string o = StringPrintf(
      "<svg class=\"chart\" id=\"steps-chart-%zu\" viewBox=\"0 0 %d %d\" width=\"%d\" "
      "height=\"%d\" role=\"img\" aria-label=\"duration per step\">",
      index, left + width + 10, top + height + bottom, left + width + 10, top + height + bottom);
  auto x_of = [&](size_t i) {
    return left +
           (steps > 1 ? static_cast<double>(i) / static_cast<double>(steps - 1) : 0.5) * width;
  };
  auto y_of = [&, unit = unit](double ns) {
    return top + height - std::min(ns / unit, ymax) / ymax * height;
  };
  for (double v = 0; v <= ymax; v += ystep) {
    o += StringPrintf(
        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4ea\"/><text x=\"%d\" "
        "y=\"%.1f\" text-anchor=\"end\">%g %s</text>",
        left, y_of(v * unit), left + width, y_of(v * unit), left - 4, y_of(v * unit) + 4, v,
        unit_name);
  }
  o += StringPrintf(
      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step (occurrence) 1 .. %zu</text>",
      left + width / 2, top + height + 20, steps);
  for (size_t ri = 0; ri < r.ranks.size(); ++ri) {
    const RankSteps& k = r.ranks[ri];
    const char* colour = kRankColours[ri % 10];
    std::string line;
    for (size_t i = 0; i < k.durations_ns.size() && i < kMaxStepPoints; ++i) {
      line += StringPrintf("%s%.1f %.1f", i == 0 ? "M" : " L", x_of(i), y_of(k.durations_ns[i]));
    }
    o += "<path class=\"mark\" d=\"" + line + "\" fill=\"none\" stroke=\"" + colour +
         "\" stroke-width=\"1.5\"><title>rank " + std::to_string(k.rank) + "</title></path>";
    for (size_t i = 0; clipped && i < k.durations_ns.size() && i < kMaxStepPoints; ++i) {
      if (k.durations_ns[i] <= cap * 1.05) continue;
      const double x = x_of(i), y = y_of(k.durations_ns[i]);
      o += StringPrintf(
          "<path class=\"mark\" d=\"M%.1f %.1f L%.1f %.1f L%.1f %.1f Z\" fill=\"%s\"><title>rank "
          "%d step %zu: %s (off the axis)</title></path>",
          x - 5, y + 8, x + 5, y + 8, x, y, colour, k.rank, i + 1,
          FormatDuration(k.durations_ns[i]).c_str());
    }
    if (k.durations_ns.size() == 1) {
      o += StringPrintf("<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>",
                        x_of(0), y_of(k.durations_ns[0]), colour);
    }
    for (size_t i = 0; i < k.straggler.size() && i < kMaxStepPoints; ++i) {
      if (!k.straggler[i]) continue;
      o += StringPrintf(
          "<circle class=\"mark straggler\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"none\" "
          "stroke=\"#d00\" stroke-width=\"2\"><title>rank %d step %zu: %s (straggler)</title>"
          "</circle>",
          x_of(i), y_of(k.durations_ns[i]), k.rank, i + 1,
          FormatDuration(k.durations_ns[i]).c_str());
    }
  }
  o += "</svg>";
  if (clipped) {
    o += "<p class=\"note\">The axis stops at 3&times; the median step; &#9650; marks a taller "
         "step (its value in the tooltip), e.g. a warm-up step.</p>";
  }
  if (r.ranks.size() > 1) {
    o += "<p class=\"note\">";
    for (size_t ri = 0; ri < r.ranks.size(); ++ri) {
      o += StringPrintf("<span style=\"color:%s\">&#9632;</span> rank %d &nbsp; ",
                        kRankColours[ri % 10], r.ranks[ri].rank);
    }
    o += StringPrintf(
        "<span style=\"color:#d00\">&#9675;</span> straggler (&gt; %.0f%% of "
        "the median over ranks at that step)</p>",
        kStragglerFactor * 100);
  }
  return o;
}

std::string RangesSection(const TraceSummary& s, const ReportTimeline& t) {
  std::string o = "<section id=\"ranges\"><h2>NVTX ranges</h2>";
  if (s.ranges.empty()) {
    return o +
           "<p class=\"note\">No NVTX ranges in the trace (wrap the phases of a step in "
           "torch.cuda.nvtx.range_push/pop to see them here).</p></section>";
  }
  o += StatsTable(s.ranges, "share of span");
  if (!t.steps.empty()) {
    o += "<h3>Per-step times</h3><table class=\"sortable\">" +
         Head({"range", "rank", "steps", "median step", "straggler steps"}) + "<tbody>";
    for (const RangeSteps& r : t.steps) {
      for (const RankSteps& k : r.ranks) {
        const bool flag = k.straggler_steps * 4 >= k.durations_ns.size() && k.straggler_steps > 0;
        o += "<tr>" + TdName(r.name) + Td(std::to_string(k.rank), k.rank) +
             Td(std::to_string(k.durations_ns.size()), static_cast<double>(k.durations_ns.size())) +
             Td(FormatDuration(k.median_ns), k.median_ns) + "<td data-v=\"" +
             std::to_string(k.straggler_steps) + "\"" + (flag ? " class=\"bad\"" : "") + ">" +
             std::to_string(k.straggler_steps) + (flag ? " (straggler)" : "") + "</td></tr>";
      }
    }
    o += "</tbody></table>";
    for (size_t i = 0; i < t.steps.size(); ++i) {
      o += "<h3>" + HtmlEscape(t.steps[i].name) + "</h3>" + StepsChart(t.steps[i], i);
    }
  }
  return o + "</section>";
}

std::string CopiesSection(const TraceSummary& s) {
  std::string o = "<section id=\"copies\"><h2>Copies</h2>";
  if (s.copies.empty()) return o + "<p class=\"note\">No memory copies recorded.</p></section>";
  o += "<table class=\"sortable\">" +
       Head({"kind", "count", "bytes", "time", "median GB/s", "total GB/s"}) + "<tbody>";
  for (const CopyStats& c : s.copies) {
    o += "<tr>" + TdName(c.kind) + Td(std::to_string(c.count), static_cast<double>(c.count)) +
         Td(std::to_string(c.bytes), static_cast<double>(c.bytes)) +
         Td(FormatDuration(c.total_ns), c.total_ns) +
         Td(StringPrintf("%.2f", c.median_gbps), c.median_gbps) +
         Td(StringPrintf("%.2f", c.aggregate_gbps), c.aggregate_gbps) + "</tr>";
  }
  return o + "</tbody></table></section>";
}

// The regions of DiagnoseSpeedOfLight's rules (speed_of_light.h), drawn in plot coordinates.
struct Region {
  double s0, s1, m0, m1;
  const char* colour;
  const char* verdict;
};
constexpr Region kRegions[] = {
    {40, 70, 40, 70, "#eef2d8", "balanced"},
    {0, 30, 0, 30, "#fde2e2", "latency-bound"},
    {70, 100, 0, 60, "#dde9fb", "compute-bound"},
    {0, 60, 70, 100, "#e2f5e4", "memory-bound"},
    {60, 100, 60, 100, "#f1e4f8", "compute+memory-bound"},
};

std::string SolSection(const TraceSummary& s) {
  std::string o = "<section id=\"sol\"><h2>Speed of light</h2>";
  if (s.metrics.empty()) {
    return o +
           "<p class=\"note\">No hardware metrics in this trace: record with "
           "KP_METRICS=sol (and KP_METRICS_RANGES or KP_METRICS_MODE=kernel) to place "
           "ranges or kernels on this chart.</p></section>";
  }
  struct Point {
    std::string name, verdict;
    double sm, mem;
  };
  std::vector<Point> points;
  for (const MetricRangeSummary& m : s.metrics) {
    const bool busy = m.sm_pct_busy >= 0 && m.mem_pct_busy >= 0;
    const double sm = busy ? m.sm_pct_busy : m.sm_pct, mem = busy ? m.mem_pct_busy : m.mem_pct;
    if (sm < 0 || mem < 0) continue;
    points.push_back({Label(m.domain, m.name), m.verdict, sm, mem});
  }
  if (!points.empty()) {
    const int left = 60, size = 420, top = 10;
    o += StringPrintf(
        "<svg class=\"chart\" id=\"sol-chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
        "role=\"img\" aria-label=\"SM throughput versus memory throughput\">",
        left + size + 340, top + size + 44, left + size + 340, top + size + 44);
    auto x_of = [&](double sm) { return left + sm / 100.0 * size; };
    auto y_of = [&](double mem) { return top + size - mem / 100.0 * size; };
    for (const Region& r : kRegions) {
      o += StringPrintf(
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/><text "
          "x=\"%.1f\" y=\"%.1f\" fill=\"#777\">%s</text>",
          x_of(r.s0), y_of(r.m1), x_of(r.s1) - x_of(r.s0), y_of(r.m0) - y_of(r.m1), r.colour,
          x_of(r.s0) + 4, y_of(r.m1) + 14, r.verdict);
    }
    o += StringPrintf(
        "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
        "stroke=\"#888\"/>",
        left, top, size, size);
    for (int v = 0; v <= 100; v += 20) {
      o += StringPrintf(
          "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text><text x=\"%d\" y=\"%.1f\" "
          "text-anchor=\"end\">%d</text>",
          x_of(v), top + size + 16, v, left - 4, y_of(v) + 4, v);
    }
    o += StringPrintf(
        "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">SM throughput, %% of peak</text>"
        "<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" text-anchor=\"middle\">"
        "memory throughput, %% of peak</text>",
        x_of(50), top + size + 36, y_of(50), y_of(50));
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      o += StringPrintf(
          "<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"#222\">"
          "<title>%s: SM %.1f%%, memory %.1f%% (%s)</title></circle>",
          x_of(p.sm), y_of(p.mem), kRankColours[i % 10], HtmlEscape(p.name).c_str(), p.sm, p.mem,
          HtmlEscape(p.verdict).c_str());
      o += StringPrintf("<text x=\"%.1f\" y=\"%.1f\">%zu</text>", x_of(p.sm) + 7, y_of(p.mem) - 5,
                        i + 1);
      o += StringPrintf("<text x=\"%d\" y=\"%zu\"><tspan fill=\"%s\">&#9679;</tspan> %zu %s</text>",
                        left + size + 20, static_cast<size_t>(top) + 14 + i * 16,
                        kRankColours[i % 10], i + 1,
                        HtmlEscape(ShortKernelName(p.name, 48) + " — " + p.verdict).c_str());
    }
    o += "</svg><p class=\"note\">One point per measured range or kernel (median over its "
         "occurrences; read while the GPU was busy when the range had idle gaps). Regions are "
         "the verdict rules of kptrace summary.</p>";
  }
  o += "<table class=\"sortable\">" +
       Head({"range / kernel", "occurrences", "passes", "SM clock", "SM %", "memory %", "GPU busy",
             "verdict", "reading"}) +
       "<tbody>";
  // A percentage kp could not read (no value set, or metrics missing) is -1: shown as "-".
  auto pct = [](double v) { return Td(v >= 0 ? StringPrintf("%.1f", v) : "-", v); };
  for (const MetricRangeSummary& m : s.metrics) {
    const bool busy = m.sm_pct_busy >= 0;
    o += "<tr>" + TdName(Label(m.domain, m.name)) +
         Td(std::to_string(m.occurrences), static_cast<double>(m.occurrences)) +
         Td(std::to_string(m.passes), m.passes) +
         Td(m.sm_clock_mhz > 0 ? StringPrintf("%.0f MHz", m.sm_clock_mhz) : "-", m.sm_clock_mhz) +
         pct(busy ? m.sm_pct_busy : m.sm_pct) + pct(busy ? m.mem_pct_busy : m.mem_pct) +
         Td(m.busy_fraction >= 0 ? StringPrintf("%.0f%%", m.busy_fraction * 100) : "-",
            m.busy_fraction) +
         TdText(m.verdict) + TdText(m.explanation) + "</tr>";
  }
  o += "</tbody></table><h3>Metric values (median over occurrences)</h3><table "
       "class=\"sortable\">" +
       Head({"range / kernel", "metric", "value"}) + "<tbody>";
  for (const MetricRangeSummary& m : s.metrics) {
    if (m.all_dropped()) {  // the SOL table's explanation says why
      o += "<tr>" + TdName(Label(m.domain, m.name)) + TdText("(every value set dropped)") +
           Td("-", -1) + "</tr>";
      continue;
    }
    for (const std::string& name : m.order) {
      auto it = m.medians.find(name);
      o += "<tr>" + TdName(Label(m.domain, m.name)) + TdName(name) +
           (it == m.medians.end() ? TdText("not collected")
                                  : Td(StringPrintf("%.4g", it->second), it->second)) +
           "</tr>";
    }
  }
  return o + "</tbody></table></section>";
}

std::string NoticesSection(const TraceSummary& s) {
  std::string o = "<section id=\"notices\"><h2>Notices</h2>";
  if (s.notices.empty()) return o + "<p class=\"note\">kp recorded no notices.</p></section>";
  o += "<ul>";
  for (const std::string& n : s.notices) o += "<li>" + HtmlEscape(n) + "</li>";
  return o + "</ul></section>";
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string o;
  o.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string RenderHtmlReport(const TraceSummary& s, const ReportTimeline& t,
                             const std::string& kp_version) {
  std::string title = s.paths.size() == 1 ? s.paths[0] : std::to_string(s.paths.size()) + " traces";
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      // Nothing may be fetched: the report must open offline and leak nothing.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
      "<title>kp report: " +
      HtmlEscape(title) + "</title><style>" + kStyle +
      "</style></head><body><main><h1>kp report: " + HtmlEscape(title) + "</h1>";
  o += SetupSection(s, kp_version);
  o += UtilisationSection(s, t);
  o += KernelsSection(s);
  o += RangesSection(s, t);
  o += CopiesSection(s);
  o += SolSection(s);
  o += PcStallsSection(s);
  o += NoticesSection(s);
  o += "</main><script>" + std::string(kScript) + "</script></body></html>\n";
  return o;
}

}  // namespace kp
