#include "tools/info/trace_info.h"

#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/stats_table.h"
#include "common/time_math.h"
#include "tools/capture/capture_window_text.h"
#include "tools/summary/text_format.h"

namespace kp {
namespace {

template <typename List>
void Span(const List& list, TraceInfo* info) {
  for (const auto& r : list) {
    if (r.start() <= 0) continue;  // untimed (or damaged) record
    uint64_t s = static_cast<uint64_t>(r.start());
    uint64_t e = static_cast<uint64_t>(EndTime(r.start(), std::max<int64_t>(r.duration(), 0)));
    if (info->first_ns == 0 || s < info->first_ns) info->first_ns = s;
    if (e > info->last_ns) info->last_ns = e;
  }
}

std::string FormatDuration(uint64_t ns) {
  if (ns >= 1000000000ull) return StringPrintf("%.3f s", ns / 1e9);
  if (ns >= 1000000ull) return StringPrintf("%.3f ms", ns / 1e6);
  if (ns >= 1000ull) return StringPrintf("%.3f us", ns / 1e3);
  return StringPrintf("%" PRIu64 " ns", ns);
}

const char* SeverityName(NoticeSeverity s) {
  switch (s) {
    case NOTICE_WARNING:
      return "warning";
    case NOTICE_ERROR:
      return "error";
    default:
      return "info";
  }
}

const char* const kKinds[] = {"kernels",       "memcpys",       "memsets", "api_calls",
                              "nvtx_ranges",   "nvtx_marks",    "syncs",   "overheads",
                              "metric_ranges", "graph_launches"};

}  // namespace

uint64_t TraceInfo::records() const {
  uint64_t n = 0;
  for (const auto& [k, v] : counts) n += v;
  return n;
}

std::string FormatUtcDate(uint64_t unix_ns) {
  time_t secs = static_cast<time_t>(unix_ns / 1000000000ull);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string FormatUuid(const std::string& b) {
  if (b.size() != 16) return "";
  std::string out = "GPU-";
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += StringPrintf("%02x", static_cast<unsigned char>(b[i]));
  }
  return out;
}

std::string FormatCudaVersion(int32_t v) {
  if (v <= 0) return "unknown";
  return StringPrintf("%d.%d", v / 1000, (v % 1000) / 10);
}

std::vector<std::pair<std::string, uint64_t>> NonZeroStats(const Stats& stats) {
  std::vector<std::pair<std::string, uint64_t>> out;
  const auto* d = stats.GetDescriptor();
  const auto* refl = stats.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_UINT64) continue;
    uint64_t v = refl->GetUInt64(stats, f);
    if (v != 0) out.emplace_back(f->name(), v);
  }
  return out;
}

TraceInfo CollectTraceInfo(const std::string& path) {
  TraceInfo info;
  info.path = path;
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  if (!opened.ok()) {
    info.open_error = opened.status().message();
    return info;
  }
  std::unique_ptr<TraceReader>& reader = opened.value();
  info.opened = true;
  for (const char* k : kKinds) info.counts[k] = 0;
  Chunk c;
  while (reader->Next(&c)) {
    info.counts["kernels"] += c.kernels_size();
    info.counts["memcpys"] += c.memcpys_size();
    info.counts["memsets"] += c.memsets_size();
    info.counts["api_calls"] += c.api_calls_size();
    info.counts["nvtx_ranges"] += c.nvtx_ranges_size();
    info.counts["nvtx_marks"] += c.nvtx_marks_size();
    info.counts["syncs"] += c.syncs_size();
    info.counts["overheads"] += c.overheads_size();
    info.counts["metric_ranges"] += c.metric_ranges_size();
    info.counts["graph_launches"] += c.graph_launches_size();
    if (c.pm_samples_size() > 0) info.counts["pm_samples"] += c.pm_samples_size();
    Span(c.kernels(), &info);
    Span(c.memcpys(), &info);
    Span(c.memsets(), &info);
    Span(c.api_calls(), &info);
    Span(c.nvtx_ranges(), &info);
    Span(c.syncs(), &info);
    Span(c.overheads(), &info);
    Span(c.graph_launches(), &info);
    for (const MetricConfig& m : c.metric_configs()) {
      bool known = false;
      for (const MetricConfig& x : info.metric_configs) known |= x.id() == m.id();
      if (!known) info.metric_configs.push_back(m);
    }
    for (const CaptureWindow& w : c.capture_windows()) info.capture_windows.push_back(w);
    for (const Notice& n : c.notices()) {
      ++info.notices_total;
      if (info.notices.size() < kMaxNotices) info.notices.push_back(n);
    }
  }
  if (reader->header() != nullptr) {
    info.have_header = true;
    info.header = *reader->header();
  }
  info.devices = reader->devices();
  info.stats = reader->trace_stats();
  if (reader->footer() != nullptr) {
    info.have_footer = true;
    info.footer = *reader->footer();
  }
  info.reader = reader->stats();
  return info;
}

std::string FormatTraceInfoText(const TraceInfo& info) {
  std::string o = info.path + "\n";
  if (!info.opened) return o + "  error: " + info.open_error + "\n";
  if (info.have_header) {
    const Header& h = info.header;
    std::string cmd;
    for (const auto& a : h.command_line()) cmd += (cmd.empty() ? "" : " ") + a;
    o += StringPrintf("  kp version      %s\n", h.kp_version().c_str());
    o += StringPrintf("  process         pid %u (ppid %u) on %s\n", h.pid(), h.ppid(),
                      h.hostname().c_str());
    o += "  command         " + cmd + "\n";
    if (h.rank() >= 0 || h.world_size() >= 0) {
      o += StringPrintf("  rank            %d (local %d) of %d\n", h.rank(), h.local_rank(),
                        h.world_size());
    }
    o += "  started         " + FormatUtcDate(h.start_time_unix_ns()) + "\n";
    o += "  clock           " + h.clock() + "\n";
    o += "  injection mode  " + h.injection_mode() + "\n";
    if (!h.run_id().empty()) o += "  run id          " + h.run_id() + "\n";
    o += StringPrintf("  versions        driver %s, CUDA driver API %s, CUPTI API %u\n",
                      h.driver_version().c_str(),
                      FormatCudaVersion(h.cuda_driver_version()).c_str(), h.cupti_api_version());
    if (h.config_size() > 0) {
      o += "  config         ";
      for (const KeyValue& kv : h.config()) o += " " + kv.key() + "=" + kv.value();
      o += "\n";
    }
  } else {
    o += "  header          missing (chunk 0 lost or damaged)\n";
  }
  for (const Device& d : info.devices) {
    // CUPTI reports 0 for the memory clock on some GPUs (the H200 here): say unknown.
    const std::string memory_clock =
        d.memory_clock_khz() > 0 ? StringPrintf("memory clock %u MHz", d.memory_clock_khz() / 1000)
                                 : std::string("memory clock unknown");
    o += StringPrintf("  device %u        %s, CC %u.%u, %u SMs, %.1f GiB, SM clock %u MHz, %s%s\n",
                      d.id(), d.name().c_str(), d.compute_capability_major(),
                      d.compute_capability_minor(), d.sm_count(),
                      d.global_memory_bytes() / (1024.0 * 1024 * 1024), d.core_clock_khz() / 1000,
                      memory_clock.c_str(), d.is_mig() ? ", MIG" : "");
    o += "                  " + FormatUuid(d.uuid()) +
         (d.pci_bus_id().empty() ? "" : ", PCI " + d.pci_bus_id()) + "\n";
  }
  o += StringPrintf("  records         %" PRIu64 " in %" PRIu64 " chunks\n", info.records(),
                    info.reader.chunks_ok);
  for (const char* k : kKinds) {
    auto it = info.counts.find(k);
    uint64_t n = it == info.counts.end() ? 0 : it->second;
    if (n > 0) o += StringPrintf("    %-15s %" PRIu64 "\n", k, n);
  }
  if (auto pm = info.counts.find("pm_samples"); pm != info.counts.end()) {
    o += StringPrintf("    %-15s %" PRIu64 "\n", "pm_samples", pm->second);
  }
  if (info.last_ns > info.first_ns) {
    uint64_t base = info.have_header ? info.header.start_time_trace_ns() : 0;
    if (base == 0 || base > info.first_ns) base = info.first_ns;
    o += StringPrintf("  time span       +%s .. +%s after start (%s)\n",
                      FormatDuration(info.first_ns - base).c_str(),
                      FormatDuration(info.last_ns - base).c_str(),
                      FormatDuration(info.last_ns - info.first_ns).c_str());
  }
  o += StringPrintf("  dropped records %" PRIu64 "%s\n", info.stats.cupti_dropped_records(),
                    info.stats.cupti_dropped_records() > 0 ? "  <-- CUPTI lost records" : "");
  // Losses and anomalies first; the writer's own bookkeeping counters are not losses, nor are
  // the informational ones (common/stats_table.h decides which is which).
  std::string bookkeeping;
  for (const auto& [name, v] : NonZeroStats(info.stats)) {
    const StatClass severity = ClassifyStat(name);
    if (severity == StatClass::kBookkeeping) {
      bookkeeping +=
          StringPrintf("%s%s %" PRIu64, bookkeeping.empty() ? "" : ", ", name.c_str(), v);
    } else if (severity == StatClass::kInfo) {
      o += StringPrintf("    %-28s %" PRIu64 "  (not a loss)\n", name.c_str(), v);
    } else if (name != "cupti_dropped_records") {
      o += StringPrintf("    %-28s %" PRIu64 "  <-- loss or anomaly\n", name.c_str(), v);
    }
  }
  if (!bookkeeping.empty()) o += "  writer          " + bookkeeping + "\n";
  for (const MetricConfig& m : info.metric_configs) {
    o += StringPrintf("  metrics config %u: %d metrics, %u passes, %s mode on device %u (%s)\n",
                      m.id(), m.metric_names_size(), m.num_passes(), m.mode().c_str(), m.device(),
                      m.chip().c_str());
  }
  if (!info.capture_windows.empty()) {
    uint64_t base = info.have_header ? info.header.start_time_trace_ns() : 0;
    o += StringPrintf("  capture windows %zu (only these times were traced)\n",
                      info.capture_windows.size());
    for (const CaptureWindow& w : info.capture_windows) {
      o += "    " + DescribeCaptureWindow(w, base) + "\n";
    }
  }
  if (info.notices_total > 0) {
    o += StringPrintf("  notices         %" PRIu64 "\n", info.notices_total);
    for (const Notice& n : info.notices) {
      o += "    [" + std::string(SeverityName(n.severity())) + "] " + n.component() + ": " +
           n.message() + "\n";
    }
  }
  if (info.have_footer && info.footer.clean_end()) {
    o += "  trace ended cleanly (" + info.footer.end_reason() + ")\n";
  } else {
    o += "  no footer: the process ended without kp's exit flush (killed?) -- data up to the "
         "last chunk is intact\n";
  }
  for (const std::string& line : info.reader.Describe()) o += "  damage: " + line + "\n";
  if (!info.readable()) o += "  nothing could be read: no intact chunk in the file\n";
  return o;
}

std::string FormatProcessTable(const std::vector<TraceInfo>& infos) {
  std::string o = StringPrintf("%zu processes\n  %5s %8s %8s %-16s %9s %-22s %s\n", infos.size(),
                               "rank", "pid", "ppid", "host", "kernels", "end", "file");
  for (const TraceInfo& info : infos) {
    const Header& h = info.header;
    const std::string rank = info.have_header && h.rank() >= 0 ? std::to_string(h.rank()) : "-";
    auto kernels = info.counts.find("kernels");
    std::string end = !info.opened                                  ? "unreadable"
                      : info.have_footer && info.footer.clean_end() ? info.footer.end_reason()
                                                                    : "no footer (killed?)";
    o +=
        StringPrintf("  %5s %8u %8u %-16s %9" PRIu64 " %-22s %s\n", rank.c_str(), h.pid(), h.ppid(),
                     h.hostname().c_str(), kernels == info.counts.end() ? 0 : kernels->second,
                     end.c_str(), info.path.c_str());
  }
  return o;
}

std::string FormatTraceInfoJson(const std::vector<TraceInfo>& infos) {
  using nlohmann::json;
  json arr = json::array();
  for (const TraceInfo& info : infos) {
    json j;
    j["path"] = info.path;
    j["readable"] = info.readable();
    if (!info.opened) {
      j["error"] = info.open_error;
      arr.push_back(j);
      continue;
    }
    if (info.have_header) {
      const Header& h = info.header;
      json hj;
      hj["kp_version"] = h.kp_version();
      hj["pid"] = h.pid();
      hj["ppid"] = h.ppid();
      hj["hostname"] = h.hostname();
      hj["command_line"] =
          std::vector<std::string>(h.command_line().begin(), h.command_line().end());
      hj["rank"] = h.rank();
      hj["local_rank"] = h.local_rank();
      hj["world_size"] = h.world_size();
      hj["start_time_unix_ns"] = h.start_time_unix_ns();
      hj["start_time_utc"] = FormatUtcDate(h.start_time_unix_ns());
      hj["clock"] = h.clock();
      hj["injection_mode"] = h.injection_mode();
      hj["run_id"] = h.run_id();
      hj["start_time_monotonic_ns"] = h.start_time_monotonic_ns();
      hj["boot_id"] = h.boot_id();
      hj["driver_version"] = h.driver_version();
      hj["cuda_driver_version"] = FormatCudaVersion(h.cuda_driver_version());
      hj["cupti_api_version"] = h.cupti_api_version();
      json cfg = json::object();
      for (const KeyValue& kv : h.config()) cfg[kv.key()] = kv.value();
      hj["config"] = cfg;
      j["header"] = hj;
    }
    json devs = json::array();
    for (const Device& d : info.devices) {
      devs.push_back({{"id", d.id()},
                      {"name", d.name()},
                      {"uuid", FormatUuid(d.uuid())},
                      {"compute_capability", std::to_string(d.compute_capability_major()) + "." +
                                                 std::to_string(d.compute_capability_minor())},
                      {"sm_count", d.sm_count()},
                      {"memory_bytes", d.global_memory_bytes()},
                      {"core_clock_khz", d.core_clock_khz()},
                      {"memory_clock_khz", d.memory_clock_khz()},
                      {"pci_bus_id", d.pci_bus_id()}});
    }
    j["devices"] = devs;
    j["records"] = info.counts;
    j["records_total"] = info.records();
    j["first_ns"] = info.first_ns;
    j["last_ns"] = info.last_ns;
    j["duration_ns"] = info.last_ns > info.first_ns ? info.last_ns - info.first_ns : 0;
    json st = json::object();
    for (const auto& [name, v] : NonZeroStats(info.stats)) st[name] = v;
    j["stats"] = st;
    j["dropped_records"] = info.stats.cupti_dropped_records();
    json notes = json::array();
    for (const Notice& n : info.notices) {
      notes.push_back({{"severity", SeverityName(n.severity())},
                       {"component", n.component()},
                       {"message", n.message()}});
    }
    j["notices"] = notes;
    json windows = json::array();
    for (const CaptureWindow& w : info.capture_windows) {
      windows.push_back({{"index", w.index()},
                         {"trigger", CaptureTriggerText(w.trigger())},
                         {"range", w.range()},
                         {"start_ns", w.start_ns()},
                         {"end_ns", w.end_ns()},
                         {"first_step", w.first_step()},
                         {"last_step", w.last_step()},
                         {"end_reason", w.end_reason()}});
    }
    if (!windows.empty()) j["capture_windows"] = windows;
    j["clean_end"] = info.have_footer && info.footer.clean_end();
    if (info.have_footer) j["end_reason"] = info.footer.end_reason();
    j["chunks"] = info.reader.chunks_ok;
    j["damage"] = info.reader.Describe();
    arr.push_back(j);
  }
  return arr.dump(2) + "\n";
}

}  // namespace kp
