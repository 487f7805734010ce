// chunk_writer.h: frames serialized Chunk messages (common/frame.h), optionally compresses them
// with zstd, and appends them to the trace file. Runs on the encoder thread.
//
// Failure policy (docs/architecture.md, Rules): an I/O error (disk full, file removed,
// permission) prints one `kp: ...` line naming the path, the error and the fix, then the writer
// stops writing; every chunk written before stays valid. A partial write is truncated back to
// the last good chunk boundary where possible, so the file never ends in garbage we made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kp {

class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // `data` is one serialized kp.Chunk. Returns false once the sink has failed.
  virtual bool WriteChunk(const uint8_t* data, size_t size) = 0;
  virtual uint64_t bytes_written() const = 0;
};

class FileChunkWriter final : public ChunkSink {
 public:
  // zstd_level 0 = no compression. Opening writes the file magic.
  static FileChunkWriter* Open(const std::string& path, int zstd_level, std::string* error);
  ~FileChunkWriter() override;
  bool WriteChunk(const uint8_t* data, size_t size) override;
  uint64_t bytes_written() const override { return bytes_written_; }
  bool failed() const { return failed_; }
  const std::string& path() const { return path_; }

 private:
  FileChunkWriter(int fd, std::string path, int zstd_level);
  int fd_;
  std::string path_;
  int zstd_level_;
  bool failed_ = false;
  uint64_t bytes_written_ = 0;
  uint64_t chunks_written_ = 0;   // named in the error message
  bool magic_pending_ = false;    // the magic could not be written at Open; goes with chunk 1
  std::vector<uint8_t> scratch_;  // compressed payload, reused
  void* zstd_ctx_ = nullptr;
};

// Keeps the chunks in memory (tests, and the bench generator).
class MemoryChunkSink final : public ChunkSink {
 public:
  explicit MemoryChunkSink(int zstd_level = 0);
  ~MemoryChunkSink() override;
  bool WriteChunk(const uint8_t* data, size_t size) override;
  uint64_t bytes_written() const override { return file_.size(); }
  const std::vector<uint8_t>& file() const { return file_; }  // magic + framed chunks
  const std::vector<std::vector<uint8_t>>& raw_chunks() const { return raw_; }

 private:
  int zstd_level_;
  std::vector<uint8_t> file_;
  std::vector<std::vector<uint8_t>> raw_;
  void* zstd_ctx_ = nullptr;
};

}  // namespace kp
