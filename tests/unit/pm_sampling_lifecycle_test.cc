// The PM sampler's thread and exit logic (inject/pm_sampling/pm_sampling.cc) on a fake session:
// the order in which a GPU's sampling ends (Stop, last decode, Close), idempotence of every
// ending path (context destroy, Shutdown from exit hook and from the tracer's finish, the
// destructor), a thread still in its set-up at shutdown, another session holding the counters,
// and that no order of these calls aborts or leaves a session open.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "inject/config/config.h"
#include "inject/log/log.h"
#include "inject/pm_sampling/pm_sampling.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"

namespace kp {
namespace {

using namespace std::chrono_literals;

// What every fake session did, in order ("start 0", "decode 0", "stop 0", "close 0", ...).
class Journal {
 public:
  void Add(const std::string& call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(call);
    changed_.notify_all();
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  size_t Count(const std::string& call) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count(calls_.begin(), calls_.end(), call);
  }
  // Waits (at most 5 s) until `call` happened `n` times.
  bool WaitFor(const std::string& call, size_t n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, 5s, [&] {
      return static_cast<size_t>(std::count(calls_.begin(), calls_.end(), call)) >= n;
    });
  }
  // The calls from the first `call` on.
  std::vector<std::string> From(const std::string& call) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(calls_.begin(), calls_.end(), call);
    return std::vector<std::string>(it, calls_.end());
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> calls_;
};

// Blocks a fake Start until released.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    open_cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    open_cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable open_cv_;
  bool open_ = false;
};

// What a fake Start and Decode do: the session's three outcomes of each.
enum class StartAs { kStarted, kBusy, kFailed };
enum class DecodeAs { kOk, kOverflow, kFailed };

struct Script {
  std::vector<StartAs> starts;  // one per Start call; the last repeats
  DecodeAs decode = DecodeAs::kOk;
  Gate* gate = nullptr;  // Start waits for it
};

class FakeSession final : public PmSession {
 public:
  FakeSession(uint32_t device, Journal* journal, Script* script, int attempt)
      : device_(device), journal_(journal), script_(script), attempt_(attempt) {}
  ~FakeSession() override { journal_->Add("free " + D()); }

  Status Start() override {
    journal_->Add("start " + D());
    if (script_->gate != nullptr) script_->gate->Wait();
    const StartAs r = script_->starts.empty()
                          ? StartAs::kStarted
                          : script_->starts[std::min<size_t>(attempt_, script_->starts.size() - 1)];
    busy_ = r == StartAs::kBusy;
    running_ = r == StartAs::kStarted;
    if (r == StartAs::kBusy) {
      return Status::Error("another process (or profiler) is sampling this GPU already");
    }
    if (r == StartAs::kFailed) return Status::Error("counters refused");
    return Status();
  }
  bool busy() const override {
    if (closed_) ADD_FAILURE() << "busy() after close";
    return busy_;
  }
  const std::string& chip() const override { return chip_; }
  const std::vector<std::string>& counters() const override { return counters_; }
  StatusOr<PmDecode> Decode(PmSampleBatch* batch) override {
    journal_->Add("decode " + D());
    if (closed_) ADD_FAILURE() << "decode after close";
    if (script_->decode == DecodeAs::kFailed) return Status::Error("decode failed");
    if (script_->decode == DecodeAs::kOverflow) return PmDecode::kOverflow;
    batch->start.push_back(next_);
    batch->end.push_back(next_ + 100);
    batch->values.push_back(1.0);
    batch->values.push_back(2.0);
    next_ += 100;
    return PmDecode::kOk;
  }
  void Stop() override {
    journal_->Add("stop " + D());
    if (!running_) ADD_FAILURE() << "stop of a session that does not run";
    running_ = false;
  }
  void Close() override {
    if (closed_) return;
    closed_ = true;
    running_ = false;
    journal_->Add("close " + D());
  }

 private:
  std::string D() const { return std::to_string(device_); }
  const uint32_t device_;
  Journal* journal_;
  Script* script_;
  const int attempt_;
  bool busy_ = false, running_ = false, closed_ = false;
  uint64_t next_ = 1000;
  std::string chip_ = "FAKE";
  std::vector<std::string> counters_ = {"a.sum", "b.avg"};
};

CUcontext Ctx(uintptr_t n) { return reinterpret_cast<CUcontext>(n); }

class PmSamplingLifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogStream(devnull_ = std::fopen("/dev/null", "w"));
    SetNoticeSink([this](LogSeverity, std::string_view, const std::string& text) {
      std::lock_guard<std::mutex> lock(mu_);
      notices_.push_back(text);
    });
  }
  void TearDown() override {
    SetNoticeSink(nullptr);
    SetLogStream(nullptr);
    if (devnull_ != nullptr) std::fclose(devnull_);
  }

  std::unique_ptr<PmSampling> Make(PmSampling::Options options = {}) {
    Config config;
    config.pm_sampling = {"a.sum", "b.avg"};
    config.pm_interval_us = 10;  // decodes every 10 ms
    options.make_session = [this](uint32_t device) {
      int attempt = 0;
      {
        std::lock_guard<std::mutex> lock(attempts_mu_);
        attempt = attempts_[device]++;
      }
      journal_.Add("make " + std::to_string(device));
      return std::make_unique<FakeSession>(device, &journal_, &script_, attempt);
    };
    options.register_exit_hook = [this] { ++hooks_; };
    options.busy_retry_first = 10ms;
    options.busy_retry_max = 20ms;
    auto post = [this](std::function<void(TraceEncoder&)> task) {
      std::lock_guard<std::mutex> lock(mu_);
      task(encoder_);
    };
    return PmSampling::Create(config, post, std::move(options));
  }

  size_t Notices(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::count_if(notices_.begin(), notices_.end(),
                         [&](const std::string& n) { return n.find(part) != std::string::npos; });
  }
  uint64_t DroppedSamples() {
    std::lock_guard<std::mutex> lock(mu_);
    return encoder_.stats().pm_samples_dropped;
  }

  FILE* devnull_ = nullptr;
  Journal journal_;
  Script script_;
  std::mutex attempts_mu_;
  std::map<uint32_t, int> attempts_;
  std::atomic<int> hooks_{0};
  std::mutex mu_;
  std::vector<std::string> notices_;
  MemoryChunkSink sink_;
  TraceEncoder encoder_{&sink_, TraceEncoder::Options()};
};

TEST_F(PmSamplingLifecycle, ShutdownStopsDecodesOnceMoreThenCloses) {
  auto sampling = Make();
  ASSERT_NE(sampling, nullptr);
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("decode 0", 2));
  sampling->Shutdown();
  EXPECT_EQ(journal_.From("stop 0"),
            (std::vector<std::string>{"stop 0", "decode 0", "close 0", "free 0"}));
  EXPECT_EQ(hooks_.load(), 2);  // once when sampling started, once after the first decode
  // Idempotent: the tracer's finish after the exit hook, a late context destroy, the destructor.
  sampling->Shutdown();
  sampling->OnContextDestroying(Ctx(1));
  sampling->OnContextCreated(Ctx(2), 0);
  sampling.reset();
  EXPECT_EQ(journal_.Count("make 0"), 1u);
  EXPECT_EQ(journal_.Count("stop 0"), 1u);
  EXPECT_EQ(journal_.Count("close 0"), 1u);
}

// A spent wait abandons only a sampler still in its set-up: samplers already decoding are
// waited for, and each ends with its last decode (its samples are not lost). Every GPU's start
// and first decode registers the exit hook again (libnvperf may register per chip).
TEST_F(PmSamplingLifecycle, NoWaitLeftStillEndsDecodingSamplersWithTheirLastDecode) {
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  sampling->OnContextCreated(Ctx(2), 1);
  ASSERT_TRUE(journal_.WaitFor("decode 0", 2));
  ASSERT_TRUE(journal_.WaitFor("decode 1", 2));
  EXPECT_EQ(hooks_.load(), 4);
  sampling->Shutdown(0ms);
  // GPU 0 ends first, then GPU 1, each in the documented order.
  EXPECT_EQ(journal_.From("stop 0"),
            (std::vector<std::string>{"stop 0", "decode 0", "close 0", "free 0", "stop 1",
                                      "decode 1", "close 1", "free 1"}));
}

TEST_F(PmSamplingLifecycle, SamplesReachTheEncoderAfterTheConfig) {
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("decode 0", 3));
  sampling->Shutdown();
  std::lock_guard<std::mutex> lock(mu_);
  encoder_.Finish(FooterInfo());
  // Every decode gave one sample; the last one came after Stop.
  EXPECT_GE(encoder_.stats().records_written, journal_.Count("decode 0"));
}

TEST_F(PmSamplingLifecycle, LastContextDestroyEndsTheDeviceAndLaterContextsStartNothing) {
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  sampling->OnContextCreated(Ctx(2), 0);
  ASSERT_TRUE(journal_.WaitFor("decode 0"));
  sampling->OnContextDestroying(Ctx(1));
  EXPECT_EQ(journal_.Count("stop 0"), 0u);  // one context left
  sampling->OnContextDestroying(Ctx(2));
  EXPECT_EQ(journal_.From("stop 0"),
            (std::vector<std::string>{"stop 0", "decode 0", "close 0", "free 0"}));
  sampling->OnContextCreated(Ctx(3), 0);
  sampling->Shutdown();
  sampling.reset();
  EXPECT_EQ(journal_.Count("make 0"), 1u);
  EXPECT_EQ(journal_.Count("close 0"), 1u);
}

TEST_F(PmSamplingLifecycle, ShutdownDuringSetUpIsBoundedAndTheThreadClosesItsSession) {
  Gate gate;
  script_.gate = &gate;
  PmSampling::Options options;
  options.exit_wait = 50ms;
  auto sampling = Make(options);
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("start 0"));
  const auto t0 = std::chrono::steady_clock::now();
  sampling->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(journal_.Count("close 0"), 0u);  // still in Start: not touched from here
  gate.Open();
  ASSERT_TRUE(journal_.WaitFor("close 0"));
  sampling.reset();  // waits for the detached thread
  const std::vector<std::string> after = journal_.From("start 0");
  EXPECT_EQ(after, (std::vector<std::string>{"start 0", "stop 0", "close 0", "free 0"}));
}

// A termination signal's finish passes a short wait: one deadline for all GPUs, not one each,
// so two samplers stuck in their set-up cost the wait once.
TEST_F(PmSamplingLifecycle, ShortShutdownWaitIsOneDeadlineForAllGpus) {
  Gate gate;
  script_.gate = &gate;
  PmSampling::Options options;
  options.exit_wait = 60s;  // the default path would wait this long: not taken here
  auto sampling = Make(options);
  sampling->OnContextCreated(Ctx(1), 0);
  sampling->OnContextCreated(Ctx(2), 1);
  ASSERT_TRUE(journal_.WaitFor("start 0"));
  ASSERT_TRUE(journal_.WaitFor("start 1"));
  const auto t0 = std::chrono::steady_clock::now();
  sampling->Shutdown(500ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 450ms);
  EXPECT_LT(took, 900ms);  // two waits of 500 ms each would take 1 s
  gate.Open();
  ASSERT_TRUE(journal_.WaitFor("close 0"));
  ASSERT_TRUE(journal_.WaitFor("close 1"));
  sampling.reset();
}

TEST_F(PmSamplingLifecycle, BusyGpuSaysSoOnceAndSamplesWhenFree) {
  script_.starts = {StartAs::kBusy, StartAs::kBusy, StartAs::kStarted};
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("decode 0"));
  sampling->Shutdown();
  EXPECT_EQ(Notices("another process (or profiler) is sampling this GPU"), 1u);
  EXPECT_EQ(Notices("the other session ended"), 1u);
  EXPECT_EQ(journal_.Count("make 0"), 3u);
  EXPECT_EQ(journal_.Count("close 0"), 3u);  // each busy attempt freed what it set up
  EXPECT_EQ(journal_.Count("stop 0"), 1u);
}

TEST_F(PmSamplingLifecycle, BusyGpuThatNeverFreesEndsQuietlyAtShutdown) {
  script_.starts = {StartAs::kBusy};
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("start 0", 2));
  sampling->Shutdown();
  sampling.reset();
  EXPECT_EQ(Notices("another process (or profiler) is sampling this GPU"), 1u);
  EXPECT_EQ(journal_.Count("stop 0"), 0u);
  EXPECT_EQ(journal_.Count("make 0"), journal_.Count("close 0"));
  EXPECT_EQ(hooks_.load(), 0);
}

TEST_F(PmSamplingLifecycle, FailedStartSaysSoOnceAndClosesWhatItSetUp) {
  script_.starts = {StartAs::kFailed};
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("close 0"));
  sampling->Shutdown();
  sampling.reset();
  EXPECT_EQ(Notices("counters refused"), 1u);
  EXPECT_EQ(journal_.Count("make 0"), 1u);
  EXPECT_EQ(journal_.Count("stop 0"), 0u);
}

TEST_F(PmSamplingLifecycle, OverflowEndsTheSessionOnItsThreadWithoutAnotherDecode) {
  script_.decode = DecodeAs::kOverflow;
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("close 0"));
  sampling->Shutdown();
  sampling.reset();
  EXPECT_EQ(journal_.From("decode 0"),
            (std::vector<std::string>{"decode 0", "stop 0", "close 0", "free 0"}));
  EXPECT_EQ(Notices("overflowed"), 1u);
}

TEST_F(PmSamplingLifecycle, FailingDecodesAreCountedSaidOnceAndEndAfterTen) {
  script_.decode = DecodeAs::kFailed;
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  ASSERT_TRUE(journal_.WaitFor("close 0"));
  sampling.reset();
  EXPECT_EQ(journal_.Count("decode 0"), 10u);
  EXPECT_EQ(Notices("decode failed"), 1u);
  EXPECT_EQ(Notices("decoding failed 10 times in a row"), 1u);
  EXPECT_EQ(DroppedSamples(), 10u);  // one dropped per failed decode
}

TEST_F(PmSamplingLifecycle, TwoGpusEachEndInOrder) {
  auto sampling = Make();
  sampling->OnContextCreated(Ctx(1), 0);
  sampling->OnContextCreated(Ctx(2), 1);
  ASSERT_TRUE(journal_.WaitFor("decode 0"));
  ASSERT_TRUE(journal_.WaitFor("decode 1"));
  sampling->Shutdown();
  for (const std::string d : {"0", "1"}) {
    EXPECT_EQ(journal_.Count("stop " + d), 1u);
    EXPECT_EQ(journal_.Count("close " + d), 1u);
  }
}

TEST_F(PmSamplingLifecycle, RefusedNextToMetricsAndOffWhenNotAsked) {
  Config config;
  EXPECT_EQ(PmSampling::Create(config, [](auto) {}), nullptr);
  config.pm_sampling = {"a.sum"};
  config.metrics = {"dram__bytes_read.sum"};
  EXPECT_EQ(PmSampling::Create(config, [](auto) {}), nullptr);
  EXPECT_EQ(Notices("cannot run together"), 1u);
}

// Every order of context creation, context destruction, shutdowns from two threads at once
// and destruction, at every moment of the set-up: nothing aborts, every session made is closed
// once, and no session is stopped twice.
TEST_F(PmSamplingLifecycle, NoOrderAbortsOrLeavesASessionOpen) {
  enum Op { kCreate, kDestroy, kShutdown, kShutdownTwice };
  std::vector<Op> ops = {kCreate, kDestroy, kShutdown, kShutdownTwice};
  std::sort(ops.begin(), ops.end());
  int runs = 0;
  do {
    for (auto pause : {0ms, 3ms, 25ms}) {
      Journal journal;
      Script script;
      PmSampling::Options options;
      options.exit_wait = 20ms;
      options.destroy_wait = 20ms;
      options.make_session = [&](uint32_t device) {
        journal.Add("make");
        return std::make_unique<FakeSession>(device, &journal, &script, 0);
      };
      Config config;
      config.pm_sampling = {"a.sum", "b.avg"};
      config.pm_interval_us = 10;
      auto sampling = PmSampling::Create(
          config, [](auto) {}, options);
      for (Op op : ops) {
        switch (op) {
          case kCreate:
            sampling->OnContextCreated(Ctx(1), 0);
            break;
          case kDestroy:
            sampling->OnContextDestroying(Ctx(1));
            break;
          case kShutdown:
            sampling->Shutdown();
            break;
          case kShutdownTwice: {
            std::thread other([&] { sampling->Shutdown(); });
            sampling->Shutdown();
            other.join();
            break;
          }
        }
        std::this_thread::sleep_for(pause);
      }
      sampling.reset();
      EXPECT_EQ(journal.Count("make"), journal.Count("close 0"));
      EXPECT_LE(journal.Count("stop 0"), 1u);
      ++runs;
    }
  } while (std::next_permutation(ops.begin(), ops.end()));
  EXPECT_EQ(runs, 24 * 3);
}

// The exit order itself, in a child process: a fake session whose Start registers an exit
// handler (as libcupti's loading of libnvperf_* registers that library's destructors during
// the real set-up) and which aborts when used after that handler ran. The process exit hook,
// registered after the set-up, must end the sampling (stop, last decode, close) before it.
std::atomic<bool> g_library_alive{false};
std::atomic<int> g_exit_decodes{0};

void Say(const char* what) {
  std::fputs(what, stderr);
  std::fflush(stderr);
}

class LibraryBackedSession final : public PmSession {
 public:
  Status Start() override {
    g_library_alive = true;
    std::atexit([] {
      g_library_alive = false;
      Say("[library destroyed]");
    });
    return Status();
  }
  bool busy() const override { return false; }
  const std::string& chip() const override { return chip_; }
  const std::vector<std::string>& counters() const override { return counters_; }
  StatusOr<PmDecode> Decode(PmSampleBatch*) override {
    Use("[decode]");
    ++g_exit_decodes;
    return PmDecode::kOk;
  }
  void Stop() override { Use("[stop]"); }
  void Close() override {
    if (closed_) return;
    closed_ = true;
    Use("[close]");
  }

 private:
  static void Use(const char* what) {
    if (!g_library_alive) {
      Say("[used after the library's destructor]");
      std::abort();
    }
    Say(what);
  }
  bool closed_ = false;
  std::string chip_ = "FAKE";
  std::vector<std::string> counters_ = {"a.sum"};
};

PmSampling* g_tracer_like = nullptr;  // what a handler registered before the set-up ends

[[noreturn]] void SampleThenExit(bool process_exit_hook, void (*before_sampling)()) {
  SetLogStream(std::fopen("/dev/null", "w"));
  if (before_sampling != nullptr) before_sampling();
  Config config;
  config.pm_sampling = {"a.sum"};
  config.pm_interval_us = 10;
  PmSampling::Options options;
  options.process_exit_hook = process_exit_hook;
  options.make_session = [](uint32_t) { return std::make_unique<LibraryBackedSession>(); };
  // Never destroyed, like the injector's.
  PmSampling::Post post = [](std::function<void(TraceEncoder&)>) {};
  g_tracer_like = PmSampling::Create(config, post, options).release();
  g_tracer_like->OnContextCreated(Ctx(1), 0);
  for (int i = 0; i < 500 && g_exit_decodes.load() < 2; ++i) std::this_thread::sleep_for(2ms);
  std::exit(0);
}

TEST(PmSamplingExit, HookEndsSamplingBeforeDestructorsRegisteredDuringSetUp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(SampleThenExit(/*process_exit_hook=*/true, nullptr), ::testing::ExitedWithCode(0),
              "\\[stop\\]\\[decode\\]\\[close\\]\\[library destroyed\\]");
}

// Without it, an exit handler registered before the set-up (where the tracer's is, at cuInit)
// comes too late: the sampler meets the destroyed library. This is the abort the H200 runs
// showed (status 134).
TEST(PmSamplingExit, AHandlerRegisteredBeforeSetUpComesTooLate) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(SampleThenExit(/*process_exit_hook=*/false,
                             [] {
                               std::atexit([] {
                                 if (g_tracer_like != nullptr) g_tracer_like->Shutdown();
                               });
                             }),
              ::testing::KilledBySignal(SIGABRT), "used after the library's destructor");
}

}  // namespace
}  // namespace kp
