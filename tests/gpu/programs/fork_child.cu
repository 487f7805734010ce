// fork_child.cu: the parent uses CUDA, forks a child that exits (through exit(), so atexit
// handlers run) without touching CUDA, waits for it, and goes on launching. The parent's trace
// must stay intact and hold every kernel; the child must not damage it.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "expect_lines.h"

__global__ void fork_kernel(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.f;
}

int main() {
  constexpr int kBefore = 10, kAfter = 10;
  KP_CHECK(cudaSetDevice(0));
  float* data;
  KP_CHECK(cudaMalloc(&data, 1024 * sizeof(float)));
  for (int i = 0; i < kBefore; ++i) fork_kernel<<<4, 256>>>(data, 1024);
  KP_CHECK(cudaDeviceSynchronize());
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 2;
  }
  if (child == 0) {
    volatile long sum = 0;
    for (long i = 0; i < 1000000; ++i) sum += i;
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  for (int i = 0; i < kAfter; ++i) fork_kernel<<<4, 256>>>(data, 1024);
  KP_CHECK(cudaDeviceSynchronize());
  KP_CHECK(cudaFree(data));
  std::printf("info fork_child: pid=%d child_pid=%d child_status=%d\n", getpid(), child,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  ExpectDevice(0);
  Expect("kernels=%d", kBefore + kAfter);
  Expect("kernel_count[fork_kernel]=%d", kBefore + kAfter);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
