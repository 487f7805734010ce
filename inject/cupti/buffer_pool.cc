#include "inject/cupti/buffer_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kp {
namespace {

size_t PageBytes() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

// Page-aligned, so that a trimmed buffer gives back all its pages; nullptr when out of memory.
uint8_t* BufferPool::NewBuffer() const {
  return static_cast<uint8_t*>(std::aligned_alloc(PageBytes(), alloc_bytes_));
}

BufferPool::BufferPool(size_t buffer_bytes, size_t cap_bytes)
    : buffer_bytes_(RoundUp(buffer_bytes > 0 ? buffer_bytes : 1, 8)),
      alloc_bytes_(RoundUp(buffer_bytes_, PageBytes())),
      max_buffers_(cap_bytes / alloc_bytes_ > 0 ? cap_bytes / alloc_bytes_ : 1) {
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
    if (!warm_.empty()) {
      uint8_t* buffer = warm_.back();
      warm_.pop_back();
      idle_ = std::min(idle_, warm_.size());
      return buffer;
    }
    if (!cold_.empty()) {
      uint8_t* buffer = cold_.back();
      cold_.pop_back();
      return buffer;
    }
    // A buffer whose pages are being given back is free but in no list: allocating in its
    // stead keeps a request from being refused while a free buffer exists.
    if (all_.size() < max_buffers_ + trimming_) {
      if (uint8_t* buffer = NewBuffer(); buffer != nullptr) {
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
  warm_.push_back(buffer);
}

size_t BufferPool::TrimIdle() {
  std::vector<uint8_t*> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Acquire and Release work at the back, so the bottom idle_ entries stayed free all along.
    const size_t spare = warm_.size() > kWarmBuffers ? warm_.size() - kWarmBuffers : 0;
    const size_t n = std::min(idle_, spare);
    idle.assign(warm_.begin(), warm_.begin() + static_cast<std::ptrdiff_t>(n));
    warm_.erase(warm_.begin(), warm_.begin() + static_cast<std::ptrdiff_t>(n));
    trimming_ += n;
    idle_ = warm_.size();
  }
  if (idle.empty()) return 0;
  // Out of the lock: giving pages back takes a while. On failure the pages simply stay.
  uint64_t given_back = 0;
  for (uint8_t* buffer : idle) given_back += madvise(buffer, alloc_bytes_, MADV_DONTNEED) == 0;
  trimmed_.fetch_add(given_back, std::memory_order_relaxed);
  const size_t n = idle.size();
  std::vector<uint8_t*> surplus;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    trimming_ -= n;
    // Acquire may have allocated past the cap while these were out (at most n more): as many
    // of them leave the pool, so the cap holds again once the trim is over.
    while (all_.size() > max_buffers_ + trimming_ && !idle.empty()) {
      all_.erase(std::find(all_.begin(), all_.end(), idle.back()));
      surplus.push_back(idle.back());
      idle.pop_back();
    }
    cold_.insert(cold_.end(), idle.begin(), idle.end());
  }
  for (uint8_t* buffer : surplus) std::free(buffer);  // out of the lock, as madvise
  return n;
}

bool BufferPool::KeepSpare() {
  if (spare_made_) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Exactly two so far: a pool that grew further in a burst has its spares already.
    if (all_.size() != 2 || all_.size() >= max_buffers_) return false;
  }
  spare_made_ = true;
  // Out of the lock: touching 8 MB of pages takes about a millisecond.
  uint8_t* buffer = NewBuffer();
  if (buffer == nullptr) return false;
  std::memset(buffer, 0, alloc_bytes_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (all_.size() < max_buffers_) {  // Acquire may have reached the cap meanwhile
      all_.push_back(buffer);
      warm_.insert(warm_.begin(), buffer);  // at the bottom: the last to be taken
      idle_ = std::min(idle_ + 1, warm_.size());
      return true;
    }
  }
  std::free(buffer);
  return false;
}

size_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_.size();
}

}  // namespace kp
