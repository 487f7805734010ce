// Perfetto exporter tests: a fixed trace written with the injector's own encoder, exported, and
// decoded with real libprotobuf classes generated from tests/data/perfetto (field numbers from
// docs/outputs.md). Also home of the fixed trace and the export driver shared with chrome_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "perfetto_trace_subset.pb.h"
#include "tests/unit/status_assertions.h"
#include "tools/export/exporter.h"
#include "tools/export/perfetto_exporter.h"
#include "tools/export/timeline_layout.h"
#include "tools/reader/trace_reader.h"

namespace kp_export_test {

// What the fixed trace holds, for the checks.
struct FixedTraceCounts {
  int kernels = 0, memcpys = 0, memsets = 0, api = 0, nvtx = 0, marks = 0, metric_ranges = 0;
  int internal_kernels = 0;
  uint64_t start_ns = 0;  // header start_time_trace_ns
  std::vector<uint64_t> kernel_starts;
};

constexpr uint64_t kT0 = 1'700'000'000'000'000'000ull;  // epoch-like ns: needs 64 bits
// (Valid UTF-8 only: kptrace.proto strings are proto3 `string`, which libprotobuf validates.)
const char kOddKernel[] = "void odd<int, \"q\\\">(float*)\x01\t end";

// Writes an encoded trace to `path`.
void WriteTrace(const kp::MemoryChunkSink& sink, const std::string& path) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(sink.file().data()),
             static_cast<std::streamsize>(sink.file().size()));
}

// Writes a small but complete trace: two streams, kernels (one profiler-internal, one with a
// name full of JSON hazards), copies, memsets, launch calls on one thread, nested NVTX ranges,
// a mark, a metric range; two chunks. Returns the file's bytes written to `path`.
FixedTraceCounts WriteFixedTrace(const std::string& path, uint32_t pid) {
  FixedTraceCounts c;
  kp::MemoryChunkSink sink(0);
  kp::TraceEncoder::Options opt;
  kp::TraceEncoder enc(&sink, opt);
  kp::HeaderInfo h;
  h.kp_version = "0.1.0";
  h.pid = pid;
  h.hostname = "node1";
  h.command_line = {"/usr/bin/python3", "train.py", "--steps=2"};
  h.start_time_unix_ns = kT0;
  h.start_time_trace_ns = kT0;
  h.clock = "CLOCK_REALTIME";
  h.config = {{"KP_API", "launch"}};
  enc.SetHeader(h);
  c.start_ns = kT0;
  kp::DeviceInfo d;
  d.id = 0;
  d.name = "NVIDIA H200";
  enc.AddDevice(d);
  enc.AddThreadName(101, "main");
  kp::MetricConfigInfo mc;
  mc.metric_names = {"dram__bytes_read.sum", "gpu__time_duration.sum"};
  mc.num_passes = 1;
  mc.mode = "range";
  mc.chip = "GH100";
  uint32_t cfg = enc.AddMetricConfig(mc);

  uint32_t corr = 1;
  for (int chunk = 0; chunk < 2; ++chunk) {
    uint64_t base = kT0 + 1000 + chunk * 100000;
    for (int i = 0; i < 10; ++i) {
      uint64_t t = base + i * 2000;
      kp::ApiRecord a;
      a.name = "cudaLaunchKernel_v7000";
      a.domain = 1;
      a.start = t;
      a.end = t + 300;
      a.thread_id = 101;
      a.correlation = corr;
      enc.AddApi(a);
      ++c.api;
      kp::KernelRecord k;
      k.name = i == 3 ? kOddKernel : "_Z7stencilPfS_i";
      k.start = t + 1000;
      // Back-to-back on a stream: kernel i (stream 7, odd i) ends where kernel i+2 starts.
      k.end = t + 1000 + (i % 2 == 1 ? 4000 : 700);
      k.grid[0] = 128;
      k.grid[1] = k.grid[2] = 1;
      k.block[0] = 256;
      k.block[1] = k.block[2] = 1;
      k.registers_per_thread = 32;
      k.static_shared = 1024;
      k.dynamic_shared = 4096;
      k.stream = i % 2 == 1 ? 7 : 13;
      k.correlation = corr;
      if (i == 8) k.flags = 2;  // RECORD_FLAG_PROFILER_INTERNAL
      enc.AddKernel(k);
      c.internal_kernels += i == 8;
      ++c.kernels;
      c.kernel_starts.push_back(k.start);
      ++corr;
    }
    // A copy and a memset launched from the same thread, on stream 13 after the kernels.
    uint64_t t = base + 30000;
    kp::ApiRecord a;
    a.name = "cudaMemcpyAsync_v3020";
    a.domain = 1;
    a.start = t;
    a.end = t + 500;
    a.thread_id = 101;
    a.correlation = corr;
    enc.AddApi(a);
    ++c.api;
    kp::MemcpyRecord m;
    m.start = t + 600;
    m.end = t + 1600;
    m.bytes = 1 << 20;
    m.copy_kind = 1;
    m.src_kind = 2;
    m.dst_kind = 3;
    m.stream = 13;
    m.correlation = corr++;
    enc.AddMemcpy(m);
    ++c.memcpys;
    a.name = "cudaMemsetAsync_v3020";
    a.start = t + 2000;
    a.end = t + 2200;
    a.correlation = corr;
    enc.AddApi(a);
    ++c.api;
    kp::MemsetRecord s;
    s.start = t + 3000;
    s.end = t + 3100;
    s.bytes = 4096;
    s.stream = 13;
    s.correlation = corr++;
    enc.AddMemset(s);
    ++c.memsets;
    // NVTX: "step" around everything of this chunk, "forward" around the first launches.
    kp::NvtxRangeRecord r;
    r.name = "step";
    r.domain = "train";
    r.start = base - 10;
    r.end = base + 40000;
    r.thread_id = 101;
    r.payload.kind = kp::NvtxPayloadValue::kI64;
    r.payload.i64 = chunk;
    enc.AddNvtxRange(r);
    r = kp::NvtxRangeRecord();
    r.name = "forward";
    r.start = base - 5;
    r.end = base + 6000;
    r.thread_id = 101;
    enc.AddNvtxRange(r);
    c.nvtx += 2;
    kp::NvtxMarkRecord mark;
    mark.name = "checkpoint";
    mark.time = base + 35000;
    mark.thread_id = 101;
    enc.AddNvtxMark(mark);
    ++c.marks;
    double values[2] = {1.5e9, 6000.0};
    kp::MetricRangeRecord mr;
    mr.config = cfg;
    mr.name = "forward";
    mr.occurrence = chunk;
    mr.occurrences_used = 1;
    mr.start = base - 5;
    mr.end = base + 6000;
    mr.values = values;
    mr.num_values = 2;
    mr.thread_id = 101;
    mr.nesting_level = 1;
    enc.AddMetricRange(mr);
    ++c.metric_ranges;
    if (chunk == 0) enc.Flush(true);
  }
  kp::FooterInfo f;
  f.end_time_ns = kT0 + 1'000'000;
  f.end_reason = "exit";
  enc.Finish(f);
  WriteTrace(sink, path);
  return c;
}

// Drives an exporter the way `kptrace convert` does.
kp::Status ExportFiles(kp::Exporter& exporter, const std::vector<std::string>& paths) {
  if (kp::Status begun = exporter.Begin(); !begun.ok()) return begun;
  for (size_t i = 0; i < paths.size(); ++i) {
    kp::StatusOr<std::unique_ptr<kp::TraceReader>> opened = kp::TraceReader::Open(paths[i]);
    if (!opened.ok()) return opened.status();
    std::unique_ptr<kp::TraceReader>& reader = opened.value();
    kp::Chunk chunk;
    bool have = reader->Next(&chunk);
    exporter.BeginFile(static_cast<int>(i), *reader);
    while (have) {
      exporter.AddChunk(static_cast<int>(i), *reader, chunk);
      have = reader->Next(&chunk);
    }
  }
  return exporter.End();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fixed trace (pid 4242) written to `input` and converted to Perfetto at `output`: the
// output's bytes ("" when the export failed, which is a test failure). `want`: its counts.
std::string FixedTraceAsPerfetto(const std::string& input, const std::string& output,
                                 FixedTraceCounts* want = nullptr) {
  FixedTraceCounts counts = WriteFixedTrace(input, 4242);
  if (want != nullptr) *want = counts;
  kp::ExportOptions opt;
  opt.output = output;
  kp::PerfettoExporter exporter(opt);
  const kp::Status exported = ExportFiles(exporter, {input});
  EXPECT_TRUE(IsOk(exported));
  return exported.ok() ? ReadFile(output) : std::string();
}

// Compares `actual` with tests/data/golden/<name>; KP_UPDATE_GOLDEN=1 rewrites the golden file.
void ExpectGolden(const std::string& name, const std::string& actual) {
  std::string path = std::string(KP_TEST_DATA_DIR) + "/golden/" + name;
  const char* update = std::getenv("KP_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::string expected = ReadFile(path);
  ASSERT_FALSE(expected.empty()) << path << " missing: run with KP_UPDATE_GOLDEN=1";
  EXPECT_TRUE(expected == actual) << name << " differs from " << path
                                  << " (regenerate with KP_UPDATE_GOLDEN=1 if intended)";
}

// A trace of one process (`pid`, started at kT0) built record by record through `enc`, for
// ExportEncoded.
struct EncodedTrace {
  explicit EncodedTrace(uint32_t pid, std::vector<std::string> command_line = {}) {
    kp::HeaderInfo h;
    h.pid = pid;
    h.start_time_trace_ns = kT0;
    h.command_line = std::move(command_line);
    enc.SetHeader(h);
  }
  kp::MemoryChunkSink sink{0};
  kp::TraceEncoder enc{&sink, kp::TraceEncoder::Options()};
};

// Writes an encoded trace to STEM.kptrace and converts it to STEM.pftrace; the converter's
// anomalies.
kp::TimelineAnomalies ExportEncoded(const kp::MemoryChunkSink& sink, const std::string& stem) {
  WriteTrace(sink, stem + ".kptrace");
  kp::ExportOptions opt;
  opt.output = stem + ".pftrace";
  kp::PerfettoExporter exporter(opt);
  EXPECT_TRUE(IsOk(ExportFiles(exporter, {stem + ".kptrace"})));
  return exporter.anomalies();
}

// An event's track and time as trace_processor resolves them: a sequence's
// trace_packet_defaults give the track (track_event_defaults) and the clock of its packets'
// times; a sequence clock (ids 64..127) is related to BOOTTIME by the sequence's clock
// snapshot, and an incremental one adds each packet's time to its last; a packet's own
// timestamp_clock_id overrides the default. Fed every packet in file order.
class SequenceResolver {
 public:
  // Takes the packet's defaults and clock snapshot; for a track event, sets *track and *ts.
  void Take(const kp_test::perfetto::TracePacket& pkt, uint64_t* track, uint64_t* ts) {
    State& st = sequences_[pkt.trusted_packet_sequence_id()];
    if (pkt.sequence_flags() & 1) st = State();
    if (pkt.has_trace_packet_defaults()) {
      const auto& d = pkt.trace_packet_defaults();
      st.track = d.track_event_defaults().track_uuid();
      st.has_default_track = d.track_event_defaults().has_track_uuid();
      st.clock_id = d.timestamp_clock_id();
    }
    if (pkt.has_clock_snapshot()) {
      uint64_t own = 0, boottime = 0;
      bool has_own = false, has_boottime = false;
      for (const auto& c : pkt.clock_snapshot().clocks()) {
        if (c.clock_id() >= 64 && c.clock_id() == st.clock_id) {
          own = c.timestamp();
          has_own = true;
          st.incremental = c.is_incremental();
        }
        if (c.clock_id() == 6) {
          boottime = c.timestamp();
          has_boottime = true;
        }
      }
      EXPECT_TRUE(!has_own || has_boottime) << "a sequence clock without BOOTTIME beside it";
      if (has_own) {
        st.clock = own;
        st.offset = boottime - own;
        st.clock_known = true;
      }
    }
    if (!pkt.has_track_event()) return;
    const auto& te = pkt.track_event();
    EXPECT_TRUE(te.has_track_uuid() || st.has_default_track) << "an event without a track";
    *track = te.has_track_uuid() ? te.track_uuid() : st.track;
    const uint32_t clock = pkt.has_timestamp_clock_id() ? pkt.timestamp_clock_id() : st.clock_id;
    if (clock >= 64) {
      EXPECT_TRUE(st.clock_known) << "sequence clock " << clock << " used before its snapshot";
      st.clock = st.incremental ? st.clock + pkt.timestamp() : pkt.timestamp();
      *ts = st.clock + st.offset;
    } else {
      EXPECT_TRUE(clock == 0 || clock == 6) << "clock " << clock;
      *ts = pkt.timestamp();
    }
  }
  // Whether the sequence's events take their track from its defaults.
  bool HasDefaultTrack(uint32_t sequence) { return sequences_[sequence].has_default_track; }

 private:
  struct State {
    uint64_t track = 0;
    bool has_default_track = false;
    uint32_t clock_id = 0;
    bool incremental = false, clock_known = false;
    uint64_t clock = 0, offset = 0;
  };
  std::map<uint32_t, State> sequences_;
};

// Counts of what a Perfetto file holds, per kind, decoded with libprotobuf.
struct PerfettoCounts {
  int kernels = 0, memcpys = 0, memsets = 0, api = 0, nvtx = 0, marks = 0, counters = 0;
  int metric_slices = 0;
  int syncs = 0, overheads = 0;
};

// Decodes and validates a Perfetto trace; fills counts. Every check failure is a test failure.
PerfettoCounts DecodeAndCheckPerfetto(const std::string& bytes,
                                      std::vector<uint64_t>* kernel_begin_ts = nullptr,
                                      std::vector<std::string>* names = nullptr,
                                      bool launch_calls_present = true,
                                      const std::multiset<uint64_t>* ends_without_start = nullptr) {
  PerfettoCounts counts;
  kp_test::perfetto::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(bytes));
  std::map<uint64_t, kp_test::perfetto::TrackDescriptor> tracks;
  std::map<uint32_t, std::map<uint64_t, std::string>> event_names, arg_names, string_values;
  std::set<uint32_t> sequences_started;
  struct Ev {
    uint64_t ts;
    int type;
    size_t order;
  };
  std::map<uint64_t, std::vector<Ev>> per_track;
  std::multiset<uint64_t> flow_starts, flow_ends;
  size_t order = 0;
  SequenceResolver resolver;
  for (const auto& pkt : trace.packet()) {
    ++order;
    uint32_t seq = pkt.trusted_packet_sequence_id();
    uint64_t track = 0, ts = 0;
    resolver.Take(pkt, &track, &ts);
    EXPECT_NE(seq, 0u);
    if (sequences_started.count(seq) == 0) {
      EXPECT_TRUE(pkt.sequence_flags() & 1)
          << "first packet of sequence " << seq << " must clear incremental state";
      sequences_started.insert(seq);
    }
    for (const auto& e : pkt.interned_data().event_names()) {
      EXPECT_GE(e.iid(), 1u);
      EXPECT_TRUE(event_names[seq].emplace(e.iid(), e.name()).second) << "iid reused";
    }
    for (const auto& e : pkt.interned_data().debug_annotation_names()) {
      EXPECT_TRUE(arg_names[seq].emplace(e.iid(), e.name()).second);
    }
    for (const auto& e : pkt.interned_data().debug_annotation_string_values()) {
      EXPECT_GE(e.iid(), 1u);
      EXPECT_TRUE(string_values[seq].emplace(e.iid(), e.name()).second) << "value iid reused";
    }
    if (pkt.has_track_descriptor()) {
      const auto& td = pkt.track_descriptor();
      EXPECT_NE(td.uuid(), 0u);
      if (td.has_parent_uuid()) {
        EXPECT_TRUE(tracks.count(td.parent_uuid())) << "parent described after child";
      }
      tracks[td.uuid()] = td;
    }
    if (!pkt.has_track_event()) continue;
    const auto& te = pkt.track_event();
    // Flag 2 (needs incremental state) on every event that refers to interned data or to its
    // sequence's defaults (a track's own sequence: its track and clock); a slice's end on a
    // file's sequence refers to neither and sets no flag.
    if (te.type() == 2) {
      EXPECT_EQ(pkt.sequence_flags(), resolver.HasDefaultTrack(seq) ? 2u : 0u);
      EXPECT_FALSE(te.has_name_iid());
      EXPECT_EQ(te.debug_annotations_size(), 0);
      EXPECT_FALSE(pkt.has_interned_data());
    } else {
      EXPECT_TRUE(pkt.sequence_flags() & 2);
    }
    // A track's own sequence holds that track's events only.
    if (resolver.HasDefaultTrack(seq)) {
      EXPECT_FALSE(te.has_track_uuid());
    }
    auto track_it = tracks.find(track);
    EXPECT_TRUE(track_it != tracks.end()) << "event before its track descriptor";
    if (track_it == tracks.end()) continue;
    const auto& td = track_it->second;
    per_track[track].push_back({ts, te.type(), order});
    EXPECT_EQ(te.flow_ids_size(), 0);
    EXPECT_EQ(te.terminating_flow_ids_size(), 0);
    if (te.has_legacy_event() && te.legacy_event().has_bind_id()) {
      const auto& le = te.legacy_event();
      EXPECT_TRUE(le.flow_direction() == 1 || le.flow_direction() == 2);
      (le.flow_direction() == 2 ? flow_starts : flow_ends).insert(le.bind_id());
    }
    for (const auto& da : te.debug_annotations()) {
      EXPECT_TRUE(arg_names[seq].count(da.name_iid())) << "annotation name iid unresolved";
      if (da.has_string_value_iid()) {
        EXPECT_TRUE(string_values[seq].count(da.string_value_iid()))
            << "annotation string value iid unresolved";
      }
    }
    std::string name;
    if (te.type() != 2 && te.type() != 4) {
      auto n = event_names[seq].find(te.name_iid());
      EXPECT_TRUE(n != event_names[seq].end()) << "event name iid " << te.name_iid();
      if (n != event_names[seq].end()) name = n->second;
      if (names != nullptr) names->push_back(name);
    }
    if (te.type() == 1) {  // SLICE_BEGIN
      if (td.name().rfind("stream ", 0) == 0) {
        if (name.rfind("Memcpy", 0) == 0) {
          ++counts.memcpys;
        } else if (name == "Memset") {
          ++counts.memsets;
        } else {
          ++counts.kernels;
          if (kernel_begin_ts != nullptr) kernel_begin_ts->push_back(ts);
        }
      } else if (td.has_thread()) {
        if (name.rfind("cuda", 0) == 0) {
          ++counts.api;
        } else {
          ++counts.nvtx;
        }
      } else if (td.name() == "metrics") {
        ++counts.metric_slices;
      } else if (td.name().rfind("CUDA sync", 0) == 0) {
        ++counts.syncs;
      } else if (td.name().rfind("CUPTI overhead", 0) == 0) {
        ++counts.overheads;
      }
    } else if (te.type() == 3) {
      ++counts.marks;
    } else if (te.type() == 4) {
      EXPECT_TRUE(td.has_counter());
      ++counts.counters;
    }
  }
  // BEGIN/END balanced per track, in the order trace_processor applies them (time, then file
  // order for ties).
  for (auto& [uuid, evs] : per_track) {
    std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) { return a.ts < b.ts; });
    int depth = 0;
    for (const Ev& e : evs) {
      if (e.type == 1) ++depth;
      if (e.type == 2) {
        --depth;
        EXPECT_GE(depth, 0) << "END without BEGIN on track " << tracks[uuid].name();
      }
    }
    EXPECT_EQ(depth, 0) << "unbalanced track " << tracks[uuid].name();
  }
  // Every arrow end has its start (GPU work without a launch call in the trace, such as the
  // range profiler's own kernels, gets no arrow); one launch may have several ends (graphs).
  for (uint64_t end : flow_ends) EXPECT_TRUE(flow_starts.count(end)) << "arrow end without start";
  if (launch_calls_present && ends_without_start == nullptr) {
    EXPECT_EQ(std::set<uint64_t>(flow_starts.begin(), flow_starts.end()),
              std::set<uint64_t>(flow_ends.begin(), flow_ends.end()))
        << "every launch arrow ends";
  }
  if (!launch_calls_present) {
    EXPECT_TRUE(flow_starts.empty() && flow_ends.empty());
  }
  return counts;
}

}  // namespace kp_export_test

namespace {

using namespace kp_export_test;

TEST(PerfettoExporter, DecodesWithLibprotobufAndHoldsEveryRecord) {
  const std::string in = "perfetto_test_input.kptrace";
  FixedTraceCounts want = WriteFixedTrace(in, 4242);
  kp::ExportOptions opt;
  opt.output = "perfetto_test_output.pftrace";
  kp::PerfettoExporter exporter(opt);
  std::string err;
  ASSERT_TRUE(IsOk(ExportFiles(exporter, {in})));
  std::vector<uint64_t> kernel_ts;
  std::vector<std::string> names;
  PerfettoCounts got = DecodeAndCheckPerfetto(ReadFile(opt.output), &kernel_ts, &names);
  EXPECT_EQ(got.kernels, want.kernels);
  EXPECT_EQ(got.memcpys, want.memcpys);
  EXPECT_EQ(got.memsets, want.memsets);
  EXPECT_EQ(got.api, want.api);
  EXPECT_EQ(got.nvtx, want.nvtx);
  EXPECT_EQ(got.marks, want.marks);
  EXPECT_EQ(got.metric_slices, want.metric_ranges);
  EXPECT_EQ(got.counters, want.metric_ranges * 2);
  std::sort(kernel_ts.begin(), kernel_ts.end());
  std::sort(want.kernel_starts.begin(), want.kernel_starts.end());
  EXPECT_EQ(kernel_ts, want.kernel_starts) << "absolute ns timestamps kept";
  EXPECT_EQ(std::count_if(names.begin(), names.end(),
                          [](const std::string& n) { return n.rfind("[kp profiler] ", 0) == 0; }),
            want.internal_kernels);
  EXPECT_EQ(exporter.anomalies().gpu_records_on_extra_lanes, 0u);
}

// A kernel's mangled name, grid, block and cluster and a copy's kinds repeat on every record:
// they are interned values (debug_annotation_string_values), each text written once per
// sequence, and resolve to the record's own values.
TEST(PerfettoExporter, RepeatedArgumentValuesAreInterned) {
  FixedTraceCounts want;
  const std::string bytes = FixedTraceAsPerfetto("perfetto_values_input.kptrace",
                                                 "perfetto_values_output.pftrace", &want);
  ASSERT_FALSE(bytes.empty());
  kp_test::perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes));
  // Interned ids name their sequence's entries.
  std::map<uint32_t, std::map<uint64_t, std::string>> arg_names, values;
  std::map<std::pair<uint32_t, std::string>, int> times_interned;  // (sequence, text)
  std::map<std::string, std::multiset<std::string>> seen;  // argument name -> resolved values
  size_t inline_strings = 0;
  for (const auto& pkt : trace.packet()) {
    const uint32_t seq = pkt.trusted_packet_sequence_id();
    for (const auto& e : pkt.interned_data().debug_annotation_names())
      arg_names[seq][e.iid()] = e.name();
    for (const auto& e : pkt.interned_data().debug_annotation_string_values()) {
      values[seq][e.iid()] = e.name();
      ++times_interned[{seq, e.name()}];
    }
    if (!pkt.has_track_event()) continue;
    for (const auto& da : pkt.track_event().debug_annotations()) {
      const std::string& name = arg_names[seq][da.name_iid()];
      if (da.has_string_value_iid()) {
        ASSERT_TRUE(values[seq].count(da.string_value_iid())) << name;
        seen[name].insert(values[seq][da.string_value_iid()]);
      } else if (da.has_string_value() &&
                 (name == "mangled name" || name == "grid" || name == "src memory")) {
        ++inline_strings;
      }
    }
  }
  EXPECT_EQ(inline_strings, 0u);
  for (const auto& [key, n] : times_interned) {
    EXPECT_EQ(n, 1) << key.second << " interned twice on sequence " << key.first;
  }
  EXPECT_EQ(seen["mangled name"].size(), want.kernels);
  // The fixed trace's kernels: 18 stencils and 2 of a kernel whose name needs escaping.
  EXPECT_EQ(seen["mangled name"].count("_Z7stencilPfS_i"), want.kernels - 2);
  EXPECT_EQ(seen["mangled name"].count(kOddKernel), 2u);
  for (const std::string& g : seen["grid"]) {
    EXPECT_TRUE(g.size() >= 7 && g.front() == '(' && g.back() == ')') << g;
  }
  EXPECT_EQ(seen["block"].size(), want.kernels);
  EXPECT_EQ(seen["cluster"].size(), want.kernels);
  EXPECT_EQ(seen["src memory"].size(), want.memcpys);
  EXPECT_EQ(seen["kind"].size(), want.memcpys);
  EXPECT_EQ(seen["memory kind"].size(), want.memsets);
}

TEST(PerfettoExporter, TrackLayout) {
  const std::string bytes =
      FixedTraceAsPerfetto("perfetto_layout_input.kptrace", "perfetto_layout_output.pftrace");
  ASSERT_FALSE(bytes.empty());
  kp_test::perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes));
  std::map<uint64_t, kp_test::perfetto::TrackDescriptor> tracks;
  for (const auto& p : trace.packet()) {
    if (p.has_track_descriptor()) tracks[p.track_descriptor().uuid()] = p.track_descriptor();
  }
  int processes = 0, gpus = 0, streams = 0, threads = 0;
  for (const auto& [uuid, td] : tracks) {
    if (td.has_process()) {
      ++processes;
      EXPECT_EQ(td.process().pid(), 4242);
      EXPECT_EQ(td.process().cmdline_size(), 3);
      EXPECT_EQ(td.process().process_name(), "pid 4242 (host node1)");
    } else if (td.has_thread()) {
      ++threads;
      EXPECT_EQ(td.thread().pid(), 4242);
      EXPECT_EQ(td.thread().tid(), 101);
      EXPECT_EQ(td.thread().thread_name(), "main");
    } else if (td.name().rfind("GPU 0: NVIDIA H200", 0) == 0) {
      ++gpus;
      EXPECT_EQ(td.child_ordering(), 3);
      EXPECT_TRUE(tracks[td.parent_uuid()].has_process()) << "GPU tracks in the process group";
    } else if (td.name().rfind("stream ", 0) == 0) {
      ++streams;
      EXPECT_EQ(td.sibling_merge_behavior(), 2);
      EXPECT_EQ("stream " + std::to_string(td.sibling_order_rank()), td.name());
      EXPECT_EQ(tracks[td.parent_uuid()].name().rfind("GPU 0", 0), 0u);
    }
  }
  EXPECT_EQ(processes, 1);
  EXPECT_EQ(gpus, 1);
  EXPECT_EQ(streams, 2);
  EXPECT_EQ(threads, 1);
}

TEST(PerfettoExporter, TwoFilesWithOnePidStayApart) {
  WriteFixedTrace("perfetto_a.kptrace", 777);
  WriteFixedTrace("perfetto_b.kptrace", 777);
  kp::ExportOptions opt;
  opt.output = "perfetto_two.pftrace";
  kp::PerfettoExporter exporter(opt);
  std::string err;
  ASSERT_TRUE(IsOk(ExportFiles(exporter, {"perfetto_a.kptrace", "perfetto_b.kptrace"})));
  std::string bytes = ReadFile(opt.output);
  PerfettoCounts got = DecodeAndCheckPerfetto(bytes);
  EXPECT_EQ(got.kernels, 40);
  kp_test::perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes));
  std::set<int> pids;
  std::set<uint32_t> process_seqs;
  std::map<uint64_t, int> track_pid;           // every track's process, through its parents
  std::map<uint32_t, std::set<int>> seq_pids;  // the processes each sequence's events land on
  SequenceResolver resolver;
  for (const auto& p : trace.packet()) {
    const auto& td = p.track_descriptor();
    if (td.has_process()) {
      pids.insert(td.process().pid());
      process_seqs.insert(p.trusted_packet_sequence_id());
      track_pid[td.uuid()] = td.process().pid();
    } else if (td.has_thread()) {
      track_pid[td.uuid()] = td.thread().pid();
    } else if (td.has_parent_uuid()) {
      auto parent = track_pid.find(td.parent_uuid());
      if (parent == track_pid.end()) {
        ADD_FAILURE() << "track " << td.uuid() << " described before its parent";
        continue;
      }
      track_pid[td.uuid()] = parent->second;
    }
    uint64_t track = 0, ts = 0;
    resolver.Take(p, &track, &ts);
    if (!p.has_track_event()) continue;
    auto on = track_pid.find(track);
    if (on == track_pid.end()) {
      ADD_FAILURE() << "an event on an undescribed track " << track;
      continue;
    }
    seq_pids[p.trusted_packet_sequence_id()].insert(on->second);
  }
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_TRUE(pids.count(777));
  EXPECT_EQ(process_seqs.size(), 2u);  // each file's own sequence
  for (const auto& [seq, on] : seq_pids) EXPECT_EQ(on.size(), 1u) << "sequence " << seq;
}

TEST(PerfettoExporter, OverlappingGpuRecordsGoOnLanesWithTheirDurations) {
  EncodedTrace input(5);
  kp::TraceEncoder& enc = input.enc;
  for (int i = 0; i < 3; ++i) {
    kp::KernelRecord k;
    k.name = "k";
    k.start = kT0 + i * 100;
    k.end = kT0 + i * 100 + 150;  // each overlaps the next by 50 ns
    k.stream = 7;
    k.correlation = i + 1;
    enc.AddKernel(k);
  }
  enc.Finish(kp::FooterInfo());
  const kp::TimelineAnomalies anomalies = ExportEncoded(input.sink, "perfetto_overlap");
  // [0,150] and [200,350] share the stream's track; [100,250] runs beside them on lane 2.
  EXPECT_EQ(anomalies.gpu_records_on_extra_lanes, 1u);
  // No launch calls in this trace: no arrows at all.
  std::vector<uint64_t> begins;
  PerfettoCounts got =
      DecodeAndCheckPerfetto(ReadFile("perfetto_overlap.pftrace"), &begins, nullptr, false);
  EXPECT_EQ(got.kernels, 3);
  kp_test::perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(ReadFile("perfetto_overlap.pftrace")));
  std::map<uint64_t, std::string> track_names;
  std::map<uint64_t, std::vector<uint64_t>> ts_per_track;
  SequenceResolver resolver;
  for (const auto& p : trace.packet()) {
    if (p.has_track_descriptor())
      track_names[p.track_descriptor().uuid()] = p.track_descriptor().name();
    uint64_t track = 0, ts = 0;
    resolver.Take(p, &track, &ts);
    if (p.has_track_event()) ts_per_track[track].push_back(ts - kT0);
  }
  std::map<std::string, std::vector<uint64_t>> by_name;
  for (auto& [uuid, ts] : ts_per_track) by_name[track_names[uuid]] = ts;
  EXPECT_EQ(by_name["stream 7"], (std::vector<uint64_t>{0, 150, 200, 350}));
  EXPECT_EQ(by_name["stream 7 lane 2"], (std::vector<uint64_t>{100, 250}));
}

// A stream lane's and a thread's slices are on the track's own packet sequence: no track uuid,
// times as increments on the sequence's clock. A thread's ends are written in time order, so
// nested slices (API calls in an NVTX range) stay increments; a slice that arrives in a later
// chunk and goes back in time is written on BOOTTIME. Every slice keeps its exact begin and end.
TEST(PerfettoExporter, TrackSequencesKeepExactTimesOfNestedSlices) {
  EncodedTrace input(8);
  kp::TraceEncoder& enc = input.enc;
  // The CPU records, ns after kT0.
  auto api = [&](uint32_t thread, uint32_t correlation, const uint64_t(&span)[2]) {
    kp::ApiRecord a;
    a.name = correlation != 0 ? "cudaLaunchKernel" : "cudaGetDevice";  // no GPU work: no arrow
    a.thread_id = thread;
    a.correlation = correlation;
    a.start = kT0 + span[0];
    a.end = kT0 + span[1];
    enc.AddApi(a);
  };
  auto range = [&](uint32_t thread, const char* name, const uint64_t(&span)[2]) {
    kp::NvtxRangeRecord r;
    r.name = name;
    r.thread_id = thread;
    r.start = kT0 + span[0];
    r.end = kT0 + span[1];
    enc.AddNvtxRange(r);
  };
  // Thread 3: a range [1000, 5000] holding three calls, the third beginning at the nanosecond
  // the second ends; a second range after it.
  const uint64_t want_cpu[][2] = {
      {1000, 5000}, {1500, 2000}, {3000, 3999}, {3999, 4500}, {6000, 6001}};
  range(3, "outer", want_cpu[0]);
  for (uint32_t i = 1; i <= 3; ++i) api(3, i, want_cpu[i]);
  range(3, "after", want_cpu[4]);
  // Thread 4: X in this chunk; in the next, W (an NVTX range around X, recorded late) and Y,
  // which begins at the nanosecond X ends.
  const uint64_t want_t4[][2] = {{1000, 2000}, {500, 3000}, {2000, 2500}};
  api(4, 0, want_t4[0]);
  enc.Flush(true);
  range(4, "w", want_t4[1]);
  api(4, 0, want_t4[2]);
  // And a call inside thread 3's third call, after "after" began (back in time).
  const uint64_t late[2] = {4000, 4100};
  api(3, 0, late);
  // Stream 7: two kernels, the second ending at the nanosecond the third begins.
  const uint64_t want_gpu[][2] = {{1600, 2600}, {3100, 4000}, {4000, 4000 + (1ull << 40)}};
  for (int i = 0; i < 3; ++i) {
    kp::KernelRecord k;
    k.name = "k";
    k.stream = 7;
    k.correlation = static_cast<uint32_t>(i + 1);
    k.start = kT0 + want_gpu[i][0];
    k.end = kT0 + want_gpu[i][1];
    enc.AddKernel(k);
  }
  enc.Finish(kp::FooterInfo());
  ExportEncoded(input.sink, "perfetto_nested");
  const std::string bytes = ReadFile("perfetto_nested.pftrace");
  PerfettoCounts got = DecodeAndCheckPerfetto(bytes);
  EXPECT_EQ(got.kernels, 3);
  EXPECT_EQ(got.api, 6);
  EXPECT_EQ(got.nvtx, 3);
  kp_test::perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes));
  std::map<uint64_t, std::string> track_names;
  struct Event {
    uint64_t ts;
    bool begin;
  };
  std::map<std::string, std::vector<Event>> events;     // by track name, in file order
  std::map<std::string, std::set<uint32_t>> sequences;  // by track name
  int on_boottime = 0;
  std::set<uint32_t> first_event;  // sequences whose first event was seen
  SequenceResolver resolver;
  for (const auto& p : trace.packet()) {
    if (p.has_track_descriptor()) {
      const auto& td = p.track_descriptor();
      track_names[td.uuid()] =
          td.has_thread() ? "thread " + std::to_string(td.thread().tid()) : td.name();
    }
    uint64_t track = 0, ts = 0;
    resolver.Take(p, &track, &ts);
    if (!p.has_track_event()) continue;
    const std::string& name = track_names[track];
    EXPECT_FALSE(p.track_event().has_track_uuid()) << name;
    sequences[name].insert(p.trusted_packet_sequence_id());
    if (p.has_timestamp_clock_id()) {
      EXPECT_EQ(p.timestamp_clock_id(), 6u);
      ++on_boottime;
    } else if (!first_event.insert(p.trusted_packet_sequence_id()).second) {
      // (A sequence's clock starts at 0: its first increment is a whole time.)
      EXPECT_LT(p.timestamp(), uint64_t{1} << 42) << "an increment, not a whole time";
    }
    events[name].push_back({ts - kT0, p.track_event().type() == 1});
  }
  // The slices trace_processor makes of them: events by time, ties in file order, each end
  // closing the most recent open slice of its track.
  auto slices = [&](const std::string& name) {
    std::vector<Event> e = events[name];
    std::stable_sort(e.begin(), e.end(),
                     [](const Event& a, const Event& b) { return a.ts < b.ts; });
    std::vector<uint64_t> open;
    std::vector<std::pair<uint64_t, uint64_t>> made;
    for (const Event& x : e) {
      if (x.begin) {
        open.push_back(x.ts);
      } else if (!open.empty()) {
        made.push_back({open.back(), x.ts});
        open.pop_back();
      } else {
        ADD_FAILURE() << "an end without a begin on " << name;
      }
    }
    EXPECT_TRUE(open.empty()) << name;
    std::sort(made.begin(), made.end());
    return made;
  };
  // On BOOTTIME: the late call's begin and end on thread 3 (the clock is at 6000), and W's
  // begin on thread 4 (its clock is at 1000); everything else is an increment.
  EXPECT_EQ(on_boottime, 3);
  std::vector<std::pair<uint64_t, uint64_t>> want = {{late[0], late[1]}};
  for (const auto& r : want_cpu) want.push_back({r[0], r[1]});
  std::sort(want.begin(), want.end());
  EXPECT_EQ(slices("thread 3"), want);
  want.clear();
  for (const auto& r : want_t4) want.push_back({r[0], r[1]});
  std::sort(want.begin(), want.end());
  EXPECT_EQ(slices("thread 4"), want);
  want.clear();
  for (const auto& r : want_gpu) want.push_back({r[0], r[1]});
  EXPECT_EQ(slices("stream 7"), want);
  // One sequence per track, none shared.
  EXPECT_EQ(sequences["thread 3"].size(), 1u);
  EXPECT_EQ(sequences["thread 4"].size(), 1u);
  EXPECT_EQ(sequences["stream 7"].size(), 1u);
  EXPECT_NE(*sequences["thread 3"].begin(), *sequences["stream 7"].begin());
  EXPECT_NE(*sequences["thread 3"].begin(), *sequences["thread 4"].begin());
}

TEST(PerfettoExporter, MessagesOf16KiBOrMoreKeepWholeLengths) {
  // A kernel name, a command-line argument and an NVTX range name of 20,000 bytes: their
  // interned entries, packets and descriptors outgrow the two-byte lengths and are moved to
  // take four-byte ones.
  const std::string long_name = "_Z4kernel" + std::string(20000, 'x');
  const std::string long_arg(20000, 'a');
  EncodedTrace input(6, {"/usr/bin/python3", long_arg});
  kp::TraceEncoder& enc = input.enc;
  for (int i = 0; i < 2; ++i) {
    kp::KernelRecord k;
    k.name = long_name.c_str();
    k.start = kT0 + i * 1000;
    k.end = k.start + 500;
    k.stream = 7;
    k.correlation = i + 1;
    enc.AddKernel(k);
  }
  kp::NvtxRangeRecord r;
  r.name = long_arg.c_str();
  r.start = kT0;
  r.end = kT0 + 2000;
  r.thread_id = 3;
  enc.AddNvtxRange(r);
  enc.Finish(kp::FooterInfo());
  ExportEncoded(input.sink, "perfetto_long");
  std::vector<std::string> names;
  PerfettoCounts got =
      DecodeAndCheckPerfetto(ReadFile("perfetto_long.pftrace"), nullptr, &names, false);
  EXPECT_EQ(got.kernels, 2);
  EXPECT_EQ(got.nvtx, 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), long_name), 2);
  EXPECT_EQ(std::count(names.begin(), names.end(), long_arg), 1);
  kp_test::perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(ReadFile("perfetto_long.pftrace")));
  bool saw_command_line = false;
  for (const auto& p : trace.packet()) {
    if (!p.has_track_descriptor() || !p.track_descriptor().has_process()) continue;
    const auto& cmdline = p.track_descriptor().process().cmdline();
    saw_command_line = cmdline.size() == 2 && cmdline[1] == long_arg;
  }
  EXPECT_TRUE(saw_command_line);
}

TEST(SliceNester, NestsOrSeparates) {
  kp::SliceNester n;
  uint64_t s = 0, e = 100;
  EXPECT_FALSE(n.Place(&s, &e));
  s = 10, e = 20;
  EXPECT_FALSE(n.Place(&s, &e));  // nested
  s = 15, e = 30;                 // starts inside the closed? no: inside [10,20], ends after
  EXPECT_TRUE(n.Place(&s, &e));
  EXPECT_EQ(e, 20u);
  s = 90, e = 120;  // ends after its parent
  EXPECT_TRUE(n.Place(&s, &e));
  EXPECT_EQ(e, 100u);
  s = 100, e = 110;  // starts where the parent ends: disjoint
  EXPECT_FALSE(n.Place(&s, &e));
}

// SliceGroups against a stable sort by (track, StartOrder) of the slices in collection order
// (each kind's list in turn): the same order, ties between kinds in kind order, on enough
// tracks to grow its group table several times, with records arriving out of order.
TEST(SliceGroups, MergesLikeAStableSortByTrackThenStart) {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 20; ++round) {
    std::vector<kp::LaidOutSlice> in;
    const int tracks = round < 10 ? 3 : 300;
    for (kp::SliceKind kind :
         {kp::SliceKind::kKernel, kp::SliceKind::kMemcpy, kp::SliceKind::kMemset}) {
      std::vector<uint64_t> next(tracks, 1000);
      for (int i = 0; i < 2000; ++i) {
        const int t = static_cast<int>(rng() % tracks);
        uint64_t start = next[t] += rng() % 50;  // in order per track, with equal starts
        if (rng() % 10 == 0 && start > 100) start -= rng() % 100;  // a few out of order
        const uint64_t end = start + rng() % 4;  // equal (start, end) across kinds too
        in.push_back({kind, 0, i, static_cast<uint64_t>(t) * 0x100000001ull, start, end});
      }
    }
    // (SortRuns keeps equal slices of one group in arrival order on these inputs: merges and
    // insertion, no general sort.)
    std::vector<kp::LaidOutSlice> want = in;
    std::stable_sort(want.begin(), want.end(),
                     [](const kp::LaidOutSlice& a, const kp::LaidOutSlice& b) {
                       if (a.track != b.track) return a.track < b.track;
                       if (a.start != b.start) return a.start < b.start;
                       return a.end > b.end;
                     });
    kp::SliceGroups groups;
    if (round % 2 == 1) {  // a reused object keeps nothing of the chunk before
      for (const kp::LaidOutSlice& s : want) groups.Add(s.kind, s.index, s.track, s.start, s.end);
      std::vector<kp::LaidOutSlice> ignored;
      groups.Merge(
          &ignored, [](uint64_t) {}, [](kp::LaidOutSlice&) {});
      groups.Clear();
    }
    for (const kp::LaidOutSlice& s : in) groups.Add(s.kind, s.index, s.track, s.start, s.end);
    std::vector<kp::LaidOutSlice> got;
    std::vector<uint64_t> begun;
    size_t placed = 0;
    groups.Merge(
        &got, [&](uint64_t track) { begun.push_back(track); },
        [&](kp::LaidOutSlice& s) {
          EXPECT_EQ(&s, &got.back());
          ++placed;
        });
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(placed, want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(got[i].track == want[i].track && got[i].start == want[i].start &&
                  got[i].end == want[i].end && got[i].kind == want[i].kind &&
                  got[i].index == want[i].index)
          << "round " << round << " slice " << i;
    }
    std::set<uint64_t> tracks_seen(begun.begin(), begun.end());
    EXPECT_EQ(tracks_seen.size(), begun.size());  // each track begun once
    EXPECT_TRUE(std::is_sorted(begun.begin(), begun.end()));
  }
}

TEST(PerfettoExporter, Golden) {
  // Relative input path: the output names it, and must not depend on the build directory.
  const std::string bytes = FixedTraceAsPerfetto("golden_input.kptrace", "golden_output.pftrace");
  ASSERT_FALSE(bytes.empty());
  ExpectGolden("fixed.pftrace", bytes);
  // Its text form beside it, so a changed golden reads as a diff of fields.
  kp_test::perfetto::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(bytes));
  ExpectGolden("fixed.pftrace.txt", trace.DebugString());
}

}  // namespace

namespace {

using namespace kp_export_test;

// The real PyTorch traces recorded on the H200 (examples/): every record of the trace shows up
// in the Perfetto output where a user looks for it -- GPU kernels, copies and memsets on stream
// tracks under a GPU track, CUDA API calls and the step/forward/backward/optimizer NVTX ranges
// on the thread tracks of the process, every launch arrow paired -- and the output passes the
// structural checks of DecodeAndCheckPerfetto (descriptors first, balanced slices, names).
TEST(PerfettoExporter, RealH200PyTorchTraces) {
  for (const char* name : {"pytorch_h200.kptrace", "pytorch_h200_metrics.kptrace"}) {
    SCOPED_TRACE(name);
    const std::string in = std::string(KP_EXAMPLES_DIR) + "/" + name;
    uint64_t kernels = 0, memcpys = 0, memsets = 0, api = 0, ranges = 0, internal = 0;
    std::set<uint32_t> api_threads, range_threads;
    std::map<std::string, int> range_counts, metric_counts;
    // The range profiler's own kernels (WaitNs) have no launch call in the trace, so they get
    // no arrow; kp's L2 sweep is launched through cuLaunchKernel, recorded like any launch.
    std::set<uint32_t> internal_without_launch;
    std::vector<uint32_t> internal_correlations;
    uint64_t sweeps = 0;  // kp_l2_sweep kernels
    std::set<uint32_t> api_correlations;
    {
      kp::StatusOr<std::unique_ptr<kp::TraceReader>> opened = kp::TraceReader::Open(in);
      ASSERT_TRUE(opened.ok()) << opened.status().message();
      std::unique_ptr<kp::TraceReader>& reader = opened.value();
      kp::Chunk c;
      while (reader->Next(&c)) {
        kernels += c.kernels_size();
        for (const auto& k : c.kernels()) {
          if (k.flags() & kp::RECORD_FLAG_PROFILER_INTERNAL) {
            ++internal;
            internal_correlations.push_back(static_cast<uint32_t>(k.correlation()));
            const kp::KernelShape* shape = reader->Shape(k.shape());
            if (shape && reader->Str(shape->name()) == "kp_l2_sweep") ++sweeps;
          }
        }
        memcpys += c.memcpys_size();
        memsets += c.memsets_size();
        api += c.api_calls_size();
        ranges += c.nvtx_ranges_size();
        for (const auto& a : c.api_calls()) {
          api_threads.insert(a.thread_id());
          api_correlations.insert(static_cast<uint32_t>(a.correlation()));
        }
        for (const auto& r : c.nvtx_ranges()) {
          range_threads.insert(r.thread_id());
          ++range_counts[std::string(reader->Str(r.name()))];
        }
        // Metric ranges become slices of the same name on the process's "metrics" track.
        for (const auto& m : c.metric_ranges()) ++metric_counts[std::string(reader->Str(m.name()))];
      }
      ASSERT_GT(kernels, 1000u);
      ASSERT_GT(ranges, 100u);
      for (uint32_t corr : internal_correlations)
        if (!api_correlations.count(corr)) internal_without_launch.insert(corr);
    }
    kp::ExportOptions opt;
    opt.output = std::string("real_") + name + ".pftrace";
    kp::PerfettoExporter exporter(opt);
    std::string err;
    ASSERT_TRUE(IsOk(ExportFiles(exporter, {in})));
    const std::string bytes = ReadFile(opt.output);
    std::vector<std::string> names;
    std::multiset<uint64_t> none;
    PerfettoCounts counts = DecodeAndCheckPerfetto(
        bytes, nullptr, &names, true, internal_without_launch.empty() ? nullptr : &none);
    // Every internal kernel without a launch call is a WaitNs; the others are the sweeps.
    EXPECT_EQ(internal_without_launch.size() + sweeps, internal);
    EXPECT_EQ(static_cast<uint64_t>(counts.kernels), kernels);
    EXPECT_EQ(static_cast<uint64_t>(counts.memcpys), memcpys);
    EXPECT_EQ(static_cast<uint64_t>(counts.memsets), memsets);
    // Thread-track slices are API calls (named cuda*/cu*) and NVTX ranges.
    EXPECT_EQ(static_cast<uint64_t>(counts.api + counts.nvtx), api + ranges);
    for (const char* range : {"step", "forward", "backward", "optimizer"}) {
      EXPECT_GE(range_counts[range], 30) << range;
      EXPECT_EQ(std::count(names.begin(), names.end(), range),
                range_counts[range] + metric_counts[range])
          << range;
    }
    kp_test::perfetto::Trace trace;
    ASSERT_TRUE(trace.ParseFromString(bytes));
    int gpu_tracks = 0, stream_tracks = 0;
    std::set<int32_t> thread_tids;
    for (const auto& p : trace.packet()) {
      if (!p.has_track_descriptor()) continue;
      const auto& td = p.track_descriptor();
      if (td.name().rfind("GPU 0: NVIDIA H200", 0) == 0) ++gpu_tracks;
      if (td.name().rfind("stream ", 0) == 0) ++stream_tracks;
      if (td.has_thread()) thread_tids.insert(td.thread().tid());
    }
    EXPECT_EQ(gpu_tracks, 1);
    EXPECT_GE(stream_tracks, 1);
    for (uint32_t tid : api_threads) EXPECT_TRUE(thread_tids.count(static_cast<int32_t>(tid)));
    for (uint32_t tid : range_threads) EXPECT_TRUE(thread_tids.count(static_cast<int32_t>(tid)));
    std::remove(opt.output.c_str());
  }
}

}  // namespace
