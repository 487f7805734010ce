// `kptrace info` tests: the report holds the right counts, versions, losses and clean-end line,
// for intact, cut and corrupted traces; the JSON form parses with a real JSON parser.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/unit/scratch_dir.h"
#include "tools/info/trace_info.h"
#include "tools/reader/fixed_trace.h"

namespace kp {
namespace {

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  std::string path = kp::test::ScratchPath("info_test_" + name);
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TraceInfo, ReportsHeaderDevicesCountsAndCleanEnd) {
  std::string path = WriteTemp("fixed", BuildFixedTrace());
  TraceInfo info = CollectTraceInfo(path);
  ASSERT_TRUE(info.readable());
  EXPECT_EQ(info.counts["kernels"], 6u);
  EXPECT_EQ(info.counts["api_calls"], 7u);
  EXPECT_EQ(info.counts["metric_ranges"], 2u);
  EXPECT_EQ(info.records(), 22u);
  EXPECT_EQ(info.first_ns, 1700000000000000000ull + 1000);  // the overhead record
  std::string t = FormatTraceInfoText(info);
  EXPECT_TRUE(Has(t, "pid 4242 (ppid 1) on gpu-node-1")) << t;
  EXPECT_TRUE(Has(t, "python train.py --epochs=1")) << t;
  EXPECT_TRUE(Has(t, "2023-11-14 22:13:20 UTC")) << t;
  EXPECT_TRUE(Has(t, "NVIDIA H200, CC 9.0, 132 SMs, 150.0 GiB, SM clock 1980 MHz")) << t;
  EXPECT_TRUE(Has(t, "GPU-01234567-89ab-cdef-0123-456789abcdef")) << t;
  EXPECT_TRUE(Has(t, "driver 580.159.03, CUDA driver API 13.0, CUPTI API 130001")) << t;
  EXPECT_TRUE(Has(t, "records         22 in 2 chunks")) << t;
  EXPECT_TRUE(Has(t, "    kernels         6\n")) << t;
  EXPECT_TRUE(Has(t, "dropped records 3")) << t;
  EXPECT_TRUE(Has(t, "profiler_internal_kernels")) << t;
  EXPECT_TRUE(Has(t, "[warning] nvtx: 1 NVTX range left open at exit")) << t;
  EXPECT_TRUE(Has(t, "trace ended cleanly (exit)")) << t;
  EXPECT_TRUE(Has(t, "time span       +1.000 us .. +745.000 us after start (744.000 us)")) << t;
  EXPECT_FALSE(Has(t, "damage:")) << t;
}

TEST(TraceInfo, CutTraceSaysNoFooterAndNamesDamage) {
  std::string bytes = BuildFixedTrace();
  std::string path = WriteTemp("cut", bytes.substr(0, bytes.size() - 7));
  TraceInfo info = CollectTraceInfo(path);
  ASSERT_TRUE(info.readable());
  EXPECT_EQ(info.counts["kernels"], 3u);
  std::string t = FormatTraceInfoText(info);
  EXPECT_TRUE(Has(t,
                  "no footer: the process ended without kp's exit flush (killed?) -- data "
                  "up to the last chunk is intact"))
      << t;
  EXPECT_TRUE(Has(t, "damage: ")) << t;
  EXPECT_TRUE(Has(t, "of a torn final chunk ignored")) << t;
}

TEST(TraceInfo, JsonParsesAndCarriesCounts) {
  std::string path = WriteTemp("json", BuildFixedTrace({false, 3}));
  std::vector<TraceInfo> infos = {CollectTraceInfo(path), CollectTraceInfo(path + ".missing")};
  auto j = nlohmann::json::parse(FormatTraceInfoJson(infos));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["records"]["kernels"], 6);
  EXPECT_EQ(j[0]["records_total"], 22);
  EXPECT_EQ(j[0]["header"]["pid"], 4242);
  EXPECT_EQ(j[0]["devices"][0]["name"], "NVIDIA H200");
  EXPECT_EQ(j[0]["clean_end"], false);
  EXPECT_EQ(j[0]["stats"]["cupti_dropped_records"], 3);
  EXPECT_EQ(j[1]["readable"], false);
  EXPECT_TRUE(Has(j[1]["error"].get<std::string>(), "cannot open"));
}

TEST(TraceInfo, NothingReadableIsReported) {
  std::string path = WriteTemp("magic_only", "KPTRACE1garbage-garbage-garbage-garbage");
  TraceInfo info = CollectTraceInfo(path);
  EXPECT_TRUE(info.opened);
  EXPECT_FALSE(info.readable());
  EXPECT_TRUE(Has(FormatTraceInfoText(info), "nothing could be read")) << FormatTraceInfoText(info);
  TraceInfo bad = CollectTraceInfo(WriteTemp("bad", "nope"));
  EXPECT_FALSE(bad.readable());
  EXPECT_TRUE(Has(FormatTraceInfoText(bad), "is not a kp trace (bad magic)"));
}

}  // namespace
}  // namespace kp
