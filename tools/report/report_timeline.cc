#include "tools/report/report_timeline.h"

#include <algorithm>
#include <tuple>

#include "tools/kptrace/progress_line.h"
#include "tools/reader/trace_reader.h"
#include "tools/summary/time_intervals.h"

namespace kp {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() + 1) / 2 - 1];  // nearest rank, as kptrace summary
}

void FindStragglers(RangeSteps* r) {
  size_t steps = 0;
  for (const RankSteps& k : r->ranks) steps = std::max(steps, k.durations_ns.size());
  for (RankSteps& k : r->ranks) {
    k.straggler.assign(k.durations_ns.size(), false);
    k.median_ns = Median(k.durations_ns);
  }
  if (r->ranks.size() < 2) return;
  for (size_t i = 0; i < steps; ++i) {
    std::vector<double> at_step;
    for (const RankSteps& k : r->ranks) {
      if (i < k.durations_ns.size()) at_step.push_back(k.durations_ns[i]);
    }
    if (at_step.size() < 2) continue;
    const double median = Median(at_step);
    for (RankSteps& k : r->ranks) {
      if (i < k.durations_ns.size() && k.durations_ns[i] > kStragglerFactor * median) {
        k.straggler[i] = true;
        ++k.straggler_steps;
      }
    }
  }
}

}  // namespace

ReportTimeline BuildReportTimeline(const std::vector<std::string>& paths, size_t bins,
                                   size_t max_ranges, ProgressLine* progress) {
  ReportTimeline t;
  t.bins = bins;
  t.multi_rank = paths.size() > 1;
  std::map<std::pair<int, uint32_t>, std::vector<TimeInterval>> work;  // (rank, device) -> GPU work
  struct Occurrence {
    uint64_t start;
    double duration;
  };
  std::map<std::string, std::map<int, std::vector<Occurrence>>> ranges;
  std::map<std::string, double> range_totals;
  uint64_t first = UINT64_MAX, last = 0, bytes_before = 0, records_before = 0;
  Chunk c;
  for (size_t fi = 0; fi < paths.size(); ++fi) {
    auto reader = TraceReader::Open(paths[fi]).value_or(nullptr);
    if (!reader) continue;  // the summary names it
    int rank = static_cast<int>(fi);
    bool rank_known = false;
    auto add = [&](int64_t start, int64_t duration, uint32_t device) {
      if (start <= 0 || duration < 0) return;
      const uint64_t s = static_cast<uint64_t>(start), e = s + static_cast<uint64_t>(duration);
      work[{rank, device}].push_back({s, e});
      first = std::min(first, s);
      last = std::max(last, e);
    };
    while (reader->Next(&c)) {
      if (progress != nullptr) {
        progress->Update(bytes_before + reader->position(),
                         records_before + reader->stats().records);
      }
      if (!rank_known && reader->header() != nullptr) {
        rank_known = true;
        if (reader->header()->rank() >= 0 && paths.size() > 1) rank = reader->header()->rank();
      }
      for (const Kernel& k : c.kernels()) {
        if (k.flags() & (RECORD_FLAG_PROFILER_INTERNAL | RECORD_FLAG_NO_TIMING)) continue;
        add(k.start(), k.duration(), k.device());
      }
      for (const Memcpy& m : c.memcpys()) add(m.start(), m.duration(), m.device());
      for (const Memset& m : c.memsets()) add(m.start(), m.duration(), m.device());
      for (const NvtxRange& r : c.nvtx_ranges()) {
        if (r.start() <= 0 || r.duration() < 0) continue;
        std::string name(reader->Str(r.name()));
        const std::string_view domain = reader->Str(r.domain());
        if (!domain.empty()) name = std::string(domain) + ": " + name;
        ranges[name][rank].push_back(
            {static_cast<uint64_t>(r.start()), static_cast<double>(r.duration())});
        range_totals[name] += static_cast<double>(r.duration());
      }
    }
    bytes_before += reader->stats().file_bytes;
    records_before += reader->stats().records;
  }
  if (progress != nullptr) progress->Finish();
  if (first < last && bins > 0) {
    t.start_ns = first;
    t.end_ns = last;
    const double width = static_cast<double>(last - first) / static_cast<double>(bins);
    for (auto& [key, spans] : work) {
      UtilisationStrip strip;
      strip.label = (t.multi_rank ? "rank " + std::to_string(key.first) + " " : std::string()) +
                    "GPU " + std::to_string(key.second);
      std::vector<double> busy(bins, 0);
      for (const TimeInterval& s : MergeIntervals(std::move(spans))) {
        // Spread each busy interval over the bins it covers.
        size_t b = static_cast<size_t>(static_cast<double>(s.start - first) / width);
        for (; b < bins; ++b) {
          const double lo = static_cast<double>(first) + width * static_cast<double>(b);
          const double hi = lo + width;
          const double overlap =
              std::min(hi, static_cast<double>(s.end)) - std::max(lo, static_cast<double>(s.start));
          if (overlap > 0) busy[b] += overlap;
          if (static_cast<double>(s.end) <= hi) break;
        }
      }
      for (double& v : busy) v = std::min(100.0, 100.0 * v / width);
      strip.busy_pct = std::move(busy);
      t.strips.push_back(std::move(strip));
    }
  }
  std::vector<std::pair<double, std::string>> by_total;
  for (const auto& [name, total] : range_totals) by_total.push_back({total, name});
  std::sort(by_total.begin(), by_total.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [total, name] : by_total) {
    if (t.steps.size() >= max_ranges) break;
    RangeSteps r;
    r.name = name;
    r.total_ns = total;
    size_t most = 0;
    for (auto& [rank, occ] : ranges[name]) {
      std::sort(occ.begin(), occ.end(),
                [](const Occurrence& a, const Occurrence& b) { return a.start < b.start; });
      RankSteps k;
      k.rank = rank;
      for (const Occurrence& o : occ) k.durations_ns.push_back(o.duration);
      most = std::max(most, k.durations_ns.size());
      r.ranks.push_back(std::move(k));
    }
    if (most < 2) continue;  // a range that happens once has no steps to compare
    FindStragglers(&r);
    t.steps.push_back(std::move(r));
  }
  return t;
}

}  // namespace kp
