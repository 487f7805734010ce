// killed.cu: launches kernels steadily for about 3 s, then kills itself with SIGKILL (no atexit,
// no flush). Run with KP_FLUSH_MS=200: the trace must read up to its last complete chunk, with no
// footer, and hold at least the kernels that finished a full second before the kill.
#include <cuda_runtime.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "expect_lines.h"

__global__ void killed_tick(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.f;
}

int main() {
  using Clock = std::chrono::steady_clock;
  KP_CHECK(cudaSetDevice(0));
  float* data;
  KP_CHECK(cudaMalloc(&data, 4096 * sizeof(float)));
  ExpectDevice(0);
  Expect("clean_end=0");
  Expect("chunks_min=2");
  // Launches of the last second before the kill may be in no chunk yet, and a kernel's launch
  // call may sit in a different chunk than the kernel: links are checked up to that second.
  Expect("link_grace_ns=1000000000");

  const auto begin = Clock::now();
  bool reported = false;
  long launched = 0;
  for (;;) {
    killed_tick<<<16, 256>>>(data, 4096);
    ++launched;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
    if (!reported && elapsed >= 2.0) {
      KP_CHECK(cudaDeviceSynchronize());
      // Done a second before the kill: at least 5 flush periods of 200 ms ago.
      Expect("kernels_min=%ld", launched);
      Expect("kernel_count_min[killed_tick]=%ld", launched);
      reported = true;
    }
    if (elapsed >= 3.0) break;
  }
  std::printf("info killed: %ld launches, raising SIGKILL\n", launched);
  std::fflush(stdout);
  std::raise(SIGKILL);
  return 0;
}
