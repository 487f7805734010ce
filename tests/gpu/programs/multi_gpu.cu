// multi_gpu.cu: work on two GPUs of one process, so the trace must hold both devices: K kernels
// on each device (on a stream of each), peer copies in both directions with peer access enabled
// (CUPTI reports them as peer-to-peer records with source and destination devices), and an NVTX
// range around each device's share. Needs 2 GPUs that can reach each other: with fewer it
// prints `info multi_gpu: SKIP ...` and exits 77 (run_gpu_tests.sh only runs it on 2+ GPUs).
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "expect_lines.h"

__global__ void device_work(float* data, int n, float add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * 0.5f + add;
}

int main() {
  constexpr int kKernels = 50;    // per device
  constexpr int kPeerCopies = 8;  // per direction
  constexpr int kN = 1 << 20;
  constexpr size_t kBytes = kN * sizeof(float);

  int devices = 0;
  KP_CHECK(cudaGetDeviceCount(&devices));
  int can01 = 0, can10 = 0;
  if (devices >= 2) {
    KP_CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    KP_CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  }
  if (devices < 2 || !can01 || !can10) {
    std::printf("info multi_gpu: SKIP: %d GPU(s)%s\n", devices,
                devices >= 2 ? ", no peer access between 0 and 1" : "");
    return 77;
  }

  // buf[d]: device d's data; recv[d]: on device d, what the other device sends.
  float* buf[2];
  float* recv[2];
  cudaStream_t stream[2];
  for (int d = 0; d < 2; ++d) {
    KP_CHECK(cudaSetDevice(d));
    KP_CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
    KP_CHECK(cudaMalloc(&buf[d], kBytes));
    KP_CHECK(cudaMalloc(&recv[d], kBytes));
    KP_CHECK(cudaMemset(buf[d], 0, kBytes));
    KP_CHECK(cudaStreamCreateWithFlags(&stream[d], cudaStreamNonBlocking));
  }
  for (int d = 0; d < 2; ++d) {
    KP_CHECK(cudaSetDevice(d));
    nvtxRangePushA(d == 0 ? "device0_work" : "device1_work");
    for (int i = 0; i < kKernels; ++i)
      device_work<<<(kN + 255) / 256, 256, 0, stream[d]>>>(buf[d], kN, static_cast<float>(d + 1));
    KP_CHECK(cudaGetLastError());
    nvtxRangePop();
  }
  for (int d = 0; d < 2; ++d) {
    KP_CHECK(cudaSetDevice(d));
    KP_CHECK(cudaStreamSynchronize(stream[d]));
  }
  // Peer copies both ways, each issued on the source device's stream.
  for (int i = 0; i < kPeerCopies; ++i) {
    for (int d = 0; d < 2; ++d) {
      KP_CHECK(cudaSetDevice(d));
      KP_CHECK(cudaMemcpyPeerAsync(recv[1 - d], 1 - d, buf[d], d, kBytes, stream[d]));
    }
  }
  for (int d = 0; d < 2; ++d) {
    KP_CHECK(cudaSetDevice(d));
    KP_CHECK(cudaStreamSynchronize(stream[d]));
  }
  // kKernels steps of x = x / 2 + add from 0 end at ~2 * add: device 0 (add 1) sent ~2 to
  // device 1, device 1 (add 2) sent ~4 to device 0.
  float got[2] = {0.f, 0.f};
  for (int d = 0; d < 2; ++d) {
    KP_CHECK(cudaSetDevice(d));
    KP_CHECK(cudaMemcpy(&got[d], recv[d] + kN / 2, sizeof(float), cudaMemcpyDeviceToHost));
  }
  std::printf(
      "info multi_gpu: %d kernels per device, %d peer copies each way of %zu bytes; "
      "device 0 received %g (want ~4), device 1 received %g (want ~2)\n",
      kKernels, kPeerCopies, kBytes, got[0], got[1]);
  if (got[0] < 3.99f || got[0] > 4.01f || got[1] < 1.99f || got[1] > 2.01f) {
    std::printf("info multi_gpu: WRONG values\n");
    return 1;
  }
  for (int d = 0; d < 2; ++d) {
    KP_CHECK(cudaSetDevice(d));
    KP_CHECK(cudaStreamDestroy(stream[d]));
    KP_CHECK(cudaFree(buf[d]));
    KP_CHECK(cudaFree(recv[d]));
  }

  ExpectDevice(0);
  ExpectDevice(1);
  Expect("kernels=%d", 2 * kKernels);
  Expect("kernel_count[device_work]=%d", 2 * kKernels);
  Expect("kernel_device_count[0]=%d", kKernels);
  Expect("kernel_device_count[1]=%d", kKernels);
  Expect("memcpy_count[PTOP]=%d", 2 * kPeerCopies);
  Expect("memcpy_bytes[PTOP]=%llu", 2ull * kPeerCopies * kBytes);
  Expect("peer_copy_count[0>1]=%d", kPeerCopies);
  Expect("peer_copy_count[1>0]=%d", kPeerCopies);
  Expect("memsets=2");
  Expect("memcpy_count[DTOH]=2");
  Expect("memcpys=%d", 2 * kPeerCopies + 2);
  Expect("nvtx_ranges=2");
  Expect("nvtx_kernels_inside[device0_work]=%d", kKernels);
  Expect("nvtx_kernels_inside[device1_work]=%d", kKernels);
  return 0;
}
