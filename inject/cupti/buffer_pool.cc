#include "inject/cupti/buffer_pool.h"

#include <cstdlib>

namespace kp {

BufferPool::BufferPool(size_t buffer_bytes, size_t cap_bytes)
    : buffer_bytes_((buffer_bytes + 7) & ~size_t{7}),
      max_buffers_(cap_bytes / buffer_bytes_ > 0 ? cap_bytes / buffer_bytes_ : 1) {
  free_.reserve(max_buffers_);
  all_.reserve(max_buffers_);
}

BufferPool::~BufferPool() {
  for (uint8_t* buffer : all_) std::free(buffer);
}

uint8_t* BufferPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      uint8_t* buffer = free_.back();
      free_.pop_back();
      return buffer;
    }
    if (all_.size() < max_buffers_) {
      // aligned_alloc needs size % alignment == 0; buffer_bytes_ is rounded up to 8.
      auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes_));
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
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(buffer);
}

size_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_.size();
}

}  // namespace kp
