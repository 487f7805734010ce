// exit_code.cu: one kernel, then exit status 3. Under kp the exit status must still be 3.
#include <cuda_runtime.h>

#include "expect_lines.h"

__global__ void exit_code_kernel(int* value) { *value = 3; }

int main() {
  int* value;
  KP_CHECK(cudaMalloc(&value, sizeof(int)));
  exit_code_kernel<<<1, 1>>>(value);
  KP_CHECK(cudaDeviceSynchronize());
  KP_CHECK(cudaFree(value));
  ExpectDevice(0);
  Expect("kernels=1");
  Expect("kernel_count[exit_code_kernel]=1");
  return 3;
}
