// The GPU checker, tested on traces written by the injector's own encoder (TraceEncoder) and read
// back by the real reader: every check must pass on a trace that holds what the expectations
// say, and each must fail on a trace broken in the way it guards against.
#include "tests/gpu/trace_expect.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"

namespace kp::gputest {
namespace {

constexpr uint64_t kT0 = 1'700'000'000'000'000'000ull;
constexpr const char* kScaleName = "_Z12scale_kernelIfLi4EEvPT_i";  // scale_kernel<float, 4>
constexpr const char* kAxpyName = "_Z11axpy_kernelfPKfPfi";
constexpr uint32_t kThread = 4242;

// What the test trace holds; each test breaks one thing.
struct TraceSpec {
  int kernels_per_stream = 10;
  bool link_all = true;
  bool overlap = false;
  std::string overlap_launch_api = "cudaLaunchKernel_v7000";  // the overlapping kernel's launch
  uint64_t overlapped_ns = 1000;  // how long the kernel the overlap starts in runs
  uint64_t dropped = 0;
  bool finish = true;
  bool graph = false;
  size_t cut_tail_bytes = 0;
  uint64_t nvtx_unmatched_ends = 0;
  bool bare_header = false;  // no driver or CUDA version
};

class TraceExpectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "trace_expect_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".kptrace";
  }
  void TearDown() override { std::remove(path_.c_str()); }

  void WriteTrace(const TraceSpec& spec) {
    MemoryChunkSink sink(/*zstd_level=*/0);
    {
      TraceEncoder enc(&sink, TraceEncoder::Options{});
      HeaderInfo h;
      h.kp_version = "test";
      h.pid = 1;
      h.hostname = "testhost";
      h.command_line = {"./multistream"};
      if (!spec.bare_header) {
        h.cuda_driver_version = 13000;
        h.driver_version = "580.159.04";
      }
      h.start_time_unix_ns = kT0;
      h.start_time_trace_ns = kT0;
      enc.SetHeader(h);
      DeviceInfo d;
      d.id = 0;
      d.name = "NVIDIA H200";
      for (int i = 0; i < 16; ++i) d.uuid[i] = static_cast<uint8_t>(0xa0 + i);
      d.cc_major = 9;
      d.cc_minor = 0;
      d.sm_count = 132;
      enc.AddDevice(d);
      enc.AddThreadName(kThread, "worker-a");

      uint32_t correlation = 100;
      uint64_t t = kT0 + 1000;
      // NVTX: outer > middle (domain, color, payload) > inner, the kernels launched inside inner.
      NvtxRangeRecord outer, middle, inner;
      outer.name = "outer";
      outer.start = t;
      middle.name = "middle";
      middle.domain = "kp.test";
      middle.has_color = true;
      middle.color = 0xFF00FF00u;
      middle.category = 3;
      middle.payload.kind = NvtxPayloadValue::kI64;
      middle.payload.i64 = -42;
      middle.start = t + 10;
      inner.name = "inner";
      inner.start = t + 20;
      outer.thread_id = middle.thread_id = inner.thread_id = kThread;

      for (uint32_t stream : {7u, 13u}) {
        uint64_t gpu = t + 100'000 + stream;
        for (int i = 0; i < spec.kernels_per_stream; ++i) {
          ApiRecord api;
          api.name =
              (spec.overlap && i == 6) ? spec.overlap_launch_api.c_str() : "cudaLaunchKernel_v7000";
          api.domain = 1;
          api.thread_id = kThread;
          api.start = t + 30 + i * 10 + stream;
          api.end = api.start + 5;
          api.correlation = ++correlation;
          bool linked = spec.link_all || i != 3;
          if (linked) enc.AddApi(api);

          KernelRecord k;
          k.name = i % 2 ? kScaleName : kAxpyName;
          k.grid[0] = i % 2 ? 32 : 64;
          k.grid[1] = k.grid[2] = 1;
          k.block[0] = 256;
          k.block[1] = k.block[2] = 1;
          k.stream = stream;
          k.correlation = api.correlation;
          k.start = gpu;
          k.end = gpu + ((spec.overlap && i == 5) ? spec.overlapped_ns : 1000);
          gpu = (spec.overlap && i == 5) ? gpu + 500 : gpu + 2000;
          if (spec.graph && stream == 13u) {
            k.graph_id = 9;
            k.graph_node_id = 1000 + i % 5;  // 5 nodes, launched as i / 5
            k.correlation = 1000 + i / 5;
            if (i % 5 == 0) {
              ApiRecord launch = api;
              launch.name = "cudaGraphLaunch_v10000";
              launch.correlation = k.correlation;
              enc.AddApi(launch);
            }
          }
          enc.AddKernel(k);
        }
      }
      inner.end = t + 30 + 10 * spec.kernels_per_stream + 20;
      middle.end = inner.end + 10;
      outer.end = middle.end + 10;
      enc.AddNvtxRange(inner);
      enc.AddNvtxRange(middle);
      enc.AddNvtxRange(outer);
      NvtxMarkRecord mark;
      mark.name = "mark-a";
      mark.time = t + 25;
      mark.thread_id = kThread;
      enc.AddNvtxMark(mark);

      MemcpyRecord copy;
      copy.copy_kind = 1;  // HTOD
      copy.src_kind = 2;   // PINNED
      copy.dst_kind = 3;
      copy.flags = 4;  // ASYNC
      copy.bytes = 3 << 20;
      copy.stream = 7;
      copy.start = t + 900'000;
      copy.end = copy.start + 100;
      copy.correlation = ++correlation;
      ApiRecord copy_api;
      copy_api.name = "cudaMemcpyAsync_v3020";
      copy_api.thread_id = kThread;
      copy_api.start = t + 50;
      copy_api.end = t + 60;
      copy_api.correlation = copy.correlation;
      enc.AddApi(copy_api);
      enc.AddMemcpy(copy);

      // A peer copy from device 0 to device 1 (stream 7, after the HTOD copy).
      MemcpyRecord peer;
      peer.copy_kind = 10;  // PTOP
      peer.src_kind = peer.dst_kind = 3;
      peer.bytes = 1 << 20;
      peer.stream = 7;
      peer.start = copy.end + 100;
      peer.end = peer.start + 200;
      peer.correlation = ++correlation;
      peer.peer = true;
      peer.src_device = 0;
      peer.dst_device = 1;
      ApiRecord peer_api = copy_api;
      peer_api.name = "cudaMemcpyPeerAsync_v4000";
      peer_api.start = t + 70;
      peer_api.end = t + 80;
      peer_api.correlation = peer.correlation;
      enc.AddApi(peer_api);
      enc.AddMemcpy(peer);

      enc.stats().cupti_dropped_records = spec.dropped;
      enc.stats().nvtx_unmatched_ends = spec.nvtx_unmatched_ends;
      enc.Flush(true);
      if (spec.finish) {
        FooterInfo f;
        f.end_time_ns = t + 10'000'000;
        f.end_reason = "exit";
        enc.Finish(f);
      } else {
        enc.Flush(true);
      }
    }
    std::vector<uint8_t> bytes = sink.file();
    ASSERT_GT(bytes.size(), spec.cut_tail_bytes);
    bytes.resize(bytes.size() - spec.cut_tail_bytes);
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }

  std::vector<CheckResult> Check(const std::string& expect_text) {
    std::istringstream in(expect_text);
    std::vector<std::string> errors;
    auto expectations = ParseExpectations(in, &errors);
    EXPECT_TRUE(errors.empty()) << errors.front();
    TraceFacts facts;
    const Status loaded = LoadTraceFacts(path_, &facts);
    EXPECT_TRUE(loaded.ok()) << loaded.message();
    return CheckTrace(facts, expectations);
  }

  // The stream_order result for a trace written from `spec` (20 kernels expected).
  CheckResult StreamOrder(const TraceSpec& spec) {
    WriteTrace(spec);
    auto results = Check("expect kernels=20\n");
    const CheckResult* order = Find(results, "stream_order");
    EXPECT_NE(order, nullptr);
    return order != nullptr ? *order : CheckResult{false, "stream_order", "no such check"};
  }

  static const CheckResult* Find(const std::vector<CheckResult>& results, const std::string& name) {
    for (const auto& r : results)
      if (r.name == name) return &r;
    return nullptr;
  }

  static std::string Dump(const std::vector<CheckResult>& results) {
    std::string s;
    for (const auto& r : results)
      s += (r.pass ? "PASS " : "FAIL ") + r.name + ": " + r.detail + "\n";
    return s;
  }

  std::string path_;
};

constexpr const char* kGoodExpectations = R"(info this line is ignored
expect device_name[a0a1a2a3a4a5a6a7a8a9aaabacadaeaf]=NVIDIA H200
expect device_cc[a0a1a2a3a4a5a6a7a8a9aaabacadaeaf]=9.0
expect device_sm_count[a0a1a2a3a4a5a6a7a8a9aaabacadaeaf]=132
expect kernels=20
expect kernels_min=20
expect kernels_max=20
expect kernel_count[scale_kernel<float, 4>]=10
expect kernel_count[axpy_kernel]=10
expect kernel_grid[scale_kernel<float, 4>]=32,1,1
expect kernel_grid[axpy_kernel]=64,1,1
expect kernel_block[axpy_kernel]=256,1,1
expect kernel_streams=2
expect api_count[cudaLaunchKernel_v7000]=20
expect memcpys=2
expect memcpy_count[PTOP]=1
expect peer_copy_count[0>1]=1
expect peer_copy_count[1>0]=0
expect kernel_device_count[0]=20
expect kernel_device_count[1]=0
expect memcpy_count[HTOD]=1
expect memcpy_count[HTOD:PINNED:async]=1
expect memcpy_count[HTOD:PAGEABLE]=0
expect memcpy_bytes[HTOD]=3145728
expect memsets=0
expect nvtx_ranges=3
expect nvtx_range_count[inner]=1
expect nvtx_range_depth[outer]=1
expect nvtx_range_depth[middle]=2
expect nvtx_range_depth[inner]=3
expect nvtx_range_thread[middle]=4242
expect nvtx_range_threads[inner]=1
expect nvtx_range_domain[middle]=kp.test
expect nvtx_range_domain[outer]=
expect nvtx_range_color[middle]=0xff00ff00
expect nvtx_range_category[middle]=3
expect nvtx_range_payload[middle]=i64:-42
expect nvtx_kernels_inside[inner]=20
expect nvtx_kernels_during[outer]=20
expect nvtx_marks=1
expect nvtx_mark_count[mark-a]=1
expect nvtx_mark_thread[mark-a]=4242
expect nvtx_domain_count[kp.test]=1
expect thread_name[worker-a]=4242
)";

TEST_F(TraceExpectTest, GoodTracePassesEveryCheck) {
  WriteTrace(TraceSpec{});
  auto results = Check(kGoodExpectations);
  for (const auto& r : results) EXPECT_TRUE(r.pass) << r.name << ": " << r.detail;
  for (const char* always : {"readable", "header", "clean_end", "footer_totals", "nothing_dropped",
                             "devices", "linked", "stream_order", "nvtx_sane"}) {
    EXPECT_NE(Find(results, always), nullptr) << always << " missing from\n" << Dump(results);
  }
}

TEST_F(TraceExpectTest, WrongCountsFailWithTheNumbers) {
  WriteTrace(TraceSpec{});
  auto results = Check(
      "expect kernels=21\nexpect kernel_count[scale_kernel<float, 4>]=9\n"
      "expect kernels_min=30\nexpect nvtx_range_depth[inner]=2\n"
      "expect memcpy_bytes[HTOD]=1\nexpect device_name[ffff]=NVIDIA H200\n");
  const CheckResult* k = Find(results, "kernels");
  ASSERT_NE(k, nullptr);
  EXPECT_FALSE(k->pass);
  EXPECT_EQ(k->detail, "expected 21, got 20");
  EXPECT_FALSE(Find(results, "kernel_count[scale_kernel<float, 4>]")->pass);
  EXPECT_FALSE(Find(results, "kernels_min")->pass);
  EXPECT_FALSE(Find(results, "nvtx_range_depth[inner]")->pass);
  EXPECT_FALSE(Find(results, "memcpy_bytes[HTOD]")->pass);
  EXPECT_EQ(Find(results, "device_name[ffff]")->detail, "expected NVIDIA H200, got none");
  EXPECT_TRUE(Find(results, "linked")->pass);
}

TEST_F(TraceExpectTest, UnlinkedKernelFailsLinkCheck) {
  TraceSpec spec;
  spec.link_all = false;
  WriteTrace(spec);
  auto results = Check("expect kernels=20\n");
  const CheckResult* linked = Find(results, "linked");
  ASSERT_NE(linked, nullptr);
  EXPECT_FALSE(linked->pass) << linked->detail;
  // 22 GPU records (20 kernels, the HTOD and the peer copy); kernel 3 of each stream unlinked.
  EXPECT_NE(linked->detail.find("20/22"), std::string::npos) << linked->detail;
}

TEST_F(TraceExpectTest, OverlapOnAStreamFailsOrderCheck) {
  TraceSpec spec;
  spec.overlap = true;
  const CheckResult order = StreamOrder(spec);
  EXPECT_FALSE(order.pass);
  EXPECT_NE(order.detail.find("2 overlaps"), std::string::npos) << order.detail;
}

TEST_F(TraceExpectTest, OverlapOfAKernelLaunchedWithConfigPassesOrderCheck) {
  TraceSpec spec;
  spec.overlap = true;
  spec.overlap_launch_api = "cuLaunchKernelEx";
  const CheckResult order = StreamOrder(spec);
  EXPECT_TRUE(order.pass) << order.detail;
  EXPECT_NE(order.detail.find("0 overlaps"), std::string::npos) << order.detail;
  EXPECT_NE(order.detail.find("2 kernels launched by a cu/cudaLaunchKernelEx call"),
            std::string::npos)
      << order.detail;
}

TEST_F(TraceExpectTest, AnAcceptedEarlyStartHidesNoOtherOverlap) {
  // Kernel 5 runs 5 us: kernel 6 (cuLaunchKernelEx) starts 0.5 us into it, kernels 7 and 8
  // (cudaLaunchKernel) 2.5 and 4.5 us into it, after kernel 6 has ended.
  TraceSpec spec;
  spec.overlap = true;
  spec.overlap_launch_api = "cuLaunchKernelEx";
  spec.overlapped_ns = 5000;
  const CheckResult order = StreamOrder(spec);
  EXPECT_FALSE(order.pass) << order.detail;
  EXPECT_NE(order.detail.find("4 overlaps (worst 2500 ns)"), std::string::npos) << order.detail;
  EXPECT_NE(order.detail.find("2 kernels launched by a cu/cudaLaunchKernelEx call"),
            std::string::npos)
      << order.detail;
}

TEST_F(TraceExpectTest, DroppedRecordsFail) {
  TraceSpec spec;
  spec.dropped = 5;
  WriteTrace(spec);
  auto results = Check("expect kernels=20\n");
  EXPECT_FALSE(Find(results, "nothing_dropped")->pass);
}

TEST_F(TraceExpectTest, UnmatchedNvtxEndFailsNvtxCheck) {
  TraceSpec spec;
  spec.nvtx_unmatched_ends = 1;
  WriteTrace(spec);
  auto results = Check("expect nvtx_ranges=3\n");
  const CheckResult* nvtx = Find(results, "nvtx_sane");
  ASSERT_NE(nvtx, nullptr);
  EXPECT_FALSE(nvtx->pass);
  EXPECT_NE(nvtx->detail.find("1 ends without a start"), std::string::npos) << nvtx->detail;
}

TEST_F(TraceExpectTest, HeaderWithoutVersionsFails) {
  TraceSpec spec;
  spec.bare_header = true;
  WriteTrace(spec);
  auto results = Check("expect kernels=20\n");
  const CheckResult* header = Find(results, "header");
  ASSERT_NE(header, nullptr);
  EXPECT_FALSE(header->pass);
  EXPECT_EQ(header->detail, "missing or zero: cuda_driver_version, driver_version");
}

TEST_F(TraceExpectTest, MissingFooterFailsUnlessKilledRunExpected) {
  TraceSpec spec;
  spec.finish = false;
  WriteTrace(spec);
  auto clean = Check("expect kernels=20\n");
  EXPECT_FALSE(Find(clean, "clean_end")->pass);
  auto killed = Check("expect clean_end=0\nexpect chunks_min=1\nexpect kernels_min=20\n");
  EXPECT_EQ(Find(killed, "clean_end"), nullptr);
  ASSERT_NE(Find(killed, "killed_end"), nullptr);
  EXPECT_TRUE(Find(killed, "killed_end")->pass) << Dump(killed);
  auto too_few = Check("expect clean_end=0\nexpect chunks_min=50\n");
  EXPECT_FALSE(Find(too_few, "killed_end")->pass);
}

TEST_F(TraceExpectTest, TornTailFailsACleanRunButNotAKilledOne) {
  TraceSpec spec;
  spec.finish = false;
  spec.cut_tail_bytes = 7;
  WriteTrace(spec);
  auto clean = Check("expect kernels_min=0\n");
  EXPECT_FALSE(Find(clean, "readable")->pass) << Dump(clean);
  auto killed = Check("expect clean_end=0\nexpect kernels_min=0\n");
  EXPECT_TRUE(Find(killed, "readable")->pass) << Dump(killed);
}

TEST_F(TraceExpectTest, GraphLaunchesGroupByCorrelation) {
  TraceSpec spec;
  spec.graph = true;
  WriteTrace(spec);
  auto results = Check(
      "expect graph_launches=2\nexpect graph_records_per_launch=5\nexpect graph_nodes=5\n"
      "expect kernel_graph_count[axpy_kernel]=5\nexpect api_count[cudaGraphLaunch]=2\n");
  for (const auto& r : results) EXPECT_TRUE(r.pass) << r.name << ": " << r.detail;
}

TEST_F(TraceExpectTest, UnknownKeyAndNoExpectationsFail) {
  WriteTrace(TraceSpec{});
  auto results = Check("expect kernal_count[axpy]=1\n");
  EXPECT_FALSE(Find(results, "kernal_count[axpy]")->pass);
  auto none = Check("info nothing\n");
  ASSERT_NE(Find(none, "expectations"), nullptr);
  EXPECT_FALSE(Find(none, "expectations")->pass);
}

TEST(ParseExpectationsTest, KeysArgsAndErrors) {
  std::istringstream in(
      "expect kernel_count[void scale_kernel<float, 4>(float*, int)]=3\n"
      "  expect nvtx_range_domain[outer]=\n"
      "info not an expectation=1\n"
      "expect broken[no close=1\n"
      "expect novalue\n"
      "expect kernels=4000\n");
  std::vector<std::string> errors;
  auto e = ParseExpectations(in, &errors);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].key, "kernel_count");
  EXPECT_EQ(e[0].arg, "void scale_kernel<float, 4>(float*, int)");
  EXPECT_EQ(e[0].value, "3");
  EXPECT_EQ(e[1].key, "nvtx_range_domain");
  EXPECT_EQ(e[1].value, "");
  EXPECT_EQ(e[2].key, "kernels");
  EXPECT_EQ(e[2].line, 6);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("line 4"), std::string::npos);
  EXPECT_NE(errors[1].find("line 5"), std::string::npos);
}

}  // namespace
}  // namespace kp::gputest
