// chunk_writer.h: frames serialized Chunk messages (common/frame.h), optionally compresses them
// with zstd, and appends them to the trace file. Runs on the encoder thread.
//
// Failure policy (docs/architecture.md, Rules): an I/O error (disk full, file removed,
// permission) prints one `kp: ...` line naming the path, the error and the fix, then the writer
// stops writing; every chunk written before stays valid. A partial write is truncated back to
// the last good chunk boundary where possible, so the file never ends in garbage we made.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "inject/trace/run_manifest.h"
#include "inject/trace/trace_file_claim.h"

namespace kp {

class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // `data` is one serialized kp.Chunk. Returns false once the sink has failed.
  virtual bool WriteChunk(const uint8_t* data, size_t size) = 0;
  virtual uint64_t bytes_written() const = 0;
};

// The injector's trace file: created lazily, claimed so that it has exactly one writer.
struct DeferredFileOptions {
  ClaimRequest claim;
  // This process's manifest entry (file/root/state are filled in here): a member writes it when
  // its file is created, the root at its end and only if others joined its run.
  ManifestEntry entry;
  // The file is created at the first chunk written after this turns true (the process created
  // a CUDA context). A process that never does leaves no file and no manifest entry.
  const std::atomic<bool>* create_when = nullptr;
  size_t max_pending_bytes = 64u << 20;  // more chunks than this before a context: create anyway
};

class FileChunkWriter final : public ChunkSink {
 public:
  // zstd_level 0 = no compression. Opening truncates `path` and writes the file magic (tests,
  // tools; the injector uses CreateDeferred).
  static StatusOr<std::unique_ptr<FileChunkWriter>> Open(const std::string& path, int zstd_level);
  // Keeps chunks in memory until options.create_when is set, then claims the file
  // (trace_file_claim.h), writes the manifest entry and everything kept so far.
  static FileChunkWriter* CreateDeferred(DeferredFileOptions options, int zstd_level);
  ~FileChunkWriter() override;
  bool WriteChunk(const uint8_t* data, size_t size) override;
  uint64_t bytes_written() const override { return bytes_written_; }
  bool failed() const { return failed_; }
  // The file written ("" while deferred and not yet created).
  const std::string& path() const { return path_; }
  bool created() const { return fd_ >= 0; }
  // After the footer: marks the manifest entry ended with `end_reason`. Deferred writers only.
  void MarkEnded(const std::string& end_reason);

 private:
  FileChunkWriter(int fd, std::string path, int zstd_level);
  bool CreateClaimedFile();
  int fd_;
  std::string path_;
  int zstd_level_;
  bool failed_ = false;
  uint64_t bytes_written_ = 0;
  uint64_t chunks_written_ = 0;   // named in the error message
  bool magic_pending_ = false;    // the magic could not be written at Open; goes with chunk 1
  std::vector<uint8_t> scratch_;  // compressed payload, reused
  void* zstd_ctx_ = nullptr;
  bool deferred_ = false;         // CreateDeferred: the file is made on demand
  DeferredFileOptions options_;   // deferred only
  std::vector<uint8_t> pending_;  // deferred only: magic + frames not yet on disk
  std::string manifest_dir_;      // set once the manifest entry is written
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
