// kp_gen_trace: writes a synthetic but realistic trace through the injector's own TraceEncoder
// and FileChunkWriter, with no GPU. Two uses:
// - throughput: `kp_gen_trace --records N [--zstd LEVEL] [--chunk-kb KB] -o FILE` encodes N
//   records shaped like a PyTorch run (45% kernels with ~200 long templated names, 35% API calls,
//   5% memcpy, 2% memset, 10% nested NVTX ranges, 3% syncs; 2 devices, 4 streams, 3 threads) and
//   prints the encode rate, the file size and bytes per kernel record; --chunk-kb sets the
//   encoder's chunk size (the injector's default: 4096);
// - golden input: `kp_gen_trace --golden -o FILE` writes a small fixed trace (every record kind,
//   metric ranges, a notice, two chunks) for the exporters' diff tests.
// Both are deterministic: a fixed-seed generator and no clock in the data.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"

namespace kp {
namespace {

// Enum values from proto/kptrace.proto (generated).
using CopyKind = schema::CopyKind;
using MemoryKind = schema::MemoryKind;
using RecordFlag = schema::RecordFlag;
using SyncType = schema::SyncType;
using ApiDomain = schema::ApiDomain;

constexpr uint64_t kTraceStart = 1700000000000000000ull;  // 2023-11-14T22:13:20Z on the trace clock

// splitmix64: fixed seed, same sequence on every platform.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(Next() % n); }
  uint64_t Between(uint64_t lo, uint64_t hi) { return lo + Next() % (hi - lo + 1); }

 private:
  uint64_t state_;
};

// ~200 distinct mangled kernel names whose demangled forms are long templates full of commas.
std::vector<std::string> KernelNames() {
  const char* templates[] = {
      "_ZN7cutlass6KernelINS_4gemm6kernel4GemmILi%dELi%dELb1EEEEEvNT_6ParamsE",
      "_ZN2at6native13reduce_kernelILi%dELi%dENS0_8ReduceOpIfNS0_7MeanOpsIffEEjfLi4EEEEEvT1_",
      "_ZN2at6native18elementwise_kernelILi%dELi%dEZNS0_15gpu_kernel_implINS0_13BUnaryFunctorIff"
      "fNS0_15binary_internal10MulFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_",
      "_ZN2at6native29vectorized_elementwise_kernelILi%dENS0_11FillFunctorIfEESt5arrayIPcLm%dEEE"
      "EviT0_T1_",
  };
  std::vector<std::string> names;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 50; ++i) {
      char buf[512];
      std::snprintf(buf, sizeof buf, templates[t], 32 << (i % 4), 1 + i);
      names.emplace_back(buf);
    }
  }
  return names;
}

const char* const kApiNames[] = {
    "cudaLaunchKernel_v7000", "cudaMemcpyAsync_v3020",
    "cudaMemsetAsync_v3020",  "cudaStreamSynchronize_v3020",
    "cudaEventRecord_v3020",  "cudaStreamWaitEvent_v3020",
    "cudaMalloc_v3020",       "cudaFree_v3020",
    "cudaGetDevice_v3020",    "cudaLaunchKernelExC_v11060",
    "cuLaunchKernel",         "cudaGraphLaunch_v10000",
};

const char* const kRangeNames[] = {"train_step",   "forward",          "backward",  "optimizer",
                                   "aten::linear", "aten::layer_norm", "attention", "mlp"};

void FillHeader(HeaderInfo* h, const std::string& path, bool golden) {
  h->kp_version = "0.1.0";
  h->pid = 4242;
  h->ppid = 4200;
  h->hostname = golden ? "golden-host" : "bench-host";
  h->command_line = {"python", "train.py", "--epochs", "1"};
  h->rank = 0;
  h->local_rank = 0;
  h->world_size = 1;
  h->start_time_unix_ns = kTraceStart;
  h->start_time_trace_ns = kTraceStart;
  h->clock = "CLOCK_REALTIME (cupti default)";
  h->config = {{"KP_FLUSH_MS", "1000"}, {"KP_API", "launch"}, {"KP_COMPRESSION", "zstd:3"}};
  h->cupti_api_version = 130001;
  h->cuda_driver_version = 13000;
  h->driver_version = "580.159.03";
  h->injection_mode = "injection";
  h->output_path = golden ? "golden.kptrace" : path;
}

void AddDevicesAndContexts(TraceEncoder* enc) {
  for (uint32_t d = 0; d < 2; ++d) {
    DeviceInfo dev;
    dev.id = d;
    dev.name = "NVIDIA H200";
    for (int i = 0; i < 16; ++i) dev.uuid[i] = static_cast<uint8_t>(0xA0 + d * 16 + i);
    dev.cc_major = 9;
    dev.cc_minor = 0;
    dev.sm_count = 132;
    dev.global_memory_bytes = 150754820096ull;
    dev.global_memory_bandwidth_kbps = 4800000000ull;
    dev.core_clock_khz = 1980000;
    dev.memory_clock_khz = 2619000;
    dev.max_threads_per_block = 1024;
    dev.max_shared_memory_per_block = 49152;
    dev.max_registers_per_block = 65536;
    dev.l2_cache_bytes = 62914560;
    dev.max_warps_per_sm = 64;
    dev.num_threads_per_warp = 32;
    dev.pci_bus_id = d == 0 ? "0000:19:00.0" : "0000:3B:00.0";
    enc->AddDevice(dev);
    enc->AddContext({d + 1, d, 7, false});
  }
  enc->AddThreadName(1001, "python");
  enc->AddThreadName(1002, "pt_autograd_0");
  enc->AddThreadName(1003, "pt_data_loader");
}

// Streams 7, 13, 14, 15: even ones on device 0, odd ones on device 1.
constexpr uint32_t kStreams[4] = {7, 13, 14, 15};
constexpr uint32_t kThreads[3] = {1001, 1002, 1003};

struct Totals {
  uint64_t records = 0, kernels = 0;
};

// The realistic mix. Records are produced in batches (like CUPTI buffers) and only the
// encoder calls are timed.
int RunThroughput(uint64_t n, int zstd_level, uint64_t chunk_kb, const std::string& path) {
  StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open(path, zstd_level);
  const std::string error = opened.status().message();
  std::unique_ptr<FileChunkWriter> writer = std::move(opened).value_or(nullptr);
  if (!writer) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  TraceEncoder::Options options;
  if (chunk_kb != 0) options.chunk_target_bytes = chunk_kb << 10;
  TraceEncoder enc(writer.get(), options);
  HeaderInfo header;
  FillHeader(&header, path, false);
  enc.SetHeader(header);
  AddDevicesAndContexts(&enc);

  std::vector<std::string> names = KernelNames();
  std::vector<uint64_t> base_duration(names.size());
  Random rnd(12345);
  for (auto& d : base_duration) d = rnd.Between(2000, 400000);

  enum Kind : uint8_t { kKernel, kApi, kMemcpy, kMemset, kNvtx, kSync };
  struct Item {
    Kind kind;
    KernelRecord k;
    ApiRecord a;
    MemcpyRecord m;
    MemsetRecord s;
    NvtxRangeRecord r;
    SyncRecord y;
  };
  constexpr size_t kBatch = 8192;
  std::vector<Item> batch(kBatch);

  uint64_t now = kTraceStart + 1000000;
  uint64_t stream_free[4] = {now, now, now, now};
  uint32_t correlation = 1;
  uint32_t last_launch_correlation = 1;
  struct Open {
    const char* name;
    uint64_t start;
  };
  Open nvtx_stack[3][4];
  int depth[3] = {0, 0, 0};
  Totals totals;
  double encode_s = 0, flush_s = 0;
  using Clock = std::chrono::steady_clock;

  while (totals.records < n) {
    size_t filled = 0;
    while (filled < kBatch && totals.records + filled < n) {
      Item& it = batch[filled];
      now += rnd.Between(300, 3000);
      uint32_t pick = rnd.Below(100);
      uint32_t si = rnd.Below(4);
      uint32_t stream = kStreams[si];
      uint32_t device = si % 2;
      uint32_t tid = kThreads[rnd.Below(10) < 7 ? 0 : 1 + rnd.Below(2)];
      if (pick < 45) {
        uint32_t ni = rnd.Below(static_cast<uint32_t>(names.size()));
        it.kind = kKernel;
        KernelRecord& k = it.k;
        k = KernelRecord();
        k.name = names[ni].c_str();
        k.start = std::max(now + 4000, stream_free[si]) + rnd.Between(500, 2500);
        uint64_t d = base_duration[ni];
        k.end = k.start + d - d / 20 + rnd.Between(0, d / 10);
        stream_free[si] = k.end;
        k.grid[0] = 108u << (ni % 3 + (rnd.Below(8) == 0 ? 1 : 0));
        k.grid[1] = 1;
        k.grid[2] = 1;
        k.block[0] = 128u << (ni % 2);
        k.block[1] = 1;
        k.block[2] = 1;
        k.cluster[0] = k.cluster[1] = k.cluster[2] = 1;
        k.registers_per_thread = 32 + 8 * (ni % 8);
        k.static_shared = (ni % 4) * 4096;
        k.dynamic_shared = ni % 5 == 0 ? 65536 : 0;
        k.device = device;
        k.context = device + 1;
        k.stream = stream;
        k.correlation = last_launch_correlation;
        k.channel = si;
        ++totals.kernels;
      } else if (pick < 80) {
        it.kind = kApi;
        ApiRecord& a = it.a;
        uint32_t ai = rnd.Below(10) < 7 ? 0 : rnd.Below(12);
        a.name = kApiNames[ai];
        a.start = now;
        a.end = now + rnd.Between(1500, 6000);
        a.domain = ai == 10 ? ApiDomain::kDriver : ApiDomain::kRuntime;
        a.cbid = 200 + ai;
        a.thread_id = tid;
        a.correlation = correlation++;
        a.return_value = 0;
        if (ai <= 2 || ai >= 9) last_launch_correlation = a.correlation;
      } else if (pick < 85) {
        it.kind = kMemcpy;
        MemcpyRecord& m = it.m;
        m = MemcpyRecord();
        const uint32_t kinds[3] = {CopyKind::kHtod, CopyKind::kDtoh, CopyKind::kDtod};
        m.copy_kind = kinds[rnd.Below(3)];
        m.bytes = uint64_t{4096} << rnd.Below(14);
        m.start = std::max(now + 3000, stream_free[si]);
        m.end = m.start + m.bytes / 25 + 1500;
        stream_free[si] = m.end;
        m.src_kind = m.copy_kind == CopyKind::kHtod ? MemoryKind::kPinned : MemoryKind::kDevice;
        m.dst_kind = m.copy_kind == CopyKind::kDtoh ? MemoryKind::kPinned : MemoryKind::kDevice;
        m.device = device;
        m.context = device + 1;
        m.stream = stream;
        m.correlation = last_launch_correlation;
        m.flags = RecordFlag::kAsync;
      } else if (pick < 87) {
        it.kind = kMemset;
        MemsetRecord& s = it.s;
        s = MemsetRecord();
        s.bytes = uint64_t{1024} << rnd.Below(12);
        s.start = std::max(now + 3000, stream_free[si]);
        s.end = s.start + s.bytes / 100 + 1000;
        stream_free[si] = s.end;
        s.memory_kind = MemoryKind::kDevice;
        s.device = device;
        s.context = device + 1;
        s.stream = stream;
        s.correlation = last_launch_correlation;
        s.flags = RecordFlag::kAsync;
      } else if (pick < 97) {
        int t = static_cast<int>(tid - 1001);
        bool pop = depth[t] == 3 || (depth[t] > 0 && rnd.Below(2) == 0);
        if (!pop) {
          nvtx_stack[t][depth[t]++] = {kRangeNames[rnd.Below(8)], now};
          continue;  // a push yields a record only when it pops
        }
        Open o = nvtx_stack[t][--depth[t]];
        it.kind = kNvtx;
        NvtxRangeRecord& r = it.r;
        r = NvtxRangeRecord();
        r.name = o.name;
        r.start = o.start;
        r.end = now;
        r.thread_id = tid;
        r.id = correlation;
      } else {
        it.kind = kSync;
        SyncRecord& y = it.y;
        y.start = now;
        y.end = std::max(now + 500, stream_free[si]);
        y.type = SyncType::kStreamSynchronize;
        y.stream = stream;
        y.context = device + 1;
        y.correlation = correlation++;
        y.event_id = 0;
        now = y.end;
      }
      ++filled;
    }

    auto t0 = Clock::now();
    for (size_t i = 0; i < filled; ++i) {
      const Item& it = batch[i];
      switch (it.kind) {
        case kKernel:
          enc.AddKernel(it.k);
          break;
        case kApi:
          enc.AddApi(it.a);
          break;
        case kMemcpy:
          enc.AddMemcpy(it.m);
          break;
        case kMemset:
          enc.AddMemset(it.s);
          break;
        case kNvtx:
          enc.AddNvtxRange(it.r);
          break;
        case kSync:
          enc.AddSync(it.y);
          break;
      }
      if (enc.FlushDue()) {
        auto f0 = Clock::now();
        enc.Flush();
        flush_s += std::chrono::duration<double>(Clock::now() - f0).count();
      }
    }
    encode_s += std::chrono::duration<double>(Clock::now() - t0).count();
    totals.records += filled;
  }
  auto f0 = Clock::now();
  enc.Finish({now, "exit"});
  double finish_s = std::chrono::duration<double>(Clock::now() - f0).count();
  flush_s += finish_s;
  encode_s += finish_s;
  if (writer->failed()) return 1;

  uint64_t bytes = writer->bytes_written();
  double encode_only = encode_s - flush_s;
  std::printf("records:            %" PRIu64 " (%" PRIu64 " kernels)\n", totals.records,
              totals.kernels);
  std::printf("file:               %s, %" PRIu64 " bytes, %" PRIu64 " chunks, zstd level %d\n",
              path.c_str(), bytes, enc.stats().chunks_written + 1, zstd_level);
  std::printf("bytes per kernel:   %.2f (file bytes / kernel records)\n",
              totals.kernels ? double(bytes) / double(totals.kernels) : 0.0);
  std::printf("bytes per record:   %.2f\n", double(bytes) / double(totals.records));
  std::printf("encode rate:        %.2f M records/s (encoder only, %.3f s)\n",
              double(totals.records) / encode_only / 1e6, encode_only);
  std::printf("end-to-end rate:    %.2f M records/s (with compression and write, %.3f s)\n",
              double(totals.records) / encode_s / 1e6, encode_s);
  return 0;
}

// The small fixed trace for golden tests: every record kind, two chunks.
int RunGolden(int zstd_level, const std::string& path) {
  StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open(path, zstd_level);
  const std::string error = opened.status().message();
  std::unique_ptr<FileChunkWriter> writer = std::move(opened).value_or(nullptr);
  if (!writer) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  TraceEncoder enc(writer.get(), TraceEncoder::Options());
  HeaderInfo header;
  FillHeader(&header, path, true);
  enc.SetHeader(header);
  AddDevicesAndContexts(&enc);
  MetricConfigInfo mc;
  mc.metric_names = {"dram__bytes_read.sum", "gpu__time_duration.sum",
                     "sm__throughput.avg.pct_of_peak_sustained_elapsed"};
  mc.num_passes = 1;
  mc.mode = "range";
  mc.device = 0;
  mc.chip = "GH100";
  uint32_t config = enc.AddMetricConfig(mc);
  enc.AddNotice(schema::NoticeSeverity::kWarning, "metrics",
                "KP_METRICS_RANGES matched no range named \"eval\"", kTraceStart + 50);

  // Names with commas and quotes, the cases CSV quoting must get right.
  static const std::string kNames[3] = {
      "_ZN7cutlass6KernelINS_4gemm6kernel4GemmILi128ELi64ELb1EEEEEvNT_6ParamsE",
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEE"
      "EviT0_T1_",
      "kernel_with_\"quotes\",_and_commas",
  };
  const uint64_t t = kTraceStart + 1000000;  // 1 ms after start
  uint32_t corr = 1;
  for (int half = 0; half < 2; ++half) {
    const uint64_t base = t + uint64_t(half) * 1000000;
    // An outer NVTX range on each of two threads, with a nested one.
    for (uint32_t th = 0; th < 2; ++th) {
      NvtxRangeRecord outer;
      outer.name = half == 0 ? "forward" : "backward";
      outer.domain = th == 0 ? nullptr : "torch";
      outer.start = base + th * 1000;
      outer.end = base + 900000;
      outer.thread_id = kThreads[th];
      outer.color = 0xFF3366CCu;
      outer.has_color = true;
      outer.id = 100 + half * 10 + th;
      enc.AddNvtxRange(outer);
      NvtxRangeRecord inner = outer;
      inner.name = "aten::linear";
      inner.start = outer.start + 10000;
      inner.end = outer.start + 400000;
      inner.has_color = false;
      inner.color = 0;
      inner.payload.kind = NvtxPayloadValue::kU64;
      inner.payload.u64 = 7 + th;
      inner.id = outer.id + 1000;
      enc.AddNvtxRange(inner);
    }
    NvtxMarkRecord mark;
    mark.name = "checkpoint";
    mark.time = base + 50000;
    mark.thread_id = kThreads[0];
    mark.payload.kind = NvtxPayloadValue::kF64;
    mark.payload.f64 = 0.5;
    enc.AddNvtxMark(mark);

    // Seven launches, each an API call and its kernel, over the four streams.
    for (uint32_t i = 0; i < 7; ++i) {
      ApiRecord a;
      a.name = kApiNames[0];
      a.start = base + 20000 + i * 30000;
      a.end = a.start + 4000;
      a.domain = ApiDomain::kRuntime;
      a.cbid = 211;
      a.thread_id = kThreads[i % 2];
      a.correlation = corr;
      enc.AddApi(a);
      KernelRecord k;
      k.name = kNames[i % 3].c_str();
      k.start = a.start + 10000;
      k.end = k.start + 5000 + i * 1000;
      k.grid[0] = 132 * (1 + i % 2);
      k.grid[1] = k.grid[2] = 1;
      k.block[0] = 256;
      k.block[1] = k.block[2] = 1;
      k.cluster[0] = k.cluster[1] = k.cluster[2] = 1;
      k.registers_per_thread = 64;
      k.static_shared = 8192;
      k.dynamic_shared = i == 4 ? 16384 : 0;
      k.device = i % 2;
      k.context = k.device + 1;
      k.stream = kStreams[i % 4];
      k.correlation = corr;
      k.graph_id = i == 3 ? 9 : 0;
      k.graph_node_id = i == 3 ? 90 : 0;
      enc.AddKernel(k);
      ++corr;
    }
    // Copies: HtoD, DtoH, and a peer copy in the second half.
    for (uint32_t i = 0; i < 3; ++i) {
      MemcpyRecord m;
      m.start = base + 200000 + i * 20000;
      m.end = m.start + 8000;
      m.bytes = uint64_t{1} << (20 + i);
      m.copy_kind = i == 0   ? CopyKind::kHtod
                    : i == 1 ? CopyKind::kDtoh
                    : half   ? CopyKind::kPtop
                             : CopyKind::kDtod;
      m.src_kind = i == 0 ? MemoryKind::kPinned : MemoryKind::kDevice;
      m.dst_kind = i == 1 ? MemoryKind::kPinned : MemoryKind::kDevice;
      m.device = 0;
      m.context = 1;
      m.stream = 7;
      m.correlation = corr++;
      m.flags = RecordFlag::kAsync;
      m.peer = half == 1 && i == 2;
      if (m.peer) {
        m.src_device = 0;
        m.dst_device = 1;
        m.src_context = 1;
        m.dst_context = 2;
      }
      enc.AddMemcpy(m);
    }
    MemsetRecord s;
    s.start = base + 300000;
    s.end = s.start + 2000;
    s.bytes = 65536;
    s.value = 0;
    s.memory_kind = MemoryKind::kDevice;
    s.device = 1;
    s.context = 2;
    s.stream = 13;
    s.correlation = corr++;
    enc.AddMemset(s);
    SyncRecord y;
    y.start = base + 500000;
    y.end = base + 520000;
    y.type = half ? SyncType::kStreamSynchronize : SyncType::kContextSynchronize;
    y.stream = half ? 7 : 0;
    y.context = 1;
    y.correlation = corr++;
    enc.AddSync(y);
    OverheadRecord o;
    o.name = "CUPTI_BUFFER_FLUSH";
    o.start = base + 600000;
    o.end = base + 603000;
    o.kind = 2;
    o.thread_id = kThreads[2];
    enc.AddOverhead(o);
    GraphLaunchRecord g;
    g.start = base + 110000;
    g.end = base + 140000;
    g.graph_id = 9;
    g.device = 1;
    g.context = 2;
    g.stream = 13;
    g.correlation = corr++;
    enc.AddGraphLaunch(g);
    for (uint32_t r = 0; r < 2; ++r) {
      const double values[3] = {1048576.0 * (r + 1 + half), 850000.0 + 1000 * r + half,
                                r == 0 ? 42.5 : 91.25};
      MetricRangeRecord mr;
      mr.config = config;
      mr.name = r == 0 ? (half == 0 ? "forward" : "backward") : "aten::linear";
      mr.domain = nullptr;
      mr.occurrence = static_cast<uint64_t>(half);
      mr.occurrences_used = 1;
      mr.start = base + r * 10000;
      mr.end = base + (r == 0 ? 900000 : 400000);
      mr.values = values;
      mr.num_values = 3;
      mr.thread_id = kThreads[0];
      mr.device = 0;
      mr.context = 1;
      mr.nesting_level = r + 1;
      mr.sm_clock_khz = 1755000;
      enc.AddMetricRange(mr);
    }
    if (half == 0) enc.Flush();
  }
  // One GPU record CUPTI could not time.
  KernelRecord untimed;
  untimed.name = kNames[0].c_str();
  untimed.grid[0] = 132;
  untimed.block[0] = 256;
  untimed.correlation = corr++;
  untimed.stream = 7;
  untimed.context = 1;
  enc.AddKernel(untimed);
  enc.Finish({t + 2000000, "exit"});
  if (writer->failed()) return 1;
  std::printf("golden trace: %s, %" PRIu64 " bytes, %" PRIu64 " chunks\n", path.c_str(),
              writer->bytes_written(), enc.stats().chunks_written + 1);
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: kp_gen_trace --records N [--zstd LEVEL] [--chunk-kb KB] -o FILE\n"
               "       kp_gen_trace --golden [--zstd LEVEL] -o FILE\n"
               "LEVEL 0 stores chunks raw; default 3 (kp's default). KB: the encoder's chunk\n"
               "size, 64 to 65536 (default 4096, kp's).\n");
  return 2;
}

}  // namespace
}  // namespace kp

int main(int argc, char** argv) {
  uint64_t records = 0;
  int level = 3;
  uint64_t chunk_kb = 0;
  bool golden = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char** v) {
      if (i + 1 >= argc) return false;
      *v = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (a == "--records" && value(&v)) {
      char* end = nullptr;
      records = std::strtoull(v, &end, 10);
      if (*end != '\0' || records == 0) return kp::Usage();
    } else if (a == "--zstd" && value(&v)) {
      char* end = nullptr;
      long l = std::strtol(v, &end, 10);
      if (*end != '\0' || l < 0 || l > 19) return kp::Usage();
      level = static_cast<int>(l);
    } else if (a == "--chunk-kb" && value(&v)) {
      char* end = nullptr;
      chunk_kb = std::strtoull(v, &end, 10);
      if (*end != '\0' || chunk_kb < 64 || chunk_kb > 65536) return kp::Usage();
    } else if (a == "-o" && value(&v)) {
      out = v;
    } else if (a == "--golden") {
      golden = true;
    } else {
      return kp::Usage();
    }
  }
  if (out.empty() || (golden == (records != 0)) || (golden && chunk_kb != 0)) return kp::Usage();
  return golden ? kp::RunGolden(level, out) : kp::RunThroughput(records, level, chunk_kb, out);
}
