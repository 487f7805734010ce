// expect_lines.h: how the GPU test programs state what they did. Each program prints
// `expect key=value` lines on stdout; tests/gpu/trace_expect.cc checks a trace against them, so
// the expectations come from the program that did the work, not from constants kept elsewhere.
// `info ...` lines are for the log only.
#pragma once

#include <cuda_runtime.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define KP_CHECK(call)                                                          \
  do {                                                                          \
    cudaError_t kp_err_ = (call);                                               \
    if (kp_err_ != cudaSuccess) {                                               \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(kp_err_));                                \
      std::exit(2);                                                             \
    }                                                                           \
  } while (0)

inline uint32_t OsThreadId() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

// Expectation lines go through one locked stdout and are flushed at once, so a program that
// dies (killed.cu) still leaves every line it printed.
template <typename... Args>
void Expect(const char* fmt, Args... args) {
  std::printf("expect ");
  std::printf(fmt, args...);
  std::printf("\n");
  std::fflush(stdout);
}
inline void Expect(const char* line) {
  std::printf("expect %s\n", line);
  std::fflush(stdout);
}

// Whether kp records API calls under their runtime names (KP_API=launch-runtime) or as the
// driver calls they reach (the default, KP_API=launch).
inline bool RuntimeApiNames() {
  const char* api = std::getenv("KP_API");
  return api != nullptr && std::strcmp(api, "launch-runtime") == 0;
}

// The device the program used: the trace must describe it with the same name, UUID and
// compute capability.
inline void ExpectDevice(int device) {
  cudaDeviceProp prop;
  KP_CHECK(cudaGetDeviceProperties(&prop, device));
  char uuid[33];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(uuid + 2 * i, 3, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
  }
  Expect("device_name[%s]=%s", uuid, prop.name);
  Expect("device_cc[%s]=%d.%d", uuid, prop.major, prop.minor);
  Expect("device_sm_count[%s]=%d", uuid, prop.multiProcessorCount);
}
