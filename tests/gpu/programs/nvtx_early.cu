// nvtx_early.cu: NVTX ranges, a mark, a domain and a thread name BEFORE the first CUDA call,
// then CUDA work inside a range. Run in preload mode (kptrace run --preload): only there can kp
// see NVTX that comes before CUDA starts (docs/injection.md, "NVTX in each mode").
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "expect_lines.h"

__global__ void early_kernel(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.f;
}

int main() {
  constexpr int kLaunches = 3;
  const uint32_t tid = OsThreadId();
  // No CUDA call above this line.
  nvtxNameOsThreadA(tid, "early-main");
  nvtxRangePushA("early-outer");
  nvtxMarkA("early-mark");
  nvtxRangePushA("early-inner");
  nvtxRangePop();
  nvtxRangePop();
  nvtxDomainHandle_t domain = nvtxDomainCreateA("kp.early");
  nvtxEventAttributes_t attr = {};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = "early-domain-range";
  nvtxDomainRangePushEx(domain, &attr);
  nvtxDomainRangePop(domain);

  // CUDA starts here.
  KP_CHECK(cudaSetDevice(0));
  float* data;
  KP_CHECK(cudaMalloc(&data, 1024 * sizeof(float)));
  nvtxRangePushA("after-cuda");
  for (int i = 0; i < kLaunches; ++i) early_kernel<<<4, 256>>>(data, 1024);
  nvtxRangePop();
  KP_CHECK(cudaDeviceSynchronize());
  KP_CHECK(cudaFree(data));

  ExpectDevice(0);
  Expect("kernels=%d", kLaunches);
  Expect("kernel_count[early_kernel]=%d", kLaunches);
  Expect("nvtx_ranges=4");
  Expect("nvtx_range_count[early-outer]=1");
  Expect("nvtx_range_count[early-inner]=1");
  Expect("nvtx_range_count[early-domain-range]=1");
  Expect("nvtx_range_count[after-cuda]=1");
  Expect("nvtx_range_thread[early-outer]=%u", tid);
  Expect("nvtx_range_depth[early-inner]=2");
  Expect("nvtx_range_domain[early-domain-range]=kp.early");
  Expect("nvtx_mark_count[early-mark]=1");
  Expect("nvtx_marks=1");
  Expect("nvtx_kernels_inside[after-cuda]=%d", kLaunches);
  Expect("thread_name[early-main]=%u", tid);
  return 0;
}
