// The Stats table: the generated constants match the schema as libprotobuf reads it, the
// encoder writes every counter to its field, and `kptrace info` and `summary` report exactly
// the LOSS counters as data loss (common/stats_table.h).
#include "common/stats_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/frame.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "kptrace.pb.h"
#include "proto/kptrace_schema.h"
#include "tests/unit/scratch_dir.h"
#include "tools/info/trace_info.h"
#include "tools/reader/proto_trace_writer.h"
#include "tools/reader/trace_reader.h"
#include "tools/summary/trace_summary.h"

namespace kp {
namespace {

TEST(StatsTable, GeneratedTableMatchesTheSchemaAndItsSeverityOption) {
  const auto* d = Stats::descriptor();
  ASSERT_EQ(static_cast<size_t>(d->field_count()), schema::kNumStatFields);
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    const schema::StatField& row = schema::kStatFields[i];
    EXPECT_EQ(f->name(), row.name);
    EXPECT_EQ(static_cast<uint32_t>(f->number()), row.field);
    EXPECT_EQ(static_cast<uint32_t>(f->options().GetExtension(stat_severity)), row.severity)
        << f->name();
    EXPECT_NE(row.severity, schema::StatSeverity::kSeverityUnspecified) << f->name();
  }
  // Spot checks of the generated field numbers and enum values against libprotobuf's.
  EXPECT_EQ(schema::Chunk::kStats, static_cast<uint32_t>(Chunk::kStatsFieldNumber));
  EXPECT_EQ(schema::Chunk::kNotices, static_cast<uint32_t>(Chunk::kNoticesFieldNumber));
  EXPECT_EQ(schema::Memcpy::kChannel, static_cast<uint32_t>(Memcpy::kChannelFieldNumber));
  EXPECT_EQ(schema::RecordFlag::kOpen, static_cast<uint32_t>(RECORD_FLAG_OPEN));
  EXPECT_EQ(schema::NoticeSeverity::kError, static_cast<uint32_t>(NOTICE_ERROR));
  EXPECT_EQ(schema::SyncType::kContextSynchronize, static_cast<uint32_t>(SYNC_CONTEXT_SYNCHRONIZE));
}

TEST(StatsTable, ClassifiesLossBookkeepingAndInfo) {
  EXPECT_EQ(ClassifyStat("write_errors"), StatClass::kLoss);
  EXPECT_EQ(ClassifyStat("cupti_dropped_records"), StatClass::kLoss);
  EXPECT_EQ(ClassifyStat("bytes_written"), StatClass::kBookkeeping);
  EXPECT_EQ(ClassifyStat("profiler_internal_kernels"), StatClass::kBookkeeping);
  EXPECT_EQ(ClassifyStat("nvtx_open_ranges"), StatClass::kInfo);
  EXPECT_EQ(ClassifyStat("records_filtered"), StatClass::kInfo);  // outside the asked-for window
  // A counter from a newer writer is not silently dropped from the loss report.
  EXPECT_EQ(ClassifyStat("some_future_counter"), StatClass::kLoss);
}

TEST(StatsTable, EncoderWritesEveryCounterToItsField) {
  MemoryChunkSink sink;
  TraceEncoder enc(&sink, TraceEncoder::Options());
  for (const schema::StatField& f : schema::kStatFields) enc.stats().*f.counter = 1000 + f.field;
  enc.Flush(true);
  std::string path = kp::test::ScratchPath("stats_table_test");
  {
    FILE* out = std::fopen(path.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    std::fwrite(sink.file().data(), 1, sink.file().size(), out);
    std::fclose(out);
  }
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<TraceReader>& reader = opened.value();
  Chunk c;
  ASSERT_TRUE(reader->Next(&c));
  const Stats& s = c.stats();
  const auto* refl = s.GetReflection();
  for (const schema::StatField& f : schema::kStatFields) {
    const auto* field = Stats::descriptor()->FindFieldByNumber(static_cast<int>(f.field));
    ASSERT_NE(field, nullptr) << f.name;
    uint64_t expected = 1000 + f.field;
    // Set by Flush: the file bytes (just the magic) and the chunks written before this one.
    if (std::string(f.name) == "bytes_written") expected = kFileMagicSize;
    if (std::string(f.name) == "chunks_written") expected = 0;
    EXPECT_EQ(refl->GetUInt64(s, field), expected) << f.name;
  }
}

// A trace whose only counters are one loss, one bookkeeping and one informational counter.
std::string TraceWithCounters(const std::string& name) {
  Chunk c;
  c.set_sequence(0);
  Stats* st = c.mutable_stats();
  st->set_write_errors(2);
  st->set_buffers_completed(5);
  st->set_nvtx_open_ranges(4);
  Footer* f = c.mutable_footer();
  f->set_clean_end(true);
  f->set_end_reason("exit");
  f->set_chunks(1);
  ProtoTraceWriter w;
  w.Add(c);
  std::string path = kp::test::ScratchPath("stats_table_test_" + name);
  std::string error;
  const Status written = w.WriteFile(path);
  EXPECT_TRUE(written.ok()) << written.message();
  return path;
}

TEST(StatsTable, InfoAndSummaryReportOnlyLossCountersAsLoss) {
  const std::string path = TraceWithCounters("counters");
  const std::string info = FormatTraceInfoText(CollectTraceInfo(path));
  EXPECT_NE(info.find("write_errors                 2  <-- loss or anomaly"), std::string::npos)
      << info;
  const size_t open = info.find("nvtx_open_ranges             4");
  ASSERT_NE(open, std::string::npos) << info;
  const std::string open_line = info.substr(open, info.find('\n', open) - open);
  EXPECT_EQ(open_line.find("<--"), std::string::npos) << open_line;
  EXPECT_NE(open_line.find("not a loss"), std::string::npos) << open_line;
  EXPECT_NE(info.find("writer          buffers_completed 5"), std::string::npos) << info;

  const TraceSummary sum = SummarizeTraces({path});
  ASSERT_EQ(sum.losses.size(), 1u);
  EXPECT_NE(sum.losses[0].find("write_errors: 2"), std::string::npos) << sum.losses[0];
}

}  // namespace
}  // namespace kp
