// decimal_text_test.cc: tools/export/decimal_text.h against std::to_chars: every value around
// each power of ten, all values below 2^21, a million random values of every length, every
// eight-digit block at a stride, the bytes past the digits left free for the next write, and a
// DecimalColumn's kept leading digits.
#include "tools/export/decimal_text.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

namespace {

std::string Expected(uint64_t v) {
  char b[32];
  auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

std::string Written(uint64_t v) {
  char b[32];
  char* end = kp::WriteDecimal(b, v);
  return std::string(b, end);
}

TEST(DecimalText, AroundEveryPowerOfTen) {
  uint64_t p = 1;
  for (int i = 0; i < 20; ++i) {
    for (uint64_t d = 0; d <= 3; ++d) {
      EXPECT_EQ(Written(p + d), Expected(p + d));
      EXPECT_EQ(Written(p - d), Expected(p - d));
    }
    if (i < 19) p *= 10;
  }
  EXPECT_EQ(Written(UINT64_MAX), "18446744073709551615");
  EXPECT_EQ(Written(0), "0");
}

TEST(DecimalText, AllSmallValues) {
  for (uint64_t v = 0; v < (1u << 21); ++v) ASSERT_EQ(Written(v), Expected(v)) << v;
}

TEST(DecimalText, RandomValuesOfEveryLength) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 1000000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);
    ASSERT_EQ(Written(v), Expected(v)) << v;
  }
  // Nanosecond timestamps as traces hold them.
  uint64_t t = 1700000000000000000ull;
  for (int i = 0; i < 100000; ++i) {
    t += rng() % 100000;
    ASSERT_EQ(Written(t), Expected(t)) << t;
  }
}

TEST(DecimalText, SignedValues) {
  auto expect_as_to_chars = [](int64_t v) {
    char b[32];
    char* end = kp::WriteSignedDecimal(b, v);
    char want[32];
    auto r = std::to_chars(want, want + sizeof want, v);
    EXPECT_EQ(std::string(b, end), std::string(want, r.ptr)) << v;
  };
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) {
    expect_as_to_chars(static_cast<int64_t>(rng() >> (rng() % 64)) * (i % 2 ? -1 : 1));
    if (::testing::Test::HasFailure()) return;
  }
  for (int64_t v : {int64_t{0}, int64_t{-1}, INT64_MIN, INT64_MAX}) expect_as_to_chars(v);
}

TEST(DecimalText, EightDigitBlocks) {
  // Every 7th value covers each digit position with every digit many times.
  for (uint32_t v = 0; v < 100000000; v += 7) {
    char got[8];
    kp::WriteEightDigits(got, v);
    char want[16];
    std::snprintf(want, sizeof want, "%08u", v);
    ASSERT_EQ(std::string(got, 8), std::string(want, 8)) << v;
  }
  for (uint32_t v : {0u, 9u, 10u, 99999999u, 10000000u, 12345678u}) {
    char got[8];
    kp::WriteEightDigits(got, v);
    char want[16];
    std::snprintf(want, sizeof want, "%08u", v);
    EXPECT_EQ(std::string(got, 8), std::string(want, 8)) << v;
  }
}

TEST(DecimalText, WritesStayWithinTwentyBytes) {
  // Each value written into a fresh buffer: its digits first, then at most 20 bytes used in
  // all (bytes past the digits may be overwritten), nothing beyond; the same for a column.
  std::mt19937_64 rng(7);
  kp::DecimalColumn column;
  uint64_t t = 1700000000000000000ull;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t v = i % 2 ? (t += rng() % 1000) : rng() >> (rng() % 64);
    for (int use_column = 0; use_column < 2; ++use_column) {
      char buf[48];
      std::memset(buf, 'x', sizeof buf);
      char* end = use_column ? column.Write(buf, v) : kp::WriteDecimal(buf, v);
      ASSERT_EQ(std::string(buf, end), Expected(v)) << v;
      for (size_t b = 20; b < sizeof buf; ++b) ASSERT_EQ(buf[b], 'x') << v << " byte " << b;
    }
  }
}

TEST(DecimalText, ColumnKeepsItsHeadOnlyWhileItHolds) {
  // Timestamps that share their head, values that change it, small values in between (which
  // leave it alone) and the largest value: each written as WriteDecimal writes it.
  kp::DecimalColumn column;
  std::mt19937_64 rng(3);
  uint64_t t = 1700000000099999990ull;
  for (int i = 0; i < 200000; ++i) {
    uint64_t v;
    switch (rng() % 4) {
      case 0:
        v = t += rng() % 20;  // crosses a head boundary within the first few values
        break;
      case 1:
        v = rng() % 100000000;
        break;
      case 2:
        v = rng() >> (rng() % 64);
        break;
      default:
        v = i % 1000 == 0 ? UINT64_MAX : t + 100000000;
    }
    char b[32];
    char* end = column.Write(b, v);
    ASSERT_EQ(std::string(b, end), Expected(v)) << v;
  }
}

}  // namespace
