// record_toggle_probe.cu: what switching CUPTI's kernel records (CONCURRENT_KERNEL) off and on
// does to the records of kernels around the switch, and what a switch costs. Kernel mode's own
// replay (inject/metrics/kernel_mode_collector.h) switches them off around the passes it
// measures; this says which records survive that, with CUPTI alone (no kp).
//
// Cases, each with kernels of its own name, all on one stream:
//   completed   a kernel runs to completion (synchronized), then records go off, then on again
//   in_flight   records go off right after a 20 ms kernel is launched, before it completes
//   queued      records go off while a 20 ms kernel runs and a short one waits behind it
//   while_off   a kernel launched while records are off
// then the cost of 1000 off/on pairs with the GPU idle. Prints "records NAME N" for each
// kernel name (expected: one each, none for while_off) and "toggle_pair_us X".
//
// Build: nvcc -arch=sm_90 -O2 -o record_toggle_probe record_toggle_probe.cu -lcupti
#include <cuda_runtime.h>
#include <cupti.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

std::mutex g_mu;
std::map<std::string, int> g_records;

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_records[k->name ? k->name : "?"];
  }
  free(buffer);
}

#define CHECK(x)                                                    \
  do {                                                              \
    if ((x) != 0) {                                                 \
      std::fprintf(stderr, "%s failed at line %d\n", #x, __LINE__); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

__device__ void Spin(long long ns) {
  long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

__global__ void completed_kernel() { Spin(1000); }
__global__ void in_flight_kernel() { Spin(20000000); }
__global__ void queued_head_kernel() { Spin(20000000); }
__global__ void queued_tail_kernel() { Spin(1000); }
__global__ void while_off_kernel() { Spin(1000); }

void Records(bool on) {
  CHECK(on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
           : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

}  // namespace

int main() {
  CHECK(cuptiActivityRegisterCallbacks(Requested, Completed));
  CHECK(cudaFree(nullptr));
  Records(true);

  completed_kernel<<<1, 32>>>();
  CHECK(cudaDeviceSynchronize());
  Records(false);
  Records(true);

  in_flight_kernel<<<1, 32>>>();
  Records(false);
  CHECK(cudaDeviceSynchronize());
  Records(true);

  queued_head_kernel<<<1, 32>>>();
  queued_tail_kernel<<<1, 32>>>();
  Records(false);
  CHECK(cudaDeviceSynchronize());
  Records(true);

  Records(false);
  while_off_kernel<<<1, 32>>>();
  CHECK(cudaDeviceSynchronize());
  Records(true);

  const int pairs = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < pairs; ++i) {
    Records(false);
    Records(true);
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();

  CHECK(cudaDeviceSynchronize());
  CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  const char* names[] = {"completed_kernel", "in_flight_kernel", "queued_head_kernel",
                         "queued_tail_kernel", "while_off_kernel"};
  for (const char* n : names) {
    int count = 0;
    for (const auto& [name, c] : g_records)
      if (name.find(n) != std::string::npos) count += c;
    std::printf("records %s %d\n", n, count);
  }
  std::printf("toggle_pair_us %.2f\n", us / pairs);
  return 0;
}
