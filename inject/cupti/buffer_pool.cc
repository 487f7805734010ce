#include "inject/cupti/buffer_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

namespace kp {
namespace {

size_t PageBytes() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

BufferPool::BufferPool(size_t buffer_bytes, size_t cap_bytes)
    : buffer_bytes_(RoundUp(buffer_bytes > 0 ? buffer_bytes : 1, 8)),
      alloc_bytes_(RoundUp(buffer_bytes_, PageBytes())),
      max_buffers_(cap_bytes / buffer_bytes_ > 0 ? cap_bytes / buffer_bytes_ : 1) {
  warm_.reserve(max_buffers_);
  cold_.reserve(max_buffers_);
  all_.reserve(max_buffers_);
}

BufferPool::~BufferPool() {
  for (uint8_t* buffer : all_) std::free(buffer);
}

uint8_t* BufferPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::vector<uint8_t*>* list : {&warm_, &cold_}) {
      if (!list->empty()) {
        uint8_t* buffer = list->back();
        list->pop_back();
        return buffer;
      }
    }
    if (all_.size() < max_buffers_) {
      // Page-aligned, so that a trimmed buffer gives back all its pages.
      auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(PageBytes(), alloc_bytes_));
      if (buffer != nullptr) {
        all_.push_back(buffer);
        return buffer;
      }
    }
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void BufferPool::Release(uint8_t* buffer) {
  if (buffer == nullptr) return;
  uint8_t* coldest = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    warm_.push_back(buffer);
    if (warm_.size() <= kWarmBuffers) return;
    coldest = warm_.front();
    warm_.erase(warm_.begin());
  }
  // Out of the lock: giving pages back takes a while, and no list holds the buffer meanwhile
  // (Acquire still finds kWarmBuffers warm ones). On failure the pages simply stay.
  if (madvise(coldest, alloc_bytes_, MADV_DONTNEED) == 0)
    trimmed_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mutex_);
  cold_.push_back(coldest);
}

size_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_.size();
}

}  // namespace kp
