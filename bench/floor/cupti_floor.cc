// cupti_floor.cc: libkpfloor.so, the overhead floor of the benchmark suite.
//
// The least any CUPTI activity tracer pays: a bare injection subscriber that enables only
// CONCURRENT_KERNEL (and MEMCPY, since kp records copies by default), hands out 8 MB buffers,
// counts the records of each completed buffer and frees it. No decoding, no I/O, no thread of
// its own. kp's added cost is judged against this one's (bench/run_bench.py).
//
// Loaded through CUDA_INJECTION64_PATH. At exit it force-flushes and prints one line to
// stderr: `kpfloor: {"records":N,"kernels":K,"memcpy":M,"dropped":D}` (the driver parses it).
// KPFLOOR_MEMCPY=0 leaves memcpy records off.
#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT

std::atomic<uint64_t> g_records{0};
std::atomic<uint64_t> g_kernels{0};
std::atomic<uint64_t> g_memcpy{0};
std::atomic<uint64_t> g_buffers_refused{0};
std::once_flag g_init_once;
bool g_active = false;

void CUPTIAPI RequestBuffer(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* memory = std::aligned_alloc(kAlignment, kBufferBytes);
  if (memory == nullptr) g_buffers_refused.fetch_add(1, std::memory_order_relaxed);
  *buffer = static_cast<uint8_t*>(memory);
  *size = memory == nullptr ? 0 : kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI CompleteBuffer(CUcontext /*context*/, uint32_t /*stream_id*/, uint8_t* buffer,
                             size_t /*size*/, size_t valid_size) {
  uint64_t records = 0, kernels = 0, copies = 0;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    ++records;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      ++kernels;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      ++copies;
    }
  }
  g_records.fetch_add(records, std::memory_order_relaxed);
  g_kernels.fetch_add(kernels, std::memory_order_relaxed);
  g_memcpy.fetch_add(copies, std::memory_order_relaxed);
  std::free(buffer);
}

void FlushAtExit() {
  if (!g_active) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
  std::fprintf(stderr,
               "kpfloor: {\"records\":%llu,\"kernels\":%llu,\"memcpy\":%llu,\"dropped\":%llu,"
               "\"buffers_refused\":%llu}\n",
               static_cast<unsigned long long>(g_records.load()),
               static_cast<unsigned long long>(g_kernels.load()),
               static_cast<unsigned long long>(g_memcpy.load()),
               static_cast<unsigned long long>(dropped),
               static_cast<unsigned long long>(g_buffers_refused.load()));
}

bool Check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "kpfloor: %s failed: %s; the floor records nothing\n", what,
               text != nullptr ? text : "unknown error");
  return false;
}

void StartTracing() {
  if (!Check(cuptiActivityRegisterCallbacks(RequestBuffer, CompleteBuffer),
             "cuptiActivityRegisterCallbacks")) {
    return;
  }
  if (!Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
             "enable CONCURRENT_KERNEL")) {
    return;
  }
  const char* memcpy_setting = std::getenv("KPFLOOR_MEMCPY");
  if (memcpy_setting == nullptr || std::strcmp(memcpy_setting, "0") != 0) {
    if (!Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable MEMCPY")) return;
  }
  g_active = true;
  std::atexit(FlushAtExit);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  std::call_once(g_init_once, StartTracing);
  return 1;
}
