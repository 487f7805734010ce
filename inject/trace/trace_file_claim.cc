#include "inject/trace/trace_file_claim.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <vector>

#include "common/frame.h"
#include "common/run_files.h"
#include "inject/trace/write_error_advice.h"

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

Status CreateError(const std::string& path, int err) {
  return Status::Error("cannot create trace " + path + ": " + std::strerror(err) + " (" +
                       WriteErrorFix(err) + ")");
}

}  // namespace

namespace {

// Protobuf wire scanning, just enough to find one length-delimited field.
bool ReadVarint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    const uint8_t b = *(*p)++;
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// The bytes of length-delimited field `field` in [p, end), or false.
bool FindBytesField(const uint8_t* p, const uint8_t* end, uint32_t field, const uint8_t** out,
                    size_t* size) {
  while (p < end) {
    uint64_t key = 0, value = 0;
    if (!ReadVarint(&p, end, &key)) return false;
    switch (key & 7) {
      case 0:
        if (!ReadVarint(&p, end, &value)) return false;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      case 2:
        if (!ReadVarint(&p, end, &value) || value > static_cast<uint64_t>(end - p)) return false;
        if ((key >> 3) == field) {
          *out = p;
          *size = static_cast<size_t>(value);
          return true;
        }
        p += value;
        break;
      default:
        return false;
    }
  }
  return false;
}

}  // namespace

std::string RootRunId(const std::string& root_path) {
  // Chunk 0 starts right after the file magic and holds the Header (Chunk field 4), whose
  // run_id is field 18.
  constexpr uint32_t kChunkHeaderField = 4, kHeaderRunIdField = 18;
  const int fd = ::open(root_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return "";
  std::string run_id;
  uint8_t head[kFileMagicSize + kFrameHeaderSize];
  FrameHeader frame;
  if (::pread(fd, head, sizeof head, 0) == static_cast<ssize_t>(sizeof head) &&
      std::memcmp(head, kFileMagic, kFileMagicSize) == 0 &&
      DecodeFrameHeader(head + kFileMagicSize, &frame) == FrameHeaderStatus::kOk &&
      frame.stored_size <= (1u << 20) && frame.raw_size <= (16u << 20)) {
    std::vector<uint8_t> stored(frame.stored_size);
    if (::pread(fd, stored.data(), stored.size(), sizeof head) ==
            static_cast<ssize_t>(stored.size()) &&
        Crc32c(stored.data(), stored.size()) == frame.payload_crc) {
      std::vector<uint8_t> raw;
      bool ok = true;
      if ((frame.flags & kFrameFlagZstd) != 0) {
        raw.resize(frame.raw_size);
        const size_t n = ZSTD_decompress(raw.data(), raw.size(), stored.data(), stored.size());
        ok = !ZSTD_isError(n) && n == raw.size();
      } else {
        raw.swap(stored);
      }
      const uint8_t* header = nullptr;
      const uint8_t* id = nullptr;
      size_t header_size = 0, id_size = 0;
      if (ok &&
          FindBytesField(raw.data(), raw.data() + raw.size(), kChunkHeaderField, &header,
                         &header_size) &&
          FindBytesField(header, header + header_size, kHeaderRunIdField, &id, &id_size)) {
        run_id.assign(reinterpret_cast<const char*>(id), id_size);
      }
    }
  }
  ::close(fd);
  return run_id;
}

StatusOr<ClaimedFile> ClaimTraceFile(const ClaimRequest& request) {
  ClaimedFile claimed;
  for (int n = 1; n <= kMaxRoots; ++n) {
    const std::string root = n == 1 ? request.requested : NumberedRootPath(request.requested, n);
    int fd = CreateExclusive(root);
    if (fd >= 0) {
      claimed.fd = fd;
      claimed.path = root;
      claimed.root = root;
      claimed.is_root = true;
      if (n > 1) {
        claimed.note = "kp: " + request.requested +
                       " is from an earlier run and is kept; this run writes " + root;
      }
      return claimed;
    }
    if (errno != EEXIST) {
      return CreateError(root, errno);
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
        claimed.fd = fd;
        claimed.path = member;
        claimed.root = root;
        claimed.is_root = false;
        claimed.note = "kp: " + root + " is written by another process of this run; this " +
                       "process writes " + member;
        return claimed;
      }
      if (errno != EEXIST) {
        return CreateError(member, errno);
      }
    }
    return Status::Error("cannot create trace " + MemberPath(root, tag) + ": " +
                         std::to_string(kMaxMembers) +
                         " files of that name exist already (remove old traces or choose "
                         "another KP_OUTPUT)");
  }
  return Status::Error("cannot create trace " + request.requested + ": it and " +
                       std::to_string(kMaxRoots - 1) +
                       " numbered names exist already (remove old traces or choose another "
                       "KP_OUTPUT)");
}

}  // namespace kp
