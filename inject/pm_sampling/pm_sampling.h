// pm_sampling.h: KP_PM_SAMPLING, device-wide counters sampled over time (CUPTI PM sampling,
// cupti_pmsampling.h; docs/pm-sampling.md).
//
// One sampler per GPU, each on its own kp-owned thread: set-up (counter availability, config
// image, Enable, SetConfig, Start) and every periodic decode run there, never on a CUDA-calling
// thread. A device's sampler starts at the first context created on it. Decoded samples go to
// the encoder thread in batches (Post), so the trace gets them in order after the sampler's
// config record.
//
// Ending a GPU's sampling (Finish, at the last context's destruction or in Shutdown) always
// goes: the thread leaves its loop and is joined, then on the caller's thread Stop, one last
// decode, Disable, free. A thread past its set-up is always waited for (it leaves its loop at the
// wake-up). A thread still inside its set-up (CUPTI calls that cannot be interrupted) is waited
// for a bounded time; if it is not done by then, it ends the session itself when the set-up
// returns. Nothing here throws or terminates.
//
// Exit: the tracer's finish sequence (FinishTrace) calls Shutdown before the last activity flush
// and the footer. Shutdown also runs from an exit hook that each GPU's sampler thread registers
// with atexit once its sampling has started and once more after its first decode: exit handlers run
// last-registered first, and libcupti loads libnvperf_* (and builds its own profiler state) only
// during that set-up, after kp's exit handler was registered at cuInit, so their destructors
// would otherwise run while the sampler still decodes. The hook ends sampling before them.
//
// PM sampling is per device, not per process: the first process to enable it on a GPU samples
// it; in the others CUPTI answers HARDWARE_BUSY and kp says so in one line (tracing goes on) and
// tries again from time to time.
#pragma once

#include <cupti.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "inject/config/config.h"
#include "inject/pm_sampling/pm_session.h"
#include "inject/trace/trace_encoder.h"

namespace kp {

class PmSampling {
 public:
  using Post = std::function<void(std::function<void(TraceEncoder&)> task)>;

  struct Options {
    // Makes each GPU's session (default: the CUPTI one, pm_sampler.cc).
    PmSessionFactory make_session;
    // The process's instance: its Shutdown runs from an exit handler (ExitHook) registered
    // with std::atexit on a sampler thread once sampling has started and again after the first
    // decode. Create(config, post) sets it; at most one instance per process.
    bool process_exit_hook = false;
    // Otherwise (tests): called instead of std::atexit at those two moments.
    std::function<void()> register_exit_hook;
    // How long Shutdown (exit) and a context's destruction wait for a sampler thread that is
    // still in its set-up (about 0.5 s on the H200).
    std::chrono::milliseconds exit_wait{3000};
    std::chrono::milliseconds destroy_wait{1000};
    // A GPU whose counters another session holds is tried again after this, then twice as
    // long each time up to the maximum (each try queries the counters, ~0.1-0.6 s of CPU).
    std::chrono::milliseconds busy_retry_first{2000};
    std::chrono::milliseconds busy_retry_max{60000};
  };

  // nullptr when KP_PM_SAMPLING is off (or refused next to KP_METRICS, said in one line).
  // With the CUPTI sessions and the process exit hook.
  static std::unique_ptr<PmSampling> Create(const Config& config, Post post);
  static std::unique_ptr<PmSampling> Create(const Config& config, Post post, Options options);
  // Shutdown, then waits for every sampler thread (unbounded; the injector never destroys its
  // instance, tests do).
  ~PmSampling();
  PmSampling(const PmSampling&) = delete;
  PmSampling& operator=(const PmSampling&) = delete;

  // From CUPTI's resource callbacks. Created never blocks on the sampler's set-up; Destroying
  // ends the device's sampling when its last context goes (see Finish above).
  void OnContextCreated(CUcontext context, uint32_t device);
  void OnContextDestroying(CUcontext context);
  // Ends every GPU's sampling (Finish above); later contexts start nothing. Idempotent and
  // thread-safe: a second caller waits for the first one's shutdown to end. A sampler still in
  // its set-up is waited for until `wait` has passed in all (Options::exit_wait by default; a
  // termination signal's finish passes less, to stay within its own budget).
  void Shutdown();
  void Shutdown(std::chrono::milliseconds wait);

  // The exit hook: Shutdown of the process's instance, unless in a fork child.
  static void ExitHook();

 private:
  class DeviceSampler;
  PmSampling(const Config& config, Post post, Options options);
  void RegisterExitHook();  // again after each GPU's set-up and first decode (see Exit above)

  std::vector<std::string> counters_;
  bool gpu_set_ = false;
  uint64_t interval_ns_ = 0;
  Post post_;
  Options options_;
  std::mutex shutdown_mu_;  // held for a whole Shutdown
  std::mutex mu_;           // guards the maps and shut_down_
  std::map<uint32_t, std::unique_ptr<DeviceSampler>> devices_;
  std::map<CUcontext, uint32_t> context_devices_;
  std::map<uint32_t, int> live_contexts_;
  bool shut_down_ = false;
};

}  // namespace kp
