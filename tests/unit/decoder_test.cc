// decoder_test.cc: the CUPTI tracer's CPU-testable parts. CUPTI activity buffers are built in
// memory with the real record structs (cuptiActivityGetNextRecord works without a GPU: libcupti
// has no DT_NEEDED on libcuda), decoded by ActivityDecoder through the real TraceEncoder, and
// the output parsed with libprotobuf classes generated from proto/kptrace.proto. Also: buffers
// captured on a GPU (tests/data/cupti_buffers), the API selection, the buffer pool, and the
// shape of libkpinject.so (exports, dependencies, a load-only smoke run).
#include <cupti.h>
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "inject/cupti/activity_decoder.h"
#include "inject/cupti/api_selection.h"
#include "inject/cupti/buffer_pool.h"
#include "inject/cupti/encoder_thread.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "kptrace.pb.h"
#include "tools/reader/chunk_columns.h"
#include "tools/reader/start_keys.h"

namespace kp {
namespace {

// Lays records out back to back, as CUPTI does (each struct is 8-byte aligned and sized).
// uint64_t storage keeps the buffer 8-byte aligned.
class BufferBuilder {
 public:
  BufferBuilder() { words_.reserve(1 << 16); }  // references from Add stay valid (512 KiB)
  template <typename T>
  T& Add(CUpti_ActivityKind kind) {
    static_assert(sizeof(T) % 8 == 0, "CUPTI records are 8-byte multiples");
    const size_t at = size_;
    size_ += sizeof(T);
    words_.resize(size_ / 8, 0);
    T* record = reinterpret_cast<T*>(data() + at);
    record->kind = kind;
    return *record;
  }
  uint8_t* data() { return reinterpret_cast<uint8_t*>(words_.data()); }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> words_;
  size_t size_ = 0;
};

// The decoded trace with delta coding undone.
struct DecodedTrace {
  std::vector<Chunk> chunks;
  std::map<uint32_t, std::string> strings;
  std::map<uint32_t, KernelShape> shapes;
  struct Timed {
    uint64_t start, end;
  };
  std::vector<Timed> kernel_times, memcpy_times, memset_times, api_times, range_times, sync_times;
  std::vector<uint64_t> kernel_correlations, mark_times;
  std::vector<Kernel> kernels;
  std::vector<Memcpy> memcpys;
  std::vector<Memset> memsets;
  std::vector<ApiCall> api_calls;
  std::vector<NvtxRange> ranges;
  std::vector<NvtxMark> marks;
  std::vector<Synchronization> syncs;
  std::vector<Overhead> overheads;
  std::vector<GraphLaunch> graph_launches;
  std::vector<Device> devices;
  std::vector<Context> contexts;
  std::vector<ThreadInfo> threads;
  Stats stats;
  bool has_footer = false;

  std::string Str(uint32_t id) const {
    auto it = strings.find(id);
    return it == strings.end() ? "" : it->second;
  }
};

// Undoes the start coding: kernels, copies and memsets (keyed by stream) and API calls (by
// thread) by format version 2's rule (common/start_predictor.h), other lists from the previous
// record's start.
template <typename R>
void Untime(const google::protobuf::RepeatedPtrField<R>& list, uint64_t base,
            std::vector<DecodedTrace::Timed>* out) {
  int64_t t = static_cast<int64_t>(base);
  KeyedStartDecoder keyed(base);
  for (const R& r : list) {
    if constexpr (kStartIsKeyed<R>) {
      t = static_cast<int64_t>(keyed.Next(r.start(), StartKeyOf(r), r.duration()));
    } else {
      t += r.start();
    }
    out->push_back({static_cast<uint64_t>(t), static_cast<uint64_t>(t + r.duration())});
  }
}

DecodedTrace Parse(const MemoryChunkSink& sink) {
  DecodedTrace d;
  for (const auto& raw : sink.raw_chunks()) {
    Chunk c;
    EXPECT_TRUE(c.ParseFromArray(raw.data(), static_cast<int>(raw.size())));
    EXPECT_EQ(ExpandColumns(&c, UINT64_MAX), ColumnsResult::kOk);
    for (const auto& s : c.strings()) d.strings[s.id()] = s.value();
    for (const auto& s : c.kernel_shapes()) d.shapes[s.id()] = s;
    Untime(c.kernels(), c.time_base_ns(), &d.kernel_times);
    Untime(c.memcpys(), c.time_base_ns(), &d.memcpy_times);
    Untime(c.memsets(), c.time_base_ns(), &d.memset_times);
    Untime(c.api_calls(), c.time_base_ns(), &d.api_times);
    Untime(c.nvtx_ranges(), c.time_base_ns(), &d.range_times);
    Untime(c.syncs(), c.time_base_ns(), &d.sync_times);
    int64_t corr = 0;
    for (const auto& k : c.kernels()) {
      corr += k.correlation();
      d.kernel_correlations.push_back(static_cast<uint64_t>(corr));
      d.kernels.push_back(k);
    }
    int64_t t = static_cast<int64_t>(c.time_base_ns());
    for (const auto& m : c.nvtx_marks()) {
      t += m.time();
      d.mark_times.push_back(static_cast<uint64_t>(t));
      d.marks.push_back(m);
    }
    d.memcpys.insert(d.memcpys.end(), c.memcpys().begin(), c.memcpys().end());
    d.memsets.insert(d.memsets.end(), c.memsets().begin(), c.memsets().end());
    d.api_calls.insert(d.api_calls.end(), c.api_calls().begin(), c.api_calls().end());
    d.ranges.insert(d.ranges.end(), c.nvtx_ranges().begin(), c.nvtx_ranges().end());
    d.syncs.insert(d.syncs.end(), c.syncs().begin(), c.syncs().end());
    d.overheads.insert(d.overheads.end(), c.overheads().begin(), c.overheads().end());
    d.graph_launches.insert(d.graph_launches.end(), c.graph_launches().begin(),
                            c.graph_launches().end());
    if (d.devices.empty()) d.devices.assign(c.devices().begin(), c.devices().end());
    if (d.contexts.empty()) d.contexts.assign(c.contexts().begin(), c.contexts().end());
    d.threads.insert(d.threads.end(), c.threads().begin(), c.threads().end());
    if (c.has_stats()) d.stats = c.stats();
    if (c.has_footer()) d.has_footer = true;
    d.chunks.push_back(std::move(c));
  }
  return d;
}

// Decodes `buffers` through a real encoder into memory and parses the result.
DecodedTrace DecodeAll(std::vector<BufferBuilder*> buffers, ActivityDecoder::Options options = {},
                       EncoderStats* stats_out = nullptr) {
  MemoryChunkSink sink;
  TraceEncoder encoder(&sink, TraceEncoder::Options());
  HeaderInfo header;
  header.kp_version = "test";
  encoder.SetHeader(header);
  ActivityDecoder decoder(&encoder, nullptr, options);
  for (BufferBuilder* b : buffers) decoder.DecodeBuffer(b->data(), b->size());
  decoder.Finish();
  if (stats_out != nullptr) *stats_out = encoder.stats();
  FooterInfo footer;
  footer.end_reason = "test";
  encoder.Finish(footer);
  return Parse(sink);
}

TEST(ActivityDecoderTest, DecodesEveryRecordKindWithItsFields) {
  BufferBuilder b;
  auto& k = b.Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.start = 1000000;
  k.end = 1005000;
  k.gridX = 128;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.clusterX = 2;
  k.clusterY = 1;
  k.clusterZ = 1;
  k.registersPerThread = 40;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 4096;
  k.localMemoryPerThread = 16;
  k.sharedMemoryExecuted = 65536;
  k.deviceId = 1;
  k.contextId = 7;
  k.streamId = 13;
  k.correlationId = 501;
  k.graphId = 3;
  k.graphNodeId = 0x1234567890ull;
  k.channelID = 9;
  k.name = "_Z6kernelPfi";
  auto& k2 = b.Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k2.start = 0;  // CUPTI gives 0/0 when it could not time the kernel
  k2.end = 0;
  k2.isDeviceLaunched = 1;
  k2.correlationId = 502;
  k2.name = "_Z6kernelPfi";

  auto& m = b.Add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m.start = 1010000;
  m.end = 1012000;
  m.bytes = 1 << 20;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  m.streamId = 13;
  m.correlationId = 503;
  m.copyCount = 1;
  auto& p = b.Add<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2);
  p.start = 1013000;
  p.end = 1014000;
  p.bytes = 4096;
  p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  p.srcDeviceId = 0;
  p.dstDeviceId = 1;
  p.srcContextId = 5;
  p.dstContextId = 7;
  p.correlationId = 504;
  auto& s = b.Add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  s.start = 1015000;
  s.end = 1015500;
  s.bytes = 256;
  s.value = 0xab;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  s.correlationId = 505;

  auto& rt = b.Add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  rt.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  rt.start = 999000;
  rt.end = 999900;
  rt.threadId = 4242;
  rt.correlationId = 501;
  auto& drv = b.Add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  drv.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  drv.start = 999100;
  drv.end = 999800;
  drv.threadId = 4242;
  drv.correlationId = 501;
  drv.returnValue = 1;

  // NVTX: a range started on thread 42 and ended on thread 43 with color/category/payload;
  // an instantaneous mark; an END with no START; a range never closed.
  char start_name[] = "step";
  auto& ms = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  ms.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  ms.timestamp = 998000;
  ms.id = 1;
  ms.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  ms.objectId.pt.threadId = 42;
  ms.name = start_name;
  ms.domain = "mydomain";
  auto& md = b.Add<CUpti_ActivityMarkerData2>(CUPTI_ACTIVITY_KIND_MARKER_DATA);
  md.id = 1;
  md.flags = CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB;
  md.color = 0xff00ff00;
  md.category = 3;
  md.payloadKind = CUPTI_METRIC_VALUE_KIND_UINT64;
  md.payload.metricValueUint64 = 77;
  auto& mark = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  mark.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
  mark.timestamp = 1001000;
  mark.id = 2;
  mark.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  mark.objectId.pt.threadId = 42;
  mark.name = "tick";
  auto& mark_data = b.Add<CUpti_ActivityMarkerData2>(CUPTI_ACTIVITY_KIND_MARKER_DATA);
  mark_data.id = 2;
  mark_data.payloadKind = CUPTI_METRIC_VALUE_KIND_DOUBLE;
  mark_data.payload.metricValueDouble = 2.5;
  auto& me = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  me.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  me.timestamp = 1020000;
  me.id = 1;
  me.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  me.objectId.pt.threadId = 43;
  auto& orphan = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  orphan.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  orphan.timestamp = 1021000;
  orphan.id = 99;
  auto& open = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  open.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  open.timestamp = 1022000;
  open.id = 5;
  open.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  open.objectId.pt.threadId = 42;
  open.name = "never_closed";
  auto& tname = b.Add<CUpti_ActivityName>(CUPTI_ACTIVITY_KIND_NAME);
  tname.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  tname.objectId.pt.threadId = 42;
  tname.name = "worker";

  auto& sync = b.Add<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = 1016000;
  sync.end = 1019000;
  sync.streamId = 13;
  sync.contextId = 7;
  sync.correlationId = 506;
  sync.cudaEventId = 4;
  auto& oh = b.Add<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD);
  oh.overheadKind = CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL;
  oh.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  oh.objectId.pt.threadId = 4242;
  oh.start = 1017000;
  oh.end = 1017100;
  // Ownership passes to the client, which must free() it (run under KP_SANITIZE to see a leak).
  oh.overheadData = std::calloc(1, sizeof(CUpti_ActivityOverheadCommandBufferFullData));
  auto& g = b.Add<CUpti_ActivityGraphTrace2>(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  g.start = 1030000;
  g.end = 1040000;
  g.graphId = 3;
  g.streamId = 13;
  g.correlationId = 507;
  auto& dev = b.Add<CUpti_ActivityDevice5>(CUPTI_ACTIVITY_KIND_DEVICE);
  dev.id = 1;
  dev.name = "NVIDIA H200";
  dev.computeCapabilityMajor = 9;
  dev.computeCapabilityMinor = 0;
  dev.numMultiprocessors = 132;
  dev.globalMemorySize = 150ull << 30;
  dev.coreClockRate = 1980000;
  dev.l2CacheSize = 60 << 20;
  dev.uuid.bytes[0] = 0x5a;
  dev.uuid.bytes[15] = 0x7e;
  auto& ctx = b.Add<CUpti_ActivityContext3>(CUPTI_ACTIVITY_KIND_CONTEXT);
  ctx.contextId = 7;
  ctx.deviceId = 1;
  ctx.nullStreamId = 11;
  b.Add<CUpti_ActivityCudaEvent2>(CUPTI_ACTIVITY_KIND_CUDA_EVENT);  // not decoded: counted

  // Mutating the marker name after decoding must not change the trace (names are copied).
  EncoderStats stats;
  MemoryChunkSink sink;
  TraceEncoder encoder(&sink, TraceEncoder::Options());
  encoder.SetHeader(HeaderInfo());
  ActivityDecoder decoder(&encoder, nullptr, {});
  EXPECT_EQ(decoder.DecodeBuffer(b.data(), b.size()), 21u);
  std::strcpy(start_name, "XXXX");
  decoder.Finish();
  stats = encoder.stats();
  encoder.Finish(FooterInfo());
  DecodedTrace d = Parse(sink);

  ASSERT_EQ(d.kernels.size(), 2u);
  const KernelShape& shape = d.shapes.at(d.kernels[0].shape());
  EXPECT_EQ(d.Str(shape.name()), "_Z6kernelPfi");
  EXPECT_EQ(shape.grid_x(), 128u);
  EXPECT_EQ(shape.grid_y(), 2u);
  EXPECT_EQ(shape.block_x(), 256u);
  EXPECT_EQ(shape.cluster_x(), 2u);
  EXPECT_EQ(shape.registers_per_thread(), 40u);
  EXPECT_EQ(shape.static_shared_bytes(), 1024u);
  EXPECT_EQ(shape.dynamic_shared_bytes(), 4096u);
  EXPECT_EQ(shape.local_bytes_per_thread(), 16u);
  EXPECT_EQ(shape.shared_executed_bytes(), 65536u);
  EXPECT_EQ(d.kernel_times[0].start, 1000000u);
  EXPECT_EQ(d.kernel_times[0].end, 1005000u);
  EXPECT_EQ(d.kernels[0].stream(), 13u);
  EXPECT_EQ(d.kernels[0].context(), 7u);
  EXPECT_EQ(d.kernels[0].device(), 1u);
  EXPECT_EQ(d.kernels[0].graph_id(), 3u);
  EXPECT_EQ(d.kernels[0].graph_node_id(), 0x1234567890ull);
  EXPECT_EQ(d.kernels[0].channel(), 9u);
  EXPECT_EQ(d.kernels[0].flags(), 0u);
  EXPECT_EQ(d.kernel_correlations[0], 501u);
  EXPECT_EQ(d.kernel_correlations[1], 502u);
  EXPECT_EQ(d.kernels[1].flags(), uint32_t{RECORD_FLAG_NO_TIMING | RECORD_FLAG_DEVICE_LAUNCHED});

  ASSERT_EQ(d.memcpys.size(), 2u);
  EXPECT_EQ(d.memcpys[0].bytes(), 1u << 20);
  EXPECT_EQ(d.memcpys[0].copy_kind(), COPY_HTOD);
  EXPECT_EQ(d.memcpys[0].src_kind(), MEMORY_PINNED);
  EXPECT_EQ(d.memcpys[0].dst_kind(), MEMORY_DEVICE);
  EXPECT_EQ(d.memcpys[0].flags(), uint32_t{RECORD_FLAG_ASYNC});
  EXPECT_FALSE(d.memcpys[0].peer());
  EXPECT_TRUE(d.memcpys[1].peer());
  EXPECT_EQ(d.memcpys[1].copy_kind(), COPY_PTOP);
  EXPECT_EQ(d.memcpys[1].dst_device(), 1u);
  EXPECT_EQ(d.memcpys[1].src_context(), 5u);
  EXPECT_EQ(d.memcpys[1].dst_context(), 7u);
  EXPECT_EQ(d.memcpy_times[1].start, 1013000u);

  ASSERT_EQ(d.memsets.size(), 1u);
  EXPECT_EQ(d.memsets[0].value(), 0xabu);
  EXPECT_EQ(d.memsets[0].bytes(), 256u);
  EXPECT_EQ(d.memsets[0].memory_kind(), MEMORY_DEVICE);

  ASSERT_EQ(d.api_calls.size(), 2u);
  EXPECT_EQ(d.Str(d.api_calls[0].name()), "cudaLaunchKernel_v7000");
  EXPECT_EQ(d.api_calls[0].domain(), API_RUNTIME);
  EXPECT_EQ(d.Str(d.api_calls[1].name()), "cuLaunchKernel");
  EXPECT_EQ(d.api_calls[1].domain(), API_DRIVER);
  EXPECT_EQ(d.api_calls[1].return_value(), 1);
  EXPECT_EQ(d.api_calls[0].thread_id(), 4242u);
  EXPECT_EQ(d.api_times[0].start, 999000u);
  EXPECT_EQ(d.api_times[0].end, 999900u);

  ASSERT_EQ(d.ranges.size(), 2u);  // "step" closed, "never_closed" written at the end
  const NvtxRange* step = nullptr;
  const NvtxRange* left_open = nullptr;
  size_t step_index = 0;
  for (size_t i = 0; i < d.ranges.size(); ++i) {
    if (d.Str(d.ranges[i].name()) == "step") step = &d.ranges[i], step_index = i;
    if (d.Str(d.ranges[i].name()) == "never_closed") left_open = &d.ranges[i];
  }
  ASSERT_NE(step, nullptr);
  ASSERT_NE(left_open, nullptr);
  EXPECT_EQ(d.Str(step->domain()), "mydomain");
  EXPECT_EQ(step->thread_id(), 42u);
  EXPECT_EQ(step->end_thread_id(), 43u);
  EXPECT_TRUE(step->has_color());
  EXPECT_EQ(step->color(), 0xff00ff00u);
  EXPECT_EQ(step->category(), 3u);
  EXPECT_EQ(step->payload().u64(), 77u);
  EXPECT_EQ(step->id(), 1u);
  EXPECT_EQ(d.range_times[step_index].start, 998000u);
  EXPECT_EQ(d.range_times[step_index].end, 1020000u);
  EXPECT_EQ(left_open->flags(), uint32_t{RECORD_FLAG_OPEN});
  EXPECT_EQ(left_open->domain(), 0u);

  ASSERT_EQ(d.marks.size(), 1u);
  EXPECT_EQ(d.Str(d.marks[0].name()), "tick");
  EXPECT_EQ(d.mark_times[0], 1001000u);
  EXPECT_DOUBLE_EQ(d.marks[0].payload().f64(), 2.5);
  EXPECT_FALSE(d.marks[0].has_color());

  ASSERT_EQ(d.threads.size(), 1u);
  EXPECT_EQ(d.threads[0].thread_id(), 42u);
  EXPECT_EQ(d.threads[0].name(), "worker");

  ASSERT_EQ(d.syncs.size(), 1u);
  EXPECT_EQ(d.syncs[0].type(), SYNC_STREAM_SYNCHRONIZE);
  EXPECT_EQ(d.syncs[0].event_id(), 4u);
  EXPECT_EQ(d.sync_times[0].end, 1019000u);
  ASSERT_EQ(d.overheads.size(), 1u);
  EXPECT_EQ(d.Str(d.overheads[0].name()), "COMMAND_BUFFER_FULL");
  EXPECT_EQ(d.overheads[0].thread_id(), 4242u);
  ASSERT_EQ(d.graph_launches.size(), 1u);
  EXPECT_EQ(d.graph_launches[0].graph_id(), 3u);

  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].name(), "NVIDIA H200");
  EXPECT_EQ(d.devices[0].sm_count(), 132u);
  EXPECT_EQ(d.devices[0].compute_capability_major(), 9u);
  EXPECT_EQ(d.devices[0].core_clock_khz(), 1980000u);
  ASSERT_EQ(d.devices[0].uuid().size(), 16u);
  EXPECT_EQ(static_cast<uint8_t>(d.devices[0].uuid()[0]), 0x5a);
  EXPECT_EQ(static_cast<uint8_t>(d.devices[0].uuid()[15]), 0x7e);
  ASSERT_EQ(d.contexts.size(), 1u);
  EXPECT_EQ(d.contexts[0].null_stream(), 11u);

  EXPECT_EQ(stats.nvtx_unmatched_ends, 1u);
  EXPECT_EQ(stats.nvtx_open_ranges, 1u);
  EXPECT_EQ(stats.zero_timestamp_records, 1u);
  EXPECT_EQ(stats.unknown_records, 1u);
  EXPECT_EQ(stats.records_filtered, 0u);
  EXPECT_EQ(d.stats.nvtx_unmatched_ends(), 1u);
  EXPECT_TRUE(d.has_footer);
}

TEST(ActivityDecoderTest, RangesPairAcrossBuffers) {
  BufferBuilder first, second;
  auto& start = first.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  start.timestamp = 100;
  start.id = 7;
  start.name = "outer";
  auto& end = second.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  end.timestamp = 900;
  end.id = 7;
  EncoderStats stats;
  DecodedTrace d = DecodeAll({&first, &second}, {}, &stats);
  ASSERT_EQ(d.ranges.size(), 1u);
  EXPECT_EQ(d.Str(d.ranges[0].name()), "outer");
  EXPECT_EQ(d.range_times[0].start, 100u);
  EXPECT_EQ(d.range_times[0].end, 900u);
  EXPECT_EQ(d.ranges[0].flags(), 0u);
  EXPECT_EQ(stats.nvtx_unmatched_ends, 0u);
  EXPECT_EQ(stats.nvtx_open_ranges, 0u);
}

// Per-thread buffers: a range ended on another thread may be decoded before its START.
TEST(ActivityDecoderTest, EndBeforeStartPairsAcrossThreadBuffers) {
  BufferBuilder ending_thread, starting_thread;
  auto& end = ending_thread.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  end.timestamp = 900;
  end.id = 8;
  end.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  end.objectId.pt.threadId = 52;
  auto& start = starting_thread.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  start.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  start.timestamp = 100;
  start.id = 8;
  start.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  start.objectId.pt.threadId = 51;
  start.name = "cross-thread";
  // Seen on the H200: the START's MarkerData (color) comes after the START in its buffer, so a
  // range completed by an early END must still pick it up.
  auto& data = starting_thread.Add<CUpti_ActivityMarkerData2>(CUPTI_ACTIVITY_KIND_MARKER_DATA);
  data.id = 8;
  data.flags = CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB;
  data.color = 0xFFFF0000u;
  data.category = 3;
  EncoderStats stats;
  DecodedTrace d = DecodeAll({&ending_thread, &starting_thread}, {}, &stats);
  ASSERT_EQ(d.ranges.size(), 1u);
  EXPECT_EQ(d.Str(d.ranges[0].name()), "cross-thread");
  EXPECT_EQ(d.range_times[0].start, 100u);
  EXPECT_EQ(d.range_times[0].end, 900u);
  EXPECT_EQ(d.ranges[0].thread_id(), 51u);
  EXPECT_EQ(d.ranges[0].end_thread_id(), 52u);
  EXPECT_TRUE(d.ranges[0].has_color());
  EXPECT_EQ(d.ranges[0].color(), 0xFFFF0000u);
  EXPECT_EQ(d.ranges[0].category(), 3u);
  EXPECT_EQ(stats.nvtx_unmatched_ends, 0u);
  EXPECT_EQ(stats.nvtx_open_ranges, 0u);
}

CUpti_ActivityKernel10& AddKernelAt(BufferBuilder* b, uint64_t start, uint32_t correlation) {
  auto& k = b->Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.start = start;
  k.end = start + 10;
  k.correlationId = correlation;
  k.name = "k";
  return k;
}

TEST(ActivityDecoderTest, CaptureWindowFiltersByTime) {
  BufferBuilder b;
  AddKernelAt(&b, 500, 1);
  AddKernelAt(&b, 1500, 2);
  AddKernelAt(&b, 2500, 3);
  ActivityDecoder::Options window;
  window.window_start = 1000;
  window.window_end = 2000;
  EncoderStats stats;
  DecodedTrace d = DecodeAll({&b}, window, &stats);
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernel_correlations[0], 2u);
  EXPECT_EQ(stats.records_filtered, 2u);
}

// What the CUPTI detach after the last window waits for (cupti_detach.h): every successful
// one-kernel launch call has its kernel record; graph kernels and other calls are not counted.
TEST(ActivityDecoderTest, WorkCountsPairLaunchCallsWithTheirKernels) {
  BufferBuilder b;
  auto api = [&b](CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint32_t correlation,
                  uint32_t result) {
    auto& a = b.Add<CUpti_ActivityAPI>(kind);
    a.cbid = cbid;
    a.start = 100 + correlation;
    a.end = 110 + correlation;
    a.correlationId = correlation;
    a.returnValue = result;
  };
  api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 0);
  api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, 2, 0);
  api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 3, 0);
  api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 4,
      1);  // failed
  api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 5, 0);
  api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 6, 0);
  api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 7, 0);
  AddKernelAt(&b, 1000, 1);
  AddKernelAt(&b, 1100, 2);
  AddKernelAt(&b, 1200, 5).graphId = 9;
  auto& copy = b.Add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.start = 1300;
  copy.end = 1310;
  copy.correlationId = 6;

  MemoryChunkSink sink;
  TraceEncoder encoder(&sink, TraceEncoder::Options());
  ActivityDecoder decoder(&encoder, nullptr, {});
  EXPECT_EQ(decoder.work_counts().launch_calls, 0u);
  decoder.DecodeBuffer(b.data(), b.size());
  const ActivityDecoder::WorkCounts c = decoder.work_counts();
  EXPECT_EQ(c.launch_calls, 3u);  // cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel
  EXPECT_EQ(c.kernels, 2u);       // correlation 3's kernel has not come: not done yet
  EXPECT_EQ(c.gpu_records, 4u);   // two kernels, the graph's kernel, the copy
  BufferBuilder late;
  AddKernelAt(&late, 1400, 3);
  decoder.DecodeBuffer(late.data(), late.size());
  EXPECT_EQ(decoder.work_counts().kernels, decoder.work_counts().launch_calls);
}

TEST(ActivityDecoderTest, CaptureRangeOpensTheWindow) {
  BufferBuilder b;
  AddKernelAt(&b, 500, 1);
  auto& other = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  other.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  other.timestamp = 600;
  other.id = 1;
  other.name = "warmup";
  auto& roi = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  roi.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  roi.timestamp = 1000;
  roi.id = 2;
  roi.name = "roi";
  AddKernelAt(&b, 1200, 2);
  AddKernelAt(&b, 5000, 3);  // after KP_DURATION
  auto& roi_end = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  roi_end.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
  roi_end.timestamp = 1300;
  roi_end.id = 2;
  ActivityDecoder::Options window;
  window.start_range = "roi";
  window.duration_ns = 1000;
  EncoderStats stats;
  DecodedTrace d = DecodeAll({&b}, window, &stats);
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernel_correlations[0], 2u);
  ASSERT_EQ(d.ranges.size(), 1u);  // "warmup" started before the window: filtered
  EXPECT_EQ(d.Str(d.ranges[0].name()), "roi");
  EXPECT_EQ(stats.records_filtered, 3u);
}

// KP_CAPTURE_RANGE=domain::message: the range of that name in another domain (or the default
// one) does not open the window; the one in the named domain does. "::message" names the
// default domain.
TEST(ActivityDecoderTest, CaptureRangeWithADomain) {
  auto run = [](const std::string& setting) {
    BufferBuilder b;
    auto& in_default = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
    in_default.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    in_default.timestamp = 100;
    in_default.id = 1;
    in_default.name = "step";
    AddKernelAt(&b, 200, 1);
    auto& in_torch = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
    in_torch.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    in_torch.timestamp = 1000;
    in_torch.id = 2;
    in_torch.name = "step";
    in_torch.domain = "torch";
    AddKernelAt(&b, 1100, 2);
    ActivityDecoder::Options window;
    window.start_range = setting;
    EncoderStats stats;
    DecodedTrace d = DecodeAll({&b}, window, &stats);
    return d.kernel_correlations;
  };
  EXPECT_EQ(run("torch::step"), (std::vector<uint64_t>{2}));
  EXPECT_EQ(run("::step"), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(run("step"), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(run("other::step").empty());
}

// NVTX markers lost to CUPTI drops must not grow host memory without bound: past 65536
// pending STARTs the older half is given up (counted as open, not emitted), past 65536 pending
// ENDs they are all given up (counted as unmatched).
TEST(ActivityDecoderTest, PendingNvtxMarkersAreCapped) {
  const uint32_t n = 70000;
  BufferBuilder starts, ends;
  for (uint32_t i = 0; i < n; ++i) {
    auto& m = starts.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
    m.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
    m.timestamp = 1000 + i;
    m.id = i + 1;
    m.name = "never-ended";
  }
  for (uint32_t i = 0; i < n; ++i) {
    auto& m = ends.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
    m.flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
    m.timestamp = 200000 + i;
    m.id = 1000000 + i;  // their STARTs were lost
  }
  EncoderStats stats;
  DecodedTrace d = DecodeAll({&starts, &ends}, {}, &stats);
  EXPECT_EQ(stats.nvtx_open_ranges, n);
  EXPECT_EQ(stats.nvtx_unmatched_ends, n);
  // Only the newer half of the STARTs is still held, and written as open at the end.
  ASSERT_EQ(d.ranges.size(), n - n / 2);
  uint64_t oldest = UINT64_MAX;
  for (const auto& t : d.range_times) oldest = std::min<uint64_t>(oldest, t.start);
  EXPECT_EQ(oldest, 1000u + n / 2);
}

// A file-size limit (`ulimit -f`, common under batch schedulers) must not kill the profiled
// program: the encoder thread blocks SIGXFSZ, so write() fails with EFBIG, kp prints its one
// line and stops writing, and the process goes on to exit normally.
TEST(EncoderThreadTest, FileSizeLimitDoesNotKillTheProcess) {
  const std::string dir = ::testing::TempDir();
  const std::string trace = dir + "/fsize_" + std::to_string(getpid()) + ".kptrace";
  const std::string err = trace + ".stderr";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FILE* f = std::freopen(err.c_str(), "w", stderr);
    (void)f;
    rlimit limit{64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &limit);
    FileChunkWriter* writer = FileChunkWriter::Open(trace, 0).value_or(nullptr).release();
    if (writer == nullptr) _exit(3);
    TraceEncoder encoder(writer, TraceEncoder::Options());
    ActivityDecoder decoder(&encoder, nullptr, {});
    BufferPool pool(1 << 20, 8 << 20);
    EncoderThread::Options options;
    options.flush_cupti = false;
    EncoderThread thread(&encoder, &decoder, &pool, options);
    if (!thread.Start().ok()) _exit(4);
    for (int chunk = 0; chunk < 20; ++chunk) {
      thread.Post([chunk](TraceEncoder& e) {
        for (uint32_t i = 0; i < 2000; ++i) {
          KernelRecord k;
          k.name = "kernel_filling_the_disk";
          k.start = 1000000ull * chunk + i * 100;
          k.end = k.start + 50;
          k.correlation = chunk * 2000 + i;
          e.AddKernel(k);
        }
        e.Flush();
      });
    }
    thread.Stop("test");
    std::fflush(stderr);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(err);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("kp: cannot write trace"), std::string::npos) << text;
  struct stat st {};
  ASSERT_EQ(stat(trace.c_str(), &st), 0);
  EXPECT_LE(st.st_size, 64 << 10);
  EXPECT_GT(st.st_size, 8);
  std::remove(trace.c_str());
  std::remove(err.c_str());
}

// kp's threads carry their own names, so top -H, perf and a per-thread CPU count tell them from
// the program's (a thread inherits the process's name otherwise).
TEST(EncoderThreadTest, ThreadIsNamedKpEncoder) {
  const std::string dir = ::testing::TempDir();
  const std::string trace = dir + "/named_" + std::to_string(getpid()) + ".kptrace";
  std::unique_ptr<FileChunkWriter> writer = FileChunkWriter::Open(trace, 0).value_or(nullptr);
  ASSERT_NE(writer, nullptr);
  TraceEncoder encoder(writer.get(), TraceEncoder::Options());
  ActivityDecoder decoder(&encoder, nullptr, {});
  BufferPool pool(1 << 20, 8 << 20);
  EncoderThread::Options options;
  options.flush_cupti = false;
  EncoderThread thread(&encoder, &decoder, &pool, options);
  ASSERT_TRUE(thread.Start().ok());
  std::promise<std::string> name;
  std::future<std::string> named = name.get_future();
  thread.Post([&name](TraceEncoder&) {
    char text[16] = {};
    pthread_getname_np(pthread_self(), text, sizeof(text));
    name.set_value(text);
  });
  ASSERT_EQ(named.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(named.get(), "kp-encoder");
  thread.Stop("test");
  std::remove(trace.c_str());
}

TEST(ApiSelectionTest, LaunchModeKeepsLaunchCopySyncAllocEventGraphCalls) {
  auto names_of = [](CUpti_CallbackDomain domain) {
    std::set<std::string> names;
    for (CUpti_CallbackId cbid : SelectLaunchRelatedCbids(domain)) {
      const char* name = nullptr;
      EXPECT_EQ(cuptiGetCallbackName(domain, cbid, &name), CUPTI_SUCCESS);
      names.insert(name);
    }
    return names;
  };
  std::set<std::string> runtime = names_of(CUPTI_CB_DOMAIN_RUNTIME_API);
  std::set<std::string> driver = names_of(CUPTI_CB_DOMAIN_DRIVER_API);
  for (const char* want :
       {"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "__cudaLaunchKernel_v13000",
        "__cudaLaunchKernel_ptsz_v13000", "cudaLaunchKernelExC_v11060",
        "cudaLaunchCooperativeKernel_v9000", "cudaGraphLaunch_v10000", "cudaMemcpy_v3020",
        "cudaMemcpyAsync_v3020", "cudaMemset_v3020", "cudaMalloc_v3020", "cudaFree_v3020",
        "cudaDeviceSynchronize_v3020", "cudaStreamSynchronize_v3020", "cudaEventSynchronize_v3020",
        "cudaEventRecord_v3020", "cudaEventQuery_v3020", "cudaStreamWaitEvent_v3020"}) {
    EXPECT_TRUE(runtime.count(want)) << want;
  }
  for (const char* unwanted : {"cudaGetDevice_v3020", "cudaGetLastError_v3020",
                               "cudaSetDevice_v3020", "cudaStreamCreate_v3020"}) {
    EXPECT_FALSE(runtime.count(unwanted)) << unwanted;
  }
  for (const char* want :
       {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
        "cuLaunchCooperativeKernel", "cuGraphLaunch", "cuMemcpyHtoD_v2", "cuMemsetD8_v2",
        "cuMemAlloc_v2", "cuMemFree_v2", "cuCtxSynchronize", "cuStreamSynchronize", "cuEventRecord",
        "cuEventSynchronize"}) {
    EXPECT_TRUE(driver.count(want)) << want;
  }
  for (const char* unwanted : {"cuCtxGetCurrent", "cuCtxGetDevice", "cuDevicePrimaryCtxGetState",
                               "cuKernelGetName", "cuModuleGetFunction"}) {
    EXPECT_FALSE(driver.count(unwanted)) << unwanted;
  }
  // The 505/506 cbids of nvcc 13's <<<>>> launches (docs/cupti.md, "API records").
  std::vector<CUpti_CallbackId> rt = SelectLaunchRelatedCbids(CUPTI_CB_DOMAIN_RUNTIME_API);
  EXPECT_NE(std::find(rt.begin(), rt.end(), 505u), rt.end());
  EXPECT_NE(std::find(rt.begin(), rt.end(), 506u), rt.end());
  EXPECT_NE(std::find(rt.begin(), rt.end(), 211u), rt.end());
}

TEST(BufferPoolTest, CapsRefusesAndRecycles) {
  BufferPool pool(1 << 20, 3 << 20);
  uint8_t* a = pool.Acquire();
  uint8_t* b = pool.Acquire();
  uint8_t* c = pool.Acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.refused(), 1u);
  pool.Release(b);
  EXPECT_EQ(pool.Acquire(), b);
  EXPECT_EQ(pool.allocated(), 3u);
  pool.Release(a);
  pool.Release(b);
  pool.Release(c);
}

// Resident pages of [p, p + bytes), from mincore.
static size_t ResidentPages(const uint8_t* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in(bytes / page);
  if (mincore(const_cast<uint8_t*>(p), bytes, in.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(BufferPoolTest, BuffersIdleForAPeriodBeyondTheWarmOnesGiveTheirPagesBack) {
  const size_t bytes = 1 << 20;
  const size_t pages = bytes / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  BufferPool pool(bytes, 8 << 20);
  // A burst: five buffers in use at once, each filled, then all free again.
  std::vector<uint8_t*> burst;
  for (int i = 0; i < 5; ++i) {
    burst.push_back(pool.Acquire());
    ASSERT_NE(burst.back(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(burst.back()) % sysconf(_SC_PAGESIZE), 0u);
    std::memset(burst.back(), 0xab, bytes);
  }
  for (uint8_t* b : burst) pool.Release(b);
  // They became free within this period: nothing is trimmed yet.
  EXPECT_EQ(pool.TrimIdle(), 0u);
  for (uint8_t* b : burst) EXPECT_EQ(ResidentPages(b, bytes), pages);
  // One buffer used and returned within the next period: it is the most recent, kept warm
  // with the newest of those that stayed free all period; the other three give their pages back.
  uint8_t* used = pool.Acquire();
  EXPECT_EQ(used, burst[4]);
  pool.Release(used);
  EXPECT_EQ(pool.TrimIdle(), 3u);
  EXPECT_EQ(pool.trimmed(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ResidentPages(burst[i], bytes), 0u) << i;
  for (int i = 3; i < 5; ++i) EXPECT_EQ(ResidentPages(burst[i], bytes), pages) << i;
  EXPECT_EQ(pool.TrimIdle(), 0u);  // the warm ones stay, idle or not
  // Reuse: warm ones first (most recent first), then cold ones, which come back zeroed.
  EXPECT_EQ(pool.Acquire(), burst[4]);
  EXPECT_EQ(pool.Acquire(), burst[3]);
  uint8_t* cold = pool.Acquire();
  EXPECT_TRUE(cold == burst[0] || cold == burst[1] || cold == burst[2]);
  EXPECT_EQ(cold[0], 0);
  EXPECT_EQ(cold[bytes - 1], 0);
  EXPECT_EQ(pool.allocated(), 5u);  // no new buffer while a cold one was free
  EXPECT_EQ(pool.refused(), 0u);
  pool.Release(cold);
  pool.Release(burst[3]);
  pool.Release(burst[4]);
}

// CUPTI's threads take and return buffers while the encoder's thread trims: no buffer is ever
// handed to two holders at once, none is lost, and no request is refused while a buffer is
// free (run under ThreadSanitizer too).
TEST(BufferPoolTest, ConcurrentAcquireReleaseAndTrim) {
  const size_t bytes = 64 << 10;
  const size_t cap = 16;
  BufferPool pool(bytes, cap * bytes);
  std::atomic<int> mismatches{0};
  std::atomic<bool> done{false};
  std::thread trimmer([&] {  // the encoder thread's periodic upkeep
    while (!done.load()) {
      pool.TrimIdle();
      pool.KeepSpare();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Until the trimmer has given pages back a few times while they ran (a bound for safety).
      for (int i = 0; i < 2000 || (pool.trimmed() < 20 && i < 2000000); ++i) {
        std::vector<uint8_t*> held;  // at most 4 per thread: 16 in all, the cap
        for (int k = 0; k < 1 + (i + t) % 4; ++k) {
          uint8_t* b = pool.Acquire();
          if (b == nullptr) continue;
          std::memset(b, t + 1, 64);
          held.push_back(b);
        }
        for (uint8_t* b : held) {
          for (int j = 0; j < 64; ++j) mismatches += b[j] != t + 1;
          pool.Release(b);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  done = true;
  trimmer.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(pool.refused(), 0u);
  EXPECT_GE(pool.trimmed(), 20u);
  // No trim under way: buffers allocated past the cap while one was are freed again.
  EXPECT_LE(pool.allocated(), cap);
  // Every buffer is free again: as many as the cap can be taken at once, distinct, none more.
  std::vector<uint8_t*> all;
  for (uint8_t* b = pool.Acquire(); b != nullptr; b = pool.Acquire()) all.push_back(b);
  EXPECT_EQ(all.size(), cap);
  EXPECT_EQ(pool.allocated(), cap);
  EXPECT_EQ(std::set<uint8_t*>(all.begin(), all.end()).size(), all.size());
  for (uint8_t* b : all) pool.Release(b);
}

TEST(BufferPoolTest, ABufferUsedWithinThePeriodIsNotIdle) {
  BufferPool pool(1 << 20, 8 << 20);
  std::vector<uint8_t*> all;
  for (int i = 0; i < 5; ++i) all.push_back(pool.Acquire());
  for (uint8_t* b : all) pool.Release(b);
  EXPECT_EQ(pool.TrimIdle(), 0u);  // free since within this period
  // All five taken and returned within the next period: none stayed free all along.
  for (uint8_t*& b : all) b = pool.Acquire();
  for (uint8_t* b : all) pool.Release(b);
  EXPECT_EQ(pool.TrimIdle(), 0u);
  EXPECT_EQ(pool.TrimIdle(), 3u);  // idle a whole period now: all but the two warm ones
}

TEST(BufferPoolTest, OnceTwoBuffersWereNeededASpareIsMadeResidentOnce) {
  const size_t bytes = 1 << 20;
  const size_t pages = bytes / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  BufferPool pool(bytes, 8 << 20);
  uint8_t* a = pool.Acquire();
  EXPECT_FALSE(pool.KeepSpare());  // one buffer has sufficed so far
  EXPECT_EQ(pool.allocated(), 1u);
  uint8_t* b = pool.Acquire();  // CUPTI filled one while the other was out
  pool.Release(a);
  EXPECT_TRUE(pool.KeepSpare());
  EXPECT_FALSE(pool.KeepSpare());  // once only
  EXPECT_EQ(pool.allocated(), 3u);
  pool.Release(b);
  // The spare is the last free buffer taken, and its pages are already in memory.
  EXPECT_EQ(pool.Acquire(), b);
  EXPECT_EQ(pool.Acquire(), a);
  uint8_t* spare = pool.Acquire();
  ASSERT_NE(spare, nullptr);
  EXPECT_NE(spare, a);
  EXPECT_NE(spare, b);
  EXPECT_EQ(ResidentPages(spare, bytes), pages);
  EXPECT_EQ(pool.allocated(), 3u);
  // The usual depth (two free, one out) is never trimmed.
  pool.Release(a);
  pool.Release(b);
  EXPECT_EQ(pool.TrimIdle(), 0u);
  EXPECT_EQ(pool.TrimIdle(), 0u);
  EXPECT_EQ(ResidentPages(spare, bytes), pages);
  pool.Release(spare);
}

TEST(BufferPoolTest, NoSpareForAPoolThatGrewFurtherAndAnIdleSpareIsTrimmed) {
  const size_t bytes = 1 << 20;
  {
    BufferPool pool(bytes, 8 << 20);  // a burst took three before the first period ended
    std::vector<uint8_t*> three;
    for (int i = 0; i < 3; ++i) three.push_back(pool.Acquire());
    for (uint8_t* b : three) pool.Release(b);
    EXPECT_FALSE(pool.KeepSpare());
    EXPECT_EQ(pool.allocated(), 3u);
  }
  BufferPool pool(bytes, 8 << 20);
  uint8_t* a = pool.Acquire();
  uint8_t* b = pool.Acquire();
  pool.Release(a);
  EXPECT_TRUE(pool.KeepSpare());  // made right after a TrimIdle, as the encoder thread does
  pool.Release(b);
  // All three free for the whole next period (the program idle): the spare, at the bottom,
  // gives its pages back like any buffer beyond the two warm ones.
  EXPECT_EQ(pool.TrimIdle(), 1u);
  EXPECT_EQ(pool.Acquire(), b);
  EXPECT_EQ(pool.Acquire(), a);
  uint8_t* cold = pool.Acquire();
  ASSERT_NE(cold, nullptr);
  EXPECT_EQ(ResidentPages(cold, bytes), 0u);
  EXPECT_FALSE(pool.KeepSpare());  // once in the pool's life
  pool.Release(cold);
  pool.Release(a);
  pool.Release(b);
}

TEST(BufferPoolTest, NoSpareBeyondTheCap) {
  BufferPool pool(1 << 20, 2 << 20);  // room for two buffers only
  uint8_t* a = pool.Acquire();
  uint8_t* b = pool.Acquire();
  EXPECT_FALSE(pool.KeepSpare());
  EXPECT_EQ(pool.allocated(), 2u);
  EXPECT_EQ(pool.Acquire(), nullptr);
  pool.Release(a);
  pool.Release(b);
}

// Buffers captured on the GPU with KP_DUMP_BUFFERS. Pointers inside them (names) are dead, so
// only records without pointers are checked deeply; kernels are re-pointed at a stand-in name.
TEST(CapturedBuffersTest, DecodeSanely) {
  const std::string dir = std::string(KP_TEST_DATA_DIR) + "/cupti_buffers";
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".bin")
        files.push_back(dir + "/" + name);
    }
    closedir(d);
  }
  if (files.empty())
    GTEST_SKIP() << "no captured CUPTI buffers in " << dir
                 << " (capture them on a GPU with KP_DUMP_BUFFERS=DIR)";
  std::sort(files.begin(), files.end());
  static const char kStandIn[] = "captured_kernel";
  static const char kStandInMarker[] = "captured_marker";
  size_t records = 0;
  // Totals per program, summed over its buffers, against what the trace of the same run held
  // (tests/data/cupti_buffers/README.md; kptrace info of that run).
  std::map<std::string, std::map<std::string, size_t>> totals;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string base_name = files[i].substr(files[i].rfind('/') + 1);
    std::map<std::string, size_t>& program = totals[base_name.substr(0, base_name.rfind('-'))];
    std::ifstream in(files[i], std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << files[i];
    // Copy into an 8-byte aligned buffer and replace dead pointers before decoding.
    std::vector<uint64_t> words((bytes.size() + 7) / 8, 0);
    std::memcpy(words.data(), bytes.data(), bytes.size());
    CUpti_Activity* r = nullptr;
    auto* base = reinterpret_cast<uint8_t*>(words.data());
    while (cuptiActivityGetNextRecord(base, bytes.size(), &r) == CUPTI_SUCCESS) {
      ++records;
      switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
          auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(r);
          k->name = kStandIn;
          EXPECT_TRUE(k->start <= k->end) << files[i];
          break;
        }
        case CUPTI_ACTIVITY_KIND_MARKER: {
          auto* m = reinterpret_cast<CUpti_ActivityMarker2*>(r);
          if (m->name != nullptr) m->name = kStandInMarker;
          m->domain = nullptr;
          break;
        }
        case CUPTI_ACTIVITY_KIND_NAME:
          reinterpret_cast<CUpti_ActivityName*>(r)->name = kStandInMarker;
          break;
        case CUPTI_ACTIVITY_KIND_DEVICE:
          reinterpret_cast<CUpti_ActivityDevice5*>(r)->name = kStandIn;
          break;
        case CUPTI_ACTIVITY_KIND_OVERHEAD:
          reinterpret_cast<CUpti_ActivityOverhead3*>(r)->overheadData = nullptr;  // dead pointer
          break;
        default:
          break;
      }
    }
    MemoryChunkSink sink;
    TraceEncoder encoder(&sink, TraceEncoder::Options());
    encoder.SetHeader(HeaderInfo());
    ActivityDecoder decoder(&encoder, nullptr, {});
    decoder.DecodeBuffer(base, bytes.size());
    decoder.Finish();
    EXPECT_EQ(encoder.stats().unknown_records, 0u) << files[i];
    encoder.Finish(FooterInfo());
    DecodedTrace d = Parse(sink);
    for (const auto& t : d.kernel_times) EXPECT_LE(t.start, t.end) << files[i];
    for (const auto& t : d.api_times) EXPECT_LE(t.start, t.end) << files[i];
    for (const auto& a : d.api_calls) EXPECT_NE(d.Str(a.name()), "unknown") << files[i];
    program["kernels"] += d.kernel_times.size();
    program["api"] += d.api_calls.size();
    program["ranges"] += d.ranges.size();
  }
  EXPECT_GT(records, 0u);
  if (totals.count("multistream") != 0) {
    EXPECT_EQ(totals["multistream"]["kernels"], 4008u);
    EXPECT_EQ(totals["multistream"]["api"], 4018u);
  }
  if (totals.count("memcpy_kinds") != 0) {
    EXPECT_EQ(totals["memcpy_kinds"]["api"], 27u);
  }
  if (totals.count("nvtx_threads") != 0) {
    EXPECT_EQ(totals["nvtx_threads"]["kernels"], 9u);
    EXPECT_EQ(totals["nvtx_threads"]["api"], 16u);
  }
}

// ---- libkpinject.so as a whole ----

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) out += line;
  pclose(pipe);
  return out;
}

TEST(InjectLibraryTest, ExportsOnlyTheEntryPoints) {
  std::string out = RunCommand(std::string("nm -D --defined-only ") + KP_INJECT_LIB);
  std::set<std::string> symbols;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    std::string line = out.substr(pos, end - pos);
    pos = end == std::string::npos ? out.size() : end + 1;
    size_t space = line.rfind(' ');
    if (!line.empty()) symbols.insert(line.substr(space + 1));
  }
  EXPECT_EQ(symbols, (std::set<std::string>{"InitializeInjection", "InitializeInjectionNvtx2"}))
      << out;
}

TEST(InjectLibraryTest, DoesNotNeedLibprotobuf) {
  std::string out = RunCommand(std::string("readelf -d ") + KP_INJECT_LIB);
  ASSERT_NE(out.find("NEEDED"), std::string::npos) << out;
  EXPECT_EQ(out.find("protobuf"), std::string::npos) << out;
  EXPECT_NE(out.find("libcupti.so"), std::string::npos) << out;
  EXPECT_EQ(out.find("libcuda.so"), std::string::npos) << out;
  EXPECT_NE(out.find("RPATH"), std::string::npos) << out;  // DT_RPATH, not RUNPATH
}

// Loads the library the way LD_PRELOAD would (constructor only) in a child process with KP_*
// set, on this GPU-less machine: no crash, nothing printed, the injection variables point at it.
TEST(InjectLibraryTest, LoadsQuietlyAndSetsInjectionVariables) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    unsetenv("CUDA_INJECTION64_PATH");
    unsetenv("NVTX_INJECTION64_PATH");
    setenv("KP_OUTPUT", "/tmp/kp-smoke-%p.kptrace", 1);
    setenv("KP_LOG", "debug", 1);
    setenv("KP_FLUSH_MS", "100", 1);
    void* handle = dlopen(KP_INJECT_LIB, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) _exit(2);
    char* real = realpath(KP_INJECT_LIB, nullptr);
    const char* cuda = getenv("CUDA_INJECTION64_PATH");
    const char* nvtx = getenv("NVTX_INJECTION64_PATH");
    if (cuda == nullptr || nvtx == nullptr || real == nullptr) _exit(3);
    char* cuda_real = realpath(cuda, nullptr);
    if (cuda_real == nullptr || std::strcmp(cuda_real, real) != 0) _exit(4);
    if (std::strcmp(cuda, nvtx) != 0) _exit(5);
    if (dlsym(handle, "InitializeInjection") == nullptr) _exit(6);
    if (dlsym(handle, "InitializeInjectionNvtx2") == nullptr) _exit(7);
    _exit(0);
  }
  close(fds[1]);
  std::string output;
  char chunk[256];
  ssize_t n;
  while ((n = read(fds[0], chunk, sizeof(chunk))) > 0) output.append(chunk, n);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child crashed: " << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_EQ(output, "");
}

}  // namespace
}  // namespace kp

namespace kp {
namespace {

// Capture windows (inject/capture): a range pushed inside a window and popped after it ends at
// the window's end, flagged CLIPPED; records in a schedule's warm-up are filtered.
// An encoder writing into memory, with a test header; Finish parses what it wrote.
struct MemoryEncoder {
  MemoryEncoder() {
    HeaderInfo header;
    header.kp_version = "test";
    encoder.SetHeader(header);
  }
  DecodedTrace Finish() {
    FooterInfo footer;
    footer.end_reason = "test";
    encoder.Finish(footer);
    return Parse(sink);
  }
  MemoryChunkSink sink;
  TraceEncoder encoder{&sink, TraceEncoder::Options()};
};

TEST(ActivityDecoderTest, KernelRecordsKpMakesAreFilteredLikeCuptis) {
  MemoryEncoder out;
  ActivityDecoder decoder(&out.encoder, nullptr, {});
  decoder.BeginDiscard(1500);
  decoder.EndDiscard(2500);
  KernelRecord warm;
  warm.name = "_Z4warmv";
  warm.start = 2000;
  warm.end = 2100;
  warm.flags = RECORD_FLAG_PROFILER_TIMED;
  KernelRecord kept = warm;
  kept.name = "_Z4keptv";
  kept.start = 3000;
  kept.end = 3100;
  kept.correlation = 9;
  decoder.AddKernelRecord(warm);
  decoder.AddKernelRecord(kept);
  EXPECT_EQ(decoder.last_timestamp(), 3100u);
  EXPECT_EQ(decoder.work_counts().kernels, 2u);  // both ran: the detach's progress counts them
  decoder.Finish();
  const EncoderStats stats = out.encoder.stats();
  DecodedTrace d = out.Finish();
  ASSERT_EQ(d.kernels.size(), 1u);  // the one in the discarded warm-up is dropped
  EXPECT_EQ(d.kernel_times[0].start, 3000u);
  EXPECT_EQ(d.kernel_correlations[0], 9u);
  EXPECT_EQ(d.kernels[0].flags(), static_cast<uint32_t>(RECORD_FLAG_PROFILER_TIMED));
  EXPECT_EQ(stats.records_filtered, 1u);
}

TEST(ActivityDecoderTest, CaptureWindowClipsRangesAndDiscardsWarmup) {
  BufferBuilder b;
  auto& in_window = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  in_window.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  in_window.timestamp = 100;
  in_window.id = 1;
  in_window.name = "step";
  auto& elsewhere = b.Add<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER);
  elsewhere.flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
  elsewhere.timestamp = 1000;
  elsewhere.id = 2;
  elsewhere.name = "program";
  auto& warm = b.Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  warm.start = 2000;
  warm.end = 2100;
  warm.name = "_Z4warmv";
  auto& kept = b.Add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kept.start = 3000;
  kept.end = 3100;
  kept.name = "_Z4keptv";

  MemoryChunkSink sink;
  TraceEncoder encoder(&sink, TraceEncoder::Options());
  HeaderInfo header;
  header.kp_version = "test";
  encoder.SetHeader(header);
  ActivityDecoder decoder(&encoder, nullptr, {});
  decoder.BeginDiscard(1500);
  decoder.EndDiscard(2500);
  decoder.DecodeBuffer(b.data(), b.size());
  decoder.AddCaptureWindow(50, 500);
  decoder.Finish();
  const EncoderStats stats = encoder.stats();
  FooterInfo footer;
  footer.end_reason = "test";
  encoder.Finish(footer);
  DecodedTrace d = Parse(sink);

  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernel_times[0].start, 3000u);
  EXPECT_EQ(stats.records_filtered, 1u);
  ASSERT_EQ(d.ranges.size(), 2u);
  for (size_t i = 0; i < d.ranges.size(); ++i) {
    if (d.Str(d.ranges[i].name()) == "step") {
      EXPECT_EQ(d.range_times[i].end, 500u);
      EXPECT_EQ(d.ranges[i].flags(), static_cast<uint32_t>(RECORD_FLAG_CLIPPED));
    } else {
      EXPECT_EQ(d.ranges[i].flags(), static_cast<uint32_t>(RECORD_FLAG_OPEN));
    }
  }
  EXPECT_EQ(stats.nvtx_ranges_clipped, 1u);
  EXPECT_EQ(stats.nvtx_open_ranges, 1u);
}

}  // namespace
}  // namespace kp
