#include "inject/trace/trace_file_claim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "common/run_files.h"

namespace kp {
namespace {

constexpr int kMaxRoots = 1000;   // t.kptrace, t.2.kptrace, ... t.1000.kptrace
constexpr int kMaxMembers = 100;  // a pid reused on the same host, run after run

// Creates `path` exclusively and takes the writer's lock. Returns the fd, or -1 with errno.
int CreateExclusive(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return -1;
  // Nobody else can hold a lock on a file we just created; on a file system without locks the
  // file is still ours alone (O_EXCL), only "held" cannot be seen by others.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
  }
  return fd;
}

bool EmptyFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

std::string CreateError(const std::string& path, int err) {
  return "cannot create trace " + path + ": " + std::strerror(err);
}

}  // namespace

std::string RootRunId(const std::string& root_path) {
  const std::string dir = ManifestDirFor(root_path);
  const std::string want_file = "\"file\":\"" + BaseName(root_path) + "\"";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return "";
  std::string run_id;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0 || name[0] == '.') {
      continue;
    }
    const int fd = ::open((dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[8192];
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) continue;
    const std::string text(buf, static_cast<size_t>(n));
    if (text.find("\"root\":true") == std::string::npos ||
        text.find(want_file) == std::string::npos) {
      continue;
    }
    // Run ids are [A-Za-z0-9._:-] (checked when read from the environment): no escapes inside.
    const std::string key = "\"run_id\":\"";
    const size_t at = text.find(key);
    if (at == std::string::npos) continue;
    const size_t end = text.find('"', at + key.size());
    if (end != std::string::npos) run_id = text.substr(at + key.size(), end - at - key.size());
    break;
  }
  ::closedir(d);
  return run_id;
}

bool ClaimTraceFile(const ClaimRequest& request, ClaimedFile* claimed, std::string* error) {
  for (int n = 1; n <= kMaxRoots; ++n) {
    const std::string root = n == 1 ? request.requested : NumberedRootPath(request.requested, n);
    int fd = CreateExclusive(root);
    if (fd >= 0) {
      claimed->fd = fd;
      claimed->path = root;
      claimed->root = root;
      claimed->is_root = true;
      if (n > 1) {
        claimed->note = "kp: " + request.requested +
                        " is from an earlier run and is kept; this run writes " + root;
      }
      return true;
    }
    if (errno != EEXIST) {
      *error = CreateError(root, errno);
      return false;
    }
    // The root exists. Join its run when it is being written now (held, or created so recently
    // that its writer has not written the magic yet) or belongs to our run by id.
    const TraceFileState state = ProbeTraceFile(root);
    const bool join = state == TraceFileState::kHeld || EmptyFile(root) ||
                      (!request.run_id.empty() && RootRunId(root) == request.run_id);
    if (!join) continue;
    const std::string tag = MemberTag(request.rank, request.host, request.pid);
    for (int k = 1; k <= kMaxMembers; ++k) {
      const std::string member = MemberPath(root, k == 1 ? tag : tag + "-" + std::to_string(k));
      fd = CreateExclusive(member);
      if (fd >= 0) {
        claimed->fd = fd;
        claimed->path = member;
        claimed->root = root;
        claimed->is_root = false;
        claimed->note = "kp: " + root + " is written by another process of this run; this " +
                        "process writes " + member;
        return true;
      }
      if (errno != EEXIST) {
        *error = CreateError(member, errno);
        return false;
      }
    }
    *error = "cannot create trace " + MemberPath(root, tag) + ": " + std::to_string(kMaxMembers) +
             " files of that name exist already";
    return false;
  }
  *error = "cannot create trace " + request.requested + ": it and " +
           std::to_string(kMaxRoots - 1) +
           " numbered names exist already (remove old traces or choose another KP_OUTPUT)";
  return false;
}

}  // namespace kp
