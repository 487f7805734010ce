// nvtx_threads.cu: NVTX on several threads. Two std::threads each nest push/pop ranges three
// deep with a kernel in the innermost; the middle level lives in a domain and carries colors,
// categories and payloads (one message a registered string); marks in the default domain and
// in the domain; a start/end range opened on the main thread and closed on a worker; OS thread
// names through nvtxNameOsThreadA. Every expectation names the OS thread id it must carry.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "expect_lines.h"

namespace {

constexpr int kIterations = 4;
constexpr uint32_t kColorRegistered = 0xFF00FF00u;
constexpr uint32_t kColorB = 0xFF0000FFu;
constexpr uint32_t kColorCross = 0xFFFF0000u;
constexpr uint32_t kColorDomainMark = 0xFFFFFF00u;

__global__ void nvtx_work(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * 0.5f + 1.f;
}

nvtxDomainHandle_t domain;
nvtxStringHandle_t registered_middle;
std::atomic<bool> cross_started{false};
nvtxRangeId_t cross_id;
uint32_t tid_a = 0, tid_b = 0;

void WorkerA(float* data, int n) {
  tid_a = OsThreadId();
  nvtxNameOsThreadA(tid_a, "worker-a");
  cudaStream_t stream;
  KP_CHECK(cudaStreamCreate(&stream));
  for (int i = 0; i < kIterations; ++i) {
    nvtxRangePushA("outer-a");
    nvtxEventAttributes_t attr = {};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.colorType = NVTX_COLOR_ARGB;
    attr.color = kColorRegistered;
    attr.category = 3;
    attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    attr.payload.llValue = -42;
    attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attr.message.registered = registered_middle;
    nvtxDomainRangePushEx(domain, &attr);
    nvtxRangePushA("inner");
    nvtx_work<<<4, 256, 0, stream>>>(data, n);
    nvtxMarkA("mark-a");
    nvtxRangePop();
    nvtxDomainRangePop(domain);
    nvtxRangePop();
  }
  KP_CHECK(cudaStreamSynchronize(stream));
  KP_CHECK(cudaStreamDestroy(stream));
}

void WorkerB(float* data, int n) {
  tid_b = OsThreadId();
  nvtxNameOsThreadA(tid_b, "worker-b");
  cudaStream_t stream;
  KP_CHECK(cudaStreamCreate(&stream));
  for (int i = 0; i < kIterations; ++i) {
    nvtxRangePushA("outer-b");
    nvtxEventAttributes_t attr = {};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.colorType = NVTX_COLOR_ARGB;
    attr.color = kColorB;
    attr.category = 7;
    attr.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
    attr.payload.dValue = 2.5;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = "middle-b";
    nvtxDomainRangePushEx(domain, &attr);
    nvtxRangePushA("inner");
    nvtx_work<<<4, 256, 0, stream>>>(data, n);
    nvtxRangePop();
    nvtxDomainRangePop(domain);
    nvtxRangePop();
  }
  nvtxEventAttributes_t mark = {};
  mark.version = NVTX_VERSION;
  mark.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  mark.colorType = NVTX_COLOR_ARGB;
  mark.color = kColorDomainMark;
  mark.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  mark.payload.ullValue = 99;
  mark.messageType = NVTX_MESSAGE_TYPE_ASCII;
  mark.message.ascii = "domain-mark";
  nvtxDomainMarkEx(domain, &mark);
  // Close the range the main thread opened.
  while (!cross_started.load()) std::this_thread::yield();
  nvtxRangeEnd(cross_id);
  KP_CHECK(cudaStreamSynchronize(stream));
  KP_CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main() {
  constexpr int kN = 1024;
  const uint32_t tid_main = OsThreadId();
  nvtxNameOsThreadA(tid_main, "main-thread");
  KP_CHECK(cudaSetDevice(0));
  float* data;
  KP_CHECK(cudaMalloc(&data, 2 * kN * sizeof(float)));
  KP_CHECK(cudaMemset(data, 0, 2 * kN * sizeof(float)));
  KP_CHECK(cudaDeviceSynchronize());

  domain = nvtxDomainCreateA("kp.test");
  nvtxDomainNameCategoryA(domain, 7, "category-seven");
  registered_middle = nvtxDomainRegisterStringA(domain, "middle-registered");

  nvtxEventAttributes_t cross = {};
  cross.version = NVTX_VERSION;
  cross.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  cross.colorType = NVTX_COLOR_ARGB;
  cross.color = kColorCross;
  cross.messageType = NVTX_MESSAGE_TYPE_ASCII;
  cross.message.ascii = "cross-thread";
  cross_id = nvtxRangeStartEx(&cross);
  cross_started.store(true);

  std::thread a(WorkerA, data, kN);
  std::thread b(WorkerB, data + kN, kN);
  a.join();
  b.join();
  nvtx_work<<<4, 256>>>(data, kN);  // outside every range
  KP_CHECK(cudaDeviceSynchronize());
  KP_CHECK(cudaFree(data));
  nvtxDomainDestroy(domain);

  ExpectDevice(0);
  const int r = kIterations;
  Expect("kernels=%d", 2 * r + 1);
  Expect("kernel_count[nvtx_work]=%d", 2 * r + 1);
  Expect("nvtx_ranges=%d", 6 * r + 1);
  Expect("nvtx_range_count[outer-a]=%d", r);
  Expect("nvtx_range_count[outer-b]=%d", r);
  Expect("nvtx_range_count[middle-registered]=%d", r);
  Expect("nvtx_range_count[middle-b]=%d", r);
  Expect("nvtx_range_count[inner]=%d", 2 * r);
  Expect("nvtx_range_count[cross-thread]=1");
  Expect("nvtx_range_thread[outer-a]=%u", tid_a);
  Expect("nvtx_range_thread[middle-registered]=%u", tid_a);
  Expect("nvtx_range_thread[outer-b]=%u", tid_b);
  Expect("nvtx_range_thread[middle-b]=%u", tid_b);
  Expect("nvtx_range_threads[inner]=2");
  Expect("nvtx_range_thread[cross-thread]=%u", tid_main);
  Expect("nvtx_range_end_thread[cross-thread]=%u", tid_b);
  Expect("nvtx_range_depth[outer-a]=1");
  Expect("nvtx_range_depth[outer-b]=1");
  Expect("nvtx_range_depth[middle-registered]=2");
  Expect("nvtx_range_depth[middle-b]=2");
  Expect("nvtx_range_depth[inner]=3");
  Expect("nvtx_range_domain[middle-registered]=kp.test");
  Expect("nvtx_range_domain[middle-b]=kp.test");
  Expect("nvtx_range_domain[outer-a]=");
  Expect("nvtx_range_color[middle-registered]=0x%08X", kColorRegistered);
  Expect("nvtx_range_color[middle-b]=0x%08X", kColorB);
  Expect("nvtx_range_color[cross-thread]=0x%08X", kColorCross);
  Expect("nvtx_range_category[middle-registered]=3");
  Expect("nvtx_range_category[middle-b]=7");
  Expect("nvtx_range_payload[middle-registered]=i64:-42");
  Expect("nvtx_range_payload[middle-b]=f64:2.5");
  Expect("nvtx_kernels_inside[inner]=%d", 2 * r);
  Expect("nvtx_kernels_inside[outer-a]=%d", r);
  Expect("nvtx_kernels_inside[middle-b]=%d", r);
  Expect("nvtx_marks=%d", r + 1);
  Expect("nvtx_mark_count[mark-a]=%d", r);
  Expect("nvtx_mark_thread[mark-a]=%u", tid_a);
  Expect("nvtx_mark_count[domain-mark]=1");
  Expect("nvtx_mark_domain[domain-mark]=kp.test");
  Expect("nvtx_mark_color[domain-mark]=0x%08X", kColorDomainMark);
  Expect("nvtx_mark_payload[domain-mark]=u64:99");
  Expect("nvtx_domain_count[kp.test]=%d", 2 * r + 1);
  Expect("thread_name[worker-a]=%u", tid_a);
  Expect("thread_name[worker-b]=%u", tid_b);
  Expect("thread_name[main-thread]=%u", tid_main);
  return 0;
}
