// common/status.h: OK and error values, context added in front, StatusOr holding either.
#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kp {
namespace {

TEST(Status, OkAndErrorAndContext) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
  EXPECT_TRUE(ok.WithContext("KP_OUTPUT").ok());

  Status e = Status::Error("cannot create trace /x: Permission denied");
  EXPECT_FALSE(e.ok());
  Status outer = e.WithContext("KP_OUTPUT");
  EXPECT_EQ(outer.message(), "KP_OUTPUT: cannot create trace /x: Permission denied");
  EXPECT_EQ(e.message(), "cannot create trace /x: Permission denied");  // unchanged
  EXPECT_FALSE(Status::Error("").ok());  // an error without words is still an error
}

TEST(Status, StatusOrHoldsAValueOrAnError) {
  StatusOr<std::string> v = std::string("libcupti.so.13");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v.status().ok());
  EXPECT_EQ(v.value(), "libcupti.so.13");

  StatusOr<std::string> e = Status::Error("not found");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "not found");

  StatusOr<int> misuse = Status();  // OK without a value reads as an error, not a crash
  EXPECT_FALSE(misuse.ok());
  EXPECT_NE(misuse.status().message().find("without a value"), std::string::npos);

  StatusOr<std::unique_ptr<int>> move_only = std::make_unique<int>(7);
  ASSERT_TRUE(move_only.ok());
  EXPECT_EQ(*move_only.value(), 7);
}

TEST(Status, ValueOrGivesTheFallbackOnlyForAnError) {
  EXPECT_EQ(StatusOr<int>(3).value_or(9), 3);
  EXPECT_EQ(StatusOr<int>(Status::Error("no")).value_or(9), 9);
  const StatusOr<std::string> name = std::string("kp");
  EXPECT_EQ(name.value_or("none"), "kp");
  std::unique_ptr<int> p =
      StatusOr<std::unique_ptr<int>>(std::make_unique<int>(5)).value_or(nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
  EXPECT_EQ(StatusOr<std::unique_ptr<int>>(Status::Error("no")).value_or(nullptr), nullptr);
}

}  // namespace
}  // namespace kp
