// launch_loop.cu: the launch-bound C++ workload of the overhead benchmark (bench/run_bench.py).
//
// 200000 empty-kernel launches, then 20000 small (4 KiB) host-to-device copies from pinned
// memory, each phase timed between cudaDeviceSynchronize calls after a warm-up, so process and
// CUDA start-up are excluded. Prints one JSON line on stdout.
// Usage: launch_loop [--launches N] [--copies M] [--copy-bytes B] [--steps S] [--warmup-s T]
// --step-times prints, per step, its host time in us, the launching thread's and the whole
// process's CPU time in us and the thread's instructions (perf_event_open; null where the kernel
// refuses it) on a second JSON line ({"step_us":[...],"step_cpu_us":[...],
// "step_process_cpu_us":[...],"step_instructions":[...]}): CPU work, beside the wall time it
// took.
// --steps S splits the launch phase into S steps, each an NVTX range "step" (for capture-window
// benchmarks, bench/capture_window_cost.sh); 0 (the default) uses no NVTX.
#include <cuda_runtime.h>
#include <linux/perf_event.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

__global__ void EmptyKernel() {}

namespace {

bool CheckCuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "launch_loop: %s failed: %s\n", what, cudaGetErrorString(status));
  return false;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

long ParseCount(const char* text, const char* flag) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0) {
    std::fprintf(stderr, "launch_loop: %s wants a non-negative integer, got '%s'\n", flag, text);
    std::exit(2);
  }
  return value;
}

// The calling thread's instructions (user and kernel), or -1 when perf events are refused.
int OpenInstructionCounter() {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.type = PERF_TYPE_HARDWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_HW_INSTRUCTIONS;
  attr.exclude_hv = 1;
  const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  return fd < 0 ? -1 : static_cast<int>(fd);
}

long long ReadCounter(int fd) {
  long long value = 0;
  if (fd < 0 || read(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return -1;
  return value;
}

double CpuUs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  long launches = 200000, copies = 20000, copy_bytes = 4096, steps = 0;
  double warmup_s = 0;
  bool step_times = false;  // --step-times: print each step's host time (us) on a second line
  std::vector<double> step_us, step_cpu_us, step_process_cpu_us;
  std::vector<long long> step_instructions;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && std::strcmp(argv[i], "--launches") == 0) {
      launches = ParseCount(argv[++i], "--launches");
    } else if (i + 1 < argc && std::strcmp(argv[i], "--copies") == 0) {
      copies = ParseCount(argv[++i], "--copies");
    } else if (i + 1 < argc && std::strcmp(argv[i], "--copy-bytes") == 0) {
      copy_bytes = ParseCount(argv[++i], "--copy-bytes");
    } else if (i + 1 < argc && std::strcmp(argv[i], "--steps") == 0) {
      steps = ParseCount(argv[++i], "--steps");
    } else if (std::strcmp(argv[i], "--step-times") == 0) {
      step_times = true;
    } else if (i + 1 < argc && std::strcmp(argv[i], "--warmup-s") == 0) {
      warmup_s = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: launch_loop [--launches N] [--copies M] [--copy-bytes B] [--steps S] "
                   "[--warmup-s T] [--step-times]\n");
      return 2;
    }
  }
  if (copy_bytes == 0) copy_bytes = 1;

  void* host = nullptr;
  void* device = nullptr;
  if (!CheckCuda(cudaMallocHost(&host, copy_bytes), "cudaMallocHost") ||
      !CheckCuda(cudaMalloc(&device, copy_bytes), "cudaMalloc")) {
    return 1;
  }
  std::memset(host, 1, copy_bytes);

  // Warm-up: module load, first-launch and first-copy costs stay out of the timed phases.
  for (int i = 0; i < 100; ++i) {
    EmptyKernel<<<1, 1>>>();
    cudaMemcpyAsync(device, host, copy_bytes, cudaMemcpyHostToDevice, 0);
  }
  if (!CheckCuda(cudaDeviceSynchronize(), "warm-up")) return 1;
  // --warmup-s: launches for T seconds more (CPU and GPU clocks settle), outside any range.
  for (auto t0 = std::chrono::steady_clock::now(); SecondsSince(t0) < warmup_s;) {
    for (int i = 0; i < 1000; ++i) EmptyKernel<<<1, 1>>>();
  }
  if (!CheckCuda(cudaDeviceSynchronize(), "warm-up")) return 1;

  const int counter = step_times ? OpenInstructionCounter() : -1;
  auto start = std::chrono::steady_clock::now();
  if (steps > 0) {
    for (long s = 0; s < steps; ++s) {
      const auto step_start = std::chrono::steady_clock::now();
      const double cpu_start = CpuUs(CLOCK_THREAD_CPUTIME_ID);
      const double process_cpu_start = CpuUs(CLOCK_PROCESS_CPUTIME_ID);
      const long long instructions_start = ReadCounter(counter);
      nvtxRangePushA("step");
      for (long i = s * launches / steps; i < (s + 1) * launches / steps; ++i) {
        EmptyKernel<<<1, 1>>>();
      }
      nvtxRangePop();
      if (step_times) {
        step_us.push_back(SecondsSince(step_start) * 1e6);
        step_cpu_us.push_back(CpuUs(CLOCK_THREAD_CPUTIME_ID) - cpu_start);
        step_process_cpu_us.push_back(CpuUs(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_start);
        const long long instructions = ReadCounter(counter);
        step_instructions.push_back(
            instructions >= 0 && instructions_start >= 0 ? instructions - instructions_start : -1);
      }
    }
  } else {
    for (long i = 0; i < launches; ++i) EmptyKernel<<<1, 1>>>();
  }
  if (!CheckCuda(cudaGetLastError(), "launch") ||
      !CheckCuda(cudaDeviceSynchronize(), "launch phase sync")) {
    return 1;
  }
  const double launch_s = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  for (long i = 0; i < copies; ++i) {
    cudaMemcpyAsync(device, host, copy_bytes, cudaMemcpyHostToDevice, 0);
  }
  if (!CheckCuda(cudaGetLastError(), "copy") ||
      !CheckCuda(cudaDeviceSynchronize(), "copy phase sync")) {
    return 1;
  }
  const double copy_s = SecondsSince(start);

  std::printf(
      "{\"workload\":\"launch_loop\",\"steps\":%ld,\"launches\":%ld,\"copies\":%ld,\"copy_bytes\":%"
      "ld,"
      "\"warmup_launches\":100,\"warmup_copies\":100,\"launch_s\":%.6f,\"copy_s\":%.6f,"
      "\"us_per_launch\":%.4f,\"us_per_copy\":%.4f}\n",
      steps, launches, copies, copy_bytes, launch_s, copy_s,
      launches > 0 ? launch_s * 1e6 / launches : 0.0, copies > 0 ? copy_s * 1e6 / copies : 0.0);
  if (step_times) {
    std::printf("{\"step_us\":[");
    for (size_t i = 0; i < step_us.size(); ++i) std::printf("%s%.1f", i ? "," : "", step_us[i]);
    std::printf("],\"step_cpu_us\":[");
    for (size_t i = 0; i < step_cpu_us.size(); ++i)
      std::printf("%s%.1f", i ? "," : "", step_cpu_us[i]);
    std::printf("],\"step_process_cpu_us\":[");
    for (size_t i = 0; i < step_process_cpu_us.size(); ++i)
      std::printf("%s%.1f", i ? "," : "", step_process_cpu_us[i]);
    std::printf("],\"step_instructions\":[");
    for (size_t i = 0; i < step_instructions.size(); ++i) {
      if (step_instructions[i] < 0) {
        std::printf("%snull", i ? "," : "");
      } else {
        std::printf("%s%lld", i ? "," : "", step_instructions[i]);
      }
    }
    std::printf("]}\n");
  }
  std::fflush(stdout);
  cudaFree(device);
  cudaFreeHost(host);
  return 0;
}
