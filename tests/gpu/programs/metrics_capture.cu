// metrics_capture.cu: measured NVTX ranges next to and inside a CUDA-graph stream capture (global
// capture mode, the strictest), to check that kp's metrics (range profiler calls, the L2 sweep's
// driver calls) never invalidate the application's capture or change its results. Range "eager"
// holds plain launches; range "captured" is pushed and popped while the stream is being captured
// (so it holds no GPU work of its own), inside range "across", which is pushed before the
// capture begins and popped before it ends (kp closes it later and drops its values); the graph
// is then launched inside range "replay".
// The program checks its own results and prints `info metrics_capture: ok`, exit 0; any CUDA
// error exits 2.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "expect_lines.h"

__global__ void bump(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.f;
}

int main() {
  constexpr int kN = 1 << 20, kKernels = 4, kReps = 6;
  float* data;
  KP_CHECK(cudaMalloc(&data, kN * sizeof(float)));
  KP_CHECK(cudaMemset(data, 0, kN * sizeof(float)));
  cudaStream_t stream;
  KP_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto launch_all = [&] {
    for (int k = 0; k < kKernels; ++k) bump<<<(kN + 255) / 256, 256, 0, stream>>>(data, kN);
  };

  cudaGraph_t graph;
  nvtxRangePushA("across");
  KP_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  nvtxRangePushA("captured");
  launch_all();
  nvtxRangePop();
  nvtxRangePop();  // "across", still inside the capture
  KP_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  KP_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (int r = 0; r < kReps; ++r) {
    nvtxRangePushA("eager");
    launch_all();
    KP_CHECK(cudaStreamSynchronize(stream));
    nvtxRangePop();
    nvtxRangePushA("replay");
    KP_CHECK(cudaGraphLaunch(exec, stream));
    KP_CHECK(cudaStreamSynchronize(stream));
    nvtxRangePop();
  }
  float got = 0.f;
  KP_CHECK(cudaMemcpy(&got, data + kN / 3, sizeof got, cudaMemcpyDeviceToHost));
  const float want = 2.f * kKernels * kReps;
  KP_CHECK(cudaGraphExecDestroy(exec));
  KP_CHECK(cudaGraphDestroy(graph));
  KP_CHECK(cudaStreamDestroy(stream));
  KP_CHECK(cudaFree(data));
  if (got != want) {
    std::printf("info metrics_capture: WRONG data[%d]=%g, want %g\n", kN / 3, got, want);
    return 1;
  }
  std::printf("info metrics_capture: ok (%d eager + %d graph launches of %d kernels)\n", kReps,
              kReps, kKernels);
  Expect("kernel_count[bump]=%d", 2 * kKernels * kReps);
  Expect("nvtx_range_count[eager]=%d", kReps);
  Expect("nvtx_range_count[replay]=%d", kReps);
  Expect("nvtx_range_count[captured]=1");
  Expect("nvtx_range_count[across]=1");
  return 0;
}
