// pm_sampling.cu: the workload of the PM-sampling fidelity test
// (tests/gpu/run_pm_sampling_tests.sh).
//
// After a pause that lets kp's sampler start (its set-up runs on its own thread after the first
// context), it runs, each in its own NVTX range:
//   copy  one memory-bound kernel that streams 2 GiB (1 GiB read + 1 GiB written) `reps` times,
//         timed with CUDA events: its known bytes / duration is the DRAM rate the samples under
//         it must show;
//   idle  a host sleep of --idle-ms with the GPU idle: SM active must read about 0 there;
//   fma   a compute-bound kernel of about 15 ms (FMA chains, no memory traffic to speak of).
// Prints one JSON line with the known bytes and the event-timed durations. With --reset 1 it
// ends with cudaDeviceReset (kp then ends the GPU's sampling at the context's destruction).
// Usage: pm_sampling [--reps N] [--idle-ms MS] [--fma-iters N] [--pause-ms MS] [--reset 0|1]
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "pm_sampling: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

__global__ void Fill(float* a, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    a[i] = static_cast<float>(i & 1023);
}

// Each rep reads all of `a` and writes all of `b` (4-float vectors, so every sector is used in
// full and no write needs a read).
__global__ void Copy(const float4* a, float4* b, size_t n4, int reps) {
  for (int r = 0; r < reps; ++r) {
    for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n4;
         i += size_t{gridDim.x} * blockDim.x) {
      float4 v = a[i];
      v.x += r;
      b[i] = v;
    }
  }
}

__global__ void Fma(float* out, int iters) {
  float x = threadIdx.x * 1e-3f, y = 1.0001f, z = 0.9999f, w = blockIdx.x * 1e-4f;
  for (int i = 0; i < iters; ++i) {
    x = fmaf(x, y, z);
    w = fmaf(w, z, y);
    y = fmaf(y, x, w);
    z = fmaf(z, w, x);
  }
  if (x + y + z + w == 12345.0f) out[0] = x;  // keeps the chain alive
}

int main(int argc, char** argv) {
  int reps = 120, idle_ms = 40, fma_iters = 600000, pause_ms = 2000, reset = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0)
      reps = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--idle-ms") == 0)
      idle_ms = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--fma-iters") == 0)
      fma_iters = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--pause-ms") == 0)
      pause_ms = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--reset") == 0)
      reset = std::atoi(argv[i + 1]);
  }
  const size_t n = size_t{256} << 20;  // floats: 1 GiB per buffer, far beyond the L2
  float *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Fill<<<sms * 8, 256>>>(a, n);
  Copy<<<sms * 8, 256>>>(reinterpret_cast<const float4*>(a), reinterpret_cast<float4*>(b), n / 4,
                         1);  // warm-up
  CHECK(cudaDeviceSynchronize());
  std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));

  cudaEvent_t e0, e1, e2, e3;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventCreate(&e2));
  CHECK(cudaEventCreate(&e3));
  nvtxRangePushA("copy");
  CHECK(cudaEventRecord(e0));
  Copy<<<sms * 8, 256>>>(reinterpret_cast<const float4*>(a), reinterpret_cast<float4*>(b), n / 4,
                         reps);
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  nvtxRangePop();

  nvtxRangePushA("idle");
  std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
  nvtxRangePop();

  nvtxRangePushA("fma");
  CHECK(cudaEventRecord(e2));
  Fma<<<sms * 4, 256>>>(b, fma_iters);
  CHECK(cudaEventRecord(e3));
  CHECK(cudaEventSynchronize(e3));
  nvtxRangePop();
  CHECK(cudaGetLastError());

  float copy_ms = 0, fma_ms = 0;
  CHECK(cudaEventElapsedTime(&copy_ms, e0, e1));
  CHECK(cudaEventElapsedTime(&fma_ms, e2, e3));
  const double bytes = 2.0 * static_cast<double>(n) * sizeof(float) * reps;
  std::printf(
      "{\"copy_bytes\":%.0f,\"copy_ms\":%.4f,\"copy_bytes_per_s\":%.6e,\"idle_ms\":%d,"
      "\"fma_ms\":%.4f,\"reps\":%d}\n",
      bytes, copy_ms, bytes / (copy_ms * 1e-3), idle_ms, fma_ms, reps);
  cudaFree(a);
  cudaFree(b);
  if (reset != 0) CHECK(cudaDeviceReset());
  return 0;
}
