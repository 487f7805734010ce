// records.h: the neutral, CUPTI-free record structs the tracer hands to the TraceEncoder.
// They hold absolute times (ns, trace clock) and raw ids; the encoder does interning and
// delta coding. Strings are borrowed pointers valid only for the duration of the Add* call.
// Nothing here allocates.
#pragma once

#include <cstdint>
#include <string_view>

namespace kp {

struct KernelRecord {
  const char* name = nullptr;  // mangled; the encoder interns (by pointer, then by content)
  uint64_t start = 0, end = 0;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, cluster[3] = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  uint32_t static_shared = 0, dynamic_shared = 0, local_per_thread = 0, shared_executed = 0;
  uint32_t device = 0, context = 0, stream = 0;
  uint32_t correlation = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint32_t launch_type = 0, channel = 0;
  uint32_t flags = 0;  // kp::RecordFlag bits (proto enum values)
};

struct MemcpyRecord {
  uint64_t start = 0, end = 0, bytes = 0;
  uint32_t copy_kind = 0, src_kind = 0, dst_kind = 0;  // CUPTI enum values == proto values
  uint32_t device = 0, context = 0, stream = 0, correlation = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint32_t flags = 0;
  bool peer = false;
  uint32_t src_device = 0, dst_device = 0, src_context = 0, dst_context = 0;
  uint32_t copy_count = 0, channel = 0;
};

struct MemsetRecord {
  uint64_t start = 0, end = 0, bytes = 0;
  uint32_t value = 0, memory_kind = 0;
  uint32_t device = 0, context = 0, stream = 0, correlation = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint32_t flags = 0, channel = 0;
};

struct ApiRecord {
  const char* name = nullptr;  // static string from cuptiGetCallbackName (stable pointer)
  uint64_t start = 0, end = 0;
  uint32_t domain = 0;  // kp::ApiDomain
  uint32_t cbid = 0, thread_id = 0, correlation = 0;
  int32_t return_value = 0;
};

struct NvtxPayloadValue {
  enum Kind : uint8_t { kNone, kU64, kI64, kF64, kU32, kI32, kF32 } kind = kNone;
  union {
    uint64_t u64;
    int64_t i64;
    double f64;
    uint32_t u32;
    int32_t i32;
    float f32;
  };
  NvtxPayloadValue() : u64(0) {}
};

struct NvtxRangeRecord {
  const char* name = nullptr;
  const char* domain = nullptr;  // nullptr = default domain
  uint64_t start = 0, end = 0;
  uint32_t thread_id = 0, end_thread_id = 0;
  uint32_t category = 0, color = 0;
  bool has_color = false;
  NvtxPayloadValue payload;
  uint32_t flags = 0;
  uint64_t id = 0;
};

struct NvtxMarkRecord {
  const char* name = nullptr;
  const char* domain = nullptr;
  uint64_t time = 0;
  uint32_t thread_id = 0, category = 0, color = 0;
  bool has_color = false;
  NvtxPayloadValue payload;
};

struct SyncRecord {
  uint64_t start = 0, end = 0;
  uint32_t type = 0, stream = 0, context = 0, correlation = 0, event_id = 0;
  int32_t return_value = 0;
};

struct OverheadRecord {
  const char* name = nullptr;
  uint64_t start = 0, end = 0;
  uint32_t kind = 0, thread_id = 0, device = 0, correlation = 0;
};

struct GraphLaunchRecord {
  uint64_t start = 0, end = 0;
  uint32_t graph_id = 0, device = 0, context = 0, stream = 0, correlation = 0;
};

struct MetricRangeRecord {
  uint32_t config = 0;  // id returned by TraceEncoder::AddMetricConfig
  const char* name = nullptr;
  const char* domain = nullptr;
  uint64_t occurrence = 0;
  uint32_t occurrences_used = 0;
  uint64_t start = 0, end = 0;
  const double* values = nullptr;
  uint32_t num_values = 0;
  uint32_t thread_id = 0, device = 0, context = 0, correlation = 0, nesting_level = 0;
  uint32_t sm_clock_khz = 0;
  // Multi-pass value sets: the shortest and longest occurrence used, and whether they differ by
  // more than the collector's threshold (the set combines counters of unlike occurrences).
  uint64_t occurrence_min_ns = 0, occurrence_max_ns = 0;
  bool inconsistent = false;
};

// KP_PC_SAMPLING: stall samples of one kernel since its previous record (inject/pc_sampling).
// Parallel arrays; the PC rows hold `num_reasons` entries each in pc_reason_index/pc_samples.
struct PcStallsRecord {
  uint32_t device = 0;
  const char* kernel = nullptr;
  uint64_t time_ns = 0;
  uint32_t sampling_period = 0;
  const uint32_t* reason_index = nullptr;
  const uint64_t* samples = nullptr;
  uint32_t num_reasons = 0;
  struct Pc {
    uint64_t pc_offset = 0;
    const uint32_t* reason_index = nullptr;
    const uint64_t* samples = nullptr;
    uint32_t num_reasons = 0;
    const char* file = nullptr;  // nullptr or "" when the module has no line info
    uint32_t line = 0;
  };
  const Pc* pcs = nullptr;
  uint32_t num_pcs = 0;
};

// A capture window (inject/capture): absolute trace-clock times; trigger is a CaptureTrigger
// value of the schema.
struct CaptureWindowRecord {
  uint32_t index = 0;
  uint32_t trigger = 0;
  uint64_t start_ns = 0, end_ns = 0;
  std::string_view range;
  uint64_t first_step = 0, last_step = 0;
  std::string_view end_reason;
};

// KP_PM_SAMPLING: one sample of one device's counters (inject/pm_sampling).
struct PmSampleRecord {
  uint32_t config = 0;  // id returned by TraceEncoder::AddPmSampleConfig
  uint64_t start = 0, end = 0;
  const double* values = nullptr;
  uint32_t num_values = 0;
  uint32_t device = 0;
};

}  // namespace kp
