// Every export as Perfetto's own parser reads it: each shipped example trace and generated
// traces (every record kind; a CUDA graph whose nodes run concurrently on one stream; a
// multi-process merge; overlapping CUPTI overhead records; an NVTX range left open at exit; the
// range profiler's kernels without a launch call) are converted to Perfetto and Chrome JSON and
// loaded with trace_processor_shell, and what it reads is checked against `kptrace info` and
// the CSV export: no error or data-loss stat, no interned_data error, no unnamed slice, slice
// counts per record kind, one arrow per GPU record whose launch call is in the trace, every GPU
// duration as measured, the same NVTX nesting and time span in both formats, every thread and
// process named.
//
// trace_processor_shell is found through KP_TRACE_PROCESSOR, else at
// <source>/../shared/tools/perfetto/trace_processor_shell. Without it the test skips, saying
// so, except under CI=true, where a missing tool is a failure.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tools/export/record_naming.h"
#include "tools/info/trace_info.h"
#include "tools/kptrace/commands.h"
#include "tools/reader/fixed_trace.h"
#include "tools/reader/proto_trace_writer.h"
#include "tools/reader/trace_reader.h"

namespace {

bool Executable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

// The tool, or "" with *why saying where it was looked for.
std::string FindTraceProcessor(std::string* why) {
  const char* env = std::getenv("KP_TRACE_PROCESSOR");
  if (env != nullptr && *env != '\0') {
    if (Executable(env)) return env;
    *why = std::string("KP_TRACE_PROCESSOR=") + env + " is not an executable file";
    return "";
  }
  const std::string shared =
      std::string(KP_SOURCE_DIR) + "/../shared/tools/perfetto/trace_processor_shell";
  if (Executable(shared)) return shared;
  *why = "trace_processor_shell not found: set KP_TRACE_PROCESSOR or put it at " + shared;
  return "";
}

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

// One CSV line split into cells (RFC 4180 quoting).
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

// Rows of a CSV file as column -> value maps.
std::vector<std::map<std::string, std::string>> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::map<std::string, std::string>> rows;
  if (!std::getline(in, line)) return rows;
  std::vector<std::string> header = SplitCsv(line);
  while (std::getline(in, line)) {
    std::vector<std::string> cells = SplitCsv(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

using Table = std::vector<std::vector<std::string>>;

// Runs one query; returns its rows (header dropped), each cell unquoted.
Table Query(const std::string& tp, const std::string& trace, const std::string& sql) {
  const std::string qfile = trace + ".query.sql";
  std::ofstream(qfile) << sql << "\n";
  const std::string cmd = "'" + tp + "' -q '" + qfile + "' '" + trace + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  Table rows;
  if (p == nullptr) return rows;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << cmd;
  std::istringstream lines(out);
  std::string line;
  bool header = true;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    // A quoted cell may hold line breaks (an NVTX message "checkpoint\nsaved"): read on until
    // the quotes balance.
    std::string more;
    while (std::count(line.begin(), line.end(), '"') % 2 != 0 && std::getline(lines, more)) {
      line += "\n" + more;
    }
    if (header) {
      header = false;
      continue;
    }
    rows.push_back(SplitCsv(line));
    EXPECT_EQ(rows.back().size(), rows.front().size()) << "query output: " << line;
    if (rows.back().size() != rows.front().size()) rows.pop_back();
  }
  return rows;
}

int64_t Int(const Table& t) { return t.empty() || t[0].empty() ? -1 : std::stoll(t[0][0]); }

// What the inputs hold, read with the reader and `kptrace info`'s counting.
struct Expected {
  std::map<std::string, uint64_t> counts;  // class -> records
  uint64_t flows = 0;                      // GPU records whose launch call is in the trace
  std::multiset<int64_t> gpu_durations;    // from the CSV export
  std::multiset<int64_t> gpu_starts;       // likewise: ns on the trace clock
  std::vector<std::string> process_names;  // one per input
  uint64_t open_ranges = 0;
};

Expected Expect(const std::vector<std::string>& inputs, const std::string& csv_dir) {
  Expected e;
  for (const std::string& in : inputs) {
    kp::TraceInfo info = kp::CollectTraceInfo(in);
    EXPECT_TRUE(info.readable()) << in;
    e.counts["kernel"] += info.counts["kernels"];
    e.counts["memcpy"] += info.counts["memcpys"];
    e.counts["memset"] += info.counts["memsets"];
    e.counts["api"] += info.counts["api_calls"];
    e.counts["nvtx"] += info.counts["nvtx_ranges"] + info.counts["nvtx_marks"];
    e.counts["sync"] += info.counts["syncs"];
    e.counts["overhead"] += info.counts["overheads"];
    e.counts["metric"] += info.counts["metric_ranges"];
    const kp::Header* h = info.have_header ? &info.header : nullptr;
    e.process_names.push_back(kp::ProcessGroupName(h, h != nullptr ? h->pid() : 0));
    kp::StatusOr<std::unique_ptr<kp::TraceReader>> opened = kp::TraceReader::Open(in);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    if (!opened.ok()) continue;
    std::unique_ptr<kp::TraceReader>& reader = opened.value();
    std::set<uint64_t> launches;
    std::vector<uint64_t> gpu_correlations;
    kp::Chunk c;
    while (reader->Next(&c)) {
      for (const auto& a : c.api_calls()) {
        if (kp::ApiStartsGpuWork(reader->Str(a.name()))) launches.insert(a.correlation());
      }
      for (const auto& k : c.kernels())
        if (k.start() != 0) gpu_correlations.push_back(k.correlation());
      for (const auto& m : c.memcpys())
        if (m.start() != 0) gpu_correlations.push_back(m.correlation());
      for (const auto& m : c.memsets())
        if (m.start() != 0) gpu_correlations.push_back(m.correlation());
      for (const auto& r : c.nvtx_ranges())
        e.open_ranges += (r.flags() & kp::RECORD_FLAG_OPEN) != 0;
    }
    for (uint64_t corr : gpu_correlations) e.flows += corr != 0 && launches.count(corr) != 0;
  }
  for (const char* table : {"kernels.csv", "memcpy.csv", "memset.csv"}) {
    for (auto& row : ReadCsv(csv_dir + "/" + table)) {
      if (row["start_ns"] == "0") continue;  // untimed: not drawn
      e.gpu_durations.insert(std::max<int64_t>(0, std::stoll(row["duration_ns"])));
      e.gpu_starts.insert(std::stoll(row["start_ns"]));
    }
  }
  return e;
}

// The record kind of each slice, told by the arguments its kind carries (record_args.h).
std::string ClassifiedSlices(const std::string& prefix) {
  auto arg = [&](const char* name) {
    return "extract_arg(arg_set_id, '" + prefix + "." + name + "') IS NOT NULL";
  };
  return "(SELECT slice.*, CASE"
         " WHEN " +
         arg("src memory") +
         " THEN 'memcpy'"
         " WHEN " +
         arg("memory kind") +
         " THEN 'memset'"
         " WHEN " +
         arg("occurrence") +
         " THEN 'metric'"
         " WHEN name LIKE 'CUPTI overhead%' THEN 'overhead'"
         " WHEN " +
         arg("return value") + " AND " + arg("context") +
         " THEN 'sync'"
         " WHEN " +
         arg("return value") +
         " THEN 'api'"
         " WHEN " +
         arg("context") +
         " THEN 'kernel'"
         " ELSE 'nvtx' END AS class FROM slice)";
}

struct Loaded {
  std::map<std::string, uint64_t> counts;
  uint64_t flows = 0;
  std::multiset<int64_t> gpu_durations;
  std::multiset<int64_t> gpu_starts;  // ts as loaded (Chrome JSON's are relative: not compared)
  std::multiset<std::pair<std::string, int64_t>> nvtx_depths;
  std::multiset<std::string> gpu_args;  // kernels' and copies' string arguments, as loaded
  int64_t span = 0;
};

// Loads a Perfetto trace; every error or data-loss stat fails, except those named in
// `expected_stats` (the caller checks their values).
Loaded Load(const std::string& tp, const std::string& trace, const std::string& arg_prefix,
            const Expected& want, const std::set<std::string>& expected_stats = {}) {
  SCOPED_TRACE(trace);
  Loaded l;
  Table bad = Query(tp, trace,
                    "SELECT name, idx, severity, value FROM stats WHERE value > 0 AND "
                    "(severity IN ('error', 'data_loss') OR name LIKE 'interned%' OR "
                    "name LIKE 'flow%')");
  for (const auto& row : bad) {
    if (expected_stats.count(row[0]) != 0) continue;
    ADD_FAILURE() << "trace_processor stat: " << row[0] << " [" << row[1] << "] (" << row[2]
                  << ") = " << row[3];
  }
  EXPECT_EQ(Int(Query(tp, trace, "SELECT count(*) FROM slice WHERE name IS NULL OR name = ''")), 0)
      << "unnamed slices";
  const std::string slices = ClassifiedSlices(arg_prefix);
  for (const auto& row :
       Query(tp, trace, "SELECT class, count(*) FROM " + slices + " GROUP BY class")) {
    l.counts[row[0]] = std::stoull(row[1]);
  }
  l.flows = static_cast<uint64_t>(Int(Query(tp, trace, "SELECT count(*) FROM flow")));
  for (const auto& row :
       Query(tp, trace,
             "SELECT dur, ts FROM " + slices + " WHERE class IN ('kernel', 'memcpy', 'memset')")) {
    l.gpu_durations.insert(std::stoll(row[0]));
    l.gpu_starts.insert(std::stoll(row[1]));
  }
  // String arguments (Perfetto writes these as interned values): the same text in both formats.
  auto str_arg = [&](const char* name) {
    return "coalesce(extract_arg(arg_set_id, '" + arg_prefix + "." + name + "'), '-')";
  };
  for (const auto& row :
       Query(tp, trace,
             "SELECT " + str_arg("mangled name") + " || ' ' || " + str_arg("grid") + " || ' ' || " +
                 str_arg("block") + " || ' ' || " + str_arg("cluster") + " || ' ' || " +
                 str_arg("kind") + " || ' ' || " + str_arg("src memory") + " || ' ' || " +
                 str_arg("dst memory") + " || ' ' || " + str_arg("memory kind") + " FROM " +
                 slices + " WHERE class IN ('kernel', 'memcpy', 'memset')")) {
    l.gpu_args.insert(row[0]);
  }
  for (const auto& row :
       Query(tp, trace, "SELECT name, depth FROM " + slices + " WHERE class = 'nvtx'")) {
    l.nvtx_depths.insert({row[0], std::stoll(row[1])});
  }
  l.span = Int(Query(tp, trace, "SELECT max(ts + dur) - min(ts) FROM slice"));
  // Every thread that holds slices is named (trace_processor adds an empty main thread of its
  // own for a process whose main thread made no CUDA call).
  const std::string threads_with_slices =
      "SELECT count(DISTINCT t.utid) FROM thread t JOIN thread_track tt USING(utid) "
      "JOIN slice s ON s.track_id = tt.id";
  EXPECT_GT(Int(Query(tp, trace, threads_with_slices)), 0);
  EXPECT_EQ(Int(Query(tp, trace, threads_with_slices + " WHERE t.name IS NULL OR t.name = ''")), 0)
      << "unnamed threads";
  std::multiset<std::string> processes;
  for (const auto& row : Query(tp, trace, "SELECT name FROM process WHERE upid != 0")) {
    processes.insert(row[0]);
  }
  EXPECT_EQ(processes,
            std::multiset<std::string>(want.process_names.begin(), want.process_names.end()))
      << "one process group per process, named by rank, pid and host";
  if (want.open_ranges != 0) {
    EXPECT_EQ(
        static_cast<uint64_t>(Int(Query(
            tp, trace,
            "SELECT count(*) FROM slice WHERE name LIKE '%" + std::string(kp::kOpenRangeSuffix) +
                "' AND extract_arg(arg_set_id, '" + arg_prefix + ".open') IS NOT NULL"))),
        want.open_ranges)
        << "ranges left open are marked";
  }
  return l;
}

void RunConvertTo(const std::vector<std::string>& inputs, const std::string& to,
                  const std::string& out) {
  std::vector<std::string> args = inputs;
  for (const char* a : {"--to", to.c_str(), "-o", out.c_str(), "--no-progress"}) {
    args.push_back(a);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ASSERT_EQ(kp::cli::RunConvert(static_cast<int>(argv.size()), argv.data()), 0) << to;
}

void CheckCase(const std::string& name, const std::vector<std::string>& inputs) {
  SCOPED_TRACE(name);
  std::string why;
  const std::string tp = FindTraceProcessor(&why);
  if (tp.empty()) {
    if (InCi()) FAIL() << why << " (CI=true: .ci/run must provide it)";
    GTEST_SKIP() << why;
  }
  const std::string base = "tp_" + name;
  RunConvertTo(inputs, "perfetto", base + ".pftrace");
  RunConvertTo(inputs, "chrome", base + ".json");
  RunConvertTo(inputs, "csv", base + "_csv/");
  const Expected want = Expect(inputs, base + "_csv");
  const Loaded perfetto = Load(tp, base + ".pftrace", "debug", want);
  const Loaded chrome = Load(tp, base + ".json", "args", want);
  for (const Loaded* l : {&perfetto, &chrome}) {
    const char* format = l == &perfetto ? "perfetto" : "chrome";
    for (const auto& [cls, n] : want.counts) {
      EXPECT_EQ(l->counts.count(cls) ? l->counts.at(cls) : 0, n) << format << ": " << cls;
    }
    EXPECT_EQ(l->flows, want.flows) << format << ": one arrow per GPU record with a launch call";
    EXPECT_TRUE(l->gpu_durations == want.gpu_durations)
        << format << ": every GPU duration as measured (CSV)";
  }
  EXPECT_TRUE(perfetto.gpu_starts == want.gpu_starts)
      << "perfetto: every GPU start as measured (CSV), on the trace clock";
  EXPECT_EQ(perfetto.gpu_args.size(), want.gpu_durations.size());
  EXPECT_TRUE(perfetto.gpu_args == chrome.gpu_args)
      << "kernel and copy arguments (interned in Perfetto) read the same in both formats";
  const auto unnamed = perfetto.gpu_args.find("- - - - - - - -");
  EXPECT_TRUE(unnamed == perfetto.gpu_args.end()) << "a GPU record without its arguments";
  // Process groups in rank order, then the processes without a rank in input order (the JSON's
  // process_sort_index; this trace_processor keeps no sort hint of a Perfetto process).
  std::vector<std::string> ordered;
  for (const auto& row : Query(tp, base + ".json",
                               "SELECT name FROM process WHERE upid != 0 ORDER BY "
                               "extract_arg(arg_set_id, 'process_sort_index_hint'), upid")) {
    ordered.push_back(row[0]);
  }
  std::vector<std::string> ranked = want.process_names;
  std::stable_sort(ranked.begin(), ranked.end(), [](const std::string& a, const std::string& b) {
    auto rank = [](const std::string& n) {
      return n.rfind("rank ", 0) == 0 ? std::stoi(n.substr(5)) : 1 << 30;
    };
    return rank(a) < rank(b);
  });
  EXPECT_EQ(ordered, ranked) << "process groups ordered by rank";
  EXPECT_TRUE(perfetto.nvtx_depths == chrome.nvtx_depths) << "NVTX nesting equal in both formats";
  EXPECT_EQ(perfetto.span, chrome.span) << "same time span";
}

// ---- generated traces ----

constexpr uint64_t kT0 = 1'750'000'000'000'000'000ull;

kp::Chunk HeaderChunk(uint32_t pid, const std::string& host, int rank, uint64_t start) {
  kp::Chunk c;
  c.set_sequence(0);
  c.set_time_base_ns(start);
  kp::Header* h = c.mutable_header();
  h->set_kp_version("0.1.0");
  h->set_pid(pid);
  h->set_hostname(host);
  h->add_command_line("python3");
  h->add_command_line("train.py");
  h->set_rank(rank);
  h->set_local_rank(rank);
  h->set_world_size(rank >= 0 ? 2 : -1);
  h->set_start_time_unix_ns(start + 12345);
  h->set_start_time_trace_ns(start);
  h->set_clock("CLOCK_REALTIME (cupti default)");
  kp::Device* d = c.add_devices();
  d->set_id(0);
  d->set_name("NVIDIA H200");
  kp::ThreadInfo* t = c.add_threads();
  t->set_thread_id(pid + 1);
  t->set_name("python3");
  return c;
}

void Str(kp::Chunk* c, uint32_t id, const std::string& v) {
  kp::InternedString* s = c->add_strings();
  s->set_id(id);
  s->set_value(v);
}

void Strings(kp::Chunk* c) {
  Str(c, 1, "cudaGraphLaunch_v10000");
  Str(c, 2, "cudaLaunchKernel_v7000");
  Str(c, 3, "graph_node_kernel");
  Str(c, 4, "WaitNs");
  Str(c, 5, "step");
  Str(c, 6, "CUPTI_INSTRUMENTATION");
  Str(c, 7, "cudaStreamSynchronize_v3020");
  kp::KernelShape* s = c->add_kernel_shapes();
  s->set_id(1);
  s->set_name(3);
  s->set_demangled(3);
  s->set_grid_x(8);
  s->set_block_x(128);
  s = c->add_kernel_shapes();
  s->set_id(2);
  s->set_name(4);
  s->set_demangled(4);
}

void Api(kp::Chunk* c, uint32_t tid, uint32_t name, uint64_t start, int64_t dur, uint64_t corr) {
  kp::ApiCall* a = c->add_api_calls();
  a->set_start(static_cast<int64_t>(start));
  a->set_duration(dur);
  a->set_name(name);
  a->set_domain(kp::API_RUNTIME);
  a->set_thread_id(tid);
  a->set_correlation(static_cast<int64_t>(corr));
}

void Kernel(kp::Chunk* c, uint32_t shape, uint32_t stream, uint64_t start, int64_t dur,
            uint64_t corr, uint32_t flags = 0, uint32_t graph = 0, uint64_t node = 0) {
  kp::Kernel* k = c->add_kernels();
  k->set_start(static_cast<int64_t>(start));
  k->set_duration(dur);
  k->set_shape(shape);
  k->set_stream(stream);
  k->set_correlation(static_cast<int64_t>(corr));
  k->set_context(1);
  k->set_flags(flags);
  k->set_graph_id(graph);
  k->set_graph_node_id(node);
}

void Overhead(kp::Chunk* c, uint64_t start, int64_t dur) {
  kp::Overhead* o = c->add_overheads();
  o->set_start(static_cast<int64_t>(start));
  o->set_duration(dur);
  o->set_kind(4);
  o->set_name(6);
}

// One process: a CUDA graph launch whose seven nodes (five kernels, a copy, a memset) partly
// run at the same time on one stream, a plain launch, the range profiler's WaitNs kernel
// without a launch call, overlapping syncs, CUPTI overhead records that overlap across chunks
// (the later chunk's record starts first), and a "step" range left open at exit.
std::string WriteGraphTrace(const std::string& path, uint32_t pid, const std::string& host,
                            int rank, uint64_t start) {
  kp::ProtoTraceWriter w(rank >= 0 ? 3 : 0);
  const uint32_t tid = pid + 1;
  const uint64_t us = 1000;
  kp::Chunk c0 = HeaderChunk(pid, host, rank, start);
  Strings(&c0);
  Api(&c0, tid, 1, start + 10 * us, 20 * us, 500);
  for (int i = 0; i < 5; ++i) {
    // Nodes 0-2 start together (concurrent branches); 3-4 follow node 0.
    uint64_t s = start + (i < 3 ? 100 : 100 + 50 * (i - 2)) * us;
    Kernel(&c0, 1, 3, s, (40 + 10 * i) * us, 500, 0, 9, i);
  }
  kp::Memcpy* m = c0.add_memcpys();
  m->set_start(static_cast<int64_t>(start + 120 * us));
  m->set_duration(30 * us);
  m->set_bytes(1 << 20);
  m->set_copy_kind(kp::COPY_DTOD);
  m->set_stream(3);
  m->set_correlation(500);
  m->set_graph_id(9);
  m->set_graph_node_id(5);
  kp::Memset* ms = c0.add_memsets();
  ms->set_start(static_cast<int64_t>(start + 130 * us));
  ms->set_duration(5 * us);
  ms->set_bytes(4096);
  ms->set_stream(3);
  ms->set_correlation(500);
  ms->set_graph_id(9);
  ms->set_graph_node_id(6);
  Api(&c0, tid, 2, start + 40 * us, 5 * us, 501);
  Kernel(&c0, 1, 7, start + 300 * us, 20 * us, 501);
  Kernel(&c0, 2, 7, start + 330 * us, 10 * us, 900, kp::RECORD_FLAG_PROFILER_INTERNAL);
  for (int i = 0; i < 2; ++i) {
    kp::Synchronization* y = c0.add_syncs();
    y->set_start(static_cast<int64_t>(start + (400 + 10 * i) * us));
    y->set_duration(50 * us);
    y->set_type(kp::SYNC_STREAM_SYNCHRONIZE);
    y->set_stream(3);
    y->set_correlation(600 + i);
  }
  Overhead(&c0, start + 100 * us, 100 * us);
  kp::NvtxMark* mk = c0.add_nvtx_marks();
  mk->set_time(static_cast<int64_t>(start + 50 * us));
  mk->set_name(5);
  mk->set_thread_id(tid);
  w.Add(c0);

  kp::Chunk c1;
  c1.set_sequence(1);
  c1.set_time_base_ns(start);
  Strings(&c1);
  Overhead(&c1, start + 50 * us, 100 * us);  // overlaps the first chunk's [100, 200] µs
  Overhead(&c1, start + 60 * us, 10 * us);
  kp::NvtxRange* r = c1.add_nvtx_ranges();
  r->set_start(static_cast<int64_t>(start + 5 * us));
  r->set_duration(995 * us);
  r->set_name(5);
  r->set_thread_id(tid);
  r->set_flags(kp::RECORD_FLAG_OPEN);
  r = c1.add_nvtx_ranges();
  r->set_start(static_cast<int64_t>(start + 8 * us));
  r->set_duration(50 * us);
  r->set_name(5);
  r->set_thread_id(tid);
  w.Add(c1);
  std::string err;
  const kp::Status written = w.WriteFile(path);
  EXPECT_TRUE(written.ok()) << written.message();
  return path;
}

TEST(TraceProcessor, ShippedExamples) {
  for (const char* name : {"pytorch_h200", "pytorch_h200_metrics"}) {
    CheckCase(name, {std::string(KP_SOURCE_DIR) + "/examples/" + name + ".kptrace"});
  }
}

TEST(TraceProcessor, FixedTraceWithEveryRecordKind) {
  std::ofstream("tp_fixed.kptrace", std::ios::binary) << kp::BuildFixedTrace();
  CheckCase("fixed", {"tp_fixed.kptrace"});
}

TEST(TraceProcessor, GraphWithConcurrentNodesOverheadOverlapAndOpenRange) {
  CheckCase("graph", {WriteGraphTrace("tp_graph.kptrace", 3100, "node-a", -1, kT0)});
}

// Three processes merged: rank 1 first on the command line, rank 0 on another host started
// earlier, and a process without a rank.
TEST(TraceProcessor, MultiProcessMerge) {
  CheckCase("merge", {WriteGraphTrace("tp_rank1.kptrace", 4100, "node-b", 1, kT0 + 7000),
                      WriteGraphTrace("tp_rank0.kptrace", 4100, "node-a", 0, kT0),
                      WriteGraphTrace("tp_norank.kptrace", 4200, "node-a", -1, kT0 + 3000)});
}

// Two Perfetto files converted separately load as one trace when concatenated: their track
// uuids, sequence ids and arrow ids come from each process's host, pid and start time.
TEST(TraceProcessor, SeparatelyConvertedFilesConcatenate) {
  std::string why;
  const std::string tp = FindTraceProcessor(&why);
  if (tp.empty()) {
    if (InCi()) FAIL() << why << " (CI=true: .ci/run must provide it)";
    GTEST_SKIP() << why;
  }
  const std::vector<std::string> inputs = {
      WriteGraphTrace("tp_cat0.kptrace", 5100, "node-a", 0, kT0),
      WriteGraphTrace("tp_cat1.kptrace", 5200, "node-b", 1, kT0 + 500)};
  std::string both;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<std::string> args = {
        inputs[i],      "--to", "perfetto", "-o", "tp_cat" + std::to_string(i) + ".pftrace",
        "--no-progress"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    ASSERT_EQ(kp::cli::RunConvert(static_cast<int>(argv.size()), argv.data()), 0);
    std::ifstream in("tp_cat" + std::to_string(i) + ".pftrace", std::ios::binary);
    both += std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream("tp_cat_both.pftrace", std::ios::binary) << both;
  // The later-started file first as well: its clock snapshots then come before the earlier
  // file's. trace_processor refuses one snapshot, the earlier file's wall clock (BOOTTIME went
  // back); its track clocks' snapshots are taken, and every slice keeps its times.
  std::string reversed;
  for (size_t i = inputs.size(); i-- > 0;) {
    std::ifstream in("tp_cat" + std::to_string(i) + ".pftrace", std::ios::binary);
    reversed += std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream("tp_cat_reversed.pftrace", std::ios::binary) << reversed;
  std::ofstream("tp_cat_both_csv_marker").close();
  RunConvertTo(inputs, "csv", "tp_cat_both_csv/");
  const Expected want = Expect(inputs, "tp_cat_both_csv");
  std::vector<Loaded> loaded;
  for (const char* file : {"tp_cat_both.pftrace", "tp_cat_reversed.pftrace"}) {
    SCOPED_TRACE(file);
    const bool reversed = std::string(file) == "tp_cat_reversed.pftrace";
    const Loaded l =
        Load(tp, file, "debug", want,
             reversed ? std::set<std::string>{"invalid_clock_snapshots"} : std::set<std::string>{});
    EXPECT_EQ(Int(Query(tp, file,
                        "SELECT coalesce(sum(value), 0) FROM stats WHERE "
                        "name = 'invalid_clock_snapshots'")),
              reversed ? 1 : 0);
    for (const auto& [cls, n] : want.counts) {
      EXPECT_EQ(l.counts.count(cls) ? l.counts.at(cls) : 0, n) << cls;
    }
    EXPECT_EQ(l.flows, want.flows);
    EXPECT_TRUE(l.gpu_durations == want.gpu_durations);
    EXPECT_TRUE(l.gpu_starts == want.gpu_starts);
    loaded.push_back(l);
  }
  EXPECT_EQ(loaded[1].span, loaded[0].span) << "the same times in either order";
  EXPECT_TRUE(loaded[1].nvtx_depths == loaded[0].nvtx_depths);
  // Slice by slice: the same track, start, duration and name in either order.
  const std::string by_slice =
      "SELECT t.name, s.ts, s.dur, s.name FROM slice s JOIN track t ON s.track_id = t.id "
      "ORDER BY 1, 2, 3, 4";
  const Table forward = Query(tp, "tp_cat_both.pftrace", by_slice);
  EXPECT_FALSE(forward.empty());
  EXPECT_TRUE(Query(tp, "tp_cat_reversed.pftrace", by_slice) == forward);
}

// PM samples (KP_PM_SAMPLING): every counter becomes a counter track under the GPU's track in
// Perfetto, and a counter in Chrome JSON, with one value per sample (byte counters as rates).
TEST(TraceProcessor, PmSampleCounterTracks) {
  std::string why;
  const std::string tp = FindTraceProcessor(&why);
  if (tp.empty()) {
    if (InCi()) FAIL() << why << " (CI=true: .ci/run must provide it)";
    GTEST_SKIP() << why;
  }
  const uint64_t us = 1000;
  kp::ProtoTraceWriter w(3);
  kp::Chunk c0 = HeaderChunk(6100, "node-a", -1, kT0);
  Strings(&c0);
  Api(&c0, 6101, 2, kT0 + 10 * us, 5 * us, 700);
  Kernel(&c0, 1, 7, kT0 + 100 * us, 400 * us, 700);
  kp::PmSampleConfig* pc = c0.add_pm_sample_configs();
  pc->set_id(1);
  pc->set_device(0);
  pc->add_counter_names("sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
  pc->add_counter_names("dram__bytes_read.sum");
  pc->set_interval_ns(100 * us);
  pc->set_chip("GH100");
  constexpr int kSamples = 8;
  for (int i = 0; i < kSamples; ++i) {
    kp::PmSample* s = c0.add_pm_samples();
    s->set_config(1);
    s->set_device(0);
    s->set_start(static_cast<int64_t>(kT0 + (50 + 100 * i) * us));
    s->set_duration(100 * us);
    s->add_values(i >= 1 && i <= 4 ? 99.0 : 0.0);
    s->add_values(4e8);  // 400 MB in 100 us: 4e12 B/s
  }
  w.Add(c0);
  const kp::Status written = w.WriteFile("tp_pm.kptrace");
  ASSERT_TRUE(written.ok()) << written.message();
  RunConvertTo({"tp_pm.kptrace"}, "perfetto", "tp_pm.pftrace");
  RunConvertTo({"tp_pm.kptrace"}, "chrome", "tp_pm.json");

  // Perfetto: two counter tracks whose parent is the GPU 0 track, 8 values each.
  const Table pf = Query(tp, "tp_pm.pftrace",
                         "select t.name, count(c.id), max(c.value), p.name from counter c "
                         "join counter_track t on c.track_id = t.id "
                         "join track p on t.parent_id = p.id group by t.name order by t.name");
  ASSERT_EQ(pf.size(), 2u);
  EXPECT_EQ(pf[0][0], "dram__bytes_read.sum.per_second");
  EXPECT_EQ(pf[0][1], std::to_string(kSamples));
  EXPECT_DOUBLE_EQ(std::stod(pf[0][2]), 4e12);
  EXPECT_EQ(pf[0][3], "GPU 0: NVIDIA H200");
  EXPECT_EQ(pf[1][0], "sm__cycles_active.avg.pct_of_peak_sustained_elapsed");
  EXPECT_EQ(pf[1][1], std::to_string(kSamples));
  EXPECT_DOUBLE_EQ(std::stod(pf[1][2]), 99.0);
  // The busy samples lie under the kernel (same clock).
  const Table busy = Query(tp, "tp_pm.pftrace",
                           "select count(*) from counter c join counter_track t on "
                           "c.track_id = t.id join slice s on s.name = 'graph_node_kernel' "
                           "where t.name like 'sm__cycles%' and c.value > 50 and c.ts >= s.ts "
                           "and c.ts < s.ts + s.dur");
  EXPECT_EQ(Int(busy), 4);  // samples 1-4 start at 150..450 us, inside the kernel's [100, 500)
  // Chrome JSON: the same counters, named after the GPU.
  const Table ch = Query(tp, "tp_pm.json",
                         "select t.name, count(c.id) from counter c join counter_track t on "
                         "c.track_id = t.id where t.name like 'GPU 0 %' group by t.name "
                         "order by t.name");
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_NE(ch[0][0].find("GPU 0 dram__bytes_read.sum.per_second"), std::string::npos);
  EXPECT_EQ(ch[0][1], std::to_string(kSamples));
  EXPECT_NE(ch[1][0].find("GPU 0 sm__cycles_active"), std::string::npos);
}

}  // namespace
