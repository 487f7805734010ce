// buffer_pool.h: the host buffers CUPTI fills with activity records.
//
// CUPTI asks for a buffer from its own threads (worker, flushing, and -- with 13.0's per-thread
// buffers -- application threads), so Acquire must be quick and never wait on anything a
// CUDA-calling thread could hold: one private mutex around the free lists, nothing else. Memory
// is bounded by KP_BUFFER_MB; beyond the cap Acquire returns nullptr and CUPTI drops records
// (it counts them; we count the refusals). Buffers are recycled, freed only at shutdown (or, the
// few Acquire allocated past the cap while a trim had buffers out, when that trim ends).
//
// Memory follows use, not the high-water mark: a burst (the encoder briefly behind) takes more
// buffers, and once they have stayed free for a whole period between two TrimIdle calls (the
// encoder thread's flush period), those beyond kWarmBuffers give their pages back to the system
// (madvise MADV_DONTNEED, outside the lock, on the encoder's thread) and wait in a cold list,
// taken only when no warm buffer is free; such a buffer is faulted in again as CUPTI fills it.
//
// A spare for bursts (KeepSpare): once a second buffer has been needed (CUPTI filled one while
// another was still out) and the pool has no more, the encoder thread adds a third with its
// pages already touched, so that the pipeline's usual depth (one buffer filling, one being
// encoded, one free) is resident early and a later short stall of the encoder takes a warm
// buffer instead of growing the process's memory mid-run. The spare is then a buffer like the
// others: if all three stay free for a whole period (the program idle), one gives its pages back.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kp {

class BufferPool {
 public:
  // Free buffers that always keep their pages: steady use never faults.
  static constexpr size_t kWarmBuffers = 2;

  // Page-aligned buffers of `buffer_bytes`; at most `cap_bytes` in total (at least one buffer).
  BufferPool(size_t buffer_bytes, size_t cap_bytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free buffer (the most recently released first, then one whose pages were given back), a
  // new one while under the cap, else nullptr (counted in refused()).
  uint8_t* Acquire();
  void Release(uint8_t* buffer);
  // Gives back the pages of the free buffers that stayed free since the previous call, keeping
  // kWarmBuffers warm; returns how many. Called periodically by one thread (not CUPTI's).
  size_t TrimIdle();
  // Once in the pool's life, when exactly two buffers have been allocated and the cap allows:
  // allocates one more, touches its pages and adds it to the warm list. Returns whether it did.
  // Called periodically by the same thread as TrimIdle (it may take a millisecond).
  bool KeepSpare();

  size_t buffer_bytes() const { return buffer_bytes_; }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // Buffers whose pages were given back, over the pool's life.
  uint64_t trimmed() const { return trimmed_.load(std::memory_order_relaxed); }
  // Buffers allocated now (kept for reuse until shutdown, except those allocated past the cap
  // while a trim was giving pages back, which that trim frees).
  size_t allocated() const;

 private:
  uint8_t* NewBuffer() const;

  const size_t buffer_bytes_;
  const size_t alloc_bytes_;  // buffer_bytes_ rounded up to whole pages
  const size_t max_buffers_;
  mutable std::mutex mutex_;
  std::vector<uint8_t*> warm_;  // free, pages kept; the back is the most recently released
  std::vector<uint8_t*> cold_;  // free, pages given back
  std::vector<uint8_t*> all_;
  size_t idle_ = 0;          // the bottom warm_ entries untouched since the last TrimIdle
  size_t trimming_ = 0;      // free buffers in no list while their pages are given back; Acquire
                             // may allocate as many past the cap meanwhile (TrimIdle frees them)
  bool spare_made_ = false;  // KeepSpare's thread only
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> trimmed_{0};
};

}  // namespace kp
