// trace_encoder.h: turns neutral records (records.h) into kp::Chunk protobuf wire bytes.
//
// Runs on kp's encoder thread only (not thread-safe, by design: one owner, no locks). Records
// are appended to one chunk buffer in arrival order (protobuf allows the repeated fields of a
// message to interleave); strings and kernel shapes are interned with ids stable for the file
// and (re)defined in every chunk that uses them, so each chunk decodes on its own. Times and
// correlation ids are delta-coded per record list (proto/kptrace.proto, ENCODING RULES).
// No allocation per record: the chunk buffer and intern tables grow, then get reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inject/trace/records.h"
#include "proto/kptrace_schema.h"

namespace kp {

class ChunkSink;  // chunk_writer.h

struct HeaderInfo {
  std::string kp_version;
  uint32_t pid = 0, ppid = 0;
  std::string hostname;
  std::vector<std::string> command_line;
  int32_t rank = -1, local_rank = -1, world_size = -1;
  uint64_t start_time_unix_ns = 0, start_time_trace_ns = 0;
  std::string clock;
  std::vector<std::pair<std::string, std::string>> config;
  uint32_t cupti_api_version = 0;
  int32_t cuda_driver_version = 0;
  std::string driver_version;
  std::string injection_mode;
  std::string output_path;
  std::string run_id;                    // KP_RUN_ID or the launcher's job id; may be empty
  uint64_t start_time_monotonic_ns = 0;  // CLOCK_MONOTONIC at the same moment as the two above
  std::string boot_id;                   // /proc/sys/kernel/random/boot_id
};

struct DeviceInfo {
  uint32_t id = 0;
  std::string name;
  uint8_t uuid[16] = {};
  uint32_t cc_major = 0, cc_minor = 0, sm_count = 0;
  uint64_t global_memory_bytes = 0, global_memory_bandwidth_kbps = 0;
  uint32_t core_clock_khz = 0, memory_clock_khz = 0;
  uint32_t max_threads_per_block = 0, max_shared_memory_per_block = 0, max_registers_per_block = 0,
           l2_cache_bytes = 0, max_warps_per_sm = 0, num_threads_per_warp = 0;
  std::string pci_bus_id;
  bool is_mig = false;
};

struct ContextInfo {
  uint32_t id = 0, device = 0, null_stream = 0;
  bool is_green = false;
};

struct MetricConfigInfo {
  std::vector<std::string> metric_names;
  uint32_t num_passes = 0;
  std::string mode;  // "range" | "kernel"
  uint32_t device = 0;
  std::string chip;
  uint32_t skip = 0;  // range mode: warm-up occurrences per name not measured (KP_METRICS_SKIP)
};

// One device's PM-sampling counter set (KP_PM_SAMPLING).
struct PmSampleConfigInfo {
  uint32_t device = 0;
  std::vector<std::string> counter_names;
  uint64_t interval_ns = 0;
  std::string chip;
};

// kp.Stats as plain counters, generated from the proto; the tracer increments these directly.
using EncoderStats = schema::StatCounters;

struct FooterInfo {
  uint64_t end_time_ns = 0;
  std::string end_reason;
};

class TraceEncoder {
 public:
  struct Options {
    size_t chunk_target_bytes = 4u << 20;  // Flush() is due once the chunk grows past this
  };
  TraceEncoder(ChunkSink* sink, Options options);
  ~TraceEncoder();
  TraceEncoder(const TraceEncoder&) = delete;
  TraceEncoder& operator=(const TraceEncoder&) = delete;

  void SetHeader(const HeaderInfo& header);     // written into chunk 0
  void AddDevice(const DeviceInfo& device);     // repeated in every later chunk
  void AddContext(const ContextInfo& context);  // repeated in every later chunk
  void AddThreadName(uint32_t thread_id, std::string_view name);
  void AddNotice(int severity, std::string_view component, std::string_view message,
                 uint64_t time_ns);
  uint32_t AddMetricConfig(const MetricConfigInfo& config);  // returns the config id (>= 1)
  void AddCaptureWindow(const CaptureWindowRecord& window);
  uint32_t AddPmSampleConfig(const PmSampleConfigInfo& config);  // the config id (>= 1)

  void AddKernel(const KernelRecord& r);
  void AddMemcpy(const MemcpyRecord& r);
  void AddMemset(const MemsetRecord& r);
  void AddApi(const ApiRecord& r);
  void AddNvtxRange(const NvtxRangeRecord& r);
  void AddNvtxMark(const NvtxMarkRecord& r);
  void AddSync(const SyncRecord& r);
  void AddOverhead(const OverheadRecord& r);
  void AddGraphLaunch(const GraphLaunchRecord& r);
  void AddMetricRange(const MetricRangeRecord& r);
  // KP_PC_SAMPLING: a device's stall-reason name table (repeated in every later chunk) and the
  // per-kernel stall counts that refer to it.
  void AddPcStallReason(uint32_t device, uint32_t index, std::string_view name);
  void AddPcStalls(const PcStallsRecord& r);
  void AddPmSample(const PmSampleRecord& r);

  EncoderStats& stats() { return stats_; }
  // Strings held for interning now (bounded: the tables restart at a chunk boundary once they
  // pass 131072 strings or 32 MiB, with ids continuing above the old ones).
  size_t interned_strings() const;
  size_t pending_bytes() const;
  bool FlushDue() const { return pending_bytes() >= options_.chunk_target_bytes; }

  // Ends the current chunk (adds Stats), hands it to the sink and starts the next one.
  // A chunk with no records and nothing new is not written unless `force`.
  void Flush(bool force = false);
  // Writes the final chunk with a Footer (clean end). Nothing may be added afterwards.
  void Finish(const FooterInfo& footer);

 private:
  struct Impl;
  Impl* impl_;
  Options options_;
  EncoderStats stats_;
};

}  // namespace kp
