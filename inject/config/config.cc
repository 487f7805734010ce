#include "inject/config/config.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <regex>
#include <string_view>

#include "common/capture_signal_name.h"
#include "inject/pm_sampling/pm_sampling_config.h"

namespace kp {
namespace {

constexpr const char* kKnownVariables[] = {
    "KP_DISABLE",
    "KP_OUTPUT",
    "KP_ACTIVITIES",
    "KP_API",
    "KP_METRICS",
    "KP_METRICS_RANGES",
    "KP_METRICS_MODE",
    "KP_METRICS_CACHE",
    "KP_METRICS_SKIP",
    "KP_FLUSH_MS",
    "KP_BUFFER_MB",
    "KP_COMPRESSION",
    "KP_DELAY",
    "KP_DURATION",
    "KP_CAPTURE_RANGE",
    "KP_CAPTURE_RANGE_END",
    "KP_CAPTURE_SCHEDULE",
    "KP_CAPTURE",
    "KP_CAPTURE_SIGNAL",
    "KP_LOG",
    "KP_DUMP_BUFFERS",
    "KP_METRICS_KERNELS",
    "KP_METRICS_LAUNCH_SKIP",
    "KP_METRICS_LAUNCH_COUNT",
    "KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH",
    "KP_METRICS_LAUNCH_SCOPE",
    "KP_METRICS_NVTX_INCLUDE",
    "KP_RUN_ID",
    "KP_PC_SAMPLING",
    "KP_PC_SAMPLING_PERIOD",
    "KP_PM_SAMPLING",
    "KP_PM_INTERVAL_US",
};

constexpr const char* kActivityNames[] = {"kernel", "memcpy", "memset", "api",
                                          "nvtx",   "sync",   "graph",  "overhead"};

bool* ActivityFlag(Config* c, std::string_view name) {
  bool* flags[] = {&c->kernel, &c->memcpy, &c->memset, &c->api,
                   &c->nvtx,   &c->sync,   &c->graph,  &c->overhead};
  for (size_t i = 0; i < 8; ++i) {
    if (name == kActivityNames[i]) return flags[i];
  }
  return nullptr;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitComma(std::string_view s) {
  std::vector<std::string_view> out;
  size_t begin = 0;
  while (true) {
    size_t comma = s.find(',', begin);
    out.push_back(Trim(s.substr(begin, comma == std::string_view::npos ? comma : comma - begin)));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return out;
}

// The value as it goes into the one-line message: control characters escaped, long values cut.
std::string Printable(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 200; ++i) {
    auto c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (v.size() > 200) out += "...";
  return out;
}

bool HasControlCharacters(std::string_view v) {
  for (char ch : v) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) return true;
  }
  return false;
}

void AddError(std::vector<ConfigError>* errors, const char* variable, std::string_view value,
              const std::string& expected, ConfigErrorScope scope) {
  if (errors == nullptr) return;
  ConfigError e;
  e.variable = variable;
  e.scope = scope;
  e.message = std::string(variable) + "=\"" + Printable(value) + "\" is not valid: " + expected +
              (scope == ConfigErrorScope::kProfiler ? "; kp is off for this process"
                                                    : "; metrics are off, tracing goes on");
  errors->push_back(std::move(e));
}

bool ParseUint(std::string_view s, uint64_t min, uint64_t max, uint64_t* out) {
  s = Trim(s);
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v < min || v > max) return false;
  *out = v;
  return true;
}

bool ParseSeconds(std::string_view s, double* out) {
  std::string text(Trim(s));
  if (!text.empty() && text.back() == 's') text.pop_back();
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || c == '.')) return false;  // no hex, inf, nan, exponents
  }
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0 || v > 1e6) {
    return false;
  }
  *out = v;
  return true;
}

bool ParseBool(std::string_view s, bool* out) {
  s = Trim(s);
  for (const char* t : {"1", "true", "yes", "on", "TRUE", "True", "YES", "Yes", "ON", "On"}) {
    if (s == t) return *out = true, true;
  }
  for (const char* f : {"0", "false", "no", "off", "FALSE", "False", "NO", "No", "OFF", "Off"}) {
    if (s == f) return *out = false, true;
  }
  return false;
}

// Checks the %-escapes of KP_OUTPUT; on failure names the bad one in `bad`.
bool ValidOutputPattern(std::string_view p, std::string* bad) {
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%') continue;
    if (i + 1 == p.size()) {
      *bad = "%";
      return false;
    }
    char c = p[i + 1];
    if (c != 'p' && c != 'h' && c != 'r' && c != 't' && c != '%') {
      *bad = std::string("%") + c;
      return false;
    }
    ++i;
  }
  return true;
}

bool ValidMetricName(std::string_view m) {
  if (m.empty()) return false;
  for (char c : m) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

std::string FormatSeconds(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

bool ValidRunId(std::string_view v) {
  if (v.empty() || v.size() > 128) return false;
  for (char c : v) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A launcher's job id as a run id: characters outside the run-id set become '-'.
std::string SanitizedRunId(std::string_view v) {
  std::string out;
  for (char c : v.substr(0, 120)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    out += ok ? c : '-';
  }
  return out;
}

int FirstIntFromEnv(const GetEnvFn& getenv, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = getenv(name);
    uint64_t n = 0;
    if (v != nullptr && ParseUint(v, 0, 0x7FFFFFFF, &n)) return static_cast<int>(n);
  }
  return -1;
}

}  // namespace

// KP_CAPTURE_RANGE_END, KP_CAPTURE_SCHEDULE, KP_CAPTURE, KP_CAPTURE_SIGNAL and how they combine
// with KP_CAPTURE_RANGE (parsed before). Only one trigger may be named.
template <typename Get>
void ParseCaptureVariables(const Get& get, Config& c, std::vector<ConfigError>* errors) {
  constexpr ConfigErrorScope kProfiler = ConfigErrorScope::kProfiler;
  const char* range_end = get("KP_CAPTURE_RANGE_END");
  if (range_end != nullptr) {
    std::string_view s = Trim(range_end);
    uint64_t n = 0;
    if (s == "stop" || s == "stop-shutdown") {
      c.capture_range_end = CaptureRangeEnd::kStop;
      c.capture_max_windows = 1;
    } else if (s == "repeat" || s == "repeat-shutdown") {
      c.capture_range_end = CaptureRangeEnd::kRepeat;
      c.capture_max_windows = 0;
    } else if ((s.substr(0, 7) == "repeat:" && ParseUint(s.substr(7), 1, 1000000, &n)) ||
               (s.substr(0, 16) == "repeat-shutdown:" && ParseUint(s.substr(16), 1, 1000000, &n))) {
      c.capture_range_end = CaptureRangeEnd::kRepeat;
      c.capture_max_windows = static_cast<uint32_t>(n);
    } else if (s == "none") {
      c.capture_range_end = CaptureRangeEnd::kNone;
      c.capture_max_windows = 1;
    } else {
      AddError(errors, "KP_CAPTURE_RANGE_END", range_end,
               "expected stop (one window), repeat (a window per occurrence), repeat:N (N from 1 "
               "to 1000000 windows) or none (capture from the first start to the end; default "
               "stop)",
               kProfiler);
    }
  }
  const char* schedule = get("KP_CAPTURE_SCHEDULE");
  if (schedule != nullptr) {
    const std::string_view s = Trim(schedule);
    const size_t colon = s.rfind(':');
    bool ok = colon != std::string_view::npos && colon > 0 && !HasControlCharacters(s);
    uint64_t numbers[5] = {0, 0, 0, 0, 0};
    size_t count = 0;
    if (ok) {
      for (std::string_view part : SplitComma(s.substr(colon + 1))) {
        if (count == 5 || !ParseUint(part, 0, 1000000000, &numbers[count])) {
          ok = false;
          break;
        }
        ++count;
      }
    }
    std::string_view range = ok ? s.substr(0, colon) : std::string_view();
    // "domain::message:..." leaves a trailing ':' of the "::" when the message is empty.
    if (ok && (count < 3 || numbers[2] == 0 || range.empty() || range.back() == ':')) ok = false;
    if (ok) {
      c.capture_schedule_set = true;
      c.capture_schedule.range = std::string(range);
      c.capture_schedule.wait = static_cast<uint32_t>(numbers[0]);
      c.capture_schedule.warmup = static_cast<uint32_t>(numbers[1]);
      c.capture_schedule.active = static_cast<uint32_t>(numbers[2]);
      c.capture_schedule.repeat = static_cast<uint32_t>(numbers[3]);
      c.capture_schedule.skip_first = static_cast<uint32_t>(numbers[4]);
    } else {
      AddError(errors, "KP_CAPTURE_SCHEDULE", schedule,
               "expected RANGE:WAIT,WARMUP,ACTIVE[,REPEAT[,SKIP_FIRST]] with the NVTX range that "
               "marks a step (domain::message to name a domain) and step counts, ACTIVE at least "
               "1, REPEAT 0 for no limit (e.g. step:5,1,3,2)",
               kProfiler);
    }
  }
  const char* trigger = get("KP_CAPTURE");
  if (trigger != nullptr) {
    const std::string_view s = Trim(trigger);
    if (s == "cudaProfilerApi" || s == "cudaprofilerapi" || s == "cuda-profiler-api") {
      c.capture_trigger = CaptureTrigger::kCudaProfilerApi;
    } else if (s == "signal" || s == "on-demand") {
      c.capture_trigger = CaptureTrigger::kSignal;
    } else if (s == "all" || s.empty()) {
      c.capture_trigger = CaptureTrigger::kWholeRun;
    } else {
      AddError(errors, "KP_CAPTURE", trigger,
               "expected cudaProfilerApi (windows between cudaProfilerStart and cudaProfilerStop), "
               "signal (windows between kptrace start PID and kptrace stop PID) or all (default)",
               kProfiler);
    }
  }
  if (const char* v = get("KP_CAPTURE_SIGNAL")) {
    const int signo = ParseCaptureSignal(v);
    if (signo == 0) {
      AddError(errors, "KP_CAPTURE_SIGNAL", v,
               "expected a real-time signal (SIGRTMIN+K, SIGRTMAX-K or its number), SIGUSR1 or "
               "SIGUSR2 (default SIGRTMIN+6)",
               kProfiler);
    } else {
      c.capture_signal = signo;
    }
  }
  // One trigger at a time.
  const bool has_range = !c.capture_range.empty();
  const bool has_trigger = c.capture_trigger != CaptureTrigger::kWholeRun;
  if (c.capture_schedule_set && (has_range || has_trigger)) {
    AddError(errors, "KP_CAPTURE_SCHEDULE", schedule,
             std::string("cannot be combined with ") +
                 (has_range ? "KP_CAPTURE_RANGE" : "KP_CAPTURE") + ": name one trigger",
             kProfiler);
  } else if (has_range && has_trigger) {
    AddError(errors, "KP_CAPTURE", trigger,
             "cannot be combined with KP_CAPTURE_RANGE: name one trigger", kProfiler);
  }
  if (range_end != nullptr && !has_range && c.capture_trigger != CaptureTrigger::kCudaProfilerApi) {
    AddError(errors, "KP_CAPTURE_RANGE_END", range_end,
             "applies only with KP_CAPTURE_RANGE or KP_CAPTURE=cudaProfilerApi: set one of them "
             "or drop it",
             kProfiler);
  }
}

Config ParseConfig(const GetEnvFn& getenv, std::vector<ConfigError>* errors) {
  Config c;
  // An empty value counts as unset (`KP_X= program` is a common way to clear a variable).
  auto get = [&](const char* name) -> const char* {
    const char* v = getenv(name);
    return (v != nullptr && v[0] != '\0') ? v : nullptr;
  };
  constexpr auto kProfiler = ConfigErrorScope::kProfiler;
  constexpr auto kMetrics = ConfigErrorScope::kMetrics;
  ParsePcSamplingConfig(get, &c.pc_sampling, errors);

  if (const char* v = get("KP_DISABLE")) {
    if (!ParseBool(v, &c.disabled)) {
      AddError(errors, "KP_DISABLE", v,
               "expected 1 to turn kp off or 0 to keep it on (also true/false, yes/no, on/off; "
               "default 0)",
               kProfiler);
    }
  }

  if (const char* v = get("KP_OUTPUT")) {
    std::string bad;
    if (!ValidOutputPattern(v, &bad)) {
      AddError(errors, "KP_OUTPUT", v,
               "expected a file path in which % is followed by p (pid), h (host), r (rank), "
               "t (start time) or % (found \"" +
                   Printable(bad) + "\"; default kp-%p.kptrace)",
               kProfiler);
    } else if (HasControlCharacters(v)) {
      AddError(errors, "KP_OUTPUT", v,
               "expected a file path without control characters (default kp-%p.kptrace)",
               kProfiler);
    } else {
      c.output_pattern = v;
    }
  }

  if (const char* v = get("KP_ACTIVITIES")) {
    std::vector<std::string_view> items = SplitComma(v);
    bool only_removals = true;
    for (auto item : items) {
      if (item.empty() || item[0] != '-') only_removals = false;
    }
    Config default_set;
    Config a;  // starts at the default set
    if (!only_removals) {
      for (const char* name : kActivityNames) *ActivityFlag(&a, name) = false;
    }
    std::string unknown;
    bool bad_item = false;
    for (auto item : items) {
      bool add = true;
      if (!item.empty() && item[0] == '-') {
        add = false;
        item.remove_prefix(1);
      }
      if (item == "all") {
        for (const char* name : kActivityNames) *ActivityFlag(&a, name) = add;
      } else if (item == "default") {
        for (const char* name : kActivityNames) {
          if (*ActivityFlag(&default_set, name)) *ActivityFlag(&a, name) = add;
        }
      } else if (bool* flag = ActivityFlag(&a, item)) {
        *flag = add;
      } else if (!bad_item) {
        bad_item = true;
        unknown = std::string(item);
      }
    }
    if (bad_item) {
      AddError(errors, "KP_ACTIVITIES", v,
               "expected a comma list of kernel, memcpy, memset, api, nvtx, sync, graph, "
               "overhead, default or all, with -name to remove one (\"" +
                   Printable(unknown) +
                   "\" is none of them; default: kernel,memcpy,memset,api,nvtx)",
               kProfiler);
    } else {
      c.kernel = a.kernel;
      c.memcpy = a.memcpy;
      c.memset = a.memset;
      c.api = a.api;
      c.nvtx = a.nvtx;
      c.sync = a.sync;
      c.graph = a.graph;
      c.overhead = a.overhead;
    }
  }

  if (const char* v = get("KP_API")) {
    std::string_view s = Trim(v);
    if (s == "launch") {
      c.api_mode = ApiMode::kLaunch;
    } else if (s == "launch-runtime") {
      c.api_mode = ApiMode::kLaunchRuntime;
    } else if (s == "launch-activity") {
      c.api_mode = ApiMode::kLaunchActivity;
    } else if (s == "all") {
      c.api_mode = ApiMode::kAll;
    } else if (s == "none") {
      c.api_mode = ApiMode::kNone;
    } else {
      AddError(errors, "KP_API", v,
               "expected launch (launch, copy, memset, sync, allocation, event and graph calls, "
               "as the driver calls they reach), launch-runtime (the same, runtime calls under "
               "their runtime names, slower), launch-activity (as API activity records, "
               "slower), all or none (default launch)",
               kProfiler);
    }
  }

  if (const char* v = get("KP_METRICS")) {
    std::vector<std::string> metrics;
    std::string bad;
    bool ok = true;
    auto add = [&metrics](const std::string& m) {
      for (const auto& have : metrics) {
        if (have == m) return;
      }
      metrics.push_back(m);
    };
    for (auto item : SplitComma(v)) {
      if (item == "sol") {
        for (const auto& m : SpeedOfLightMetrics()) add(m);
      } else if (ValidMetricName(item)) {
        add(std::string(item));
      } else {
        ok = false;
        bad = std::string(item);
        break;
      }
    }
    if (!ok) {
      AddError(errors, "KP_METRICS", v,
               "expected a comma list of CUPTI metric names made of a-z, 0-9, _ and . (e.g. "
               "dram__bytes_read.sum), or sol for the speed-of-light set (\"" +
                   Printable(bad) + "\" is not a metric name; default: no metrics)",
               kMetrics);
    } else {
      c.metrics = std::move(metrics);
    }
  }

  // KP_METRICS_RANGES and KP_METRICS_NVTX_INCLUDE: comma lists of NVTX range globs.
  auto range_patterns = [&](const char* variable, const char* v, const char* default_text,
                            std::vector<std::string>* out) {
    std::vector<std::string> ranges;
    bool ok = true;
    for (auto item : SplitComma(v)) {
      size_t sep = item.find("::");
      // "domain::glob" names a domain, "::glob" the default domain; the glob may not be empty.
      if (item.empty() || HasControlCharacters(item) ||
          (sep != std::string_view::npos && sep + 2 == item.size())) {
        ok = false;
        break;
      }
      ranges.emplace_back(item);
    }
    if (!ok) {
      AddError(errors, variable, v,
               std::string("expected a comma list of NVTX range names or globs (* and ?), each "
                           "optionally domain::glob (::glob for the default domain), none empty "
                           "(default: ") +
                   default_text + ")",
               kMetrics);
    } else {
      *out = std::move(ranges);
    }
  };
  if (const char* v = get("KP_METRICS_RANGES"))
    range_patterns("KP_METRICS_RANGES", v, "every range", &c.metrics_ranges);

  if (const char* v = get("KP_METRICS_MODE")) {
    std::string_view s = Trim(v);
    if (s == "range") {
      c.metrics_mode = MetricsMode::kRange;
    } else if (s == "kernel") {
      c.metrics_mode = MetricsMode::kKernel;
    } else {
      AddError(errors, "KP_METRICS_MODE", v,
               "expected range (per NVTX range) or kernel (per kernel, with replay) (default "
               "range)",
               kMetrics);
    }
  }

  if (const char* v = get("KP_METRICS_CACHE")) {
    std::string_view s = Trim(v);
    if (s == "pass") {
      c.metrics_cache = MetricsCache::kPass;
    } else if (s == "range") {
      c.metrics_cache = MetricsCache::kRange;
    } else if (s == "none") {
      c.metrics_cache = MetricsCache::kNone;
    } else {
      AddError(errors, "KP_METRICS_CACHE", v,
               "expected pass (empty the L2 after each range-profiler start), range (before "
               "every measured range, like ncu --cache-control all) or none (default pass)",
               kMetrics);
    }
  }

  if (const char* v = get("KP_METRICS_L2_FLUSH")) {
    std::string_view s = Trim(v);
    if (s == "driver") {
      c.metrics_l2_flush = MetricsL2Flush::kDriver;
    } else if (s == "sweep") {
      c.metrics_l2_flush = MetricsL2Flush::kSweep;
    } else {
      AddError(errors, "KP_METRICS_L2_FLUSH", v,
               "expected driver (the GPU driver's L2 evict, like ncu's cache control; kp's "
               "sweep where the driver refuses) or sweep (kp reads the L2 out and discards it) "
               "(default driver)",
               kMetrics);
    }
  }

  if (const char* v = get("KP_METRICS_SKIP")) {
    uint64_t n = 0;
    if (ParseUint(v, 0, 1000000, &n)) {
      c.metrics_skip = static_cast<uint32_t>(n);
    } else {
      AddError(errors, "KP_METRICS_SKIP", v,
               "expected a whole number 0-1000000: the warm-up occurrences of each measured range "
               "name that are traced but not measured (default 1)",
               kMetrics);
    }
  }

  // Kernel-mode targeting (inject/metrics/kernel_selector.h).
  bool targeting = false;
  if (const char* v = get("KP_METRICS_KERNELS")) {
    std::string_view s = Trim(v);
    constexpr std::string_view kRegex = "regex:";
    std::string problem;
    if (HasControlCharacters(s)) {
      problem = "control characters";
    } else if (s.substr(0, kRegex.size()) == kRegex) {
      std::string expr(s.substr(kRegex.size()));
      if (expr.empty()) problem = "an empty regular expression";
      try {
        if (problem.empty()) std::regex check(expr, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        problem = std::string("the regular expression does not compile: ") + e.what();
      }
    }
    if (!problem.empty()) {
      AddError(errors, "KP_METRICS_KERNELS", v,
               "expected regex:RE (an ECMAScript regular expression searched in the mangled and "
               "demangled kernel name) or an exact kernel name (mangled, demangled, or the bare "
               "function name) (" +
                   problem + "; default: every kernel)",
               kMetrics);
    } else {
      c.metrics_kernels = std::string(s);
      targeting = true;
    }
  }
  struct LaunchNumber {
    const char* variable;
    uint64_t* out;
    const char* meaning;
  } numbers[] = {
      {"KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH", &c.metrics_launch_skip_before_match,
       "kernel launches of any name passed before the kernel filter applies (default 0)"},
      {"KP_METRICS_LAUNCH_SKIP", &c.metrics_launch_skip,
       "selected kernel launches passed before measuring (default 0)"},
      {"KP_METRICS_LAUNCH_COUNT", &c.metrics_launch_count,
       "selected kernel launches measured, 0 for all (default 0)"},
  };
  for (const LaunchNumber& n : numbers) {
    const char* v = get(n.variable);
    if (!v) continue;
    if (ParseUint(v, 0, 1000000000000ull, n.out)) {
      targeting = true;
    } else {
      AddError(errors, n.variable, v,
               std::string("expected a whole number 0-1000000000000: the ") + n.meaning, kMetrics);
    }
  }
  if (const char* v = get("KP_METRICS_LAUNCH_SCOPE")) {
    std::string_view s = Trim(v);
    if (s == "global" || s == "per-name") {
      c.metrics_launch_per_name = s == "per-name";
      targeting = true;
    } else {
      AddError(errors, "KP_METRICS_LAUNCH_SCOPE", v,
               "expected global (KP_METRICS_LAUNCH_SKIP/COUNT count launches of all selected "
               "kernels together, like ncu) or per-name (each kernel symbol on its own) "
               "(default global)",
               kMetrics);
    }
  }
  if (const char* v = get("KP_METRICS_NVTX_INCLUDE")) {
    range_patterns("KP_METRICS_NVTX_INCLUDE", v, "no NVTX condition", &c.metrics_nvtx_include);
    targeting = targeting || !c.metrics_nvtx_include.empty();
  }
  if (targeting) {
    // Targeting picks kernel launches: it implies kernel mode, and contradicts range mode.
    if (get("KP_METRICS_MODE") && c.metrics_mode == MetricsMode::kRange) {
      AddError(errors, "KP_METRICS_MODE", get("KP_METRICS_MODE"),
               "KP_METRICS_KERNELS, KP_METRICS_LAUNCH_* and KP_METRICS_NVTX_INCLUDE select "
               "kernel launches and need kernel (leave KP_METRICS_MODE unset, or set it to kernel)",
               kMetrics);
    } else {
      c.metrics_mode = MetricsMode::kKernel;
    }
  }

  if (const char* v = get("KP_FLUSH_MS")) {
    uint64_t n = 0;
    if (ParseUint(v, 10, 600000, &n)) {
      c.flush_ms = static_cast<uint32_t>(n);
    } else {
      AddError(errors, "KP_FLUSH_MS", v,
               "expected an integer number of milliseconds from 10 to 600000 (default 1000)",
               kProfiler);
    }
  }

  if (const char* v = get("KP_BUFFER_MB")) {
    uint64_t n = 0;
    if (ParseUint(v, 8, 65536, &n)) {
      c.buffer_mb = static_cast<uint32_t>(n);
    } else {
      AddError(errors, "KP_BUFFER_MB", v,
               "expected an integer number of MiB from 8 to 65536 (default 256)", kProfiler);
    }
  }

  if (const char* v = get("KP_COMPRESSION")) {
    std::string_view s = Trim(v);
    uint64_t level = 0;
    if (s == "none") {
      c.zstd_level = 0;
    } else if (s == "zstd") {
      c.zstd_level = 3;
    } else if (s.substr(0, 5) == "zstd:" && ParseUint(s.substr(5), 1, 19, &level)) {
      c.zstd_level = static_cast<int>(level);
    } else {
      AddError(errors, "KP_COMPRESSION", v,
               "expected zstd, zstd:LEVEL with LEVEL from 1 to 19, or none (default zstd:3)",
               kProfiler);
    }
  }

  if (const char* v = get("KP_DELAY")) {
    if (!ParseSeconds(v, &c.delay_s)) {
      AddError(errors, "KP_DELAY", v,
               "expected a number of seconds from 0 to 1000000 before capture starts (default 0)",
               kProfiler);
    }
  }

  if (const char* v = get("KP_DURATION")) {
    if (!ParseSeconds(v, &c.duration_s)) {
      AddError(errors, "KP_DURATION", v,
               "expected a number of seconds from 0 to 1000000 to capture, 0 meaning until the "
               "end (default 0)",
               kProfiler);
    }
  }

  if (const char* v = get("KP_CAPTURE_RANGE")) {
    std::string_view s = Trim(v);
    size_t sep = s.find("::");
    if (s.empty() || HasControlCharacters(s) ||
        (sep != std::string_view::npos && sep + 2 == s.size())) {
      AddError(errors, "KP_CAPTURE_RANGE", v,
               "expected the message of the NVTX range that starts capture, optionally "
               "domain::message (::message for the default domain; default: capture from the "
               "start)",
               kProfiler);
    } else {
      c.capture_range = std::string(s);
    }
  }

  ParseCaptureVariables(get, c, errors);

  if (const char* v = get("KP_LOG")) {
    std::string_view s = Trim(v);
    if (s == "quiet") {
      c.log = LogLevel::kQuiet;
    } else if (s == "info") {
      c.log = LogLevel::kInfo;
    } else if (s == "debug") {
      c.log = LogLevel::kDebug;
    } else {
      AddError(errors, "KP_LOG", v, "expected quiet, info or debug (default info)", kProfiler);
    }
  }

  if (const char* v = get("KP_RUN_ID")) {
    if (!ValidRunId(v)) {
      AddError(errors, "KP_RUN_ID", v,
               "expected 1 to 128 characters from A-Z, a-z, 0-9, '.', '_', ':' and '-' (default: "
               "set by kptrace run, else the launcher's job id)",
               kProfiler);
    } else {
      c.run_id = v;
    }
  }

  if (const char* v = get("KP_DUMP_BUFFERS")) {
    if (HasControlCharacters(v)) {
      AddError(errors, "KP_DUMP_BUFFERS", v,
               "expected a directory path without control characters (default: off)", kProfiler);
    } else {
      c.dump_buffers_dir = v;
    }
  }
  ParsePmSamplingConfig(get, &c, errors);
  return c;
}

std::vector<std::pair<std::string, std::string>> DescribeConfig(const Config& c) {
  std::vector<std::string> activities;
  Config copy = c;
  for (const char* name : kActivityNames) {
    if (*ActivityFlag(&copy, name)) activities.emplace_back(name);
  }
  const char* api = c.api_mode == ApiMode::kAll              ? "all"
                    : c.api_mode == ApiMode::kNone           ? "none"
                    : c.api_mode == ApiMode::kLaunchActivity ? "launch-activity"
                    : c.api_mode == ApiMode::kLaunchRuntime  ? "launch-runtime"
                                                             : "launch";
  const char* log = c.log == LogLevel::kQuiet   ? "quiet"
                    : c.log == LogLevel::kDebug ? "debug"
                                                : "info";
  std::vector<std::pair<std::string, std::string>> described = {
      {"KP_DISABLE", c.disabled ? "1" : "0"},
      {"KP_OUTPUT", c.output_pattern},
      {"KP_ACTIVITIES", Join(activities)},
      {"KP_API", api},
      {"KP_METRICS", Join(c.metrics)},
      {"KP_METRICS_RANGES", Join(c.metrics_ranges)},
      {"KP_METRICS_MODE", c.metrics_mode == MetricsMode::kKernel ? "kernel" : "range"},
      {"KP_METRICS_SKIP", std::to_string(c.metrics_skip)},
      {"KP_METRICS_KERNELS", c.metrics_kernels},
      {"KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH", std::to_string(c.metrics_launch_skip_before_match)},
      {"KP_METRICS_LAUNCH_SKIP", std::to_string(c.metrics_launch_skip)},
      {"KP_METRICS_LAUNCH_COUNT", std::to_string(c.metrics_launch_count)},
      {"KP_METRICS_LAUNCH_SCOPE", c.metrics_launch_per_name ? "per-name" : "global"},
      {"KP_METRICS_NVTX_INCLUDE", Join(c.metrics_nvtx_include)},
      {"KP_METRICS_CACHE", c.metrics_cache == MetricsCache::kRange  ? "range"
                           : c.metrics_cache == MetricsCache::kNone ? "none"
                                                                    : "pass"},
      {"KP_METRICS_L2_FLUSH", c.metrics_l2_flush == MetricsL2Flush::kSweep ? "sweep" : "driver"},
      {"KP_FLUSH_MS", std::to_string(c.flush_ms)},
      {"KP_BUFFER_MB", std::to_string(c.buffer_mb)},
      {"KP_COMPRESSION", c.zstd_level > 0 ? "zstd:" + std::to_string(c.zstd_level) : "none"},
      {"KP_DELAY", FormatSeconds(c.delay_s)},
      {"KP_DURATION", FormatSeconds(c.duration_s)},
      {"KP_CAPTURE_RANGE", c.capture_range},
      {"KP_LOG", log},
      {"KP_DUMP_BUFFERS", c.dump_buffers_dir},
      {"KP_RUN_ID", c.run_id},
      {"KP_PM_SAMPLING", DescribePmSampling(c)},
      {"KP_PM_INTERVAL_US", std::to_string(c.pm_interval_us)},
  };
  for (auto& pair : DescribePcSamplingConfig(c.pc_sampling)) described.push_back(std::move(pair));
  // Capture settings beyond KP_CAPTURE_RANGE appear only when set, so traces without them keep
  // their header unchanged.
  if (c.capture_range_end != CaptureRangeEnd::kStop || c.capture_max_windows != 1) {
    described.emplace_back("KP_CAPTURE_RANGE_END",
                           c.capture_range_end == CaptureRangeEnd::kNone ? "none"
                           : c.capture_max_windows == 0
                               ? "repeat"
                               : "repeat:" + std::to_string(c.capture_max_windows));
  }
  if (c.capture_schedule_set) {
    const CaptureSchedule& s = c.capture_schedule;
    described.emplace_back("KP_CAPTURE_SCHEDULE",
                           s.range + ":" + std::to_string(s.wait) + "," + std::to_string(s.warmup) +
                               "," + std::to_string(s.active) + "," + std::to_string(s.repeat) +
                               "," + std::to_string(s.skip_first));
  }
  if (c.capture_trigger == CaptureTrigger::kCudaProfilerApi) {
    described.emplace_back("KP_CAPTURE", "cudaProfilerApi");
  } else if (c.capture_trigger == CaptureTrigger::kSignal) {
    described.emplace_back("KP_CAPTURE", "signal");
    described.emplace_back("KP_CAPTURE_SIGNAL", std::to_string(CapturePlanOf(c).control_signal));
  }
  return described;
}

StatusOr<std::string> ExpandOutputPattern(const std::string& pattern, uint32_t pid,
                                          const std::string& host, int rank,
                                          uint64_t start_unix_ns) {
  std::string result;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      result += pattern[i];
      continue;
    }
    if (i + 1 == pattern.size()) {
      return Status::Error("KP_OUTPUT=\"" + Printable(pattern) + "\" ends in a lone %");
    }
    char c = pattern[++i];
    switch (c) {
      case 'p':
        result += std::to_string(pid);
        break;
      case 'h':
        result += host;
        break;
      case 'r':
        result += rank < 0 ? std::string("norank") : std::to_string(rank);
        break;
      case 't': {
        // UTC, so files from the hosts of one job sort together whatever their time zone.
        time_t secs = static_cast<time_t>(start_unix_ns / 1000000000ull);
        struct tm tm_utc;
        gmtime_r(&secs, &tm_utc);
        char buf[32];
        std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm_utc);
        result += buf;
        break;
      }
      case '%':
        result += '%';
        break;
      default:
        return Status::Error("KP_OUTPUT=\"" + Printable(pattern) + "\" uses unknown %" +
                             Printable(std::string(1, c)) +
                             ": expected %p (pid), %h (host), %r (rank), %t (start time) or %%");
    }
  }
  return result;
}

std::string RunIdFromEnv(const Config& config, const GetEnvFn& getenv) {
  if (!config.run_id.empty()) return config.run_id;
  auto get = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  // torchrun's rendezvous id ("none" unless --rdzv-id/--standalone gives one).
  const std::string elastic = get("TORCHELASTIC_RUN_ID");
  if (!elastic.empty() && elastic != "none") return SanitizedRunId("torchelastic-" + elastic);
  const std::string slurm = get("SLURM_JOB_ID");
  if (!slurm.empty()) {
    const std::string step = get("SLURM_STEP_ID");
    return SanitizedRunId("slurm-" + slurm + (step.empty() ? "" : "." + step));
  }
  const std::string pmix = get("PMIX_NAMESPACE");
  if (!pmix.empty()) return SanitizedRunId("pmix-" + pmix);
  return "";
}

int RankFromEnv(const GetEnvFn& getenv) {
  return FirstIntFromEnv(
      getenv, {"RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"});
}

int LocalRankFromEnv(const GetEnvFn& getenv) {
  return FirstIntFromEnv(
      getenv, {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"});
}

int WorldSizeFromEnv(const GetEnvFn& getenv) {
  return FirstIntFromEnv(getenv,
                         {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
}

std::vector<std::string> UnknownKpVariables(char** envp) {
  std::vector<std::string> warnings;
  if (envp == nullptr) return warnings;
  for (char** e = envp; *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.substr(0, 3) != "KP_") continue;
    std::string_view name = entry.substr(0, entry.find('='));
    if (name == "KP_PROGRESS_DELAY_MS") continue;  // kptrace's, not the injector's
    bool known = false;
    const char* closest = nullptr;
    size_t best = 4;  // suggest only names within 3 edits
    for (const char* k : kKnownVariables) {
      if (name == k) {
        known = true;
        break;
      }
      size_t d = EditDistance(name, k);
      if (d < best) {
        best = d;
        closest = k;
      }
    }
    if (known) continue;
    std::string w = Printable(name) + " is not a kp variable";
    if (closest != nullptr) w += std::string(" (did you mean ") + closest + "?)";
    w += "; it is ignored";
    warnings.push_back(std::move(w));
  }
  return warnings;
}

CapturePlan CapturePlanOf(const Config& c) {
  CapturePlan plan;
  plan.delay_ns = static_cast<uint64_t>(c.delay_s * 1e9);
  plan.duration_ns = static_cast<uint64_t>(c.duration_s * 1e9);
  plan.range_end = c.capture_range_end;
  plan.max_windows = c.capture_max_windows;
  plan.control_signal = c.capture_signal != 0 ? c.capture_signal : DefaultCaptureSignal();
  if (c.capture_schedule_set) {
    plan.trigger = CaptureTrigger::kSchedule;
    plan.schedule = c.capture_schedule;
    plan.max_windows = 0;
  } else if (!c.capture_range.empty()) {
    plan.trigger = CaptureTrigger::kNvtxRange;
    plan.range = c.capture_range;
  } else if (c.capture_trigger == CaptureTrigger::kSignal) {
    plan.trigger = CaptureTrigger::kSignal;
    plan.max_windows = 0;
  } else if (c.capture_trigger == CaptureTrigger::kCudaProfilerApi) {
    plan.trigger = CaptureTrigger::kCudaProfilerApi;
  } else if (plan.delay_ns != 0 || plan.duration_ns != 0) {
    plan.trigger = CaptureTrigger::kTime;
    plan.max_windows = 1;
  }
  return plan;
}

}  // namespace kp
