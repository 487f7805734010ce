// memcpy_kinds.cu: every copy kind with known byte counts: host-to-device and device-to-host
// from pageable and pinned memory, sync and async; device-to-device; host-to-host through
// cudaMemcpy; a 2D copy; a peer copy when a second GPU is there; cudaMemset and cudaMemsetAsync.
// Each copy size is distinct so a wrong byte count shows which copy it came from.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "expect_lines.h"

namespace {

struct CopyTally {
  int count = 0;
  unsigned long long bytes = 0;
};
std::map<std::string, CopyTally> tally;  // key: "KIND" or "KIND:HOSTMEM" or "KIND:HOSTMEM:async"

void Count(const std::string& kind, const char* host_memory, bool async, size_t bytes) {
  auto add = [&](const std::string& key) {
    tally[key].count += 1;
    tally[key].bytes += bytes;
  };
  add(kind);
  if (host_memory != nullptr) {
    add(kind + ":" + host_memory);
    if (async) add(kind + ":" + host_memory + ":async");
  }
}

}  // namespace

int main() {
  constexpr size_t kMiB = 1 << 20;
  KP_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  KP_CHECK(cudaStreamCreate(&stream));

  const size_t kBig = 8 * kMiB;
  char* pageable = static_cast<char*>(std::malloc(kBig));
  char* pageable2 = static_cast<char*>(std::malloc(kBig));
  std::memset(pageable, 1, kBig);
  std::memset(pageable2, 2, kBig);
  char *pinned, *pinned2;
  KP_CHECK(cudaMallocHost(&pinned, kBig));
  KP_CHECK(cudaMallocHost(&pinned2, kBig));
  char *dev, *dev2;
  KP_CHECK(cudaMalloc(&dev, kBig));
  KP_CHECK(cudaMalloc(&dev2, kBig));

  // Host to device.
  size_t n = 1 * kMiB + 4096;
  KP_CHECK(cudaMemcpy(dev, pageable, n, cudaMemcpyHostToDevice));
  Count("HTOD", "PAGEABLE", false, n);
  n = 2 * kMiB + 8192;
  KP_CHECK(cudaMemcpy(dev, pinned, n, cudaMemcpyHostToDevice));
  Count("HTOD", "PINNED", false, n);
  n = 3 * kMiB + 512;
  KP_CHECK(cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, stream));
  Count("HTOD", "PINNED", true, n);
  n = 512 * 1024 + 256;
  KP_CHECK(cudaMemcpyAsync(dev, pageable, n, cudaMemcpyHostToDevice, stream));
  // Async from pageable memory is staged by the driver; whether CUPTI flags it async is not
  // ours to promise, so it is counted by kind and memory only.
  Count("HTOD", "PAGEABLE", false, n);
  KP_CHECK(cudaStreamSynchronize(stream));

  // Device to host.
  n = 1 * kMiB + 12288;
  KP_CHECK(cudaMemcpy(pageable2, dev, n, cudaMemcpyDeviceToHost));
  Count("DTOH", "PAGEABLE", false, n);
  n = 2 * kMiB + 16384;
  KP_CHECK(cudaMemcpy(pinned2, dev, n, cudaMemcpyDeviceToHost));
  Count("DTOH", "PINNED", false, n);
  n = 3 * kMiB + 1024;
  KP_CHECK(cudaMemcpyAsync(pinned2, dev, n, cudaMemcpyDeviceToHost, stream));
  Count("DTOH", "PINNED", true, n);
  n = 256 * 1024 + 128;
  KP_CHECK(cudaMemcpyAsync(pageable2, dev, n, cudaMemcpyDeviceToHost, stream));
  Count("DTOH", "PAGEABLE", false, n);
  KP_CHECK(cudaStreamSynchronize(stream));

  // Device to device.
  n = 4 * kMiB;
  KP_CHECK(cudaMemcpy(dev2, dev, n, cudaMemcpyDeviceToDevice));
  Count("DTOD", nullptr, false, n);
  n = 5 * kMiB + 64;
  KP_CHECK(cudaMemcpyAsync(dev2, dev, n, cudaMemcpyDeviceToDevice, stream));
  Count("DTOD", nullptr, false, n);
  KP_CHECK(cudaStreamSynchronize(stream));

  // Host to host through the CUDA API (pinned to pinned).
  n = 640 * 1024;
  KP_CHECK(cudaMemcpy(pinned2, pinned, n, cudaMemcpyHostToHost));
  Count("HTOH", nullptr, false, n);

  // 2D: 64 rows of 1000 bytes from a pinned buffer (pitch 1024) into a pitched allocation.
  char* pitched;
  size_t pitch = 0;
  KP_CHECK(cudaMallocPitch(reinterpret_cast<void**>(&pitched), &pitch, 1000, 64));
  KP_CHECK(cudaMemcpy2D(pitched, pitch, pinned, 1024, 1000, 64, cudaMemcpyHostToDevice));
  Count("HTOD", "PINNED", false, 1000 * 64);

  // Peer copy when a second GPU can reach the first.
  int devices = 0;
  KP_CHECK(cudaGetDeviceCount(&devices));
  int can_access = 0;
  if (devices >= 2) KP_CHECK(cudaDeviceCanAccessPeer(&can_access, 0, 1));
  bool did_peer = false;
  if (devices >= 2 && can_access) {
    KP_CHECK(cudaDeviceEnablePeerAccess(1, 0));
    char* remote;
    KP_CHECK(cudaSetDevice(1));
    KP_CHECK(cudaMalloc(&remote, kMiB));
    KP_CHECK(cudaSetDevice(0));
    n = 1 * kMiB;
    KP_CHECK(cudaMemcpyPeer(remote, 1, dev, 0, n));
    Count("PTOP", nullptr, false, n);
    KP_CHECK(cudaDeviceSynchronize());
    KP_CHECK(cudaSetDevice(1));
    KP_CHECK(cudaFree(remote));
    KP_CHECK(cudaSetDevice(0));
    did_peer = true;
    std::printf("info memcpy_kinds: peer copy done (device 0 -> 1, %zu bytes)\n", n);
  } else {
    std::printf("info memcpy_kinds: peer copy skipped: %d GPU(s)%s\n", devices,
                devices >= 2 ? ", no peer access between 0 and 1" : "");
  }

  // Memsets.
  unsigned long long memset_bytes = 0;
  KP_CHECK(cudaMemset(dev, 0x5a, 1 * kMiB + 32));
  memset_bytes += 1 * kMiB + 32;
  KP_CHECK(cudaMemsetAsync(dev2, 0x11, 768 * 1024, stream));
  memset_bytes += 768 * 1024;
  KP_CHECK(cudaStreamSynchronize(stream));
  KP_CHECK(cudaDeviceSynchronize());

  KP_CHECK(cudaFree(pitched));
  KP_CHECK(cudaFree(dev));
  KP_CHECK(cudaFree(dev2));
  KP_CHECK(cudaFreeHost(pinned));
  KP_CHECK(cudaFreeHost(pinned2));
  std::free(pageable);
  std::free(pageable2);
  KP_CHECK(cudaStreamDestroy(stream));

  ExpectDevice(0);
  int total = 0;
  for (const auto& [key, t] : tally) {
    Expect("memcpy_count[%s]=%d", key.c_str(), t.count);
    Expect("memcpy_bytes[%s]=%llu", key.c_str(), t.bytes);
    if (key.find(':') == std::string::npos) total += t.count;
  }
  if (!did_peer) Expect("memcpy_count[PTOP]=0");
  Expect("memcpys=%d", total);
  Expect("memsets=2");
  Expect("memset_bytes=%llu", memset_bytes);
  Expect("kernels=0");
  return 0;
}
