// run_command.cc: `kptrace run [flags] [--] CMD [ARGS...]`: each flag sets one KP_* variable
// (docs/configuration.md) for the program, which tools/run/launcher.h runs under libkpinject.
#include "tools/kptrace/run_command.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "tools/kptrace/commands.h"

namespace kp {
namespace {

struct FlagVariable {
  const char* long_name;
  const char* short_name;  // or nullptr
  const char* variable;
  const char* help;
};

const FlagVariable kFlags[] = {
    {"--output", "-o", "KP_OUTPUT", "trace path pattern (%p pid, %h host, %r rank, %t time)"},
    {"--activities", nullptr, "KP_ACTIVITIES",
     "kernel,memcpy,memset,api,nvtx,sync,graph,overhead | default | all | -name"},
    {"--api", nullptr, "KP_API", "launch | launch-runtime | launch-activity | all | none"},
    {"--metrics", nullptr, "KP_METRICS", "CUPTI metric names, comma separated, or sol"},
    {"--metrics-ranges", nullptr, "KP_METRICS_RANGES", "NVTX ranges to measure (globs)"},
    {"--metrics-mode", nullptr, "KP_METRICS_MODE", "range | kernel"},
    {"--metrics-cache", nullptr, "KP_METRICS_CACHE", "pass | range | none"},
    {"--metrics-l2-flush", nullptr, "KP_METRICS_L2_FLUSH", "driver | sweep"},
    {"--metrics-skip", nullptr, "KP_METRICS_SKIP", "warm-up occurrences per range not measured"},
    {"--metrics-kernels", nullptr, "KP_METRICS_KERNELS", "kernel mode: regex:RE | exact name"},
    {"--metrics-launch-skip", nullptr, "KP_METRICS_LAUNCH_SKIP", "selected launches not measured"},
    {"--metrics-launch-count", nullptr, "KP_METRICS_LAUNCH_COUNT", "selected launches measured"},
    {"--metrics-launch-skip-before-match", nullptr, "KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH",
     "launches passed before the filter"},
    {"--metrics-launch-scope", nullptr, "KP_METRICS_LAUNCH_SCOPE", "global | per-name"},
    {"--metrics-nvtx-include", nullptr, "KP_METRICS_NVTX_INCLUDE",
     "measure kernels inside these NVTX ranges (globs)"},
    {"--pm-sampling", nullptr, "KP_PM_SAMPLING", "off | gpu | PM-sampling counter names"},
    {"--pm-interval-us", nullptr, "KP_PM_INTERVAL_US", "PM sampling interval, 100..1000000 us"},
    {"--flush-ms", nullptr, "KP_FLUSH_MS", "ms between chunk writes"},
    {"--buffer-mb", nullptr, "KP_BUFFER_MB", "cap on CUPTI buffer memory"},
    {"--compression", nullptr, "KP_COMPRESSION", "zstd[:level] | none"},
    {"--delay", nullptr, "KP_DELAY", "seconds before capture starts"},
    {"--duration", nullptr, "KP_DURATION", "seconds of capture"},
    {"--capture-range", nullptr, "KP_CAPTURE_RANGE", "NVTX range that is the capture window"},
    {"--capture-range-end", nullptr, "KP_CAPTURE_RANGE_END", "stop | repeat[:N] | none"},
    {"--capture-schedule", nullptr, "KP_CAPTURE_SCHEDULE",
     "RANGE:wait,warmup,active[,repeat[,skip_first]] (torch.profiler.schedule)"},
    {"--capture", nullptr, "KP_CAPTURE", "cudaProfilerApi | signal (kptrace start|stop PID)"},
    {"--capture-signal", nullptr, "KP_CAPTURE_SIGNAL", "signal for kptrace start|stop"},
    {"--log", nullptr, "KP_LOG", "quiet | info | debug"},
    {"--pc-sampling", nullptr, "KP_PC_SAMPLING",
     "stall | off: warp-stall reasons per kernel (alone: stall)"},
    {"--pc-sampling-period", nullptr, "KP_PC_SAMPLING_PERIOD", "5..31: a sample every 2^N cycles"},
};

void PrintUsage(FILE* out) {
  std::fputs("usage: kptrace run [flags] [--] CMD [ARGS...]\n\nflags:\n", out);
  for (const FlagVariable& f : kFlags) {
    std::string names = f.short_name != nullptr ? std::string(f.short_name) + ", " + f.long_name
                                                : std::string("    ") + f.long_name;
    std::string left = names + " V";
    if (left.size() > 22 || std::strlen(f.variable) > 18) {
      // Too long for the columns: the flag on a line of its own, then variable and help.
      std::fprintf(out, "  %s\n  %-22s %s  %s\n", left.c_str(), "", f.variable, f.help);
    } else {
      std::fprintf(out, "  %-22s %-18s %s\n", left.c_str(), f.variable, f.help);
    }
  }
  std::fputs(
      "  --lib PATH             libkpinject.so to use (default: <kptrace dir>/../lib)\n"
      "  --preload              also LD_PRELOAD it (kp then loads into every child process at "
      "start)\n"
      "  --force                replace the trace (and its run) an earlier run left at -o\n"
      "  -h, --help             this help\n",
      out);
}

int Fail(const Status& status) {
  std::fprintf(stderr, "kptrace run: %s\n", status.message().c_str());
  return 1;
}

}  // namespace

StatusOr<LaunchPlan> ParseLaunchArgs(int argc, char** argv) {
  LaunchPlan plan;
  int i = 0;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the command starts here (nsys style)
    if (arg == "-h" || arg == "--help") {
      plan.help = true;
      return plan;
    }
    if (arg == "--preload") {
      plan.preload = true;
      continue;
    }
    if (arg == "--force") {
      plan.force = true;
      continue;
    }
    if (arg == "--pc-sampling") {  // the bare flag turns it on; --pc-sampling=off is explicit
      plan.env.emplace_back("KP_PC_SAMPLING", "stall");
      continue;
    }
    std::string name = arg, value;
    bool inline_value = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    const char* variable = nullptr;
    bool is_lib = name == "--lib";
    for (const FlagVariable& f : kFlags) {
      if (name == f.long_name || (f.short_name != nullptr && name == f.short_name)) {
        variable = f.variable;
      }
    }
    if (variable == nullptr && !is_lib) {
      return Status::Error("unknown flag '" + arg + "'");
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        return Status::Error("flag '" + name + "' needs a value");
      }
      value = argv[++i];
    }
    if (is_lib) {
      plan.library = value;
    } else {
      plan.env.emplace_back(variable, value);
    }
  }
  for (; i < argc; ++i) plan.command.emplace_back(argv[i]);
  if (plan.command.empty()) {
    return Status::Error("no command to run");
  }
  return plan;
}

namespace cli {

int RunLauncher(int argc, char** argv) {
  StatusOr<LaunchPlan> parsed = ParseLaunchArgs(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "kptrace run: %s\n\n", parsed.status().message().c_str());
    PrintUsage(stderr);
    return 2;
  }
  const LaunchPlan& plan = parsed.value();
  if (plan.help) {
    PrintUsage(stdout);
    return 0;
  }
  const StatusOr<std::string> library = ResolveInjectionLibrary(plan);
  if (!library.ok()) return Fail(library.status());
  const StatusOr<std::string> root = ClaimFixedOutput(plan);
  if (!root.ok()) return Fail(root.status());
  const StatusOr<int> exit_code = RunProfiled(plan, library.value());
  if (!exit_code.ok()) return Fail(exit_code.status());
  if (!root.value().empty()) {
    const std::string files = DescribeRunFiles(root.value());
    if (!files.empty()) std::fprintf(stderr, "kptrace run: %s\n", files.c_str());
  }
  return exit_code.value();
}

}  // namespace cli
}  // namespace kp
