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
#include "tools/run/run_inputs.h"

namespace kp {

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

Status RemoveEarlierRun(const std::string& root) {
  std::vector<std::string> files = {root};
  RunManifest manifest;
  const bool have_manifest = ReadRunManifest(root, &manifest);
  for (const RunProcess& p : manifest.processes) {
    if (p.file != root) files.push_back(p.file);
  }
  for (const std::string& f : files) {
    if (ProbeTraceFile(f) == TraceFileState::kHeld) {
      return Status::Error(
          f + " is being written by a running process; wait for it to end or choose another -o");
    }
  }
  for (const std::string& f : files) {
    if (::unlink(f.c_str()) != 0 && errno != ENOENT) {
      return Status::Error("cannot remove " + f + ": " + std::strerror(errno));
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
      return Status::Error("cannot remove " + manifest.dir + ": " + std::strerror(errno));
    }
  }
  return Status();
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

}  // namespace

std::string DescribeRunFiles(const std::string& root) {
  RunManifest manifest;
  if (!ReadRunManifest(root, &manifest)) {
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0) {
      return "no process created a CUDA context: no trace written to " + root;
    }
    return "";
  }
  size_t files = 0;
  for (const RunProcess& p : manifest.processes) files += p.file_exists ? 1 : 0;
  if (files <= 1) return "";
  return std::to_string(files) + " processes traced: " + root + " and " +
         std::to_string(files - 1) + " more files listed in " + manifest.dir + "/ (give " + root +
         " to info, summary or convert: they read the whole run)";
}

StatusOr<std::string> ResolveInjectionLibrary(const LaunchPlan& plan) {
  const std::string library = plan.library.empty() ? DefaultInjectionLibrary() : plan.library;
  char resolved[PATH_MAX];
  if (realpath(library.c_str(), resolved) == nullptr) {
    return Status::Error("cannot find the injection library '" + library +
                         "': " + std::strerror(errno) + " (build/install kp, or pass --lib PATH)");
  }
  return std::string(resolved);
}

StatusOr<std::string> ClaimFixedOutput(const LaunchPlan& plan) {
  // A fixed -o path left by an earlier run is kept unless --force (like nsys): replacing it
  // silently would lose that run, and writing elsewhere would surprise whoever reads -o next.
  const std::string requested = RequestedOutput(plan);
  const std::string root = IsFixedOutputPath(requested) ? UnescapeFixedPath(requested) : "";
  if (root.empty()) return root;
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) return root;
  if (!plan.force) {
    return Status::Error(root +
                         " exists (an earlier run's trace); pass --force to replace it and its "
                         "run, or choose another -o");
  }
  const Status removed = RemoveEarlierRun(root).WithContext("--force");
  if (!removed.ok()) return removed;
  return root;
}

StatusOr<int> RunProfiled(const LaunchPlan& plan, const std::string& library) {
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

  std::vector<std::string> command = plan.command;
  std::vector<char*> child_argv;
  for (std::string& a : command) child_argv.push_back(a.data());
  child_argv.push_back(nullptr);

  std::fflush(nullptr);
  pid_t child = fork();
  if (child < 0) return Status::Error(std::string("fork failed: ") + std::strerror(errno));
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
  if (r < 0) return Status::Error(std::string("waitpid failed: ") + std::strerror(errno));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace kp
