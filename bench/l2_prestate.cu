// l2_prestate.cu: the L2 state a measured kernel starts from, prepared by the program itself, for
// bench/l2_prestate_probe.sh. ncu measures the kernels with --cache-control none (so the state
// each --prestate leaves is what the kernel sees) and, as the reference, with --cache-control all
// (ncu's own flush). Which prepared state reproduces ncu's flush, counter by counter, tells what
// kp's kernel-mode cache control should do before a measured kernel.
//
// Each repetition: fill_dirty writes a 512 MiB buffer (the L2 ends full of dirty lines, as after
// a real write-heavy kernel; --dirty other: a separate 512 MiB buffer, so that the dirty lines
// are not write_heavy's own, as after a GEMM's output in tests/gpu/programs/metrics_cache.cu;
// --dirty alloc: that other buffer is allocated but never used, fill_dirty writes write_heavy's;
// --dirty read: the other buffer is read instead of written, leaving clean lines),
// then, each after the prepared state: write_heavy (writes the 512 MiB buffer), read_only (reads a
// 256 MiB buffer) and reduction (sums it).
//
// --prestate:
//   none       nothing
//   idle       20 ms on the host with the GPU idle (its clocks may drop, as in ncu's pauses)
//   kp         kp's sweep: read 2 x L2 of zeros with ld.global.cg, then discard.global.L2 on
//              every line of that buffer (inject/metrics/l2_sweep.cc)
//   kp_idle    kp, then idle
//   rsweep     the read sweep alone (L2 full of clean lines of the sweep buffer)
//   wsweep     write zeros over 2 x L2, then discard every line (dirty lines dropped unwritten)
//   kp2        kp twice
//   kp_all     the read sweep, then one block per SM each discards every line of the buffer (a
//              line read through the far L2 partition may leave a copy in the near one that a
//              discard from an SM of the other side does not reach)
//   wsweep_all write zeros over 2 x L2, then kp_all's discard
//   reset_persist  cudaCtxResetPersistingL2Cache (driver-side L2 maintenance, if it flushes)
//   set_limit      cudaLimitPersistingL2CacheSize set to half the L2 and back (an L2
//                  reconfiguration)
//   rdma_flush     cudaDeviceFlushGPUDirectRDMAWrites (to all devices)
//   memop_flush    cuStreamBatchMemOp with CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES
//   ce         the sweep buffer copied to pinned host memory by a copy engine, no SM touching
//              memory (whether a copy engine's reads evict the dirty lines as the SMs' do;
//              on the H200 they do not: bench/results/l2_probes_h200.md, probe G)
//   ce_discard ce, then kp's discard of the sweep buffer's lines
//   kp_tlb     kp, then one load per 64 KiB of the measured kernels' buffers (their address
//              translations warm again; 12,288 sectors, 384 KiB, read into the L2)
//   tlb_thrash every SM loads one word per 2 MiB of a 16 GiB buffer (8,192 pages if mapped
//              with 2 MiB pages: meant to evict what the translation caches held), then kp
//   tlb_inval  kp, then a 2 MiB physical allocation mapped, touched and unmapped again with the
//              driver's virtual-memory calls (cuMemMap, cuMemSetAccess, cuMemUnmap: an unmap
//              makes the driver invalidate translations, for the range or all of them)
//   rm_evict   the kernel driver's L2 evict (write back every dirty line, invalidate every
//              line), asked for through a driver client of the program's own
//              (inject/metrics/l2_evict.h, kp's flush); prints the call's mean time
//
// --witness 1 adds three measured kernels that say what a tool's own cache control leaves in
// the counters, apart from the kernels' requests: spin_dirty (right after the dirty state,
// before write_heavy) and spin_clean (after reduction) each hold every SM for ~60 us and touch
// no memory, so any L2 traffic counted during them is not theirs (a flush still running when
// the kernel starts, say); touch_pages then loads one word per 64 KiB of write_heavy's buffer
// (8,192 sectors), so its L2 traffic beyond that is address translation.
//
// nvcc -arch=sm_90 -O2 -I.. -o l2_prestate l2_prestate.cu ../inject/metrics/l2_evict.cc -lcuda
// Usage: l2_prestate --prestate NAME [--reps R] (default 4) [--dirty same|other|alloc|read]
// (default same) [--witness 0|1] (default 0)
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "inject/metrics/l2_evict.h"

#define CHECK(call)                                                                 \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "l2_prestate: %s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

#define CU_CHECK(call)                                                   \
  do {                                                                   \
    const CUresult r_ = (call);                                          \
    if (r_ != CUDA_SUCCESS) {                                            \
      std::fprintf(stderr, "l2_prestate: %s: CUresult %d\n", #call, r_); \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

constexpr int kThreads = 256;

__global__ void fill_dirty(float4* p, uint64_t n4, float v) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n4;
       i += uint64_t{gridDim.x} * blockDim.x)
    p[i] = make_float4(v, v, v, v);
}

__global__ void fill_small(float* p, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<float>(i % 7) - 3.f;
}

// The prepared states' kernels ("prep_": never matched by the measured kernels' regex).
__global__ void prep_read_sweep(const uint4* p, uint64_t n, unsigned* sink) {
  unsigned x = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x) *sink = x;
}

__global__ void prep_write_sweep(uint4* p, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x)
    p[i] = make_uint4(0, 0, 0, 0);
}

__global__ void prep_discard(char* p, uint64_t lines) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < lines;
       i += uint64_t{gridDim.x} * blockDim.x)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(p + 128 * i) : "memory");
}

__global__ void prep_touch(const char* p, uint64_t pages, unsigned* sink) {
  unsigned x = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < pages;
       i += uint64_t{gridDim.x} * blockDim.x)
    x ^= __ldcg(reinterpret_cast<const unsigned*>(p + (i << 16)));
  if (x == 0x9e3779b9u) *sink = x;
}

// Every block loads one word per 2 MiB page (launched with one block per SM, so that every SM's
// translation caches see every page).
__global__ void prep_thrash(const char* p, uint64_t pages, unsigned* sink) {
  unsigned x = 0;
  for (uint64_t i = threadIdx.x; i < pages; i += blockDim.x)
    x ^= __ldcg(reinterpret_cast<const unsigned*>(p + (i << 21)));
  if (x == 0x9e3779b9u) *sink = x;
}

// Every block discards every line (launched with one block per SM).
__global__ void prep_discard_all(char* p, uint64_t lines) {
  for (uint64_t i = threadIdx.x; i < lines; i += blockDim.x)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(p + 128 * i) : "memory");
}

// The witness kernels (--witness 1). ~60 us at the H200's ~1.98 GHz.
constexpr long long kSpinCycles = 120000;

__device__ void spin_cycles(unsigned* sink) {
  const long long start = clock64();
  long long now = start;
  while (now - start < kSpinCycles) now = clock64();
  if (now == 0) *sink = 1;  // never: keeps the loop and touches no memory
}

__global__ void spin_dirty(unsigned* sink) { spin_cycles(sink); }
__global__ void spin_clean(unsigned* sink) { spin_cycles(sink); }

__global__ void touch_pages(const char* p, uint64_t pages, unsigned* sink) {
  unsigned x = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < pages;
       i += uint64_t{gridDim.x} * blockDim.x)
    x ^= *reinterpret_cast<const unsigned*>(p + (i << 16));
  if (x == 0x9e3779b9u) *sink = x;
}

// The measured kernels (as in tests/gpu/programs/metrics_cache.cu).
__global__ void write_heavy(float4* __restrict__ dst, uint64_t n4) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n4;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float f = static_cast<float>((4 * i) & 0xffff);
    dst[i] = make_float4(f, f + 1, f + 2, f + 3);
  }
}

__global__ void __launch_bounds__(kThreads)
    read_only(const float4* __restrict__ src, uint64_t n4, float* __restrict__ partial) {
  float sum = 0.f;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n4;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float4 v = src[i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if (threadIdx.x % 32 == 0) atomicAdd(partial + blockIdx.x, sum);
}

__global__ void __launch_bounds__(kThreads)
    reduction(const float4* __restrict__ src, uint64_t n4, float* __restrict__ total) {
  __shared__ float part[kThreads];
  float sum = 0.f;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n4;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float4 v = src[i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, part[0]);
}

int main(int argc, char** argv) {
  std::string prestate = "none";
  long reps = 4;
  std::string dirty = "same";
  bool witness = false;
  bool args_ok = argc % 2 == 1;  // flag value pairs
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--prestate")) {
      prestate = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--dirty")) {
      dirty = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--witness")) {
      witness = !std::strcmp(argv[i + 1], "1");
      args_ok = args_ok && (witness || !std::strcmp(argv[i + 1], "0"));
    } else if (!std::strcmp(argv[i], "--reps")) {
      reps = std::atol(argv[i + 1]);
    } else {
      args_ok = false;
    }
  }
  const std::string known[] = {
      "none",      "idle",       "kp",          "kp_idle",    "rsweep",
      "wsweep",    "kp2",        "kp_all",      "wsweep_all", "reset_persist",
      "set_limit", "rdma_flush", "memop_flush", "ce",         "ce_discard",
      "kp_tlb",    "tlb_thrash", "tlb_inval",   "rm_evict"};
  bool ok = false;
  for (const auto& k : known) ok = ok || prestate == k;
  if (!args_ok || !ok || reps < 1 ||
      (dirty != "same" && dirty != "other" && dirty != "alloc" && dirty != "read")) {
    std::fprintf(stderr,
                 "l2_prestate: --prestate none|idle|kp|kp_idle|rsweep|wsweep|kp2|kp_all|wsweep_all"
                 "|reset_persist|set_limit|rdma_flush|memop_flush|ce|ce_discard|kp_tlb|tlb_thrash|"
                 "tlb_inval|rm_evict"
                 " [--reps R] [--dirty "
                 "same|other|alloc|read] [--witness 0|1]\n");
    return 2;
  }
  CHECK(cudaSetDevice(0));
  int sms = 0, l2 = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const unsigned grid = sms * 8;
  const uint64_t wbytes = uint64_t{512} << 20, rbytes = uint64_t{256} << 20;
  const uint64_t sbytes = (2 * uint64_t(l2)) & ~uint64_t{127};
  float4 *wbuf, *rbuf, *obuf = nullptr;
  uint4* sbuf;
  float* partial;
  unsigned* sink;
  CHECK(cudaMalloc(&wbuf, wbytes));
  CHECK(cudaMalloc(&rbuf, rbytes));
  CHECK(cudaMalloc(&sbuf, sbytes));
  if (dirty != "same") CHECK(cudaMalloc(&obuf, wbytes));
  CHECK(cudaMalloc(&partial, (grid + 1) * sizeof(float)));
  CHECK(cudaMalloc(&sink, 16));
  CHECK(cudaMemset(sbuf, 0, sbytes));
  void* host = nullptr;
  if (prestate == "ce" || prestate == "ce_discard") CHECK(cudaMallocHost(&host, sbytes));
  const uint64_t tbytes = uint64_t{16} << 30;
  char* tbuf = nullptr;
  if (prestate == "tlb_thrash") CHECK(cudaMalloc(&tbuf, tbytes));
  CUdeviceptr va = 0;
  size_t gran = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof access);
  if (prestate == "tlb_inval") {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CU_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU_CHECK(cuMemCreate(&handle, gran, &prop, 0));
    CU_CHECK(cuMemAddressReserve(&va, gran, 0, 0, 0));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  kp::DriverL2Evict evictor;
  double evict_us = 0;
  long evicts = 0;
  if (prestate == "rm_evict") {
    int dom = 0, bus = 0, slot = 0;
    CHECK(cudaDeviceGetAttribute(&dom, cudaDevAttrPciDomainId, 0));
    CHECK(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, 0));
    CHECK(cudaDeviceGetAttribute(&slot, cudaDevAttrPciDeviceId, 0));
    if (kp::Status s = evictor.Open(dom, bus, slot); !s.ok()) {
      std::fprintf(stderr, "l2_prestate: %s\n", s.message().c_str());
      return 1;
    }
  }
  fill_small<<<grid, kThreads>>>(reinterpret_cast<float*>(rbuf), rbytes / 4);
  CHECK(cudaDeviceSynchronize());

  auto kp_sweep = [&] {
    prep_read_sweep<<<grid, kThreads>>>(sbuf, sbytes / 16, sink);
    prep_discard<<<grid, kThreads>>>(reinterpret_cast<char*>(sbuf), sbytes / 128);
  };
  auto prepare = [&] {
    if (prestate == "tlb_thrash") prep_thrash<<<sms, 1024>>>(tbuf, tbytes >> 21, sink);
    if (prestate == "kp" || prestate == "kp_idle" || prestate == "kp2" || prestate == "kp_tlb" ||
        prestate == "tlb_thrash" || prestate == "tlb_inval")
      kp_sweep();
    if (prestate == "tlb_inval") {
      CU_CHECK(cuMemMap(va, gran, 0, handle, 0));
      CU_CHECK(cuMemSetAccess(va, gran, &access, 1));
      prep_touch<<<1, 32>>>(reinterpret_cast<const char*>(va), gran >> 16, sink);
      CHECK(cudaDeviceSynchronize());
      CU_CHECK(cuMemUnmap(va, gran));
    }
    if (prestate == "kp_tlb") {
      prep_touch<<<grid, kThreads>>>(reinterpret_cast<const char*>(wbuf), wbytes >> 16, sink);
      prep_touch<<<grid, kThreads>>>(reinterpret_cast<const char*>(rbuf), rbytes >> 16, sink);
    }
    if (prestate == "ce" || prestate == "ce_discard")
      CHECK(cudaMemcpyAsync(host, sbuf, sbytes, cudaMemcpyDeviceToHost, nullptr));
    if (prestate == "ce_discard")
      prep_discard<<<grid, kThreads>>>(reinterpret_cast<char*>(sbuf), sbytes / 128);
    if (prestate == "kp2") kp_sweep();
    if (prestate == "rsweep") prep_read_sweep<<<grid, kThreads>>>(sbuf, sbytes / 16, sink);
    if (prestate == "wsweep") {
      prep_write_sweep<<<grid, kThreads>>>(sbuf, sbytes / 16);
      prep_discard<<<grid, kThreads>>>(reinterpret_cast<char*>(sbuf), sbytes / 128);
    }
    if (prestate == "kp_all" || prestate == "wsweep_all") {
      if (prestate == "kp_all")
        prep_read_sweep<<<grid, kThreads>>>(sbuf, sbytes / 16, sink);
      else
        prep_write_sweep<<<grid, kThreads>>>(sbuf, sbytes / 16);
      prep_discard_all<<<sms, 1024>>>(reinterpret_cast<char*>(sbuf), sbytes / 128);
    }
    CHECK(cudaDeviceSynchronize());
    if (prestate == "reset_persist") CHECK(cudaCtxResetPersistingL2Cache());
    if (prestate == "set_limit") {
      size_t was = 0;
      CHECK(cudaDeviceGetLimit(&was, cudaLimitPersistingL2CacheSize));
      CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, l2 / 2));
      CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, was));
    }
    if (prestate == "rdma_flush")
      CHECK(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                               cudaFlushGPUDirectRDMAWritesToAllDevices));
    if (prestate == "memop_flush") {
      CUstreamBatchMemOpParams op;
      std::memset(&op, 0, sizeof op);
      op.flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
      CU_CHECK(cuStreamBatchMemOp(nullptr, 1, &op, 0));
    }
    CHECK(cudaDeviceSynchronize());
    if (prestate == "rm_evict") {
      const auto t0 = std::chrono::steady_clock::now();
      if (kp::Status s = evictor.Evict(); !s.ok()) {
        std::fprintf(stderr, "l2_prestate: %s\n", s.message().c_str());
        std::exit(1);
      }
      evict_us +=
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      ++evicts;
    }
    if (prestate == "idle" || prestate == "kp_idle") usleep(20000);
  };
  for (long r = 0; r < reps; ++r) {
    if (dirty == "read")
      prep_read_sweep<<<grid, kThreads>>>(reinterpret_cast<const uint4*>(obuf), wbytes / 16, sink);
    else
      fill_dirty<<<grid, kThreads>>>(dirty == "other" ? obuf : wbuf, wbytes / 16, 1.f + r);
    CHECK(cudaDeviceSynchronize());
    prepare();
    if (witness) {
      spin_dirty<<<grid, kThreads>>>(sink);
      CHECK(cudaDeviceSynchronize());
      prepare();
    }
    write_heavy<<<grid, kThreads>>>(wbuf, wbytes / 16);
    CHECK(cudaDeviceSynchronize());
    prepare();
    read_only<<<grid, kThreads>>>(rbuf, rbytes / 16, partial);
    CHECK(cudaDeviceSynchronize());
    prepare();
    reduction<<<grid, kThreads>>>(rbuf, rbytes / 16, partial + grid);
    CHECK(cudaDeviceSynchronize());
    if (witness) {
      prepare();
      spin_clean<<<grid, kThreads>>>(sink);
      CHECK(cudaDeviceSynchronize());
      prepare();
      touch_pages<<<grid, kThreads>>>(reinterpret_cast<const char*>(wbuf), wbytes >> 16, sink);
      CHECK(cudaDeviceSynchronize());
    }
  }
  std::printf("l2_prestate: %s, dirty %s, %ld repetitions, sweep buffer %llu bytes\n",
              prestate.c_str(), dirty.c_str(), reps, static_cast<unsigned long long>(sbytes));
  if (evicts) std::printf("l2_prestate: %ld L2 evicts, mean %.1f us\n", evicts, evict_us / evicts);
  return 0;
}
