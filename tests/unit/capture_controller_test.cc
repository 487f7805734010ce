// CaptureController on CPU with synthetic CUPTI callback data: NVTX push/pop (per thread and per
// domain), cudaProfilerStart/Stop callback sites, the delay/duration timer and the on-demand
// signal (a real sigqueue to this process). What it calls on the tracer is recorded instead of
// switching CUPTI.
#include "inject/capture/capture_controller.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/capture_signal_name.h"
#include "tests/unit/nvtx_callback_data.h"

namespace kp {
namespace {

struct Recorder {
  std::mutex mu;
  std::vector<bool> tracing;  // every set_tracing call
  std::vector<CaptureWindowInfo> windows;
  std::vector<std::string> labels;
  int discard_begins = 0, discard_ends = 0;
  int no_more_windows = 0;     // no_more_windows calls
  size_t windows_at_last = 0;  // windows closed when it was called

  CaptureTracerOps Ops() {
    CaptureTracerOps ops;
    ops.set_tracing = [this](bool on) {
      std::lock_guard<std::mutex> lock(mu);
      tracing.push_back(on);
    };
    ops.now_ns = [] {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count());
    };
    ops.window_closed = [this](const CaptureWindowInfo& w, const std::string& label) {
      std::lock_guard<std::mutex> lock(mu);
      windows.push_back(w);
      labels.push_back(label);
    };
    ops.discard_begin = [this](uint64_t) { ++discard_begins; };
    ops.discard_end = [this](uint64_t) { ++discard_ends; };
    ops.no_more_windows = [this] {
      ++no_more_windows;
      windows_at_last = windows.size();
    };
    return ops;
  }
  size_t window_count() {
    std::lock_guard<std::mutex> lock(mu);
    return windows.size();
  }
};

void DomainPush(CaptureController& c, nvtxDomainHandle_t domain, const char* message) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  nvtxDomainRangePushEx_params p{domain, {&a}};
  CUpti_NvtxData d{"nvtxDomainRangePushEx", &p, nullptr};
  c.OnCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainRangePushEx, &d);
}

void DomainPop(CaptureController& c, nvtxDomainHandle_t domain) {
  nvtxDomainRangePop_params p{domain};
  CUpti_NvtxData d{"nvtxDomainRangePop", &p, nullptr};
  c.OnCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainRangePop, &d);
}

void DomainCreate(CaptureController& c, const char* name, nvtxDomainHandle_t handle) {
  nvtxDomainCreateA_params p{name};
  CUpti_NvtxData d{"nvtxDomainCreateA", &p, &handle};
  c.OnCallback(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainCreateA, &d);
}

nvtxDomainHandle_t FakeDomain(uintptr_t n) { return reinterpret_cast<nvtxDomainHandle_t>(n); }

CapturePlan RangePlan(const std::string& range, uint32_t max_windows) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kNvtxRange;
  plan.range = range;
  plan.range_end = max_windows == 1 ? CaptureRangeEnd::kStop : CaptureRangeEnd::kRepeat;
  plan.max_windows = max_windows;
  return plan;
}

TEST(CaptureController, OutermostRangeOpensAndClosesOneWindow) {
  Recorder r;
  CaptureController c(RangePlan("step", 0), r.Ops());
  Push(c, "warmup");  // not the range
  Pop(c);
  EXPECT_TRUE(r.tracing.empty());
  Push(c, "step");
  EXPECT_EQ(r.tracing, std::vector<bool>{true});
  Push(c, "forward");
  Push(c, "step");  // nested occurrence: no second window
  Pop(c);
  Pop(c);
  EXPECT_EQ(r.tracing, std::vector<bool>{true});
  Pop(c);  // the outer step
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
  ASSERT_EQ(r.windows.size(), 1u);
  EXPECT_EQ(r.labels[0], "step");
  EXPECT_STREQ(r.windows[0].end_reason, "range end");
  EXPECT_LE(r.windows[0].start_ns, r.windows[0].end_ns);
}

TEST(CaptureController, NoMoreWindowsOnceAfterTheLastWindowOnly) {
  Recorder r;
  CaptureController c(RangePlan("step", 2), r.Ops());  // repeat:2
  Push(c, "step");
  Pop(c);
  EXPECT_EQ(r.no_more_windows, 0);  // a second window can still open
  Push(c, "step");
  EXPECT_EQ(r.no_more_windows, 0);  // open
  Pop(c);
  EXPECT_EQ(r.no_more_windows, 1);
  EXPECT_EQ(r.windows_at_last, 2u);  // after the window was recorded
  Push(c, "step");
  Pop(c);
  c.Finish();
  EXPECT_EQ(r.no_more_windows, 1);
  EXPECT_EQ(r.window_count(), 2u);
}

TEST(CaptureController, NoMoreWindowsNeverForAnOpenEndedTrigger) {
  Recorder r;
  CaptureController c(RangePlan("step", 0), r.Ops());  // repeat: every occurrence
  for (int i = 0; i < 5; ++i) {
    Push(c, "step");
    Pop(c);
  }
  c.Finish();
  EXPECT_EQ(r.no_more_windows, 0);
}

TEST(CaptureController, ALibraryDomainsPopsDoNotEndTheStep) {
  // NCCL-style: a domain range opened inside the step is still open when the step pops.
  Recorder r;
  CaptureController c(RangePlan("step", 0), r.Ops());
  const nvtxDomainHandle_t nccl = FakeDomain(0x1000);
  Push(c, "step");
  DomainPush(c, nccl, "allreduce");
  Pop(c);  // the step ends (default domain's stack)
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
  DomainPop(c, nccl);
  DomainPush(c, nccl, "step");  // "step" in another domain also matches an unqualified range
  EXPECT_EQ(r.tracing.size(), 3u);
  DomainPop(c, nccl);
  EXPECT_EQ(r.window_count(), 2u);
}

TEST(CaptureController, PopsOfRangesPushedBeforeKpAreIgnored) {
  Recorder r;
  CaptureController c(RangePlan("step", 0), r.Ops());
  Pop(c);
  Pop(c);
  Push(c, "step");
  Pop(c);
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
}

TEST(CaptureController, NamedDomainOnlyMatchesThatDomain) {
  Recorder r;
  CaptureController c(RangePlan("torch::step", 0), r.Ops());
  const nvtxDomainHandle_t torch = FakeDomain(0x2000), other = FakeDomain(0x3000);
  DomainCreate(c, "torch", torch);
  Push(c, "step");  // default domain: not it
  Pop(c);
  DomainPush(c, other, "step");
  DomainPop(c, other);
  EXPECT_TRUE(r.tracing.empty());
  DomainPush(c, torch, "step");
  DomainPop(c, torch);
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
}

TEST(CaptureController, RangesOnAnotherThreadKeepTheirOwnStack) {
  Recorder r;
  CaptureController c(RangePlan("step", 0), r.Ops());
  Push(c, "step");
  std::thread([&] {
    Push(c, "data");
    Pop(c);
    Pop(c);  // this thread never pushed the step: nothing closes
  }).join();
  EXPECT_EQ(r.tracing, std::vector<bool>{true});
  Pop(c);
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
}

TEST(CaptureController, RepeatLimitStopsOpening) {
  Recorder r;
  CaptureController c(RangePlan("step", 2), r.Ops());
  for (int i = 0; i < 5; ++i) {
    Push(c, "step");
    Pop(c);
  }
  EXPECT_EQ(r.window_count(), 2u);
  EXPECT_EQ(r.windows[1].index, 1u);
  EXPECT_EQ(r.windows[1].first_step, 1u);
}

void ProfilerCall(CaptureController& c, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                  CUpti_ApiCallbackSite site) {
  CUpti_CallbackData d{};
  d.callbackSite = site;
  c.OnCallback(domain, cbid, &d);
}

TEST(CaptureController, ProfilerStartOnReturnStopOnEntry) {
  Recorder r;
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kCudaProfilerApi;
  CaptureController c(plan, r.Ops());
  const auto rt = CUPTI_CB_DOMAIN_RUNTIME_API, drv = CUPTI_CB_DOMAIN_DRIVER_API;
  ProfilerCall(c, rt, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_ENTER);
  EXPECT_TRUE(r.tracing.empty());
  // cudaProfilerStart calls cuProfilerStart: the driver's return opens, the runtime's is a no-op
  ProfilerCall(c, drv, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_API_EXIT);
  ProfilerCall(c, rt, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_EXIT);
  EXPECT_EQ(r.tracing, std::vector<bool>{true});
  ProfilerCall(c, rt, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, CUPTI_API_ENTER);
  ProfilerCall(c, drv, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, CUPTI_API_ENTER);
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
  ASSERT_EQ(r.windows.size(), 1u);
  EXPECT_STREQ(r.windows[0].end_reason, "cudaProfilerStop");
  // Other API callbacks and NVTX are not triggers here.
  Push(c, "step");
  ProfilerCall(c, rt, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_EXIT);
  EXPECT_EQ(r.tracing.size(), 2u);  // stop: one window only
}

TEST(CaptureController, ScheduleWarmupDiscardsThenOpens) {
  Recorder r;
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kSchedule;
  plan.schedule.range = "step";
  plan.schedule.wait = 1;
  plan.schedule.warmup = 1;
  plan.schedule.active = 1;
  plan.schedule.repeat = 1;
  plan.max_windows = 0;
  CaptureController c(plan, r.Ops());
  for (int i = 0; i < 4; ++i) {
    Push(c, "step");
    Pop(c);
  }
  // step 0 wait, step 1 warm-up (tracing on, discarded), step 2 the window, step 3 off
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
  EXPECT_EQ(r.discard_begins, 1);
  EXPECT_EQ(r.discard_ends, 1);
  ASSERT_EQ(r.windows.size(), 1u);
  EXPECT_EQ(r.windows[0].first_step, 2u);
}

bool WaitFor(Recorder& r, size_t calls) {
  for (int i = 0; i < 400; ++i) {
    {
      std::lock_guard<std::mutex> lock(r.mu);
      if (r.tracing.size() >= calls) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(CaptureController, DelayAndDurationRunOnTheControlThread) {
  Recorder r;
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kTime;
  plan.delay_ns = 50'000'000;
  plan.duration_ns = 100'000'000;
  CaptureController c(plan, r.Ops());
  const auto t0 = std::chrono::steady_clock::now();
  const Status started = c.Start(nullptr);
  ASSERT_TRUE(started.ok()) << started.message();
  ASSERT_TRUE(WaitFor(r, 2));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false}));
  ASSERT_EQ(r.window_count(), 1u);
  const double length = (r.windows[0].end_ns - r.windows[0].start_ns) / 1e9;
  EXPECT_GE(length, 0.1);
  EXPECT_LT(length, 0.3);
  EXPECT_GE(s, 0.15);
  EXPECT_STREQ(r.windows[0].end_reason, "duration");
}

TEST(CaptureController, OnDemandSignalStartsAndStops) {
  Recorder r;
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kSignal;
  plan.max_windows = 0;
  plan.control_signal = DefaultCaptureSignal();
  CaptureController c(plan, r.Ops());
  const Status started = c.Start(nullptr);
  ASSERT_TRUE(started.ok()) << started.message();
  sigval start{}, stop{};
  start.sival_int = 1;
  stop.sival_int = 2;
  ASSERT_EQ(sigqueue(getpid(), plan.control_signal, start), 0);
  ASSERT_TRUE(WaitFor(r, 1));
  ASSERT_EQ(sigqueue(getpid(), plan.control_signal, start), 0);  // already on: nothing
  ASSERT_EQ(sigqueue(getpid(), plan.control_signal, stop), 0);
  ASSERT_TRUE(WaitFor(r, 2));
  kill(getpid(), plan.control_signal);  // a plain kill toggles: on again
  ASSERT_TRUE(WaitFor(r, 3));
  EXPECT_EQ(r.tracing, (std::vector<bool>{true, false, true}));
  ASSERT_EQ(r.window_count(), 1u);
  EXPECT_STREQ(r.windows[0].end_reason, "kptrace stop");
  c.Finish();  // exit closes the open window
  ASSERT_EQ(r.window_count(), 2u);
  EXPECT_STREQ(r.windows[1].end_reason, "exit");
}

}  // namespace
}  // namespace kp
