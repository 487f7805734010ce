// cupti_library.h: libcupti, loaded with dlopen only when a command needs it.
//
// kptrace has no DT_NEEDED entry for libcupti or libnvperf, so `kptrace info|convert|summary`
// run on a machine without CUDA. The CUPTI functions the metric code calls (the Profiler Host
// API) are defined in cupti_library.cc as forwarders into the library loaded here; libcupti
// itself dlopen()s libnvperf_host when the Profiler Host API first needs it.
#pragma once

#include "common/status.h"

namespace kp {

// Loads libcupti once (later calls return the first result; thread-safe). The error names the
// library, the loader's reason and the fix.
Status LoadCuptiLibrary();

}  // namespace kp
