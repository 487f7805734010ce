// PC sampling inside capture windows (inject/pc_sampling/pc_sampling_windows.h) on CPU: which
// contexts are started and stopped when, idempotent window edges, contexts that come and go,
// refused CUPTI calls, and the wiring to the capture controller's hooks (a window's NVTX range
// opens tracing, then starts PC sampling; its end stops PC sampling, then tracing).
#include "inject/pc_sampling/pc_sampling_windows.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "inject/capture/capture_controller.h"
#include "inject/capture/capture_hooks.h"
#include "tests/unit/nvtx_callback_data.h"

namespace kp {
namespace {

CUcontext Ctx(uintptr_t n) { return reinterpret_cast<CUcontext>(n); }

struct Journal {
  std::mutex mu;
  std::vector<std::string> calls;
  bool refuse = false;
  int closed = 0;

  void Add(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(s);
  }
  PcSamplingWindows::Switch Switch() {
    return [this](CUcontext c, bool on) {
      Add(std::string(on ? "start " : "stop ") + std::to_string(reinterpret_cast<uintptr_t>(c)));
      return !refuse;
    };
  }
  PcSamplingWindows::AfterClose OnClosed() {
    return [this] { ++closed; };
  }
};

using Calls = std::vector<std::string>;

TEST(PcSamplingWindows, ContextsWaitForAWindow) {
  Journal j;
  PcSamplingWindows w(j.Switch(), j.OnClosed());
  w.AddContext(Ctx(1));
  w.AddContext(Ctx(2));
  EXPECT_TRUE(j.calls.empty());
  EXPECT_FALSE(w.open());
  w.Opened();
  EXPECT_EQ(j.calls, (Calls{"start 1", "start 2"}));
  EXPECT_EQ(w.sampling(), 2u);
  w.Closed();
  EXPECT_EQ(j.calls, (Calls{"start 1", "start 2", "stop 1", "stop 2"}));
  EXPECT_EQ(w.sampling(), 0u);
  EXPECT_EQ(j.closed, 1);
}

TEST(PcSamplingWindows, RepeatedEdgesChangeNothing) {
  Journal j;
  PcSamplingWindows w(j.Switch(), j.OnClosed());
  w.AddContext(Ctx(1));
  w.AddContext(Ctx(1));  // the same context twice: one entry
  w.Closed();            // no window open: nothing to stop, no read asked for
  EXPECT_EQ(j.closed, 0);
  w.Opened();
  w.Opened();
  EXPECT_EQ(j.calls, (Calls{"start 1"}));
  w.Closed();
  w.Closed();
  EXPECT_EQ(j.calls, (Calls{"start 1", "stop 1"}));
  EXPECT_EQ(j.closed, 1);
  w.Opened();  // the next window (repeat:N) starts it again
  EXPECT_EQ(j.calls, (Calls{"start 1", "stop 1", "start 1"}));
}

TEST(PcSamplingWindows, AContextCreatedInAWindowStartsAtOnceAndStopsWhenItGoes) {
  Journal j;
  PcSamplingWindows w(j.Switch(), j.OnClosed());
  w.Opened();
  EXPECT_TRUE(j.calls.empty());
  w.AddContext(Ctx(7));
  EXPECT_EQ(j.calls, (Calls{"start 7"}));
  w.RemoveContext(Ctx(7));  // context destroyed inside the window
  w.RemoveContext(Ctx(9));  // unknown: ignored
  EXPECT_EQ(j.calls, (Calls{"start 7", "stop 7"}));
  w.Closed();  // nothing left to stop
  EXPECT_EQ(j.calls, (Calls{"start 7", "stop 7"}));
  w.AddContext(Ctx(8));  // outside a window: waits
  w.RemoveContext(Ctx(8));
  EXPECT_EQ(j.calls, (Calls{"start 7", "stop 7"}));
}

TEST(PcSamplingWindows, RefusedCallsAreCountedAndTriedAtTheNextEdge) {
  Journal j;
  PcSamplingWindows w(j.Switch(), j.OnClosed());
  w.AddContext(Ctx(1));
  j.refuse = true;
  w.Opened();
  EXPECT_EQ(w.sampling(), 0u);
  EXPECT_EQ(w.refused(), 1u);
  w.Closed();  // never started: no stop
  j.refuse = false;
  w.Opened();
  EXPECT_EQ(w.sampling(), 1u);
  j.refuse = true;
  w.Closed();  // a refused stop is not asked again
  EXPECT_EQ(w.sampling(), 0u);
  w.RemoveContext(Ctx(1));
  EXPECT_EQ(j.calls, (Calls{"start 1", "start 1", "stop 1"}));
  EXPECT_EQ(w.refused(), 2u);
}

TEST(PcSamplingWindows, ConfiguredFlagFollowsTheController) {
  EXPECT_FALSE(CaptureWindowsConfigured());
  SetCaptureWindowsConfigured(true);
  EXPECT_TRUE(CaptureWindowsConfigured());
  SetCaptureWindowsConfigured(false);
  EXPECT_FALSE(CaptureWindowsConfigured());
}

// Through the real hooks: an NVTX-range window with repeat:2. Tracing goes on before PC
// sampling starts and off after it stopped; the third occurrence opens nothing.
TEST(PcSamplingWindows, CaptureControllerHooksStartAndStopInsideTracing) {
  static Journal& j = *new Journal;  // the hooks stay registered for the process
  static PcSamplingWindows& w = *new PcSamplingWindows(j.Switch(), j.OnClosed());
  ASSERT_TRUE(w.Attach());
  w.AddContext(Ctx(1));
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kNvtxRange;
  plan.range = "step";
  plan.range_end = CaptureRangeEnd::kRepeat;
  plan.max_windows = 2;
  CaptureTracerOps ops;
  ops.set_tracing = [](bool on) { j.Add(on ? "tracing on" : "tracing off"); };
  ops.now_ns = [] {
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  };
  ops.window_closed = [](const CaptureWindowInfo&, const std::string&) { j.Add("window"); };
  ops.discard_begin = [](uint64_t) {};
  ops.discard_end = [](uint64_t) {};
  CaptureController c(plan, ops);
  for (int step = 0; step < 3; ++step) {
    Push(c, "step");
    Push(c, "forward");
    Pop(c);
    Pop(c);
  }
  EXPECT_EQ(j.calls, (Calls{"tracing on", "start 1", "stop 1", "tracing off", "window",
                            "tracing on", "start 1", "stop 1", "tracing off", "window"}));
  EXPECT_EQ(j.closed, 2);
  EXPECT_FALSE(w.open());
}

}  // namespace
}  // namespace kp
