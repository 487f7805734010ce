// entry.cc: the only symbols libkpinject.so exports (kpinject.map).
//
// - InitializeInjection: called by libcuda during cuInit when CUDA_INJECTION64_PATH names us.
// - An ELF constructor for LD_PRELOAD: it only points CUDA_INJECTION64_PATH and
//   NVTX_INJECTION64_PATH at this file (overwrite=0), so the real work still happens at cuInit
//   or at the first NVTX call. A preloaded library lands in every child process (shells,
//   compilers), so the constructor must stay this cheap.
// - InitializeInjectionNvtx2: NVTX's tool hook. We start the tracer first, so NVTX calls made
//   before cuInit are recorded ("early mode"), then forward to the libcupti this library is
//   linked against -- the same copy that records the markers (docs/cupti.md, "NVTX").
#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "inject/cupti/nvtx_forward.h"
#include "inject/cupti/tracer.h"

namespace {

bool g_preloaded = false;  // the constructor set CUDA_INJECTION64_PATH itself

const char* OwnPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnPath), &info) == 0) return nullptr;
  return info.dli_fname;
}

__attribute__((constructor)) void SetInjectionVariables() {
  const char* self = OwnPath();
  if (self == nullptr || self[0] != '/') return;  // only an absolute path is safe to hand on
  g_preloaded = getenv("CUDA_INJECTION64_PATH") == nullptr;
  setenv("CUDA_INJECTION64_PATH", self, 0);
  setenv("NVTX_INJECTION64_PATH", self, 0);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    const char* self = OwnPath();
    if (self != nullptr && self[0] == '/') setenv("NVTX_INJECTION64_PATH", self, 0);
    kp::ToolInit(g_preloaded ? kp::InjectionMode::kPreload : kp::InjectionMode::kInjection);
  } catch (...) {
  }
  return 1;
}

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    void* get_export_table) {
  try {
    kp::ToolInit(kp::InjectionMode::kNvtxEarly);
    return kp::ForwardNvtxInitToCupti(get_export_table);
  } catch (...) {
    return 0;
  }
}
