// graph.cu: a CUDA graph of K=5 nodes (three kernels, a memset, a device-to-device memcpy),
// captured from a stream, instantiated once and launched M=20 times; plus one launch of the
// first kernel outside the graph, which must carry no graph id.
#include <cuda_runtime.h>

#include <cstdio>

#include "expect_lines.h"

__global__ void graph_fill(float* data, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = value;
}

__global__ void graph_add(float* data, const float* other, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += other[i];
}

__global__ void graph_scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

int main() {
  constexpr int kNodes = 5;
  constexpr int kLaunches = 20;
  constexpr int kN = 1 << 16;
  constexpr size_t kBytes = kN * sizeof(float);

  KP_CHECK(cudaSetDevice(0));
  float *a, *b;
  KP_CHECK(cudaMalloc(&a, kBytes));
  KP_CHECK(cudaMalloc(&b, kBytes));
  cudaStream_t stream;
  KP_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const dim3 grid(kN / 256), block(256);
  graph_fill<<<grid, block, 0, stream>>>(a, 1.f, kN);  // outside the graph
  KP_CHECK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  KP_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  graph_fill<<<grid, block, 0, stream>>>(a, 2.f, kN);
  KP_CHECK(cudaMemsetAsync(b, 0, kBytes, stream));
  graph_add<<<grid, block, 0, stream>>>(b, a, kN);
  KP_CHECK(cudaMemcpyAsync(a, b, kBytes, cudaMemcpyDeviceToDevice, stream));
  graph_scale<<<grid, block, 0, stream>>>(a, 0.5f, kN);
  KP_CHECK(cudaStreamEndCapture(stream, &graph));

  size_t num_nodes = 0;
  KP_CHECK(cudaGraphGetNodes(graph, nullptr, &num_nodes));
  if (num_nodes != kNodes) {
    std::fprintf(stderr, "graph.cu: captured %zu nodes, meant %d\n", num_nodes, kNodes);
    return 2;
  }
  cudaGraphExec_t exec;
  KP_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < kLaunches; ++i) KP_CHECK(cudaGraphLaunch(exec, stream));
  KP_CHECK(cudaStreamSynchronize(stream));
  KP_CHECK(cudaGraphExecDestroy(exec));
  KP_CHECK(cudaGraphDestroy(graph));
  KP_CHECK(cudaStreamDestroy(stream));
  KP_CHECK(cudaFree(a));
  KP_CHECK(cudaFree(b));

  ExpectDevice(0);
  // The memset node may be traced as a memset or, under CUPTI's kernel instrumentation, as a
  // driver kernel; counting a launch's records of every kind keeps the check exact either way.
  Expect("graph_launches=%d", kLaunches);
  Expect("graph_records_per_launch=%d", kNodes);
  Expect("graph_nodes=%d", kNodes);
  Expect("kernel_count[graph_fill]=%d", kLaunches + 1);
  Expect("kernel_graph_count[graph_fill]=%d", kLaunches);
  Expect("kernel_count[graph_add]=%d", kLaunches);
  Expect("kernel_graph_count[graph_add]=%d", kLaunches);
  Expect("kernel_count[graph_scale]=%d", kLaunches);
  Expect("kernel_graph_count[graph_scale]=%d", kLaunches);
  Expect("memcpy_count[DTOD]=%d", kLaunches);
  Expect("memcpy_bytes[DTOD]=%zu", kLaunches * kBytes);
  if (RuntimeApiNames()) {
    Expect("api_count[cudaGraphLaunch]=%d", kLaunches);
    // The driver calls they reach are not recorded a second time.
    for (const char* key : {"cuGraph", "cuLaunch", "cuMem", "cuStream"}) {
      Expect("api_count[%s]=0", key);
    }
  } else {
    Expect("api_count[cuGraphLaunch]=%d", kLaunches);
    Expect("api_count[cuda]=0");
  }
  return 0;
}
