// metrics_command.cc: `kptrace metrics chips|list|check`, offline metric discovery and
// validation through the Profiler Host API (tools/metrics/metric_catalog.h; no GPU needed).
// `check` uses the injector's own validator (common/metric_plan.h), so it prints exactly what
// KP_METRICS would report.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/metric_plan.h"
#include "tools/kptrace/commands.h"
#include "tools/metrics/metric_catalog.h"

namespace kp::cli {
namespace {

constexpr char kUsage[] =
    "usage: kptrace metrics chips\n"
    "       kptrace metrics list --chip CHIP [--filter SUBSTR] [--type counter|ratio|throughput]\n"
    "                            [--mode range|pm] [--describe]\n"
    "       kptrace metrics check --chip CHIP [--mode range|pm] NAME[,NAME...]|sol ...\n"
    "\n"
    "Offline (no GPU): CHIP is the GPU's chip name, e.g. GH100 for H100/H200 (see 'chips').\n"
    "--mode range (default) is the range profiler used by KP_METRICS; pm is PM sampling.\n"
    "'check' validates every name, then prints the passes the set needs and each metric's own.\n";

int Usage(const char* problem) {
  if (problem) std::fprintf(stderr, "kptrace metrics: %s\n\n", problem);
  std::fputs(kUsage, problem ? stderr : stdout);
  return problem ? 2 : 0;
}

struct Args {
  std::string sub, chip, filter, mode = "range", type;
  bool describe = false;
  std::vector<std::string> names;
};

// Accepts "--flag VALUE" and "--flag=VALUE". Returns false with *problem on a usage error.
bool Parse(int argc, char** argv, Args* a, std::string* problem) {
  a->sub = argv[0];
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    auto flag = [&](const char* name, std::string* out) {
      std::string n = name;
      if (arg == n) {
        if (i + 1 >= argc) {
          *problem = n + " needs a value";
          return true;
        }
        *out = argv[++i];
        return true;
      }
      if (arg.rfind(n + "=", 0) == 0) {
        *out = arg.substr(n.size() + 1);
        return true;
      }
      return false;
    };
    if (flag("--chip", &a->chip) || flag("--filter", &a->filter) || flag("--mode", &a->mode) ||
        flag("--type", &a->type)) {
      if (!problem->empty()) return false;
      continue;
    }
    if (arg == "--describe") {
      a->describe = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      *problem = "unknown flag '" + arg + "'";
      return false;
    } else {
      a->names.push_back(arg);
    }
  }
  if (a->mode != "range" && a->mode != "pm") {
    *problem = "--mode must be range or pm, not '" + a->mode + "'";
    return false;
  }
  if (!a->type.empty() && a->type != "counter" && a->type != "ratio" && a->type != "throughput") {
    *problem = "--type must be counter, ratio or throughput, not '" + a->type + "'";
    return false;
  }
  return true;
}

CUpti_ProfilerType ProfilerOf(const Args& a) {
  return a.mode == "pm" ? CUPTI_PROFILER_TYPE_PM_SAMPLING : CUPTI_PROFILER_TYPE_RANGE_PROFILER;
}

int RunChips() {
  const StatusOr<std::vector<std::string>> chips = SupportedChips();
  if (!chips.ok() || chips.value().empty()) {
    std::fprintf(stderr, "kptrace: %s\n",
                 chips.ok() ? "no chips reported" : chips.status().message().c_str());
    return 1;
  }
  for (const auto& c : chips.value()) std::printf("%s\n", c.c_str());
  return 0;
}

int RunList(const Args& a) {
  MetricQuery q;
  q.chip = a.chip;
  q.profiler = ProfilerOf(a);
  q.filter = a.filter;
  q.describe = a.describe;
  if (a.type == "counter") q.type = CUPTI_METRIC_TYPE_COUNTER;
  if (a.type == "ratio") q.type = CUPTI_METRIC_TYPE_RATIO;
  if (a.type == "throughput") q.type = CUPTI_METRIC_TYPE_THROUGHPUT;
  const StatusOr<std::vector<MetricDescription>> listed = ListMetrics(q);
  if (!listed.ok()) {
    std::fprintf(stderr, "kptrace: %s\n", listed.status().message().c_str());
    return 1;
  }
  const std::vector<MetricDescription>& metrics = listed.value();
  for (const auto& m : metrics) {
    if (!a.describe) {
      std::printf("%s\n", m.name.c_str());
      continue;
    }
    std::printf("%s  [%s, unit %s%s%s]\n  %s\n  suffixes:", m.name.c_str(), MetricTypeName(m.type),
                m.dim_unit.empty() ? "-" : m.dim_unit.c_str(),
                m.hw_unit.empty() ? "" : ", hw unit ", m.hw_unit.c_str(), m.description.c_str());
    for (const auto& s : m.submetrics) std::printf(" .%s", s.c_str());
    std::printf("\n");
  }
  if (metrics.empty())
    std::fprintf(stderr, "kptrace: no %s metric on %s matches '%s'\n",
                 a.type.empty() ? "base" : a.type.c_str(), a.chip.c_str(), a.filter.c_str());
  std::fprintf(stderr, "%zu base metric(s); append a suffix (--describe lists them), e.g. .sum\n",
               metrics.size());
  return 0;
}

int RunCheck(const Args& a) {
  std::vector<std::string> names = ExpandMetricList(a.names);
  if (names.empty()) return Usage("check needs metric names (or sol)");
  const StatusOr<PassCount> counted = CountPasses(a.chip, ProfilerOf(a), names);
  if (!counted.ok()) {
    std::fprintf(stderr, "kptrace: %s\n", counted.status().message().c_str());
    return 1;
  }
  const PassCount& passes = counted.value();
  std::printf("%zu metric(s) valid for %s (%s): %zu pass(es) for the set\n", names.size(),
              a.chip.c_str(), a.mode == "pm" ? "PM sampling" : "range profiler", passes.set_passes);
  size_t width = 0;
  for (const auto& n : names) width = std::max(width, n.size());
  for (size_t i = 0; i < names.size(); ++i)
    std::printf("  %-*s  %zu pass%s\n", static_cast<int>(width), names[i].c_str(),
                passes.per_metric[i], passes.per_metric[i] == 1 ? "" : "es");
  if (a.mode == "pm") {
    if (passes.set_passes > 1)
      std::printf("PM sampling needs a single-pass set: this one needs %zu\n", passes.set_passes);
  } else if (passes.set_passes > 1) {
    std::printf(
        "KP_METRICS_MODE=range: each measured range must occur %zu times for one full "
        "set (passes rotate over repeated occurrences)\nKP_METRICS_MODE=kernel: each "
        "kernel is replayed %zu times\n",
        passes.set_passes, passes.set_passes);
  } else {
    std::printf("single pass: every range occurrence (or kernel) gets the full set\n");
  }
  return 0;
}

}  // namespace

int RunMetrics(int argc, char** argv) {
  if (argc < 1) return Usage("missing subcommand (chips, list or check)");
  std::string sub = argv[0];
  if (sub == "--help" || sub == "-h" || sub == "help") return Usage(nullptr);
  Args a;
  std::string problem;
  if (!Parse(argc, argv, &a, &problem)) return Usage(problem.c_str());
  if (sub == "chips") return RunChips();
  if (sub != "list" && sub != "check") return Usage(("unknown subcommand '" + sub + "'").c_str());
  if (a.chip.empty()) return Usage("--chip is required (e.g. --chip GH100; 'chips' lists them)");
  if (sub == "list") return RunList(a);
  return RunCheck(a);
}

}  // namespace kp::cli
