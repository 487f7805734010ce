// Reader tests: round trip of the encoding rules, and damage (torn tails, bad CRCs, garbage,
// lost chunks) counted rather than crashing.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/frame.h"
#include "tests/unit/scratch_dir.h"
#include "tools/reader/fixed_trace.h"
#include "tools/reader/proto_trace_writer.h"
#include "tools/reader/trace_reader.h"

namespace kp {
namespace {

std::string TempPath(const std::string& name) {
  return kp::test::ScratchPath("reader_test_" + name);
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  std::string path = TempPath(name);
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

struct ReadResult {
  int chunks = 0;
  uint64_t kernels = 0, api = 0, records = 0;
  ReaderStats stats;
};

ReadResult ReadAll(const std::string& path) {
  ReadResult r;
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
  if (!opened.ok()) {
    ADD_FAILURE() << opened.status().message();
    return r;
  }
  std::unique_ptr<TraceReader>& reader = opened.value();
  Chunk c;
  while (reader->Next(&c)) {
    ++r.chunks;
    r.kernels += c.kernels_size();
    r.api += c.api_calls_size();
    for (const Kernel& k : c.kernels()) {
      const KernelShape* s = reader->Shape(k.shape());
      if (s != nullptr) reader->Str(s->demangled());
    }
  }
  r.stats = reader->stats();
  r.records = r.stats.records;
  return r;
}

TEST(TraceReader, DecodesFixedTraceWithAbsoluteTimes) {
  for (int level : {0, 3}) {
    std::string path = WriteTemp("fixed", BuildFixedTrace({true, level}));
    StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    std::unique_ptr<TraceReader>& reader = opened.value();
    Chunk c;
    ASSERT_TRUE(reader->Next(&c));
    ASSERT_NE(reader->header(), nullptr);
    EXPECT_EQ(reader->header()->pid(), 4242u);
    ASSERT_EQ(reader->devices().size(), 1u);
    EXPECT_EQ(reader->devices()[0].name(), "NVIDIA H200");
    ASSERT_EQ(c.kernels_size(), 3);
    const uint64_t t0 = 1700000000000000000ull;
    EXPECT_EQ(static_cast<uint64_t>(c.kernels(0).start()), t0 + 100000);
    EXPECT_EQ(static_cast<uint64_t>(c.kernels(1).start()), t0 + 150000);
    EXPECT_EQ(static_cast<uint64_t>(c.kernels(2).start()), t0 + 160000);
    EXPECT_EQ(c.kernels(0).correlation(), 100);
    EXPECT_EQ(c.kernels(2).correlation(), 102);
    EXPECT_EQ(c.api_calls(4).correlation(), 104);
    EXPECT_EQ(static_cast<uint64_t>(c.nvtx_marks(0).time()), t0 + 300000);
    const KernelShape* s = reader->Shape(c.kernels(0).shape());
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(reader->Str(s->demangled()),
              "void gemm<float, 128>(float const*, float const*, float*)");
    EXPECT_EQ(reader->Str(999), "<unknown string 999>");
    // Views of unknown ids stay valid while others are resolved (an exporter may hold two).
    const std::string_view first = reader->Str(998);
    const std::string_view second = reader->Str(997);
    EXPECT_EQ(reader->Str(999), "<unknown string 999>");
    EXPECT_EQ(first, "<unknown string 998>");
    EXPECT_EQ(second, "<unknown string 997>");
    EXPECT_EQ(reader->Shape(77), nullptr);
    ASSERT_TRUE(reader->Next(&c));
    EXPECT_EQ(static_cast<uint64_t>(c.kernels(0).start()), t0 + 600000);
    EXPECT_EQ(c.kernels(1).correlation(), 107);
    EXPECT_EQ(static_cast<uint64_t>(c.metric_ranges(1).start()), t0 + 650000);
    EXPECT_FALSE(reader->Next(&c));
    ASSERT_NE(reader->footer(), nullptr);
    EXPECT_TRUE(reader->footer()->clean_end());
    EXPECT_EQ(reader->trace_stats().cupti_dropped_records(), 3u);
    const ReaderStats& st = reader->stats();
    EXPECT_EQ(st.chunks_ok, 2u);
    EXPECT_EQ(st.unknown_string_ids, 4u);
    EXPECT_EQ(st.unknown_shape_ids, 1u);
    EXPECT_EQ(st.records, 22u);
    EXPECT_EQ(reader->position(), st.file_bytes);
    std::remove(path.c_str());
  }
}

TEST(TraceReader, RejectsBadMagicWithClearMessage) {
  std::string path = WriteTemp("notatrace", "hello world, this is not a trace");
  EXPECT_EQ(TraceReader::Open(path).status().message(),
            path + " is not a kp trace (bad magic); expected a file written by libkpinject");
  std::string empty = WriteTemp("empty", "");
  EXPECT_NE(TraceReader::Open(empty).status().message().find("bad magic"), std::string::npos);
  EXPECT_NE(TraceReader::Open(TempPath("missing")).status().message().find("cannot open"),
            std::string::npos);
}

TEST(TraceReader, TornTailIsCountedAndEarlierChunksSurvive) {
  std::string bytes = BuildFixedTrace();
  std::string cut = bytes.substr(0, bytes.size() - 10);
  ReadResult r = ReadAll(WriteTemp("torn", cut));
  EXPECT_EQ(r.chunks, 1);
  EXPECT_GT(r.stats.truncated_tail_bytes, 0u);
  EXPECT_FALSE(r.stats.saw_footer);
  EXPECT_EQ(r.kernels, 3u);
}

// Returns the offset of the second chunk's frame header.
size_t SecondChunkOffset(const std::string& bytes) {
  size_t pos = kFileMagicSize;
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + pos + 8, 4);
  return pos + kFrameHeaderSize + stored;
}

TEST(TraceReader, TornFrameHeaderIsCountedAsTruncatedTail) {
  std::string bytes = BuildFixedTrace();
  size_t second = SecondChunkOffset(bytes);
  ReadResult r = ReadAll(WriteTemp("torn2", bytes.substr(0, second + 10)));
  EXPECT_EQ(r.chunks, 1);
  EXPECT_EQ(r.stats.truncated_tail_bytes, 10u);
  EXPECT_EQ(r.stats.skipped_bytes, 0u);
}

TEST(TraceReader, BadPayloadCrcSkipsOnlyThatChunk) {
  std::string bytes = BuildFixedTrace();
  bytes[kFileMagicSize + kFrameHeaderSize + 20] ^= 0x40;  // inside chunk 0's payload
  ReadResult r = ReadAll(WriteTemp("badcrc", bytes));
  EXPECT_EQ(r.stats.chunks_bad_crc, 1u);
  EXPECT_EQ(r.chunks, 1);
  EXPECT_EQ(r.kernels, 3u);  // chunk 1's kernels
  EXPECT_EQ(r.stats.sequence_gaps, 1u);
  EXPECT_TRUE(r.stats.saw_footer);
  auto lines = r.stats.Describe();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "1 chunk skipped: payload CRC mismatch");
}

TEST(TraceReader, GarbageBetweenChunksIsSkippedByResync) {
  std::string bytes = BuildFixedTrace();
  size_t second = SecondChunkOffset(bytes);
  std::string garbage = "KPCK garbage that looks a bit like a chunk magic KPCKKPCK.....";
  bytes.insert(second, garbage);
  ReadResult r = ReadAll(WriteTemp("garbage", bytes));
  EXPECT_EQ(r.chunks, 2);
  EXPECT_EQ(r.kernels, 6u);
  EXPECT_EQ(r.stats.chunks_bad_header, 1u);
  EXPECT_EQ(r.stats.skipped_bytes, garbage.size());
  EXPECT_EQ(r.stats.sequence_gaps, 0u);
}

TEST(TraceReader, DamagedFrameHeaderResyncsOnNextChunk) {
  std::string bytes = BuildFixedTrace();
  bytes[kFileMagicSize + 9] ^= 0x7f;  // chunk 0's stored_size: header CRC now fails
  ReadResult r = ReadAll(WriteTemp("badhdr", bytes));
  EXPECT_EQ(r.chunks, 1);
  EXPECT_EQ(r.stats.chunks_bad_header, 1u);
  EXPECT_EQ(r.stats.skipped_bytes, SecondChunkOffset(BuildFixedTrace()) - kFileMagicSize);
  EXPECT_EQ(r.stats.sequence_gaps, 1u);
}

TEST(TraceReader, NegativeDurationsAreCounted) {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000);
  Kernel* k = c.add_kernels();
  k->set_start(2000);
  k->set_duration(-5);
  w.Add(c);
  ReadResult r = ReadAll(WriteTemp("neg", w.bytes()));
  EXPECT_EQ(r.stats.negative_durations, 1u);
  EXPECT_EQ(r.stats.Describe().back(), "1 record with end before start (negative duration)");
}

// Fuzz-style: flip bytes and truncate a valid trace at every position; the reader must survive
// and, whenever it delivered fewer than all records, report damage or (for a cut exactly at a
// chunk boundary, indistinguishable from a killed process) the missing footer.
// A crafted chunk of 17 million empty kernel records (2 bytes each, 34 MB raw, a few KB with
// zstd) would make libprotobuf allocate gigabytes; the reader refuses it as undecodable and
// goes on with the next chunk.
TEST(TraceReader, ChunkWithTooManyRecordsIsRefusedBeforeParsing) {
  const size_t records = (16u << 20) + 1000;
  std::string raw;
  raw.reserve(records * 2);
  for (size_t i = 0; i < records; ++i) raw.append("\x42\x00", 2);  // Chunk.kernels = {}
  std::string stored(ZSTD_compressBound(raw.size()), '\0');
  size_t n = ZSTD_compress(&stored[0], stored.size(), raw.data(), raw.size(), 1);
  ASSERT_FALSE(ZSTD_isError(n));
  stored.resize(n);
  FrameHeader h;
  h.flags = kFrameFlagZstd;
  h.stored_size = static_cast<uint32_t>(stored.size());
  h.raw_size = static_cast<uint32_t>(raw.size());
  h.payload_crc = Crc32c(stored.data(), stored.size());
  uint8_t header[kFrameHeaderSize];
  EncodeFrameHeader(h, header);
  // A good trace, the bomb spliced in after its file magic, then the good chunks.
  const std::string good = BuildFixedTrace();
  std::string file = good.substr(0, kFileMagicSize);
  file.append(reinterpret_cast<const char*>(header), kFrameHeaderSize);
  file += stored;
  file += good.substr(kFileMagicSize);
  ReadResult r = ReadAll(WriteTemp("bomb.kptrace", file));
  EXPECT_EQ(r.stats.chunks_over_budget, 1u);  // the decode budget refuses it (chunk_budget.h)
  ReadResult reference = ReadAll(WriteTemp("good.kptrace", good));
  EXPECT_EQ(r.chunks, reference.chunks);
  EXPECT_EQ(r.kernels, reference.kernels);
}

TEST(TraceReader, SurvivesFlippedAndTruncatedBytesEverywhere) {
  for (int level : {0, 3}) {
    const std::string good = BuildFixedTrace({true, level});
    const uint64_t all_records = ReadAll(WriteTemp("fz_good", good)).records;
    std::string path = TempPath("fuzz");
    size_t step = good.size() > 3000 ? 3 : 1;
    for (size_t pos = kFileMagicSize; pos < good.size(); pos += step) {
      for (int variant = 0; variant < 3; ++variant) {
        std::string bad = good;
        if (variant == 0) bad[pos] ^= 0x01;
        if (variant == 1) bad[pos] = static_cast<char>(0xff);
        if (variant == 2) bad.resize(pos);
        if (bad == good) continue;
        WriteTemp("fuzz", bad);
        StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(path);
        ASSERT_TRUE(opened.ok()) << opened.status().message();
        std::unique_ptr<TraceReader>& reader = opened.value();
        Chunk c;
        while (reader->Next(&c)) {
          for (const Kernel& k : c.kernels()) {
            const KernelShape* s = reader->Shape(k.shape());
            if (s) reader->Str(s->name());
          }
        }
        const ReaderStats& st = reader->stats();
        if (st.records < all_records) {
          EXPECT_TRUE(!st.Describe().empty() || !st.saw_footer)
              << "pos " << pos << " variant " << variant;
        }
        EXPECT_LE(reader->position(), bad.size());
      }
    }
    std::remove(path.c_str());
  }
}

// Format versions 1 and 2 code kernel, copy, memset and API-call starts differently (proto
// ENCODING RULES), and version 3 writes kernels and API calls as columns; the same records
// written any way read back the same.
TEST(TraceReader, FormatVersionsOneTwoAndThreeReadBackTheSame) {
  Chunk c;
  c.set_time_base_ns(1000000);
  const int64_t starts[] = {1000000, 1002000, 1001500, 1009000, 1003000};
  const uint32_t streams[] = {7, 7, 8, 7, 8};
  for (int i = 0; i < 5; ++i) {
    Kernel* k = c.add_kernels();
    k->set_start(starts[i]);
    k->set_duration(700 + 10 * i);
    k->set_stream(streams[i]);
    k->set_context(1);
    k->set_correlation(10 + i);
    k->set_graph_node_id(i == 2 ? 1ull << 40 : 0);
    ApiCall* a = c.add_api_calls();
    a->set_start(starts[i] - 900);
    a->set_duration(i == 3 ? -5 : 400);  // a broken record's negative duration survives too
    a->set_thread_id(i % 2 ? 42 : 43);
    a->set_correlation(10 + i);
    a->set_domain(i % 2 ? API_DRIVER : API_RUNTIME);
    a->set_return_value(i == 1 ? -3 : 0);
    Memcpy* m = c.add_memcpys();
    m->set_start(starts[i] + 50);
    m->set_duration(300);
    m->set_stream(streams[i]);
    Memset* s = c.add_memsets();
    s->set_start(starts[4 - i]);
    s->set_duration(100);
    s->set_stream(streams[4 - i]);
  }
  const char versions[3] = {'1', '2', '3'};
  std::vector<Chunk> read[3];
  for (int v = 0; v < 3; ++v) {
    ProtoTraceWriter writer(0, versions[v]);
    writer.Add(c);
    StatusOr<std::unique_ptr<TraceReader>> opened =
        TraceReader::Open(WriteTemp(std::string("v") + versions[v], writer.bytes()));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    Chunk back;
    while (opened.value()->Next(&back)) read[v].push_back(back);
    ASSERT_EQ(read[v].size(), 1u);
    EXPECT_FALSE(read[v][0].has_kernel_columns());
  }
  for (int v = 0; v < 3; ++v) {
    const Chunk& r = read[v][0];
    ASSERT_EQ(r.kernels_size(), 5) << "version " << versions[v];
    ASSERT_EQ(r.api_calls_size(), 5) << "version " << versions[v];
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(r.kernels(i).start(), c.kernels(i).start()) << "version " << versions[v];
      EXPECT_EQ(r.kernels(i).correlation(), c.kernels(i).correlation());
      EXPECT_EQ(r.kernels(i).stream(), c.kernels(i).stream());
      EXPECT_EQ(r.kernels(i).graph_node_id(), c.kernels(i).graph_node_id());
      EXPECT_EQ(r.kernels(i).device(), 0u);
      EXPECT_EQ(r.api_calls(i).start(), c.api_calls(i).start()) << "version " << versions[v];
      EXPECT_EQ(r.api_calls(i).duration(), c.api_calls(i).duration());
      EXPECT_EQ(r.api_calls(i).domain(), c.api_calls(i).domain());
      EXPECT_EQ(r.api_calls(i).return_value(), c.api_calls(i).return_value());
      EXPECT_EQ(r.memcpys(i).start(), c.memcpys(i).start()) << "version " << versions[v];
      EXPECT_EQ(r.memsets(i).start(), c.memsets(i).start()) << "version " << versions[v];
    }
  }
}

// Version 3: a chunk's kernels are its rows followed by its columns' rows (one delta chain over
// both); a column of the wrong length, or columns claiming more records than the chunk's size
// allows, is damage: that chunk is skipped and counted, the others read on.
TEST(TraceReader, ColumnsFollowRowsAndBadColumnsAreDamage) {
  Chunk rows;
  rows.set_time_base_ns(5000);
  for (int i = 0; i < 4; ++i) {
    Kernel* k = rows.add_kernels();
    k->set_start(5000 + 100 * i);
    k->set_duration(10);
    k->set_stream(3);
    k->set_correlation(i + 1);
  }
  // Written as version 3: all four go to columns; then two move back to rows in front.
  ProtoTraceWriter writer(0, '3');
  writer.Add(rows);
  std::string good = writer.bytes();
  StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(WriteTemp("cols", good));
  ASSERT_TRUE(opened.ok());
  Chunk back;
  ASSERT_TRUE(opened.value()->Next(&back));
  ASSERT_EQ(back.kernels_size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back.kernels(i).start(), 5000 + 100 * i);

  Chunk mixed;
  mixed.set_time_base_ns(5000);
  mixed.add_kernels()->set_start(0);  // row: delta 0 from the time base
  mixed.mutable_kernels(0)->set_duration(10);
  KernelColumns* k = mixed.mutable_kernel_columns();
  k->set_count(2);
  k->add_start(100);  // from the end of the record before it on the same stream: 5110, 5220
  k->add_start(100);
  k->add_duration(10);
  k->add_duration(10);
  Chunk bad = mixed;
  bad.mutable_kernel_columns()->add_duration(10);  // three durations for two records
  Chunk huge;
  huge.mutable_kernel_columns()->set_count(50000000);  // 50 M records, all-zero columns
  std::string file(kFileMagic, kFileMagicSize);
  for (const Chunk* ch : {&mixed, &bad, &huge}) {
    std::string raw = ch->SerializeAsString();
    FrameHeader h;
    h.stored_size = h.raw_size = static_cast<uint32_t>(raw.size());
    h.payload_crc = Crc32c(raw.data(), raw.size());
    uint8_t hdr[kFrameHeaderSize];
    EncodeFrameHeader(h, hdr);
    file.append(reinterpret_cast<const char*>(hdr), kFrameHeaderSize);
    file += raw;
  }
  opened = TraceReader::Open(WriteTemp("mixed", file));
  ASSERT_TRUE(opened.ok());
  std::vector<Chunk> chunks;
  while (opened.value()->Next(&back)) chunks.push_back(back);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].kernels_size(), 3);
  EXPECT_EQ(chunks[0].kernels(0).start(), 5000);
  EXPECT_EQ(chunks[0].kernels(1).start(), 5110);
  EXPECT_EQ(chunks[0].kernels(2).start(), 5220);
  EXPECT_EQ(opened.value()->stats().chunks_undecodable, 1u);
  EXPECT_EQ(opened.value()->stats().chunks_over_budget, 1u);
}

// One Chunk read into again and again (as every command does): every field of every kernel and
// API call comes from the chunk just read, whether chunks grow, shrink or have none, and
// whether a field is set or left at 0 (then absent from the columns).
TEST(TraceReader, ChunksReadIntoOneChunkHoldOnlyTheirOwnValues) {
  auto make = [](int n, int seed) {
    Chunk c;
    c.set_time_base_ns(1000000);
    for (int i = 0; i < n; ++i) {
      const int v = seed * 100 + i;
      Kernel* k = c.add_kernels();
      k->set_start(1000000 + 1000 * i);
      k->set_duration(10 + v);
      k->set_shape(1 + v % 3);
      k->set_stream(v % 2 ? 7 : 0);
      k->set_correlation(v);
      k->set_context(v % 3);
      k->set_device(v % 2);
      k->set_graph_id(seed % 2 ? v : 0);  // every other chunk leaves these at 0
      k->set_graph_node_id(seed % 2 ? v + (1ull << 40) : 0);
      k->set_flags(seed % 2 ? 1 : 0);
      k->set_launch_type(seed % 2 ? 2 : 0);
      k->set_channel(seed % 2 ? 3 : 0);
      ApiCall* a = c.add_api_calls();
      a->set_start(1000000 + 1000 * i - 500);
      a->set_duration(seed % 2 ? 400 + v : 1);
      a->set_name(seed % 2 ? 5 : 0);
      a->set_domain(seed % 2 ? API_DRIVER : API_UNKNOWN);
      a->set_cbid(seed % 2 ? 9 : 0);
      a->set_thread_id(seed % 2 ? 42 : 0);
      a->set_correlation(v);
      a->set_return_value(seed % 2 ? -1 : 0);
    }
    return c;
  };
  const int sizes[] = {5, 3, 0, 7, 7, 2};
  std::vector<Chunk> written;
  ProtoTraceWriter writer(0, '3');
  for (int i = 0; i < 6; ++i) {
    written.push_back(make(sizes[i], i + 1));
    written.back().set_sequence(static_cast<uint64_t>(i));
    writer.Add(written.back());
  }
  StatusOr<std::unique_ptr<TraceReader>> opened =
      TraceReader::Open(WriteTemp("reuse", writer.bytes()));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Chunk back;
  for (const Chunk& want : written) {
    ASSERT_TRUE(opened.value()->Next(&back));
    ASSERT_EQ(back.kernels_size(), want.kernels_size());
    ASSERT_EQ(back.api_calls_size(), want.api_calls_size());
    for (int i = 0; i < want.kernels_size(); ++i) {
      EXPECT_EQ(back.kernels(i).SerializeAsString(), want.kernels(i).SerializeAsString())
          << "chunk " << want.sequence() << " kernel " << i;
      EXPECT_EQ(back.api_calls(i).SerializeAsString(), want.api_calls(i).SerializeAsString())
          << "chunk " << want.sequence() << " API call " << i;
    }
  }
  EXPECT_FALSE(opened.value()->Next(&back));
}

// Kernels' and API calls' deltas are undone before the chunk's sequence is checked: a duplicate
// chunk is dropped, and its records with negative durations do not count.
TEST(TraceReader, ADuplicateChunksNegativeDurationsAreNotCounted) {
  Chunk c;
  c.set_sequence(0);
  c.set_time_base_ns(1000);
  for (int i = 0; i < 3; ++i) {
    Kernel* k = c.add_kernels();
    k->set_start(1000 + 100 * i);
    k->set_duration(i == 1 ? -5 : 10);
    k->set_stream(1);
    k->set_correlation(i + 1);
    ApiCall* a = c.add_api_calls();
    a->set_start(990 + 100 * i);
    a->set_duration(i == 2 ? -7 : 10);
    a->set_thread_id(1);
    a->set_correlation(i + 1);
  }
  ProtoTraceWriter writer(0, '3');
  writer.Add(c);
  writer.Add(c);  // the same bytes again: a duplicate
  StatusOr<std::unique_ptr<TraceReader>> opened =
      TraceReader::Open(WriteTemp("duplicate_negative", writer.bytes()));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Chunk back;
  int chunks = 0;
  while (opened.value()->Next(&back)) ++chunks;
  EXPECT_EQ(chunks, 1);
  EXPECT_EQ(opened.value()->stats().chunks_duplicate, 1u);
  EXPECT_EQ(opened.value()->stats().negative_durations, 2u);
}

}  // namespace
}  // namespace kp
