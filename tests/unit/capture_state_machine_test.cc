// The capture-window state machine (inject/capture/capture_state_machine.h): when windows open
// and close for each trigger, schedule arithmetic as torch.profiler.schedule, repeat limits and
// edges (nested ranges are the caller's job; the machine sees outermost starts and ends).
#include "inject/capture/capture_state_machine.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "inject/capture/capture_hooks.h"

namespace kp {
namespace {

using Phase = CapturePhase;

CapturePlan RangePlan(CaptureRangeEnd end, uint32_t max_windows) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kNvtxRange;
  plan.range = "step";
  plan.range_end = end;
  plan.max_windows = max_windows;
  return plan;
}

// Runs `steps` outermost ranges (start at 100*i+10, end at 100*i+50) and returns the phase
// each step ran in, plus the windows closed as (first_step, last_step).
struct StepRun {
  std::vector<Phase> phases;
  std::vector<std::pair<uint64_t, uint64_t>> windows;
};

StepRun RunSteps(CaptureStateMachine& m, int steps) {
  StepRun run;
  m.Start(0);
  for (int i = 0; i < steps; ++i) {
    m.RangeStart(100 * i + 10);
    run.phases.push_back(m.phase());
    const Phase before = m.phase();
    if (m.RangeEnd(100 * i + 50) && before == Phase::kOn) {
      run.windows.emplace_back(m.last_window().first_step, m.last_window().last_step);
    }
  }
  return run;
}

TEST(CaptureStateMachine, RangeStopCapturesTheFirstOccurrenceOnly) {
  CaptureStateMachine m(RangePlan(CaptureRangeEnd::kStop, 1));
  StepRun run = RunSteps(m, 4);
  EXPECT_EQ(run.phases, (std::vector<Phase>{Phase::kOn, Phase::kOff, Phase::kOff, Phase::kOff}));
  ASSERT_EQ(run.windows.size(), 1u);
  EXPECT_EQ(m.last_window().start_ns, 10u);
  EXPECT_EQ(m.last_window().end_ns, 50u);
  EXPECT_STREQ(m.last_window().end_reason, "range end");
  EXPECT_TRUE(m.finished());
}

TEST(CaptureStateMachine, RepeatNGivesNWindows) {
  CaptureStateMachine m(RangePlan(CaptureRangeEnd::kRepeat, 3));
  StepRun run = RunSteps(m, 6);
  ASSERT_EQ(run.windows.size(), 3u);
  EXPECT_EQ(run.windows[2], std::make_pair(uint64_t{2}, uint64_t{2}));
  EXPECT_EQ(m.windows_opened(), 3u);
  EXPECT_TRUE(m.finished());
}

TEST(CaptureStateMachine, RepeatWithoutLimitCapturesEveryOccurrence) {
  CaptureStateMachine m(RangePlan(CaptureRangeEnd::kRepeat, 0));
  EXPECT_EQ(RunSteps(m, 7).windows.size(), 7u);
  EXPECT_FALSE(m.finished());
}

TEST(CaptureStateMachine, RangeEndNoneCapturesToTheEnd) {
  CaptureStateMachine m(RangePlan(CaptureRangeEnd::kNone, 1));
  StepRun run = RunSteps(m, 3);
  EXPECT_EQ(run.phases, (std::vector<Phase>{Phase::kOn, Phase::kOn, Phase::kOn}));
  EXPECT_TRUE(m.Finish(1000));
  EXPECT_STREQ(m.last_window().end_reason, "exit");
  EXPECT_EQ(m.last_window().end_ns, 1000u);
}

TEST(CaptureStateMachine, DurationBoundsARangeWindow) {
  CapturePlan plan = RangePlan(CaptureRangeEnd::kStop, 1);
  plan.duration_ns = 20;
  CaptureStateMachine m(plan);
  m.Start(0);
  EXPECT_TRUE(m.RangeStart(10));
  EXPECT_EQ(m.next_deadline(), 30u);
  EXPECT_FALSE(m.Tick(29));
  EXPECT_TRUE(m.Tick(30));
  EXPECT_STREQ(m.last_window().end_reason, "duration");
  EXPECT_FALSE(m.RangeEnd(50));  // already closed
  EXPECT_TRUE(m.finished());
}

TEST(CaptureStateMachine, EndBeforeAnyStartIsIgnored) {
  // A range open when kp started ends first: it must not close or open anything.
  CaptureStateMachine m(RangePlan(CaptureRangeEnd::kStop, 1));
  m.Start(0);
  EXPECT_FALSE(m.RangeEnd(5));
  EXPECT_EQ(m.phase(), Phase::kOff);
  EXPECT_TRUE(m.RangeStart(10));
}

CapturePlan SchedulePlan(uint32_t skip_first, uint32_t wait, uint32_t warmup, uint32_t active,
                         uint32_t repeat) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kSchedule;
  plan.schedule.range = "step";
  plan.schedule.skip_first = skip_first;
  plan.schedule.wait = wait;
  plan.schedule.warmup = warmup;
  plan.schedule.active = active;
  plan.schedule.repeat = repeat;
  plan.max_windows = 0;
  return plan;
}

TEST(CaptureStateMachine, ScheduleFollowsTorchProfilerSchedule) {
  // torch.profiler.schedule(wait=3, warmup=1, active=2, repeat=2): steps 0-2 wait, 3 warm-up,
  // 4-5 recorded, 6-8 wait, 9 warm-up, 10-11 recorded, then nothing.
  CaptureStateMachine m(SchedulePlan(0, 3, 1, 2, 2));
  StepRun run = RunSteps(m, 14);
  const Phase O = Phase::kOff, W = Phase::kWarmup, A = Phase::kOn;
  EXPECT_EQ(run.phases, (std::vector<Phase>{O, O, O, W, A, A, O, O, O, W, A, A, O, O}));
  ASSERT_EQ(run.windows.size(), 2u);
  EXPECT_EQ(run.windows[0], std::make_pair(uint64_t{4}, uint64_t{5}));
  EXPECT_EQ(run.windows[1], std::make_pair(uint64_t{10}, uint64_t{11}));
  EXPECT_TRUE(m.finished());
}

TEST(CaptureStateMachine, ScheduleWindowSpansItsStepsOnly) {
  // wait 5, active 3, once: one window from step 5's start to step 7's end.
  CaptureStateMachine m(SchedulePlan(0, 5, 0, 3, 1));
  StepRun run = RunSteps(m, 10);
  ASSERT_EQ(run.windows.size(), 1u);
  EXPECT_EQ(run.windows[0], std::make_pair(uint64_t{5}, uint64_t{7}));
  EXPECT_EQ(m.last_window().start_ns, 510u);
  EXPECT_EQ(m.last_window().end_ns, 750u);
}

TEST(CaptureStateMachine, ScheduleSkipFirstAndRepeatForever) {
  CaptureStateMachine m(SchedulePlan(2, 0, 0, 1, 0));  // every step after the first two
  StepRun run = RunSteps(m, 5);
  // Back-to-back active steps with no wait make one window: it stays open between them.
  EXPECT_EQ(run.windows.size(), 0u);
  EXPECT_EQ(m.phase(), Phase::kOn);
  EXPECT_EQ(m.last_window().first_step, 2u);
  EXPECT_EQ(m.last_window().last_step, 4u);
}

TEST(CaptureStateMachine, ScheduleWarmupWithoutWaitAlternates) {
  CaptureStateMachine m(SchedulePlan(0, 0, 1, 1, 3));
  StepRun run = RunSteps(m, 7);
  const Phase O = Phase::kOff, W = Phase::kWarmup, A = Phase::kOn;
  EXPECT_EQ(run.phases, (std::vector<Phase>{W, A, W, A, W, A, O}));
  EXPECT_EQ(run.windows.size(), 3u);
}

TEST(CaptureStateMachine, TimeWindowOpensAfterDelayForDuration) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kTime;
  plan.delay_ns = 100;
  plan.duration_ns = 50;
  CaptureStateMachine m(plan);
  EXPECT_FALSE(m.Start(1000));
  EXPECT_EQ(m.next_deadline(), 1100u);
  EXPECT_FALSE(m.Tick(1099));
  EXPECT_TRUE(m.Tick(1100));
  EXPECT_EQ(m.phase(), Phase::kOn);
  EXPECT_EQ(m.next_deadline(), 1150u);
  EXPECT_TRUE(m.Tick(1150));
  EXPECT_EQ(m.phase(), Phase::kOff);
  EXPECT_TRUE(m.finished());
  EXPECT_EQ(m.next_deadline(), UINT64_MAX);
}

TEST(CaptureStateMachine, NoDeadlineBeforeStart) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kTime;
  plan.delay_ns = 100;
  CaptureStateMachine m(plan);
  EXPECT_EQ(m.next_deadline(), UINT64_MAX);  // the control thread must not fire before Start
  m.Start(5);
  EXPECT_EQ(m.next_deadline(), 105u);
}

TEST(CaptureStateMachine, DelayOnlyCapturesToTheEnd) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kTime;
  plan.delay_ns = 10;
  CaptureStateMachine m(plan);
  m.Start(0);
  EXPECT_TRUE(m.Tick(10));
  EXPECT_EQ(m.next_deadline(), UINT64_MAX);
  EXPECT_TRUE(m.Finish(99));
  EXPECT_STREQ(m.last_window().end_reason, "exit");
}

TEST(CaptureStateMachine, ProfilerApiPairsAndRepeat) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kCudaProfilerApi;
  plan.range_end = CaptureRangeEnd::kRepeat;
  plan.max_windows = 2;
  CaptureStateMachine m(plan);
  m.Start(0);
  EXPECT_FALSE(m.ProfilerStop(1));  // stop before start: nothing
  EXPECT_TRUE(m.ProfilerStart(2));
  EXPECT_FALSE(m.ProfilerStart(3));  // nested start (runtime, then driver): one window
  EXPECT_TRUE(m.ProfilerStop(4));
  EXPECT_TRUE(m.ProfilerStart(5));
  EXPECT_TRUE(m.ProfilerStop(6));
  EXPECT_FALSE(m.ProfilerStart(7));  // limit reached
  EXPECT_EQ(m.windows_opened(), 2u);
  EXPECT_STREQ(m.last_window().end_reason, "cudaProfilerStop");
}

TEST(CaptureStateMachine, OnDemandOpensAndClosesAnyNumberOfTimes) {
  CapturePlan plan;
  plan.trigger = CaptureTrigger::kSignal;
  plan.max_windows = 0;
  CaptureStateMachine m(plan);
  m.Start(0);
  EXPECT_FALSE(m.ManualStop(1));
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(m.ManualStart(10 * i + 2));
    EXPECT_FALSE(m.ManualStart(10 * i + 3));
    EXPECT_TRUE(m.ManualStop(10 * i + 4));
  }
  EXPECT_EQ(m.windows_opened(), 3u);
  EXPECT_EQ(m.last_window().index, 2u);
  EXPECT_FALSE(m.finished());
}

TEST(CaptureStateMachine, OtherTriggersEventsAreIgnored) {
  CaptureStateMachine m(RangePlan(CaptureRangeEnd::kStop, 1));
  m.Start(0);
  EXPECT_FALSE(m.ProfilerStart(1));
  EXPECT_FALSE(m.ManualStart(2));
  EXPECT_EQ(m.phase(), Phase::kOff);
}

TEST(CaptureStateMachine, FinishClosesTheOpenWindowOnce) {
  CaptureStateMachine m(RangePlan(CaptureRangeEnd::kStop, 1));
  m.Start(0);
  m.RangeStart(5);
  EXPECT_TRUE(m.Finish(9));
  EXPECT_FALSE(m.Finish(10));
  EXPECT_EQ(m.last_window().end_ns, 9u);
  EXPECT_FALSE(m.RangeStart(11));
}

int g_opened = 0, g_closed = 0;

TEST(CaptureHooks, RegisteredHooksRunInOrder) {
  ASSERT_TRUE(AddCaptureWindowHooks([](const CaptureWindowInfo&, void*) { ++g_opened; },
                                    [](const CaptureWindowInfo&, void*) { ++g_closed; }, nullptr));
  CaptureWindowInfo w;
  RunCaptureWindowOpened(w);
  RunCaptureWindowClosed(w);
  RunCaptureWindowClosed(w);
  EXPECT_EQ(g_opened, 1);
  EXPECT_EQ(g_closed, 2);
  for (int i = 1; i < kMaxCaptureHooks; ++i) {
    ASSERT_TRUE(AddCaptureWindowHooks(nullptr, nullptr, nullptr));
  }
  EXPECT_FALSE(AddCaptureWindowHooks(nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace kp
