#include "tools/summary/trace_summary.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>

#include "common/stats_table.h"
#include "common/time_math.h"
#include "tools/capture/capture_window_text.h"
#include "tools/export/csv_exporter.h"
#include "tools/export/record_naming.h"
#include "tools/info/trace_info.h"
#include "tools/kptrace/progress_line.h"
#include "tools/metrics/speed_of_light.h"
#include "tools/reader/trace_reader.h"
#include "tools/run/clock_alignment.h"
#include "tools/summary/collective_overlap.h"
#include "tools/summary/duration_sketch.h"
#include "tools/summary/interval_sort.h"
#include "tools/summary/step_ranges.h"
#include "tools/summary/text_format.h"
#include "tools/summary/time_intervals.h"

namespace kp {
namespace {

using Interval = TimeInterval;

// Durations kept exactly across all groups before large groups move to histograms.
constexpr uint64_t kExactValues = uint64_t{4} << 20;
// Runs of a process's kernels for CollectiveOverlap (several files only): 8 MiB of intervals per
// run, and as much again for sorting, kept from the first run's sort on.
constexpr size_t kProcessWorkRunEntries = size_t{1} << 18;

// A kernel's tag in the device-work sort (keyed by device): its stream plus one; 0 marks copies
// and memsets.
uint64_t StreamTag(uint32_t stream) { return uint64_t{stream} + 1; }

struct MetricAccum {
  std::string name, domain, chip;
  uint64_t occurrences = 0;
  uint32_t passes = 0, skip = 0;
  uint64_t inconsistent = 0;
  std::vector<std::string> names;
  std::map<std::string, std::vector<double>> values;
  bool range_mode = false;
  // Each value set's SM clock (gpc__cycles_elapsed.avg.per_second, else the record's
  // sm_clock_khz; sets with neither are left out) with its device and that device's maximum
  // SM clock in the set's own trace (device ids repeat across traces; 0 = no Device record).
  struct SetClock {
    double mhz, max_mhz;
    uint32_t device;
  };
  std::vector<SetClock> set_clocks;
  struct Occurrence {
    uint64_t start, end;
    uint32_t device;
    double gpu_time_ns;  // gpu__time_duration.sum of this record, or 0
  };
  std::vector<Occurrence> occurrences_seen;
};

// Length of [start, end) covered by `merged` (sorted, disjoint intervals).
double CoveredLength(const std::vector<Interval>& merged, uint64_t start, uint64_t end) {
  if (merged.empty() || end <= start) return 0;
  auto first = std::upper_bound(merged.begin(), merged.end(), start,
                                [](uint64_t t, const Interval& iv) { return t < iv.end; });
  double total = 0;
  for (auto it = first; it != merged.end() && it->start < end; ++it) {
    total += static_cast<double>(std::min(end, it->end) - std::max(start, it->start));
  }
  return total;
}

// Duration statistics per (name, domain), in bounded memory (duration_sketch.h). Groups are
// found through a table indexed by the chunk's string or shape id (an id names the same text
// throughout its chunk), so the per-record cost is an index, not a map lookup or a comparison
// of names.
struct DurationGroup {
  std::string name, domain;
  uint32_t index = 0;  // in creation order: one per (name, domain) for the whole summary
  DurationSketch durations;
  bool collective = false;  // an NCCL kernel (kernels only)
};

class DurationGroups {
 public:
  explicit DurationGroups(SketchBudget* budget) : budget_(budget) {}
  // A chunk's string and shape ids name its own tables (tools/reader/trace_reader.h), so the
  // id cache holds for one chunk: within it, an id always names the same text.
  void NewChunk() {
    for (uint32_t id : cached_) by_id_[id] = {};
    cached_.clear();
  }
  // The group of `name`/`domain`, looked up by `id` (a string or shape id of the current chunk)
  // and `domain_id` (the domain's string id; 0 for none).
  DurationGroup& Get(uint32_t id, uint32_t domain_id, std::string_view name,
                     std::string_view domain) {
    if (id < by_id_.size() && by_id_[id].group != 0 && by_id_[id].domain_id == domain_id) {
      return *groups_[by_id_[id].group - 1];
    }
    auto [it, added] = index_.emplace(std::make_pair(std::string(name), std::string(domain)),
                                      static_cast<uint32_t>(groups_.size()));
    if (added) {
      groups_.push_back(std::make_unique<DurationGroup>());
      groups_.back()->name = it->first.first;
      groups_.back()->domain = it->first.second;
      groups_.back()->index = it->second;
      groups_.back()->collective = IsCollectiveKernelName(groups_.back()->name);
    }
    if (id < kMaxCachedId) {
      if (id >= by_id_.size()) by_id_.resize(id + 1);
      if (by_id_[id].group == 0) cached_.push_back(id);
      by_id_[id] = {it->second + 1, domain_id};
    }
    return *groups_[it->second];
  }
  void Add(DurationGroup& g, int64_t duration) { g.durations.Add(duration, budget_); }
  // Sum of positive durations, over the groups in name order (as the summary always summed).
  double PositiveTotal() const {
    double total = 0;
    for (const auto& [key, i] : index_) groups_[i]->durations.AddPositiveTo(&total);
    return total;
  }
  std::vector<NamedStats> Finish(double denominator, bool keep_samples) {
    std::vector<NamedStats> out;
    for (const auto& [key, i] : index_) {
      DurationGroup& g = *groups_[i];
      NamedStats n;
      n.name = g.name;
      n.domain = g.domain;
      n.stats = g.durations.Stats();
      n.share = denominator > 0 ? n.stats.total / denominator : 0;
      if (keep_samples) n.samples = g.durations.values();
      out.push_back(std::move(n));
      g.durations = DurationSketch();
    }
    std::sort(out.begin(), out.end(), [](const NamedStats& a, const NamedStats& b) {
      return a.stats.total > b.stats.total;
    });
    return out;
  }

 private:
  static constexpr uint32_t kMaxCachedId = 1u << 20;  // larger (damaged) ids use the map
  SketchBudget* budget_;
  std::map<std::pair<std::string, std::string>, uint32_t> index_;
  std::vector<std::unique_ptr<DurationGroup>> groups_;
  struct Cached {
    uint32_t group = 0;  // group index + 1; 0 = not seen in this chunk
    uint32_t domain_id = 0;
  };
  std::vector<Cached> by_id_;
  std::vector<uint32_t> cached_;  // the ids set in by_id_
};

}  // namespace

size_t NearestRankIndex(size_t n, double p) {
  double rank = std::ceil(p / 100.0 * static_cast<double>(n));
  size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return std::min(idx, n - 1);
}

double NearestRank(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  return static_cast<double>(sorted[NearestRankIndex(sorted.size(), p)]);
}

DurationStats ComputeDurationStats(std::vector<int64_t>* v) {
  DurationStats s;
  if (v->empty()) return s;
  // Selection, not a sort: each percentile's element is put in place with nth_element, the
  // later ones in the part after the earlier (linear time; the values end partly ordered).
  const size_t n = v->size();
  const size_t i50 = NearestRankIndex(n, 50), i95 = NearestRankIndex(n, 95),
               i99 = NearestRankIndex(n, 99);
  auto at = [&](size_t i) { return v->begin() + static_cast<std::ptrdiff_t>(i); };
  std::nth_element(v->begin(), at(i50), v->end());
  if (i95 > i50) std::nth_element(at(i50 + 1), at(i95), v->end());
  if (i99 > i95) std::nth_element(at(i95 + 1), at(i99), v->end());
  const auto [lo, hi] = std::minmax_element(v->begin(), v->end());
  s.min = static_cast<double>(*lo);
  s.max = static_cast<double>(*hi);
  s.count = n;
  for (int64_t x : *v) s.total += static_cast<double>(x);
  s.mean = s.total / static_cast<double>(s.count);
  double sq = 0;
  for (int64_t x : *v) sq += (static_cast<double>(x) - s.mean) * (static_cast<double>(x) - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(s.count));
  s.rel_std = s.mean != 0 ? s.std / std::fabs(s.mean) : 0;
  s.stable = s.rel_std < 0.02;
  s.median = static_cast<double>((*v)[i50]);
  s.p95 = static_cast<double>((*v)[i95]);
  s.p99 = static_cast<double>((*v)[i99]);
  return s;
}

TraceSummary SummarizeTraces(const std::vector<std::string>& paths, const SummaryOptions& options) {
  TraceSummary sum;
  ProgressLine progress(options.progress_label, ProgressLine::TotalFileBytes(paths),
                        !options.progress_label.empty() && ProgressLine::StderrIsTerminal());
  uint64_t bytes_before = 0;
  sum.paths = paths;
  const bool several = paths.size() > 1;
  StepRanges step_ranges(several ? paths.size() : 0);
  if (several && options.align_collectives) {
    ClockAlignment alignment = AlignOnCollectives(paths);
    sum.alignment = alignment.lines;
    sum.processes.resize(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) {
      sum.processes[i].clock_offset_ns = alignment.offset_ns[i];
    }
  }
  sum.processes.resize(several ? paths.size() : 0);
  // Every value is kept exactly up to kExactValues in all (32 MiB); past it, large groups move to
  // histograms (duration_sketch.h). kptrace diff (keep_samples) needs every value.
  SketchBudget budget(options.keep_samples ? UINT64_MAX : kExactValues);
  DurationGroups kernels(&budget), ranges(&budget), api(&budget);
  struct CopyAccum {
    uint64_t count = 0, bytes = 0;
    double ns = 0;
    DurationSketch mbps;  // per-copy MB/s as integers keep the percentile helper simple
  };
  std::map<int, CopyAccum> copies;
  // GPU work by device, sorted by start in bounded memory (interval_sort.h): its union is the
  // busy time; the kernels among it, tagged with their stream (StreamTag), give each stream's
  // launch gaps (a stream's kernels in device start order are in start order).
  ExternalIntervalSort device_work;
  std::map<std::tuple<std::string, std::string, uint32_t>, MetricAccum> metrics;
  uint64_t first = UINT64_MAX, last = 0;
  bool saw_pm_samples = false;
  auto span = [&](int64_t start, int64_t dur) {
    if (start <= 0) return;
    uint64_t s = static_cast<uint64_t>(start);
    first = std::min(first, s);
    last = std::max(last, static_cast<uint64_t>(EndTime(start, std::max<int64_t>(dur, 0))));
  };
  Chunk c;
  for (size_t fi = 0; fi < paths.size(); ++fi) {
    const std::string prefix = paths.size() > 1 ? paths[fi] + ": " : "";
    StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(paths[fi]);
    if (!opened.ok()) {
      sum.errors.push_back(opened.status().message());
      continue;
    }
    std::unique_ptr<TraceReader>& reader = opened.value();
    std::map<uint32_t, MetricConfig> configs;
    // This process's kernels by start (key 0; tag 1: collective), for CollectiveOverlap.
    ExternalIntervalSort process_work(kProcessWorkRunEntries);
    ProcessSummary* process = several ? &sum.processes[fi] : nullptr;
    const int64_t clock_offset = process != nullptr ? process->clock_offset_ns : 0;
    while (reader->Next(&c)) {
      progress.Update(bytes_before + reader->position(), sum.records + reader->stats().records);
      kernels.NewChunk();
      ranges.NewChunk();
      api.NewChunk();
      ShiftChunkTimes(&c, clock_offset);
      for (const MetricConfig& m : c.metric_configs()) configs[m.id()] = m;
      saw_pm_samples = saw_pm_samples || c.pm_samples_size() > 0;
      for (const Kernel& k : c.kernels()) {
        if (k.flags() & RECORD_FLAG_PROFILER_INTERNAL) {
          ++sum.internal_kernels_excluded;
          continue;
        }
        if (k.flags() & RECORD_FLAG_NO_TIMING) {
          ++sum.untimed_kernels;
          continue;
        }
        if (k.flags() & RECORD_FLAG_PROFILER_TIMED) ++sum.profiler_timed_kernels;
        const KernelShape* shape = reader->Shape(k.shape());
        DurationGroup& group =
            shape != nullptr
                ? kernels.Get(k.shape(), 0, reader->Str(shape->demangled()), "")
                : kernels.Get(UINT32_MAX, 0,
                              "<unknown kernel shape " + std::to_string(k.shape()) + ">", "");
        if (process != nullptr) {
          ++process->kernels;
          const double d = static_cast<double>(std::max<int64_t>(k.duration(), 0));
          process->kernel_ns += d;
          const bool collective = group.collective;
          if (collective) process->collective_ns += d;
          if (k.start() > 0 && k.duration() >= 0) {
            process_work.Add(0, static_cast<uint64_t>(k.start()),
                             static_cast<uint64_t>(SaturatingAdd(k.start(), k.duration())),
                             collective ? 1 : 0);
          }
        }
        kernels.Add(group, k.duration());
        span(k.start(), k.duration());
        if (k.start() > 0 && k.duration() >= 0) {
          const uint64_t start = static_cast<uint64_t>(k.start());
          const uint64_t end = static_cast<uint64_t>(EndTime(k.start(), k.duration()));
          device_work.Add(k.device(), start, end, StreamTag(k.stream()));
        }
      }
      for (const Memcpy& m : c.memcpys()) {
        CopyAccum& a = copies[m.copy_kind()];
        ++a.count;
        a.bytes += m.bytes();
        if (m.duration() > 0) {
          a.ns += static_cast<double>(m.duration());
          a.mbps.Add(static_cast<int64_t>(static_cast<double>(m.bytes()) * 1000.0 /
                                          static_cast<double>(m.duration())),
                     &budget);
        }
        span(m.start(), m.duration());
        if (m.start() > 0 && m.duration() >= 0) {
          device_work.Add(m.device(), static_cast<uint64_t>(m.start()),
                          static_cast<uint64_t>(EndTime(m.start(), m.duration())));
        }
      }
      for (const Memset& m : c.memsets()) {
        span(m.start(), m.duration());
        if (m.start() > 0 && m.duration() >= 0) {
          device_work.Add(m.device(), static_cast<uint64_t>(m.start()),
                          static_cast<uint64_t>(EndTime(m.start(), m.duration())));
        }
      }
      for (const NvtxRange& r : c.nvtx_ranges()) {
        DurationGroup& group =
            ranges.Get(r.name(), r.domain(), reader->Str(r.name()), reader->Str(r.domain()));
        if (several && r.start() > 0 && r.duration() >= 0 &&
            (r.end_thread_id() == 0 || r.end_thread_id() == r.thread_id())) {
          step_ranges.Add(fi, group.index, {group.name, group.domain}, r.thread_id(),
                          static_cast<uint64_t>(r.start()),
                          static_cast<uint64_t>(SaturatingAdd(r.start(), r.duration())));
        }
        ranges.Add(group, r.duration());
        span(r.start(), r.duration());
      }
      for (const ApiCall& a : c.api_calls()) {
        api.Add(api.Get(a.name(), 0, reader->Str(a.name()), ""), a.duration());
        span(a.start(), a.duration());
      }
      if (c.pc_stalls_size() > 0 || c.pc_stall_reasons_size() > 0) sum.pc_stalls.AddChunk(c);
      for (const MetricRange& m : c.metric_ranges()) {
        std::string name(reader->Str(m.name())), domain(reader->Str(m.domain()));
        MetricAccum& acc = metrics[{name, domain, m.config()}];
        acc.name = name;
        acc.domain = domain;
        auto it = configs.find(m.config());
        if (it != configs.end()) {  // the set's configuration, whether or not it is used
          acc.passes = it->second.num_passes();
          acc.skip = it->second.skip();
          acc.chip = it->second.chip();
          if (acc.names.empty()) {
            acc.names.assign(it->second.metric_names().begin(), it->second.metric_names().end());
          }
        }
        if (m.inconsistent()) {
          ++acc.inconsistent;
          if (!options.include_inconsistent) continue;  // counted, left out of the medians
        }
        ++acc.occurrences;
        double set_clock_hz = 0;
        if (it != configs.end()) {
          double gpu_time = 0;
          for (int i = 0; i < m.values_size() && i < it->second.metric_names_size(); ++i) {
            if (!std::isnan(m.values(i))) {
              acc.values[it->second.metric_names(i)].push_back(m.values(i));
              if (it->second.metric_names(i) == "gpu__time_duration.sum") gpu_time = m.values(i);
              if (it->second.metric_names(i) == "gpc__cycles_elapsed.avg.per_second") {
                set_clock_hz = m.values(i);
              }
            }
          }
          acc.range_mode = it->second.mode() == "range";
          if (acc.range_mode && m.start() > 0 && m.duration() > 0) {
            acc.occurrences_seen.push_back({static_cast<uint64_t>(m.start()),
                                            static_cast<uint64_t>(EndTime(m.start(), m.duration())),
                                            m.device(), gpu_time});
          }
        }
        const double set_clock_mhz =
            set_clock_hz > 0 ? set_clock_hz / 1e6 : m.sm_clock_khz() / 1000.0;
        if (set_clock_mhz > 0) {
          double max_mhz = 0;
          for (const Device& d : reader->devices()) {
            if (d.id() != m.device()) continue;
            max_mhz = d.core_clock_khz() / 1000.0;
            break;
          }
          acc.set_clocks.push_back({set_clock_mhz, max_mhz, m.device()});
        }
      }
      for (const CaptureWindow& w : c.capture_windows()) {
        const uint64_t base =
            reader->header() != nullptr ? reader->header()->start_time_trace_ns() : 0;
        sum.capture_windows.push_back(prefix + DescribeCaptureWindow(w, base));
      }
      for (const Notice& n : c.notices()) {
        if (sum.notices.size() < 50)
          sum.notices.push_back(prefix + n.component() + ": " + n.message());
      }
    }
    if (!sum.have_header && reader->header() != nullptr) {
      sum.have_header = true;
      sum.header = *reader->header();
    }
    for (const Device& d : reader->devices()) {
      bool known = false;
      for (const Device& x : sum.devices) known |= x.uuid() == d.uuid() && x.id() == d.id();
      if (!known) sum.devices.push_back(d);
    }
    const ReaderStats& rs = reader->stats();
    bytes_before += rs.file_bytes;
    sum.records += rs.records;
    if (rs.chunks_ok > 0) sum.anything_read = true;
    if (rs.chunks_ok == 0) sum.losses.push_back(prefix + "nothing could be read (no intact chunk)");
    for (const std::string& l : rs.Describe()) sum.losses.push_back(prefix + l);
    const Stats& ts = reader->trace_stats();
    if (ts.cupti_dropped_records() > 0) {
      sum.losses.push_back(prefix + std::to_string(ts.cupti_dropped_records()) +
                           " records dropped by CUPTI (buffers full): totals are low");
    }
    for (const auto& [name, v] : NonZeroStats(ts)) {
      const StatClass severity = ClassifyStat(name);
      if (name == "cupti_dropped_records" || severity == StatClass::kBookkeeping) continue;
      if (name == "nvtx_open_ranges") {
        sum.trace_notes.push_back(prefix + std::to_string(v) +
                                  " NVTX ranges were still open at the end (the program did not "
                                  "close them; they are shown ending at the trace end)");
      } else if (severity == StatClass::kInfo) {
        sum.trace_notes.push_back(prefix + name + ": " + std::to_string(v));
      } else {
        sum.losses.push_back(prefix + name + ": " + std::to_string(v));
      }
    }
    if (process != nullptr) {
      const Header* h = reader->header();
      process->path = paths[fi];
      if (h != nullptr) {
        process->rank = h->rank();
        process->pid = h->pid();
        process->host = h->hostname();
      }
      process->clean_end = reader->footer() != nullptr && reader->footer()->clean_end();
      process->end_reason = process->clean_end ? reader->footer()->end_reason() : "no footer";
      CollectiveOverlap overlap;
      const Status swept = process_work.ForEachSorted([&](const KeyedInterval* batch, size_t n) {
        for (size_t i = 0; i < n; ++i) overlap.Add(batch[i].start, batch[i].end, batch[i].tag != 0);
      });
      if (!swept.ok()) sum.errors.push_back(prefix + swept.message());
      overlap.Finish();
      process->collective_busy_ns = static_cast<double>(overlap.collective_busy_ns());
      process->overlap_ns = static_cast<double>(overlap.overlap_ns());
      const Status ranges_sorted = step_ranges.FinishFile(fi);
      if (!ranges_sorted.ok()) sum.errors.push_back(prefix + ranges_sorted.message());
    }
    if (rs.chunks_ok > 0 && reader->footer() == nullptr) {
      sum.losses.push_back(prefix +
                           "no footer: the process ended without kp's exit flush (killed?) -- "
                           "data up to the last chunk is intact");
    }
  }
  progress.Finish();
  if (several) {
    std::vector<std::vector<double>> steps;
    StepRanges::Name step;
    const Status chosen = step_ranges.Choose(&step, &steps);
    if (!chosen.ok()) sum.errors.push_back(chosen.message());
    if (!step.first.empty()) {
      sum.step_range = step.second.empty() ? step.first : step.second + ": " + step.first;
      for (size_t i = 0; i < steps.size() && i < sum.processes.size(); ++i) {
        sum.processes[i].step_ns = steps[i];
      }
    }
  }
  sum.span_ns = last > first ? static_cast<double>(last - first) : 0;
  const double gpu_time = kernels.PositiveTotal();
  sum.gpu_time_ns = gpu_time;
  sum.kernels = kernels.Finish(gpu_time, options.keep_samples);
  sum.ranges = ranges.Finish(sum.span_ns, options.keep_samples);
  sum.api = api.Finish(sum.span_ns, options.keep_samples);
  for (auto& [kind, a] : copies) {
    CopyStats cs;
    cs.kind = CopyKindName(kind);
    cs.count = a.count;
    cs.bytes = a.bytes;
    cs.total_ns = a.ns;
    cs.median_gbps = a.mbps.Percentile(50) / 1000.0;
    cs.aggregate_gbps = a.ns > 0 ? static_cast<double>(a.bytes) / a.ns : 0;
    sum.copies.push_back(cs);
  }
  // Busy time per device: the union of its work, swept in start order. The merged intervals
  // themselves are kept only when range-mode metrics need them (a metrics trace is small).
  // Launch gaps per stream in the same sweep: a stream's kernels in start order, a gap wherever
  // the next starts after every earlier one ended.
  bool metrics_need_work = false;
  for (const auto& [key, acc] : metrics) metrics_need_work |= !acc.occurrences_seen.empty();
  std::map<uint32_t, std::vector<Interval>> merged_work;
  double idle_all = 0, span_all = 0;
  {
    bool open = false;
    uint64_t device = 0, cs = 0, ce = 0;
    double busy = 0;
    struct StreamSweep {
      uint64_t first_start = 0, end = 0, count = 0;
      DurationSketch gaps;
    };
    std::map<uint64_t, StreamSweep> streams;  // the device's, by StreamTag: stream order
    // The last streams looked up, by tag: the map's nodes stay put until the device closes
    // (close_device empties both).
    struct RecentStream {
      uint64_t tag = 0;
      StreamSweep* sweep = nullptr;
    };
    RecentStream recent[64];
    auto close_device = [&] {
      if (!open) return;
      busy += static_cast<double>(ce - cs);
      if (metrics_need_work) merged_work[static_cast<uint32_t>(device)].push_back({cs, ce});
      DeviceBusy b;
      b.device = static_cast<uint32_t>(device);
      b.busy_ns = busy;
      b.span_ns = sum.span_ns;
      b.fraction = b.span_ns > 0 ? b.busy_ns / b.span_ns : 0;
      sum.busy.push_back(b);
      for (auto& [tag, st] : streams) {
        StreamGaps g;
        g.device = static_cast<uint32_t>(device);
        g.stream = static_cast<uint32_t>(tag - 1);
        g.kernels = st.count;
        g.span_ns = static_cast<double>(st.end - st.first_start);
        const DurationStats d = st.gaps.Stats();
        g.gaps = d.count;
        g.idle_ns = d.total;
        g.median_ns = d.median;
        g.p95_ns = d.p95;
        idle_all += g.idle_ns;
        span_all += g.span_ns;
        sum.streams.push_back(g);
      }
      streams.clear();
      for (RecentStream& r : recent) r = {};
    };
    auto sweep_of = [&](uint64_t tag) -> StreamSweep& {
      RecentStream& r = recent[tag % 64];
      if (r.sweep == nullptr || r.tag != tag) r = {tag, &streams[tag]};
      return *r.sweep;
    };
    auto add = [&](const KeyedInterval& iv) {
      if (open && iv.key != device) {
        close_device();
        open = false;
      }
      if (!open) {
        device = iv.key;
        cs = iv.start;
        ce = iv.end;
        busy = 0;
        open = true;
      } else if (iv.start > ce) {
        busy += static_cast<double>(ce - cs);
        if (metrics_need_work) merged_work[static_cast<uint32_t>(device)].push_back({cs, ce});
        cs = iv.start;
        ce = iv.end;
      } else {
        ce = std::max(ce, iv.end);
      }
      if (iv.tag == 0) return;  // a copy or memset
      StreamSweep& st = sweep_of(iv.tag);
      if (st.count++ == 0) {
        st.first_start = iv.start;
        st.end = iv.end;
        return;
      }
      if (iv.start > st.end) st.gaps.Add(static_cast<int64_t>(iv.start - st.end), &budget);
      st.end = std::max(st.end, iv.end);
    };
    const Status sorted = device_work.ForEachSorted([&](const KeyedInterval* batch, size_t n) {
      for (size_t i = 0; i < n; ++i) add(batch[i]);
    });
    close_device();
    if (!sorted.ok()) sum.errors.push_back(sorted.message());
  }
  sum.idle_between_kernels_fraction = span_all > 0 ? idle_all / span_all : 0;
  for (auto& [key, acc] : metrics) {
    MetricRangeSummary m;
    m.name = acc.name;
    m.domain = acc.domain;
    m.chip = acc.chip;
    m.occurrences = acc.occurrences;
    m.passes = acc.passes;
    m.skip = acc.skip;
    m.sets_inconsistent = acc.inconsistent;
    m.inconsistent_included = options.include_inconsistent;
    m.order = acc.names;
    for (auto& [name, vals] : acc.values) {
      std::sort(vals.begin(), vals.end());
      m.medians[name] = vals[NearestRankIndex(vals.size(), 50)];  // as for durations
    }
    if (options.keep_samples) m.samples = acc.values;
    auto clk = m.medians.find("gpc__cycles_elapsed.avg.per_second");
    if (clk != m.medians.end()) {
      m.sm_clock_mhz = clk->second / 1e6;
    } else if (!acc.set_clocks.empty()) {
      // No set has the clock metric, so every set's clock is its record's sm_clock_khz.
      std::vector<double> clocks;
      for (const MetricAccum::SetClock& c : acc.set_clocks) clocks.push_back(c.mhz);
      std::sort(clocks.begin(), clocks.end());
      m.sm_clock_mhz = clocks[NearestRankIndex(clocks.size(), 50)];
    }
    m.sets_with_sm_clock = acc.set_clocks.size();
    const MetricAccum::SetClock* lowest = nullptr;  // of the sets below half their maximum
    for (const MetricAccum::SetClock& c : acc.set_clocks) {
      if (m.sm_clock_max_mhz <= 0) m.sm_clock_max_mhz = c.max_mhz;
      if (c.max_mhz <= 0 || c.mhz >= 0.5 * c.max_mhz) continue;
      ++m.sets_low_sm_clock;
      if (lowest == nullptr || c.mhz / c.max_mhz < lowest->mhz / lowest->max_mhz) lowest = &c;
    }
    SolReading sol = DiagnoseSpeedOfLight(m.medians);
    m.sm_pct = sol.sm_pct;
    m.mem_pct = sol.mem_pct;
    std::vector<double> fractions;
    for (const MetricAccum::Occurrence& o : acc.occurrences_seen) {
      auto work = merged_work.find(o.device);
      if (work == merged_work.end()) continue;
      const double busy = CoveredLength(work->second, o.start, o.end);
      const double denominator =
          o.gpu_time_ns > 0 ? o.gpu_time_ns : static_cast<double>(o.end - o.start);
      if (denominator > 0) fractions.push_back(std::min(1.0, busy / denominator));
    }
    if (!fractions.empty()) {
      std::sort(fractions.begin(), fractions.end());
      m.busy_fraction = fractions[NearestRankIndex(fractions.size(), 50)];
    }
    // Percentages of sets whose counters ran for part of the range only are of what was
    // counted already: dividing them by the range's busy share would correct twice.
    if (m.busy_fraction > 0.01 && m.busy_fraction < 0.999 && !sol.verdict.empty() &&
        !m.low_sm_clock()) {
      std::map<std::string, double> busy_values = m.medians;
      static const std::string kElapsed = ".pct_of_peak_sustained_elapsed";
      for (auto& [name, value] : busy_values) {
        if (name.size() > kElapsed.size() &&
            name.compare(name.size() - kElapsed.size(), kElapsed.size(), kElapsed) == 0) {
          value = std::min(100.0, value / m.busy_fraction);
        }
      }
      SolReading busy_sol = DiagnoseSpeedOfLight(busy_values);
      m.sm_pct_busy = busy_sol.sm_pct;
      m.mem_pct_busy = busy_sol.mem_pct;
      sol = busy_sol;
      sol.explanation = StringPrintf("GPU busy %.0f%% of the range; percentages while busy: ",
                                     m.busy_fraction * 100) +
                        busy_sol.explanation;
    }
    m.verdict = sol.verdict;
    m.explanation = sol.explanation;
    if (m.all_dropped()) {
      m.explanation = StringPrintf(
          "no value set to read: all %" PRIu64
          " were dropped as inconsistent (their occurrences differ in duration by more than "
          "the threshold); --all includes them, or run more occurrences",
          m.sets_inconsistent);
    }
    if (lowest != nullptr) {
      m.lowest_sm_clock_mhz = lowest->mhz;
      // Rounded down, so that a clock just below half never reads as half.
      const std::string note = StringPrintf(
          "SM clock below half of the GPU's maximum in %" PRIu64 " of %" PRIu64
          " value set(s) (lowest %.0f MHz, %.1f%% of GPU %u's %.0f MHz): the counters ran for "
          "only part of the range (on a GPU shared with another process they stand still while "
          "the other process's kernels run) or the GPU ran slowly (idle clocks, throttling); the "
          "percentages describe what was counted and are not rescaled to the range's busy time",
          m.sets_low_sm_clock, m.sets_with_sm_clock, std::floor(lowest->mhz),
          std::floor(1000 * lowest->mhz / lowest->max_mhz) / 10, lowest->device, lowest->max_mhz);
      m.explanation = m.explanation.empty() ? note : note + ". " + m.explanation;
    }
    sum.metrics.push_back(m);
  }
  if (saw_pm_samples) sum.pm = SummarizePmSamples(paths);
  return sum;
}

std::string FormatCrossProcessText(const TraceSummary& s) {
  if (s.processes.size() < 2) return "";
  auto rank_name = [](const ProcessSummary& p) {
    return p.rank >= 0 ? StringPrintf("rank %d", p.rank) : StringPrintf("pid %u", p.pid);
  };
  std::string o =
      StringPrintf("\nProcesses (%zu; collectives = NCCL kernels)\n", s.processes.size());
  o += StringPrintf("  %-10s %8s %-16s %8s %12s %12s %10s %12s  %s\n", "process", "pid", "host",
                    "kernels", "kernel time", "collectives", "overlap", "clock shift", "end");
  for (const ProcessSummary& p : s.processes) {
    const double share = p.kernel_ns > 0 ? p.collective_ns / p.kernel_ns * 100 : 0;
    const double overlap = p.collective_busy_ns > 0 ? p.overlap_ns / p.collective_busy_ns * 100 : 0;
    o += StringPrintf(
        "  %-10s %8u %-16s %8" PRIu64 " %12s %11.1f%% %9.1f%% %12s  %s\n", rank_name(p).c_str(),
        p.pid, p.host.c_str(), p.kernels, FormatDuration(p.kernel_ns).c_str(), share, overlap,
        p.clock_offset_ns == 0 ? "-" : StringPrintf("%+.3f ms", p.clock_offset_ns / 1e6).c_str(),
        p.end_reason.c_str());
  }
  o += "  (collectives: share of the process's kernel time; overlap: share of the time collective "
       "kernels ran during which a compute kernel ran too)\n";
  for (const std::string& line : s.alignment) o += "  align: " + line + "\n";
  if (s.step_range.empty()) {
    o += "  no NVTX range repeats at the outermost level on two or more processes: no per-step "
         "comparison (wrap each training step in an NVTX range)\n";
    return o;
  }
  size_t steps = 0;
  for (const ProcessSummary& p : s.processes) steps = std::max(steps, p.step_ns.size());
  o += StringPrintf("\nSteps across processes: outermost repeated range \"%s\"\n",
                    s.step_range.c_str());
  o += StringPrintf("  %6s", "step");
  for (const ProcessSummary& p : s.processes) o += StringPrintf(" %12s", rank_name(p).c_str());
  o += StringPrintf("  %-10s %s\n", "slowest", "by (vs fastest)");
  std::map<size_t, size_t> slowest_count;
  const size_t kShown = 20;
  for (size_t i = 0; i < steps; ++i) {
    double lo = 0, hi = 0;
    size_t slowest = 0, present = 0;
    std::string row = StringPrintf("  %6zu", i);
    for (size_t pi = 0; pi < s.processes.size(); ++pi) {
      const ProcessSummary& p = s.processes[pi];
      if (i >= p.step_ns.size()) {
        row += StringPrintf(" %12s", "-");
        continue;
      }
      const double d = p.step_ns[i];
      row += StringPrintf(" %12s", FormatDuration(d).c_str());
      if (present == 0 || d < lo) lo = d;
      if (present == 0 || d > hi) {
        hi = d;
        slowest = pi;
      }
      ++present;
    }
    if (present >= 2) {
      ++slowest_count[slowest];
      row += StringPrintf("  %-10s +%s (+%.1f%%)", rank_name(s.processes[slowest]).c_str(),
                          FormatDuration(hi - lo).c_str(), lo > 0 ? (hi - lo) / lo * 100 : 0);
    }
    if (i < kShown) o += row + "\n";
  }
  if (steps > kShown)
    o += StringPrintf("  ... %zu more steps (--format json has them all)\n", steps - kShown);
  o += StringPrintf("  %6s", "median");
  for (const ProcessSummary& p : s.processes) {
    std::vector<int64_t> v;
    for (double d : p.step_ns) v.push_back(static_cast<int64_t>(d));
    std::sort(v.begin(), v.end());
    o += StringPrintf(" %12s", v.empty() ? "-" : FormatDuration(NearestRank(v, 50)).c_str());
  }
  o += "\n";
  for (const auto& [pi, n] : slowest_count) {
    o += StringPrintf("  %s was the slowest in %zu of %zu steps\n",
                      rank_name(s.processes[pi]).c_str(), n, steps);
  }
  return o;
}

std::string FormatSummaryText(const TraceSummary& s, size_t top) {
  std::string o;
  o += "== kp summary: " +
       (s.paths.size() == 1 ? s.paths[0] : std::to_string(s.paths.size()) + " traces") + " ==\n";
  for (const std::string& e : s.errors) o += "ERROR: " + e + "\n";
  if (!s.losses.empty()) {
    o += "\n!! DATA LOSS / DAMAGE -- read the numbers below with this in mind:\n";
    for (const std::string& l : s.losses) o += "!!   " + l + "\n";
  }
  o += "\nSetup\n";
  for (const Device& d : s.devices) {
    // CUPTI reports 0 for the memory clock on some GPUs (the H200 here): say unknown.
    const std::string memory_clock =
        d.memory_clock_khz() > 0 ? StringPrintf("memory %u MHz", d.memory_clock_khz() / 1000)
                                 : std::string("memory clock unknown");
    o += StringPrintf("  GPU %u     %s (CC %u.%u, %u SMs, %.0f GiB, SM clock max %u MHz, %s)\n",
                      d.id(), d.name().c_str(), d.compute_capability_major(),
                      d.compute_capability_minor(), d.sm_count(),
                      d.global_memory_bytes() / (1024.0 * 1024 * 1024), d.core_clock_khz() / 1000,
                      memory_clock.c_str());
  }
  if (s.have_header) {
    const Header& h = s.header;
    std::string cmd;
    for (const auto& a : h.command_line()) cmd += (cmd.empty() ? "" : " ") + a;
    o += "  driver    " + h.driver_version() + ", CUDA driver API " +
         FormatCudaVersion(h.cuda_driver_version()) + ", CUPTI API " +
         std::to_string(h.cupti_api_version()) + "\n";
    o += "  host      " + h.hostname() + ", pid " + std::to_string(h.pid()) + "\n";
    o += "  command   " + cmd + "\n";
    o += "  date      " + FormatUtcDate(h.start_time_unix_ns()) + "\n";
  }
  o += StringPrintf("  span      %s, %" PRIu64 " records, GPU kernel time %s\n",
                    FormatDuration(s.span_ns).c_str(), s.records,
                    FormatDuration(s.gpu_time_ns).c_str());
  if (!s.trace_notes.empty()) {
    o += "\nTrace notes (not losses)\n";
    for (const std::string& n : s.trace_notes) o += "  " + n + "\n";
  }
  o += FormatCrossProcessText(s);

  auto table = [&](const char* title, const std::vector<NamedStats>& rows, const char* share) {
    if (rows.empty()) return;
    o += StringPrintf("\n%s (times per call; %s; p = nearest rank, std = population)\n", title,
                      share);
    // Name last, as nsys prints it: the numbers stay aligned and long C++ names keep room.
    o += StringPrintf("  %7s %10s %6s %10s %10s %10s %10s %10s %7s %6s  %s\n", "count", "total",
                      "share", "min", "median", "p95", "p99", "max", "rel.std", "stable", "name");
    for (size_t i = 0; i < rows.size() && i < top; ++i) {
      const NamedStats& n = rows[i];
      std::string name = n.domain.empty() ? n.name : n.domain + ": " + n.name;
      o += StringPrintf("  %7" PRIu64 " %10s %5.1f%% %10s %10s %10s %10s %10s %6.1f%% %6s  %s\n",
                        n.stats.count, FormatDuration(n.stats.total).c_str(), n.share * 100,
                        FormatDuration(n.stats.min).c_str(), FormatDuration(n.stats.median).c_str(),
                        FormatDuration(n.stats.p95).c_str(), FormatDuration(n.stats.p99).c_str(),
                        FormatDuration(n.stats.max).c_str(), n.stats.rel_std * 100,
                        n.stats.stable ? "yes" : "no", ShortKernelName(name, 110).c_str());
    }
    if (rows.size() > top) o += StringPrintf("  ... %zu more (--top N)\n", rows.size() - top);
  };
  table("Kernels", s.kernels, "share of GPU kernel time");
  if (s.untimed_kernels > 0) {
    o +=
        StringPrintf("  (%" PRIu64
                     " kernels without timestamps left out: CUPTI gives none to kernels it replays "
                     "for KP_METRICS_MODE=kernel (their gpu__time_duration.sum is in the metrics "
                     "table) or when its device buffer overflows)\n",
                     s.untimed_kernels);
  }
  if (s.internal_kernels_excluded > 0) {
    o += StringPrintf("  (%" PRIu64 " profiler-internal kernels excluded)\n",
                      s.internal_kernels_excluded);
  }
  if (s.profiler_timed_kernels > 0) {
    o += StringPrintf("  (%" PRIu64
                      " kernels timed by kernel-mode metrics: measured on their own launch with "
                      "kernel records off, start when the launch was submitted, duration their "
                      "gpu__time_duration.sum)\n",
                      s.profiler_timed_kernels);
  }
  table("NVTX ranges", s.ranges, "share of the wall span");
  if (!s.copies.empty()) {
    o += "\nCopies\n";
    o += StringPrintf("  %-8s %7s %14s %12s %14s %14s\n", "kind", "count", "bytes", "time",
                      "median GB/s", "total GB/s");
    for (const CopyStats& c : s.copies) {
      o += StringPrintf("  %-8s %7" PRIu64 " %14" PRIu64 " %12s %14.2f %14.2f\n", c.kind.c_str(),
                        c.count, c.bytes, FormatDuration(c.total_ns).c_str(), c.median_gbps,
                        c.aggregate_gbps);
    }
  }
  if (!s.api.empty()) {
    o += "\nCUDA API time\n";
    for (size_t i = 0; i < s.api.size() && i < top; ++i) {
      const NamedStats& n = s.api[i];
      o +=
          StringPrintf("  %-36s %7" PRIu64 " calls %12s total %10s median %10s max\n",
                       n.name.c_str(), n.stats.count, FormatDuration(n.stats.total).c_str(),
                       FormatDuration(n.stats.median).c_str(), FormatDuration(n.stats.max).c_str());
    }
  }
  if (!s.busy.empty()) {
    o += "\nGPU utilisation\n";
    for (const DeviceBusy& b : s.busy) {
      o += StringPrintf(
          "  GPU %u busy %.1f%% of the span (kernels, copies, memsets; overlap counted "
          "once)\n",
          b.device, b.fraction * 100);
    }
    for (const StreamGaps& g : s.streams) {
      o += StringPrintf("  GPU %u stream %-4u %6" PRIu64 " kernels, %6" PRIu64
                        " gaps: median %s, p95 %s, idle %s of %s\n",
                        g.device, g.stream, g.kernels, g.gaps, FormatDuration(g.median_ns).c_str(),
                        FormatDuration(g.p95_ns).c_str(), FormatDuration(g.idle_ns).c_str(),
                        FormatDuration(g.span_ns).c_str());
    }
    if (s.idle_between_kernels_fraction > 0.2) {
      o += StringPrintf(
          "  => GPU idle %.0f%% of the span between kernels: launch-bound or CPU-bound; "
          "consider CUDA graphs / fewer syncs\n",
          s.idle_between_kernels_fraction * 100);
    } else {
      o += StringPrintf(
          "  => gaps between kernels are %.0f%% of the stream spans: the GPU is kept "
          "fed\n",
          s.idle_between_kernels_fraction * 100);
    }
  }
  if (!s.metrics.empty()) {
    o += "\nMetrics per range (median over occurrences; a range's percentages include its idle "
         "gaps, so range mode also reads them while the GPU was busy)\n";
    for (const MetricRangeSummary& m : s.metrics) {
      std::string sets = StringPrintf("%" PRIu64 " value set(s) used", m.occurrences);
      if (m.sets_inconsistent > 0)
        sets += m.inconsistent_included
                    ? StringPrintf(" (%" PRIu64 " of them inconsistent)", m.sets_inconsistent)
                    : StringPrintf(", %" PRIu64 " dropped as inconsistent (--all shows them)",
                                   m.sets_inconsistent);
      o += "  " + (m.domain.empty() ? m.name : m.domain + ": " + m.name) +
           StringPrintf("  [%s, %u passes, warm-up skip %u%s]\n", sets.c_str(), m.passes, m.skip,
                        m.sm_clock_mhz > 0
                            ? StringPrintf(", SM clock %.0f MHz", m.sm_clock_mhz).c_str()
                            : "");
      // Every set dropped: the names have no value, and the explanation says why.
      for (const std::string& name : m.all_dropped() ? std::vector<std::string>() : m.order) {
        auto it = m.medians.find(name);
        if (it == m.medians.end()) {
          o += StringPrintf("    %-66s (not collected)\n", name.c_str());
        } else {
          o += StringPrintf("    %-66s %.4g\n", name.c_str(), it->second);
        }
      }
      if (!m.verdict.empty()) {
        if (m.sm_pct_busy >= 0) {
          o += "    speed of light: " + m.verdict +
               StringPrintf(
                   " (while busy: SM %.1f%%, memory %.1f%%; over the whole range, GPU busy "
                   "%.0f%% of it: SM %.1f%%, memory %.1f%%)",
                   m.sm_pct_busy, m.mem_pct_busy, m.busy_fraction * 100, m.sm_pct, m.mem_pct) +
               "\n";
        } else {
          o += "    speed of light: " + m.verdict +
               StringPrintf(" (SM %.1f%%, memory %.1f%%)", m.sm_pct, m.mem_pct) + "\n";
        }
      }
      if (!m.explanation.empty()) o += "    " + m.explanation + "\n";
    }
  }
  o += FormatPcStallsText(s.pc_stalls, top);
  if (!s.capture_windows.empty()) {
    o += "\nCapture windows (only these times were traced)\n";
    for (const std::string& w : s.capture_windows) o += "  " + w + "\n";
  }
  o += FormatPmSummaryText(s.pm, top);
  if (!s.notices.empty()) {
    o += "\nNotices\n";
    for (const std::string& n : s.notices) o += "  " + n + "\n";
  }
  return o;
}

std::string FormatSummaryCsv(const TraceSummary& s) {
  std::string o =
      "section,name,domain,count,total_ns,share,min_ns,median_ns,p95_ns,p99_ns,max_ns,mean_ns,"
      "std_ns,rel_std,stable\r\n";
  auto rows = [&](const char* section, const std::vector<NamedStats>& v) {
    for (const NamedStats& n : v) {
      o += section;
      o += ',';
      AppendCsvField(&o, n.name);
      o += ',';
      AppendCsvField(&o, n.domain);
      const DurationStats& d = n.stats;
      o += StringPrintf(",%" PRIu64 ",%.0f,%.6f,%.0f,%.0f,%.0f,%.0f,%.0f,%.3f,%.3f,%.6f,%d\r\n",
                        d.count, d.total, n.share, d.min, d.median, d.p95, d.p99, d.max, d.mean,
                        d.std, d.rel_std, d.stable ? 1 : 0);
    }
  };
  rows("kernel", s.kernels);
  rows("nvtx_range", s.ranges);
  rows("api", s.api);
  return o;
}

std::string FormatSummaryJson(const TraceSummary& s) {
  using nlohmann::json;
  json j;
  j["paths"] = s.paths;
  json setup;
  if (s.have_header) {
    setup["host"] = s.header.hostname();
    setup["driver_version"] = s.header.driver_version();
    setup["cuda_driver_version"] = FormatCudaVersion(s.header.cuda_driver_version());
    setup["cupti_api_version"] = s.header.cupti_api_version();
    setup["date"] = FormatUtcDate(s.header.start_time_unix_ns());
    setup["command_line"] =
        std::vector<std::string>(s.header.command_line().begin(), s.header.command_line().end());
  }
  json devs = json::array();
  for (const Device& d : s.devices) {
    devs.push_back({{"id", d.id()},
                    {"name", d.name()},
                    {"sm_count", d.sm_count()},
                    {"core_clock_khz", d.core_clock_khz()},
                    {"memory_clock_khz", d.memory_clock_khz()}});
  }
  setup["devices"] = devs;
  j["setup"] = setup;
  auto stats = [](const std::vector<NamedStats>& v) {
    json a = json::array();
    for (const NamedStats& n : v) {
      const DurationStats& d = n.stats;
      a.push_back({{"name", n.name},
                   {"domain", n.domain},
                   {"count", d.count},
                   {"total_ns", d.total},
                   {"share", n.share},
                   {"min_ns", d.min},
                   {"median_ns", d.median},
                   {"p95_ns", d.p95},
                   {"p99_ns", d.p99},
                   {"max_ns", d.max},
                   {"mean_ns", d.mean},
                   {"std_ns", d.std},
                   {"rel_std", d.rel_std},
                   {"stable", d.stable}});
    }
    return a;
  };
  j["kernels"] = stats(s.kernels);
  j["nvtx_ranges"] = stats(s.ranges);
  j["api"] = stats(s.api);
  json copies = json::array();
  for (const CopyStats& c : s.copies) {
    copies.push_back({{"kind", c.kind},
                      {"count", c.count},
                      {"bytes", c.bytes},
                      {"total_ns", c.total_ns},
                      {"median_gbps", c.median_gbps},
                      {"aggregate_gbps", c.aggregate_gbps}});
  }
  j["copies"] = copies;
  json busy = json::array();
  for (const DeviceBusy& b : s.busy) {
    busy.push_back({{"device", b.device}, {"busy_ns", b.busy_ns}, {"fraction", b.fraction}});
  }
  j["gpu_busy"] = busy;
  json streams = json::array();
  for (const StreamGaps& g : s.streams) {
    streams.push_back({{"device", g.device},
                       {"stream", g.stream},
                       {"kernels", g.kernels},
                       {"gaps", g.gaps},
                       {"median_gap_ns", g.median_ns},
                       {"p95_gap_ns", g.p95_ns},
                       {"idle_ns", g.idle_ns}});
  }
  j["streams"] = streams;
  j["idle_between_kernels_fraction"] = s.idle_between_kernels_fraction;
  json metrics = json::array();
  for (const MetricRangeSummary& m : s.metrics) {
    metrics.push_back({{"range", m.name},
                       {"domain", m.domain},
                       {"occurrences", m.occurrences},
                       {"passes", m.passes},
                       {"skip", m.skip},
                       {"sets_inconsistent", m.sets_inconsistent},
                       {"inconsistent_included", m.inconsistent_included},
                       {"sm_clock_mhz", m.sm_clock_mhz},
                       {"sm_clock_max_mhz", m.sm_clock_max_mhz},
                       {"sets_low_sm_clock", m.sets_low_sm_clock},
                       {"lowest_sm_clock_mhz", m.lowest_sm_clock_mhz},
                       {"medians", m.medians},
                       {"verdict", m.verdict},
                       {"sm_pct", m.sm_pct},
                       {"mem_pct", m.mem_pct},
                       {"busy_fraction", m.busy_fraction},
                       {"sm_pct_busy", m.sm_pct_busy},
                       {"mem_pct_busy", m.mem_pct_busy},
                       {"explanation", m.explanation}});
  }
  j["metrics"] = metrics;
  if (!s.pm.empty()) j["pm_samples"] = json::parse(FormatPmSummaryJson(s.pm));
  j["span_ns"] = s.span_ns;
  j["gpu_kernel_time_ns"] = s.gpu_time_ns;
  j["profiler_internal_kernels_excluded"] = s.internal_kernels_excluded;
  j["untimed_kernels"] = s.untimed_kernels;
  j["profiler_timed_kernels"] = s.profiler_timed_kernels;
  j["losses"] = s.losses;
  j["trace_notes"] = s.trace_notes;
  json processes = json::array();
  for (const ProcessSummary& p : s.processes) {
    processes.push_back({{"path", p.path},
                         {"rank", p.rank},
                         {"pid", p.pid},
                         {"host", p.host},
                         {"kernels", p.kernels},
                         {"kernel_ns", p.kernel_ns},
                         {"collective_ns", p.collective_ns},
                         {"collective_busy_ns", p.collective_busy_ns},
                         {"collective_overlap_ns", p.overlap_ns},
                         {"step_ns", p.step_ns},
                         {"clock_offset_ns", p.clock_offset_ns},
                         {"clean_end", p.clean_end},
                         {"end_reason", p.end_reason}});
  }
  j["processes"] = processes;
  j["step_range"] = s.step_range;
  j["alignment"] = s.alignment;
  j["notices"] = s.notices;
  if (!s.capture_windows.empty()) j["capture_windows"] = s.capture_windows;
  j["errors"] = s.errors;
  return j.dump(2) + "\n";
}

Status AppendSummaryLog(const TraceSummary& s, const std::string& log_path) {
  struct stat st;
  bool fresh = stat(log_path.c_str(), &st) != 0 || st.st_size == 0;
  const off_t old_size = fresh ? 0 : st.st_size;
  FILE* f = std::fopen(log_path.c_str(), "ab");
  if (f == nullptr) {
    return Status::Error(log_path + ": cannot open for appending: " + std::strerror(errno));
  }
  std::string o;
  if (fresh) {
    o += "date,host,gpu,driver,cuda,kernel,count,median_ns,p95_ns,p99_ns,mean_ns,trace\r\n";
  }
  std::string date = s.have_header ? FormatUtcDate(s.header.start_time_unix_ns()) : "";
  std::string host = s.have_header ? s.header.hostname() : "";
  std::string gpu = s.devices.empty() ? "" : s.devices[0].name();
  std::string driver = s.have_header ? s.header.driver_version() : "";
  std::string cuda = s.have_header ? FormatCudaVersion(s.header.cuda_driver_version()) : "";
  std::string trace;
  for (const std::string& p : s.paths) trace += (trace.empty() ? "" : ";") + p;
  for (const NamedStats& n : s.kernels) {
    for (const std::string* field :
         std::initializer_list<const std::string*>{&date, &host, &gpu, &driver, &cuda, &n.name}) {
      AppendCsvField(&o, *field);
      o += ',';
    }
    o += StringPrintf("%" PRIu64 ",%.0f,%.0f,%.0f,%.3f,", n.stats.count, n.stats.median,
                      n.stats.p95, n.stats.p99, n.stats.mean);
    AppendCsvField(&o, trace);
    o += "\r\n";
  }
  errno = 0;
  bool ok = std::fwrite(o.data(), 1, o.size(), f) == o.size();
  ok = std::fflush(f) == 0 && ok;
  const int write_errno = errno;
  // A failed append is taken back, so the log never ends in a partial row.
  if (!ok && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
    if (ftruncate(fileno(f), old_size) != 0) {
      // Nothing more to do: the message below already reports the failure.
    }
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    return Status::Error(
        log_path + ": write failed: " + (write_errno != 0 ? std::strerror(write_errno) : "error") +
        " (the log is left as it was)");
  }
  return Status();
}

}  // namespace kp
