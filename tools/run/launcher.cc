#include "tools/run/launcher.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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
    {"--api", nullptr, "KP_API", "launch | all | none"},
    {"--metrics", nullptr, "KP_METRICS", "CUPTI metric names, comma separated, or sol"},
    {"--metrics-ranges", nullptr, "KP_METRICS_RANGES", "NVTX ranges to measure (globs)"},
    {"--metrics-mode", nullptr, "KP_METRICS_MODE", "range | kernel"},
    {"--metrics-cache", nullptr, "KP_METRICS_CACHE", "pass | range | none"},
    {"--metrics-skip", nullptr, "KP_METRICS_SKIP", "warm-up occurrences per range not measured"},
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
    std::fprintf(out, "  %-22s %-18s %s\n", (names + " V").c_str(), f.variable, f.help);
  }
  std::fputs(
      "  --lib PATH             libkpinject.so to use (default: <kptrace dir>/../lib)\n"
      "  --preload              also LD_PRELOAD it (kp then loads into every child process at "
      "start)\n"
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

  std::vector<std::pair<std::string, std::string>> env = plan.env;
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
  struct sigaction ignore = {}, old_int = {}, old_quit = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(child, &status, 0);
  } while (r < 0 && errno == EINTR);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  if (r < 0) {
    std::fprintf(stderr, "kptrace run: waitpid failed: %s\n", std::strerror(errno));
    return 1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace cli
}  // namespace kp
