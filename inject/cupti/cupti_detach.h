// cupti_detach.h: detaching CUPTI from the process once the last capture window has closed.
//
// Disabling CONCURRENT_KERNEL does not give back all of its cost: after a window, every kernel
// launch stays slower than before it, with kp and with a bare CUPTI subscriber alike, until
// cuptiFinalize (bench/capture_residual_probe.sh; docs/capture-windows.md). So when no window can
// open any more, kp detaches CUPTI, in three steps, on a thread of its own:
//   1. it waits until the window's GPU work has reached kp: every kernel launch call recorded has
//      its kernel record, and no new record has come for a while (CUPTI flushed every 10 ms).
//      Nothing is synchronized: a context or stream synchronization would break a CUDA graph
//      capture the program may have started meanwhile;
//   2. it stops kp's own CUPTI calls (`quiet`: the encoder thread's periodic flush, timestamps),
//      force-flushes, and waits until the encoder thread has decoded what came;
//   3. it asks for the finalize: the driver API callbacks are switched on, and the exit callback
//      of the application's next driver call, on whichever thread, calls cuptiFinalize there
//      (CUPTI's documented way: never from an arbitrary thread, which races its other calls).
// The exit finish cancels a detach that has not happened yet and then flushes as usual. When the
// window's work does not arrive in time (a kernel that never ends), CUPTI stays attached.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

namespace kp {

class CuptiDetach {
 public:
  struct Progress {
    uint64_t launch_calls = 0;  // kernel launch calls recorded (not graph launches)
    uint64_t kernels = 0;       // their kernel records received
    uint64_t records = 0;       // every GPU record received
  };
  // What the detach does to CUPTI and to kp, given by the tracer (tests give fakes).
  struct Hooks {
    std::function<void(bool forced)> flush;         // cuptiActivityFlushAll
    std::function<int64_t()> clock_offset;          // CUPTI's clock minus CLOCK_REALTIME, now
    std::function<void(bool on)> driver_callbacks;  // every DRIVER_API callback on/off
    std::function<CUptiResult()> finalize;          // cuptiFinalize
    std::mutex* shutdown_mutex = nullptr;  // held by the exit finish; step 3 and the finalize
    const std::atomic<bool>* exit_done = nullptr;
    std::function<Progress()> progress;  // what the decoder has seen so far
    // Returns once the encoder thread has run everything queued before the call (false: not
    // within its time limit).
    std::function<bool()> drain_encoder;
    uint32_t poll_ms = 10;
    uint32_t settle_polls = 10;   // step 1: no new record for this many polls
    uint32_t timeout_ms = 60000;  // step 1 gives up after this long: CUPTI stays attached
  };

  // Starts the detach on a thread of its own, once; later calls do nothing.
  void Start(Hooks hooks);

  // First thing in kp's CUPTI callback: true when this callback was the detach's own (the
  // caller returns at once; CUPTI may have been finalized in it).
  bool OnCallback(CUpti_CallbackDomain domain, const void* cbdata);

  // From the exit finish, holding the shutdown mutex: no detach from now on. A pending one is
  // withdrawn (its callbacks switched off when `may_call_cupti`); a step in progress is waited
  // for (bounded), so the detach thread makes no CUPTI call after this returns.
  void Cancel(bool may_call_cupti);

  // kp's threads must not call CUPTI any more (from step 2 on).
  bool quiet() const { return quiet_.load(std::memory_order_acquire); }
  // Step 3 is done or cuptiFinalize has run: CUPTI's buffers are no longer decoded.
  bool finalizing() const {
    return pending_.load(std::memory_order_acquire) || detached_.load(std::memory_order_acquire);
  }
  // The detach thread runs (from Start until its steps end, done or given up). The object must
  // outlive it: the tracer's never dies; a test waits for this to turn false.
  bool running() const { return running_.load(std::memory_order_acquire); }
  // cuptiFinalize has run: nothing of CUPTI may be called again.
  bool detached() const { return detached_.load(std::memory_order_acquire); }
  // CUPTI's timestamp minus CLOCK_REALTIME, read just before `quiet`: trace time once CUPTI can
  // no longer be asked.
  int64_t clock_offset_ns() const { return clock_offset_ns_.load(std::memory_order_acquire); }

 private:
  void Run();
  void Steps();
  bool WaitForWindowWork();  // step 1; false: cancelled or timed out

  Hooks hooks_;
  std::mutex step_mutex_;  // held by the detach thread around its CUPTI calls
  std::atomic<bool> running_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> quiet_{false};
  std::atomic<bool> pending_{false};  // step 3 done: the next driver API exit finalizes
  std::atomic<bool> detached_{false};
  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> clock_offset_ns_{0};
};

}  // namespace kp
