// shape_text_cache_test.cc: tools/export/shape_text_cache.h: made once per shape id, again after
// Clear, and every time for an id too large to index.
#include "tools/export/shape_text_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(ShapeTextCache, MadeOncePerShapeUntilCleared) {
  kp::ShapeTextCache cache;
  int made = 0;
  auto make = [&] { return "shape " + std::to_string(++made); };
  EXPECT_EQ(cache.Get(3, make), "shape 1");
  EXPECT_EQ(cache.Get(3, make), "shape 1");
  EXPECT_EQ(cache.Get(0, make), "shape 2");
  EXPECT_EQ(cache.Get(3, make), "shape 1");
  EXPECT_EQ(made, 2);
  // An empty text is a made text too (not "not yet").
  EXPECT_EQ(cache.Get(7, [] { return std::string(); }), "");
  EXPECT_EQ(cache.Get(7, make), "");
  cache.Clear();  // the next file's ids
  EXPECT_EQ(cache.Get(3, make), "shape 3");
}

TEST(ShapeTextCache, AWildIdIsMadeEveryTimeWithoutATableEntry) {
  kp::ShapeTextCache cache;
  int made = 0;
  auto make = [&] { return std::to_string(++made); };
  const uint32_t wild = 0xfffffff0u;
  EXPECT_EQ(cache.Get(wild, make), "1");
  EXPECT_EQ(cache.Get(wild, make), "2");
  EXPECT_EQ(cache.Get(1, make), "3");
  EXPECT_EQ(cache.Get(1, make), "3");
}

}  // namespace
