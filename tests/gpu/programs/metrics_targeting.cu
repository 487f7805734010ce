// metrics_targeting.cu: known kernel launches for kernel-mode targeting (KP_METRICS_KERNELS,
// KP_METRICS_LAUNCH_*, KP_METRICS_NVTX_INCLUDE). Step i (0..9), inside NVTX range "step i",
// launches target_scale with 64*(i+1) blocks, then other_add with 32 blocks, so each
// target_scale launch is told apart by its grid size in the trace. The program checks its own
// results, prints `info metrics_targeting: ok` and exits 0; any CUDA error exits 2.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <string>
#include <vector>

#include "expect_lines.h"

__global__ void target_scale(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= 2.f;
}

__global__ void other_add(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.f;
}

int main() {
  constexpr int kSteps = 10, kThreads = 256, kOtherBlocks = 32;
  constexpr int kN = 64 * kSteps * kThreads;
  float* data;
  KP_CHECK(cudaMalloc(&data, kN * sizeof(float)));
  KP_CHECK(cudaMemset(data, 0, kN * sizeof(float)));
  for (int step = 0; step < kSteps; ++step) {
    std::string name = "step " + std::to_string(step);
    nvtxRangePushA(name.c_str());
    target_scale<<<64 * (step + 1), kThreads>>>(data, kN);
    KP_CHECK(cudaGetLastError());
    other_add<<<kOtherBlocks, kThreads>>>(data, kN);
    KP_CHECK(cudaGetLastError());
    nvtxRangePop();
  }
  KP_CHECK(cudaDeviceSynchronize());
  // Element i: the steps whose target_scale grid covered it doubled it, and the other_add
  // launches (first kOtherBlocks*kThreads elements) added 1 after each step.
  std::vector<float> host(kN);
  KP_CHECK(cudaMemcpy(host.data(), data, kN * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kN; i += 997) {
    float want = 0.f;
    for (int step = 0; step < kSteps; ++step) {
      if (i < 64 * (step + 1) * kThreads) want *= 2.f;
      if (i < kOtherBlocks * kThreads) want += 1.f;
    }
    if (host[i] != want) {
      std::fprintf(stderr, "metrics_targeting: element %d is %g, expected %g\n", i, host[i], want);
      return 1;
    }
  }
  std::printf("info metrics_targeting: ok steps=%d\n", kSteps);
  KP_CHECK(cudaFree(data));
  return 0;
}
