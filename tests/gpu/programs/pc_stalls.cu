// pc_stalls.cu: kernels with known warp-stall signatures, for KP_PC_SAMPLING's GPU test
// (tests/gpu/run_pc_sampling_tests.sh) and its cost bench (bench/pc_sampling_cost.sh).
//
//   pointer_chase  each warp follows a random cycle through 256 MiB, one dependent global load
//                  after another: nearly every sample finds the warp waiting for a load from
//                  memory (long scoreboard);
//   fma_chain      eight independent register FMA chains per thread, no memory traffic in the
//                  loop: warps wait on the math pipe or on fixed-latency dependencies, never on
//                  memory.
// Each runs in its own NVTX range ("chase", "fma") and is checked against the host, so a wrong
// kernel cannot pass for a fast one.
//
// --streams S instead launches one long one-block fma_chain on each of S streams at once (the
// test checks that the kernels still overlap in time with PC sampling on: no serialization).
//
// --tiny K instead runs the cost bench's loop: 20 warm-up then K launches of a one-block kernel,
// each followed by cudaDeviceSynchronize; it prints "tiny_us_per_launch X".
//
// Usage: pc_stalls [--reps R] [--tiny K] [--streams S]
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

__global__ void pointer_chase(const unsigned* next, unsigned start_stride, int steps,
                              unsigned* out) {
  const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  unsigned at = (warp * start_stride) & 0x3FFFFFFu;
  for (int i = 0; i < steps; ++i) at = next[at];
  if ((threadIdx.x & 31) == 0) out[warp] = at;
}

__global__ void fma_chain(float* out, int iters) {
  float a0 = threadIdx.x * 1e-3f, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5,
        a6 = a0 + 6, a7 = a0 + 7;
  const float m = 0.999999f, c = 1e-6f;
  for (int i = 0; i < iters; ++i) {
    a0 = fmaf(a0, m, c);
    a1 = fmaf(a1, m, c);
    a2 = fmaf(a2, m, c);
    a3 = fmaf(a3, m, c);
    a4 = fmaf(a4, m, c);
    a5 = fmaf(a5, m, c);
    a6 = fmaf(a6, m, c);
    a7 = fmaf(a7, m, c);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

__global__ void tiny(float* x) { x[threadIdx.x] += 1.0f; }

int RunTiny(int k) {
  float* x = nullptr;
  CHECK(cudaMalloc(&x, 32 * sizeof(float)));
  CHECK(cudaMemset(x, 0, 32 * sizeof(float)));
  for (int i = 0; i < 20; ++i) {
    tiny<<<1, 32>>>(x);
    CHECK(cudaDeviceSynchronize());
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < k; ++i) {
    tiny<<<1, 32>>>(x);
    CHECK(cudaDeviceSynchronize());
  }
  auto t1 = std::chrono::steady_clock::now();
  float host[32];
  CHECK(cudaMemcpy(host, x, sizeof(host), cudaMemcpyDeviceToHost));
  if (host[0] != static_cast<float>(20 + k)) {
    std::fprintf(stderr, "tiny: wrong result %f\n", host[0]);
    return 1;
  }
  std::printf("tiny_us_per_launch %.3f\n",
              std::chrono::duration<double, std::micro>(t1 - t0).count() / k);
  CHECK(cudaFree(x));
  return 0;
}

int RunStreams(int n) {
  std::vector<cudaStream_t> streams(n);
  float* out = nullptr;
  CHECK(cudaMalloc(&out, static_cast<size_t>(n) * 32 * sizeof(float)));
  for (auto& s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fma_chain<<<1, 32, 0, streams[0]>>>(out, 1000);  // module load and warm-up
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < n; ++i) fma_chain<<<1, 32, 0, streams[i]>>>(out + 32 * i, 2000000);
  CHECK(cudaDeviceSynchronize());
  for (auto& s : streams) CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(out));
  std::printf("pc_stalls: %d streams done\n", n);
  return 0;
}

int main(int argc, char** argv) {
  int reps = 3;
  int tiny_k = 0;
  int streams = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--tiny") == 0) tiny_k = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--streams") == 0) streams = std::atoi(argv[i + 1]);
  }
  if (tiny_k > 0) return RunTiny(tiny_k);
  if (streams > 0) return RunStreams(streams);

  // One random cycle over 2^26 slots (256 MiB): every load misses the caches.
  const size_t n = size_t{1} << 26;
  std::vector<unsigned> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937 rng(7);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<unsigned> next(n);
  for (size_t i = 0; i < n; ++i) next[order[i]] = order[(i + 1) % n];
  unsigned *d_next = nullptr, *d_out = nullptr;
  const int blocks = 264, threads = 128, warps = blocks * threads / 32, steps = 4000;
  CHECK(cudaMalloc(&d_next, n * sizeof(unsigned)));
  CHECK(cudaMalloc(&d_out, warps * sizeof(unsigned)));
  CHECK(cudaMemcpy(d_next, next.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
  float* d_fma = nullptr;
  const int fma_blocks = 132 * 8, fma_threads = 256, fma_iters = 200000;
  CHECK(cudaMalloc(&d_fma, size_t{fma_blocks} * fma_threads * sizeof(float)));

  for (int r = 0; r < reps; ++r) {
    nvtxRangePushA("chase");
    pointer_chase<<<blocks, threads>>>(d_next, 2654435761u, steps, d_out);
    CHECK(cudaDeviceSynchronize());
    nvtxRangePop();
    nvtxRangePushA("fma");
    fma_chain<<<fma_blocks, fma_threads>>>(d_fma, fma_iters);
    CHECK(cudaDeviceSynchronize());
    nvtxRangePop();
  }
  // Check one warp's chase and one FMA thread on the host.
  std::vector<unsigned> out(warps);
  CHECK(cudaMemcpy(out.data(), d_out, warps * sizeof(unsigned), cudaMemcpyDeviceToHost));
  unsigned at = (5u * 2654435761u) & 0x3FFFFFFu;
  for (int i = 0; i < steps; ++i) at = next[at];
  if (out[5] != at) {
    std::fprintf(stderr, "pointer_chase: wrong result\n");
    return 1;
  }
  float f;
  CHECK(cudaMemcpy(&f, d_fma, sizeof(float), cudaMemcpyDeviceToHost));
  if (!(f > 0.0f && f < 100.0f)) {
    std::fprintf(stderr, "fma_chain: wrong result %f\n", f);
    return 1;
  }
  std::printf("pc_stalls: %d reps done\n", reps);
  return 0;
}
