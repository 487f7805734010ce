// KP_PC_SAMPLING on the CPU: configuration, the injector's aggregation and encoding of stall
// samples (read back with the real libprotobuf), and what kptrace makes of them (summary
// section, pc_stalls.csv, report section, `kptrace run --pc-sampling`).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inject/config/config.h"
#include "inject/pc_sampling/pc_stall_aggregator.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "kptrace.pb.h"
#include "tools/kptrace/run_command.h"
#include "tools/pc_stalls/pc_stall_table.h"
#include "tools/report/report_pc_stalls.h"

namespace kp {
namespace {

constexpr char kLong[] = "smsp__pcsamp_warps_issue_stalled_long_scoreboard";
constexpr char kLongNotIssued[] = "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued";
constexpr char kWait[] = "smsp__pcsamp_warps_issue_stalled_wait";
constexpr char kSelected[] = "smsp__pcsamp_warps_issue_stalled_selected";

class MemorySink : public ChunkSink {
 public:
  bool WriteChunk(const uint8_t* data, size_t size) override {
    chunks.emplace_back(reinterpret_cast<const char*>(data), size);
    bytes += size;
    return true;
  }
  uint64_t bytes_written() const override { return bytes; }
  std::vector<std::string> chunks;
  uint64_t bytes = 0;
};

Config Parse(std::map<std::string, std::string> env, std::vector<ConfigError>* errors) {
  return ParseConfig(
      [&env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      errors);
}

TEST(PcSamplingConfigTest, OffByDefaultStallTurnsItOn) {
  std::vector<ConfigError> errors;
  EXPECT_FALSE(Parse({}, &errors).pc_sampling.stall);
  Config c = Parse({{"KP_PC_SAMPLING", "stall"}, {"KP_PC_SAMPLING_PERIOD", "12"}}, &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_TRUE(c.pc_sampling.stall);
  EXPECT_EQ(12u, c.pc_sampling.period);
  EXPECT_EQ(PcSamplingConfig::kDefaultPeriod,
            Parse({{"KP_PC_SAMPLING", "stall"}}, &errors).pc_sampling.period);
  EXPECT_FALSE(Parse({{"KP_PC_SAMPLING", "off"}}, &errors).pc_sampling.stall);
  EXPECT_TRUE(errors.empty());
  bool described = false;
  for (const auto& [k, v] : DescribeConfig(c)) {
    if (k == "KP_PC_SAMPLING_PERIOD") described = v == "12";
  }
  EXPECT_TRUE(described);
}

TEST(PcSamplingConfigTest, BadValuesGetOneLineNamingTheVariableAndTheAcceptedValues) {
  for (const char* bad : {"4", "32", "abc", "-1", "15x", "1e3"}) {
    std::vector<ConfigError> errors;
    Config c = Parse({{"KP_PC_SAMPLING", "stall"}, {"KP_PC_SAMPLING_PERIOD", bad}}, &errors);
    ASSERT_EQ(1u, errors.size()) << bad;
    EXPECT_EQ("KP_PC_SAMPLING_PERIOD", errors[0].variable);
    EXPECT_NE(std::string::npos, errors[0].message.find("accepted values are integers 5..31"))
        << errors[0].message;
    EXPECT_EQ(std::string::npos, errors[0].message.find('\n'));
    EXPECT_EQ(PcSamplingConfig::kDefaultPeriod, c.pc_sampling.period);
  }
  std::vector<ConfigError> errors;
  Parse({{"KP_PC_SAMPLING", "stalls"}}, &errors);
  ASSERT_EQ(1u, errors.size());
  EXPECT_EQ(0u, errors[0].message.rfind("KP_PC_SAMPLING=\"stalls\" is not valid: accepted values "
                                        "are stall",
                                        0))
      << errors[0].message;
  char v1[] = "KP_PC_SAMPLING=stall", v2[] = "KP_PC_SAMPLING_PERIOD=15";
  char* environ_like[] = {v1, v2, nullptr};
  EXPECT_TRUE(UnknownKpVariables(environ_like).empty());
}

TEST(PcStallAggregatorTest, SumsPerKernelAndPcAndStartsOverAfterTake) {
  PcStallAggregator a;
  const uint32_t reasons[] = {3, 7};
  const uint32_t s1[] = {10, 2}, s2[] = {5, 0}, s3[] = {1, 1};
  a.Add(0, "k1", 99, 0x10, reasons, s1, 2);
  a.Add(0, "k1", 99, 0x20, reasons, s2, 2);
  a.Add(0, "k1", 99, 0x10, reasons, s3, 2);
  a.Add(1, "k1", 99, 0x10, reasons, s3, 2);  // another device: another kernel row
  const uint32_t zero[] = {0, 0};
  a.Add(0, "k2", 99, 0x10, reasons, zero, 2);  // no samples: nothing
  std::vector<KernelStallTotals> t = a.Take(1);
  ASSERT_EQ(2u, t.size());
  EXPECT_EQ(0u, t[0].device);
  EXPECT_EQ("k1", t[0].kernel);
  EXPECT_EQ(19u, t[0].samples);
  ASSERT_EQ(2u, t[0].reasons.size());
  EXPECT_EQ(3u, t[0].reasons[0].reason);
  EXPECT_EQ(16u, t[0].reasons[0].samples);
  ASSERT_EQ(1u, t[0].top_pcs.size());  // max_pcs
  EXPECT_EQ(0x10u, t[0].top_pcs[0].pc_offset);
  EXPECT_EQ(14u, t[0].top_pcs[0].samples);
  EXPECT_EQ(1u, t[1].device);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(a.Take(10).empty());
}

// Encodes two chunks the way the injector does and parses them with libprotobuf.
std::vector<Chunk> EncodeSample() {
  MemorySink sink;
  TraceEncoder enc(&sink, TraceEncoder::Options());
  enc.AddPcStallReason(0, 1, kLong);
  enc.AddPcStallReason(0, 2, kWait);
  enc.AddPcStallReason(0, 3, kLongNotIssued);
  enc.AddPcStallReason(0, 4, kSelected);
  const uint32_t idx[] = {1, 2, 3, 4, 1, 3, 2};
  const uint64_t n[] = {600, 300, 500, 100, 400, 380, 20};
  PcStallsRecord::Pc pcs[2];
  pcs[0].pc_offset = 0x1a0;
  pcs[0].reason_index = idx + 4;
  pcs[0].samples = n + 4;
  pcs[0].num_reasons = 2;
  pcs[0].file = "/src/chase.cu";
  pcs[0].line = 42;
  pcs[1].pc_offset = 0x40;
  pcs[1].reason_index = idx + 6;
  pcs[1].samples = n + 6;
  pcs[1].num_reasons = 1;
  PcStallsRecord r;
  r.device = 0;
  r.kernel = "_Z13pointer_chasePKjjiPj";
  r.time_ns = 123;
  r.sampling_period = 15;
  r.reason_index = idx;
  r.samples = n;
  r.num_reasons = 4;
  r.pcs = pcs;
  r.num_pcs = 2;
  enc.AddPcStalls(r);
  enc.stats().pc_samples_dropped += 7;
  enc.Flush();
  r.num_pcs = 0;
  r.num_reasons = 1;  // 600 more Long Scoreboard samples: records add up
  enc.AddPcStalls(r);
  FooterInfo footer;
  footer.end_reason = "exit";
  enc.Finish(footer);
  std::vector<Chunk> chunks;
  for (const std::string& bytes : sink.chunks) {
    Chunk c;
    EXPECT_TRUE(c.ParseFromString(bytes));
    chunks.push_back(c);
  }
  return chunks;
}

TEST(PcStallsEncodingTest, RecordsParseWithLibprotobufAndTheReasonTableIsInEveryChunk) {
  std::vector<Chunk> chunks = EncodeSample();
  ASSERT_EQ(2u, chunks.size());
  for (const Chunk& c : chunks) {
    ASSERT_EQ(4, c.pc_stall_reasons_size());
    ASSERT_EQ(1, c.pc_stalls_size());
  }
  const PcStalls& p = chunks[0].pc_stalls(0);
  EXPECT_EQ("_Z13pointer_chasePKjjiPj", p.kernel());
  EXPECT_EQ(15u, p.sampling_period());
  EXPECT_EQ(123u, p.time_ns());
  ASSERT_EQ(4, p.samples_size());
  EXPECT_EQ(600u, p.samples(0));
  ASSERT_EQ(2, p.top_pcs_size());
  EXPECT_EQ(0x1a0u, p.top_pcs(0).pc_offset());
  EXPECT_EQ("/src/chase.cu", p.top_pcs(0).file());
  EXPECT_EQ(42u, p.top_pcs(0).line());
  EXPECT_EQ(7u, chunks[0].stats().pc_samples_dropped());
  ASSERT_TRUE(chunks[1].has_footer());
  EXPECT_EQ(2u, chunks[1].footer().pc_stalls());
}

PcStallTable SampleTable() {
  PcStallTable t;
  for (const Chunk& c : EncodeSample()) t.AddChunk(c);
  return t;
}

TEST(PcStallTableTest, SumsRecordsAndLeavesNotIssuedOutOfThePercentages) {
  std::vector<PcStallKernel> k = SampleTable().Kernels();
  ASSERT_EQ(1u, k.size());
  EXPECT_EQ(1600u, k[0].samples);  // 1200 long + 300 wait + 100 selected; not_issued excluded
  ASSERT_GE(k[0].reasons.size(), 3u);
  EXPECT_EQ("Long Scoreboard", k[0].reasons[0].display);
  EXPECT_DOUBLE_EQ(0.75, k[0].reasons[0].fraction);
  ASSERT_EQ(2u, k[0].top_pcs.size());
  EXPECT_EQ("Long Scoreboard", k[0].top_pcs[0].top_reason);
  EXPECT_EQ(400u, k[0].top_pcs[0].samples);
  EXPECT_EQ(42u, k[0].top_pcs[0].line);
}

TEST(PcStallTableTest, SummarySectionNamesTopReasonsWithTheWorkflowReading) {
  const std::string text = FormatPcStallsText(SampleTable(), 10);
  EXPECT_NE(std::string::npos, text.find("\nWarp stalls")) << text;
  EXPECT_NE(std::string::npos, text.find("pointer_chase")) << text;
  EXPECT_NE(std::string::npos, text.find("Long Scoreboard 75 %, Wait 19 %, Selected 6 %")) << text;
  EXPECT_NE(std::string::npos, text.find("=> Long Scoreboard: waiting on global/local memory"))
      << text;
  EXPECT_NE(std::string::npos, text.find("/src/chase.cu:42")) << text;
  EXPECT_EQ("", FormatPcStallsText(PcStallTable(), 10));
  EXPECT_EQ("Math Pipe Throttle",
            PcStallDisplayName("smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"));
  EXPECT_EQ("MIO Throttle Not Issued",
            PcStallDisplayName("smsp__pcsamp_warps_issue_stalled_mio_throttle_not_issued"));
  EXPECT_EQ("LG Throttle", PcStallDisplayName("lg_throttle"));
  // Every reason CUPTI 13.0 reported on the H200 has a reading.
  for (const char* r :
       {"barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
        "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc",
        "no_instructions", "not_selected", "selected", "short_scoreboard", "sleeping", "wait",
        "warpgroup_arrive", "tex_throttle"}) {
    EXPECT_NE(std::string(""),
              PcStallReading(std::string("smsp__pcsamp_warps_issue_stalled_") + r + "_not_issued"))
        << r;
  }
}

TEST(PcStallTableTest, CsvHasOneRowPerKernelAndReasonAndThePcRows) {
  char dir_template[] = "/tmp/kp-pc-csv.XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir_template));
  const std::string dir = dir_template;
  std::map<int, PcStallTable> tables;
  tables[0] = SampleTable();
  const Status written = WritePcStallsCsv(dir, tables);
  ASSERT_TRUE(written.ok()) << written.message();
  std::ifstream in(dir + "/pc_stalls.csv");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string csv = ss.str();
  EXPECT_EQ(
      0u, csv.rfind("file,device,kernel,mangled_kernel,reason,cupti_reason,samples,percent\n", 0));
  EXPECT_NE(std::string::npos,
            csv.find("0,0,\"pointer_chase(unsigned int const*, unsigned int, int, unsigned int*)\","
                     "_Z13pointer_chasePKjjiPj,Long Scoreboard," +
                     std::string(kLong) + ",1200,75.000\n"))
      << csv;
  EXPECT_NE(std::string::npos, csv.find(std::string(kLongNotIssued) + ",500,\n")) << csv;
  std::ifstream pcs(dir + "/pc_stall_pcs.csv");
  std::stringstream ps;
  ps << pcs.rdbuf();
  EXPECT_NE(std::string::npos, ps.str().find(",416,400,Long Scoreboard,/src/chase.cu,42\n"))
      << ps.str();
  std::remove((dir + "/pc_stalls.csv").c_str());
  std::remove((dir + "/pc_stall_pcs.csv").c_str());
  rmdir(dir.c_str());
}

TEST(PcStallTableTest, ReportSectionHasABarPerKernelOrSaysHowToGetOne) {
  TraceSummary s;
  EXPECT_NE(std::string::npos, PcStallsSection(s).find("KP_PC_SAMPLING=stall"));
  s.pc_stalls = SampleTable();
  const std::string html = PcStallsSection(s);
  EXPECT_NE(std::string::npos, html.find("<section id=\"stalls\"><h2>"));
  EXPECT_NE(std::string::npos, html.find("<svg class=\"stallbar\""));
  EXPECT_NE(std::string::npos, html.find("Long Scoreboard 75 %"));
  EXPECT_NE(std::string::npos, html.find("chase.cu:42"));
}

TEST(PcSamplingRunFlagTest, BareFlagMeansStallAndValuesPassThrough) {
  const char* bare[] = {"--pc-sampling", "prog"};
  StatusOr<LaunchPlan> parsed = ParseLaunchArgs(2, const_cast<char**>(bare));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const LaunchPlan& plan = parsed.value();
  ASSERT_EQ(1u, plan.env.size());
  EXPECT_EQ("KP_PC_SAMPLING", plan.env[0].first);
  EXPECT_EQ("stall", plan.env[0].second);
  const char* valued[] = {"--pc-sampling=off", "--pc-sampling-period", "18", "prog"};
  StatusOr<LaunchPlan> parsed2 = ParseLaunchArgs(4, const_cast<char**>(valued));
  ASSERT_TRUE(parsed2.ok()) << parsed2.status().message();
  const LaunchPlan& plan2 = parsed2.value();
  ASSERT_EQ(2u, plan2.env.size());
  EXPECT_EQ("off", plan2.env[0].second);
  EXPECT_EQ("KP_PC_SAMPLING_PERIOD", plan2.env[1].first);
  EXPECT_EQ("18", plan2.env[1].second);
}

}  // namespace
}  // namespace kp
