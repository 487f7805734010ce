// Encoder tests: TraceEncoder output read back through the real libprotobuf kp::Chunk class.
// The delta coding is undone here independently of tools/reader.
#include <zstd.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/frame.h"
#include "common/proto_wire.h"
#include "gtest/gtest.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "kptrace.pb.h"
#include "tools/reader/chunk_columns.h"
#include "tools/reader/start_keys.h"

namespace kp {
namespace {

struct ParsedFile {
  std::vector<Chunk> chunks;
  std::vector<uint64_t> offsets;  // file offset of each frame
  std::vector<uint32_t> flags;
};

ParsedFile ParseFile(const std::vector<uint8_t>& file) {
  ParsedFile out;
  EXPECT_GE(file.size(), kFileMagicSize);
  if (file.size() < kFileMagicSize) return out;
  EXPECT_EQ(0, std::memcmp(file.data(), kFileMagic, kFileMagicSize));
  size_t pos = kFileMagicSize;
  while (pos < file.size()) {
    FrameHeader h;
    if (file.size() - pos < kFrameHeaderSize) {
      ADD_FAILURE() << "torn frame header at " << pos;
      break;
    }
    if (DecodeFrameHeader(file.data() + pos, &h) != FrameHeaderStatus::kOk) {
      ADD_FAILURE() << "bad frame header at " << pos;
      break;
    }
    const uint8_t* payload = file.data() + pos + kFrameHeaderSize;
    if (file.size() - pos - kFrameHeaderSize < h.stored_size) {
      ADD_FAILURE() << "torn payload at " << pos;
      break;
    }
    EXPECT_EQ(h.payload_crc, Crc32c(payload, h.stored_size));
    std::string raw;
    if (h.flags & kFrameFlagZstd) {
      raw.resize(h.raw_size);
      size_t n = ZSTD_decompress(raw.data(), raw.size(), payload, h.stored_size);
      EXPECT_FALSE(ZSTD_isError(n));
      EXPECT_EQ(n, h.raw_size);
    } else {
      EXPECT_EQ(h.stored_size, h.raw_size);
      raw.assign(reinterpret_cast<const char*>(payload), h.stored_size);
    }
    Chunk chunk;
    EXPECT_TRUE(chunk.ParseFromString(raw)) << "chunk at " << pos;
    EXPECT_EQ(ExpandColumns(&chunk, UINT64_MAX), ColumnsResult::kOk);
    out.chunks.push_back(std::move(chunk));
    out.offsets.push_back(pos);
    out.flags.push_back(h.flags);
    pos += kFrameHeaderSize + h.stored_size;
  }
  return out;
}

// Undoes the per-list delta coding of `start`/`time` and `correlation`: kernels, copies and
// memsets (keyed by stream) and API calls (by thread) by format version 2's rule.
template <typename List, typename GetStart>
std::vector<uint64_t> Starts(const Chunk& c, const List& list, GetStart get) {
  std::vector<uint64_t> out;
  uint64_t t = c.time_base_ns();
  KeyedStartDecoder keyed(c.time_base_ns());
  for (const auto& r : list) {
    using R = std::decay_t<decltype(r)>;
    if constexpr (kStartIsKeyed<R>) {
      out.push_back(keyed.Next(get(r), StartKeyOf(r), r.duration()));
    } else {
      t += static_cast<uint64_t>(get(r));
      out.push_back(t);
    }
  }
  return out;
}
template <typename List, typename GetCorrelation>
std::vector<uint32_t> Correlations(const List& list, GetCorrelation get) {
  std::vector<uint32_t> out;
  int64_t c = 0;
  for (const auto& r : list) {
    c += get(r);
    out.push_back(static_cast<uint32_t>(c));
  }
  return out;
}

std::map<uint32_t, std::string> StringsOf(const Chunk& c) {
  std::map<uint32_t, std::string> m;
  for (const auto& s : c.strings()) {
    EXPECT_GE(s.id(), 1u);
    EXPECT_EQ(m.count(s.id()), 0u) << "string " << s.id() << " defined twice in a chunk";
    m[s.id()] = s.value();
  }
  return m;
}

// ---- proto_wire.h against libprotobuf ----

TEST(ProtoWireTest, ScalarsParseWithLibprotobuf) {
  uint8_t buf[256];
  wire::WireWriter w(buf);
  w.SintAlways(1, -5);     // start
  w.Sint(2, INT64_MIN);    // duration
  w.Uint(3, 0xFFFFFFFFu);  // bytes
  w.Uint(4, COPY_PTOP);    // copy_kind
  w.Bool(14, true);        // peer
  w.Uint(15, 0);           // skipped default
  w.Uint(20, 7);           // channel (two-byte tag)
  Memcpy m;
  ASSERT_TRUE(m.ParseFromArray(buf, static_cast<int>(w.size())));
  EXPECT_EQ(m.start(), -5);
  EXPECT_EQ(m.duration(), INT64_MIN);
  EXPECT_EQ(m.bytes(), 0xFFFFFFFFu);
  EXPECT_EQ(m.copy_kind(), COPY_PTOP);
  EXPECT_TRUE(m.peer());
  EXPECT_EQ(m.src_device(), 0u);
  EXPECT_EQ(m.channel(), 7u);
  EXPECT_EQ(wire::UnZigZag(wire::ZigZag(-123456789)), -123456789);
  EXPECT_EQ(wire::VarintSize(127), 1u);
  EXPECT_EQ(wire::VarintSize(128), 2u);
  EXPECT_EQ(wire::VarintSize(UINT64_MAX), 10u);
}

// Every varint length (1 to 10 bytes; 9 and 10 take the one-store path), and the bits next to
// each length's edges: the same bytes as libprotobuf's encoding of the same field, from
// RawVarint (through UintAlways) and from RawVarintFullRoom (one store for 2 to 8 bytes).
TEST(ProtoWireTest, VarintsOfEveryLengthMatchLibprotobufsBytes) {
  std::vector<uint64_t> values = {0, 1, UINT64_MAX, 0x8000000000000000ull, 0x7fffffffffffffffull};
  for (int bits = 7; bits < 64; bits += 7) {
    const uint64_t edge = uint64_t{1} << bits;
    for (uint64_t v : {edge - 1, edge, edge + 1, edge | (edge >> 1), (edge << 1) - 1}) {
      values.push_back(v);
    }
  }
  for (uint64_t v = 0x0123456789abcdefull, i = 0; i < 64; ++i) {  // mixed bit patterns
    values.push_back(v);
    values.push_back(v >> i);  // of every length
    v = v * 6364136223846793005ull + 1442695040888963407ull;
  }
  for (uint64_t v : values) {
    uint8_t buf[32];
    std::memset(buf, 0xee, sizeof buf);
    wire::WireWriter w(buf);
    w.UintAlways(9, v);  // Kernel.graph_node_id (uint64)
    Kernel k;
    k.set_graph_node_id(v);
    // (proto3 leaves a 0 out: its field is the tag and one zero byte.)
    const std::string want = v == 0 ? std::string("\x48\x00", 2) : k.SerializeAsString();
    ASSERT_EQ(std::string(reinterpret_cast<char*>(buf), w.size()), want) << v;
    EXPECT_EQ(w.size(), 1 + wire::VarintSize(v));
    EXPECT_EQ(buf[w.size()], 0xee) << v;  // nothing written past the varint
    // The same value through the one-store writer (room for 8 bytes at any position).
    uint8_t buf8[32];
    std::memset(buf8, 0xee, sizeof buf8);
    wire::WireWriter w8(buf8);
    w8.Tag(9, wire::kVarint);
    w8.RawVarintFullRoom(v);
    ASSERT_EQ(std::string(reinterpret_cast<char*>(buf8), w8.size()), want) << v;
  }
}

TEST(ProtoWireTest, NegativeInt32AndDoublesAndNested) {
  wire::WireBuffer b;
  wire::WireWriter w = b.Reserve(512);
  w.Int(8, -2);  // ApiCall.return_value is int32
  b.Commit(w);
  ApiCall api;
  ASSERT_TRUE(api.ParseFromArray(b.data(), static_cast<int>(b.size())));
  EXPECT_EQ(api.return_value(), -2);

  b.Clear();
  const double values[3] = {1.5, std::nan(""), 0.0};
  w = b.Reserve(512);
  w.PackedDoubles(8, values, 3);
  uint8_t sub[16];
  wire::WireWriter s(sub);
  s.DoubleAlways(3, 0.0);
  w.Message(10, s);  // not a MetricRange field: parsed as unknown, must not break parsing
  b.Commit(w);
  MetricRange mr;
  ASSERT_TRUE(mr.ParseFromArray(b.data(), static_cast<int>(b.size())));
  ASSERT_EQ(mr.values_size(), 3);
  EXPECT_EQ(mr.values(0), 1.5);
  EXPECT_TRUE(std::isnan(mr.values(1)));
  EXPECT_EQ(mr.values(2), 0.0);

  uint8_t pbuf[16];
  wire::WireWriter p(pbuf);
  p.DoubleAlways(3, 0.0);  // a zero in a oneof must still select it
  NvtxPayload payload;
  ASSERT_TRUE(payload.ParseFromArray(pbuf, static_cast<int>(p.size())));
  EXPECT_EQ(payload.value_case(), NvtxPayload::kF64);
}

TEST(ProtoWireTest, BufferGrowsAndKeepsContent) {
  wire::WireBuffer b;
  std::string big(100000, 'x');
  for (int i = 0; i < 50; ++i) {
    wire::WireWriter w = b.Reserve(wire::MaxLengthDelimitedBytes(big.size()));
    w.StringAlways(2, big);
    b.Commit(w);
  }
  EXPECT_EQ(b.size(), 50 * (1 + 3 + big.size()));
  b.Clear();
  EXPECT_EQ(b.size(), 0u);
}

// ---- TraceEncoder ----

const char kMangled[] =
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_"
    "T1_";
const char kPlain[] = "my_c_kernel";

KernelRecord MakeKernel(const char* name, uint64_t start, uint32_t correlation, uint32_t grid_x) {
  KernelRecord k;
  k.name = name;
  k.start = start;
  k.end = start + 1234;
  k.grid[0] = grid_x;
  k.grid[1] = 2;
  k.grid[2] = 3;
  k.block[0] = 128;
  k.block[1] = 4;
  k.block[2] = 5;
  k.cluster[0] = 2;
  k.cluster[1] = 1;
  k.cluster[2] = 1;
  k.registers_per_thread = 40;
  k.static_shared = 1024;
  k.dynamic_shared = 2048;
  k.local_per_thread = 16;
  k.shared_executed = 4096;
  k.device = 1;
  k.context = 3;
  k.stream = 7;
  k.correlation = correlation;
  k.graph_id = 11;
  k.graph_node_id = 0x1234567890ull;
  k.launch_type = 2;
  k.channel = 9;
  k.flags = RECORD_FLAG_DEVICE_LAUNCHED;
  return k;
}

class EncoderRoundTripTest : public ::testing::TestWithParam<int> {};

TEST_P(EncoderRoundTripTest, EveryFieldOfEveryRecordKindRoundTrips) {
  MemoryChunkSink sink(GetParam());
  TraceEncoder enc(&sink, TraceEncoder::Options());

  HeaderInfo h;
  h.kp_version = "0.1.0";
  h.pid = 4242;
  h.ppid = 1;
  h.hostname = "gpu-node-7";
  h.command_line = {"python", "train.py", ""};
  h.rank = 3;
  h.local_rank = -1;
  h.world_size = 8;
  h.start_time_unix_ns = 1700000000000000000ull;
  h.start_time_trace_ns = 1700000000000000123ull;
  h.clock = "CLOCK_REALTIME (cupti default)";
  h.config = {{"KP_FLUSH_MS", "1000"}, {"KP_API", "launch"}};
  h.cupti_api_version = 130001;
  h.cuda_driver_version = 13000;
  h.driver_version = "580.159.03";
  h.injection_mode = "injection";
  h.output_path = "/tmp/x.kptrace";
  enc.SetHeader(h);

  DeviceInfo d;
  d.id = 1;
  d.name = "NVIDIA H200";
  for (int i = 0; i < 16; ++i) d.uuid[i] = static_cast<uint8_t>(i * 17);
  d.cc_major = 9;
  d.cc_minor = 0;
  d.sm_count = 132;
  d.global_memory_bytes = 150ull << 30;
  d.global_memory_bandwidth_kbps = 4800000000ull;
  d.core_clock_khz = 1980000;
  d.memory_clock_khz = 2619000;
  d.max_threads_per_block = 1024;
  d.max_shared_memory_per_block = 49152;
  d.max_registers_per_block = 65536;
  d.l2_cache_bytes = 60u << 20;
  d.max_warps_per_sm = 64;
  d.num_threads_per_warp = 32;
  d.pci_bus_id = "0000:19:00.0";
  d.is_mig = true;
  enc.AddDevice(d);
  enc.AddContext({3, 1, 13, true});
  enc.AddThreadName(777, "pt_main_thread");
  MetricConfigInfo mc;
  mc.metric_names = {"dram__bytes_read.sum", "gpu__time_duration.sum"};
  mc.num_passes = 2;
  mc.mode = "range";
  mc.device = 1;
  mc.chip = "GH100";
  EXPECT_EQ(enc.AddMetricConfig(mc), 1u);
  enc.AddNotice(NOTICE_WARNING, "metrics", "counters busy", 55);

  const uint64_t t0 = 1700000000500000000ull;
  // Chunk 0: kernels out of time order (deltas go negative), one without timing.
  enc.AddKernel(MakeKernel(kMangled, t0 + 1000, 100, 64));
  enc.AddKernel(MakeKernel(kPlain, t0 + 500, 90, 64));
  KernelRecord untimed = MakeKernel(kMangled, 0, 105, 64);
  untimed.end = 0;
  enc.AddKernel(untimed);
  std::string copy_of_mangled = kMangled;  // same content, other pointer: same ids
  enc.AddKernel(MakeKernel(copy_of_mangled.c_str(), t0 + 3000, 120, 32));

  MemcpyRecord m;
  m.start = t0 + 10;
  m.end = t0 + 20010;
  m.bytes = 1ull << 33;
  m.copy_kind = COPY_PTOP;
  m.src_kind = MEMORY_DEVICE;
  m.dst_kind = MEMORY_PINNED;
  m.device = 1;
  m.context = 3;
  m.stream = 14;
  m.correlation = 101;
  m.graph_id = 5;
  m.graph_node_id = 6;
  m.flags = RECORD_FLAG_ASYNC;
  m.peer = true;
  m.src_device = 1;
  m.dst_device = 0;
  m.src_context = 3;
  m.dst_context = 4;
  m.copy_count = 2;
  m.channel = 8;
  enc.AddMemcpy(m);

  MemsetRecord ms;
  ms.start = t0 + 30;
  ms.end = t0 + 80;
  ms.bytes = 4096;
  ms.value = 0xAB;
  ms.memory_kind = MEMORY_MANAGED;
  ms.device = 1;
  ms.context = 3;
  ms.stream = 7;
  ms.correlation = 102;
  ms.graph_id = 1;
  ms.graph_node_id = 2;
  ms.flags = RECORD_FLAG_ASYNC;
  ms.channel = 4;
  enc.AddMemset(ms);

  static const char kApiName[] = "cudaLaunchKernel_v7000";
  ApiRecord a;
  a.name = kApiName;
  a.start = t0 + 1;
  a.end = t0 + 9;
  a.domain = API_RUNTIME;
  a.cbid = 211;
  a.thread_id = 777;
  a.correlation = 100;
  a.return_value = -3;
  enc.AddApi(a);

  NvtxRangeRecord nr;
  std::string range_name = "forward";
  nr.name = range_name.c_str();
  nr.domain = "torch";
  nr.start = t0;
  nr.end = t0 + 5000;
  nr.thread_id = 777;
  nr.end_thread_id = 778;
  nr.category = 2;
  nr.color = 0xFF00FF00u;
  nr.has_color = true;
  nr.payload.kind = NvtxPayloadValue::kF64;
  nr.payload.f64 = 2.5;
  nr.flags = RECORD_FLAG_OPEN;
  nr.id = 99;
  enc.AddNvtxRange(nr);

  NvtxMarkRecord mk;
  mk.name = "checkpoint";
  mk.time = t0 + 42;
  mk.thread_id = 777;
  mk.category = 1;
  mk.color = 0x12345678;
  mk.has_color = true;
  mk.payload.kind = NvtxPayloadValue::kI32;
  mk.payload.i32 = -7;
  enc.AddNvtxMark(mk);

  SyncRecord s;
  s.start = t0 + 100;
  s.end = t0 + 900;
  s.type = SYNC_STREAM_SYNCHRONIZE;
  s.stream = 7;
  s.context = 3;
  s.correlation = 130;
  s.event_id = 12;
  s.return_value = 0;
  enc.AddSync(s);

  OverheadRecord o;
  o.name = "CUPTI_INSTRUMENTATION";
  o.start = t0 + 5;
  o.end = t0 + 6;
  o.kind = 2;
  o.thread_id = 777;
  o.device = 1;
  o.correlation = 0;
  enc.AddOverhead(o);

  GraphLaunchRecord g;
  g.start = t0 + 200;
  g.end = t0 + 700;
  g.graph_id = 5;
  g.device = 1;
  g.context = 3;
  g.stream = 7;
  g.correlation = 140;
  enc.AddGraphLaunch(g);

  const double values[2] = {1e9, 12345.5};
  MetricRangeRecord mr;
  mr.config = 1;
  mr.name = "forward";
  mr.domain = "torch";
  mr.occurrence = 4;
  mr.occurrences_used = 2;
  mr.start = t0 + 10;
  mr.end = t0 + 4000;
  mr.values = values;
  mr.num_values = 2;
  mr.thread_id = 777;
  mr.device = 1;
  mr.context = 3;
  mr.correlation = 555;
  mr.nesting_level = 1;
  mr.sm_clock_khz = 1755000;
  enc.AddMetricRange(mr);

  EXPECT_EQ(enc.stats().zero_timestamp_records, 1u);
  enc.stats().cupti_dropped_records = 17;
  enc.Flush();

  // Chunk 1: the same names again must be re-defined; a new shape appears.
  enc.AddKernel(MakeKernel(kMangled, t0 + 10000, 200, 64));
  enc.AddKernel(MakeKernel(kMangled, t0 + 20000, 201, 16));
  a.start = t0 + 9000;
  a.end = t0 + 9100;
  a.correlation = 200;
  enc.AddApi(a);
  range_name = "backward";  // same pointer, new content: NVTX names are interned by content
  nr.start = t0 + 9500;
  enc.AddNvtxRange(nr);
  enc.Finish({t0 + 99999, "exit"});

  ParsedFile f = ParseFile(sink.file());
  ASSERT_EQ(f.chunks.size(), 2u);
  ASSERT_EQ(sink.raw_chunks().size(), 2u);
  EXPECT_EQ(f.flags[0] & kFrameFlagZstd, GetParam() > 0 ? kFrameFlagZstd : 0u);
  const Chunk& c0 = f.chunks[0];
  const Chunk& c1 = f.chunks[1];
  EXPECT_EQ(c0.sequence(), 0u);
  EXPECT_EQ(c1.sequence(), 1u);

  // Header in chunk 0 only.
  ASSERT_TRUE(c0.has_header());
  EXPECT_FALSE(c1.has_header());
  const Header& hp = c0.header();
  EXPECT_EQ(hp.kp_version(), "0.1.0");
  EXPECT_EQ(hp.pid(), 4242u);
  EXPECT_EQ(hp.ppid(), 1u);
  EXPECT_EQ(hp.hostname(), "gpu-node-7");
  ASSERT_EQ(hp.command_line_size(), 3);
  EXPECT_EQ(hp.command_line(1), "train.py");
  EXPECT_EQ(hp.command_line(2), "");
  EXPECT_EQ(hp.rank(), 3);
  EXPECT_EQ(hp.local_rank(), -1);
  EXPECT_EQ(hp.world_size(), 8);
  EXPECT_EQ(hp.start_time_unix_ns(), h.start_time_unix_ns);
  EXPECT_EQ(hp.start_time_trace_ns(), h.start_time_trace_ns);
  EXPECT_EQ(hp.clock(), h.clock);
  ASSERT_EQ(hp.config_size(), 2);
  EXPECT_EQ(hp.config(1).key(), "KP_API");
  EXPECT_EQ(hp.config(1).value(), "launch");
  EXPECT_EQ(hp.cupti_api_version(), 130001u);
  EXPECT_EQ(hp.cuda_driver_version(), 13000);
  EXPECT_EQ(hp.driver_version(), "580.159.03");
  EXPECT_EQ(hp.injection_mode(), "injection");
  EXPECT_EQ(hp.output_path(), "/tmp/x.kptrace");

  // Devices, contexts, threads and metric configs in every chunk.
  for (const Chunk* c : {&c0, &c1}) {
    ASSERT_EQ(c->devices_size(), 1);
    const Device& dp = c->devices(0);
    EXPECT_EQ(dp.id(), 1u);
    EXPECT_EQ(dp.name(), "NVIDIA H200");
    EXPECT_EQ(dp.uuid(), std::string(reinterpret_cast<const char*>(d.uuid), 16));
    EXPECT_EQ(dp.compute_capability_major(), 9u);
    EXPECT_EQ(dp.compute_capability_minor(), 0u);
    EXPECT_EQ(dp.sm_count(), 132u);
    EXPECT_EQ(dp.global_memory_bytes(), d.global_memory_bytes);
    EXPECT_EQ(dp.global_memory_bandwidth_kbps(), d.global_memory_bandwidth_kbps);
    EXPECT_EQ(dp.core_clock_khz(), 1980000u);
    EXPECT_EQ(dp.memory_clock_khz(), 2619000u);
    EXPECT_EQ(dp.max_threads_per_block(), 1024u);
    EXPECT_EQ(dp.max_shared_memory_per_block(), 49152u);
    EXPECT_EQ(dp.max_registers_per_block(), 65536u);
    EXPECT_EQ(dp.l2_cache_bytes(), 60u << 20);
    EXPECT_EQ(dp.max_warps_per_sm(), 64u);
    EXPECT_EQ(dp.num_threads_per_warp(), 32u);
    EXPECT_EQ(dp.pci_bus_id(), "0000:19:00.0");
    EXPECT_TRUE(dp.is_mig());
    ASSERT_EQ(c->contexts_size(), 1);
    EXPECT_EQ(c->contexts(0).id(), 3u);
    EXPECT_EQ(c->contexts(0).device(), 1u);
    EXPECT_EQ(c->contexts(0).null_stream(), 13u);
    EXPECT_TRUE(c->contexts(0).is_green());
    ASSERT_EQ(c->threads_size(), 1);
    EXPECT_EQ(c->threads(0).thread_id(), 777u);
    EXPECT_EQ(c->threads(0).name(), "pt_main_thread");
    ASSERT_EQ(c->metric_configs_size(), 1);
    const MetricConfig& mcp = c->metric_configs(0);
    EXPECT_EQ(mcp.id(), 1u);
    ASSERT_EQ(mcp.metric_names_size(), 2);
    EXPECT_EQ(mcp.metric_names(1), "gpu__time_duration.sum");
    EXPECT_EQ(mcp.num_passes(), 2u);
    EXPECT_EQ(mcp.mode(), "range");
    EXPECT_EQ(mcp.device(), 1u);
    EXPECT_EQ(mcp.chip(), "GH100");
    ASSERT_TRUE(c->has_stats());
  }
  ASSERT_EQ(c0.notices_size(), 1);
  EXPECT_EQ(c1.notices_size(), 0);
  EXPECT_EQ(c0.notices(0).severity(), NOTICE_WARNING);
  EXPECT_EQ(c0.notices(0).component(), "metrics");
  EXPECT_EQ(c0.notices(0).message(), "counters busy");
  EXPECT_EQ(c0.notices(0).time_ns(), 55u);

  // Kernels and their shapes.
  std::map<uint32_t, std::string> s0 = StringsOf(c0), s1 = StringsOf(c1);
  ASSERT_EQ(c0.kernels_size(), 4);
  std::vector<uint64_t> ks = Starts(c0, c0.kernels(), [](const Kernel& k) { return k.start(); });
  std::vector<uint32_t> kc =
      Correlations(c0.kernels(), [](const Kernel& k) { return k.correlation(); });
  EXPECT_EQ(ks, (std::vector<uint64_t>{t0 + 1000, t0 + 500, 0, t0 + 3000}));
  EXPECT_EQ(kc, (std::vector<uint32_t>{100, 90, 105, 120}));
  std::map<uint32_t, KernelShape> shapes0;
  for (const auto& sh : c0.kernel_shapes()) shapes0[sh.id()] = sh;
  for (int i = 0; i < 4; ++i) {
    const Kernel& k = c0.kernels(i);
    EXPECT_EQ(k.duration(), i == 2 ? 0 : 1234);
    EXPECT_EQ(k.stream(), 7u);
    EXPECT_EQ(k.context(), 3u);
    EXPECT_EQ(k.device(), 1u);
    EXPECT_EQ(k.graph_id(), 11u);
    EXPECT_EQ(k.graph_node_id(), 0x1234567890ull);
    EXPECT_EQ(k.launch_type(), 2u);
    EXPECT_EQ(k.channel(), 9u);
    EXPECT_EQ(k.flags(), i == 2 ? (RECORD_FLAG_DEVICE_LAUNCHED | RECORD_FLAG_NO_TIMING)
                                : uint32_t{RECORD_FLAG_DEVICE_LAUNCHED});
    ASSERT_EQ(shapes0.count(k.shape()), 1u) << "shape not defined in chunk 0";
    const KernelShape& sh = shapes0[k.shape()];
    EXPECT_EQ(s0[sh.name()], i == 1 ? kPlain : kMangled);
    EXPECT_EQ(sh.grid_x(), i == 3 ? 32u : 64u);
    EXPECT_EQ(sh.grid_y(), 2u);
    EXPECT_EQ(sh.grid_z(), 3u);
    EXPECT_EQ(sh.block_x(), 128u);
    EXPECT_EQ(sh.block_y(), 4u);
    EXPECT_EQ(sh.block_z(), 5u);
    EXPECT_EQ(sh.cluster_x(), 2u);
    EXPECT_EQ(sh.cluster_y(), 1u);
    EXPECT_EQ(sh.cluster_z(), 1u);
    EXPECT_EQ(sh.registers_per_thread(), 40u);
    EXPECT_EQ(sh.static_shared_bytes(), 1024u);
    EXPECT_EQ(sh.dynamic_shared_bytes(), 2048u);
    EXPECT_EQ(sh.local_bytes_per_thread(), 16u);
    EXPECT_EQ(sh.shared_executed_bytes(), 4096u);
    EXPECT_EQ(sh.device(), 1u);
  }
  EXPECT_EQ(c0.kernel_shapes_size(), 3);  // (mangled, 64), (plain, 64), (mangled, 32)
  EXPECT_EQ(c0.kernels(0).shape(), c0.kernels(2).shape());
  EXPECT_NE(c0.kernels(0).shape(), c0.kernels(3).shape());
  const KernelShape& mangled_shape = shapes0[c0.kernels(0).shape()];
  EXPECT_EQ(s0[mangled_shape.demangled()],
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, "
            "1ul>)");
  const KernelShape& plain_shape = shapes0[c0.kernels(1).shape()];
  EXPECT_EQ(plain_shape.demangled(), plain_shape.name());

  // Memcpy, memset.
  ASSERT_EQ(c0.memcpys_size(), 1);
  const Memcpy& mp = c0.memcpys(0);
  EXPECT_EQ(Starts(c0, c0.memcpys(), [](const Memcpy& r) { return r.start(); })[0], m.start);
  EXPECT_EQ(mp.duration(), 20000);
  EXPECT_EQ(mp.bytes(), 1ull << 33);
  EXPECT_EQ(mp.copy_kind(), COPY_PTOP);
  EXPECT_EQ(mp.src_kind(), MEMORY_DEVICE);
  EXPECT_EQ(mp.dst_kind(), MEMORY_PINNED);
  EXPECT_EQ(mp.stream(), 14u);
  EXPECT_EQ(mp.correlation(), 101);
  EXPECT_EQ(mp.context(), 3u);
  EXPECT_EQ(mp.device(), 1u);
  EXPECT_EQ(mp.flags(), uint32_t{RECORD_FLAG_ASYNC});
  EXPECT_EQ(mp.graph_id(), 5u);
  EXPECT_EQ(mp.graph_node_id(), 6u);
  EXPECT_TRUE(mp.peer());
  EXPECT_EQ(mp.src_device(), 1u);
  EXPECT_EQ(mp.dst_device(), 0u);
  EXPECT_EQ(mp.src_context(), 3u);
  EXPECT_EQ(mp.dst_context(), 4u);
  EXPECT_EQ(mp.copy_count(), 2u);
  EXPECT_EQ(mp.channel(), 8u);
  ASSERT_EQ(c0.memsets_size(), 1);
  const Memset& sp = c0.memsets(0);
  EXPECT_EQ(Starts(c0, c0.memsets(), [](const Memset& r) { return r.start(); })[0], ms.start);
  EXPECT_EQ(sp.duration(), 50);
  EXPECT_EQ(sp.bytes(), 4096u);
  EXPECT_EQ(sp.value(), 0xABu);
  EXPECT_EQ(sp.memory_kind(), MEMORY_MANAGED);
  EXPECT_EQ(sp.stream(), 7u);
  EXPECT_EQ(sp.correlation(), 102);
  EXPECT_EQ(sp.context(), 3u);
  EXPECT_EQ(sp.device(), 1u);
  EXPECT_EQ(sp.flags(), uint32_t{RECORD_FLAG_ASYNC});
  EXPECT_EQ(sp.graph_id(), 1u);
  EXPECT_EQ(sp.graph_node_id(), 2u);
  EXPECT_EQ(sp.channel(), 4u);

  // API calls.
  ASSERT_EQ(c0.api_calls_size(), 1);
  const ApiCall& ap = c0.api_calls(0);
  EXPECT_EQ(Starts(c0, c0.api_calls(), [](const ApiCall& r) { return r.start(); })[0], t0 + 1);
  EXPECT_EQ(ap.duration(), 8);
  EXPECT_EQ(s0[ap.name()], kApiName);
  EXPECT_EQ(ap.domain(), API_RUNTIME);
  EXPECT_EQ(ap.cbid(), 211u);
  EXPECT_EQ(ap.thread_id(), 777u);
  EXPECT_EQ(ap.correlation(), 100);
  EXPECT_EQ(ap.return_value(), -3);

  // NVTX.
  ASSERT_EQ(c0.nvtx_ranges_size(), 1);
  const NvtxRange& rp = c0.nvtx_ranges(0);
  EXPECT_EQ(Starts(c0, c0.nvtx_ranges(), [](const NvtxRange& r) { return r.start(); })[0], t0);
  EXPECT_EQ(rp.duration(), 5000);
  EXPECT_EQ(s0[rp.name()], "forward");
  EXPECT_EQ(s0[rp.domain()], "torch");
  EXPECT_EQ(rp.thread_id(), 777u);
  EXPECT_EQ(rp.end_thread_id(), 778u);
  EXPECT_EQ(rp.category(), 2u);
  EXPECT_EQ(rp.color(), 0xFF00FF00u);
  EXPECT_TRUE(rp.has_color());
  EXPECT_EQ(rp.payload().value_case(), NvtxPayload::kF64);
  EXPECT_EQ(rp.payload().f64(), 2.5);
  EXPECT_EQ(rp.flags(), uint32_t{RECORD_FLAG_OPEN});
  EXPECT_EQ(rp.id(), 99u);
  ASSERT_EQ(c0.nvtx_marks_size(), 1);
  const NvtxMark& kp_mark = c0.nvtx_marks(0);
  EXPECT_EQ(Starts(c0, c0.nvtx_marks(), [](const NvtxMark& r) { return r.time(); })[0], t0 + 42);
  EXPECT_EQ(s0[kp_mark.name()], "checkpoint");
  EXPECT_EQ(kp_mark.domain(), 0u);
  EXPECT_EQ(kp_mark.thread_id(), 777u);
  EXPECT_EQ(kp_mark.category(), 1u);
  EXPECT_EQ(kp_mark.color(), 0x12345678u);
  EXPECT_TRUE(kp_mark.has_color());
  EXPECT_EQ(kp_mark.payload().value_case(), NvtxPayload::kI32);
  EXPECT_EQ(kp_mark.payload().i32(), -7);

  // Sync, overhead, graph launch, metric range.
  ASSERT_EQ(c0.syncs_size(), 1);
  const Synchronization& yp = c0.syncs(0);
  EXPECT_EQ(Starts(c0, c0.syncs(), [](const Synchronization& r) { return r.start(); })[0], s.start);
  EXPECT_EQ(yp.duration(), 800);
  EXPECT_EQ(yp.type(), SYNC_STREAM_SYNCHRONIZE);
  EXPECT_EQ(yp.stream(), 7u);
  EXPECT_EQ(yp.context(), 3u);
  EXPECT_EQ(yp.correlation(), 130);
  EXPECT_EQ(yp.event_id(), 12u);
  EXPECT_EQ(yp.return_value(), 0);
  ASSERT_EQ(c0.overheads_size(), 1);
  const Overhead& op = c0.overheads(0);
  EXPECT_EQ(Starts(c0, c0.overheads(), [](const Overhead& r) { return r.start(); })[0], o.start);
  EXPECT_EQ(op.duration(), 1);
  EXPECT_EQ(op.kind(), 2u);
  EXPECT_EQ(s0[op.name()], "CUPTI_INSTRUMENTATION");
  EXPECT_EQ(op.thread_id(), 777u);
  EXPECT_EQ(op.device(), 1u);
  EXPECT_EQ(op.correlation(), 0);
  ASSERT_EQ(c0.graph_launches_size(), 1);
  const GraphLaunch& gp = c0.graph_launches(0);
  EXPECT_EQ(Starts(c0, c0.graph_launches(), [](const GraphLaunch& r) { return r.start(); })[0],
            g.start);
  EXPECT_EQ(gp.duration(), 500);
  EXPECT_EQ(gp.graph_id(), 5u);
  EXPECT_EQ(gp.device(), 1u);
  EXPECT_EQ(gp.context(), 3u);
  EXPECT_EQ(gp.stream(), 7u);
  EXPECT_EQ(gp.correlation(), 140);
  ASSERT_EQ(c0.metric_ranges_size(), 1);
  const MetricRange& mrp = c0.metric_ranges(0);
  EXPECT_EQ(mrp.config(), 1u);
  EXPECT_EQ(s0[mrp.name()], "forward");
  EXPECT_EQ(s0[mrp.domain()], "torch");
  EXPECT_EQ(mrp.occurrence(), 4u);
  EXPECT_EQ(mrp.occurrences_used(), 2u);
  EXPECT_EQ(Starts(c0, c0.metric_ranges(), [](const MetricRange& r) { return r.start(); })[0],
            mr.start);
  EXPECT_EQ(mrp.duration(), 3990);
  ASSERT_EQ(mrp.values_size(), 2);
  EXPECT_EQ(mrp.values(0), 1e9);
  EXPECT_EQ(mrp.values(1), 12345.5);
  EXPECT_EQ(mrp.thread_id(), 777u);
  EXPECT_EQ(mrp.device(), 1u);
  EXPECT_EQ(mrp.context(), 3u);
  EXPECT_EQ(mrp.correlation(), 555);  // absolute
  EXPECT_EQ(mrp.nesting_level(), 1u);
  EXPECT_EQ(mrp.sm_clock_khz(), 1755000u);

  // Chunk 1 redefines what it uses, with the same ids; deltas restart.
  ASSERT_EQ(c1.kernels_size(), 2);
  EXPECT_EQ(Starts(c1, c1.kernels(), [](const Kernel& k) { return k.start(); }),
            (std::vector<uint64_t>{t0 + 10000, t0 + 20000}));
  EXPECT_EQ(Correlations(c1.kernels(), [](const Kernel& k) { return k.correlation(); }),
            (std::vector<uint32_t>{200, 201}));
  EXPECT_EQ(c1.kernels(0).shape(), c0.kernels(0).shape());
  std::map<uint32_t, KernelShape> shapes1;
  for (const auto& sh : c1.kernel_shapes()) shapes1[sh.id()] = sh;
  EXPECT_EQ(shapes1.size(), 2u);  // only the shapes chunk 1 uses
  for (const auto& k : c1.kernels()) {
    ASSERT_EQ(shapes1.count(k.shape()), 1u);
    EXPECT_EQ(s1[shapes1[k.shape()].name()], kMangled);
    EXPECT_EQ(s1.count(shapes1[k.shape()].demangled()), 1u);
  }
  EXPECT_EQ(s1[c1.api_calls(0).name()], kApiName);
  EXPECT_EQ(c1.api_calls(0).name(), ap.name());
  EXPECT_EQ(c1.api_calls(0).correlation(), 200);
  EXPECT_EQ(s1[c1.nvtx_ranges(0).name()], "backward");
  EXPECT_NE(c1.nvtx_ranges(0).name(), rp.name());
  EXPECT_EQ(s1[c1.nvtx_ranges(0).domain()], "torch");
  EXPECT_EQ(c1.nvtx_ranges(0).domain(), rp.domain());
  EXPECT_EQ(s1.count(plain_shape.name()), 0u) << "chunk 1 must not define strings it does not use";

  // Stats: cumulative, "as of before this chunk".
  const Stats& st0 = c0.stats();
  const Stats& st1 = c1.stats();
  EXPECT_EQ(st0.chunks_written(), 0u);
  EXPECT_EQ(st0.bytes_written(), kFileMagicSize);
  EXPECT_EQ(st0.records_written(), 0u);
  EXPECT_EQ(st0.zero_timestamp_records(), 1u);
  EXPECT_EQ(st0.cupti_dropped_records(), 17u);
  EXPECT_EQ(st1.chunks_written(), 1u);
  EXPECT_EQ(st1.bytes_written(), f.offsets[1]);
  EXPECT_EQ(st1.records_written(), 13u);
  EXPECT_EQ(enc.stats().records_written, 17u);

  // Footer only in the last chunk.
  EXPECT_FALSE(c0.has_footer());
  ASSERT_TRUE(c1.has_footer());
  const Footer& ft = c1.footer();
  EXPECT_TRUE(ft.clean_end());
  EXPECT_EQ(ft.end_time_ns(), t0 + 99999);
  EXPECT_EQ(ft.end_reason(), "exit");
  EXPECT_EQ(ft.kernels(), 6u);
  EXPECT_EQ(ft.memcpys(), 1u);
  EXPECT_EQ(ft.memsets(), 1u);
  EXPECT_EQ(ft.api_calls(), 2u);
  EXPECT_EQ(ft.nvtx_ranges(), 2u);
  EXPECT_EQ(ft.nvtx_marks(), 1u);
  EXPECT_EQ(ft.syncs(), 1u);
  EXPECT_EQ(ft.overheads(), 1u);
  EXPECT_EQ(ft.metric_ranges(), 1u);
  EXPECT_EQ(ft.graph_launches(), 1u);
  EXPECT_EQ(ft.chunks(), 2u);

  // Each raw chunk in the sink is exactly what the frames hold.
  EXPECT_EQ(f.chunks[0].SerializeAsString().size(), f.chunks[0].ByteSizeLong());
  for (size_t i = 0; i < 2; ++i) {
    Chunk again;
    ASSERT_TRUE(again.ParseFromArray(sink.raw_chunks()[i].data(),
                                     static_cast<int>(sink.raw_chunks()[i].size())));
    EXPECT_EQ(again.sequence(), i);
  }
}

INSTANTIATE_TEST_SUITE_P(RawAndZstd, EncoderRoundTripTest, ::testing::Values(0, 3));

TEST(EncoderTest, EmptyFlushIsSkippedUnlessForced) {
  MemoryChunkSink sink;
  TraceEncoder enc(&sink, TraceEncoder::Options());
  enc.Flush();
  EXPECT_EQ(sink.raw_chunks().size(), 0u);
  enc.Flush(true);
  EXPECT_EQ(sink.raw_chunks().size(), 1u);
  enc.Flush();
  EXPECT_EQ(sink.raw_chunks().size(), 1u);
  enc.AddThreadName(1, "main");  // something new makes the next chunk due
  enc.Flush();
  EXPECT_EQ(sink.raw_chunks().size(), 2u);
  enc.Finish({1, "exit"});
  ParsedFile f = ParseFile(sink.file());
  ASSERT_EQ(f.chunks.size(), 3u);
  EXPECT_TRUE(f.chunks[2].has_footer());
  EXPECT_EQ(f.chunks[2].footer().chunks(), 3u);
  EXPECT_EQ(f.chunks[2].threads_size(), 1);
  enc.Flush(true);  // after Finish nothing more is written
  EXPECT_EQ(sink.raw_chunks().size(), 3u);
}

// Many records over many chunks: every chunk decodes on its own to the exact input.
TEST(EncoderTest, ManyChunksEachSelfContained) {
  MemoryChunkSink sink(1);
  TraceEncoder::Options options;
  options.chunk_target_bytes = 16 << 10;
  TraceEncoder enc(&sink, options);
  std::vector<std::string> names;
  for (int i = 0; i < 50; ++i) names.push_back("_Z6kernelILi" + std::to_string(i) + "EEvPf");
  const uint64_t t0 = 1'700'000'000'000'000'000ull;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    KernelRecord k;
    k.name = names[i % 50].c_str();
    k.start = t0 + uint64_t(i) * 1000 + (i % 7) * 13;
    k.end = k.start + 500 + i % 11;
    k.grid[0] = 1 + i % 3;
    k.stream = i % 4;
    k.correlation = static_cast<uint32_t>(i * 2 + (i % 5));
    enc.AddKernel(k);
    ApiRecord a;
    a.name = "cudaLaunchKernel";
    a.start = k.start - 100;
    a.end = k.start - 10;
    a.correlation = k.correlation;
    enc.AddApi(a);
    if (enc.FlushDue()) enc.Flush();
  }
  enc.Finish({t0 + n * 1000ull, "exit"});
  ParsedFile f = ParseFile(sink.file());
  ASSERT_GT(f.chunks.size(), 10u);
  int i = 0, j = 0;
  for (const Chunk& c : f.chunks) {
    auto strings = StringsOf(c);
    std::map<uint32_t, KernelShape> shapes;
    for (const auto& sh : c.kernel_shapes()) shapes[sh.id()] = sh;
    auto starts = Starts(c, c.kernels(), [](const Kernel& k) { return k.start(); });
    auto corr = Correlations(c.kernels(), [](const Kernel& k) { return k.correlation(); });
    for (int r = 0; r < c.kernels_size(); ++r, ++i) {
      const Kernel& k = c.kernels(r);
      ASSERT_EQ(starts[r], t0 + uint64_t(i) * 1000 + (i % 7) * 13);
      ASSERT_EQ(k.duration(), 500 + i % 11);
      ASSERT_EQ(corr[r], static_cast<uint32_t>(i * 2 + (i % 5)));
      ASSERT_EQ(k.stream(), uint32_t(i % 4));
      ASSERT_EQ(shapes.count(k.shape()), 1u);
      ASSERT_EQ(strings.count(shapes[k.shape()].name()), 1u);
      ASSERT_EQ(strings[shapes[k.shape()].name()], names[i % 50]);
      ASSERT_EQ(shapes[k.shape()].grid_x(), uint32_t(1 + i % 3));
    }
    for (const auto& a : c.api_calls()) {
      ASSERT_EQ(strings.count(a.name()), 1u);
      ++j;
    }
  }
  EXPECT_EQ(i, n);
  EXPECT_EQ(j, n);
  EXPECT_EQ(f.chunks.back().footer().kernels(), uint64_t(n));
  EXPECT_EQ(f.chunks.back().stats().records_written() + f.chunks.back().kernels_size() +
                f.chunks.back().api_calls_size(),
            2u * n);
}

// NVTX messages are arbitrary bytes; proto3 strings must be UTF-8 or libprotobuf rejects the whole
// chunk. Invalid sequences become U+FFFD, valid multi-byte text is kept, and two names that
// differ only in invalid bytes stay distinct ids.
TEST(EncoderTest, InvalidUtf8StringsAreRepairedSoTheChunkStillParses) {
  MemoryChunkSink sink;
  TraceEncoder enc(&sink, TraceEncoder::Options());
  NvtxMarkRecord bad;
  bad.name = "step \xff\xfe end";
  bad.time = 100;
  enc.AddNvtxMark(bad);
  NvtxMarkRecord other;
  other.name = "step \xfe\xff end";
  other.time = 200;
  enc.AddNvtxMark(other);
  NvtxMarkRecord good;
  good.name = "f\xc3\xa9tch \xe2\x9c\x93";  // "fétch ✓"
  good.time = 300;
  enc.AddNvtxMark(good);
  NvtxMarkRecord overlong;
  overlong.name =
      "a\xc0\xaf"
      "b\xed\xa0\x80"
      "c\xf4\x90\x80\x80";  // overlong, surrogate, > U+10FFFF
  overlong.time = 400;
  enc.AddNvtxMark(overlong);
  enc.Finish({500, "exit"});
  ParsedFile f = ParseFile(sink.file());
  ASSERT_EQ(f.chunks.size(), 1u);
  const Chunk& c = f.chunks[0];
  ASSERT_EQ(c.nvtx_marks_size(), 4);
  std::map<uint32_t, std::string> strings = StringsOf(c);
  EXPECT_EQ(strings[c.nvtx_marks(0).name()], "step \xef\xbf\xbd\xef\xbf\xbd end");
  EXPECT_NE(c.nvtx_marks(0).name(), c.nvtx_marks(1).name());
  EXPECT_EQ(strings[c.nvtx_marks(2).name()], "f\xc3\xa9tch \xe2\x9c\x93");
  const std::string r = strings[c.nvtx_marks(3).name()];
  EXPECT_EQ(r.find('\xc0'), std::string::npos);
  EXPECT_EQ(r.find('\xed'), std::string::npos);
  EXPECT_EQ(r.find('\xf4'), std::string::npos);
  EXPECT_EQ(r.front(), 'a');
  EXPECT_EQ(r.back(), '\xbd');
}

// On a full disk nothing counts as written: the exit line ("kp: wrote ... N records") reads
// records_written, which must not claim records that never reached the file.
TEST(EncoderTest, RecordsOnAFullDiskAreNotCountedAsWritten) {
  StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open("/dev/full", 0);
  const std::string err = opened.status().message();
  std::unique_ptr<FileChunkWriter> writer = std::move(opened).value_or(nullptr);
  ASSERT_NE(writer, nullptr) << err;
  TraceEncoder enc(writer.get(), TraceEncoder::Options());
  KernelRecord k;
  k.name = "k";
  for (uint64_t i = 1; i <= 100; ++i) {
    k.start = i * 10;
    k.end = i * 10 + 5;
    enc.AddKernel(k);
  }
  ::testing::internal::CaptureStderr();
  enc.Flush(true);
  enc.Finish({2000, "exit"});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("No space left on device"), std::string::npos) << said;
  EXPECT_EQ(enc.stats().records_written, 0u);
  EXPECT_GE(enc.stats().write_errors, 1u);
}

// Every string field the program or the system can feed (argv, host name, KP_* values, output
// path, kernel and device names, NVTX messages and domains, thread names, notices, metric names,
// the end reason) reaches disk as valid UTF-8: libprotobuf parses every chunk (it rejects a
// chunk with an invalid proto3 string), and each bad byte shows as U+FFFD.
TEST(EncoderTest, EveryStringFieldIsValidUtf8OnDisk) {
  const std::string bad = "caf\xe9-\xff";  // Latin-1 e-acute and a stray byte
  const std::string fixed = "caf\xef\xbf\xbd-\xef\xbf\xbd";
  MemoryChunkSink sink;
  TraceEncoder enc(&sink, TraceEncoder::Options());
  HeaderInfo h;
  h.kp_version = bad;
  h.hostname = bad;
  h.command_line = {"./app", bad, ""};
  h.clock = bad;
  h.config = {{"KP_OUTPUT", bad}, {bad, "x"}};
  h.driver_version = bad;
  h.injection_mode = bad;
  h.output_path = bad;
  enc.SetHeader(h);
  DeviceInfo d;
  d.name = bad;
  d.pci_bus_id = bad;
  enc.AddDevice(d);
  enc.AddThreadName(7, bad);
  MetricConfigInfo mc;
  mc.metric_names = {bad};
  mc.mode = bad;
  mc.chip = bad;
  enc.AddMetricConfig(mc);
  enc.AddNotice(NOTICE_WARNING, bad, bad, 1);
  KernelRecord k;
  k.name = bad.c_str();
  k.start = 10;
  k.end = 20;
  enc.AddKernel(k);
  NvtxRangeRecord r;
  r.name = bad.c_str();
  r.domain = "dom\xe9";
  r.start = 10;
  r.end = 30;
  enc.AddNvtxRange(r);
  enc.Finish({40, bad});
  ParsedFile f = ParseFile(sink.file());
  ASSERT_EQ(f.chunks.size(), 1u) << "a chunk failed libprotobuf's parse (invalid UTF-8?)";
  const Chunk& c = f.chunks[0];
  const Header& hd = c.header();
  for (const std::string* v :
       {&hd.kp_version(), &hd.hostname(), &hd.clock(), &hd.driver_version(), &hd.injection_mode(),
        &hd.output_path(), &hd.command_line(1), &hd.config(0).value(), &hd.config(1).key(),
        &c.devices(0).name(), &c.devices(0).pci_bus_id(), &c.threads(0).name(),
        &c.metric_configs(0).metric_names(0), &c.metric_configs(0).mode(),
        &c.metric_configs(0).chip(), &c.notices(0).component(), &c.notices(0).message(),
        &c.footer().end_reason()}) {
    EXPECT_EQ(*v, fixed);
  }
  EXPECT_EQ(hd.command_line_size(), 3);
  EXPECT_EQ(hd.command_line(2), "");
  std::map<uint32_t, std::string> strings = StringsOf(c);
  ASSERT_EQ(c.kernel_shapes_size(), 1);
  EXPECT_EQ(strings[c.kernel_shapes(0).name()], fixed);
  EXPECT_EQ(strings[c.nvtx_ranges(0).name()], fixed);
  EXPECT_EQ(strings[c.nvtx_ranges(0).domain()], "dom\xef\xbf\xbd");
}

// A run with ever-new NVTX messages ("step 1234") must not grow the injector's intern tables
// without bound; after the tables restart, ids are never reused for another string, and every
// chunk still decodes on its own.
TEST(EncoderTest, InternTablesStayBoundedAndIdsAreNeverReused) {
  MemoryChunkSink sink(1);
  TraceEncoder enc(&sink, TraceEncoder::Options());
  const int n = 300000;
  size_t max_interned = 0;
  for (int i = 0; i < n; ++i) {
    const std::string name = "step " + std::to_string(i);
    NvtxMarkRecord m;
    m.name = name.c_str();
    m.time = 1000 + static_cast<uint64_t>(i);
    enc.AddNvtxMark(m);
    KernelRecord k = MakeKernel("_Z6kernelv", 1000 + static_cast<uint64_t>(i), i, 1);
    enc.AddKernel(k);
    if (i % 20000 == 19999) {
      enc.Flush();
      max_interned = std::max(max_interned, enc.interned_strings());
    }
  }
  enc.Finish({1, "exit"});
  EXPECT_LE(max_interned, (1u << 17) + 20000u + 2u);
  ParsedFile f = ParseFile(sink.file());
  std::map<uint32_t, std::string> id_to_value;
  int marks = 0;
  for (const Chunk& c : f.chunks) {
    std::map<uint32_t, std::string> strings = StringsOf(c);
    for (const auto& [id, value] : strings) {
      auto [it, inserted] = id_to_value.emplace(id, value);
      EXPECT_TRUE(inserted || it->second == value) << "id " << id << " reused";
    }
    for (const NvtxMark& m : c.nvtx_marks()) {
      ASSERT_TRUE(strings.count(m.name())) << "chunk " << c.sequence();
      EXPECT_EQ(strings[m.name()], "step " + std::to_string(marks));
      ++marks;
    }
    for (const KernelShape& sh : c.kernel_shapes()) {
      ASSERT_TRUE(strings.count(sh.name()));
      EXPECT_EQ(strings[sh.name()], "_Z6kernelv");
    }
  }
  EXPECT_EQ(marks, n);
}

}  // namespace
}  // namespace kp
