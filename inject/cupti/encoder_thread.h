// encoder_thread.h: kp's own thread, where everything slow happens.
//
// CUPTI's bufferCompleted callback only pushes (buffer, size) here and returns: the queue has a
// private mutex that no CUDA-calling code ever holds while calling anything. This thread
// decodes each buffer (ActivityDecoder -> TraceEncoder), returns it to the pool, runs tasks
// posted by the metrics collector in order, and every KP_FLUSH_MS forces CUPTI to hand over
// partly filled buffers (cuptiActivityFlushAll(0), called holding none of our locks, because
// CUPTI calls back into PushCompleted from inside it) and appends a chunk. So a killed process
// loses at most about one period, and memory stays bounded by the buffer pool.
#pragma once

#include <cupti.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "inject/trace/trace_encoder.h"

namespace kp {

class ActivityDecoder;
class BufferPool;

class EncoderThread {
 public:
  struct Options {
    uint32_t flush_ms = 1000;
    std::string dump_dir;     // KP_DUMP_BUFFERS: copy each buffer to dump_dir/buf-<pid>-<n>.bin
    bool flush_cupti = true;  // call cuptiActivityFlushAll(0) each period (off in tests)
    // When set and returning false (CUPTI reported a fatal error and finalized itself), the
    // thread makes no more CUPTI calls; it still encodes and writes what it has.
    bool (*cupti_usable)() = nullptr;
    uint32_t pid = 0;
    // Runs on this thread every poll_ms (and before the footer): drains records that reach kp
    // outside CUPTI's buffers (api_call_recorder.h). Returns how many it decoded.
    std::function<size_t(ActivityDecoder&)> poll;
    uint32_t poll_ms = 10;
  };

  EncoderThread(TraceEncoder* encoder, ActivityDecoder* decoder, BufferPool* pool, Options options);
  ~EncoderThread();  // Stop()s if still running
  EncoderThread(const EncoderThread&) = delete;
  EncoderThread& operator=(const EncoderThread&) = delete;

  Status Start();

  // From bufferCompleted (any thread): queue the buffer; never blocks on CUDA or I/O.
  void PushCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_size);
  // Runs `task` on this thread, after the buffers queued before it.
  void Post(std::function<void(TraceEncoder&)> task);

  // Drains the queue, closes open NVTX ranges, writes the footer and joins. Idempotent.
  void Stop(const std::string& end_reason);

  uint64_t records_decoded() const { return records_decoded_; }

 private:
  struct Completed {
    CUcontext context;
    uint32_t stream_id;
    uint8_t* buffer;
    size_t valid_size;
  };
  struct Item {
    Completed completed{};
    std::function<void(TraceEncoder&)> task;  // set for posted tasks
  };

  void Run();
  void Process(Item& item);
  // The buffer pool's counters into the stats of the next chunk.
  void PoolStats();
  void DumpBuffer(const uint8_t* buffer, size_t size);
  bool CuptiCallsAllowed() const;
  void ReadDroppedCount(CUcontext context, uint32_t stream_id);

  TraceEncoder* encoder_;
  ActivityDecoder* decoder_;
  BufferPool* pool_;
  Options options_;

  std::mutex mutex_;  // guards queue_, stop_ only
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::string end_reason_;

  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;
  uint64_t dump_count_ = 0;
  uint64_t records_decoded_ = 0;
};

}  // namespace kp
