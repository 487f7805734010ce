// device_reset.cu: work before and after cudaDeviceReset. The reset destroys the primary context
// while its records still sit in CUPTI's buffers; kp flushes them when the context's
// destruction starts, so the trace must hold the kernels and copies of both contexts, each
// linked to its launch or copy call, with nothing dropped.
#include <cuda_runtime.h>

#include <vector>

#include "expect_lines.h"

__global__ void reset_before_kernel(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.f;
}

__global__ void reset_after_kernel(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= 2.f;
}

int main() {
  constexpr int kBefore = 40;
  constexpr int kAfter = 30;
  constexpr int kN = 1 << 18;
  constexpr size_t kBytes = kN * sizeof(float);
  std::vector<float> host(kN, 1.f);
  const dim3 grid(kN / 256), block(256);

  KP_CHECK(cudaSetDevice(0));
  float* data = nullptr;
  KP_CHECK(cudaMalloc(&data, kBytes));
  KP_CHECK(cudaMemcpy(data, host.data(), kBytes, cudaMemcpyHostToDevice));
  for (int i = 0; i < kBefore; ++i) reset_before_kernel<<<grid, block>>>(data, kN);
  KP_CHECK(cudaGetLastError());
  // Finished but not freed: the reset drops the context with the records still in CUPTI's
  // buffers (a buffer is handed over only when full, flushed, or at exit).
  KP_CHECK(cudaDeviceSynchronize());
  KP_CHECK(cudaDeviceReset());

  KP_CHECK(cudaMalloc(&data, kBytes));
  KP_CHECK(cudaMemcpy(data, host.data(), kBytes, cudaMemcpyHostToDevice));
  for (int i = 0; i < kAfter; ++i) reset_after_kernel<<<grid, block>>>(data, kN);
  KP_CHECK(cudaGetLastError());
  KP_CHECK(cudaMemcpy(host.data(), data, kBytes, cudaMemcpyDeviceToHost));
  KP_CHECK(cudaFree(data));

  ExpectDevice(0);
  Expect("kernels=%d", kBefore + kAfter);
  Expect("kernel_count[reset_before_kernel]=%d", kBefore);
  Expect("kernel_count[reset_after_kernel]=%d", kAfter);
  Expect("memcpy_count[HTOD]=2");
  Expect("memcpy_bytes[HTOD]=%zu", 2 * kBytes);
  Expect("memcpy_count[DTOH]=1");
  if (RuntimeApiNames()) {
    Expect("api_count[cudaLaunchKernel]=%d", kBefore + kAfter);
  } else {
    Expect("api_count[cuLaunchKernel]=%d", kBefore + kAfter);
    Expect("api_count[cuda]=0");
  }
  return 0;
}
