// ms_since.h: milliseconds elapsed on the steady clock, for the injector's timing of its own
// calls (metrics set-up and passes, capture window edges and the CUPTI detach).
#pragma once

#include <chrono>

namespace kp {

inline double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kp
