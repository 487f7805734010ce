// multistream.cu: N kernels of three distinct kernels (one a template whose arguments hold a
// comma) spread over four created streams and the legacy default stream, with known launch
// shapes, plus a few cudaLaunchKernelEx launches with a thread-block cluster (sm_90).
#include <cuda_runtime.h>

#include <cstdio>

#include "expect_lines.h"

__global__ void axpy_kernel(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

template <typename T, int kFactor>
__global__ void scale_kernel(T* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * static_cast<T>(kFactor);
}

__global__ void reduce_kernel(const float* in, float* out, int n) {
  extern __shared__ float partial[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? in[i] : 0.f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

__global__ void cluster_kernel(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.f;
}

int main() {
  constexpr int kLaunches = 4000;
  constexpr int kStreams = 4;
  constexpr int kClusterLaunches = 8;
  constexpr int kN = 1 << 14;

  KP_CHECK(cudaSetDevice(0));
  float *x, *y, *sums;
  KP_CHECK(cudaMalloc(&x, kN * sizeof(float)));
  KP_CHECK(cudaMalloc(&y, kN * sizeof(float)));
  KP_CHECK(cudaMalloc(&sums, 1024 * sizeof(float)));
  KP_CHECK(cudaMemset(x, 0, kN * sizeof(float)));
  KP_CHECK(cudaMemset(y, 0, kN * sizeof(float)));
  KP_CHECK(cudaDeviceSynchronize());

  cudaStream_t streams[kStreams + 1];
  for (int s = 0; s < kStreams; ++s) KP_CHECK(cudaStreamCreate(&streams[s]));
  streams[kStreams] = 0;  // the legacy default stream

  const dim3 axpy_grid(64), axpy_block(256);
  const dim3 scale_grid(32, 2), scale_block(128, 2);
  const dim3 reduce_grid(16), reduce_block(256);
  const int reduce_smem = 256 * sizeof(float);
  int count[3] = {0, 0, 0};
  for (int i = 0; i < kLaunches; ++i) {
    cudaStream_t stream = streams[i % (kStreams + 1)];
    switch (i % 3) {
      case 0:
        axpy_kernel<<<axpy_grid, axpy_block, 0, stream>>>(2.f, x, y, kN);
        break;
      case 1:
        scale_kernel<float, 4><<<scale_grid, scale_block, 0, stream>>>(y, kN);
        break;
      case 2:
        reduce_kernel<<<reduce_grid, reduce_block, reduce_smem, stream>>>(x, sums, kN);
        break;
    }
    ++count[i % 3];
  }
  KP_CHECK(cudaGetLastError());

  // cudaLaunchKernelEx with a cluster of 2 blocks along x (needs sm_90).
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(8);
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = 0;
  config.stream = streams[0];
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = 2;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  for (int i = 0; i < kClusterLaunches; ++i) {
    KP_CHECK(cudaLaunchKernelEx(&config, cluster_kernel, y, kN));
  }
  KP_CHECK(cudaDeviceSynchronize());
  for (int s = 0; s < kStreams; ++s) KP_CHECK(cudaStreamDestroy(streams[s]));
  KP_CHECK(cudaFree(x));
  KP_CHECK(cudaFree(y));
  KP_CHECK(cudaFree(sums));

  ExpectDevice(0);
  Expect("kernels=%d", kLaunches + kClusterLaunches);
  Expect("kernel_count[axpy_kernel]=%d", count[0]);
  Expect("kernel_count[scale_kernel<float, 4>]=%d", count[1]);
  Expect("kernel_count[reduce_kernel]=%d", count[2]);
  Expect("kernel_count[cluster_kernel]=%d", kClusterLaunches);
  Expect("kernel_grid[axpy_kernel]=%u,%u,%u", axpy_grid.x, axpy_grid.y, axpy_grid.z);
  Expect("kernel_block[axpy_kernel]=%u,%u,%u", axpy_block.x, axpy_block.y, axpy_block.z);
  Expect("kernel_grid[scale_kernel<float, 4>]=%u,%u,%u", scale_grid.x, scale_grid.y, scale_grid.z);
  Expect("kernel_block[scale_kernel<float, 4>]=%u,%u,%u", scale_block.x, scale_block.y,
         scale_block.z);
  Expect("kernel_grid[reduce_kernel]=%u,%u,%u", reduce_grid.x, reduce_grid.y, reduce_grid.z);
  Expect("kernel_dynamic_smem[reduce_kernel]=%d", reduce_smem);
  Expect("kernel_dynamic_smem[axpy_kernel]=0");
  Expect("kernel_cluster[cluster_kernel]=2,1,1");
  Expect("kernel_grid[cluster_kernel]=8,1,1");
  Expect("kernel_streams=%d", kStreams + 1);
  if (RuntimeApiNames()) {
    Expect("api_count[cudaLaunchKernel_v7000]=%d", kLaunches);
    Expect("api_count[cudaLaunchKernelExC]=%d", kClusterLaunches);
    Expect("api_count[cuLaunch]=0");  // the nested driver launches are not recorded twice
  } else {
    // Each launch once, as the driver launch it reaches; no runtime call recorded.
    Expect("api_count[cuLaunchKernel]=%d", kLaunches + kClusterLaunches);
    Expect("api_count[cuda]=0");
  }
  Expect("memsets=2");
  Expect("memcpys=0");
  std::printf("info multistream: %d launches over %d streams + default, %d cluster launches\n",
              kLaunches, kStreams, kClusterLaunches);
  return 0;
}
