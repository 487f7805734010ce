// api_call_recorder.h: CUDA API calls recorded from CUPTI callbacks, the default way
// (KP_API=launch, and launch-runtime).
//
// kp subscribes to the ENTER and EXIT callbacks of the launch-related calls (api_selection.h)
// and keeps its own timing: CUPTI's timestamp at entry (kept in the callback's correlationData
// slot, which CUPTI carries from ENTER to EXIT) and at exit. The callback's correlation id is the
// one CUPTI gives the kernel, copy or memset the call started, so the records link to their GPU
// work exactly as API activity records do. Recording a launch call in both forms costs CUPTI
// about the same either way (bench/results/cost_attribution_h200.md: ~1.8 us per launch on the
// H200, per-cbid activity or callbacks); the callbacks are needed anyway to turn the copy kinds on
// at the first copy, and a callback on a call the program never makes costs nothing.
//
// Hot path (the CUDA-calling thread): no lock, no I/O, no allocation (rings for two threads are
// made up front; each further thread allocates one on its first recorded call). Each thread
// writes finished calls into its own single-producer ring (reused by a later thread once its
// owner exits); the encoder thread drains every ring (Drain) and decodes the entries as
// CUpti_ActivityAPI records, so the trace holds the same API records as with API activity. A
// full ring drops the call and counts it (dropped(), Stats.api_calls_dropped), never blocks.
//
// Which form of a call is recorded (ApiLevel). KP_API=launch: the driver form only. Every
// runtime call reaches the driver (cudaLaunchKernel -> cuLaunchKernel, with the runtime call's
// correlation id, which its kernel carries too), so each call is recorded once, under the
// driver call's name and timing (inside the runtime call's), and the program's direct driver
// calls (Triton) are recorded as well. CUPTI's callbacks on runtime cbids cost more than on
// driver ones (bench/results/paired_cost_h200.md, "callback domains"): the driver form alone
// is the cheapest complete record. KP_API=launch-runtime: both forms; a driver call made inside
// a recorded runtime call on the same thread with the runtime call's correlation id is then not
// recorded (it would only double the records); driver calls made directly, or with a
// correlation id of their own, are.
//
// Copies and memsets (CopyKindsAtFirstCopy): MEMCPY/MEMSET activity costs on every CUDA call
// PyTorch makes once on, so it is enabled only at the first call that can copy or set memory
// (MayCopyApiName: cudaMemcpy*, cuMemset*, graphs with copy nodes ...), from that call's ENTER
// callback, before the copy is issued.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "inject/config/config.h"

namespace kp {

class ActivityDecoder;

// The form of the launch-related calls a recorder takes callbacks on.
enum class ApiLevel {
  kDriver,            // KP_API=launch
  kRuntimeAndDriver,  // KP_API=launch-runtime
};

class ApiCallRecorder {
 public:
  // Called once, from the first call that may copy or set memory, before it runs.
  using EnableCopyKinds = void (*)();

  // `enable_copy_kinds` null: copy kinds are not lazily enabled (off, or enabled up front).
  ApiCallRecorder(EnableCopyKinds enable_copy_kinds, ApiLevel level);
  ~ApiCallRecorder();
  ApiCallRecorder(const ApiCallRecorder&) = delete;
  ApiCallRecorder& operator=(const ApiCallRecorder&) = delete;

  // Enables the ENTER/EXIT callbacks of every recorded cbid on `subscriber`. Set-up only.
  void EnableCallbacks(CUpti_SubscriberHandle subscriber);

  // True for the (domain, cbid) pairs this recorder enabled.
  bool Wants(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) const;

  // From the CUDA-calling thread's callback (both sites).
  void OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                  const CUpti_CallbackData* data);

  // Encoder thread: decodes the calls finished since the last drain. Returns how many.
  size_t Drain(ActivityDecoder* decoder);

  // Capture windows: outside a window finished calls are not recorded. `now` (trace clock) is
  // the window's opening: a call whose ENTER came before it (its callbacks were off then, its
  // correlationData slot holds no entry time of this call) is not recorded either.
  void SetRecording(bool on, uint64_t now = 0) {
    if (on) hot_.open_ns.store(now, std::memory_order_relaxed);
    hot_.recording.store(on, std::memory_order_release);  // publishes open_ns
  }

  // Capture windows: switches the recorded cbids' callbacks on `subscriber` on or off, so that
  // outside a window CUPTI does not call back on every launch. While the copy kinds still wait
  // for the program's first copy, the cbids that may copy stay on (they detect it).
  void SetCallbacksEnabled(CUpti_SubscriberHandle subscriber, bool on);

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  static constexpr uint32_t kRingSlots = 1u << 15;  // ~1.3 MB per CUDA-calling thread
  static constexpr int kPreparedRings = 2;  // made up front; a third thread allocates its own

 private:
  struct Ring;
  Ring* ThreadRing();  // the calling thread's ring; makes or reuses one on its first call

  // Everything a callback reads of the recorder, on one cache line: between two calls the
  // program's own work pushes the recorder out of the core's caches, and each line it reads then
  // is a miss on the calling thread (bench/callback_cost.cc, "cold").
  struct alignas(64) Hot {
    const uint8_t* runtime_flags = nullptr;  // runtime_cbids_'s and driver_cbids_'s data
    const uint8_t* driver_flags = nullptr;
    uint32_t runtime_size = 0, driver_size = 0;
    std::atomic<uint64_t> open_ns{0};
    std::atomic<bool> recording{true};
    std::atomic<bool> copy_kinds_enabled{false};
    uint32_t process_id = 0;
    uint8_t Flags(bool runtime, CUpti_CallbackId cbid) const {
      if (runtime) return cbid < runtime_size ? runtime_flags[cbid] : 0;
      return cbid < driver_size ? driver_flags[cbid] : 0;
    }
  };
  Hot hot_;
  EnableCopyKinds enable_copy_kinds_;
  // Indexed by cbid: bit 0 recorded, bit 1 may copy or set memory.
  std::vector<uint8_t> runtime_cbids_, driver_cbids_;
  std::atomic<Ring*> rings_{nullptr};
  std::atomic<uint64_t> dropped_{0};
};

// KP_API=launch or launch-runtime with `api` in KP_ACTIVITIES: API calls come from callbacks.
bool RecordsApiFromCallbacks(const Config& config);
// With callbacks, MEMCPY/MEMSET activity waits for the first call that may copy or set memory.
bool CopyKindsAtFirstCopy(const Config& config);
// The recorder for `config`, or nullptr when API calls are not recorded from callbacks.
// `enable_copy_kinds` is used when CopyKindsAtFirstCopy(config).
ApiCallRecorder* MakeApiCallRecorder(const Config& config,
                                     ApiCallRecorder::EnableCopyKinds enable_copy_kinds);

}  // namespace kp
