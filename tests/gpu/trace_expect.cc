// trace_expect.cc: gathers a trace's records (trace_expect.h) and runs the checks.
#include "tests/gpu/trace_expect.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "kptrace.pb.h"
#include "tools/reader/trace_reader.h"

namespace kp::gputest {
namespace {

constexpr uint32_t kProfilerInternal = RECORD_FLAG_PROFILER_INTERNAL;
constexpr uint32_t kNoTiming = RECORD_FLAG_NO_TIMING;

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string StripPrefix(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0 ? s.substr(prefix.size()) : s;
}

std::string PayloadString(const NvtxPayload& p) {
  char buf[64];
  switch (p.value_case()) {
    case NvtxPayload::kU64:
      std::snprintf(buf, sizeof(buf), "u64:%" PRIu64, static_cast<uint64_t>(p.u64()));
      return buf;
    case NvtxPayload::kI64:
      std::snprintf(buf, sizeof(buf), "i64:%" PRId64, static_cast<int64_t>(p.i64()));
      return buf;
    case NvtxPayload::kF64:
      std::snprintf(buf, sizeof(buf), "f64:%g", p.f64());
      return buf;
    case NvtxPayload::kU32:
      std::snprintf(buf, sizeof(buf), "u32:%u", p.u32());
      return buf;
    case NvtxPayload::kI32:
      std::snprintf(buf, sizeof(buf), "i32:%d", p.i32());
      return buf;
    case NvtxPayload::kF32:
      std::snprintf(buf, sizeof(buf), "f32:%g", static_cast<double>(p.f32()));
      return buf;
    case NvtxPayload::VALUE_NOT_SET:
      break;
  }
  return "";
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", v);
  return buf;
}

std::string Triple(const uint32_t v[3]) {
  return std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]);
}

// Numbers compare as numbers (so 0xFF00FF00 == 4278255360), anything else as text.
bool ParseNumber(const std::string& s, long double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const char* c = s.c_str();
  bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  if (hex) {
    unsigned long long v = std::strtoull(c, &end, 16);
    *out = static_cast<long double>(v);
  } else {
    *out = std::strtold(c, &end);
  }
  return end != nullptr && *end == '\0';
}

// The one value every matching record has, "none" when no record matches, or "mixed: ..." when
// they disagree (which fails any expectation).
std::string Uniform(const std::set<std::string>& values) {
  if (values.empty()) return "none";
  if (values.size() == 1) return *values.begin();
  std::string out = "mixed:";
  int shown = 0;
  for (const auto& v : values) {
    if (++shown > 5) {
      out += " ...";
      break;
    }
    out += " " + v + (shown < static_cast<int>(values.size()) ? "|" : "");
  }
  return out;
}

bool KernelMatches(const TraceFacts::Kernel& k, const std::string& sub) {
  return k.demangled.find(sub) != std::string::npos || k.name.find(sub) != std::string::npos;
}

// "KIND[:HOSTMEM[:async]]"
bool CopyMatches(const TraceFacts::Copy& c, const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ':')) parts.push_back(part);
  if (parts.empty() || parts[0] != c.kind) return false;
  if (parts.size() >= 2 && parts[1] != c.host_memory) return false;
  if (parts.size() >= 3 && (parts[2] == "async") != c.async) return false;
  return true;
}

class Checker {
 public:
  Checker(const TraceFacts& facts, const std::vector<Expectation>& expectations)
      : f_(facts), ex_(expectations) {
    for (const auto& e : ex_) {
      if (e.key == "clean_end") expect_clean_end_ = e.value != "0";
      if (e.key == "chunks_min") chunks_min_ = std::strtoull(e.value.c_str(), nullptr, 10);
      if (e.key == "link_grace_ns") link_grace_ns_ = std::strtoull(e.value.c_str(), nullptr, 10);
      if (e.key == "allow_untimed_kernels") allow_untimed_kernels_ = e.value != "0";
    }
    for (const auto& a : f_.api_calls) {
      api_by_correlation_.emplace(a.correlation, &a);
      last_time_ = std::max(last_time_, a.end);
    }
    for (const auto& k : f_.kernels) last_time_ = std::max(last_time_, k.end);
    for (const auto& c : f_.memcpys) last_time_ = std::max(last_time_, c.end);
    for (const auto& c : f_.memsets) last_time_ = std::max(last_time_, c.end);
    for (const auto& k : f_.kernels) untimed_kernels_ += IsUntimed(k.start, k.end, k.flags);
    ComputeDepths();
  }

  std::vector<CheckResult> Run() {
    CheckReadable();
    CheckHeader();
    CheckEnd();
    CheckFooterTotals();
    CheckNothingDropped();
    CheckDevices();
    CheckLinked();
    CheckStreamOrder();
    CheckNvtxThreads();
    if (ex_.empty()) Add(false, "expectations", "the program printed no `expect` lines");
    for (const auto& e : ex_) CheckExpectation(e);
    return std::move(results_);
  }

 private:
  void Add(bool pass, std::string name, std::string detail) {
    results_.push_back({pass, std::move(name), std::move(detail)});
  }

  void CheckReadable() {
    std::string detail = std::to_string(f_.chunks) + " chunks";
    bool ok = f_.have_header && f_.damage.empty() && f_.chunks > 0;
    if (!f_.have_header) detail += ", no header (chunk 0 missing)";
    for (const auto& d : f_.damage) detail += "; " + d;
    if (f_.truncated_tail_bytes > 0) {
      detail += "; torn tail of " + std::to_string(f_.truncated_tail_bytes) + " bytes";
      if (expect_clean_end_) ok = false;  // a clean run never leaves a torn chunk
    }
    Add(ok, "readable", detail);
  }

  // The setup must travel with the numbers: who ran, where, on which driver and CUDA.
  void CheckHeader() {
    if (!f_.have_header) return;  // CheckReadable says so
    std::string missing;
    auto need = [&](bool ok, const char* what) {
      if (!ok) missing += std::string(missing.empty() ? "" : ", ") + what;
    };
    need(!f_.header_kp_version.empty(), "kp_version");
    need(f_.header_pid != 0, "pid");
    need(!f_.header_hostname.empty(), "hostname");
    need(f_.header_command_args > 0, "command_line");
    need(f_.header_cuda_driver_version > 0, "cuda_driver_version");
    need(!f_.header_driver_version.empty(), "driver_version");
    need(f_.header_start_time_unix_ns != 0, "start_time_unix_ns");
    Add(missing.empty(), "header",
        missing.empty() ? "pid " + std::to_string(f_.header_pid) + " on " + f_.header_hostname +
                              ", driver " + f_.header_driver_version + ", CUDA " +
                              std::to_string(f_.header_cuda_driver_version)
                        : "missing or zero: " + missing);
  }

  void CheckEnd() {
    if (expect_clean_end_) {
      Add(f_.have_footer && f_.clean_end, "clean_end",
          f_.have_footer ? (f_.clean_end ? "footer says clean end" : "footer without clean_end")
                         : "no footer");
    } else {
      bool ok = !f_.have_footer && f_.chunks >= chunks_min_;
      Add(ok, "killed_end",
          std::string(f_.have_footer ? "footer present (expected none)" : "no footer") + ", " +
              std::to_string(f_.chunks) +
              " readable chunks (need >= " + std::to_string(chunks_min_) + ")");
    }
  }

  void CheckFooterTotals() {
    if (!f_.have_footer) return;
    std::ostringstream d;
    bool ok = true;
    auto cmp = [&](const char* what, uint64_t footer, uint64_t seen) {
      if (footer != seen) ok = false;
      d << what << " " << seen << (footer == seen ? "" : " (footer " + std::to_string(footer) + ")")
        << " ";
    };
    cmp("kernels", f_.footer_kernels, f_.kernels.size());
    cmp("memcpys", f_.footer_memcpys, f_.memcpys.size());
    cmp("memsets", f_.footer_memsets, f_.memsets.size());
    cmp("api", f_.footer_api_calls, f_.api_calls.size());
    cmp("ranges", f_.footer_nvtx_ranges, f_.ranges.size());
    cmp("marks", f_.footer_nvtx_marks, f_.marks.size());
    Add(ok, "footer_totals", d.str());
  }

  static bool IsUntimed(uint64_t start, uint64_t end, uint32_t flags) {
    return (flags & kNoTiming) || (start == 0 && end == 0);
  }

  // With `expect allow_untimed_kernels=1` (kernel-mode metrics: CUPTI's kernel replay reports
  // the replayed kernels with start = end = 0, which kp flags NO_TIMING and counts as
  // zero_timestamp_records) zero timestamps are accepted up to the number of untimed kernel
  // records; any beyond that belong to copies or sets and still fail.
  void CheckNothingDropped() {
    std::ostringstream d;
    d << "cupti_dropped=" << f_.cupti_dropped << " buffers_refused=" << f_.buffers_refused
      << " zero_timestamps=" << f_.zero_timestamps << " write_errors=" << f_.write_errors
      << " unknown_records=" << f_.unknown_records
      << " nvtx_unmatched_ends=" << f_.nvtx_unmatched_ends;
    bool zero_ok = f_.zero_timestamps == 0;
    if (allow_untimed_kernels_) {
      zero_ok = f_.zero_timestamps <= untimed_kernels_;
      d << " (allow_untimed_kernels: up to " << untimed_kernels_
        << " zero timestamps accepted, one per untimed kernel record)";
    }
    Add(f_.cupti_dropped == 0 && f_.buffers_refused == 0 && zero_ok && f_.write_errors == 0,
        "nothing_dropped", d.str());
  }

  void CheckDevices() {
    std::ostringstream d;
    bool ok = !f_.devices.empty();
    d << f_.devices.size() << " device(s)";
    for (const auto& dev : f_.devices) {
      bool good = !dev.name.empty() && dev.uuid_hex.size() == 32 &&
                  dev.uuid_hex != std::string(32, '0') && dev.cc_major > 0;
      ok = ok && good;
      d << "; " << dev.id << ": \"" << dev.name << "\" cc " << dev.cc_major << "." << dev.cc_minor
        << " uuid " << (dev.uuid_hex.empty() ? "(none)" : dev.uuid_hex)
        << (good ? "" : " INCOMPLETE");
    }
    Add(ok, "devices", d.str());
  }

  void CheckLinked() {
    uint64_t checked = 0, unlinked = 0, exempt = 0;
    std::string first;
    auto check = [&](const char* kind, uint32_t correlation, uint64_t start, uint32_t flags) {
      if (flags & kProfilerInternal) return;
      if (link_grace_ns_ > 0 && start + link_grace_ns_ > last_time_) {
        ++exempt;
        return;
      }
      ++checked;
      if (api_by_correlation_.count(correlation) == 0) {
        if (unlinked++ == 0)
          first = std::string(kind) + " correlation " + std::to_string(correlation);
      }
    };
    for (const auto& k : f_.kernels) check("kernel", k.correlation, k.start, k.flags);
    for (const auto& c : f_.memcpys) check("memcpy", c.correlation, c.start, c.flags);
    for (const auto& c : f_.memsets) check("memset", c.correlation, c.start, c.flags);
    std::string detail = std::to_string(checked - unlinked) + "/" + std::to_string(checked) +
                         " GPU records have an API call with their correlation id";
    if (exempt) detail += " (" + std::to_string(exempt) + " in the final grace window not checked)";
    if (unlinked) detail += "; first unlinked: " + first;
    Add(unlinked == 0, "linked", detail);
  }

  void CheckStreamOrder() {
    struct Span {
      uint64_t start, end;
      const char* kind;
      uint32_t correlation;
    };
    std::map<std::pair<uint32_t, uint32_t>, std::vector<Span>> by_stream;
    uint64_t untimed = 0, untimed_allowed = 0;
    auto add = [&](uint32_t device, uint32_t stream, uint64_t start, uint64_t end, uint32_t flags,
                   const char* kind, uint32_t correlation) {
      if (IsUntimed(start, end, flags)) {
        if (allow_untimed_kernels_ && std::string(kind) == "kernel") {
          ++untimed_allowed;
        } else {
          ++untimed;
        }
        return;
      }
      by_stream[{device, stream}].push_back({start, end, kind, correlation});
    };
    for (const auto& k : f_.kernels)
      add(k.device, k.stream, k.start, k.end, k.flags, "kernel", k.correlation);
    for (const auto& c : f_.memcpys)
      add(c.device, c.stream, c.start, c.end, c.flags, "memcpy", c.correlation);
    for (const auto& c : f_.memsets)
      add(c.device, c.stream, c.start, c.end, c.flags, "memset", c.correlation);
    // A kernel launched with programmatic stream serialization (programmatic dependent launch,
    // as cuBLASLt's split-K GEMM and its reduction on sm_90 are) may start before the kernel
    // ahead of it on its stream ends. The attribute travels only through the launch-with-config
    // entry points, so an overlap is accepted only when a kernel follows a kernel and was
    // launched by one of them.
    auto may_start_early = [&](const Span& before, const Span& after) {
      if (std::string(before.kind) != "kernel" || std::string(after.kind) != "kernel") return false;
      auto api = api_by_correlation_.find(after.correlation);
      if (api == api_by_correlation_.end()) return false;
      const std::string& name = api->second->name;
      return name.rfind("cuLaunchKernelEx", 0) == 0 || name.rfind("cudaLaunchKernelExC", 0) == 0;
    };
    uint64_t records = 0, overlaps = 0, reversed = 0, programmatic = 0;
    uint64_t worst_overlap = 0, worst_programmatic = 0;
    std::string first;
    for (auto& [key, spans] : by_stream) {
      std::stable_sort(spans.begin(), spans.end(),
                       [](const Span& a, const Span& b) { return a.start < b.start; });
      records += spans.size();
      // Each span is read against every span that started before it: `latest` is the one of
      // those that ends last, `earlier_end` the last end among those before the previous span.
      // An early start is accepted only when the previous span alone is still running.
      size_t latest = 0;
      uint64_t earlier_end = 0;
      for (size_t i = 0; i < spans.size(); ++i) {
        if (spans[i].end < spans[i].start) ++reversed;
        if (i == 0) continue;
        if (spans[i - 1].end > spans[latest].end) latest = i - 1;
        if (spans[i].start < spans[latest].end) {
          uint64_t by = spans[latest].end - spans[i].start;
          if (spans[i].start >= earlier_end && may_start_early(spans[i - 1], spans[i])) {
            ++programmatic;
            worst_programmatic = std::max(worst_programmatic, by);
          } else {
            if (overlaps++ == 0) {
              first = "device " + std::to_string(key.first) + " stream " +
                      std::to_string(key.second) + ": " + spans[i].kind + " starts " +
                      std::to_string(by) + " ns before an earlier " + spans[latest].kind + " ends";
            }
            worst_overlap = std::max(worst_overlap, by);
          }
        }
        earlier_end = std::max(earlier_end, spans[i - 1].end);
      }
    }
    std::string detail = std::to_string(records) + " GPU records on " +
                         std::to_string(by_stream.size()) +
                         " streams: " + std::to_string(overlaps) + " overlaps (worst " +
                         std::to_string(worst_overlap) + " ns), " + std::to_string(reversed) +
                         " with end before start, " + std::to_string(untimed) + " untimed";
    if (programmatic) {
      detail += " (" + std::to_string(programmatic) +
                " kernels launched by a cu/cudaLaunchKernelEx call start before the previous "
                "kernel ends, worst by " +
                std::to_string(worst_programmatic) + " ns: programmatic dependent launch, allowed)";
    }
    if (allow_untimed_kernels_) {
      detail += " (" + std::to_string(untimed_allowed) +
                " untimed kernels skipped: allow_untimed_kernels)";
    }
    if (!first.empty()) detail += "; first: " + first;
    Add(overlaps == 0 && reversed == 0 && untimed == 0, "stream_order", detail);
  }

  void CheckNvtxThreads() {
    if (f_.ranges.empty() && f_.marks.empty()) return;
    uint64_t missing = 0, open = 0, reversed = 0;
    for (const auto& r : f_.ranges) {
      if (r.thread_id == 0) ++missing;
      if (r.flags & RECORD_FLAG_OPEN) ++open;
      if (r.end < r.start) ++reversed;
    }
    for (const auto& m : f_.marks) {
      if (m.thread_id == 0) ++missing;
    }
    Add(missing == 0 && open == 0 && reversed == 0 && f_.nvtx_unmatched_ends == 0, "nvtx_sane",
        std::to_string(f_.ranges.size()) + " ranges, " + std::to_string(f_.marks.size()) +
            " marks: " + std::to_string(missing) + " without thread id, " + std::to_string(open) +
            " left open, " + std::to_string(f_.nvtx_unmatched_ends) + " ends without a start, " +
            std::to_string(reversed) + " with end before start");
  }

  // Depth of each range among the ranges of its own thread: 1 + the ranges that enclose it.
  void ComputeDepths() {
    depth_.assign(f_.ranges.size(), 1);
    std::unordered_map<uint32_t, std::vector<size_t>> by_thread;
    for (size_t i = 0; i < f_.ranges.size(); ++i) {
      const auto& r = f_.ranges[i];
      if (r.end_thread_id != 0 && r.end_thread_id != r.thread_id) continue;  // crosses threads
      by_thread[r.thread_id].push_back(i);
    }
    for (auto& [tid, idx] : by_thread) {
      std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
        const auto &ra = f_.ranges[a], &rb = f_.ranges[b];
        return ra.start != rb.start ? ra.start < rb.start : ra.end > rb.end;
      });
      // A stack walk: ranges sorted by start (outer first on ties) nest like parentheses.
      std::vector<size_t> stack;
      for (size_t i : idx) {
        const auto& r = f_.ranges[i];
        while (!stack.empty() && f_.ranges[stack.back()].end < r.end) stack.pop_back();
        depth_[i] = static_cast<uint32_t>(stack.size()) + 1;
        stack.push_back(i);
      }
    }
  }

  // Kernels whose launch call started inside a range of that name (on the range's thread, or
  // on any thread when `any_thread`).
  uint64_t KernelsIn(const std::string& name, bool any_thread) const {
    uint64_t n = 0;
    for (const auto& r : f_.ranges) {
      if (r.name != name) continue;
      for (const auto& k : f_.kernels) {
        if (k.flags & kProfilerInternal) continue;
        auto it = api_by_correlation_.find(k.correlation);
        if (it == api_by_correlation_.end()) continue;
        const auto* api = it->second;
        if ((any_thread || api->thread_id == r.thread_id) && api->start >= r.start &&
            api->start <= r.end) {
          ++n;
        }
      }
    }
    return n;
  }

  // Fills *actual with what the trace holds for key[arg]; false if the key is unknown.
  bool Actual(const std::string& key, const std::string& arg, std::string* actual) const {
    auto count = [&](uint64_t n) {
      *actual = std::to_string(n);
      return true;
    };
    auto app_kernels = [&](const std::function<bool(const TraceFacts::Kernel&)>& pred) {
      uint64_t n = 0;
      for (const auto& k : f_.kernels)
        if (!(k.flags & kProfilerInternal) && pred(k)) ++n;
      return n;
    };
    auto kernel_uniform = [&](const std::function<std::string(const TraceFacts::Kernel&)>& get) {
      std::set<std::string> values;
      for (const auto& k : f_.kernels)
        if (!(k.flags & kProfilerInternal) && KernelMatches(k, arg)) values.insert(get(k));
      *actual = Uniform(values);
      return true;
    };
    auto range_uniform = [&](const std::function<std::string(size_t)>& get) {
      std::set<std::string> values;
      for (size_t i = 0; i < f_.ranges.size(); ++i)
        if (f_.ranges[i].name == arg) values.insert(get(i));
      *actual = Uniform(values);
      return true;
    };
    auto mark_uniform = [&](const std::function<std::string(const TraceFacts::Mark&)>& get) {
      std::set<std::string> values;
      for (const auto& m : f_.marks)
        if (m.name == arg) values.insert(get(m));
      *actual = Uniform(values);
      return true;
    };
    auto device_uniform =
        [&](const std::function<std::string(const TraceFacts::DeviceDesc&)>& get) {
          std::set<std::string> values;
          for (const auto& d : f_.devices)
            if (d.uuid_hex == arg) values.insert(get(d));
          *actual = Uniform(values);
          return true;
        };

    // Kernels.
    if (key == "kernels") return count(app_kernels([](const auto&) { return true; }));
    if (key == "kernel_count")
      return count(app_kernels([&](const auto& k) { return KernelMatches(k, arg); }));
    if (key == "kernel_graph_count")
      return count(
          app_kernels([&](const auto& k) { return k.graph_id != 0 && KernelMatches(k, arg); }));
    if (key == "kernel_grid") return kernel_uniform([](const auto& k) { return Triple(k.grid); });
    if (key == "kernel_block") return kernel_uniform([](const auto& k) { return Triple(k.block); });
    if (key == "kernel_cluster")
      return kernel_uniform([](const auto& k) { return Triple(k.cluster); });
    if (key == "kernel_dynamic_smem")
      return kernel_uniform([](const auto& k) { return std::to_string(k.dynamic_shared); });
    if (key == "kernel_device_count")  // the application's kernels on device `arg`
      return count(app_kernels([&](const auto& k) { return std::to_string(k.device) == arg; }));
    if (key == "kernel_streams") {
      std::set<std::pair<uint32_t, uint32_t>> streams;
      for (const auto& k : f_.kernels)
        if (!(k.flags & kProfilerInternal)) streams.insert({k.device, k.stream});
      return count(streams.size());
    }
    // Copies and sets.
    if (key == "memcpys") return count(f_.memcpys.size());
    if (key == "memcpy_count" || key == "memcpy_bytes") {
      uint64_t n = 0, bytes = 0;
      for (const auto& c : f_.memcpys) {
        if (CopyMatches(c, arg)) {
          ++n;
          bytes += c.bytes;
        }
      }
      return count(key == "memcpy_count" ? n : bytes);
    }
    if (key == "peer_copy_count") {  // arg "S>D": peer-to-peer copies from device S to D
      uint64_t n = 0;
      for (const auto& c : f_.memcpys)
        if (c.peer && std::to_string(c.src_device) + ">" + std::to_string(c.dst_device) == arg) ++n;
      return count(n);
    }
    if (key == "memsets") return count(f_.memsets.size());
    if (key == "memset_bytes") {
      uint64_t bytes = 0;
      for (const auto& c : f_.memsets) bytes += c.bytes;
      return count(bytes);
    }
    // Graphs: a launch is the set of GPU records sharing its correlation id.
    if (key == "graph_launches" || key == "graph_records_per_launch" || key == "graph_nodes") {
      std::map<uint32_t, uint64_t> per_launch;
      std::set<std::pair<uint32_t, uint64_t>> nodes;
      auto take = [&](uint32_t graph_id, uint64_t node, uint32_t correlation, uint32_t flags) {
        if (graph_id == 0 || (flags & kProfilerInternal)) return;
        ++per_launch[correlation];
        nodes.insert({graph_id, node});
      };
      for (const auto& k : f_.kernels) take(k.graph_id, k.graph_node_id, k.correlation, k.flags);
      for (const auto& c : f_.memcpys) take(c.graph_id, c.graph_node_id, c.correlation, c.flags);
      for (const auto& c : f_.memsets) take(c.graph_id, c.graph_node_id, c.correlation, c.flags);
      if (key == "graph_launches") return count(per_launch.size());
      if (key == "graph_nodes") return count(nodes.size());
      std::set<std::string> sizes;
      for (const auto& [corr, n] : per_launch) sizes.insert(std::to_string(n));
      *actual = Uniform(sizes);
      return true;
    }
    // API calls.
    if (key == "api_count") {
      uint64_t n = 0;
      for (const auto& a : f_.api_calls)
        if (a.name.find(arg) != std::string::npos) ++n;
      return count(n);
    }
    // NVTX ranges.
    if (key == "nvtx_ranges") return count(f_.ranges.size());
    if (key == "nvtx_range_count") {
      uint64_t n = 0;
      for (const auto& r : f_.ranges) n += r.name == arg;
      return count(n);
    }
    if (key == "nvtx_range_thread")
      return range_uniform([&](size_t i) { return std::to_string(f_.ranges[i].thread_id); });
    if (key == "nvtx_range_end_thread") {
      return range_uniform([&](size_t i) {
        const auto& r = f_.ranges[i];
        return std::to_string(r.end_thread_id != 0 ? r.end_thread_id : r.thread_id);
      });
    }
    if (key == "nvtx_range_threads") {
      std::set<uint32_t> threads;
      for (const auto& r : f_.ranges)
        if (r.name == arg) threads.insert(r.thread_id);
      return count(threads.size());
    }
    if (key == "nvtx_range_depth")
      return range_uniform([&](size_t i) { return std::to_string(depth_[i]); });
    if (key == "nvtx_range_domain")
      return range_uniform([&](size_t i) { return f_.ranges[i].domain; });
    if (key == "nvtx_range_color") {
      return range_uniform([&](size_t i) {
        const auto& r = f_.ranges[i];
        return r.has_color ? Hex32(r.color) : std::string("no color");
      });
    }
    if (key == "nvtx_range_category")
      return range_uniform([&](size_t i) { return std::to_string(f_.ranges[i].category); });
    if (key == "nvtx_range_payload")
      return range_uniform([&](size_t i) { return f_.ranges[i].payload; });
    if (key == "nvtx_kernels_inside") return count(KernelsIn(arg, false));
    if (key == "nvtx_kernels_during") return count(KernelsIn(arg, true));
    // NVTX marks and domains.
    if (key == "nvtx_marks") return count(f_.marks.size());
    if (key == "nvtx_mark_count") {
      uint64_t n = 0;
      for (const auto& m : f_.marks) n += m.name == arg;
      return count(n);
    }
    if (key == "nvtx_mark_thread")
      return mark_uniform([](const auto& m) { return std::to_string(m.thread_id); });
    if (key == "nvtx_mark_domain") return mark_uniform([](const auto& m) { return m.domain; });
    if (key == "nvtx_mark_color") {
      return mark_uniform(
          [](const auto& m) { return m.has_color ? Hex32(m.color) : std::string("no color"); });
    }
    if (key == "nvtx_mark_payload") return mark_uniform([](const auto& m) { return m.payload; });
    if (key == "nvtx_domain_count") {
      uint64_t n = 0;
      for (const auto& r : f_.ranges) n += r.domain == arg;
      for (const auto& m : f_.marks) n += m.domain == arg;
      return count(n);
    }
    if (key == "thread_name") {
      std::set<std::string> tids;
      auto [b, e] = f_.thread_names.equal_range(arg);
      for (auto it = b; it != e; ++it) tids.insert(std::to_string(it->second));
      *actual = Uniform(tids);
      return true;
    }
    // Devices, by UUID.
    if (key == "device_name") return device_uniform([](const auto& d) { return d.name; });
    if (key == "device_cc") {
      return device_uniform([](const auto& d) {
        return std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
      });
    }
    if (key == "device_sm_count")
      return device_uniform([](const auto& d) { return std::to_string(d.sm_count); });
    if (key == "chunks") return count(f_.chunks);
    return false;
  }

  void CheckExpectation(const Expectation& e) {
    // Settings, checked by CheckEnd / CheckLinked.
    if (e.key == "clean_end" || e.key == "chunks_min" || e.key == "link_grace_ns" ||
        e.key == "allow_untimed_kernels") {
      return;
    }
    std::string name = e.arg.empty() ? e.key : e.key + "[" + e.arg + "]";
    std::string base = e.key;
    int op = 0;  // 0 ==, 1 >=, -1 <=
    auto ends_with = [](const std::string& s, const std::string& suffix) {
      return s.size() > suffix.size() &&
             s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with(base, "_min")) {
      base.resize(base.size() - 4);
      op = 1;
    } else if (ends_with(base, "_max")) {
      base.resize(base.size() - 4);
      op = -1;
    }
    std::string actual;
    if (!Actual(base, e.arg, &actual)) {
      Add(false, name,
          "unknown expectation key `" + e.key + "` (line " + std::to_string(e.line) + ")");
      return;
    }
    long double want = 0, got = 0;
    bool numeric = ParseNumber(e.value, &want) && ParseNumber(actual, &got);
    bool pass;
    if (op != 0) {
      pass = numeric && (op > 0 ? got >= want : got <= want);
    } else {
      pass = numeric ? got == want : actual == e.value;
    }
    const char* rel = op > 0 ? ">= " : op < 0 ? "<= " : "";
    Add(pass, name, "expected " + std::string(rel) + e.value + ", got " + actual);
  }

  const TraceFacts& f_;
  const std::vector<Expectation>& ex_;
  std::vector<CheckResult> results_;
  std::unordered_multimap<uint32_t, const TraceFacts::Api*> api_by_correlation_;
  std::vector<uint32_t> depth_;
  uint64_t last_time_ = 0;
  bool expect_clean_end_ = true;
  uint64_t chunks_min_ = 1;
  uint64_t link_grace_ns_ = 0;
  bool allow_untimed_kernels_ = false;
  uint64_t untimed_kernels_ = 0;  // kernel records without timestamps (any flag)
};

uint64_t End(int64_t start, int64_t duration) { return static_cast<uint64_t>(start + duration); }

}  // namespace

std::vector<Expectation> ParseExpectations(std::istream& in, std::vector<std::string>* errors) {
  std::vector<Expectation> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string t = Trim(line);
    if (t.compare(0, 7, "expect ") != 0) continue;
    std::string body = Trim(t.substr(7));
    Expectation e;
    e.line = number;
    size_t bracket = body.find('[');
    size_t eq = body.find('=');
    if (bracket != std::string::npos && (eq == std::string::npos || bracket < eq)) {
      size_t close = body.find("]=", bracket);
      if (close == std::string::npos) {
        errors->push_back("line " + std::to_string(number) + ": no `]=` in `" + t + "`");
        continue;
      }
      e.key = body.substr(0, bracket);
      e.arg = body.substr(bracket + 1, close - bracket - 1);
      e.value = body.substr(close + 2);
    } else {
      if (eq == std::string::npos) {
        errors->push_back("line " + std::to_string(number) + ": no `=` in `" + t + "`");
        continue;
      }
      e.key = body.substr(0, eq);
      e.value = body.substr(eq + 1);
    }
    if (e.key.empty()) {
      errors->push_back("line " + std::to_string(number) + ": empty key in `" + t + "`");
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status LoadTraceFacts(const std::string& path, TraceFacts* facts) {
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<TraceReader>& reader = opened.value();
  Chunk chunk;
  auto str = [&](uint32_t id) { return id == 0 ? std::string() : std::string(reader->Str(id)); };
  while (reader->Next(&chunk)) {
    ++facts->chunks;
    for (const auto& k : chunk.kernels()) {
      TraceFacts::Kernel r;
      r.start = static_cast<uint64_t>(k.start());
      r.end = End(k.start(), k.duration());
      if (const KernelShape* s = reader->Shape(k.shape())) {
        r.name = str(s->name());
        r.demangled = str(s->demangled());
        r.grid[0] = s->grid_x(), r.grid[1] = s->grid_y(), r.grid[2] = s->grid_z();
        r.block[0] = s->block_x(), r.block[1] = s->block_y(), r.block[2] = s->block_z();
        r.cluster[0] = s->cluster_x(), r.cluster[1] = s->cluster_y(), r.cluster[2] = s->cluster_z();
        r.dynamic_shared = s->dynamic_shared_bytes();
      }
      r.device = k.device();
      r.stream = k.stream();
      r.correlation = static_cast<uint32_t>(k.correlation());
      r.graph_id = k.graph_id();
      r.graph_node_id = k.graph_node_id();
      r.flags = k.flags();
      facts->kernels.push_back(std::move(r));
    }
    for (const auto& m : chunk.memcpys()) {
      TraceFacts::Copy r;
      r.start = static_cast<uint64_t>(m.start());
      r.end = End(m.start(), m.duration());
      r.bytes = m.bytes();
      r.kind = StripPrefix(CopyKind_Name(m.copy_kind()), "COPY_");
      MemoryKind host = m.copy_kind() == COPY_DTOH ? m.dst_kind() : m.src_kind();
      r.host_memory = StripPrefix(MemoryKind_Name(host), "MEMORY_");
      r.async = (m.flags() & RECORD_FLAG_ASYNC) != 0;
      r.device = m.device();
      r.stream = m.stream();
      r.correlation = static_cast<uint32_t>(m.correlation());
      r.graph_id = m.graph_id();
      r.graph_node_id = m.graph_node_id();
      r.flags = m.flags();
      r.peer = m.peer();
      r.src_device = m.src_device();
      r.dst_device = m.dst_device();
      facts->memcpys.push_back(std::move(r));
    }
    for (const auto& m : chunk.memsets()) {
      TraceFacts::Copy r;
      r.start = static_cast<uint64_t>(m.start());
      r.end = End(m.start(), m.duration());
      r.bytes = m.bytes();
      r.kind = "MEMSET";
      r.host_memory = StripPrefix(MemoryKind_Name(m.memory_kind()), "MEMORY_");
      r.async = (m.flags() & RECORD_FLAG_ASYNC) != 0;
      r.device = m.device();
      r.stream = m.stream();
      r.correlation = static_cast<uint32_t>(m.correlation());
      r.graph_id = m.graph_id();
      r.graph_node_id = m.graph_node_id();
      r.flags = m.flags();
      facts->memsets.push_back(std::move(r));
    }
    for (const auto& a : chunk.api_calls()) {
      TraceFacts::Api r;
      r.start = static_cast<uint64_t>(a.start());
      r.end = End(a.start(), a.duration());
      r.name = str(a.name());
      r.thread_id = a.thread_id();
      r.correlation = static_cast<uint32_t>(a.correlation());
      facts->api_calls.push_back(std::move(r));
    }
    for (const auto& n : chunk.nvtx_ranges()) {
      TraceFacts::Range r;
      r.start = static_cast<uint64_t>(n.start());
      r.end = End(n.start(), n.duration());
      r.name = str(n.name());
      r.domain = str(n.domain());
      r.payload = PayloadString(n.payload());
      r.thread_id = n.thread_id();
      r.end_thread_id = n.end_thread_id();
      r.category = n.category();
      r.color = n.color();
      r.has_color = n.has_color();
      r.flags = n.flags();
      facts->ranges.push_back(std::move(r));
    }
    for (const auto& n : chunk.nvtx_marks()) {
      TraceFacts::Mark r;
      r.time = static_cast<uint64_t>(n.time());
      r.name = str(n.name());
      r.domain = str(n.domain());
      r.payload = PayloadString(n.payload());
      r.thread_id = n.thread_id();
      r.category = n.category();
      r.color = n.color();
      r.has_color = n.has_color();
      facts->marks.push_back(std::move(r));
    }
    for (const auto& t : chunk.threads()) facts->thread_names.emplace(t.name(), t.thread_id());
  }

  if (const Header* h = reader->header()) {
    facts->have_header = true;
    facts->header_kp_version = h->kp_version();
    facts->header_pid = h->pid();
    facts->header_hostname = h->hostname();
    facts->header_command_args = static_cast<uint32_t>(h->command_line_size());
    facts->header_cuda_driver_version = h->cuda_driver_version();
    facts->header_driver_version = h->driver_version();
    facts->header_start_time_unix_ns = h->start_time_unix_ns();
  }
  if (const Footer* footer = reader->footer()) {
    facts->have_footer = true;
    facts->clean_end = footer->clean_end();
    facts->footer_kernels = footer->kernels();
    facts->footer_memcpys = footer->memcpys();
    facts->footer_memsets = footer->memsets();
    facts->footer_api_calls = footer->api_calls();
    facts->footer_nvtx_ranges = footer->nvtx_ranges();
    facts->footer_nvtx_marks = footer->nvtx_marks();
  }
  const Stats& s = reader->trace_stats();
  facts->cupti_dropped = s.cupti_dropped_records();
  facts->buffers_refused = s.buffers_refused();
  facts->zero_timestamps = s.zero_timestamp_records();
  facts->write_errors = s.write_errors();
  facts->nvtx_unmatched_ends = s.nvtx_unmatched_ends();
  facts->unknown_records = s.unknown_records();
  for (const Device& d : reader->devices()) {
    TraceFacts::DeviceDesc dev;
    dev.id = d.id();
    dev.name = d.name();
    for (unsigned char c : d.uuid()) {
      char hex[3];
      std::snprintf(hex, sizeof(hex), "%02x", c);
      dev.uuid_hex += hex;
    }
    dev.cc_major = d.compute_capability_major();
    dev.cc_minor = d.compute_capability_minor();
    dev.sm_count = d.sm_count();
    facts->devices.push_back(std::move(dev));
  }
  const ReaderStats& rs = reader->stats();
  facts->truncated_tail_bytes = rs.truncated_tail_bytes;
  auto damage = [&](uint64_t n, const char* what) {
    if (n) facts->damage.push_back(std::to_string(n) + " " + what);
  };
  if (rs.bad_file_magic) facts->damage.push_back("bad file magic");
  damage(rs.chunks_bad_crc, "chunks with a bad payload CRC");
  damage(rs.chunks_bad_header, "bad chunk headers");
  damage(rs.chunks_undecodable, "undecodable chunks");
  damage(rs.skipped_bytes, "bytes skipped resynchronising");
  damage(rs.sequence_gaps, "chunks missing by sequence");
  damage(rs.unknown_string_ids, "unknown string ids");
  damage(rs.unknown_shape_ids, "unknown shape ids");
  damage(rs.negative_durations, "records with end before start");
  return Status();
}

std::vector<CheckResult> CheckTrace(const TraceFacts& facts,
                                    const std::vector<Expectation>& expectations) {
  return Checker(facts, expectations).Run();
}

}  // namespace kp::gputest
