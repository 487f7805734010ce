#include "tools/run/launcher.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "common/run_files.h"
#include "tools/kptrace/commands.h"
#include "tools/run/run_inputs.h"

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
    {"--api", nullptr, "KP_API", "launch | all | none"},
    {"--metrics", nullptr, "KP_METRICS", "CUPTI metric names, comma separated, or sol"},
    {"--metrics-ranges", nullptr, "KP_METRICS_RANGES", "NVTX ranges to measure (globs)"},
    {"--metrics-mode", nullptr, "KP_METRICS_MODE", "range | kernel"},
    {"--metrics-cache", nullptr, "KP_METRICS_CACHE", "pass | range | none"},
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
    {"--pm-interval-us", nullptr, "KP_PM_INTERVAL_US", "PM sampling interval, 10..1000000 us"},
    {"--flush-ms", nullptr, "KP_FLUSH_MS", "ms between chunk writes"},
    {"--buffer-mb", nullptr, "KP_BUFFER_MB", "cap on CUPTI buffer memory"},
    {"--compression", nullptr, "KP_COMPRESSION", "zstd[:level] | none"},
    {"--delay", nullptr, "KP_DELAY", "seconds before capture starts"},
    {"--duration", nullptr, "KP_DURATION", "seconds of capture"},
    {"--capture-range", nullptr, "KP_CAPTURE_RANGE", "NVTX range that starts capture"},
    {"--log", nullptr, "KP_LOG", "quiet | info | debug"},
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

}  // namespace

bool ParseLaunchArgs(int argc, char** argv, LaunchPlan* plan, std::string* error) {
  int i = 0;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the command starts here (nsys style)
    if (arg == "-h" || arg == "--help") {
      plan->help = true;
      return true;
    }
    if (arg == "--preload") {
      plan->preload = true;
      continue;
    }
    if (arg == "--force") {
      plan->force = true;
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
      *error = "kptrace run: unknown flag '" + arg + "'";
      return false;
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        *error = "kptrace run: flag '" + name + "' needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (is_lib) {
      plan->library = value;
    } else {
      plan->env.emplace_back(variable, value);
    }
  }
  for (; i < argc; ++i) plan->command.emplace_back(argv[i]);
  if (plan->command.empty()) {
    *error = "kptrace run: no command to run";
    return false;
  }
  return true;
}

std::string DefaultInjectionLibrary() {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "libkpinject.so";
  exe[n] = '\0';
  std::string dir(exe);
  size_t slash = dir.rfind('/');
  dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  return dir + "/../lib/libkpinject.so";
}

std::string RequestedOutput(const LaunchPlan& plan) {
  std::string out;
  for (const auto& [k, v] : plan.env) {
    if (k == "KP_OUTPUT") out = v;
  }
  return out;
}

bool IsFixedOutputPath(const std::string& pattern) {
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (pattern[i + 1] != '%') return false;
    ++i;
  }
  return true;
}

// "%%" -> "%" (the only escape a fixed path can hold).
std::string UnescapeFixedPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    out += pattern[i];
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == '%') ++i;
  }
  return out;
}

bool RemoveEarlierRun(const std::string& root, std::string* error) {
  std::vector<std::string> files = {root};
  RunManifest manifest;
  const bool have_manifest = ReadRunManifest(root, &manifest);
  for (const RunProcess& p : manifest.processes) {
    if (p.file != root) files.push_back(p.file);
  }
  for (const std::string& f : files) {
    if (ProbeTraceFile(f) == TraceFileState::kHeld) {
      *error =
          f + " is being written by a running process; wait for it to end or choose another -o";
      return false;
    }
  }
  for (const std::string& f : files) {
    if (::unlink(f.c_str()) != 0 && errno != ENOENT) {
      *error = "cannot remove " + f + ": " + std::strerror(errno);
      return false;
    }
  }
  if (have_manifest) {
    if (DIR* d = ::opendir(manifest.dir.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") ::unlink((manifest.dir + "/" + name).c_str());
      }
      ::closedir(d);
    }
    if (::rmdir(manifest.dir.c_str()) != 0) {
      *error = "cannot remove " + manifest.dir + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

namespace {

pid_t g_child = 0;

// SIGTERM and SIGHUP sent to kptrace itself (a batch system ending the job, a closed terminal)
// go on to the program, which then ends the way it chooses, and its trace with it.
void ForwardSignal(int signo) {
  if (g_child > 0) ::kill(g_child, signo);
}

std::string RunId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string id = "kprun-";
  for (const char* c = host; *c != '\0' && id.size() < 70; ++c) {
    const bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' || *c == '_';
    id += ok ? *c : '-';
  }
  return id + "-" + std::to_string(getpid()) + "-" + std::to_string(time(nullptr));
}

// After the program: which trace files the run left, in one or two lines.
void ReportRun(const std::string& root) {
  RunManifest manifest;
  if (!ReadRunManifest(root, &manifest)) {
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0) {
      std::fprintf(stderr,
                   "kptrace run: no process created a CUDA context: no trace written to %s\n",
                   root.c_str());
    }
    return;
  }
  size_t files = 0;
  for (const RunProcess& p : manifest.processes) files += p.file_exists ? 1 : 0;
  if (files > 1) {
    std::fprintf(stderr,
                 "kptrace run: %zu processes traced: %s and %zu more files listed in %s/ (give "
                 "%s to info, summary or convert: they read the whole run)\n",
                 files, root.c_str(), files - 1, manifest.dir.c_str(), root.c_str());
  }
}

}  // namespace

namespace cli {

int RunLauncher(int argc, char** argv) {
  LaunchPlan plan;
  std::string error;
  if (!ParseLaunchArgs(argc, argv, &plan, &error)) {
    std::fprintf(stderr, "%s\n\n", error.c_str());
    PrintUsage(stderr);
    return 2;
  }
  if (plan.help) {
    PrintUsage(stdout);
    return 0;
  }
  std::string library = plan.library.empty() ? DefaultInjectionLibrary() : plan.library;
  char resolved[PATH_MAX];
  if (realpath(library.c_str(), resolved) == nullptr) {
    std::fprintf(stderr,
                 "kptrace run: cannot find the injection library '%s': %s (build/install kp, or "
                 "pass --lib PATH)\n",
                 library.c_str(), std::strerror(errno));
    return 1;
  }
  library = resolved;

  // A fixed -o path left by an earlier run is kept unless --force (like nsys): replacing it
  // silently would lose that run, and writing elsewhere would surprise whoever reads -o next.
  const std::string requested = RequestedOutput(plan);
  const std::string root = IsFixedOutputPath(requested) ? UnescapeFixedPath(requested) : "";
  if (!root.empty()) {
    struct stat st {};
    if (::stat(root.c_str(), &st) == 0) {
      if (!plan.force) {
        std::fprintf(stderr,
                     "kptrace run: %s exists (an earlier run's trace); pass --force to replace it "
                     "and its run, or choose another -o\n",
                     root.c_str());
        return 1;
      }
      std::string remove_error;
      if (!RemoveEarlierRun(root, &remove_error)) {
        std::fprintf(stderr, "kptrace run: --force: %s\n", remove_error.c_str());
        return 1;
      }
    }
  }

  std::vector<std::pair<std::string, std::string>> env = plan.env;
  // Every process of this run carries the same id, so a process that starts after the root's
  // writer ended still joins the run instead of starting a numbered root of its own.
  const char* user_run_id = std::getenv("KP_RUN_ID");
  if (user_run_id == nullptr || user_run_id[0] == '\0') env.emplace_back("KP_RUN_ID", RunId());
  env.emplace_back("CUDA_INJECTION64_PATH", library);
  env.emplace_back("NVTX_INJECTION64_PATH", library);
  if (plan.preload) {
    const char* old = std::getenv("LD_PRELOAD");
    env.emplace_back("LD_PRELOAD", old != nullptr && *old != '\0' ? library + ":" + old : library);
  }

  std::vector<char*> child_argv;
  for (std::string& a : plan.command) child_argv.push_back(a.data());
  child_argv.push_back(nullptr);

  std::fflush(nullptr);
  pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "kptrace run: fork failed: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execvp(child_argv[0], child_argv.data());
    std::fprintf(stderr, "kptrace run: cannot run '%s': %s\n", child_argv[0], std::strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  // The terminal sends SIGINT/SIGQUIT to the whole foreground group: the child gets them and
  // decides; we wait for it and report its status.
  struct sigaction ignore = {}, old_int = {}, old_quit = {}, forward = {}, old_term = {},
                   old_hup = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  g_child = child;
  forward.sa_handler = &ForwardSignal;
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &forward, &old_term);
  sigaction(SIGHUP, &forward, &old_hup);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(child, &status, 0);
  } while (r < 0 && errno == EINTR);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  g_child = 0;
  if (r < 0) {
    std::fprintf(stderr, "kptrace run: waitpid failed: %s\n", std::strerror(errno));
    return 1;
  }
  if (!root.empty()) ReportRun(root);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace cli
}  // namespace kp
