#include "tools/diff/trace_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "tools/export/csv_exporter.h"
#include "tools/summary/text_format.h"

namespace kp {
namespace {

std::string Label(const NamedStats& n) {
  return n.domain.empty() ? n.name : n.domain + ": " + n.name;
}

std::vector<double> AsDouble(const std::vector<int64_t>& v) {
  return std::vector<double>(v.begin(), v.end());
}

DiffRow Compare(std::string kind, std::string name, std::string metric, std::vector<double> a,
                std::vector<double> b, const DiffOptions& options) {
  DiffRow r;
  r.kind = std::move(kind);
  r.name = std::move(name);
  r.metric = std::move(metric);
  r.only_in_a = b.empty();
  r.only_in_b = a.empty();
  r.estimate = EstimateShift(std::move(a), std::move(b));
  const ShiftEstimate& e = r.estimate;
  if (!r.only_in_a && !r.only_in_b && e.median_a != 0) {
    const double base = std::fabs(e.median_a);
    r.change_pct = (e.median_b - e.median_a) / base * 100;
    r.change_low_pct = e.shift_low / base * 100;
    r.change_high_pct = e.shift_high / base * 100;
  }
  r.significant = e.testable && e.p_value < options.alpha;
  r.marked = r.significant && std::fabs(r.change_pct) >= options.threshold_pct;
  r.regression = r.marked && r.kind != "metric" && r.change_pct > 0;
  return r;
}

void CompareNamed(const char* kind, const std::vector<NamedStats>& a,
                  const std::vector<NamedStats>& b, const DiffOptions& options,
                  std::vector<DiffRow>* rows) {
  std::map<std::string, const NamedStats*> in_b;
  for (const NamedStats& n : b) in_b[Label(n)] = &n;
  for (const NamedStats& n : a) {
    auto it = in_b.find(Label(n));
    rows->push_back(
        Compare(kind, Label(n), "", AsDouble(n.samples),
                it == in_b.end() ? std::vector<double>{} : AsDouble(it->second->samples), options));
    if (it != in_b.end()) in_b.erase(it);
  }
  for (const NamedStats& n : b) {
    if (in_b.count(Label(n)) != 0) {
      rows->push_back(Compare(kind, Label(n), "", {}, AsDouble(n.samples), options));
    }
  }
}

std::string MetricLabel(const MetricRangeSummary& m) {
  return m.domain.empty() ? m.name : m.domain + ": " + m.name;
}

std::string Join(const std::set<std::string>& s) {
  std::string o;
  for (const std::string& x : s) o += (o.empty() ? "" : ", ") + x;
  return o.empty() ? "(none)" : o;
}

double MedianSmClockMhz(const TraceSummary& s) {
  std::vector<double> v;
  for (const MetricRangeSummary& m : s.metrics) {
    if (m.sm_clock_mhz > 0) v.push_back(m.sm_clock_mhz);
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() + 1) / 2 - 1];
}

// Settings that name files or differ per process by design, not the measurement.
bool IsPerRunSetting(const std::string& key) {
  return key == "KP_OUTPUT" || key == "output" || key.find("OUTPUT") != std::string::npos;
}

}  // namespace

std::vector<std::string> SetupDifferences(const TraceSummary& a, const TraceSummary& b) {
  std::vector<std::string> out;
  std::set<std::string> gpus_a, gpus_b, clocks_a, clocks_b;
  for (const Device& d : a.devices) {
    gpus_a.insert(d.name());
    clocks_a.insert(StringPrintf("%u MHz", d.core_clock_khz() / 1000));
  }
  for (const Device& d : b.devices) {
    gpus_b.insert(d.name());
    clocks_b.insert(StringPrintf("%u MHz", d.core_clock_khz() / 1000));
  }
  if (gpus_a != gpus_b) out.push_back("GPU differs: A " + Join(gpus_a) + ", B " + Join(gpus_b));
  if (clocks_a != clocks_b) {
    out.push_back("maximum SM clock differs: A " + Join(clocks_a) + ", B " + Join(clocks_b));
  }
  const double clk_a = MedianSmClockMhz(a), clk_b = MedianSmClockMhz(b);
  if (clk_a > 0 && clk_b > 0 && std::fabs(clk_a - clk_b) > 0.02 * clk_a) {
    out.push_back(StringPrintf(
        "measured SM clock differs: A %.0f MHz, B %.0f MHz (lock clocks for comparisons)", clk_a,
        clk_b));
  }
  if (a.have_header && b.have_header) {
    if (a.header.driver_version() != b.header.driver_version()) {
      out.push_back("driver differs: A " + a.header.driver_version() + ", B " +
                    b.header.driver_version());
    }
    if (a.header.cuda_driver_version() != b.header.cuda_driver_version()) {
      out.push_back(StringPrintf("CUDA driver API differs: A %d, B %d",
                                 a.header.cuda_driver_version(), b.header.cuda_driver_version()));
    }
    std::map<std::string, std::string> cfg_a, cfg_b;
    for (const KeyValue& kv : a.header.config()) {
      if (!IsPerRunSetting(kv.key())) cfg_a[kv.key()] = kv.value();
    }
    for (const KeyValue& kv : b.header.config()) {
      if (!IsPerRunSetting(kv.key())) cfg_b[kv.key()] = kv.value();
    }
    std::set<std::string> keys;
    for (const auto& [k, v] : cfg_a) keys.insert(k);
    for (const auto& [k, v] : cfg_b) keys.insert(k);
    for (const std::string& k : keys) {
      auto ia = cfg_a.find(k), ib = cfg_b.find(k);
      auto shown = [](const std::map<std::string, std::string>& cfg,
                      std::map<std::string, std::string>::const_iterator it) -> std::string {
        if (it == cfg.end()) return "(unset)";
        return it->second.empty() ? "(empty)" : it->second;
      };
      const std::string va = shown(cfg_a, ia), vb = shown(cfg_b, ib);
      if (va != vb) out.push_back("kp configuration differs: " + k + " A " + va + ", B " + vb);
    }
  } else if (a.have_header != b.have_header) {
    out.push_back("only one side has a trace header: its setup cannot be compared");
  }
  return out;
}

TraceDiff DiffSummaries(const TraceSummary& a, const TraceSummary& b, const DiffOptions& options) {
  TraceDiff d;
  d.paths_a = a.paths;
  d.paths_b = b.paths;
  d.threshold_pct = options.threshold_pct;
  d.alpha = options.alpha;
  d.warnings = SetupDifferences(a, b);
  for (const std::string& l : a.losses) d.warnings.push_back("A: " + l);
  for (const std::string& l : b.losses) d.warnings.push_back("B: " + l);
  CompareNamed("kernel", a.kernels, b.kernels, options, &d.rows);
  CompareNamed("nvtx_range", a.ranges, b.ranges, options, &d.rows);
  std::map<std::string, const MetricRangeSummary*> metrics_b;
  for (const MetricRangeSummary& m : b.metrics) metrics_b[MetricLabel(m)] = &m;
  for (const MetricRangeSummary& m : a.metrics) {
    auto it = metrics_b.find(MetricLabel(m));
    if (it == metrics_b.end()) continue;  // a range measured on one side only: nothing to compare
    for (const std::string& metric : m.order) {
      auto va = m.samples.find(metric);
      auto vb = it->second->samples.find(metric);
      if (va == m.samples.end() || vb == it->second->samples.end()) continue;
      d.rows.push_back(Compare("metric", MetricLabel(m), metric, va->second, vb->second, options));
    }
  }
  for (const DiffRow& r : d.rows) d.any_regression |= r.regression;
  return d;
}

std::string FormatDiffText(const TraceDiff& d, size_t top) {
  auto side = [](const std::vector<std::string>& p) {
    return p.size() == 1 ? p[0] : std::to_string(p.size()) + " traces";
  };
  std::string o = "== kp diff: A = " + side(d.paths_a) + ", B = " + side(d.paths_b) + " ==\n";
  if (!d.warnings.empty()) {
    o += "\n!! A and B differ in setup or lost data -- changes may not be the code's:\n";
    for (const std::string& w : d.warnings) o += "!!   " + w + "\n";
  }
  o += StringPrintf(
      "\nchange = (median B - median A) / median A; CI = 95 %% Hodges-Lehmann interval of the "
      "shift;\np = Mann-Whitney two-sided. '*' marks changes with p < %.2g and |change| >= "
      "%.3g %%; 'SLOWER' marks those that are regressions.\n",
      d.alpha, d.threshold_pct);
  auto section = [&](const char* kind, const char* title, bool durations) {
    std::vector<const DiffRow*> rows;
    for (const DiffRow& r : d.rows) {
      if (r.kind == kind) rows.push_back(&r);
    }
    if (rows.empty()) return;
    o += StringPrintf("\n%s\n", title);
    o += StringPrintf("  %-6s %8s %20s %9s %11s %11s %6s %6s  %s\n", "", "change", "95% CI", "p",
                      "median A", "median B", "n A", "n B", "name");
    size_t shown = 0;
    for (const DiffRow* r : rows) {
      if (shown >= top && !r->marked) continue;
      ++shown;
      const ShiftEstimate& e = r->estimate;
      const std::string mark = r->regression ? "SLOWER" : r->marked ? "*" : "";
      auto value = [&](double v, size_t n) {
        if (n == 0) return std::string("-");
        return durations ? FormatDuration(v) : StringPrintf("%.4g", v);
      };
      const std::string name =
          ShortKernelName(r->metric.empty() ? r->name : r->name + " | " + r->metric, 100);
      std::string change = "-", ci = "-", p = "-";
      if (r->only_in_a) change = "gone";
      if (r->only_in_b) change = "new";
      if (!r->only_in_a && !r->only_in_b) {
        change = StringPrintf("%+.1f%%", r->change_pct);
        if (e.testable) {
          ci = StringPrintf("[%+.1f%%, %+.1f%%]", r->change_low_pct, r->change_high_pct);
          p = StringPrintf("%.2g", e.p_value);
        }
      }
      o += StringPrintf("  %-6s %8s %20s %9s %11s %11s %6zu %6zu  %s\n", mark.c_str(),
                        change.c_str(), ci.c_str(), p.c_str(), value(e.median_a, e.n_a).c_str(),
                        value(e.median_b, e.n_b).c_str(), e.n_a, e.n_b, name.c_str());
    }
    if (shown < rows.size()) {
      o += StringPrintf("  ... %zu more, none marked (--top N, or --format csv for all)\n",
                        rows.size() - shown);
    }
  };
  section("kernel", "Kernels (duration per call)", true);
  section("nvtx_range", "NVTX ranges (duration per occurrence)", true);
  section("metric", "Metrics per range (value per occurrence)", false);
  size_t marked = 0, regressions = 0;
  for (const DiffRow& r : d.rows) {
    marked += r.marked ? 1 : 0;
    regressions += r.regression ? 1 : 0;
  }
  o += StringPrintf("\n%zu significant change%s above %.3g %%, %zu of them slowdown%s\n", marked,
                    marked == 1 ? "" : "s", d.threshold_pct, regressions,
                    regressions == 1 ? "" : "s");
  return o;
}

std::string FormatDiffCsv(const TraceDiff& d) {
  std::string o =
      "kind,name,metric,n_a,n_b,median_a,median_b,change_pct,ci_low_pct,ci_high_pct,shift,"
      "shift_low,shift_high,p_value,significant,marked,regression\r\n";
  for (const DiffRow& r : d.rows) {
    const ShiftEstimate& e = r.estimate;
    o += r.kind + ",";
    AppendCsvField(&o, r.name);
    o += ',';
    AppendCsvField(&o, r.metric);
    o += StringPrintf(",%zu,%zu,%.6g,%.6g,%.4f,%.4f,%.4f,%.6g,%.6g,%.6g,%.6g,%d,%d,%d\r\n", e.n_a,
                      e.n_b, e.median_a, e.median_b, r.change_pct, r.change_low_pct,
                      r.change_high_pct, e.shift, e.shift_low, e.shift_high, e.p_value,
                      r.significant ? 1 : 0, r.marked ? 1 : 0, r.regression ? 1 : 0);
  }
  return o;
}

std::string FormatDiffJson(const TraceDiff& d) {
  using nlohmann::json;
  json j;
  j["a"] = d.paths_a;
  j["b"] = d.paths_b;
  j["threshold_pct"] = d.threshold_pct;
  j["alpha"] = d.alpha;
  j["warnings"] = d.warnings;
  j["any_regression"] = d.any_regression;
  json rows = json::array();
  for (const DiffRow& r : d.rows) {
    const ShiftEstimate& e = r.estimate;
    rows.push_back({{"kind", r.kind},
                    {"name", r.name},
                    {"metric", r.metric},
                    {"n_a", e.n_a},
                    {"n_b", e.n_b},
                    {"median_a", e.median_a},
                    {"median_b", e.median_b},
                    {"change_pct", r.change_pct},
                    {"ci_low_pct", r.change_low_pct},
                    {"ci_high_pct", r.change_high_pct},
                    {"shift", e.shift},
                    {"shift_low", e.shift_low},
                    {"shift_high", e.shift_high},
                    {"p_value", e.p_value},
                    {"testable", e.testable},
                    {"significant", r.significant},
                    {"marked", r.marked},
                    {"regression", r.regression},
                    {"only_in_a", r.only_in_a},
                    {"only_in_b", r.only_in_b}});
  }
  j["rows"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace kp
