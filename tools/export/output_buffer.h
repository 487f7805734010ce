// output_buffer.h: the append-only byte buffer the exporters build their output in before one
// large fwrite.
//
// Exporters append a few bytes at a time, hundreds of millions of times per large trace.
// std::string::append is an out-of-line library call per append; here the common case is an
// inlined capacity check and a memcpy, which is what lets `kptrace convert` reach its
// records-per-second targets (bench/results/convert_throughput.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

#include "tools/export/decimal_text.h"

namespace kp {

class OutputBuffer {
 public:
  OutputBuffer() = default;
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;
  ~OutputBuffer() { std::free(data_); }

  // Makes room for `n` more bytes.
  void Reserve(size_t n) {
    if (cap_ - size_ < n) Grow(n);
  }
  void Put(char c) {
    Reserve(1);
    data_[size_++] = c;
  }
  void Append(const char* s, size_t n) {
    Reserve(n);
    if (n != 0) std::memcpy(data_ + size_, s, n);
    size_ += n;
  }
  void Append(std::string_view s) { Append(s.data(), s.size()); }
  // Raw access for writers that reserved first: write at Tail(), then Advance().
  char* Tail() { return data_ + size_; }
  void Advance(size_t n) { size_ += n; }
  char* At(size_t pos) { return data_ + pos; }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }
  std::string_view view() const { return std::string_view(data_, size_); }

  // Writes everything to `f` and empties the buffer. False if the write failed.
  bool WriteTo(FILE* f) {
    bool ok = size_ == 0 || std::fwrite(data_, 1, size_, f) == size_;
    size_ = 0;
    return ok;
  }

 private:
  // Out of line and cold, so that the members above stay small enough to be inlined everywhere.
  [[gnu::noinline, gnu::cold]] void Grow(size_t n) {
    size_t cap = cap_ == 0 ? 4096 : cap_;
    while (cap - size_ < n) cap *= 2;
    char* p = static_cast<char*>(std::realloc(data_, cap));
    if (p == nullptr) throw std::bad_alloc();
    data_ = p;
    cap_ = cap;
  }
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
};

}  // namespace kp
