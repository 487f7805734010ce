// buffer_pool.h: the host buffers CUPTI fills with activity records.
//
// CUPTI asks for a buffer from its own threads (worker, flushing, and -- with 13.0's per-thread
// buffers -- application threads), so Acquire must be quick and never wait on anything a
// CUDA-calling thread could hold: one private mutex around a free list, nothing else. Memory
// is bounded by KP_BUFFER_MB; beyond the cap Acquire returns nullptr and CUPTI drops records
// (it counts them; we count the refusals). Buffers are recycled, never freed before shutdown.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kp {

class BufferPool {
 public:
  // 8-byte aligned buffers of `buffer_bytes`; at most `cap_bytes` in total (at least one buffer).
  BufferPool(size_t buffer_bytes, size_t cap_bytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free buffer, a new one while under the cap, else nullptr (counted in refused()).
  uint8_t* Acquire();
  void Release(uint8_t* buffer);

  size_t buffer_bytes() const { return buffer_bytes_; }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  size_t allocated() const;

 private:
  const size_t buffer_bytes_;
  const size_t max_buffers_;
  mutable std::mutex mutex_;
  std::vector<uint8_t*> free_;
  std::vector<uint8_t*> all_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace kp
