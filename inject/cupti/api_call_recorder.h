// api_call_recorder.h: CUDA API calls recorded from CUPTI callbacks, the default way
// (KP_API=launch).
//
// Turning on RUNTIME/DRIVER activity, even for a few cbids, moves CUPTI onto a slow path for
// every CUDA call the program makes; callbacks on the few cbids that explain GPU work do not
// (bench/results/cost_attribution_h200.md). So kp subscribes to the ENTER and EXIT callbacks of
// the launch-related calls (api_selection.h) and keeps its own timing: CUPTI's timestamp at
// entry (kept in the callback's correlationData slot, which CUPTI carries from ENTER to EXIT)
// and at exit. The callback's correlation id is the one CUPTI gives the kernel, copy or memset
// the call started, so the records link to their GPU work exactly as API activity records do.
//
// Hot path (the CUDA-calling thread): no lock, no I/O, no allocation except one ring per thread
// on its first recorded call. Each thread writes finished calls into its own single-producer ring
// (reused by a later thread once its owner exits); the encoder thread drains every ring
// (Drain) and decodes the entries as CUpti_ActivityAPI records, so the trace holds the same API
// records as before. A full ring drops the call and counts it (dropped()), never blocks.
//
// A driver call made inside a recorded runtime call on the same thread (cudaLaunchKernel ->
// cuLaunchKernel) with the runtime call's correlation id is not recorded: it would only double
// the records. Driver calls made directly (Triton, CUDA graphs through the driver API), or with
// a correlation id of their own, are recorded.
//
// Copies and memsets (lazy_copy_kinds): MEMCPY/MEMSET activity costs on every CUDA call too,
// so it is enabled only at the first call that can copy or set memory (cudaMemcpy*, cuMemset*,
// graph launches ...), from that call's ENTER callback, before the copy is issued.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "inject/config/config.h"

namespace kp {

class ActivityDecoder;

class ApiCallRecorder {
 public:
  // Called once, from the first call that may copy or set memory, before it runs.
  using EnableCopyKinds = void (*)();

  // `enable_copy_kinds` null: copy kinds are not lazily enabled (off, or enabled up front).
  explicit ApiCallRecorder(EnableCopyKinds enable_copy_kinds);
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

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  static constexpr uint32_t kRingSlots = 1u << 15;  // ~1.3 MB per CUDA-calling thread

 private:
  struct Ring;
  Ring* ThreadRing();

  EnableCopyKinds enable_copy_kinds_;
  std::atomic<bool> copy_kinds_enabled_{false};
  // Indexed by cbid: bit 0 recorded, bit 1 may copy or set memory.
  std::vector<uint8_t> runtime_cbids_, driver_cbids_;
  std::atomic<Ring*> rings_{nullptr};
  std::atomic<uint64_t> dropped_{0};
};

// KP_API=launch with `api` in KP_ACTIVITIES: API calls come from callbacks.
bool RecordsApiFromCallbacks(const Config& config);
// With callbacks, MEMCPY/MEMSET activity waits for the first call that may copy or set memory.
bool CopyKindsAtFirstCopy(const Config& config);
// The recorder for `config`, or nullptr when API calls are not recorded from callbacks.
// `enable_copy_kinds` is used when CopyKindsAtFirstCopy(config).
ApiCallRecorder* MakeApiCallRecorder(const Config& config,
                                     ApiCallRecorder::EnableCopyKinds enable_copy_kinds);

}  // namespace kp
