// Chrome JSON exporter tests: output parsed by a real JSON parser (nlohmann-json), checked for
// counts per kind, flows, nesting per tid and relative times; the JSON writer's escaping; a golden
// diff; and the cross-format check (trace == Perfetto == Chrome JSON).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "perfetto_trace_subset.pb.h"
#include "tests/unit/scratch_dir.h"
#include "tests/unit/status_assertions.h"
#include "tools/export/chrome_exporter.h"
#include "tools/export/perfetto_exporter.h"
#include "tools/export/record_args.h"
#include "tools/kptrace/commands.h"
#include "tools/reader/proto_trace_writer.h"

namespace kp_export_test {
// Defined in perfetto_test.cc (same test executable).
struct FixedTraceCounts {
  int kernels = 0, memcpys = 0, memsets = 0, api = 0, nvtx = 0, marks = 0, metric_ranges = 0;
  int internal_kernels = 0;
  uint64_t start_ns = 0;
  std::vector<uint64_t> kernel_starts;
};
struct PerfettoCounts {
  int kernels = 0, memcpys = 0, memsets = 0, api = 0, nvtx = 0, marks = 0, counters = 0;
  int metric_slices = 0;
  int syncs = 0, overheads = 0;
};
FixedTraceCounts WriteFixedTrace(const std::string& path, uint32_t pid);
kp::Status ExportFiles(kp::Exporter& exporter, const std::vector<std::string>& paths);
std::string ReadFile(const std::string& path);
void ExpectGolden(const std::string& name, const std::string& actual);
PerfettoCounts DecodeAndCheckPerfetto(const std::string& bytes,
                                      std::vector<uint64_t>* kernel_begin_ts,
                                      std::vector<std::string>* names, bool launch_calls_present,
                                      const std::multiset<uint64_t>* ends_without_start = nullptr);
}  // namespace kp_export_test

namespace {

using namespace kp_export_test;
using nlohmann::json;

std::string WriteJson(void (*body)(kp::JsonWriter&)) {
  kp::JsonWriter w(nullptr);
  body(w);
  return w.buffer();
}

TEST(JsonWriter, EscapesEverythingAParserNeeds) {
  std::string s = WriteJson([](kp::JsonWriter& w) {
    w.BeginObject();
    w.Key("a\"b");
    w.String(std::string("q\"\\\n\t\x01\x1f end"));
    w.Key("bad utf8");
    w.String("x\xff\xc3(y\xe2\x82\xac");  // invalid, invalid pair, then a valid euro sign
    w.Key("arr");
    w.BeginArray();
    w.UInt(18446744073709551615ull);
    w.Int(-5);
    w.Double(0.1);
    w.Double(0.0 / 0.0);
    w.MicrosFromNs(1234567);
    w.MicrosFromNs(-1500);
    w.EndArray();
    w.EndObject();
  });
  json j = json::parse(s);  // throws (fails the test) on invalid JSON
  EXPECT_EQ(j["a\"b"], std::string("q\"\\\n\t\x01\x1f end"));
  EXPECT_EQ(j["bad utf8"], "x\xEF\xBF\xBD\xEF\xBF\xBD(y\xe2\x82\xac");
  EXPECT_EQ(j["arr"][0].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["arr"][1], -5);
  EXPECT_EQ(j["arr"][2], 0.1);
  EXPECT_TRUE(j["arr"][3].is_null());
  EXPECT_NE(s.find("1234.567"), std::string::npos);
  EXPECT_NE(s.find("-1.500"), std::string::npos);
}

// The one-step members write the same bytes as the calls they stand for, first in an object or
// after another member, with negative and long values.
TEST(JsonWriter, CombinedMembersEqualTheirParts) {
  for (bool first : {true, false}) {
    for (int64_t ns : {int64_t{0}, int64_t{-1500}, int64_t{1234567}, INT64_MAX, INT64_MIN}) {
      for (uint64_t v : {uint64_t{0}, uint64_t{7}, uint64_t{4503599627370495}, UINT64_MAX}) {
        kp::JsonWriter parts(nullptr), combined(nullptr);
        for (kp::JsonWriter* w : {&parts, &combined}) {
          w->BeginObject();
          if (!first) w->UIntMember("before", 1);
        }
        parts.MicrosMember("ts", ns);
        parts.MicrosMember("dur", -ns / 3);
        parts.UIntMember("bind_id", v);
        parts.PlainMembers(R"("flow_in":true)");
        combined.MicrosMembers("ts", ns, "dur", -ns / 3);
        combined.UIntMemberThen("bind_id", v, R"("flow_in":true)");
        parts.EndObject();
        combined.EndObject();
        EXPECT_EQ(combined.buffer(), parts.buffer());
        EXPECT_TRUE(json::accept(combined.buffer())) << combined.buffer();
      }
    }
  }
}

// An empty string_view may carry a null pointer (a name id the trace never defined); writing it
// must not hand that pointer to memcpy (UBSan flags it; found by the fuzzer).
TEST(JsonWriter, EmptyNullStringsAndKeys) {
  std::string s = WriteJson([](kp::JsonWriter& w) {
    w.BeginObject();
    w.KeyPlain(std::string_view());
    w.PlainString(std::string_view());
    w.Key("k");
    w.String(std::string_view());
    w.EndObject();
  });
  json j = json::parse(s);
  EXPECT_EQ(j[""], "");
  EXPECT_EQ(j["k"], "");
}

struct ChromeCounts {
  std::map<std::string, int> x_by_cat;
  int marks = 0, counters = 0, flow_out = 0, flow_in = 0;
};

ChromeCounts CheckChrome(const json& j, uint64_t start_ns) {
  ChromeCounts c;
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  EXPECT_TRUE(j["kp"]["files"].is_array());
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> per_tid;
  std::map<uint64_t, double> out_ts;                // arrow id -> launch call start
  std::vector<std::pair<uint64_t, double>> in_ids;  // arrow id, GPU record start
  double min_ts = 1e300;
  for (const json& e : j["traceEvents"]) {
    std::string ph = e["ph"];
    EXPECT_TRUE(e["pid"].is_number_integer());
    if (e.contains("tid")) {
      EXPECT_TRUE(e["tid"].is_number_integer());
    }
    if (ph == "M") continue;
    double ts = e["ts"];
    min_ts = std::min(min_ts, ts);
    if (ph == "X") {
      const std::string cat = e["cat"];
      ++c.x_by_cat[cat];
      per_tid[{e["pid"], e["tid"]}].push_back({ts, ts + e["dur"].get<double>()});
      // Launch arrows are flow events v2: a "bind_id" with "flow_out" on the call, "flow_in" on
      // each GPU record it started.
      if (e.contains("bind_id")) {
        const bool out = e.value("flow_out", false), in = e.value("flow_in", false);
        EXPECT_NE(out, in) << "a bound slice is one arrow end";
        EXPECT_EQ(e["bind_id"].get<uint64_t>() & 0xffffffffu, e["args"]["correlation"])
            << "an arrow joins the slices of one correlation id";
        if (out) {
          ++c.flow_out;
          EXPECT_TRUE(cat == "cuda_runtime" || cat == "cuda_driver") << cat;
          EXPECT_TRUE(out_ts.emplace(e["bind_id"], ts).second) << "one launch call per arrow id";
        } else {
          ++c.flow_in;
          EXPECT_TRUE(cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") << cat;
          in_ids.push_back({e["bind_id"], ts});
        }
      } else {
        EXPECT_FALSE(e.contains("flow_out") || e.contains("flow_in"));
      }
    } else if (ph == "i") {
      ++c.marks;
    } else if (ph == "C") {
      ++c.counters;
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;  // launch arrows are no "s"/"f" events
    }
  }
  std::set<uint64_t> ended;
  for (const auto& [id, ts] : in_ids) {
    auto start = out_ts.find(id);
    if (start == out_ts.end()) {
      ADD_FAILURE() << "arrow " << id << " ends on a GPU record without its call";
      continue;
    }
    EXPECT_LE(start->second, ts) << "the call starts before its GPU work";
    ended.insert(id);
  }
  EXPECT_EQ(ended.size(), out_ts.size()) << "every arrow from a call reaches a GPU record";
  EXPECT_GE(min_ts, 0.0) << "times relative to the trace start";
  // No partial overlaps on one tid (ns-exact: compare in integer ns).
  for (auto& [key, v] : per_tid) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<int64_t> open;
    for (const auto& [s, e] : v) {
      int64_t s_ns = std::llround(s * 1000), e_ns = std::llround(e * 1000);
      while (!open.empty() && open.back() <= s_ns) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e_ns, open.back())
            << "partial overlap on pid " << key.first << " tid " << key.second;
      }
      open.push_back(e_ns);
    }
  }
  (void)start_ns;
  return c;
}

TEST(ChromeExporter, ParsesAndHoldsEveryRecord) {
  FixedTraceCounts want = WriteFixedTrace("chrome_input.kptrace", 4242);
  kp::ExportOptions opt;
  opt.output = "chrome_output.json";
  kp::ChromeExporter exporter(opt);
  std::string err;
  ASSERT_TRUE(IsOk(ExportFiles(exporter, {"chrome_input.kptrace"})));
  json j = json::parse(ReadFile(opt.output));
  ChromeCounts c = CheckChrome(j, want.start_ns);
  EXPECT_EQ(c.x_by_cat["kernel"], want.kernels);
  EXPECT_EQ(c.x_by_cat["gpu_memcpy"], want.memcpys);
  EXPECT_EQ(c.x_by_cat["gpu_memset"], want.memsets);
  EXPECT_EQ(c.x_by_cat["cuda_runtime"] + c.x_by_cat["cuda_driver"], want.api);
  EXPECT_EQ(c.x_by_cat["nvtx"], want.nvtx);
  EXPECT_EQ(c.x_by_cat["kp_metrics"], want.metric_ranges);
  EXPECT_EQ(c.marks, want.marks);
  EXPECT_EQ(c.counters, want.metric_ranges * 2);
  EXPECT_EQ(c.flow_in, want.kernels + want.memcpys + want.memsets);
  EXPECT_EQ(c.flow_out, want.kernels + want.memcpys + want.memsets) << "one launch per GPU record";
  // Times: the first kernel starts 2 µs after the header's start (fixed trace: T0 + 2000 ns).
  double first_kernel = 1e300;
  std::set<std::string> process_names, thread_names;
  bool odd_name_found = false;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "kernel") {
      first_kernel = std::min(first_kernel, e["ts"].get<double>());
      if (e["args"]["mangled name"] == "void odd<int, \"q\\\">(float*)\x01\t end") {
        odd_name_found = true;
      }
    }
    if (e["ph"] == "M" && e["name"] == "process_name") process_names.insert(e["args"]["name"]);
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"]);
  }
  EXPECT_DOUBLE_EQ(first_kernel, 2.0);
  EXPECT_TRUE(odd_name_found) << "name with quotes, backslash and control characters round-trips";
  // One process group per process: its GPU streams are threads of it.
  EXPECT_EQ(process_names, std::set<std::string>{"pid 4242 (host node1)"});
  EXPECT_TRUE(thread_names.count("GPU 0 (NVIDIA H200) stream 7"));
  EXPECT_TRUE(thread_names.count("GPU 0 (NVIDIA H200) stream 13"));
  EXPECT_TRUE(thread_names.count("main"));
  EXPECT_EQ(j["kp"]["files"][0]["original_pid"], 4242);
}

TEST(ChromeExporter, TwoProcessesMergeIntoOneTimeline) {
  WriteFixedTrace("chrome_a.kptrace", 777);
  WriteFixedTrace("chrome_b.kptrace", 777);
  kp::ExportOptions opt;
  opt.output = "chrome_two.json";
  kp::ChromeExporter exporter(opt);
  std::string err;
  ASSERT_TRUE(IsOk(ExportFiles(exporter, {"chrome_a.kptrace", "chrome_b.kptrace"})));
  json j = json::parse(ReadFile(opt.output));
  ChromeCounts c = CheckChrome(j, 0);
  EXPECT_EQ(c.x_by_cat["kernel"], 40);
  std::set<int64_t> gpu_pids, cpu_pids;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "kernel") gpu_pids.insert(e["pid"].get<int64_t>());
    if (e["ph"] == "X" && e["cat"] == "nvtx") cpu_pids.insert(e["pid"].get<int64_t>());
  }
  EXPECT_EQ(gpu_pids.size(), 2u);
  EXPECT_EQ(cpu_pids.size(), 2u);
  EXPECT_TRUE(cpu_pids.count(777));
  EXPECT_EQ(j["kp"]["files"].size(), 2u);
}

TEST(ChromeExporter, Golden) {
  // The output names its input by the relative path "golden_input.kptrace", as the Perfetto
  // golden test's does: work in a directory of this test's own so that the two tests, run in
  // parallel by ctest, do not write one file at once.
  ASSERT_EQ(mkdir("chrome_golden", 0755) == 0 || errno == EEXIST, true);
  ASSERT_EQ(chdir("chrome_golden"), 0);
  WriteFixedTrace("golden_input.kptrace", 4242);
  kp::ExportOptions opt;
  opt.output = "golden_output.json";
  kp::ChromeExporter exporter(opt);
  std::string err;
  ASSERT_TRUE(IsOk(ExportFiles(exporter, {"golden_input.kptrace"})));
  ExpectGolden("fixed.json", ReadFile(opt.output));
}

TEST(CrossFormat, SameCountsInTracePerfettoAndChrome) {
  FixedTraceCounts want = WriteFixedTrace("cross_input.kptrace", 4242);
  kp::ExportOptions popt, copt;
  popt.output = "cross.pftrace";
  copt.output = "cross.json";
  kp::PerfettoExporter perfetto(popt);
  kp::ChromeExporter chrome(copt);
  std::string err;
  ASSERT_TRUE(IsOk(ExportFiles(perfetto, {"cross_input.kptrace"})));
  ASSERT_TRUE(IsOk(ExportFiles(chrome, {"cross_input.kptrace"})));
  PerfettoCounts p = DecodeAndCheckPerfetto(ReadFile(popt.output), nullptr, nullptr, true);
  ChromeCounts c = CheckChrome(json::parse(ReadFile(copt.output)), want.start_ns);
  EXPECT_EQ(p.kernels, want.kernels);
  EXPECT_EQ(c.x_by_cat["kernel"], want.kernels);
  EXPECT_EQ(p.memcpys, want.memcpys);
  EXPECT_EQ(c.x_by_cat["gpu_memcpy"], want.memcpys);
  EXPECT_EQ(p.memsets, want.memsets);
  EXPECT_EQ(c.x_by_cat["gpu_memset"], want.memsets);
  EXPECT_EQ(p.api, want.api);
  EXPECT_EQ(c.x_by_cat["cuda_runtime"] + c.x_by_cat["cuda_driver"], want.api);
  EXPECT_EQ(p.nvtx, want.nvtx);
  EXPECT_EQ(c.x_by_cat["nvtx"], want.nvtx);
  EXPECT_EQ(p.marks, c.marks);
}

}  // namespace

namespace {

// Throughput on this machine (run by hand: --gtest_also_run_disabled_tests). Prints records/s.
TEST(ExportThroughput, DISABLED_PerfettoAndChrome) {
  kp::MemoryChunkSink sink(0);
  kp::TraceEncoder enc(&sink, kp::TraceEncoder::Options());
  kp::HeaderInfo h;
  h.pid = 9;
  h.start_time_trace_ns = 1'000'000'000;
  enc.SetHeader(h);
  const int n = 500000;
  for (int i = 0; i < n; ++i) {
    uint64_t t = 1'000'000'000ull + i * 3000ull;
    kp::ApiRecord a;
    a.name = "cudaLaunchKernel_v7000";
    a.start = t;
    a.end = t + 500;
    a.thread_id = 1;
    a.correlation = i + 1;
    enc.AddApi(a);
    kp::KernelRecord k;
    k.name = "_Z7stencilPfS_i";
    k.start = t + 1000;
    k.end = t + 2500;
    k.stream = 7;
    k.correlation = i + 1;
    enc.AddKernel(k);
    if (enc.FlushDue()) enc.Flush();
  }
  enc.Finish(kp::FooterInfo());
  std::ofstream("throughput.kptrace", std::ios::binary)
      .write(reinterpret_cast<const char*>(sink.file().data()),
             static_cast<std::streamsize>(sink.file().size()));
  for (int format = 0; format < 2; ++format) {
    kp::ExportOptions opt;
    opt.output = format == 0 ? "throughput.pftrace" : "throughput.json";
    std::unique_ptr<kp::Exporter> e =
        format == 0 ? kp::MakePerfettoExporter(opt) : kp::MakeChromeExporter(opt);
    std::string err;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(IsOk(kp_export_test::ExportFiles(*e, {"throughput.kptrace"})));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %d records in %.3f s = %.2f M records/s\n", opt.output.c_str(), 2 * n, s,
                2 * n / s / 1e6);
  }
}

}  // namespace

namespace {

using namespace kp_export_test;
using nlohmann::json;

constexpr uint64_t kSyncT0 = 1'700'000'000'000'000'000ull;

struct SyncTraceCounts {
  int syncs = 0, overheads = 0;
  uint64_t first_kernel_ns = 0;
};

// A trace whose process started at t0: one launch + kernel, synchronizations (two of them
// overlapping, as when two threads synchronize at once) and CUPTI overhead records.
SyncTraceCounts WriteSyncTrace(const std::string& path, uint32_t pid, uint64_t t0) {
  SyncTraceCounts c;
  kp::MemoryChunkSink sink(0);
  kp::TraceEncoder enc(&sink, kp::TraceEncoder::Options());
  kp::HeaderInfo h;
  h.kp_version = "0.1.0";
  h.pid = pid;
  h.command_line = {"/usr/bin/python3", "sync.py"};
  h.start_time_unix_ns = t0;
  h.start_time_trace_ns = t0;
  enc.SetHeader(h);
  kp::ApiRecord a;
  a.name = "cudaLaunchKernel_v7000";
  a.domain = 1;
  a.start = t0 + 100;
  a.end = t0 + 400;
  a.thread_id = 5;
  a.correlation = 1;
  enc.AddApi(a);
  kp::KernelRecord k;
  k.name = "_Z4stepv";
  k.start = t0 + 1000;
  k.end = t0 + 9000;
  k.stream = 7;
  k.correlation = 1;
  enc.AddKernel(k);
  c.first_kernel_ns = k.start;
  const uint64_t sync_times[3][2] = {{2000, 9000}, {5000, 12000}, {20000, 21000}};
  for (int i = 0; i < 3; ++i) {
    kp::SyncRecord y;
    y.start = t0 + sync_times[i][0];
    y.end = t0 + sync_times[i][1];
    y.type = i == 2 ? 1 : 3;  // event / stream synchronize
    y.stream = 7;
    y.context = 1;
    y.correlation = 10 + i;
    y.event_id = i == 2 ? 3 : 0;
    enc.AddSync(y);
    ++c.syncs;
  }
  kp::OverheadRecord o;
  o.name = "CUPTI_INSTRUMENTATION";
  o.start = t0 + 50;
  o.end = t0 + 90;
  o.kind = 2;
  o.thread_id = 5;
  enc.AddOverhead(o);
  o.name = nullptr;
  o.start = t0 + 30000;
  o.end = t0 + 31000;
  o.kind = 8;
  enc.AddOverhead(o);
  c.overheads = 2;
  kp::FooterInfo f;
  f.end_time_ns = t0 + 1'000'000;
  f.end_reason = "exit";
  enc.Finish(f);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(sink.file().data()),
             static_cast<std::streamsize>(sink.file().size()));
  return c;
}

TEST(CrossFormat, SyncAndOverheadRecordsOnTheirOwnTracksInBothFormats) {
  SyncTraceCounts want = WriteSyncTrace("sync_input.kptrace", 31, kSyncT0);
  kp::ExportOptions popt, copt;
  popt.output = "sync.pftrace";
  copt.output = "sync.json";
  kp::PerfettoExporter perfetto(popt);
  kp::ChromeExporter chrome(copt);
  std::string err;
  ASSERT_TRUE(IsOk(ExportFiles(perfetto, {"sync_input.kptrace"})));
  ASSERT_TRUE(IsOk(ExportFiles(chrome, {"sync_input.kptrace"})));
  // Both decoders also check nesting per track / tid: the overlapping pair goes on two lanes.
  std::vector<std::string> names;
  PerfettoCounts p = DecodeAndCheckPerfetto(ReadFile(popt.output), nullptr, &names, true);
  json j = json::parse(ReadFile(copt.output));
  ChromeCounts c = CheckChrome(j, kSyncT0);
  EXPECT_EQ(p.syncs, want.syncs);
  EXPECT_EQ(c.x_by_cat["cuda_sync"], want.syncs);
  EXPECT_EQ(p.overheads, want.overheads);
  EXPECT_EQ(c.x_by_cat["cupti_overhead"], want.overheads);
  EXPECT_EQ(p.kernels, 1);
  EXPECT_EQ(c.x_by_cat["kernel"], 1);
  EXPECT_EQ(perfetto.anomalies().sync_records_on_extra_lanes, 1u);
  EXPECT_EQ(chrome.anomalies().sync_records_on_extra_lanes, 1u);
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has("cudaStreamSynchronize"));
  EXPECT_TRUE(has("cudaEventSynchronize"));
  EXPECT_TRUE(has("CUPTI overhead: CUPTI_INSTRUMENTATION"));
  EXPECT_TRUE(has("CUPTI overhead (kind 8)"));
  std::set<std::string> thread_names;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"]);
    if (e["ph"] == "X" && e["cat"] == "cuda_sync" && e["name"] == "cudaEventSynchronize") {
      EXPECT_EQ(e["args"]["event id"], 3);
      EXPECT_EQ(e["args"]["stream"], 7);
      EXPECT_EQ(e["ts"].get<double>(), 20.0);
    }
  }
  EXPECT_TRUE(thread_names.count("CUDA sync"));
  EXPECT_TRUE(thread_names.count("CUPTI overhead"));
}

// The second file started 1 ms before the first: convert reads every file's first chunk before
// writing, so times are relative to the earliest start and none is negative.
TEST(ChromeTimeBase, EarliestStartAcrossAllInputs) {
  SyncTraceCounts late = WriteSyncTrace("base_late.kptrace", 41, kSyncT0 + 1'000'000);
  SyncTraceCounts early = WriteSyncTrace("base_early.kptrace", 42, kSyncT0);
  std::vector<std::string> args = {
      "base_late.kptrace", "base_early.kptrace", "--to", "chrome", "-o",
      "base_two.json",     "--no-progress"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ASSERT_EQ(kp::cli::RunConvert(static_cast<int>(argv.size()), argv.data()), 0);
  json j = json::parse(ReadFile("base_two.json"));
  EXPECT_EQ(j["kp"]["time_base_ns"].get<uint64_t>(), kSyncT0);
  double min_ts = 1e300;
  std::map<int64_t, double> kernel_ts;  // by the CPU pid named in the GPU process
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] == "M") continue;
    min_ts = std::min(min_ts, e["ts"].get<double>());
    if (e["ph"] == "X" && e["cat"] == "kernel") {
      kernel_ts[e["pid"].get<int64_t>()] = e["ts"].get<double>();
    }
  }
  EXPECT_GE(min_ts, 0.0);
  ASSERT_EQ(kernel_ts.size(), 2u);
  std::set<double> got;
  for (auto& [pid, ts] : kernel_ts) got.insert(ts);
  EXPECT_TRUE(got.count((early.first_kernel_ns - kSyncT0) / 1000.0));
  EXPECT_TRUE(got.count((late.first_kernel_ns - kSyncT0) / 1000.0));
  ChromeCounts c = CheckChrome(j, kSyncT0);
  EXPECT_EQ(c.x_by_cat["cuda_sync"], early.syncs + late.syncs);
}

}  // namespace

namespace {

// The Chrome exporter writes argument names as JSON keys without escaping them.
TEST(RecordArgs, NamesNeedNoJsonEscaping) {
  for (uint32_t i = 1; i < kp::kArgCount; ++i) {
    for (char c : std::string(kp::kArgNames[i])) {
      EXPECT_TRUE(c >= 0x20 && c < 0x7f && c != '"' && c != '\\') << kp::kArgNames[i];
    }
  }
}

// Two files whose kernel shape 1 differs (shape ids are each file's own): the exporters cache a
// shape's arguments per file, so each file's kernels keep their own name and grid. The ShapeCaches
// tests keep their files in the process's scratch directory: ctest runs each test of this file
// as a process of its own, in parallel, in one working directory. Returns the trace's path.
std::string OneShapeTrace(const std::string& file, int pid, const std::string& name,
                          uint32_t grid_x) {
  const std::string path = kp::test::ScratchPath(file);
  kp::ProtoTraceWriter w;
  kp::Chunk c;
  c.mutable_header()->set_pid(pid);
  c.set_time_base_ns(1000000000);
  kp::InternedString* s = c.add_strings();
  s->set_id(1);
  s->set_value(name);
  kp::KernelShape* sh = c.add_kernel_shapes();
  sh->set_id(1);
  sh->set_name(1);
  sh->set_demangled(1);
  sh->set_grid_x(grid_x);
  sh->set_grid_y(1);
  sh->set_grid_z(1);
  for (int i = 0; i < 3; ++i) {
    kp::Kernel* k = c.add_kernels();
    k->set_start(1000000000 + i * 10000);
    k->set_duration(5000);
    k->set_shape(1);
    k->set_stream(7);
  }
  w.Add(c);
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

// Each kernel event of the conversion of `files` as "pid name mangled-name grid" (Chrome JSON),
// and as "name mangled-name grid" (Perfetto).
std::multiset<std::string> ChromeKernels(const std::vector<std::string>& files) {
  kp::ExportOptions opt;
  opt.output = kp::test::ScratchPath("shapes.json");
  kp::ChromeExporter exporter(opt);
  EXPECT_TRUE(IsOk(ExportFiles(exporter, files)));
  std::multiset<std::string> seen;
  const json j = json::parse(ReadFile(opt.output));
  for (const json& e : j["traceEvents"]) {
    if (e.value("cat", "") != "kernel") continue;
    seen.insert(std::to_string(e["pid"].get<int>()) + " " + e["name"].get<std::string>() + " " +
                e["args"]["mangled name"].get<std::string>() + " " +
                e["args"]["grid"].get<std::string>());
  }
  return seen;
}

std::multiset<std::string> PerfettoKernels(const std::vector<std::string>& files) {
  kp::ExportOptions opt;
  opt.output = kp::test::ScratchPath("shapes.pftrace");
  kp::PerfettoExporter exporter(opt);
  EXPECT_TRUE(IsOk(ExportFiles(exporter, files)));
  kp_test::perfetto::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(ReadFile(opt.output)));
  std::map<uint32_t, std::map<uint64_t, std::string>> event_names, arg_names, values;
  std::multiset<std::string> seen;
  for (const auto& pkt : trace.packet()) {
    const uint32_t seq = pkt.trusted_packet_sequence_id();
    for (const auto& e : pkt.interned_data().event_names()) event_names[seq][e.iid()] = e.name();
    for (const auto& e : pkt.interned_data().debug_annotation_names()) {
      arg_names[seq][e.iid()] = e.name();
    }
    for (const auto& e : pkt.interned_data().debug_annotation_string_values()) {
      values[seq][e.iid()] = e.name();
    }
    std::string mangled, grid;
    for (const auto& da : pkt.track_event().debug_annotations()) {
      const std::string& n = arg_names[seq][da.name_iid()];
      if (n == "mangled name") mangled = values[seq][da.string_value_iid()];
      if (n == "grid") grid = values[seq][da.string_value_iid()];
    }
    if (!mangled.empty()) {
      seen.insert(event_names[seq][pkt.track_event().name_iid()] + " " + mangled + " " + grid);
    }
  }
  return seen;
}

TEST(ShapeCaches, EachFileKeepsItsOwnShapes) {
  const std::string a = OneShapeTrace("shape_a.kptrace", 11, "_Z5alphav", 128);
  const std::string b = OneShapeTrace("shape_b.kptrace", 22, "_Z4betav", 64);
  const std::string alpha = "_Z5alphav _Z5alphav (128,1,1)", beta = "_Z4betav _Z4betav (64,1,1)";
  EXPECT_EQ(ChromeKernels({a, b}),
            (std::multiset<std::string>{"11 " + alpha, "11 " + alpha, "11 " + alpha, "22 " + beta,
                                        "22 " + beta, "22 " + beta}));
  EXPECT_EQ(PerfettoKernels({a, b}),
            (std::multiset<std::string>{alpha, alpha, alpha, beta, beta, beta}));
}

// Two traces in one file (the second's chunk reuses the first's sequence number with other
// content): its string and shape id 1 name another kernel, and the exporters' caches by id
// start again there.
TEST(ShapeCaches, ASecondTraceInOneFileKeepsItsOwnNames) {
  const std::string both = kp::test::ScratchPath("shape_ab.kptrace");
  {
    std::ofstream out(both, std::ios::binary);
    out << ReadFile(OneShapeTrace("shape_a.kptrace", 11, "_Z5alphav", 128))
        << ReadFile(OneShapeTrace("shape_b.kptrace", 11, "_Z4betav", 64));
  }
  const std::string alpha = "_Z5alphav _Z5alphav (128,1,1)", beta = "_Z4betav _Z4betav (64,1,1)";
  EXPECT_EQ(ChromeKernels({both}),
            (std::multiset<std::string>{"11 " + alpha, "11 " + alpha, "11 " + alpha, "11 " + beta,
                                        "11 " + beta, "11 " + beta}));
  EXPECT_EQ(PerfettoKernels({both}),
            (std::multiset<std::string>{alpha, alpha, alpha, beta, beta, beta}));
}

}  // namespace
