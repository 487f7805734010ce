#include "inject/trace/chunk_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>

#include "common/frame.h"
#include "inject/log/log.h"

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
const char* WriteErrorFix(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return "free disk space or set KP_OUTPUT to a path on another file system";
    case EFBIG:
      return "raise the file size limit (ulimit -f) or shorten the capture with KP_DURATION";
    case EACCES:
    case EPERM:
    case EROFS:
      return "set KP_OUTPUT to a writable path";
    default:
      return "check the file system or set KP_OUTPUT to a writable path";
  }
}

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

FileChunkWriter* FileChunkWriter::Open(const std::string& path, int zstd_level,
                                       std::string* error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    if (error != nullptr) {
      *error = "kp: cannot create trace " + path + ": " + std::strerror(err) + " (" +
               WriteErrorFix(err == ENOENT ? EACCES : err) + "); nothing is traced";
    }
    return nullptr;
  }
  auto* writer = new FileChunkWriter(fd, path, zstd_level);
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
