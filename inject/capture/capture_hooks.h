// capture_hooks.h: lets other collectors (PM sampling, PC sampling) start and stop with the
// capture windows. Register before tracing starts (from their own set-up, on the thread that
// runs kp's start-up); at most kMaxCaptureHooks registrations.
//
// `opened` runs right after kp switched tracing on, `closed` right before kp switches it off
// (so a collector can stop and flush while the window's activity kinds are still enabled).
// Both run on the thread that caused the edge: an application thread inside a CUPTI callback
// (NVTX push/pop, cudaProfilerStart/Stop), or kp's capture control thread (delay, duration,
// kptrace start/stop), and at exit on the exiting thread (closed only). Calls are serialized and
// in order; a hook must be short, must not block on CUDA work and must not call into
// inject/capture. With no capture trigger configured the whole run is one window and no hook
// ever runs: a collector then simply runs from start to exit.
#pragma once

#include "inject/capture/capture_state_machine.h"

namespace kp {

constexpr int kMaxCaptureHooks = 8;

using CaptureWindowHook = void (*)(const CaptureWindowInfo& window, void* user);

// False when all slots are taken. Either hook may be null.
bool AddCaptureWindowHooks(CaptureWindowHook opened, CaptureWindowHook closed, void* user);

// Whether capture windows switch tracing in this process (a trigger is configured and its
// controller started): a collector set up now starts outside a window and waits for a hook.
// False with no trigger (the whole run is one window, no hook runs).
bool CaptureWindowsConfigured();

// For CaptureController only.
void SetCaptureWindowsConfigured(bool configured);
void RunCaptureWindowOpened(const CaptureWindowInfo& window);
void RunCaptureWindowClosed(const CaptureWindowInfo& window);

}  // namespace kp
