// KernelRecordSwitch (inject/cupti/kernel_record_switch.h) on the CPU: the kind's switch is a
// fake that records each call. The kind is on exactly while a capture window is open and no
// measurement has it suspended, and it is switched only when that changes.
#include "inject/cupti/kernel_record_switch.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace kp {
namespace {

// Records each switch of the kind; every switch succeeds.
struct Calls {
  std::vector<std::string> log;
  std::function<bool(bool)> Apply() {
    return [this](bool on) {
      log.push_back(on ? "on" : "off");
      return true;
    };
  }
};

TEST(KernelRecordSwitch, FollowsTheWindowWhileNotSuspended) {
  Calls c;
  KernelRecordSwitch s(c.Apply());
  EXPECT_FALSE(s.on());
  s.SetWindow(true);
  EXPECT_TRUE(s.on());
  s.SetWindow(true);  // no change: no call
  s.SetWindow(false);
  EXPECT_FALSE(s.on());
  EXPECT_EQ(c.log, (std::vector<std::string>{"on", "off"}));
}

TEST(KernelRecordSwitch, ASuspensionHoldsThroughWindowEdgesThatTakeEffectAtTheResume) {
  Calls c;
  KernelRecordSwitch s(c.Apply());
  s.SetWindow(true);
  s.Suspend();
  EXPECT_FALSE(s.on());
  s.SetWindow(false);  // the window closes meanwhile: still off, no call
  s.SetWindow(true);   // and opens again: still off until the resume
  EXPECT_FALSE(s.on());
  s.Resume();
  EXPECT_TRUE(s.on());
  EXPECT_EQ(c.log, (std::vector<std::string>{"on", "off", "on"}));
}

TEST(KernelRecordSwitch, AResumeOutsideAWindowLeavesThemOff) {
  Calls c;
  KernelRecordSwitch s(c.Apply());
  s.SetWindow(true);
  s.Suspend();
  s.SetWindow(false);
  s.Resume();
  EXPECT_FALSE(s.on());
  s.Suspend();  // while off: no call
  s.Resume();
  EXPECT_EQ(c.log, (std::vector<std::string>{"on", "off"}));
}

TEST(KernelRecordSwitch, AFailedSwitchLeavesTheStateAndIsTriedAgainAtTheNextChange) {
  bool fail = false;
  std::vector<std::string> log;
  KernelRecordSwitch s([&](bool on) {
    log.push_back(std::string(fail ? "failed " : "") + (on ? "on" : "off"));
    return !fail;
  });
  s.SetWindow(true);
  fail = true;
  EXPECT_FALSE(s.Suspend());  // still on: the caller must not count on records being off
  EXPECT_TRUE(s.on());
  fail = false;
  s.Resume();  // nothing to switch back
  EXPECT_TRUE(s.on());
  EXPECT_TRUE(s.Suspend());
  EXPECT_FALSE(s.on());
  fail = true;
  s.Resume();  // enabling fails: off, and said so
  EXPECT_FALSE(s.on());
  fail = false;
  s.SetWindow(true);  // the next change tries again
  EXPECT_TRUE(s.on());
  EXPECT_EQ(log, (std::vector<std::string>{"on", "failed off", "off", "failed on", "on"}));
}

TEST(KernelRecordSwitch, ConcurrentCallersNeverSwitchTwiceToTheSameState) {
  Calls c;
  KernelRecordSwitch s(c.Apply());  // called under the switch's mutex
  s.SetWindow(true);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&s] {
      for (int i = 0; i < 2000; ++i) {
        s.Suspend();
        s.Resume();
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(s.on());
  ASSERT_FALSE(c.log.empty());
  for (size_t i = 1; i < c.log.size(); ++i) ASSERT_NE(c.log[i], c.log[i - 1]) << "at " << i;
  EXPECT_EQ(c.log.back(), "on");
}

}  // namespace
}  // namespace kp
