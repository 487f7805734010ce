#include "tools/kptrace/cupti_library.h"

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#ifndef KP_CUPTI_SONAME
#error "KP_CUPTI_SONAME (e.g. libcupti.so.13) must be defined by the build"
#endif

namespace kp {
namespace {

std::once_flag g_once;
void* g_handle = nullptr;
Status g_status;

void Load() {
  // The executable's DT_RPATH (build tree: the toolkit's lib dir; install: $ORIGIN/../lib, where
  // libcupti and libnvperf_* are bundled) applies to this dlopen as it would to DT_NEEDED.
  g_handle = dlopen(KP_CUPTI_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (g_handle == nullptr) {
    const char* why = dlerror();
    g_status = Status::Error(std::string("cannot load ") + KP_CUPTI_SONAME + " (" +
                             (why != nullptr ? why : "unknown reason") +
                             "); this command needs the CUDA toolkit's CUPTI: install it, or use "
                             "kptrace from an installed prefix, which bundles it in lib/");
  }
}

void* Symbol(const char* name) {
  if (!LoadCuptiLibrary().ok()) return nullptr;
  return dlsym(g_handle, name);
}

}  // namespace

Status LoadCuptiLibrary() {
  std::call_once(g_once, Load);
  return g_status;
}

}  // namespace kp

// The forwarders. Each has exactly the signature cupti_profiler_host.h / cupti_result.h declare
// (extern "C" cannot overload, so a mismatch does not compile). Without the library they fail
// with CUPTI_ERROR_NOT_INITIALIZED, which the callers already report as a failed CUPTI call.
#define KP_CUPTI_FORWARD(fn, Params)                                     \
  extern "C" CUptiResult CUPTIAPI fn(Params* params) {                   \
    using Fn = CUptiResult(CUPTIAPI*)(Params*);                          \
    static const Fn real = reinterpret_cast<Fn>(kp::Symbol(#fn));        \
    return real != nullptr ? real(params) : CUPTI_ERROR_NOT_INITIALIZED; \
  }

KP_CUPTI_FORWARD(cuptiProfilerHostInitialize, CUpti_Profiler_Host_Initialize_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostDeinitialize, CUpti_Profiler_Host_Deinitialize_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostGetSupportedChips, CUpti_Profiler_Host_GetSupportedChips_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostGetBaseMetrics, CUpti_Profiler_Host_GetBaseMetrics_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostGetSubMetrics, CUpti_Profiler_Host_GetSubMetrics_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostGetMetricProperties,
                 CUpti_Profiler_Host_GetMetricProperties_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostConfigAddMetrics, CUpti_Profiler_Host_ConfigAddMetrics_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostGetConfigImageSize, CUpti_Profiler_Host_GetConfigImageSize_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostGetConfigImage, CUpti_Profiler_Host_GetConfigImage_Params)
KP_CUPTI_FORWARD(cuptiProfilerHostGetNumOfPasses, CUpti_Profiler_Host_GetNumOfPasses_Params)

extern "C" CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  using Fn = CUptiResult(CUPTIAPI*)(CUptiResult, const char**);
  static const Fn real = reinterpret_cast<Fn>(kp::Symbol("cuptiGetResultString"));
  if (real != nullptr) return real(result, str);
  if (str != nullptr) *str = "CUPTI not loaded";
  return CUPTI_ERROR_NOT_INITIALIZED;
}
