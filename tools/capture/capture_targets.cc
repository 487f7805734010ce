#include "tools/capture/capture_targets.h"

#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/capture_signal_name.h"

namespace kp {
namespace {

std::map<std::string, std::string> ReadEnviron(int pid, bool* readable) {
  std::map<std::string, std::string> env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  *readable = in.good();
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && entry.compare(0, 3, "KP_") == 0) {
      env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  return env;
}

int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// `root` first, then every descendant.
std::vector<int> ProcessTree(int root) {
  std::multimap<int, int> children;
  if (DIR* dir = opendir("/proc")) {
    while (dirent* e = readdir(dir)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || pid <= 0) continue;
      children.emplace(ParentOf(static_cast<int>(pid)), static_cast<int>(pid));
    }
    closedir(dir);
  }
  std::vector<int> tree{root};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto range = children.equal_range(tree[i]);
    for (auto it = range.first; it != range.second; ++it) tree.push_back(it->second);
  }
  return tree;
}

}  // namespace

bool ProcessCatchesSignal(int pid, int signo) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 7, "SigCgt:") != 0) continue;
    const unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return signo >= 1 && signo <= 64 && ((mask >> (signo - 1)) & 1u) != 0;
  }
  return false;
}

StatusOr<std::vector<CaptureTarget>> FindCaptureTargets(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return Status::Error("no process " + std::to_string(pid));
  }
  std::vector<CaptureTarget> targets;
  std::string why_not;
  for (int p : ProcessTree(pid)) {
    bool readable = false;
    std::map<std::string, std::string> env = ReadEnviron(p, &readable);
    if (!readable) {
      if (p == pid) why_not = "cannot read /proc/" + std::to_string(p) + "/environ (another user?)";
      continue;
    }
    const auto capture = env.find("KP_CAPTURE");
    if (capture == env.end() || (capture->second != "signal" && capture->second != "on-demand")) {
      if (p == pid && why_not.empty()) {
        why_not = "process " + std::to_string(p) +
                  " was not started with KP_CAPTURE=signal (kptrace run --capture signal)";
      }
      continue;
    }
    const auto named = env.find("KP_CAPTURE_SIGNAL");
    const int signo =
        named != env.end() ? ParseCaptureSignal(named->second) : DefaultCaptureSignal();
    if (signo == 0) continue;  // kp itself refused that value and is off
    if (!ProcessCatchesSignal(p, signo)) {
      // kp not loaded yet (no CUDA call so far) or not at all: the signal would end it.
      if (p == pid) {
        why_not = "process " + std::to_string(p) + " does not catch signal " +
                  std::to_string(signo) + " yet: kp loads at the first CUDA call; nothing was sent";
      }
      continue;
    }
    targets.push_back(CaptureTarget{p, signo});
  }
  if (targets.empty()) {
    return Status::Error((why_not.empty() ? "no process under " + std::to_string(pid) +
                                                " is traced by kp with KP_CAPTURE=signal"
                                          : why_not) +
                         "; nothing was sent");
  }
  return targets;
}

}  // namespace kp
