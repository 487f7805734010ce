// launch_soak.cu: the soak workload of the overhead benchmark (bench/run_bench.py).
//
// Empty-kernel launches at full rate for a fixed time (default 60 s), synchronizing every
// 10000 launches. Every 5 s it samples its own resident memory (VmRSS from /proc/self/status),
// so a profiler whose host memory grows with run length shows up as a rising series.
// Prints one JSON line on stdout. Usage: launch_soak [--seconds S] [--sample-seconds P]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

__global__ void EmptyKernel() {}

namespace {

long ReadVmRssKb() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) {
      kb = std::strtol(line + 6, nullptr, 10);
      break;
    }
  }
  std::fclose(status);
  return kb;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60, sample_seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atof(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--sample-seconds") == 0) {
      sample_seconds = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: launch_soak [--seconds S] [--sample-seconds P]\n");
      return 2;
    }
  }
  if (seconds <= 0 || sample_seconds <= 0) {
    std::fprintf(stderr, "launch_soak: --seconds and --sample-seconds must be positive\n");
    return 2;
  }
  for (int i = 0; i < 100; ++i) EmptyKernel<<<1, 1>>>();
  cudaError_t status = cudaDeviceSynchronize();
  if (status != cudaSuccess) {
    std::fprintf(stderr, "launch_soak: warm-up failed: %s\n", cudaGetErrorString(status));
    return 1;
  }

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<long> rss_kb{ReadVmRssKb()};
  std::vector<double> rss_at_s{0.0};
  double next_sample = sample_seconds;
  long launches = 0;
  while (elapsed() < seconds) {
    for (int i = 0; i < 10000; ++i) EmptyKernel<<<1, 1>>>();
    launches += 10000;
    status = cudaDeviceSynchronize();
    if (status != cudaSuccess) {
      std::fprintf(stderr, "launch_soak: launch failed: %s\n", cudaGetErrorString(status));
      return 1;
    }
    const double now = elapsed();
    if (now >= next_sample) {
      rss_kb.push_back(ReadVmRssKb());
      rss_at_s.push_back(now);
      next_sample += sample_seconds;
    }
  }
  const double total_s = elapsed();

  std::string samples, times;
  char number[32];
  for (size_t i = 0; i < rss_kb.size(); ++i) {
    std::snprintf(number, sizeof number, "%s%ld", i ? "," : "", rss_kb[i]);
    samples += number;
    std::snprintf(number, sizeof number, "%s%.2f", i ? "," : "", rss_at_s[i]);
    times += number;
  }
  std::printf(
      "{\"workload\":\"launch_soak\",\"seconds\":%.3f,\"launches\":%ld,\"warmup_launches\":100,"
      "\"us_per_launch\":%.4f,\"rss_kb\":[%s],\"rss_at_s\":[%s]}\n",
      total_s, launches, launches > 0 ? total_s * 1e6 / launches : 0.0, samples.c_str(),
      times.c_str());
  return 0;
}
