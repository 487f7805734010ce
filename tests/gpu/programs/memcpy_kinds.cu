// memcpy_kinds.cu: every copy kind with known byte counts: host-to-device and device-to-host
// from pageable and pinned memory, sync and async; device-to-device; host-to-host through
// cudaMemcpy; a 2D copy; a peer copy when a second GPU is there; cudaMemset and cudaMemsetAsync.
// Each copy size is distinct so a wrong byte count shows which copy it came from. The program
// also names each API call it makes, and the trace must hold as many calls of each family (copies,
// memsets, each kind of synchronization, allocation and free) and as many in all: by default as
// the driver calls they reach (cuMemcpy*, cuMemAlloc* ...) with no runtime name, with
// KP_API=launch-runtime under their runtime names with none of those driver calls.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

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

// The driver call each runtime call reaches, as the start of its CUPTI name (which may go on
// with a variant and a version: cuMemcpyHtoD_v2, cuMemcpy2DUnaligned_v2, cuMemAllocPitch_v2).
// cudaMemcpyPeer's (2+ GPUs only) is checked by its family alone.
struct Reaches {
  const char* runtime;
  const char* driver;
};
constexpr Reaches kReaches[] = {
    {"cudaMemcpy", "cuMemcpy"},
    {"cudaMemcpyAsync", "cuMemcpy"},
    {"cudaMemcpy2D", "cuMemcpy2D"},
    {"cudaMemcpyPeer", "cuMemcpyPeer"},
    {"cudaMemset", "cuMemset"},
    {"cudaMemsetAsync", "cuMemset"},
    {"cudaStreamSynchronize", "cuStreamSynchronize"},
    {"cudaDeviceSynchronize", "cuCtxSynchronize"},
    {"cudaMalloc", "cuMemAlloc"},
    {"cudaMallocPitch", "cuMemAlloc"},
    {"cudaHostAlloc", "cuMemHostAlloc"},
    {"cudaFree", "cuMemFree"},
    {"cudaFreeHost", "cuMemFreeHost"},
};
std::vector<const Reaches*> made;  // the recorded calls the program made, in order

const Reaches& Made(const char* runtime_name) {
  for (const Reaches& r : kReaches) {
    if (std::strcmp(r.runtime, runtime_name) == 0) {
      made.push_back(&r);
      return r;
    }
  }
  std::fprintf(stderr, "memcpy_kinds: %s has no entry in kReaches\n", runtime_name);
  std::exit(2);
}
// A call kp records: the program notes it, then makes it.
#define RECORDED(fn, args) (Made(#fn), fn args)

// api_count[KEY] counts the trace's API names that contain KEY; the expectation counts the
// same way over the names above. That agrees only for keys no longer than those names (a key
// such as cuMemcpyHtoD would expect 0), which every key below is.
void ExpectApiCount(const char* key, bool runtime_names) {
  int n = 0;
  for (const Reaches* r : made)
    n += std::strstr(runtime_names ? r->runtime : r->driver, key) != nullptr;
  Expect("api_count[%s]=%d", key, n);
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
  KP_CHECK(RECORDED(cudaHostAlloc, (&pinned, kBig, cudaHostAllocDefault)));
  KP_CHECK(RECORDED(cudaHostAlloc, (&pinned2, kBig, cudaHostAllocDefault)));
  char *dev, *dev2;
  KP_CHECK(RECORDED(cudaMalloc, (&dev, kBig)));
  KP_CHECK(RECORDED(cudaMalloc, (&dev2, kBig)));

  // Host to device.
  size_t n = 1 * kMiB + 4096;
  KP_CHECK(RECORDED(cudaMemcpy, (dev, pageable, n, cudaMemcpyHostToDevice)));
  Count("HTOD", "PAGEABLE", false, n);
  n = 2 * kMiB + 8192;
  KP_CHECK(RECORDED(cudaMemcpy, (dev, pinned, n, cudaMemcpyHostToDevice)));
  Count("HTOD", "PINNED", false, n);
  n = 3 * kMiB + 512;
  KP_CHECK(RECORDED(cudaMemcpyAsync, (dev, pinned, n, cudaMemcpyHostToDevice, stream)));
  Count("HTOD", "PINNED", true, n);
  n = 512 * 1024 + 256;
  KP_CHECK(RECORDED(cudaMemcpyAsync, (dev, pageable, n, cudaMemcpyHostToDevice, stream)));
  // Async from pageable memory is staged by the driver; whether CUPTI flags it async is not
  // ours to promise, so it is counted by kind and memory only.
  Count("HTOD", "PAGEABLE", false, n);
  KP_CHECK(RECORDED(cudaStreamSynchronize, (stream)));

  // Device to host.
  n = 1 * kMiB + 12288;
  KP_CHECK(RECORDED(cudaMemcpy, (pageable2, dev, n, cudaMemcpyDeviceToHost)));
  Count("DTOH", "PAGEABLE", false, n);
  n = 2 * kMiB + 16384;
  KP_CHECK(RECORDED(cudaMemcpy, (pinned2, dev, n, cudaMemcpyDeviceToHost)));
  Count("DTOH", "PINNED", false, n);
  n = 3 * kMiB + 1024;
  KP_CHECK(RECORDED(cudaMemcpyAsync, (pinned2, dev, n, cudaMemcpyDeviceToHost, stream)));
  Count("DTOH", "PINNED", true, n);
  n = 256 * 1024 + 128;
  KP_CHECK(RECORDED(cudaMemcpyAsync, (pageable2, dev, n, cudaMemcpyDeviceToHost, stream)));
  Count("DTOH", "PAGEABLE", false, n);
  KP_CHECK(RECORDED(cudaStreamSynchronize, (stream)));

  // Device to device.
  n = 4 * kMiB;
  KP_CHECK(RECORDED(cudaMemcpy, (dev2, dev, n, cudaMemcpyDeviceToDevice)));
  Count("DTOD", nullptr, false, n);
  n = 5 * kMiB + 64;
  KP_CHECK(RECORDED(cudaMemcpyAsync, (dev2, dev, n, cudaMemcpyDeviceToDevice, stream)));
  Count("DTOD", nullptr, false, n);
  KP_CHECK(RECORDED(cudaStreamSynchronize, (stream)));

  // Host to host through the CUDA API (pinned to pinned).
  n = 640 * 1024;
  KP_CHECK(RECORDED(cudaMemcpy, (pinned2, pinned, n, cudaMemcpyHostToHost)));
  Count("HTOH", nullptr, false, n);

  // 2D: 64 rows of 1000 bytes from a pinned buffer (pitch 1024) into a pitched allocation.
  char* pitched;
  size_t pitch = 0;
  KP_CHECK(RECORDED(cudaMallocPitch, (reinterpret_cast<void**>(&pitched), &pitch, 1000, 64)));
  KP_CHECK(
      RECORDED(cudaMemcpy2D, (pitched, pitch, pinned, 1024, 1000, 64, cudaMemcpyHostToDevice)));
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
    KP_CHECK(RECORDED(cudaMalloc, (&remote, kMiB)));
    KP_CHECK(cudaSetDevice(0));
    n = 1 * kMiB;
    KP_CHECK(RECORDED(cudaMemcpyPeer, (remote, 1, dev, 0, n)));
    Count("PTOP", nullptr, false, n);
    KP_CHECK(RECORDED(cudaDeviceSynchronize, ()));
    KP_CHECK(cudaSetDevice(1));
    KP_CHECK(RECORDED(cudaFree, (remote)));
    KP_CHECK(cudaSetDevice(0));
    did_peer = true;
    std::printf("info memcpy_kinds: peer copy done (device 0 -> 1, %zu bytes)\n", n);
  } else {
    std::printf("info memcpy_kinds: peer copy skipped: %d GPU(s)%s\n", devices,
                devices >= 2 ? ", no peer access between 0 and 1" : "");
  }

  // Memsets.
  unsigned long long memset_bytes = 0;
  KP_CHECK(RECORDED(cudaMemset, (dev, 0x5a, 1 * kMiB + 32)));
  memset_bytes += 1 * kMiB + 32;
  KP_CHECK(RECORDED(cudaMemsetAsync, (dev2, 0x11, 768 * 1024, stream)));
  memset_bytes += 768 * 1024;
  KP_CHECK(RECORDED(cudaStreamSynchronize, (stream)));
  KP_CHECK(RECORDED(cudaDeviceSynchronize, ()));

  KP_CHECK(RECORDED(cudaFree, (pitched)));
  KP_CHECK(RECORDED(cudaFree, (dev)));
  KP_CHECK(RECORDED(cudaFree, (dev2)));
  KP_CHECK(RECORDED(cudaFreeHost, (pinned)));
  KP_CHECK(RECORDED(cudaFreeHost, (pinned2)));
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
  const bool runtime_names = RuntimeApiNames();
  if (runtime_names) {
    for (const char* key :
         {"cudaMemcpy", "cudaMemset", "cudaStreamSynchronize", "cudaDeviceSynchronize",
          "cudaMalloc", "cudaHostAlloc", "cudaFree", "cudaFreeHost"}) {
      ExpectApiCount(key, true);
    }
    // The driver calls they reach are not recorded a second time.
    for (const char* key : {"cuMem", "cuStream", "cuCtx"}) Expect("api_count[%s]=0", key);
  } else {
    for (const char* key : {"cuMemcpy", "cuMemset", "cuStreamSynchronize", "cuCtxSynchronize",
                            "cuMemAlloc", "cuMemHostAlloc", "cuMemFree", "cuMemFreeHost"}) {
      ExpectApiCount(key, false);
    }
    Expect("api_count[cuda]=0");
  }
  // In all: no other call recorded (every runtime and driver name contains "cu").
  Expect("api_count[cu]=%zu", made.size());
  return 0;
}
