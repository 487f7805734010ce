#include "inject/trace/chunk_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>

#include "common/frame.h"
#include "common/run_files.h"
#include "inject/log/log.h"
#include "inject/trace/write_error_advice.h"

namespace kp {
namespace {

// Frames `data` (one serialized Chunk) into out[offset...]: header, then the payload, zstd-
// compressed when `ctx` is set and compression actually shrinks it. Returns the frame size.
size_t AppendFrame(ZSTD_CCtx* ctx, int level, const uint8_t* data, size_t size,
                   std::vector<uint8_t>* out, size_t offset) {
  size_t bound = ctx != nullptr ? ZSTD_compressBound(size) : size;
  if (bound < size) bound = size;
  if (out->size() < offset + kFrameHeaderSize + bound) {
    out->resize(offset + kFrameHeaderSize + bound);  // zero-filled: no garbage on disk
  }
  uint8_t* payload = out->data() + offset + kFrameHeaderSize;
  FrameHeader h;
  h.raw_size = static_cast<uint32_t>(size);
  h.stored_size = static_cast<uint32_t>(size);
  bool compressed = false;
  if (ctx != nullptr && size > 0) {
    size_t n = ZSTD_compressCCtx(ctx, payload, bound, data, size, level);
    if (!ZSTD_isError(n) && n < size) {
      h.flags |= kFrameFlagZstd;
      h.stored_size = static_cast<uint32_t>(n);
      compressed = true;
    }
  }
  if (!compressed && size > 0) std::memcpy(payload, data, size);
  h.payload_crc = Crc32c(payload, h.stored_size);
  EncodeFrameHeader(h, out->data() + offset);
  return kFrameHeaderSize + h.stored_size;
}

// The fix to suggest for a write error, by errno.
// write() the whole range, riding out EINTR and partial writes. Returns 0 or an errno.
int WriteFully(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) return EIO;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return 0;
}

}  // namespace

StatusOr<std::unique_ptr<FileChunkWriter>> FileChunkWriter::Open(const std::string& path,
                                                                 int zstd_level) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return Status::Error("cannot create trace " + path + ": " + std::strerror(err) + " (" +
                         WriteErrorFix(err) + "); nothing is traced");
  }
  std::unique_ptr<FileChunkWriter> writer(new FileChunkWriter(fd, path, zstd_level));
  // A full disk shows up here already, but the one error line belongs to the first chunk
  // write, which then carries the magic with it.
  if (WriteFully(fd, reinterpret_cast<const uint8_t*>(kFileMagic), kFileMagicSize) == 0) {
    writer->bytes_written_ = kFileMagicSize;
  } else {
    writer->magic_pending_ = true;
    if (::ftruncate(fd, 0) != 0) {
      // Not a regular file (e.g. /dev/full): nothing to cut back.
    }
  }
  return writer;
}

FileChunkWriter* FileChunkWriter::CreateDeferred(DeferredFileOptions options, int zstd_level) {
  auto* writer = new FileChunkWriter(-1, "", zstd_level);
  writer->deferred_ = true;
  writer->options_ = std::move(options);
  writer->pending_.assign(kFileMagic, kFileMagic + kFileMagicSize);
  return writer;
}

bool FileChunkWriter::CreateClaimedFile() {
  StatusOr<ClaimedFile> claim = ClaimTraceFile(options_.claim);
  if (!claim.ok()) {
    failed_ = true;
    Log(LogSeverity::kError, "%s; nothing is traced", claim.status().message().c_str());
    pending_.clear();
    pending_.shrink_to_fit();
    return false;
  }
  const ClaimedFile& claimed = claim.value();
  fd_ = claimed.fd;
  path_ = claimed.path;
  if (!claimed.note.empty()) Log(LogSeverity::kInfo, "%s", claimed.note.c_str());
  options_.entry.root = claimed.is_root;
  options_.entry.file = path_.substr(DirName(path_).size());
  manifest_dir_ = ManifestDirFor(claimed.root);
  // Members list themselves at once. The root writes its entry at the end, and only when others
  // joined (the manifest exists then): a run of one process leaves no manifest behind.
  if (const Status listed =
          claimed.is_root ? Status() : WriteManifestEntry(manifest_dir_, options_.entry);
      !listed.ok()) {
    // The trace itself is fine; only `kptrace` cannot gather this file with its run.
    Log(LogSeverity::kWarning, "%s; the trace %s is written all the same", listed.message().c_str(),
        path_.c_str());
    manifest_dir_.clear();
  }
  const int err = WriteFully(fd_, pending_.data(), pending_.size());
  if (err != 0) {
    failed_ = true;
    Log(LogSeverity::kError, "cannot write trace %s: %s (%s); nothing is traced", path_.c_str(),
        std::strerror(err), WriteErrorFix(err));
    if (::ftruncate(fd_, 0) != 0) {
    }
  } else {
    bytes_written_ = pending_.size();
  }
  pending_.clear();
  pending_.shrink_to_fit();
  return !failed_;
}

void FileChunkWriter::MarkEnded(const std::string& end_reason) {
  if (manifest_dir_.empty()) return;
  struct stat st {};
  if (options_.entry.root && ::stat(manifest_dir_.c_str(), &st) != 0) return;  // nobody joined
  options_.entry.state = "ended";
  options_.entry.end_reason = end_reason;
  if (const Status listed = WriteManifestEntry(manifest_dir_, options_.entry); !listed.ok()) {
    Log(LogSeverity::kWarning, "%s", listed.message().c_str());
  }
}

FileChunkWriter::FileChunkWriter(int fd, std::string path, int zstd_level)
    : fd_(fd), path_(std::move(path)), zstd_level_(zstd_level) {
  if (zstd_level_ > 0) zstd_ctx_ = ZSTD_createCCtx();
}

FileChunkWriter::~FileChunkWriter() {
  if (fd_ >= 0) ::close(fd_);
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zstd_ctx_));
}

bool FileChunkWriter::WriteChunk(const uint8_t* data, size_t size) {
  if (failed_) return false;
  if (deferred_ && fd_ < 0) {
    const size_t offset = pending_.size();
    const size_t n =
        AppendFrame(static_cast<ZSTD_CCtx*>(zstd_ctx_), zstd_level_, data, size, &pending_, offset);
    pending_.resize(offset + n);
    ++chunks_written_;
    const bool create = (options_.create_when != nullptr && options_.create_when->load()) ||
                        options_.create_when == nullptr ||
                        pending_.size() > options_.max_pending_bytes;
    if (!create) return true;
    return CreateClaimedFile();
  }
  size_t offset = 0;
  if (magic_pending_) {
    if (scratch_.size() < kFileMagicSize) scratch_.resize(kFileMagicSize);
    std::memcpy(scratch_.data(), kFileMagic, kFileMagicSize);
    offset = kFileMagicSize;
  }
  size_t n = offset + AppendFrame(static_cast<ZSTD_CCtx*>(zstd_ctx_), zstd_level_, data, size,
                                  &scratch_, offset);
  int err = WriteFully(fd_, scratch_.data(), n);
  if (err != 0) {
    failed_ = true;
    Log(LogSeverity::kError,
        "cannot write trace %s: %s (%s); tracing stops here, the %llu chunks written so far "
        "stay readable",
        path_.c_str(), std::strerror(err), WriteErrorFix(err),
        static_cast<unsigned long long>(chunks_written_));
    // Cut a partial frame off so the file ends on a chunk boundary (fails harmlessly on
    // devices and pipes).
    if (::ftruncate(fd_, static_cast<off_t>(bytes_written_)) != 0) {
    }
    return false;
  }
  magic_pending_ = false;
  bytes_written_ += n;
  ++chunks_written_;
  return true;
}

MemoryChunkSink::MemoryChunkSink(int zstd_level)
    : zstd_level_(zstd_level), file_(kFileMagic, kFileMagic + kFileMagicSize) {
  if (zstd_level_ > 0) zstd_ctx_ = ZSTD_createCCtx();
}

MemoryChunkSink::~MemoryChunkSink() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zstd_ctx_)); }

bool MemoryChunkSink::WriteChunk(const uint8_t* data, size_t size) {
  raw_.emplace_back(data, data + size);
  size_t offset = file_.size();
  size_t n =
      AppendFrame(static_cast<ZSTD_CCtx*>(zstd_ctx_), zstd_level_, data, size, &file_, offset);
  file_.resize(offset + n);
  return true;
}

}  // namespace kp
