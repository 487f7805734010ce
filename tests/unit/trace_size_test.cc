// trace_size_test.cc: bytes per kernel on disk, measured without a GPU, and the exactness of the
// encoding that gets there (every record read back through TraceReader equals what went in).
//
// Record streams go through the injector's TraceEncoder with the default compression
// (zstd:3, KP_FLUSH_MS=1000):
// - a synthetic launch loop shaped like bench/workloads/launch_loop.cu under kp's defaults:
//   200 000 empty-kernel launches (one cudaLaunchKernel record per kernel, one kernel name, one
//   stream), optionally followed by its 20 000 4 KiB cudaMemcpyAsync copies. CPU times have ns
//   resolution (gap between calls 120 ns + an exponential part, a launch call ~5.6 us with a
//   normal spread, rare 5-40 us stalls); GPU times sit on a 32 ns grid with +-1 ns conversion
//   noise, as the H200 buffers of tests/data/cupti_buffers show, kernels ~1 us, starting
//   ~2.6 us after their call's start. Two jitter settings (LoopModel): nominal (gap 60 ns, call
//   +-150 ns, GPU +-200 ns), and calibrated (200 ns, +-450 ns, +-400 ns), where format
//   version 1 gives what the H200 run measured (7.0 here against 7.4 bytes/kernel in
//   bench/results/bench_h200.md). Both are models: the real loop's number is the one that counts;
// - the shipped PyTorch example trace (examples/pytorch_h200.kptrace), re-encoded chunk by chunk.
// Each prints bytes per kernel (file bytes / kernels; the file also holds the copies, the API
// calls and the header) and the encoder's CPU time per record. Both launch loops must stay
// within issue 10's budget of 6.0 bytes per kernel. Measured (bytes/kernel, format version
// 1 -> 2 -> 3): nominal 5.70 -> 5.47 -> 4.29; calibrated with copies 7.02 -> 6.73 -> 5.43
// (version 3's columns: -19 %); PyTorch example 21.97 -> 21.53 -> 17.50 (a small trace: 1094
// kernels beside its header, strings and NVTX ranges). The calibrated loop is the model of
// what bench/run.sh measures on the H200; the GPU's own number is the one that counts.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "inject/trace/chunk_writer.h"
#include "inject/trace/records.h"
#include "inject/trace/trace_encoder.h"
#include "tests/unit/scratch_dir.h"
#include "tools/reader/trace_reader.h"

#ifndef KP_EXAMPLES_DIR
#error "KP_EXAMPLES_DIR must name the examples/ directory"
#endif

namespace kp {
namespace {

constexpr double kLaunchLoopBudgetBytesPerKernel = 6.0;  // issue 10, point 3
constexpr int kZstdLevel = 3;                            // KP_COMPRESSION default
constexpr uint64_t kFlushNs = 1000000000ull;             // KP_FLUSH_MS default

// Deterministic on every platform (no std:: distributions, whose output is unspecified).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal() {
    const double u = Uniform() + 1e-300, v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  double Exponential(double mean) { return -mean * std::log(1.0 - Uniform()); }

 private:
  uint64_t s_;
};

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// What was fed to the encoder, to compare with what the reader gives back.
struct Fed {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<ApiRecord> api;
  std::vector<NvtxRangeRecord> ranges;
  std::vector<NvtxMarkRecord> marks;
  std::vector<SyncRecord> syncs;
  std::vector<OverheadRecord> overheads;
  std::vector<GraphLaunchRecord> graphs;
};

// Collects records (and the points where the encoder thread would end a chunk), then replays
// them into an encoder over a MemoryChunkSink, timing only the encoder's work.
class Feeder {
 public:
  void Kernel(const KernelRecord& r) { Add(kKernel, &fed_.kernels, r); }
  void Memcpy(const MemcpyRecord& r) { Add(kMemcpy, &fed_.memcpys, r); }
  void Memset(const MemsetRecord& r) { Add(kMemset, &fed_.memsets, r); }
  void Api(const ApiRecord& r) { Add(kApi, &fed_.api, r); }
  void Range(const NvtxRangeRecord& r) { Add(kRange, &fed_.ranges, r); }
  void Mark(const NvtxMarkRecord& r) { Add(kMark, &fed_.marks, r); }
  void Sync(const SyncRecord& r) { Add(kSync, &fed_.syncs, r); }
  void Overhead(const OverheadRecord& r) { Add(kOverhead, &fed_.overheads, r); }
  void Graph(const GraphLaunchRecord& r) { Add(kGraph, &fed_.graphs, r); }
  // The encoder thread's rules: a chunk when one is due by size (checked after each record)
  // and at every flush period (Flush()).
  void Flush() { events_.push_back({kFlush, 0}); }

  // Encodes everything fed, ending with a footer at `end_ns`.
  void Encode(uint64_t end_ns) {
    sink_ = std::make_unique<MemoryChunkSink>(kZstdLevel);
    TraceEncoder encoder(sink_.get(), TraceEncoder::Options());
    HeaderInfo h;
    h.kp_version = "trace_size_test";
    h.pid = 4242;
    h.hostname = "host";
    h.command_line = {"./launch_loop"};
    h.clock = "CLOCK_REALTIME (cupti default)";
    const uint64_t t0 = ThreadCpuNs();
    encoder.SetHeader(h);
    for (const Event& e : events_) {
      switch (e.kind) {
        case kKernel:
          encoder.AddKernel(fed_.kernels[e.index]);
          break;
        case kMemcpy:
          encoder.AddMemcpy(fed_.memcpys[e.index]);
          break;
        case kMemset:
          encoder.AddMemset(fed_.memsets[e.index]);
          break;
        case kApi:
          encoder.AddApi(fed_.api[e.index]);
          break;
        case kRange:
          encoder.AddNvtxRange(fed_.ranges[e.index]);
          break;
        case kMark:
          encoder.AddNvtxMark(fed_.marks[e.index]);
          break;
        case kSync:
          encoder.AddSync(fed_.syncs[e.index]);
          break;
        case kOverhead:
          encoder.AddOverhead(fed_.overheads[e.index]);
          break;
        case kGraph:
          encoder.AddGraphLaunch(fed_.graphs[e.index]);
          break;
        case kFlush:
          encoder.Flush();
          continue;
      }
      if (encoder.FlushDue()) encoder.Flush();
    }
    FooterInfo footer;
    footer.end_time_ns = end_ns;
    footer.end_reason = "exit";
    encoder.Finish(footer);
    cpu_ns_ = ThreadCpuNs() - t0;
  }
  const Fed& fed() const { return fed_; }
  const std::vector<uint8_t>& file() const { return sink_->file(); }
  uint64_t cpu_ns() const { return cpu_ns_; }
  size_t records() const {
    return fed_.kernels.size() + fed_.memcpys.size() + fed_.memsets.size() + fed_.api.size() +
           fed_.ranges.size() + fed_.marks.size() + fed_.syncs.size() + fed_.overheads.size() +
           fed_.graphs.size();
  }

 private:
  enum Kind { kKernel, kMemcpy, kMemset, kApi, kRange, kMark, kSync, kOverhead, kGraph, kFlush };
  struct Event {
    Kind kind;
    size_t index;
  };
  template <typename T>
  void Add(Kind kind, std::vector<T>* list, const T& r) {
    events_.push_back({kind, list->size()});
    list->push_back(r);
  }
  Fed fed_;
  std::vector<Event> events_;
  std::unique_ptr<MemoryChunkSink> sink_;
  uint64_t cpu_ns_ = 0;
};

// ---- the synthetic launch loop ----

// A GPU timestamp: on the GPU's 32 ns grid (relative to an arbitrary conversion offset), with
// the +-1 ns the CPU-time conversion adds to about one in six.
uint64_t GpuTime(Rng& rng, uint64_t t) {
  constexpr uint64_t kOffset = 13;
  uint64_t grid = ((t - kOffset + 16) / 32) * 32 + kOffset;
  const double u = rng.Uniform();
  if (u < 0.085) return grid - 1;
  if (u < 0.17) return grid + 1;
  return grid;
}

// The jitter of the synthetic loop (see the top of the file).
struct LoopModel {
  long launches = 200000;
  long copies = 20000;
  double gap_mean_ns = 60.0;       // exponential part of the gap between calls
  double launch_sigma_ns = 150.0;  // spread of a launch call's duration
  double copy_sigma_ns = 100.0;
  double gpu_sigma_ns = 200.0;  // spread of a kernel's start after its launch call's
};

void FeedLaunchLoop(Feeder* f, const LoopModel& model = LoopModel()) {
  const long launches = model.launches, copies = model.copies;
  static const char kKernel[] = "_Z11EmptyKernelv";
  static const char kLaunch[] = "cudaLaunchKernel_v7000";
  static const char kCopy[] = "cudaMemcpyAsync_v3020";
  Rng rng(20261201);
  constexpr uint32_t kThread = 1234567, kStream = 7, kContext = 1;
  uint64_t cpu = 1764583200123456789ull;  // CLOCK_REALTIME-like
  uint64_t next_flush = cpu + kFlushNs;
  uint64_t gpu_free = cpu;
  uint32_t correlation = 215;
  auto cpu_call = [&](double base_ns, double sigma_ns, ApiRecord* api) {
    const double gap = 120.0 + rng.Exponential(model.gap_mean_ns);
    double duration = base_ns + sigma_ns * rng.Normal();
    if (rng.Uniform() < 0.002) duration += 5000.0 + 35000.0 * rng.Uniform();  // a stall
    api->start = cpu + static_cast<uint64_t>(gap);
    api->end = api->start + static_cast<uint64_t>(duration < 500 ? 500 : duration);
    cpu = api->end;
  };
  auto gpu_slot = [&](const ApiRecord& api, double latency_ns, uint64_t* start) {
    const double ready =
        static_cast<double>(api.start - gpu_free) + latency_ns + model.gpu_sigma_ns * rng.Normal();
    const uint64_t earliest = gpu_free + 600;
    uint64_t t = ready > 0 ? gpu_free + static_cast<uint64_t>(ready) : gpu_free;
    if (t < earliest) t = earliest;
    *start = GpuTime(rng, t);
  };
  for (long i = 0; i < launches + copies; ++i) {
    const bool copy = i >= launches;
    ApiRecord api;
    api.name = copy ? kCopy : kLaunch;
    api.domain = 1;  // runtime
    api.cbid = copy ? 41 : 211;
    api.thread_id = kThread;
    api.correlation = ++correlation;
    cpu_call(copy ? 2400.0 : 5600.0, copy ? model.copy_sigma_ns : model.launch_sigma_ns, &api);
    f->Api(api);
    if (!copy) {
      KernelRecord k;
      k.name = kKernel;
      k.grid[0] = k.grid[1] = k.grid[2] = 1;
      k.block[0] = k.block[1] = k.block[2] = 1;
      k.registers_per_thread = 16;
      k.context = kContext;
      k.stream = kStream;
      k.channel = 12;
      k.correlation = api.correlation;
      gpu_slot(api, 2600.0, &k.start);
      const double u = rng.Uniform();
      const uint64_t duration = u < 0.6 ? 1024 : u < 0.85 ? 992 : u < 0.97 ? 1056 : 1312;
      k.end = GpuTime(rng, k.start + duration);
      gpu_free = k.end;
      f->Kernel(k);
    } else {
      MemcpyRecord m;
      m.bytes = 4096;
      m.copy_kind = 1;  // HtoD
      m.src_kind = 2;   // pinned
      m.dst_kind = 3;   // device
      m.flags = 4;      // async
      m.context = kContext;
      m.stream = kStream;
      m.channel = 5;
      m.correlation = api.correlation;
      gpu_slot(api, 2000.0, &m.start);
      m.end = GpuTime(rng, m.start + 1344 + 32 * (rng.Next() % 4));
      gpu_free = m.end;
      f->Memcpy(m);
    }
    if (cpu >= next_flush) {
      f->Flush();
      next_flush += kFlushNs;
    }
  }
  f->Encode(gpu_free);
}

// ---- the PyTorch example, re-encoded ----

// Names the reader hands out live only as long as their chunk; the encoder interns stable
// pointers, so each distinct string gets one lasting copy here.
class StringStore {
 public:
  const char* Keep(std::string_view s) {
    auto it = index_.find(std::string(s));
    if (it != index_.end()) return it->second;
    store_.emplace_back(s);
    const char* p = store_.back().c_str();
    index_.emplace(store_.back(), p);
    return p;
  }
  const char* KeepOrNull(std::string_view s) { return s.empty() ? nullptr : Keep(s); }

 private:
  std::deque<std::string> store_;
  std::map<std::string, const char*> index_;
};

NvtxPayloadValue PayloadOf(const NvtxPayload& p) {
  NvtxPayloadValue v;
  switch (p.value_case()) {
    case NvtxPayload::kU64:
      v.kind = NvtxPayloadValue::kU64;
      v.u64 = p.u64();
      break;
    case NvtxPayload::kI64:
      v.kind = NvtxPayloadValue::kI64;
      v.i64 = p.i64();
      break;
    case NvtxPayload::kF64:
      v.kind = NvtxPayloadValue::kF64;
      v.f64 = p.f64();
      break;
    case NvtxPayload::kU32:
      v.kind = NvtxPayloadValue::kU32;
      v.u32 = p.u32();
      break;
    case NvtxPayload::kI32:
      v.kind = NvtxPayloadValue::kI32;
      v.i32 = p.i32();
      break;
    case NvtxPayload::kF32:
      v.kind = NvtxPayloadValue::kF32;
      v.f32 = p.f32();
      break;
    case NvtxPayload::VALUE_NOT_SET:
      break;
  }
  return v;
}

uint64_t EndOf(int64_t start, int64_t duration) {
  return static_cast<uint64_t>(start) + static_cast<uint64_t>(duration);
}

// Re-encodes every record the reader gives back, one output chunk per input chunk. Returns the
// input file's size.
uint64_t FeedExample(const std::string& path, Feeder* f, StringStore* strings) {
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  if (!opened.ok()) {
    ADD_FAILURE() << opened.status().message();
    return 0;
  }
  TraceReader& reader = *opened.value();
  Chunk c;
  uint64_t last = 0;
  while (reader.Next(&c)) {
    for (const ApiCall& a : c.api_calls()) {
      ApiRecord r;
      r.name = strings->KeepOrNull(reader.Str(a.name()));
      r.start = static_cast<uint64_t>(a.start());
      r.end = EndOf(a.start(), a.duration());
      r.domain = a.domain();
      r.cbid = a.cbid();
      r.thread_id = a.thread_id();
      r.correlation = static_cast<uint32_t>(a.correlation());
      r.return_value = a.return_value();
      f->Api(r);
    }
    for (const Kernel& k : c.kernels()) {
      const KernelShape* s = reader.Shape(k.shape());
      KernelRecord r;
      if (s != nullptr) {
        r.name = strings->KeepOrNull(reader.Str(s->name()));
        r.grid[0] = s->grid_x(), r.grid[1] = s->grid_y(), r.grid[2] = s->grid_z();
        r.block[0] = s->block_x(), r.block[1] = s->block_y(), r.block[2] = s->block_z();
        r.cluster[0] = s->cluster_x(), r.cluster[1] = s->cluster_y();
        r.cluster[2] = s->cluster_z();
        r.registers_per_thread = s->registers_per_thread();
        r.static_shared = s->static_shared_bytes();
        r.dynamic_shared = s->dynamic_shared_bytes();
        r.local_per_thread = s->local_bytes_per_thread();
        r.shared_executed = s->shared_executed_bytes();
      }
      r.start = static_cast<uint64_t>(k.start());
      r.end = EndOf(k.start(), k.duration());
      r.device = k.device();
      r.context = k.context();
      r.stream = k.stream();
      r.correlation = static_cast<uint32_t>(k.correlation());
      r.graph_id = k.graph_id();
      r.graph_node_id = k.graph_node_id();
      r.launch_type = k.launch_type();
      r.channel = k.channel();
      r.flags = k.flags();
      f->Kernel(r);
      last = std::max(last, r.end);
    }
    for (const kp::Memcpy& m : c.memcpys()) {
      MemcpyRecord r;
      r.start = static_cast<uint64_t>(m.start());
      r.end = EndOf(m.start(), m.duration());
      r.bytes = m.bytes();
      r.copy_kind = m.copy_kind();
      r.src_kind = m.src_kind();
      r.dst_kind = m.dst_kind();
      r.device = m.device();
      r.context = m.context();
      r.stream = m.stream();
      r.correlation = static_cast<uint32_t>(m.correlation());
      r.graph_id = m.graph_id();
      r.graph_node_id = m.graph_node_id();
      r.flags = m.flags();
      r.peer = m.peer();
      r.src_device = m.src_device(), r.dst_device = m.dst_device();
      r.src_context = m.src_context(), r.dst_context = m.dst_context();
      r.copy_count = m.copy_count();
      r.channel = m.channel();
      f->Memcpy(r);
    }
    for (const kp::Memset& m : c.memsets()) {
      MemsetRecord r;
      r.start = static_cast<uint64_t>(m.start());
      r.end = EndOf(m.start(), m.duration());
      r.bytes = m.bytes();
      r.value = m.value();
      r.memory_kind = m.memory_kind();
      r.device = m.device();
      r.context = m.context();
      r.stream = m.stream();
      r.correlation = static_cast<uint32_t>(m.correlation());
      r.graph_id = m.graph_id();
      r.graph_node_id = m.graph_node_id();
      r.flags = m.flags();
      r.channel = m.channel();
      f->Memset(r);
    }
    for (const NvtxRange& n : c.nvtx_ranges()) {
      NvtxRangeRecord r;
      r.name = strings->KeepOrNull(reader.Str(n.name()));
      r.domain = strings->KeepOrNull(reader.Str(n.domain()));
      r.start = static_cast<uint64_t>(n.start());
      r.end = EndOf(n.start(), n.duration());
      r.thread_id = n.thread_id();
      r.end_thread_id = n.end_thread_id();
      r.category = n.category();
      r.color = n.color();
      r.has_color = n.has_color();
      if (n.has_payload()) r.payload = PayloadOf(n.payload());
      r.flags = n.flags();
      r.id = n.id();
      f->Range(r);
    }
    for (const NvtxMark& n : c.nvtx_marks()) {
      NvtxMarkRecord r;
      r.name = strings->KeepOrNull(reader.Str(n.name()));
      r.domain = strings->KeepOrNull(reader.Str(n.domain()));
      r.time = static_cast<uint64_t>(n.time());
      r.thread_id = n.thread_id();
      r.category = n.category();
      r.color = n.color();
      r.has_color = n.has_color();
      if (n.has_payload()) r.payload = PayloadOf(n.payload());
      f->Mark(r);
    }
    for (const Synchronization& s : c.syncs()) {
      SyncRecord r;
      r.start = static_cast<uint64_t>(s.start());
      r.end = EndOf(s.start(), s.duration());
      r.type = s.type();
      r.stream = s.stream();
      r.context = s.context();
      r.correlation = static_cast<uint32_t>(s.correlation());
      r.event_id = s.event_id();
      r.return_value = s.return_value();
      f->Sync(r);
    }
    for (const kp::Overhead& o : c.overheads()) {
      OverheadRecord r;
      r.name = strings->KeepOrNull(reader.Str(o.name()));
      r.start = static_cast<uint64_t>(o.start());
      r.end = EndOf(o.start(), o.duration());
      r.kind = o.kind();
      r.thread_id = o.thread_id();
      r.device = o.device();
      r.correlation = static_cast<uint32_t>(o.correlation());
      f->Overhead(r);
    }
    for (const GraphLaunch& g : c.graph_launches()) {
      GraphLaunchRecord r;
      r.start = static_cast<uint64_t>(g.start());
      r.end = EndOf(g.start(), g.duration());
      r.graph_id = g.graph_id();
      r.device = g.device();
      r.context = g.context();
      r.stream = g.stream();
      r.correlation = static_cast<uint32_t>(g.correlation());
      f->Graph(r);
    }
    f->Flush();
  }
  f->Encode(last);
  EXPECT_TRUE(reader.stats().Describe().empty()) << reader.stats().Describe()[0];
  return reader.stats().file_bytes;
}

// ---- reading back ----

std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = kp::test::ScratchPath("trace_size_test_" + name);
  FILE* out = std::fopen(path.c_str(), "wb");
  EXPECT_NE(out, nullptr);
  if (out == nullptr) return path;
  std::fwrite(bytes.data(), 1, bytes.size(), out);
  std::fclose(out);
  return path;
}

std::string Name(const char* s) { return s == nullptr ? std::string() : std::string(s); }

// Every record the reader returns equals the one fed, in order, field by field.
void ExpectReadsBackExactly(const std::string& path, const Fed& fed) {
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  TraceReader& reader = *opened.value();
  size_t nk = 0, nm = 0, ns = 0, na = 0, nr = 0, nmk = 0, nsy = 0, no = 0, ng = 0;
  size_t mismatches = 0;
  auto check = [&](bool same, const char* what, size_t index) {
    if (same) return;
    if (++mismatches <= 10) ADD_FAILURE() << what << " " << index << " differs after reading";
  };
  Chunk c;
  while (reader.Next(&c)) {
    for (const ApiCall& a : c.api_calls()) {
      ASSERT_LT(na, fed.api.size());
      const ApiRecord& r = fed.api[na];
      check(std::make_tuple(static_cast<uint64_t>(a.start()), EndOf(a.start(), a.duration()),
                            std::string(reader.Str(a.name())), static_cast<uint32_t>(a.domain()),
                            a.cbid(), a.thread_id(), static_cast<uint32_t>(a.correlation()),
                            a.return_value()) == std::make_tuple(r.start, r.end, Name(r.name),
                                                                 r.domain, r.cbid, r.thread_id,
                                                                 r.correlation, r.return_value),
            "api call", na);
      ++na;
    }
    for (const Kernel& k : c.kernels()) {
      ASSERT_LT(nk, fed.kernels.size());
      const KernelRecord& r = fed.kernels[nk];
      const KernelShape* s = reader.Shape(k.shape());
      check(s != nullptr && std::string(reader.Str(s->name())) == Name(r.name) &&
                s->grid_x() == r.grid[0] && s->block_x() == r.block[0] &&
                s->registers_per_thread() == r.registers_per_thread,
            "kernel shape", nk);
      check(std::make_tuple(static_cast<uint64_t>(k.start()), EndOf(k.start(), k.duration()),
                            k.device(), k.context(), k.stream(),
                            static_cast<uint32_t>(k.correlation()), k.graph_id(), k.graph_node_id(),
                            k.launch_type(), k.channel(), k.flags()) ==
                std::make_tuple(r.start, r.end, r.device, r.context, r.stream, r.correlation,
                                r.graph_id, r.graph_node_id, r.launch_type, r.channel,
                                r.flags | (r.start == 0 && r.end == 0 ? 1u : 0u)),
            "kernel", nk);
      ++nk;
    }
    for (const kp::Memcpy& m : c.memcpys()) {
      ASSERT_LT(nm, fed.memcpys.size());
      const MemcpyRecord& r = fed.memcpys[nm];
      check(std::make_tuple(static_cast<uint64_t>(m.start()), EndOf(m.start(), m.duration()),
                            m.bytes(), static_cast<uint32_t>(m.copy_kind()),
                            static_cast<uint32_t>(m.src_kind()),
                            static_cast<uint32_t>(m.dst_kind()), m.device(), m.context(),
                            m.stream(), static_cast<uint32_t>(m.correlation()), m.flags(),
                            m.channel(), m.copy_count(), m.peer()) ==
                std::make_tuple(r.start, r.end, r.bytes, r.copy_kind, r.src_kind, r.dst_kind,
                                r.device, r.context, r.stream, r.correlation, r.flags, r.channel,
                                r.copy_count, r.peer),
            "memcpy", nm);
      ++nm;
    }
    for (const kp::Memset& m : c.memsets()) {
      ASSERT_LT(ns, fed.memsets.size());
      const MemsetRecord& r = fed.memsets[ns];
      check(std::make_tuple(static_cast<uint64_t>(m.start()), EndOf(m.start(), m.duration()),
                            m.bytes(), m.value(), m.device(), m.context(), m.stream(),
                            static_cast<uint32_t>(m.correlation()), m.flags(), m.channel()) ==
                std::make_tuple(r.start, r.end, r.bytes, r.value, r.device, r.context, r.stream,
                                r.correlation, r.flags, r.channel),
            "memset", ns);
      ++ns;
    }
    for (const NvtxRange& n : c.nvtx_ranges()) {
      ASSERT_LT(nr, fed.ranges.size());
      const NvtxRangeRecord& r = fed.ranges[nr];
      check(std::make_tuple(static_cast<uint64_t>(n.start()), EndOf(n.start(), n.duration()),
                            std::string(reader.Str(n.name())), n.thread_id(), n.end_thread_id(),
                            n.flags(), n.id()) == std::make_tuple(r.start, r.end, Name(r.name),
                                                                  r.thread_id, r.end_thread_id,
                                                                  r.flags, r.id),
            "nvtx range", nr);
      ++nr;
    }
    for (const NvtxMark& n : c.nvtx_marks()) {
      ASSERT_LT(nmk, fed.marks.size());
      const NvtxMarkRecord& r = fed.marks[nmk];
      check(static_cast<uint64_t>(n.time()) == r.time &&
                std::string(reader.Str(n.name())) == Name(r.name) && n.thread_id() == r.thread_id,
            "nvtx mark", nmk);
      ++nmk;
    }
    for (const Synchronization& s : c.syncs()) {
      ASSERT_LT(nsy, fed.syncs.size());
      const SyncRecord& r = fed.syncs[nsy];
      check(
          std::make_tuple(static_cast<uint64_t>(s.start()), EndOf(s.start(), s.duration()),
                          static_cast<uint32_t>(s.type()), s.stream(), s.context(),
                          static_cast<uint32_t>(s.correlation()), s.event_id(), s.return_value()) ==
              std::make_tuple(r.start, r.end, r.type, r.stream, r.context, r.correlation,
                              r.event_id, r.return_value),
          "sync", nsy);
      ++nsy;
    }
    for (const kp::Overhead& o : c.overheads()) {
      ASSERT_LT(no, fed.overheads.size());
      const OverheadRecord& r = fed.overheads[no];
      check(std::make_tuple(static_cast<uint64_t>(o.start()), EndOf(o.start(), o.duration()),
                            o.kind(), o.thread_id(), o.device(),
                            static_cast<uint32_t>(o.correlation())) ==
                std::make_tuple(r.start, r.end, r.kind, r.thread_id, r.device, r.correlation),
            "overhead", no);
      ++no;
    }
    for (const GraphLaunch& g : c.graph_launches()) {
      ASSERT_LT(ng, fed.graphs.size());
      const GraphLaunchRecord& r = fed.graphs[ng];
      check(std::make_tuple(static_cast<uint64_t>(g.start()), EndOf(g.start(), g.duration()),
                            g.graph_id(), g.stream(), static_cast<uint32_t>(g.correlation())) ==
                std::make_tuple(r.start, r.end, r.graph_id, r.stream, r.correlation),
            "graph launch", ng);
      ++ng;
    }
  }
  EXPECT_EQ(nk, fed.kernels.size());
  EXPECT_EQ(nm, fed.memcpys.size());
  EXPECT_EQ(ns, fed.memsets.size());
  EXPECT_EQ(na, fed.api.size());
  EXPECT_EQ(nr, fed.ranges.size());
  EXPECT_EQ(nmk, fed.marks.size());
  EXPECT_EQ(nsy, fed.syncs.size());
  EXPECT_EQ(no, fed.overheads.size());
  EXPECT_EQ(ng, fed.graphs.size());
  EXPECT_EQ(mismatches, 0u);
  EXPECT_TRUE(reader.stats().Describe().empty()) << reader.stats().Describe()[0];
}

void Report(const char* what, const Feeder& f) {
  const double kernels = static_cast<double>(f.fed().kernels.size());
  std::printf(
      "[trace size] %s: %zu bytes, %zu kernels, %zu records: %.3f bytes/kernel; encoder CPU "
      "%.1f ns/record (zstd:%d included)\n",
      what, f.file().size(), f.fed().kernels.size(), f.records(),
      static_cast<double>(f.file().size()) / kernels,
      static_cast<double>(f.cpu_ns()) / static_cast<double>(f.records()), kZstdLevel);
}

double BytesPerKernel(const Feeder& f) {
  return static_cast<double>(f.file().size()) / static_cast<double>(f.fed().kernels.size());
}

// The launch loop as issue 10 states it: kernels and their launch calls only, nominal jitter.
TEST(TraceSize, LaunchLoopWithinSixBytesPerKernelAndExact) {
  Feeder f;
  LoopModel model;
  model.copies = 0;
  FeedLaunchLoop(&f, model);
  Report("synthetic launch loop, nominal jitter (200000 launches)", f);
  EXPECT_LE(BytesPerKernel(f), kLaunchLoopBudgetBytesPerKernel);
  ExpectReadsBackExactly(WriteTemp("launch_loop.kptrace", f.file()), f.fed());
}

// bench/workloads/launch_loop.cu as the benchmark measures it (its copies and their calls
// included), with the jitter calibrated on the H200 run: within the budget, read back exactly.
TEST(TraceSize, CalibratedLaunchLoopWithCopiesWithinSixBytesPerKernelAndExact) {
  Feeder f;
  LoopModel model;
  model.gap_mean_ns = 200.0;
  model.launch_sigma_ns = 450.0;
  model.copy_sigma_ns = 300.0;
  model.gpu_sigma_ns = 400.0;
  FeedLaunchLoop(&f, model);
  Report("synthetic launch loop, calibrated jitter (200000 launches + 20000 copies)", f);
  EXPECT_LE(BytesPerKernel(f), kLaunchLoopBudgetBytesPerKernel);
  ExpectReadsBackExactly(WriteTemp("launch_loop_copies.kptrace", f.file()), f.fed());
}

// Kernels alone (KP_API=none), back to back on one stream, with the smallest values a record
// can have (1-byte gaps, durations and correlation steps): the densest chunk kp writes, ~6
// bytes of columns per kernel that expand to ~100-byte records, still fits the reader's decode
// budget, and every kernel reads back. (With the budget of row chunks, 24 bytes per byte, it
// would be skipped.)
TEST(TraceSize, DenseKernelOnlyChunksReadBackWithinTheDecodeBudget) {
  Feeder f;
  Rng rng(7);
  uint64_t t = 1764583200123456789ull;
  for (uint32_t i = 0; i < 300000; ++i) {
    KernelRecord k;
    k.name = "_Z11EmptyKernelv";
    k.context = 1;
    k.stream = 7;
    k.correlation = i + 1;
    k.start = t + 20 + rng.Next() % 40;  // gap and duration: zigzag values below 128
    k.end = k.start + 20 + rng.Next() % 40;
    t = k.end;
    f.Kernel(k);
  }
  f.Encode(t);
  ASSERT_EQ(f.fed().kernels.size(), 300000u);
  Report("dense kernels only (300000 kernels, no API calls)", f);
  ExpectReadsBackExactly(WriteTemp("kernels_only.kptrace", f.file()), f.fed());
}

TEST(TraceSize, PytorchExampleReencodedExactly) {
  Feeder f;
  StringStore strings;
  const std::string example = std::string(KP_EXAMPLES_DIR) + "/pytorch_h200.kptrace";
  const uint64_t original = FeedExample(example, &f, &strings);
  ASSERT_GT(f.fed().kernels.size(), 0u);
  Report("examples/pytorch_h200.kptrace re-encoded", f);
  std::printf(
      "[trace size] examples/pytorch_h200.kptrace as shipped: %llu bytes, %.3f bytes/kernel\n",
      static_cast<unsigned long long>(original),
      static_cast<double>(original) / static_cast<double>(f.fed().kernels.size()));
  ExpectReadsBackExactly(WriteTemp("pytorch.kptrace", f.file()), f.fed());
}

}  // namespace
}  // namespace kp
