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
  void Grow(size_t n) {
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

// Writes the decimal digits of v at p; returns the end. p needs 20 bytes. Counts the digits
// first and writes them in place, two per division (a table of "00".."99"): no copy, no call.
inline char* WriteDecimal(char* p, uint64_t v) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  // The digit count from the bit length (log10(2) ~ 1233 / 4096), corrected by one comparison:
  // no division chain per digit.
  static constexpr uint64_t kPow10[20] = {1ull,
                                          10ull,
                                          100ull,
                                          1000ull,
                                          10000ull,
                                          100000ull,
                                          1000000ull,
                                          10000000ull,
                                          100000000ull,
                                          1000000000ull,
                                          10000000000ull,
                                          100000000000ull,
                                          1000000000000ull,
                                          10000000000000ull,
                                          100000000000000ull,
                                          1000000000000000ull,
                                          10000000000000000ull,
                                          100000000000000000ull,
                                          1000000000000000000ull,
                                          10000000000000000000ull};
  const int bits = 64 - __builtin_clzll(v | 1);
  const int log = (bits * 1233) >> 12;  // floor(log10(v)) or one more
  const size_t n = static_cast<size_t>(log + 1 - ((v | 1) < kPow10[log] ? 1 : 0));
  char* t = p + n;
  while (v >= 100) {
    const uint64_t pair = (v % 100) * 2;
    v /= 100;
    *--t = kPairs[pair + 1];
    *--t = kPairs[pair];
  }
  if (v >= 10) {
    *--t = kPairs[v * 2 + 1];
    *--t = kPairs[v * 2];
  } else {
    *--t = static_cast<char>('0' + v);
  }
  return p + n;
}

}  // namespace kp
