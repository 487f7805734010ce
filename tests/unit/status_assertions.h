// status_assertions.h: EXPECT_TRUE(IsOk(status)) passes for an OK kp::Status and otherwise fails
// printing the status's message.
#pragma once

#include <gtest/gtest.h>

#include "common/status.h"

namespace kp {

inline ::testing::AssertionResult IsOk(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.message();
}

}  // namespace kp
