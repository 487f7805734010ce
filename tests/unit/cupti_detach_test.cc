// CuptiDetach (inject/cupti/cupti_detach.h) on the CPU: its CUPTI calls go to fakes that record
// them, the decoder's progress is a counter the test moves. The steps, their order, the wait for
// the window's kernels, cancellation at exit and the finalize from a driver API exit callback;
// also run under the TSan preset (several threads call in at once).
#include "inject/cupti/cupti_detach.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kp {
namespace {

using namespace std::chrono_literals;

struct Fake {
  std::mutex mu;
  std::vector<std::string> calls;  // "flush", "flush forced", "now", "driver on", "finalize"...
  std::atomic<uint64_t> launch_calls{0}, kernels{0}, records{0};
  std::atomic<int> finalizes{0};
  CUptiResult finalize_result = CUPTI_SUCCESS;
  bool drain_ok = true;
  std::mutex shutdown;
  std::atomic<bool> exit_done{false};

  void Note(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(what);
  }
  std::vector<std::string> Calls() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const std::string& c : calls) {
      if (out.empty() || out.back() != c) out.push_back(c);  // repeated flushes once
    }
    return out;
  }
  CuptiDetach::Hooks Hooks() {
    CuptiDetach::Hooks h;
    h.flush = [this](bool forced) { Note(forced ? "flush forced" : "flush"); };
    h.clock_offset = [this] {
      Note("now");
      return int64_t{1000};
    };
    h.driver_callbacks = [this](bool on) { Note(on ? "driver on" : "driver off"); };
    h.finalize = [this] {
      Note("finalize");
      ++finalizes;
      return finalize_result;
    };
    h.shutdown_mutex = &shutdown;
    h.exit_done = &exit_done;
    h.progress = [this] {
      return CuptiDetach::Progress{launch_calls.load(), kernels.load(), records.load()};
    };
    h.drain_encoder = [this] {
      Note("drain");
      return drain_ok;
    };
    h.poll_ms = 1;
    h.settle_polls = 3;
    h.timeout_ms = 2000;
    return h;
  }
};

CUpti_CallbackData Site(CUpti_ApiCallbackSite site) {
  CUpti_CallbackData d{};
  d.callbackSite = site;
  return d;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit = 3000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A CuptiDetach whose thread has ended before it goes out of scope.
struct Detach : CuptiDetach {
  ~Detach() {
    EXPECT_TRUE(WaitFor([this] { return !running(); }));
  }
};

TEST(CuptiDetach, WaitsForTheWindowsKernelsThenFinalizesAtADriverExit) {
  Fake f;
  f.launch_calls = 100;
  f.kernels = 60;  // 40 kernels of the window still to come
  f.records = 60;
  Detach d;
  d.Start(f.Hooks());
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(d.quiet()) << "went on before every launch had its kernel";
  EXPECT_FALSE(d.finalizing());
  f.kernels = 100;
  f.records = 100;
  // Step 3 done and its thread gone (while it still holds the shutdown lock, an exit callback
  // leaves the finalize to the next driver call).
  ASSERT_TRUE(WaitFor([&] { return d.finalizing() && !d.running(); }));
  EXPECT_TRUE(d.quiet());
  EXPECT_FALSE(d.detached());
  EXPECT_EQ(d.clock_offset_ns(), 1000);  // the fake offset, read at step 2

  // Not a driver call, or its entry: nothing happens; the exit of a driver call finalizes.
  const CUpti_CallbackData enter = Site(CUPTI_API_ENTER), exit = Site(CUPTI_API_EXIT);
  EXPECT_FALSE(d.OnCallback(CUPTI_CB_DOMAIN_RUNTIME_API, &exit));
  EXPECT_TRUE(d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &enter));
  EXPECT_EQ(f.finalizes.load(), 0);
  EXPECT_TRUE(d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &exit));
  EXPECT_EQ(f.finalizes.load(), 1);
  EXPECT_TRUE(d.detached());
  EXPECT_FALSE(d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &exit));  // done: callbacks pass through
  EXPECT_EQ(f.finalizes.load(), 1);
  EXPECT_EQ(f.Calls(), (std::vector<std::string>{"flush", "now", "drain", "flush forced", "drain",
                                                 "driver on", "finalize"}));
}

TEST(CuptiDetach, WorkThatNeverArrivesLeavesCuptiAttached) {
  Fake f;
  f.launch_calls = 10;
  f.kernels = 9;  // a kernel that never ends
  CuptiDetach::Hooks h = f.Hooks();
  h.timeout_ms = 50;
  Detach d;
  d.Start(std::move(h));
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(d.quiet());
  EXPECT_FALSE(d.finalizing());
  for (const std::string& c : f.Calls()) EXPECT_EQ(c, "flush");
}

TEST(CuptiDetach, AnEncoderThatDoesNotPauseLeavesCuptiAttachedAndKpCallingIt) {
  Fake f;
  f.drain_ok = false;
  Detach d;
  d.Start(f.Hooks());
  ASSERT_TRUE(WaitFor([&] {
    std::vector<std::string> c = f.Calls();
    return !c.empty() && c.back() == "drain";
  }));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(d.quiet()) << "kp's own CUPTI calls must resume";
  EXPECT_FALSE(d.finalizing());
}

TEST(CuptiDetach, TheExitCancelsADetachNotYetDone) {
  Fake f;
  f.launch_calls = 5;  // waiting for kernels
  Detach d;
  d.Start(f.Hooks());
  std::this_thread::sleep_for(10ms);
  {
    std::lock_guard<std::mutex> lock(f.shutdown);  // as FinishTrace holds it
    d.Cancel(/*may_call_cupti=*/true);
    f.exit_done = true;
  }
  f.kernels = 5;
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(d.finalizing());
  const std::vector<std::string> calls = f.Calls();
  EXPECT_TRUE(calls.empty() || calls == std::vector<std::string>{"flush"}) << calls.size();
}

TEST(CuptiDetach, AtExitAPendingDetachIsWithdrawnAndItsCallbacksSwitchedOff) {
  Fake f;
  Detach d;
  d.Start(f.Hooks());
  // Step 3 done and its thread gone (while it still holds the shutdown lock, an exit callback
  // leaves the finalize to the next driver call).
  ASSERT_TRUE(WaitFor([&] { return d.finalizing() && !d.running(); }));
  const CUpti_CallbackData exit = Site(CUPTI_API_EXIT);
  {
    std::lock_guard<std::mutex> lock(f.shutdown);
    // A driver call on another thread while the exit holds the lock: no finalize now.
    std::thread other([&] { EXPECT_TRUE(d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &exit)); });
    other.join();
    EXPECT_EQ(f.finalizes.load(), 0);
    d.Cancel(/*may_call_cupti=*/true);
  }
  EXPECT_FALSE(d.finalizing());
  EXPECT_FALSE(d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &exit));
  EXPECT_EQ(f.finalizes.load(), 0);
  EXPECT_EQ(f.Calls().back(), "driver off");
}

TEST(CuptiDetach, AFailedFinalizeSwitchesItsCallbacksOffAndLetsKpCallCuptiAgain) {
  Fake f;
  f.finalize_result = CUPTI_ERROR_UNKNOWN;
  Detach d;
  d.Start(f.Hooks());
  // Step 3 done and its thread gone (while it still holds the shutdown lock, an exit callback
  // leaves the finalize to the next driver call).
  ASSERT_TRUE(WaitFor([&] { return d.finalizing() && !d.running(); }));
  const CUpti_CallbackData exit = Site(CUPTI_API_EXIT);
  EXPECT_TRUE(d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &exit));
  EXPECT_FALSE(d.detached());
  EXPECT_FALSE(d.quiet());
  EXPECT_FALSE(d.finalizing());
  EXPECT_EQ(f.Calls().back(), "driver off");
}

// Many application threads in driver calls at once: exactly one finalizes.
TEST(CuptiDetach, OneFinalizeWhateverTheThreads) {
  Fake f;
  Detach d;
  std::atomic<bool> stop{false};
  std::vector<std::thread> apps;
  for (int i = 0; i < 4; ++i) {
    apps.emplace_back([&] {
      const CUpti_CallbackData enter = Site(CUPTI_API_ENTER), exit = Site(CUPTI_API_EXIT);
      while (!stop.load()) {
        d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &enter);
        d.OnCallback(CUPTI_CB_DOMAIN_DRIVER_API, &exit);
      }
    });
  }
  d.Start(f.Hooks());
  d.Start(f.Hooks());  // a second start does nothing
  ASSERT_TRUE(WaitFor([&] { return d.detached(); }));
  stop = true;
  for (std::thread& t : apps) t.join();
  EXPECT_EQ(f.finalizes.load(), 1);
}

}  // namespace
}  // namespace kp
