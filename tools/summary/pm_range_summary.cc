#include "tools/summary/pm_range_summary.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <random>
#include <utility>

#include "common/pm_counters.h"
#include "common/time_math.h"
#include "tools/reader/trace_reader.h"
#include "tools/summary/text_format.h"

namespace kp {
namespace {

// Mean and a bounded uniform sample of one counter's values.
struct Accum {
  double sum = 0;
  uint64_t count = 0;
  std::vector<float> kept;
  void Add(double v, std::mt19937_64& rng) {
    if (std::isnan(v)) return;
    sum += v;
    ++count;
    if (kept.size() < kPmReservoir) {
      kept.push_back(static_cast<float>(v));
    } else {
      const uint64_t slot = rng() % count;
      if (slot < kPmReservoir) kept[slot] = static_cast<float>(v);
    }
  }
  PmCounterStats Finish() {
    PmCounterStats s;
    s.count = count;
    if (count == 0) return s;
    s.mean = sum / static_cast<double>(count);
    std::sort(kept.begin(), kept.end());
    // Nearest rank, as the summary's other percentiles.
    const size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(kept.size())));
    s.p95 = kept[std::min(kept.size() - 1, rank > 0 ? rank - 1 : 0)];
    return s;
  }
};

struct RangeAccum {
  std::string name, domain;
  uint64_t samples = 0;
  double total_range_ns = 0;
  std::vector<Accum> values;  // by device column
};

struct DeviceAccum {
  std::vector<std::string> counters;
  std::map<std::string, size_t> column;
  uint64_t interval_ns = 0;
  RangeAccum whole;
  std::map<std::pair<std::string, std::string>, RangeAccum> ranges;
};

// The NVTX ranges of one file (absolute trace-clock ns).
struct Occurrence {
  uint64_t start = 0, end = 0;
  uint32_t key = 0;  // index into FileRanges::names
};
struct FileRanges {
  std::vector<std::pair<std::string, std::string>> names;  // (name, domain)
  std::vector<Occurrence> occurrences;
};

bool ReadRanges(const std::string& path, FileRanges* out) {
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  if (!opened.ok()) return false;
  std::unique_ptr<TraceReader> reader = std::move(opened.value());
  std::map<std::pair<std::string, std::string>, uint32_t> index;
  Chunk c;
  while (reader->Next(&c)) {
    for (const NvtxRange& r : c.nvtx_ranges()) {
      if (r.start() <= 0 || r.duration() < 0) continue;
      std::pair<std::string, std::string> key{std::string(reader->Str(r.name())),
                                              std::string(reader->Str(r.domain()))};
      auto [it, added] = index.emplace(key, static_cast<uint32_t>(out->names.size()));
      if (added) out->names.push_back(key);
      out->occurrences.push_back({static_cast<uint64_t>(r.start()),
                                  static_cast<uint64_t>(SaturatingAdd(r.start(), r.duration())),
                                  it->second});
    }
  }
  return true;
}

// The ranges open at a time, swept forward in time (samples of one device arrive in order).
class Sweep {
 public:
  explicit Sweep(const std::vector<Occurrence>* sorted) : sorted_(sorted) {}
  // Occurrence indices open at t (start <= t <= end).
  const std::vector<size_t>& At(uint64_t t) {
    if (t < last_) {  // out of order: start over
      next_ = 0;
      open_ = {};
    }
    last_ = t;
    while (next_ < sorted_->size() && (*sorted_)[next_].start <= t) {
      open_.push({(*sorted_)[next_].end, next_});
      ++next_;
    }
    while (!open_.empty() && open_.top().first < t) open_.pop();
    // The heap holds every range begun and not yet over: copy those that contain t.
    result_.clear();
    auto copy = open_;
    while (!copy.empty()) {
      result_.push_back(copy.top().second);
      copy.pop();
    }
    return result_;
  }

 private:
  using Entry = std::pair<uint64_t, size_t>;  // (end, index)
  const std::vector<Occurrence>* sorted_;
  size_t next_ = 0;
  uint64_t last_ = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> open_;
  std::vector<size_t> result_;
};

std::string Short(double v) {
  const double a = std::fabs(v);
  if (a >= 1e12) return StringPrintf("%.2fT", v / 1e12);
  if (a >= 1e9) return StringPrintf("%.2fG", v / 1e9);
  if (a >= 1e6) return StringPrintf("%.2fM", v / 1e6);
  if (a >= 1e3) return StringPrintf("%.1fk", v / 1e3);
  if (a >= 10 || a == 0) return StringPrintf("%.1f", v);
  return StringPrintf("%.2f", v);
}

}  // namespace

std::vector<PmDeviceSummary> SummarizePmSamples(const std::vector<std::string>& paths) {
  std::map<uint32_t, DeviceAccum> devices;
  std::mt19937_64 rng(12);  // fixed seed: the same trace gives the same summary
  Chunk c;
  for (const std::string& path : paths) {
    FileRanges file;
    if (!ReadRanges(path, &file)) continue;
    StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
    if (!opened.ok()) continue;
    std::unique_ptr<TraceReader> reader = std::move(opened.value());
    std::vector<Occurrence> sorted = file.occurrences;
    std::sort(sorted.begin(), sorted.end(),
              [](const Occurrence& a, const Occurrence& b) { return a.start < b.start; });
    // Total time per range name, for the table's order.
    std::vector<double> name_ns(file.names.size(), 0);
    for (const Occurrence& o : sorted) name_ns[o.key] += static_cast<double>(o.end - o.start);
    std::map<uint32_t, Sweep> sweeps;
    std::vector<uint32_t> keys;  // range names open at a sample
    std::map<uint32_t, std::pair<uint32_t, std::vector<size_t>>>
        config_columns;  // id -> device, cols
    while (reader->Next(&c)) {
      for (const PmSampleConfig& pc : c.pm_sample_configs()) {
        if (config_columns.count(pc.id()) != 0) continue;
        DeviceAccum& d = devices[pc.device()];
        d.interval_ns = pc.interval_ns();
        std::vector<size_t> cols;
        for (const std::string& n : pc.counter_names()) {
          auto [it, added] = d.column.emplace(n, d.counters.size());
          if (added) d.counters.push_back(n);
          cols.push_back(it->second);
        }
        config_columns[pc.id()] = {pc.device(), std::move(cols)};
      }
      for (const PmSample& s : c.pm_samples()) {
        auto cfg = config_columns.find(s.config());
        if (cfg == config_columns.end() || s.start() <= 0) continue;
        DeviceAccum& d = devices[cfg->second.first];
        const std::vector<size_t>& cols = cfg->second.second;
        const uint64_t duration = static_cast<uint64_t>(std::max<int64_t>(s.duration(), 0));
        const uint64_t mid = static_cast<uint64_t>(s.start()) + duration / 2;
        std::vector<RangeAccum*> targets{&d.whole};
        auto sweep = sweeps.try_emplace(cfg->second.first, &sorted).first;
        // Nested occurrences of one name count a sample once.
        keys.clear();
        for (size_t idx : sweep->second.At(mid)) keys.push_back(sorted[idx].key);
        std::sort(keys.begin(), keys.end());
        keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
        for (const uint32_t key : keys) {
          RangeAccum& r = d.ranges[file.names[key]];
          if (r.name.empty() && r.samples == 0) {
            r.name = file.names[key].first;
            r.domain = file.names[key].second;
            r.total_range_ns = name_ns[key];
          }
          targets.push_back(&r);
        }
        for (RangeAccum* r : targets) {
          ++r->samples;
          if (r->values.size() < d.counters.size()) r->values.resize(d.counters.size());
          for (int i = 0; i < s.values_size() && i < static_cast<int>(cols.size()); ++i) {
            const std::string& name = d.counters[cols[i]];
            r->values[cols[i]].Add(PmCounterShownValue(name, s.values(i), duration), rng);
          }
        }
      }
    }
  }
  std::vector<PmDeviceSummary> out;
  auto finish = [](RangeAccum& a, size_t n) {
    PmRangeStats r;
    r.name = a.name;
    r.domain = a.domain;
    r.samples = a.samples;
    r.total_range_ns = a.total_range_ns;
    a.values.resize(n);
    for (Accum& v : a.values) r.values.push_back(v.Finish());
    return r;
  };
  for (auto& [device, d] : devices) {
    PmDeviceSummary s;
    s.device = device;
    s.counters = d.counters;
    s.interval_ns = d.interval_ns;
    s.whole = finish(d.whole, d.counters.size());
    for (auto& [key, r] : d.ranges) s.ranges.push_back(finish(r, d.counters.size()));
    std::stable_sort(s.ranges.begin(), s.ranges.end(),
                     [](const PmRangeStats& a, const PmRangeStats& b) {
                       return a.total_range_ns > b.total_range_ns;
                     });
    out.push_back(std::move(s));
  }
  return out;
}

std::string FormatPmSummaryText(const std::vector<PmDeviceSummary>& devices, size_t top) {
  std::string o;
  for (const PmDeviceSummary& d : devices) {
    if (d.whole.samples == 0) continue;
    if (o.empty()) {
      o += "\nPM samples (GPU counters over time, KP_PM_SAMPLING): mean / p95 over the samples "
           "whose midpoint lies in the range; byte counters per second\n";
    }
    o += StringPrintf("  GPU %u: %" PRIu64 " samples every %.0f us\n", d.device, d.whole.samples,
                      static_cast<double>(d.interval_ns) / 1e3);
    std::vector<const PmRangeStats*> rows{&d.whole};
    for (size_t i = 0; i < d.ranges.size() && i < top; ++i) rows.push_back(&d.ranges[i]);
    int width = 7;
    for (const std::string& c : d.counters)
      width = std::max(width, static_cast<int>(PmCounterLabel(c).size()));
    o += StringPrintf("    %-*s", width, "counter");
    for (const PmRangeStats* r : rows) {
      std::string name = r == &d.whole ? std::string("whole run") : r->name;
      if (name.size() > 19) name = name.substr(0, 18) + "~";
      o += StringPrintf(" %19s", name.c_str());
    }
    o += "\n";
    for (size_t c = 0; c < d.counters.size(); ++c) {
      o += StringPrintf("    %-*s", width, PmCounterLabel(d.counters[c]).c_str());
      for (const PmRangeStats* r : rows) {
        const PmCounterStats& v = r->values[c];
        const std::string cell = v.count == 0 ? "-" : Short(v.mean) + " / " + Short(v.p95);
        o += StringPrintf(" %19s", cell.c_str());
      }
      o += "\n";
    }
    // One line per range as well, greppable by name: samples and the first counters' means.
    o += "    per range (samples; mean of each counter in the order above):\n";
    for (size_t i = 0; i < d.ranges.size() && i < top; ++i) {
      const PmRangeStats& r = d.ranges[i];
      std::string line =
          StringPrintf("      %-24s %6" PRIu64 " ",
                       (r.domain.empty() ? r.name : r.domain + ":" + r.name).c_str(), r.samples);
      for (const PmCounterStats& v : r.values) line += " " + (v.count ? Short(v.mean) : "-");
      o += line + "\n";
    }
  }
  return o;
}

std::string FormatPmSummaryJson(const std::vector<PmDeviceSummary>& devices) {
  using nlohmann::json;
  json a = json::array();
  auto stats = [](const PmDeviceSummary& d, const PmRangeStats& r) {
    json v = json::object();
    for (size_t c = 0; c < d.counters.size() && c < r.values.size(); ++c) {
      if (r.values[c].count == 0) continue;
      v[PmCounterLabel(d.counters[c])] = {{"mean", r.values[c].mean}, {"p95", r.values[c].p95}};
    }
    return v;
  };
  for (const PmDeviceSummary& d : devices) {
    json j;
    j["device"] = d.device;
    j["interval_ns"] = d.interval_ns;
    j["counters"] = d.counters;
    j["samples"] = d.whole.samples;
    j["whole_run"] = stats(d, d.whole);
    json ranges = json::array();
    for (const PmRangeStats& r : d.ranges) {
      ranges.push_back({{"name", r.name},
                        {"domain", r.domain},
                        {"samples", r.samples},
                        {"total_range_ns", r.total_range_ns},
                        {"values", stats(d, r)}});
    }
    j["ranges"] = ranges;
    a.push_back(j);
  }
  return a.dump();
}

}  // namespace kp
