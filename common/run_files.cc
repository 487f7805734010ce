#include "common/run_files.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace kp {
namespace {

constexpr const char kSuffix[] = ".kptrace";
constexpr size_t kSuffixSize = sizeof(kSuffix) - 1;

bool HasTraceSuffix(const std::string& path) {
  const std::string base = BaseName(path);
  return base.size() > kSuffixSize &&
         base.compare(base.size() - kSuffixSize, kSuffixSize, kSuffix) == 0;
}

std::string SafeHost(const std::string& host) {
  std::string out;
  for (char c : host) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
    out += keep ? c : '-';
    if (out.size() >= 64) break;
  }
  return out.empty() ? std::string("host") : out;
}

}  // namespace

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

std::string ManifestDirFor(const std::string& root_path) { return root_path + ".procs"; }

std::string NumberedRootPath(const std::string& requested, int n) {
  const std::string number = "." + std::to_string(n);
  if (!HasTraceSuffix(requested)) return requested + number;
  return requested.substr(0, requested.size() - kSuffixSize) + number + kSuffix;
}

std::string MemberPath(const std::string& root_path, const std::string& tag) {
  if (!HasTraceSuffix(root_path)) return root_path + "." + tag;
  return root_path.substr(0, root_path.size() - kSuffixSize) + "." + tag + kSuffix;
}

std::string MemberTag(int rank, const std::string& host, uint32_t pid) {
  std::string tag = rank >= 0 ? "r" + std::to_string(rank) + "." : std::string();
  return tag + SafeHost(host) + "." + std::to_string(pid);
}

std::string ManifestEntryName(const std::string& host, uint32_t pid) {
  return SafeHost(host) + "." + std::to_string(pid) + ".json";
}

TraceFileState ProbeTraceFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? TraceFileState::kMissing : TraceFileState::kUnknown;
  TraceFileState state = TraceFileState::kFree;
  // A shared lock conflicts only with the writer's exclusive one; released at once.
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    state = errno == EWOULDBLOCK ? TraceFileState::kHeld : TraceFileState::kUnknown;
  }
  ::close(fd);
  return state;
}

}  // namespace kp
