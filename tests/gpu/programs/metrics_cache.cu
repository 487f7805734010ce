// metrics_cache.cu: the kernels of the kernel-mode cache-control acceptance test
// (run_metrics_tests.sh, section "cache"). Every measured kernel must start from a flushed L2,
// as under ncu's default --cache-control all, whatever the previous kernel left in it, and this
// program makes sure the previous kernel leaves a lot. Each repetition runs, in this order, each
// kernel in an NVTX push/pop range of its own name, synchronized inside the range:
//   write_heavy  writes a 512 MiB float buffer (10x the H200's 50 MB L2): leaves the L2 full of
//                dirty lines;
//   read_only    reads a 256 MiB buffer and writes one float per block: right after write_heavy,
//                a profiler with no cache control charges it with write_heavy's dirty lines as
//                dram__bytes_write (ncu: ~0);
//   reduction    sums the same 256 MiB buffer (block reduction in shared memory, one atomicAdd
//                per block): without a flush the tail of the buffer is still in L2 from
//                read_only, so its dram__bytes_read comes out ~50 MB short;
//   atomic_hist  a histogram of 64 MiB of uint32 keys into 65536 bins with global atomicAdd
//                (atomic-heavy; the bins live in L2);
//   gemm_cublas  cuBLAS SGEMM 4096^3 (cublasSgemm, default math mode).
// Unlike metrics_sol.cu there is NO l2_clean kernel between them: the profiler's own cache
// control has to start each kernel clean.
//
// One warm-up launch of each kernel runs before the loop, outside any range (module load, cuBLAS
// handle and heuristics); the comparison drops the first launch of each kernel. The results are
// checked exactly (the buffers hold small integers, so float sums are exact in any order), which
// also holds under kernel replay (the profiler restores memory between passes: a kernel's effect
// is applied once).
//
// cuBLAS is loaded with dlopen (libcublas.so.13), not linked, as in metrics_sol.cu: build with
//   nvcc -arch=sm_90 -O2 -std=c++17 -I tests/gpu/programs -o metrics_cache metrics_cache.cu -ldl
//
// Usage: metrics_cache [--reps R] (default 5)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "expect_lines.h"
#include "gemm_helpers.h"

constexpr int kThreads = 256;
constexpr uint32_t kBins = 65536;

// Small integers -3..3: sums of any part of the buffer are exact in float, in any order.
static __host__ __device__ inline float SmallAt(uint64_t i) {
  return static_cast<float>(i % 7) - 3.f;
}

static __host__ __device__ inline uint32_t KeyAt(uint64_t i) {
  uint32_t x = static_cast<uint32_t>(i) * 2654435761u + 12345u;
  x ^= x >> 16;
  x *= 2246822519u;
  x ^= x >> 13;
  return x;
}

// The value write_heavy stores at element i.
static __host__ __device__ inline float WrittenAt(uint64_t i) {
  return static_cast<float>(i & 0xffff);
}

// Set-up kernels (never measured: neither ncu's nor kp's kernel regex matches "fill_").
__global__ void fill_values(float* p, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    p[i] = ValueAt(i, seed);
  }
}

__global__ void fill_small(float* p, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    p[i] = SmallAt(i);
  }
}

__global__ void fill_keys(uint32_t* p, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    p[i] = KeyAt(i);
  }
}

// The measured kernels. They stay at global scope so their names are plain (ncu -k regex, kp's
// kernel-mode ranges, the checker's kernel_count).
__global__ void write_heavy(float4* __restrict__ dst, uint64_t n4) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    dst[i] = make_float4(WrittenAt(4 * i), WrittenAt(4 * i + 1), WrittenAt(4 * i + 2),
                         WrittenAt(4 * i + 3));
  }
}

// Stores nothing (`never` is 0) and reads nothing: any DRAM traffic a tool reports for it is the
// tool's own, e.g. dirty lines of the write_heavy run just before it, or a replay's save/restore.
__global__ void null_kernel(float* sink, int never) {
  if (never == 12345) sink[threadIdx.x] = 0.f;
}

// Block sum of v (blockDim.x == kThreads) with warp shuffles; the result is valid in thread 0.
__device__ inline float BlockSumShuffle(float v) {
  __shared__ float warp_sums[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float s = 0.f;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) s += warp_sums[w];
  return s;
}

// Reads the whole buffer, writes one float per block (its sum).
__global__ void __launch_bounds__(kThreads)
    read_only(const float4* __restrict__ src, uint64_t n4, float* __restrict__ partial) {
  float sum = 0.f;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float4 v = src[i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  const float s = BlockSumShuffle(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Sum of the whole buffer: tree reduction in shared memory, one atomicAdd per block.
__global__ void __launch_bounds__(kThreads)
    reduction(const float4* __restrict__ src, uint64_t n4, float* __restrict__ total) {
  __shared__ float partial[kThreads];
  float sum = 0.f;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const float4 v = src[i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
}

__global__ void atomic_hist(const uint32_t* __restrict__ keys, uint64_t n,
                            uint32_t* __restrict__ bins) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    atomicAdd(&bins[keys[i] % kBins], 1u);
  }
}

int main(int argc, char** argv) {
  const long reps = ArgValue(argc, argv, "--reps", 5);
  if (reps < 1 || reps > 200) {
    std::fprintf(stderr, "metrics_cache: need 1 <= --reps <= 200\n");
    return 2;
  }
  KP_CHECK(cudaSetDevice(0));
  Cublas blas;
  cublasHandle_t handle;
  if (const std::string blas_error = LoadCublas(&blas, &handle); !blas_error.empty()) {
    std::fprintf(stderr, "metrics_cache: cannot use cuBLAS for range \"gemm_cublas\": %s\n",
                 blas_error.c_str());
    return 2;
  }

  const uint64_t write_count = uint64_t{512} << 18;  // floats in 512 MiB
  const uint64_t read_count = uint64_t{256} << 18;   // floats in 256 MiB
  const uint64_t key_count = uint64_t{64} << 18;     // uint32 in 64 MiB
  const long n = 4096;
  const uint64_t mat = static_cast<uint64_t>(n) * n;
  int sms = 0;
  KP_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // read_only's and reduction's grid (one partial per block). Its thread count must not be a
  // multiple of 7, so that each thread's values (period 7) cancel and every partial sum stays a
  // small integer, exact in float whatever the order of the atomicAdds.
  int blocks = sms * 8;
  if (blocks * kThreads % 7 == 0) ++blocks;

  float *wbuf, *rbuf, *partial, *total, *ma, *mb, *mc;
  uint32_t *keys, *bins;
  KP_CHECK(cudaMalloc(&wbuf, write_count * sizeof(float)));
  KP_CHECK(cudaMalloc(&rbuf, read_count * sizeof(float)));
  KP_CHECK(cudaMalloc(&partial, blocks * sizeof(float)));
  KP_CHECK(cudaMalloc(&total, sizeof(float)));
  KP_CHECK(cudaMalloc(&keys, key_count * sizeof(uint32_t)));
  KP_CHECK(cudaMalloc(&bins, kBins * sizeof(uint32_t)));
  KP_CHECK(cudaMalloc(&ma, mat * sizeof(float)));
  KP_CHECK(cudaMalloc(&mb, mat * sizeof(float)));
  KP_CHECK(cudaMalloc(&mc, mat * sizeof(float)));
  KP_CHECK(cudaMemset(total, 0, sizeof(float)));
  KP_CHECK(cudaMemset(bins, 0, kBins * sizeof(uint32_t)));
  fill_small<<<sms * 8, kThreads>>>(rbuf, read_count);
  fill_keys<<<sms * 8, kThreads>>>(keys, key_count);
  fill_values<<<sms * 8, kThreads>>>(ma, mat, 3);
  fill_values<<<sms * 8, kThreads>>>(mb, mat, 4);
  KP_CHECK(cudaGetLastError());
  KP_CHECK(cudaDeviceSynchronize());

  auto launch_write = [&] {
    write_heavy<<<sms * 16, kThreads>>>(reinterpret_cast<float4*>(wbuf), write_count / 4);
  };
  auto launch_read = [&] {
    read_only<<<blocks, kThreads>>>(reinterpret_cast<const float4*>(rbuf), read_count / 4, partial);
  };
  auto launch_reduce = [&] {
    reduction<<<blocks, kThreads>>>(reinterpret_cast<const float4*>(rbuf), read_count / 4, total);
  };
  auto launch_hist = [&] { atomic_hist<<<sms * 8, kThreads>>>(keys, key_count, bins); };
  auto launch_null = [&] { null_kernel<<<blocks, kThreads>>>(partial, 0); };
  // cuBLAS is column-major: C^T = B^T A^T, so passing (mb, ma) gives row-major mc = ma * mb.
  auto launch_gemm = [&] {
    const float one = 1.f, zero = 0.f;
    const int ni = static_cast<int>(n);
    if (blas.sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, mb, ni, ma, ni, &zero, mc,
                   ni) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "metrics_cache: cublasSgemm failed\n");
      std::exit(2);
    }
  };
  // One measured kernel in its own range, synchronized inside it.
  auto measured = [&](const char* range, const auto& launch, double* ms) {
    auto t0 = std::chrono::steady_clock::now();
    nvtxRangePushA(range);
    launch();
    KP_CHECK(cudaDeviceSynchronize());
    nvtxRangePop();
    *ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };

  // Warm-ups, outside the ranges.
  launch_write();
  launch_null();
  launch_read();
  launch_reduce();
  launch_hist();
  launch_gemm();
  KP_CHECK(cudaGetLastError());
  KP_CHECK(cudaDeviceSynchronize());

  double write_ms = 0, null_ms = 0, read_ms = 0, reduce_ms = 0, hist_ms = 0, gemm_ms = 0;
  for (long r = 0; r < reps; ++r) {
    measured("write_heavy", launch_write, &write_ms);
    measured("null_kernel", launch_null, &null_ms);
    measured("read_only", launch_read, &read_ms);
    measured("reduction", launch_reduce, &reduce_ms);
    measured("atomic_hist", launch_hist, &hist_ms);
    measured("gemm_cublas", launch_gemm, &gemm_ms);
  }
  KP_CHECK(cudaGetLastError());
  KP_CHECK(cudaDeviceSynchronize());

  // Checks, exact where the arithmetic is (small integers in float, counts in uint32).
  int bad = 0;
  const long launches = reps + 1;
  double want_sum = 0;  // sum of SmallAt over the read buffer: whole cycles of 7 sum to 0
  for (uint64_t i = read_count - read_count % 7; i < read_count; ++i) want_sum += SmallAt(i);
  {
    float* host = static_cast<float*>(std::malloc(blocks * sizeof(float)));
    KP_CHECK(cudaMemcpy(host, partial, blocks * sizeof(float), cudaMemcpyDeviceToHost));
    double got = 0;
    for (int b = 0; b < blocks; ++b) got += host[b];
    std::free(host);
    if (std::fabs(got - want_sum) > 0.5) {
      std::printf("info metrics_cache: WRONG read_only partial sums add up to %g, want %g\n", got,
                  want_sum);
      ++bad;
    }
  }
  {
    float got;
    KP_CHECK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
    if (std::fabs(got - want_sum * launches) > 0.5) {
      std::printf("info metrics_cache: WRONG reduction total %g after %ld launches, want %g\n", got,
                  launches, want_sum * launches);
      ++bad;
    }
  }
  {
    uint32_t* host = static_cast<uint32_t*>(std::malloc(kBins * sizeof(uint32_t)));
    KP_CHECK(cudaMemcpy(host, bins, kBins * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    uint64_t got = 0;
    for (uint32_t b = 0; b < kBins; ++b) got += host[b];
    uint32_t want0 = 0;  // bin 0 counted on the host over a prefix, as a spot check of one bin
    for (uint64_t i = 0; i < key_count; ++i) want0 += KeyAt(i) % kBins == 0;
    if (got != key_count * launches || host[0] != want0 * launches) {
      std::printf(
          "info metrics_cache: WRONG atomic_hist: %llu counts (want %llu), bin 0 %u (want %u)\n",
          static_cast<unsigned long long>(got),
          static_cast<unsigned long long>(key_count * launches), host[0],
          static_cast<uint32_t>(want0 * launches));
      ++bad;
    }
    std::free(host);
  }
  for (uint64_t i : {uint64_t{0}, uint64_t{5}, write_count / 3 + 1, write_count - 1}) {
    float got;
    KP_CHECK(cudaMemcpy(&got, wbuf + i, sizeof got, cudaMemcpyDeviceToHost));
    if (got != WrittenAt(i)) {
      std::printf("info metrics_cache: WRONG write_heavy[%llu]=%g, want %g\n",
                  static_cast<unsigned long long>(i), got, WrittenAt(i));
      ++bad;
    }
  }
  const long cells[][2] = {{0, 0}, {n / 2 + 3, n - 1}, {n - 1, 64}};
  for (const auto& cell : cells) {
    const double want = MatmulCell(n, cell[0], cell[1]);
    const double tolerance = 1e-3 * std::sqrt(static_cast<double>(n)) + 1e-4 * std::fabs(want);
    float got;
    KP_CHECK(cudaMemcpy(&got, mc + static_cast<uint64_t>(cell[0]) * n + cell[1], sizeof got,
                        cudaMemcpyDeviceToHost));
    if (std::fabs(got - want) > tolerance) {
      std::printf("info metrics_cache: WRONG cublasSgemm C[%ld][%ld]=%g, want %g\n", cell[0],
                  cell[1], got, want);
      ++bad;
    }
  }

  auto gbps = [reps](double bytes, double ms) { return bytes / (ms / reps) / 1e6; };
  std::printf(
      "info metrics_cache: expected_bytes write_heavy_write=%llu read_only_read=%llu "
      "reduction_read=%llu atomic_hist_read=%llu gemm_write=%llu\n",
      static_cast<unsigned long long>(write_count * sizeof(float)),
      static_cast<unsigned long long>(read_count * sizeof(float)),
      static_cast<unsigned long long>(read_count * sizeof(float)),
      static_cast<unsigned long long>(key_count * sizeof(uint32_t)),
      static_cast<unsigned long long>(mat * sizeof(float)));
  // This program's own launches: 4 fills, then 5 kernels per launch round (warm-up + reps);
  // cuBLAS decides how many kernels each of its reps + 1 calls launches (at least one "gemm").
  const long own = 4 + 5 * launches;
  std::printf("info metrics_cache: own_launches=%ld gemm_calls=%ld\n", own, launches);
  ExpectDevice(0);
  Expect("kernels_min=%ld", own + launches);
  Expect("kernel_count[fill_]=4");
  for (const char* k : {"write_heavy", "null_kernel", "read_only", "reduction", "atomic_hist"}) {
    Expect("kernel_count[%s]=%ld", k, launches);
    Expect("nvtx_range_count[%s]=%ld", k, reps);
    Expect("nvtx_kernels_inside[%s]=%ld", k, reps);
  }
  Expect("kernel_count_min[gemm]=%ld", launches);
  Expect("nvtx_range_count[gemm_cublas]=%ld", reps);
  Expect("nvtx_kernels_inside_min[gemm_cublas]=%ld", reps);
  Expect("nvtx_ranges=%ld", 6 * reps);
  std::printf(
      "info metrics_cache: reps=%ld host-timed ranges: write_heavy %.3f ms (%.0f GB/s written), "
      "read_only %.3f ms (%.0f GB/s), reduction %.3f ms (%.0f GB/s), atomic_hist %.3f ms, "
      "gemm_cublas %.3f ms (%.1f TFLOP/s); checks %s\n",
      reps, write_ms / reps, gbps(write_count * sizeof(float), write_ms), read_ms / reps,
      gbps(read_count * sizeof(float), read_ms), reduce_ms / reps,
      gbps(read_count * sizeof(float), reduce_ms), hist_ms / reps, gemm_ms / reps,
      2.0 * n * n * n / (gemm_ms / reps) / 1e9, bad ? "FAILED" : "ok");
  blas.destroy(handle);
  for (void* p : {static_cast<void*>(wbuf), static_cast<void*>(rbuf), static_cast<void*>(partial),
                  static_cast<void*>(total), static_cast<void*>(keys), static_cast<void*>(bins),
                  static_cast<void*>(ma), static_cast<void*>(mb), static_cast<void*>(mc)})
    KP_CHECK(cudaFree(p));
  return bad ? 1 : 0;
}
