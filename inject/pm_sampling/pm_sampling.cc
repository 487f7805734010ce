#include "inject/pm_sampling/pm_sampling.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <thread>

#include "inject/log/log.h"

namespace kp {
namespace {

constexpr const char* kComponent = "pm sampling";
constexpr const char* kOff = "PM sampling is off for this GPU, tracing goes on";
constexpr int kMaxDecodeFailures = 10;

// The instance the exit hook ends (the injector's; never destroyed while the process runs).
std::atomic<PmSampling*> g_exit_instance{nullptr};
// In a fork child the sampler threads do not exist and CUPTI calls hang: the hook does nothing.
std::atomic<bool> g_forked{false};
std::once_flag g_atfork_once;

void OnForkChild() { g_forked.store(true); }

std::string Gpu(uint32_t device) { return "GPU " + std::to_string(device) + ": "; }

// A decode that did not fail and said `what`.
bool Is(const StatusOr<PmDecode>& decoded, PmDecode what) {
  return decoded.ok() && decoded.value() == what;
}

}  // namespace

class PmSampling::DeviceSampler {
 public:
  DeviceSampler(uint32_t device, PmSampling* owner)
      : device_(device), owner_(owner), thread_([this] { Run(); }) {}

  ~DeviceSampler() {
    Finish(std::chrono::hours(24));
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return exited_; });  // an abandoned thread closes its session
  }

  // Ends sampling on this GPU (see pm_sampling.h). Idempotent; never throws.
  void Finish(std::chrono::milliseconds wait) noexcept {
    try {
      std::lock_guard<std::mutex> once(finish_mu_);
      if (finished_) return;
      finished_ = true;
      bool ready = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        stop_ = true;
        wake_.notify_all();
        ready = done_.wait_for(lock, wait, [this] { return sampled_; });
        // A thread past its set-up leaves its loop at this wake-up (its decode in progress, if
        // any, is bounded): wait for it even when `wait` is spent, so its last samples are not
        // lost. Only a thread still inside its set-up is left to end its session itself.
        if (!ready && in_loop_) {
          done_.wait(lock, [this] { return sampled_; });
          ready = true;
        }
        if (!ready) abandoned_ = true;
      }
      if (!ready) {
        // Still inside its set-up: it closes the session itself when that returns. The
        // sampler object outlives it (never destroyed while the process runs; the destructor
        // waits for it).
        Log(LogSeverity::kDebug,
            "pm sampling: GPU %u: the sampler is still setting up; it ends on its own", device_);
        thread_.detach();
        return;
      }
      thread_.join();
      EndSession(/*drain=*/true);
    } catch (...) {
    }
  }

 private:
  void Run() noexcept {
    pthread_setname_np(pthread_self(), "kp-pm-sampling");  // as top -H, perf and gdb show it
    try {
      Sample();
    } catch (...) {
    }
    bool close_here = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sampled_ = true;
      close_here = abandoned_;
      done_.notify_all();
    }
    try {
      if (close_here) EndSession(/*drain=*/false);
    } catch (...) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    exited_ = true;
    done_.notify_all();
  }

  bool StopRequested() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

  // Whatever the session holds, ended in the documented order: Stop, the last decode (posted
  // when `drain`), Disable, free.
  void EndSession(bool drain) {
    if (!session_) return;
    if (running_) {
      running_ = false;
      session_->Stop();
      // The last decode: what it says was said and counted there, and the session ends anyway.
      if (drain && !overflowed_) static_cast<void>(DecodeAndPost());
    }
    session_->Close();
    session_.reset();
  }

  // The thread's whole life: set-up (tried again while another session holds the counters),
  // then a decode every period until stopped. Returns with the session still running when
  // stopped, so that Finish ends it on its own thread after the join.
  void Sample() {
    const Options& options = owner_->options_;
    const auto t0 = std::chrono::steady_clock::now();
    bool said_busy = false;
    std::chrono::milliseconds retry = options.busy_retry_first;
    while (true) {
      if (StopRequested()) return;
      session_ = options.make_session(device_);
      if (!session_) return;
      const Status started = session_->Start();
      if (started.ok()) break;
      const bool busy = session_->busy();
      session_->Close();
      session_.reset();
      if (!busy) {
        LogNotice(LogSeverity::kError, kComponent, Gpu(device_) + started.message(), kOff);
        return;
      }
      // Another session holds the counters (another process sampling, a compile worker that
      // inherited KP_PM_SAMPLING, ncu): said once, then tried again until it ends.
      if (!said_busy) {
        said_busy = true;
        LogNotice(LogSeverity::kWarning, kComponent, Gpu(device_) + started.message(),
                  "PM sampling is off for this GPU while that lasts (kp tries again from time to "
                  "time), tracing goes on");
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, retry, [this] { return stop_; })) return;
      retry = std::min(retry * 2, options.busy_retry_max);
    }
    running_ = true;
    {
      // From here on Finish waits for this thread however long its wait (see Finish).
      std::lock_guard<std::mutex> lock(mu_);
      in_loop_ = true;
    }
    owner_->RegisterExitHook();  // after this GPU's set-up
    if (said_busy) {
      LogNotice(LogSeverity::kInfo, kComponent,
                Gpu(device_) + "the other session ended; sampling from now on");
    }
    const double setup_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Log(LogSeverity::kDebug,
        "pm sampling: GPU %u (%s) samples %zu counters every %llu us (set-up %.0f ms)", device_,
        session_->chip().c_str(), session_->counters().size(),
        static_cast<unsigned long long>(owner_->interval_ns_ / 1000), setup_ms);

    // The config record goes first; the samples posted later find its id.
    PmSampleConfigInfo info;
    info.device = device_;
    info.counter_names = session_->counters();
    info.interval_ns = owner_->interval_ns_;
    info.chip = session_->chip();
    auto id = config_id_;
    owner_->post_([id, info](TraceEncoder& enc) { *id = enc.AddPmSampleConfig(info); });

    const std::chrono::milliseconds period(PmDecodePeriodMs(owner_->interval_ns_));
    int failures = 0;  // consecutive failed decodes
    bool decoded = false;
    // Decodes on a fixed cadence: a decode that took long shortens the next wait instead of
    // adding to it (at 100 us a decode takes about as long as the period).
    auto next = std::chrono::steady_clock::now() + period;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (wake_.wait_until(lock, next, [this] { return stop_; }))
          return;  // Finish (or the abandoned path) ends the session
      }
      next = std::max(next + period, std::chrono::steady_clock::now());
      const StatusOr<PmDecode> r = DecodeAndPost();
      if (Is(r, PmDecode::kOk) && !decoded) {
        decoded = true;
        owner_->RegisterExitHook();  // after this GPU's first decode
      }
      failures = r.ok() ? 0 : failures + 1;
      if (Is(r, PmDecode::kOverflow)) break;  // the buffer stays unusable: said once, counted
      if (failures >= kMaxDecodeFailures) {
        LogNotice(LogSeverity::kError, kComponent,
                  Gpu(device_) + "decoding failed " + std::to_string(failures) +
                      " times in a row; sampling stopped here",
                  "tracing goes on");
        break;
      }
    }
    // Sampling ended on its own: give the counters back now.
    EndSession(/*drain=*/false);
  }

  // One decode; the batch goes to the encoder thread.
  StatusOr<PmDecode> DecodeAndPost() {
    auto batch = std::make_shared<PmSampleBatch>();
    const StatusOr<PmDecode> r = session_->Decode(batch.get());
    if (Is(r, PmDecode::kOverflow)) {
      overflowed_ = true;
      LogNotice(LogSeverity::kWarning, kComponent,
                Gpu(device_) +
                    "the hardware sample buffer overflowed (decoding fell behind); sampling "
                    "stopped here (a longer KP_PM_INTERVAL_US avoids this)",
                "tracing goes on");
    } else if (!r.ok()) {
      ++batch->dropped;
      if (!decode_error_reported_) {
        decode_error_reported_ = true;  // one line, the first cause; the losses are counted
        LogNotice(LogSeverity::kWarning, kComponent,
                  Gpu(device_) + r.status().message() + "; samples of that decode lost",
                  "sampling goes on");
      }
    }
    if (batch->empty()) return r;
    auto id = config_id_;
    const uint32_t device = device_;
    const uint32_t n = static_cast<uint32_t>(session_->counters().size());
    owner_->post_([id, batch, device, n](TraceEncoder& enc) {
      PmSampleRecord rec;
      rec.config = *id;
      rec.device = device;
      rec.num_values = n;
      for (size_t i = 0; i < batch->start.size(); ++i) {
        rec.start = batch->start[i];
        rec.end = batch->end[i];
        rec.values = batch->values.data() + i * n;
        enc.AddPmSample(rec);
      }
      enc.stats().pm_samples_dropped += batch->dropped;
      enc.stats().pm_buffer_overflows += batch->overflows;
    });
    return r;
  }

  const uint32_t device_;
  PmSampling* const owner_;

  // Used by the sampler thread until `sampled_`, then by Finish (after the join) or, when
  // abandoned, by the thread again.
  std::unique_ptr<PmSession> session_;
  bool running_ = false;  // the session was started and not stopped
  bool overflowed_ = false;
  bool decode_error_reported_ = false;
  // Written on the encoder thread by the config task, read there by the sample tasks.
  std::shared_ptr<uint32_t> config_id_ = std::make_shared<uint32_t>(0);

  std::mutex mu_;
  std::condition_variable wake_;  // stop_ set
  std::condition_variable done_;  // sampled_ or exited_ set
  bool stop_ = false;
  bool sampled_ = false;    // Sample() has returned
  bool abandoned_ = false;  // Finish stopped waiting: the thread ends its session itself
  bool in_loop_ = false;    // the set-up is over: Finish waits for the thread, never abandons it
  bool exited_ = false;     // Run() is about to return; nothing touches `this` after it
  std::mutex finish_mu_;
  bool finished_ = false;
  std::thread thread_;  // last: started once everything above exists
};

PmSampling::PmSampling(const Config& config, Post post, Options options)
    : counters_(config.pm_sampling),
      gpu_set_(config.pm_sampling_gpu_set),
      interval_ns_(uint64_t{config.pm_interval_us} * 1000),
      post_(std::move(post)),
      options_(std::move(options)) {
  if (!options_.make_session) {
    options_.make_session = [counters = counters_, gpu_set = gpu_set_,
                             interval = interval_ns_](uint32_t device) {
      return MakeCuptiPmSession(device, counters, gpu_set, interval);
    };
  }
}

PmSampling::~PmSampling() {
  Shutdown();
  PmSampling* self = this;
  g_exit_instance.compare_exchange_strong(self, nullptr);
  std::lock_guard<std::mutex> lock(mu_);
  devices_.clear();  // each waits for its thread
}

std::unique_ptr<PmSampling> PmSampling::Create(const Config& config, Post post) {
  Options options;
  options.process_exit_hook = true;
  return Create(config, std::move(post), std::move(options));
}

std::unique_ptr<PmSampling> PmSampling::Create(const Config& config, Post post, Options options) {
  if (config.pm_sampling.empty()) return nullptr;
  if (!config.metrics.empty()) {
    // Both need the GPU's performance counters: whichever starts first holds them, and the other
    // fails with CUPTI_ERROR_HARDWARE_BUSY (seen on the H200).
    LogNotice(LogSeverity::kError, kComponent,
              "KP_PM_SAMPLING and KP_METRICS cannot run together (both need the GPU's "
              "performance counters); drop one of them",
              "PM sampling is off, metrics and tracing go on");
    return nullptr;
  }
  const bool exit_hook = options.process_exit_hook;
  if (exit_hook) options.register_exit_hook = [] { std::atexit(&PmSampling::ExitHook); };
  std::unique_ptr<PmSampling> sampling(new PmSampling(config, std::move(post), std::move(options)));
  if (exit_hook) {
    std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, &OnForkChild); });
    g_exit_instance.store(sampling.get());
  }
  return sampling;
}

void PmSampling::ExitHook() {
  if (g_forked.load()) return;
  if (PmSampling* sampling = g_exit_instance.load()) sampling->Shutdown();
}

// Every GPU's set-up and first decode may make libcupti/libnvperf register exit destructors of
// their own (per chip, lazily), so the hook is registered again after each of them: the last
// registration runs first at exit. Shutdown is idempotent, so the extra calls do nothing.
void PmSampling::RegisterExitHook() {
  if (!options_.register_exit_hook) return;
  try {
    options_.register_exit_hook();
  } catch (...) {
  }
}

void PmSampling::OnContextCreated(CUcontext context, uint32_t device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  context_devices_[context] = device;
  ++live_contexts_[device];
  if (devices_.count(device) != 0) return;
  devices_[device] = std::make_unique<DeviceSampler>(device, this);
}

void PmSampling::OnContextDestroying(CUcontext context) {
  DeviceSampler* ending = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = context_devices_.find(context);
    if (it == context_devices_.end()) return;
    const uint32_t device = it->second;
    context_devices_.erase(it);
    if (--live_contexts_[device] > 0) return;
    auto d = devices_.find(device);
    if (d == devices_.end()) return;
    // Left in the map, finished: a context created later on this device does not restart it.
    ending = d->second.get();
  }
  // In CONTEXT_DESTROY_STARTING: the context still exists while the session is stopped,
  // drained and disabled here.
  ending->Finish(options_.destroy_wait);
}

void PmSampling::Shutdown() { Shutdown(options_.exit_wait); }

void PmSampling::Shutdown(std::chrono::milliseconds wait) {
  if (g_forked.load() && g_exit_instance.load() == this) return;
  try {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline = Clock::now() + wait;
    std::lock_guard<std::mutex> whole(shutdown_mu_);
    std::vector<DeviceSampler*> samplers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shut_down_) return;
      shut_down_ = true;
      for (auto& [device, sampler] : devices_) samplers.push_back(sampler.get());
    }
    // One deadline for all GPUs: a sampler still setting up after it ends its session itself.
    for (DeviceSampler* sampler : samplers) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max(deadline - Clock::now(), Clock::duration::zero()));
      sampler->Finish(left);
    }
  } catch (...) {
  }
}

}  // namespace kp
