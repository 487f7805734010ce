// Chunk decoder tests: the reader's own wire decoder (tools/reader/chunk_decoder.h) against
// libprotobuf's parse of the same bytes after the budget walk (chunk_budget.h), on a chunk that
// holds every record kind and on random mutations of it: whatever the two accept must decode to
// the same message and be charged the same decoded bytes.
#include "tools/reader/chunk_decoder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tools/reader/chunk_budget.h"
#include "tools/reader/chunk_columns.h"

namespace kp {
namespace {

// A chunk with every field of the records the decoder handles, and a few of the others.
Chunk RichChunk() {
  Chunk c;
  c.set_sequence(7);
  c.set_time_base_ns(1'700'000'000'000'000'000ull);
  for (uint32_t i = 1; i <= 5; ++i) {
    InternedString* s = c.add_strings();
    s->set_id(i);
    s->set_value("void kern<" + std::to_string(i) + ">(float*, int) \xc3\xa9");
  }
  KernelShape* sh = c.add_kernel_shapes();
  sh->set_id(1);
  sh->set_name(1);
  sh->set_demangled(2);
  sh->set_grid_x(1024);
  sh->set_grid_y(2);
  sh->set_grid_z(3);
  sh->set_block_x(256);
  sh->set_block_y(4);
  sh->set_block_z(5);
  sh->set_cluster_x(6);
  sh->set_cluster_y(7);
  sh->set_cluster_z(8);
  sh->set_registers_per_thread(64);
  sh->set_static_shared_bytes(4096);
  sh->set_dynamic_shared_bytes(0xffffffffu);
  sh->set_local_bytes_per_thread(9);
  sh->set_shared_executed_bytes(10);
  sh->set_device(1);
  for (int i = 0; i < 3; ++i) {
    Kernel* k = c.add_kernels();
    k->set_start(i == 0 ? -5 : 1000 * i);
    k->set_duration(i == 2 ? -1 : 123456789012);
    k->set_shape(1);
    k->set_stream(7);
    k->set_correlation(-3 + i);
    k->set_context(1);
    k->set_device(1);
    k->set_graph_id(4);
    k->set_graph_node_id(0xffffffffffffffffull);
    k->set_flags(RECORD_FLAG_ASYNC | RECORD_FLAG_DEVICE_LAUNCHED);
    k->set_launch_type(2);
    k->set_channel(3);
  }
  Memcpy* m = c.add_memcpys();
  m->set_start(1);
  m->set_duration(2);
  m->set_bytes(1ull << 40);
  m->set_copy_kind(COPY_PTOP);
  m->set_src_kind(MEMORY_PINNED);
  m->set_dst_kind(static_cast<MemoryKind>(99));  // open enum: unknown values stay
  m->set_stream(3);
  m->set_correlation(4);
  m->set_context(5);
  m->set_device(6);
  m->set_flags(RECORD_FLAG_ASYNC);
  m->set_graph_id(8);
  m->set_graph_node_id(9);
  m->set_peer(true);
  m->set_src_device(10);
  m->set_dst_device(11);
  m->set_src_context(12);
  m->set_dst_context(13);
  m->set_copy_count(14);
  m->set_channel(15);
  Memset* ms = c.add_memsets();
  ms->set_start(1);
  ms->set_duration(2);
  ms->set_bytes(3);
  ms->set_value(0xdeadbeef);
  ms->set_memory_kind(MEMORY_DEVICE);
  ms->set_stream(6);
  ms->set_correlation(7);
  ms->set_context(8);
  ms->set_device(9);
  ms->set_flags(10);
  ms->set_graph_id(11);
  ms->set_graph_node_id(12);
  ms->set_channel(13);
  ApiCall* a = c.add_api_calls();
  a->set_start(1);
  a->set_duration(2);
  a->set_name(3);
  a->set_domain(API_DRIVER);
  a->set_cbid(211);
  a->set_thread_id(4242);
  a->set_correlation(-9);
  a->set_return_value(-700);
  NvtxRange* r = c.add_nvtx_ranges();
  r->set_start(1);
  r->set_duration(2);
  r->set_name(3);
  r->set_domain(4);
  r->set_thread_id(5);
  r->set_end_thread_id(6);
  r->set_category(7);
  r->set_color(0xff00ff00u);
  r->set_has_color(true);
  r->mutable_payload()->set_f64(2.5);
  r->set_flags(RECORD_FLAG_OPEN);
  r->set_id(12);
  c.add_nvtx_ranges()->mutable_payload()->set_i32(-4);
  c.add_nvtx_ranges()->mutable_payload()->set_f32(1.5f);
  c.add_nvtx_ranges()->mutable_payload()->set_i64(-1);
  NvtxMark* mk = c.add_nvtx_marks();
  mk->set_time(-1);
  mk->set_name(2);
  mk->set_domain(3);
  mk->set_thread_id(4);
  mk->set_category(5);
  mk->set_color(6);
  mk->set_has_color(true);
  mk->mutable_payload()->set_u64(1ull << 63);
  c.add_nvtx_marks()->mutable_payload()->set_u32(77);
  Synchronization* sy = c.add_syncs();
  sy->set_start(1);
  sy->set_duration(2);
  sy->set_type(SYNC_STREAM_WAIT_EVENT);
  sy->set_stream(4);
  sy->set_context(5);
  sy->set_correlation(6);
  sy->set_event_id(7);
  sy->set_return_value(-8);
  Overhead* o = c.add_overheads();
  o->set_start(1);
  o->set_duration(2);
  o->set_kind(3);
  o->set_name(4);
  o->set_thread_id(5);
  o->set_device(6);
  o->set_correlation(7);
  GraphLaunch* g = c.add_graph_launches();
  g->set_start(1);
  g->set_duration(2);
  g->set_graph_id(3);
  g->set_device(4);
  g->set_context(5);
  g->set_stream(6);
  g->set_correlation(7);
  // Fields left to libprotobuf.
  Header* h = c.mutable_header();
  h->set_kp_version("1.2.3");
  h->add_command_line("python");
  h->add_command_line("train.py");
  KeyValue* kv = h->add_config();
  kv->set_key("KP_API");
  kv->set_value("launch");
  Device* d = c.add_devices();
  d->set_id(1);
  d->set_name("NVIDIA H200");
  d->set_uuid(std::string(16, '\xff'));
  c.add_contexts()->set_id(1);
  c.mutable_stats()->set_records_written(99);
  c.mutable_footer()->set_end_reason("exit");
  c.add_threads()->set_name("main");
  MetricConfig* mc = c.add_metric_configs();
  mc->add_metric_names("sm__throughput");
  MetricRange* mr = c.add_metric_ranges();
  mr->set_start(5);
  mr->add_values(1.0);
  mr->add_values(2.0);
  PmSample* pm = c.add_pm_samples();
  pm->set_start(3);
  pm->add_values(4.0);
  c.add_notices()->set_message("note");
  c.add_capture_windows()->set_range("step");
  c.add_pc_stall_reasons()->set_name("stall");
  PcStalls* pc = c.add_pc_stalls();
  pc->add_samples(3);
  pc->add_top_pcs()->add_samples(1);
  return c;
}

std::string Serialize(const Chunk& c) {
  std::string s;
  EXPECT_TRUE(c.SerializeToString(&s));
  return s;
}

uint8_t* Bytes(std::string& s) { return reinterpret_cast<uint8_t*>(s.data()); }

// What the reader did before it had its own decoder: the budget walk, then libprotobuf.
struct Reference {
  ChunkScanResult scan;
  bool parsed = false;
  Chunk chunk;
};
Reference ParseWithLibprotobuf(std::string bytes) {
  Reference r;
  r.scan = ScanChunk(Bytes(bytes), bytes.size(), DecodeBudget(bytes.size()));
  r.parsed = r.scan.well_formed && !r.scan.over_budget && r.chunk.ParseFromString(bytes);
  r.chunk.DiscardUnknownFields();  // the decoder keeps none
  return r;
}

struct Decoded {
  ChunkScanResult result;
  Chunk chunk;
  bool ok() const { return result.well_formed && !result.over_budget; }
};
Decoded Decode(std::string bytes, Chunk* reuse = nullptr) {
  Decoded d;
  Chunk* c = reuse != nullptr ? reuse : &d.chunk;
  d.result = DecodeChunk(Bytes(bytes), bytes.size(), DecodeBudget(bytes.size()), c);
  if (reuse != nullptr) d.chunk = *reuse;
  d.chunk.DiscardUnknownFields();
  return d;
}

void ExpectSame(const Reference& ref, const Decoded& got) {
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Serialize(got.chunk), Serialize(ref.chunk));
  EXPECT_EQ(got.result.decoded_bytes, ref.scan.decoded_bytes);
  EXPECT_EQ(got.result.entries, ref.scan.entries);
  EXPECT_EQ(got.result.strings_repaired, ref.scan.strings_repaired);
}

TEST(ChunkDecoder, DecodesEveryRecordKindAsLibprotobufDoes) {
  const std::string bytes = Serialize(RichChunk());
  const Reference ref = ParseWithLibprotobuf(bytes);
  ASSERT_TRUE(ref.parsed);
  ExpectSame(ref, Decode(bytes));
  // A reused chunk (the reader's) holds nothing of the chunk before.
  Chunk reused;
  Decode(bytes, &reused);
  Chunk small;
  small.set_sequence(1);
  small.add_kernels()->set_start(5);
  const std::string small_bytes = Serialize(small);
  ExpectSame(ParseWithLibprotobuf(small_bytes), Decode(small_bytes, &reused));
}

TEST(ChunkDecoder, UnknownFieldsAndOtherWireTypesAreChargedAndSkipped) {
  Chunk c = RichChunk();
  auto add_unknown = [](google::protobuf::Message* m) {
    google::protobuf::UnknownFieldSet* u = m->GetReflection()->MutableUnknownFields(m);
    u->AddVarint(1000, 5);
    u->AddFixed64(1001, 6);
    u->AddFixed32(1002, 7);
    u->AddLengthDelimited(1003, "abc");
    u->AddFixed64(Kernel::kStartFieldNumber, 8);  // a known number with another wire type
  };
  add_unknown(&c);
  add_unknown(c.mutable_kernels(0));
  add_unknown(c.mutable_strings(0));
  add_unknown(c.mutable_nvtx_ranges(0));
  add_unknown(c.mutable_nvtx_ranges(0)->mutable_payload());
  add_unknown(c.mutable_header());
  const std::string bytes = Serialize(c);
  const Reference ref = ParseWithLibprotobuf(bytes);
  ASSERT_TRUE(ref.parsed);
  ExpectSame(ref, Decode(bytes));
}

TEST(ChunkDecoder, InvalidUtf8IsRepairedInEveryStringField) {
  Chunk c = RichChunk();
  c.mutable_strings(1)->set_value(std::string("bad\xff\xfe name"));
  c.mutable_header()->set_hostname(std::string("host\xc0"));
  const std::string bytes = Serialize(c);
  const Reference ref = ParseWithLibprotobuf(bytes);
  ASSERT_TRUE(ref.parsed);
  const Decoded got = Decode(bytes);
  ExpectSame(ref, got);
  EXPECT_EQ(got.chunk.strings(1).value(), "bad?? name");
  EXPECT_EQ(got.chunk.header().hostname(), "host?");
  EXPECT_EQ(got.result.strings_repaired, 2u);
}

TEST(ChunkDecoder, StopsAtTheBudget) {
  Chunk c;
  for (int i = 0; i < 10000; ++i) c.add_kernels();  // 2 bytes each, ~100 bytes decoded
  std::string bytes = Serialize(c);
  Chunk out;
  const ChunkScanResult r = DecodeChunk(Bytes(bytes), bytes.size(), 50000, &out);
  EXPECT_TRUE(r.over_budget);
  EXPECT_EQ(out.kernels_size(), 0);  // refused from the framing, before any record was stored
  const ChunkScanResult full = DecodeChunk(Bytes(bytes), bytes.size(), 1u << 30, &out);
  EXPECT_FALSE(full.over_budget);
  EXPECT_EQ(full.decoded_bytes, ScanChunk(Bytes(bytes), bytes.size(), 1u << 30).decoded_bytes);
  EXPECT_EQ(out.kernels_size(), 10000);
  // Records with content pass the framing check and are refused as the decode charges them.
  Chunk named;
  for (int i = 0; i < 1000; ++i) named.add_strings()->set_value(std::string(40, 'x'));
  bytes = Serialize(named);
  const ChunkScanResult partial = DecodeChunk(Bytes(bytes), bytes.size(), 60000, &out);
  EXPECT_TRUE(partial.over_budget);
  EXPECT_EQ(partial.over_budget, ScanChunk(Bytes(bytes), bytes.size(), 60000).over_budget);
  EXPECT_LT(out.strings_size(), 1000);
}

// `good` with one to four random edits: a byte replaced or with one bit flipped, bytes removed or
// inserted, the end cut off (never down to nothing).
std::string Damaged(const std::string& good, std::mt19937_64& rng) {
  std::string bytes = good;
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = rng() % bytes.size();
    switch (rng() % 5) {
      case 0:
        bytes[at] = static_cast<char>(rng());
        break;
      case 1:
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
        break;
      case 2:
        bytes.erase(at, 1 + rng() % 8);
        break;
      case 3:
        bytes.insert(at, 1, static_cast<char>(rng()));
        break;
      default:
        bytes.resize(at);
        break;
    }
    if (bytes.empty()) bytes = good;
  }
  return bytes;
}

// Random damage: whatever libprotobuf (after the budget walk) accepted, the decoder accepts too,
// with the same content and the same charge; and it never reads outside the bytes (ASan).
TEST(ChunkDecoder, AgreesWithLibprotobufOnDamagedChunks) {
  Chunk rich = RichChunk();
  rich.mutable_kernels(0)
      ->GetReflection()
      ->MutableUnknownFields(rich.mutable_kernels(0))
      ->AddVarint(77, 1);
  const std::string good = Serialize(rich);
  std::mt19937_64 rng(12345);
  int agreed = 0, rejected_by_both = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const std::string bytes = Damaged(good, rng);
    const Reference ref = ParseWithLibprotobuf(bytes);
    const Decoded got = Decode(bytes);
    if (ref.parsed) {
      ExpectSame(ref, got);
      if (HasFailure()) {
        ADD_FAILURE() << "iteration " << iter;
        return;
      }
      ++agreed;
    } else if (!got.ok()) {
      ++rejected_by_both;
    }
  }
  EXPECT_GT(agreed, 1000);
  EXPECT_GT(rejected_by_both, 1000);
}

// Format version 3's columns, as the reader takes them: read from the chunk's bytes (spans)
// when they have the writers' form, by libprotobuf otherwise. Either way the expanded rows must
// be those of libprotobuf's parse followed by ExpandColumns.
Chunk ColumnChunk() {
  Chunk c;
  c.set_sequence(3);
  for (int i = 0; i < 40; ++i) {
    Kernel* k = c.add_kernels();
    k->set_start(i % 3 == 0 ? -1 - i : int64_t{1} << (i % 63));
    k->set_duration(i * 1000 - 7);
    k->set_shape(static_cast<uint32_t>(i % 4));
    k->set_stream(i % 2 == 0 ? 7u : 0xffffffffu);
    k->set_correlation(i == 5 ? INT64_MIN : i - 20);
    k->set_context(1);
    k->set_device(static_cast<uint32_t>(i % 2));
    k->set_graph_id(i > 30 ? 9u : 0u);
    k->set_graph_node_id(i == 39 ? UINT64_MAX : static_cast<uint64_t>(i));
    k->set_flags(RECORD_FLAG_ASYNC);
    k->set_launch_type(0);  // an all-zero column: left out
    k->set_channel(static_cast<uint32_t>(i % 5));
  }
  for (int i = 0; i < 30; ++i) {
    ApiCall* a = c.add_api_calls();
    a->set_start(i * 77 - 100);
    a->set_duration(i == 3 ? INT64_MAX : i);
    a->set_name(static_cast<uint32_t>(i + 1));
    a->set_domain(i % 2 == 0 ? API_RUNTIME : static_cast<ApiDomain>(-3));
    a->set_cbid(211);
    a->set_thread_id(4242);
    a->set_correlation(-i);
    a->set_return_value(i == 7 ? INT32_MIN : 0);
  }
  MoveToColumns(&c);
  Kernel* row = c.add_kernels();  // a row-form kernel, which comes before the column rows
  row->set_start(5);
  row->set_stream(7);
  return c;
}

// A chunk as the reader takes it: decoded, then its columns expanded with what is left of the
// columns budget; `result` is what the reader counts (over budget first, as it checks).
struct Expanded {
  enum Result { kOk, kUndecodable, kOverBudget } result = kUndecodable;
  bool ok = false;
  uint64_t decoded_bytes = 0;
  Chunk chunk;
};

Expanded Expand(std::string bytes, ColumnSpans* spans, Chunk* reuse = nullptr) {
  Expanded e;
  Chunk* c = reuse != nullptr ? reuse : &e.chunk;
  const ChunkScanResult r =
      DecodeChunk(Bytes(bytes), bytes.size(), DecodeBudget(bytes.size()), c, spans);
  e.decoded_bytes = r.decoded_bytes;
  if (r.over_budget) {
    e.result = Expanded::kOverBudget;
  } else if (r.well_formed) {
    const uint64_t budget = ColumnsDecodeBudget(bytes.size());
    switch (ExpandColumns(c, budget - std::min(budget, r.decoded_bytes), nullptr, nullptr, spans)) {
      case ColumnsResult::kOk:
        e.result = Expanded::kOk;
        break;
      case ColumnsResult::kOverBudget:
        e.result = Expanded::kOverBudget;
        break;
      case ColumnsResult::kMalformed:
        break;
    }
  }
  e.ok = e.result == Expanded::kOk;
  if (reuse != nullptr && e.ok) e.chunk = *reuse;
  e.chunk.DiscardUnknownFields();
  return e;
}

// The columns parsed by libprotobuf (the decoder without spans), then expanded.
Expanded ExpandParsed(std::string bytes) { return Expand(std::move(bytes), nullptr); }

Expanded ExpandFromSpans(std::string bytes, ColumnSpans* seen = nullptr) {
  ColumnSpans spans;
  Expanded e = Expand(std::move(bytes), &spans);
  if (seen != nullptr) *seen = spans;
  return e;
}

void ExpectSameRows(const Expanded& want, const Expanded& got) {
  ASSERT_EQ(got.result, want.result);
  if (want.ok) {
    EXPECT_EQ(got.decoded_bytes, want.decoded_bytes);  // charged alike
    EXPECT_EQ(Serialize(got.chunk), Serialize(want.chunk));
  }
}

TEST(ChunkDecoder, ColumnsReadFromTheBytesGiveLibprotobufsRows) {
  const std::string bytes = Serialize(ColumnChunk());
  ColumnSpans spans;
  const Expanded got = ExpandFromSpans(bytes, &spans);
  EXPECT_TRUE(spans.kernels.present);  // the writers' form is read from the bytes
  EXPECT_TRUE(spans.api_calls.present);
  const Expanded want = ExpandParsed(bytes);
  ASSERT_TRUE(want.ok);
  ExpectSameRows(want, got);
  Expanded parsed;  // libprotobuf's parse of the whole chunk
  ASSERT_TRUE(parsed.chunk.ParseFromString(bytes));
  ASSERT_EQ(ExpandColumns(&parsed.chunk, UINT64_MAX), ColumnsResult::kOk);
  parsed.ok = true;
  parsed.result = Expanded::kOk;
  parsed.decoded_bytes = got.decoded_bytes;  // (libprotobuf's parse does not charge)
  ExpectSameRows(parsed, got);
  EXPECT_EQ(got.chunk.kernels_size(), 41);
  EXPECT_EQ(got.chunk.kernels(0).start(), 5);  // the row-form kernel first
  EXPECT_EQ(got.chunk.kernels(40).graph_node_id(), UINT64_MAX);
  EXPECT_EQ(got.chunk.api_calls(1).domain(), static_cast<ApiDomain>(-3));
}

// Bytes of one length-delimited field.
std::string LengthField(int number, const std::string& body) {
  std::string s;
  auto varint = [&s](uint64_t v) {
    for (; v >= 0x80; v >>= 7) s.push_back(static_cast<char>(v | 0x80));
    s.push_back(static_cast<char>(v));
  };
  varint((static_cast<uint64_t>(number) << 3) | 2);
  varint(body.size());
  return s + body;
}

TEST(ChunkDecoder, OtherColumnFormsAreLeftToLibprotobuf) {
  // The chunk twice over: libprotobuf merges its column messages (columns concatenate, the
  // last count wins), so both refuse 80 values against a count of 40, and both take them once
  // the counts are mended.
  std::string twice = Serialize(ColumnChunk()) + Serialize(ColumnChunk());
  ExpectSameRows(ExpandParsed(twice), ExpandFromSpans(twice));
  EXPECT_FALSE(ExpandFromSpans(twice).ok);
  Chunk counts;
  counts.mutable_kernel_columns()->set_count(80);
  counts.mutable_api_call_columns()->set_count(60);
  twice += Serialize(counts);
  ColumnSpans spans;
  const Expanded got = ExpandFromSpans(twice, &spans);
  EXPECT_FALSE(spans.kernels.present);
  EXPECT_FALSE(spans.api_calls.present);
  ASSERT_TRUE(got.ok);
  ExpectSameRows(ExpandParsed(twice), got);
  Chunk whole;
  ASSERT_TRUE(whole.ParseFromString(twice));
  EXPECT_EQ(whole.kernel_columns().shape_size(), 80);
  EXPECT_EQ(got.chunk.kernels_size(), 82);  // two row-form kernels, then 80 column rows
  EXPECT_EQ(got.chunk.api_calls_size(), 60);
  EXPECT_EQ(got.chunk.kernels(81).graph_node_id(), UINT64_MAX);

  // Unpacked column values (each value its own field), and an unknown field in the message.
  std::string body;
  for (int i = 0; i < 3; ++i) body += std::string{0x18, static_cast<char>(10 + i)};  // shape
  body += std::string{0x78, 3};                                                      // count
  body += std::string{static_cast<char>(0xa0), 0x06, 1};  // field 100, varint
  const std::string unpacked = LengthField(Chunk::kKernelColumnsFieldNumber, body);
  const Expanded u = ExpandFromSpans(unpacked, &spans);
  EXPECT_FALSE(spans.kernels.present);
  ASSERT_TRUE(u.ok);
  ExpectSameRows(ExpandParsed(unpacked), u);
  ASSERT_EQ(u.chunk.kernels_size(), 3);
  EXPECT_EQ(u.chunk.kernels(2).shape(), 12u);
}

TEST(ChunkDecoder, ColumnValuesCutShortOrTooLongAreRefusedAsByLibprotobuf) {
  auto columns = [](const std::string& shape_values, uint32_t count) {
    std::string body = LengthField(KernelColumns::kShapeFieldNumber, shape_values);
    body += std::string{0x78, static_cast<char>(count)};
    return LengthField(Chunk::kKernelColumnsFieldNumber, body);
  };
  const std::string good = columns(std::string{1, static_cast<char>(0x80), 1}, 2);
  const std::string cut = columns(std::string{1, static_cast<char>(0x80)}, 2);
  const std::string eleven = columns(std::string(10, static_cast<char>(0xff)) + '\1', 1);
  const std::string ten = columns(std::string(9, static_cast<char>(0xff)) + '\1', 1);
  const std::string wide = columns(std::string(5, static_cast<char>(0xff)) + '\1', 1);
  for (const std::string& bytes : {good, cut, eleven, ten, wide}) {
    ColumnSpans spans;
    const Expanded got = ExpandFromSpans(bytes, &spans);
    EXPECT_TRUE(spans.kernels.present);
    ExpectSameRows(ExpandParsed(bytes), got);
  }
  EXPECT_TRUE(ExpandFromSpans(good).ok);
  EXPECT_FALSE(ExpandFromSpans(cut).ok);
  EXPECT_FALSE(ExpandFromSpans(eleven).ok);
  ASSERT_TRUE(ExpandFromSpans(ten).ok);
  ASSERT_TRUE(ExpandFromSpans(wide).ok);
  EXPECT_EQ(ExpandFromSpans(wide).chunk.kernels(0).shape(), 0xffffffffu);  // cut to 32 bits
}

// One Chunk decoded into again and again, as the reader does: the records of the chunk before
// are kept uncleared and overwritten by the next chunk's column rows, or cleared when a chunk
// has row-form records, no columns, damaged columns or a second column message. Every chunk
// must read exactly as it does decoded into a fresh Chunk.
TEST(ChunkDecoder, RecordsKeptFromTheChunkBeforeNeverShowThrough) {
  auto columns = [](int kernels, int api_calls, int seed) {
    Chunk c = ColumnChunk();
    c.clear_kernel_columns();
    c.clear_api_call_columns();
    c.clear_kernels();
    c.clear_api_calls();
    for (int i = 0; i < kernels; ++i) {
      Kernel* k = c.add_kernels();
      k->set_start(seed * 1000 + i);
      k->set_shape(static_cast<uint32_t>(seed));
      k->set_graph_node_id(seed % 2 == 0 ? 0 : static_cast<uint64_t>(i) << 40);
    }
    for (int i = 0; i < api_calls; ++i) {
      ApiCall* a = c.add_api_calls();
      a->set_name(static_cast<uint32_t>(seed + i));
      a->set_return_value(seed % 3 == 0 ? 0 : -seed);
    }
    MoveToColumns(&c);
    return Serialize(c);
  };
  std::string rows = Serialize(RichChunk());  // row-form kernels and API calls
  std::string damaged = columns(6, 2, 9);
  damaged.back() ^= 0x80;  // the API calls' count column cut short
  std::string twice = columns(4, 3, 4) + columns(2, 1, 5);
  const std::vector<std::string> sequence = {
      columns(50, 20, 1), columns(10, 30, 2), rows,  columns(40, 0, 3), damaged, columns(0, 5, 6),
      Serialize(Chunk()), columns(60, 60, 7), twice, columns(3, 3, 8)};
  Chunk reused;
  int checked = 0;
  for (size_t i = 0; i < sequence.size(); ++i) {
    ColumnSpans spans;
    const Expanded got = Expand(sequence[i], &spans, &reused);
    ColumnSpans fresh_spans;
    const Expanded want = Expand(sequence[i], &fresh_spans);
    ExpectSameRows(want, got);
    if (HasFailure()) {
      ADD_FAILURE() << "chunk " << i;
      return;
    }
    checked += got.ok;
  }
  EXPECT_EQ(checked, static_cast<int>(sequence.size()) - 2);  // all but `damaged` and `twice`
}

// Random damage to a chunk of columns: the reader's rows are libprotobuf's, or both refuse.
TEST(ChunkDecoder, ColumnsAgreeWithLibprotobufOnDamagedChunks) {
  const std::string good = Serialize(ColumnChunk());
  std::mt19937_64 rng(777);
  int agreed = 0, refused_by_both = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const std::string bytes = Damaged(good, rng);
    const Expanded want = ExpandParsed(bytes);
    const Expanded got = ExpandFromSpans(bytes);
    ExpectSameRows(want, got);
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << iter;
      return;
    }
    (want.ok ? agreed : refused_by_both)++;
  }
  EXPECT_GT(agreed, 1000);
  EXPECT_GT(refused_by_both, 1000);
}

}  // namespace
}  // namespace kp
