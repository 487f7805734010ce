// decimal_text.h: unsigned integers as decimal text, written straight into a caller's buffer.
//
// The exporters write hundreds of millions of integers per large trace, most of them 19-digit
// nanosecond timestamps. Eight digits at a time are made with a handful of multiplications on
// one 64-bit word (each 32-bit half holds four digits, then each 16-bit quarter two, then each
// byte one), so a timestamp costs two such words and a short head instead of ten divisions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kp {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the digit words are stored with their first digit in the lowest byte");

// The eight decimal digits of v (< 100,000,000, with leading zeros) as the bytes of a word, the
// first digit in the lowest byte (the lowest address once stored on a little-endian machine).
inline uint64_t EightDigitsWord(uint32_t v) {
  // Halves: the low 32 bits hold v / 10000 (the first four digits, lowest address), the high
  // 32 bits v % 10000.
  uint64_t x = (v / 10000) | (static_cast<uint64_t>(v % 10000) << 32);
  // Each half (< 10000) / 100, by 10486 / 2^20 (exact below 10000); the products (< 2^27) stay
  // in their half.
  const uint64_t hundreds = ((x * 10486) >> 20) & 0x0000007F0000007Full;
  x = hundreds | ((x - hundreds * 100) << 16);
  // Each quarter (< 100) / 10, by 103 / 2^10 (exact below 100); the products (< 2^14) stay in
  // their quarter.
  const uint64_t tens = ((x * 103) >> 10) & 0x000F000F000F000Full;
  x = tens | ((x - tens * 10) << 8);
  return x + 0x3030303030303030ull;  // '0' in every byte
}

// Writes exactly eight decimal digits of v (< 100,000,000, with leading zeros) at p.
inline void WriteEightDigits(char* p, uint32_t v) {
  const uint64_t x = EightDigitsWord(v);
  std::memcpy(p, &x, 8);
}

// Writes the decimal digits of v (< 100,000,000, no leading zeros) at p; returns the end. p
// needs 8 bytes (the bytes past the digits are overwritten with zeros). Always inlined: most
// values are short, and the call cost as much as writing them (Chrome JSON: 7 % more
// instructions out of line).
[[gnu::always_inline]] inline char* WriteDecimalBelow1e8(char* p, uint32_t v) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  if (v < 10) {
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  if (v < 100) {
    std::memcpy(p, kPairs + v * 2, 2);
    return p + 2;
  }
  if (v < 10000) {
    const uint32_t hi = v / 100, lo = v % 100;
    if (hi < 10) {
      *p = static_cast<char>('0' + hi);
      std::memcpy(p + 1, kPairs + lo * 2, 2);
      return p + 3;
    }
    std::memcpy(p, kPairs + hi * 2, 2);
    std::memcpy(p + 2, kPairs + lo * 2, 2);
    return p + 4;
  }
  // Five to eight digits: the eight-digit word less its leading zeros (its lowest bytes), stored
  // whole: the bytes past the last digit are zeros that the next write replaces.
  const size_t n = v < 100000 ? 5 : v < 1000000 ? 6 : v < 10000000 ? 7 : 8;
  const uint64_t x = EightDigitsWord(v) >> (8 * (8 - n));
  std::memcpy(p, &x, 8);
  return p + n;
}

// Writes the decimal digits of v at p; returns the end. p needs 20 bytes (as many as the
// longest value has digits; past the digits, bytes may be overwritten).
inline char* WriteDecimal(char* p, uint64_t v) {
  if (v < 100000000) return WriteDecimalBelow1e8(p, static_cast<uint32_t>(v));
  const uint64_t head = v / 100000000;
  const auto low = static_cast<uint32_t>(v % 100000000);
  if (head < 100000000) {
    p = WriteDecimalBelow1e8(p, static_cast<uint32_t>(head));
  } else {
    p = WriteDecimalBelow1e8(p, static_cast<uint32_t>(head / 100000000));
    WriteEightDigits(p, static_cast<uint32_t>(head % 100000000));
    p += 8;
  }
  WriteEightDigits(p, low);
  return p + 8;
}

// WriteDecimal for a signed value: a '-' first when negative. p needs 21 bytes.
inline char* WriteSignedDecimal(char* p, int64_t v) {
  if (v < 0) *p++ = '-';
  return WriteDecimal(p, v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v));
}

// WriteDecimal for a column of timestamps: consecutive values mostly share their digits above
// the lowest eight (a tenth of a second of nanoseconds), so the text of those is kept from the
// last value that had them.
class DecimalColumn {
 public:
  // As WriteDecimal: p needs 20 bytes.
  char* Write(char* p, uint64_t v) {
    if (v < 100000000) return WriteDecimalBelow1e8(p, static_cast<uint32_t>(v));
    const uint64_t head = v / 100000000;
    if (head != head_) {
      head_ = head;
      head_size_ = static_cast<size_t>(WriteDecimal(head_text_, head) - head_text_);
    }
    std::memcpy(p, head_text_, kMaxHeadDigits);  // a fixed-size copy; the head's own length counts
    p += head_size_;
    WriteEightDigits(p, static_cast<uint32_t>(v - head * 100000000));
    return p + 8;
  }

 private:
  static constexpr size_t kMaxHeadDigits = 12;  // UINT64_MAX / 10^8 has 12 digits
  uint64_t head_ = 0;                           // none yet: a value with a head has head >= 1
  size_t head_size_ = 0;
  char head_text_[20] = {};
};

}  // namespace kp
