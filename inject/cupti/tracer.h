// tracer.h: the in-process CUPTI tracer behind libkpinject.so's entry points (inject/entry.cc).
//
// ToolInit runs once per process, on whichever thread first reaches an entry point: cuInit's
// InitializeInjection, or NVTX's InitializeInjectionNvtx2 when a module's first NVTX call comes
// before CUDA starts ("early mode"). It owns the process's single CUPTI subscriber ("kp") and fans
// callbacks out to the metrics collector. Failures never reach the host program: one `kp:` line
// on stderr and kp turns itself off (docs/architecture.md, "Never hurt the host").
#pragma once

namespace kp {

// How the library got into the process; recorded in the trace header.
enum class InjectionMode { kInjection, kPreload, kNvtxEarly };

// Idempotent and thread-safe (std::call_once). Never throws.
void ToolInit(InjectionMode mode);

}  // namespace kp
