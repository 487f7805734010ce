// The robustness review's reproducers, read through TraceReader: each is refused within the
// decode budget or read with its damage counted as it is, and nothing that was good is lost.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>

#include "tests/robustness/reproducers.h"
#include "tests/unit/scratch_dir.h"
#include "tools/kptrace/commands.h"
#include "tools/reader/chunk_budget.h"
#include "tools/reader/proto_trace_writer.h"
#include "tools/reader/trace_reader.h"

namespace kp {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const std::string& Example() {
  static const std::string bytes =
      ReadFile(std::string(KP_SOURCE_DIR) + "/examples/pytorch_h200.kptrace");
  return bytes;
}

const std::map<std::string, std::string>& Reproducers() {
  static const auto* all = [] {
    auto* m = new std::map<std::string, std::string>();
    for (auto& [name, bytes] : BuildReproducers(Example())) (*m)[name] = bytes;
    return m;
  }();
  return *all;
}

std::string Write(const std::string& name, const std::string& bytes) {
  std::string path = kp::test::ScratchPath("robustness_" + name);
  std::ofstream o(path, std::ios::binary);
  o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

struct Read {
  std::string error;
  uint64_t chunks = 0, records = 0;
  ReaderStats stats;
  std::vector<std::string> command_line;
};

Read ReadTrace(const std::string& name, const std::string& bytes) {
  Read r;
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(Write(name, bytes));
  if (!opened.ok()) {
    r.error = opened.status().message();
    return r;
  }
  std::unique_ptr<TraceReader>& reader = opened.value();
  Chunk c;
  while (reader->Next(&c)) ++r.chunks;
  r.stats = reader->stats();
  r.records = r.stats.records;
  if (reader->header() != nullptr) {
    for (const auto& a : reader->header()->command_line()) r.command_line.push_back(a);
  }
  return r;
}

const Read& Reference() {
  static const Read r = ReadTrace("example.kptrace", Example());
  return r;
}

TEST(Reproducers, TheExampleIsClean) {
  ASSERT_EQ(Reference().error, "");
  EXPECT_GE(Reference().chunks, 2u) << "the reproducers need a multi-chunk example";
  EXPECT_TRUE(Reference().stats.Describe().empty());
}

// Bombs: the bad chunk is skipped as over budget, every good chunk after it is read.
TEST(Reproducers, NestedAndTopLevelBombsAreSkippedWithinTheBudget) {
  for (const char* name : {"nested_command_line_bomb.kptrace", "nested_config_bomb.kptrace",
                           "empty_kernels_bomb.kptrace", "empty_kernels_stored.kptrace",
                           "nested_config_stored.kptrace"}) {
    SCOPED_TRACE(name);
    Read r = ReadTrace(name, Reproducers().at(name));
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.stats.chunks_over_budget, 1u);
    EXPECT_EQ(r.stats.chunks_undecodable, 0u);
    EXPECT_EQ(r.chunks, Reference().chunks);
    EXPECT_EQ(r.records, Reference().records);
  }
}

// Format version 3: the same records from columns; a chunk whose columns disagree in length is
// damage and one claiming 2^31 records with no column is over budget, the others read on.
TEST(Reproducers, ColumnChunksReadAndBadColumnsAreSkipped) {
  Read v3 = ReadTrace("v3.kptrace", Reproducers().at("version_3_columns.kptrace"));
  ASSERT_EQ(v3.error, "");
  EXPECT_EQ(v3.chunks, Reference().chunks);
  EXPECT_EQ(v3.records, Reference().records);
  Read bad = ReadTrace("bad.kptrace", Reproducers().at("column_length_mismatch.kptrace"));
  ASSERT_EQ(bad.error, "");
  EXPECT_EQ(bad.stats.chunks_undecodable, 1u);
  EXPECT_EQ(bad.records, Reference().records);
  Read bomb = ReadTrace("bomb.kptrace", Reproducers().at("column_count_bomb.kptrace"));
  ASSERT_EQ(bomb.error, "");
  EXPECT_EQ(bomb.stats.chunks_over_budget, 1u);
  EXPECT_EQ(bomb.records, Reference().records);
}

TEST(Reproducers, ATinyFileClaimingAHugeChunkIsATornTail) {
  Read r = ReadTrace("claims.kptrace", Reproducers().at("claims_256_mib.kptrace"));
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.chunks, 0u);
  EXPECT_EQ(r.stats.truncated_tail_bytes, 24u);
}

TEST(Reproducers, InvalidUtf8NeverLosesTheChunk) {
  Read r = ReadTrace("latin1.kptrace", Reproducers().at("latin1_command_line.kptrace"));
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.chunks, Reference().chunks);
  EXPECT_EQ(r.records, Reference().records);
  EXPECT_EQ(r.stats.strings_repaired, 1u);
  ASSERT_FALSE(r.command_line.empty());
  EXPECT_EQ(r.command_line.back(), "caf?");
}

TEST(Reproducers, DuplicateChunksAreReadOnce) {
  Read r = ReadTrace("dup.kptrace", Reproducers().at("duplicated_chunks.kptrace"));
  EXPECT_EQ(r.chunks, Reference().chunks);
  EXPECT_EQ(r.records, Reference().records);
  EXPECT_EQ(r.stats.chunks_duplicate, Reference().chunks);
  EXPECT_EQ(r.stats.sequence_gaps, 0u);
  ASSERT_EQ(r.stats.Describe().size(), 1u);
  EXPECT_NE(r.stats.Describe()[0].find("duplicate chunks"), std::string::npos);
}

TEST(Reproducers, SwappedChunksAreReorderedNotLost) {
  Read r = ReadTrace("swapped.kptrace", Reproducers().at("swapped_chunks.kptrace"));
  EXPECT_EQ(r.chunks, Reference().chunks);
  EXPECT_EQ(r.records, Reference().records);
  EXPECT_EQ(r.stats.sequence_gaps, 0u);
  EXPECT_EQ(r.stats.chunks_reordered, Reference().chunks - 1);
  for (const std::string& line : r.stats.Describe()) {
    EXPECT_EQ(line.find("are lost"), std::string::npos) << line;
  }
}

TEST(Reproducers, AGapStaysLostUnlessItsChunkArrives) {
  std::vector<std::string> chunks = SplitChunks(Example());
  ASSERT_GE(chunks.size(), 2u);
  Read r = ReadTrace("gap.kptrace", std::string(Example(), 0, 8) + chunks[1]);
  EXPECT_EQ(r.stats.sequence_gaps, 1u);
  EXPECT_EQ(r.stats.chunks_reordered, 0u);
}

TEST(Reproducers, AnotherFormatVersionIsNamed) {
  Read r = ReadTrace("v4.kptrace", Reproducers().at("format_version_4.kptrace"));
  EXPECT_NE(r.error.find("kp trace format version 4 found; this kptrace reads versions 1, 2 and 3"),
            std::string::npos)
      << r.error;
}

int RunCommand(int (*command)(int, char**), std::vector<std::string> args, std::string* out,
               std::string* err = nullptr) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  int rc = command(static_cast<int>(argv.size()), argv.data());
  *out = ::testing::internal::GetCapturedStdout();
  const std::string said = ::testing::internal::GetCapturedStderr();
  if (err != nullptr) *err = said;
  return rc;
}

TEST(Reproducers, TheSameFileTwiceIsReadOnceWithAWarning) {
  const std::string path = Write("twice.kptrace", Example());
  const size_t slash = path.rfind('/');
  const std::string other = path.substr(0, slash) + "/." + path.substr(slash);
  std::string out, err;
  EXPECT_EQ(RunCommand(cli::RunInfo, {"--json", path, other}, &out, &err), 0);
  EXPECT_NE(err.find(other + " is the same file as " + path + ": read once"), std::string::npos)
      << err;
  EXPECT_EQ(out.find(other), std::string::npos) << "the second name must not be read";
}

// Records whose end (start + duration) passes INT64_MAX: every end the tools derive saturates
// (the sanitizer build turns any overflow into a failure).
TEST(ExtremeTimes, EndTimesSaturate) {
  Chunk c;
  c.set_sequence(0);
  c.set_time_base_ns(1);
  auto* s = c.add_strings();
  s->set_id(1);
  s->set_value("k");
  auto* shape = c.add_kernel_shapes();
  shape->set_id(1);
  shape->set_name(1);
  shape->set_demangled(1);
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int64_t start : {int64_t{1000}, kMax - 5}) {
    Kernel* k = c.add_kernels();
    k->set_shape(1);
    k->set_start(start);
    k->set_duration(kMax - 1);
    k->set_correlation(start == 1000 ? 1 : 2);
    Memcpy* m = c.add_memcpys();
    m->set_start(start);
    m->set_duration(kMax);
    m->set_bytes(1);
    NvtxRange* r = c.add_nvtx_ranges();
    r->set_start(start);
    r->set_duration(kMax);
    r->set_name(1);
  }
  ProtoTraceWriter w;
  w.Add(c);
  const std::string path = Write("extreme.kptrace", w.bytes());
  std::string out;
  EXPECT_EQ(RunCommand(cli::RunSummary, {"--format", "json", path}, &out), 0);
  EXPECT_EQ(RunCommand(cli::RunInfo, {path}, &out), 0);
  const std::string dir = path + "_csv";
  EXPECT_EQ(RunCommand(cli::RunConvert, {path, "--to", "csv", "-o", dir, "--no-progress"}, &out),
            0);
  EXPECT_NE(ReadFile(dir + "/kernels.csv").find(std::to_string(kMax)), std::string::npos);
}

TEST(DecodeBudget, KpsOwnChunksAreFarInside) {
  // The writer's 4 MiB target chunk of dense records decodes to about 5 bytes per byte.
  EXPECT_GE(DecodeBudget(4u << 20), 20ull * (4u << 20));
  EXPECT_EQ(DecodeBudget(uint64_t{1} << 40), kMaxDecodedChunkBytes);
}

}  // namespace
}  // namespace kp
