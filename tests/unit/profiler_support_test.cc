// RetryWhileBusy (inject/cupti/profiler_support.h) with a scripted CUPTI call and a recorded
// pause: busy answers are retried a bounded number of times, other answers are not.
#include "inject/cupti/profiler_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace kp {
namespace {

struct Scripted {
  std::vector<CUptiResult> answers;  // the last one repeats
  size_t calls = 0;
  CUptiResult operator()() {
    const CUptiResult r = answers[std::min(calls, answers.size() - 1)];
    ++calls;
    return r;
  }
};

TEST(RetryWhileBusy, ASetUpThatFreesTheCountersLetsTheRetryWin) {
  Scripted call{{CUPTI_ERROR_HARDWARE_BUSY, CUPTI_ERROR_HARDWARE_BUSY, CUPTI_SUCCESS}};
  std::vector<std::chrono::milliseconds> pauses;
  const CUptiResult r = RetryWhileBusy(
      [&] { return call(); }, [&](std::chrono::milliseconds ms) { pauses.push_back(ms); }, 1234);
  EXPECT_EQ(r, CUPTI_SUCCESS);
  EXPECT_EQ(call.calls, 3u);
  ASSERT_EQ(pauses.size(), 2u);
  EXPECT_EQ(pauses[0], BusyPause(0, 1234));
  EXPECT_EQ(pauses[1], BusyPause(1, 1234));
}

TEST(RetryWhileBusy, CountersHeldForGoodFailAfterTheLastRetry) {
  Scripted call{{CUPTI_ERROR_HARDWARE_BUSY}};
  std::chrono::milliseconds waited{0};
  const CUptiResult r = RetryWhileBusy([&] { return call(); },
                                       [&](std::chrono::milliseconds ms) { waited += ms; }, 7);
  EXPECT_EQ(r, CUPTI_ERROR_HARDWARE_BUSY);
  EXPECT_EQ(call.calls, static_cast<size_t>(kBusyRetries) + 1);
  // Long enough to outlast another process's availability query (~0.1 s), short enough for a
  // set-up call.
  EXPECT_GE(waited.count(), 350);
  EXPECT_LE(waited.count(), 710);
}

TEST(RetryWhileBusy, OtherAnswersAreNotRetried) {
  for (CUptiResult answer :
       {CUPTI_SUCCESS, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, CUPTI_ERROR_INVALID_PARAMETER}) {
    Scripted call{{answer}};
    int pauses = 0;
    EXPECT_EQ(
        RetryWhileBusy([&] { return call(); }, [&](std::chrono::milliseconds) { ++pauses; }, 1),
        answer);
    EXPECT_EQ(call.calls, 1u);
    EXPECT_EQ(pauses, 0);
  }
}

// Two processes' retries must fall apart: after the bases of 50, 100 and 200 ms, the jitter
// spans 0-120 ms (comparable to the ~0.1 s a query holds the counters), differs between seeds
// and is drawn afresh for every attempt, so two processes that collided once do not keep the
// same offset.
TEST(RetryWhileBusy, JitterSpansItsRangeAndDiffersBetweenProcessesAndAttempts) {
  for (int a = 0; a < kBusyRetries; ++a) {
    long lo = 1000, hi = -1;
    for (uint64_t seed = 0; seed < 2000; ++seed) {
      const long jitter = static_cast<long>(BusyPause(a, seed).count()) - (50L << a);
      lo = std::min(lo, jitter);
      hi = std::max(hi, jitter);
    }
    EXPECT_EQ(lo, 0) << "attempt " << a;
    EXPECT_EQ(hi, 120) << "attempt " << a;
  }
  std::set<long> first;
  int offsets_changed = 0;
  for (uint64_t seed = 1000; seed < 1032; ++seed) {
    first.insert(static_cast<long>(BusyPause(0, seed).count()));
    const long offset0 = BusyPause(0, seed).count() - BusyPause(0, seed + 7).count();
    const long offset1 = BusyPause(1, seed).count() - BusyPause(1, seed + 7).count();
    if (offset0 != offset1) ++offsets_changed;
  }
  EXPECT_GE(first.size(), 20u);
  EXPECT_GE(offsets_changed, 28);
}

}  // namespace
}  // namespace kp
