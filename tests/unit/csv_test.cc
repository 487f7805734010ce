// CSV exporter tests: RFC 4180 quoting, every table parsed back by a real RFC 4180 parser with
// consistent column counts, the launch-API join, a golden diff on the fixed trace
// (KP_UPDATE_GOLDEN=1 regenerates tests/data/golden/csv/), and damaged input through convert.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/scratch_dir.h"
#include "tools/export/csv_exporter.h"
#include "tools/kptrace/commands.h"
#include "tools/reader/fixed_trace.h"
#include "tools/reader/proto_trace_writer.h"

namespace kp {
namespace {

using Table = std::vector<std::vector<std::string>>;

// RFC 4180: fields separated by commas, records by CRLF (LF accepted); a quoted field may hold
// commas, CR/LF and doubled quotes. Returns false on malformed input.
bool ParseCsv(const std::string& text, Table* out) {
  out->clear();
  std::vector<std::string> row;
  std::string field;
  size_t i = 0;
  bool quoted_field = false;
  while (i < text.size()) {
    char c = text[i];
    if (field.empty() && !quoted_field && c == '"') {
      quoted_field = true;
      ++i;
      while (true) {
        if (i >= text.size()) return false;  // unterminated quote
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += text[i++];
      }
      if (i < text.size() && text[i] != ',' && text[i] != '\r' && text[i] != '\n') return false;
      continue;
    }
    if (c == '"') return false;  // a quote inside an unquoted field
    if (c == ',') {
      row.push_back(field);
      field.clear();
      quoted_field = false;
      ++i;
    } else if (c == '\r' || c == '\n') {
      if (c == '\r' && (i + 1 >= text.size() || text[i + 1] != '\n')) return false;
      i += (c == '\r') ? 2 : 1;
      row.push_back(field);
      out->push_back(row);
      row.clear();
      field.clear();
      quoted_field = false;
    } else {
      field += c;
      ++i;
    }
  }
  if (!field.empty() || !row.empty()) {
    row.push_back(field);
    out->push_back(row);
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string TempDir(const std::string& name) { return kp::test::ScratchPath("csv_test_" + name); }

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  std::string path = TempDir(name);
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

int Convert(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return cli::RunConvert(static_cast<int>(argv.size()), argv.data());
}

const char* const kTables[] = {"kernels",     "memcpy",     "memset",   "api",
                               "nvtx_ranges", "nvtx_marks", "sync",     "overhead",
                               "metrics",     "devices",    "processes"};

std::map<std::string, Table> LoadTables(const std::string& dir) {
  std::map<std::string, Table> tables;
  for (const char* t : kTables) {
    Table table;
    std::string text = ReadFile(dir + "/" + t + ".csv");
    EXPECT_TRUE(ParseCsv(text, &table)) << t;
    EXPECT_FALSE(table.empty()) << t << ".csv has no header";
    for (size_t r = 1; r < table.size(); ++r) {
      EXPECT_EQ(table[r].size(), table[0].size()) << t << ".csv row " << r;
    }
    tables[t] = table;
  }
  return tables;
}

std::string Col(const Table& t, size_t row, const std::string& name) {
  for (size_t c = 0; c < t[0].size(); ++c) {
    if (t[0][c] == name) return t[row][c];
  }
  ADD_FAILURE() << "no column " << name;
  return "";
}

TEST(CsvField, QuotesOnlyWhenNeeded) {
  std::string out;
  AppendCsvField(&out, "plain");
  EXPECT_EQ(out, "plain");
  out.clear();
  AppendCsvField(&out, "a,b");
  EXPECT_EQ(out, "\"a,b\"");
  out.clear();
  AppendCsvField(&out, "say \"hi\"");
  EXPECT_EQ(out, "\"say \"\"hi\"\"\"");
  out.clear();
  AppendCsvField(&out, "two\nlines\r");
  EXPECT_EQ(out, "\"two\nlines\r\"");
  Table t;
  ASSERT_TRUE(ParseCsv("x,\"say \"\"hi\"\", ok\"\r\n", &t));
  EXPECT_EQ(t[0][1], "say \"hi\", ok");
}

TEST(CsvExporter, TablesParseBackWithJoinedLaunches) {
  std::string trace = WriteTemp("fixed.kptrace", BuildFixedTrace());
  std::string dir = TempDir("out_csv");
  ASSERT_EQ(Convert({trace, "--to", "csv", "-o", dir, "--no-progress"}), 0);
  auto t = LoadTables(dir);
  ASSERT_EQ(t["kernels"].size(), 7u);  // header + 6
  EXPECT_EQ(t["api"].size(), 8u);
  EXPECT_EQ(t["memcpy"].size(), 2u);
  EXPECT_EQ(t["memset"].size(), 2u);
  EXPECT_EQ(t["nvtx_ranges"].size(), 3u);
  EXPECT_EQ(t["nvtx_marks"].size(), 2u);
  EXPECT_EQ(t["sync"].size(), 2u);
  EXPECT_EQ(t["overhead"].size(), 2u);
  EXPECT_EQ(t["metrics"].size(), 3u);
  EXPECT_EQ(t["devices"].size(), 2u);
  EXPECT_EQ(t["processes"].size(), 2u);
  const Table& k = t["kernels"];
  EXPECT_EQ(Col(k, 1, "name"), "void gemm<float, 128>(float const*, float const*, float*)");
  EXPECT_EQ(Col(k, 1, "mangled_name"), "_Z4gemmIfLi128EEvPKfS1_Pf");
  EXPECT_EQ(Col(k, 1, "start_ns"), "1700000000000100000");
  EXPECT_EQ(Col(k, 1, "duration_ns"), "40000");
  EXPECT_EQ(Col(k, 1, "t_ms"), "0.100000");
  EXPECT_EQ(Col(k, 1, "grid_y"), "2");
  EXPECT_EQ(Col(k, 1, "static_shared_bytes"), "16384");
  EXPECT_EQ(Col(k, 1, "launch_api"), "cudaLaunchKernel_v7000");
  EXPECT_EQ(Col(k, 1, "launch_thread_id"), "4243");
  EXPECT_EQ(Col(k, 4, "correlation"), "106");
  EXPECT_EQ(Col(k, 4, "launch_api"), "cudaLaunchKernel_v7000");  // API in the same chunk
  EXPECT_EQ(Col(k, 6, "profiler_internal"), "1");
  EXPECT_EQ(Col(k, 6, "launch_api"), "");  // correlation 108 has no API record
  const Table& m = t["memcpy"];
  EXPECT_EQ(Col(m, 1, "copy_kind"), "HtoD");
  EXPECT_EQ(Col(m, 1, "bandwidth_gbps"), "500.000");
  EXPECT_EQ(Col(m, 1, "launch_api"), "cudaMemcpyAsync_v3020");
  EXPECT_EQ(Col(t["nvtx_ranges"], 1, "name"), "train \"step\", phase 1");
  EXPECT_EQ(Col(t["nvtx_ranges"], 1, "payload"), "-3");
  EXPECT_EQ(Col(t["nvtx_marks"], 1, "name"), "checkpoint\nsaved");
  const Table& mt = t["metrics"];
  EXPECT_EQ(Col(mt, 2, "range"), "forward");
  EXPECT_EQ(Col(mt, 2, "sm__throughput.avg.pct_of_peak_sustained_elapsed"), "77.5");
  EXPECT_EQ(Col(t["devices"], 1, "uuid"), "GPU-01234567-89ab-cdef-0123-456789abcdef");
  EXPECT_EQ(Col(t["processes"], 1, "command"), "python train.py --epochs=1");
  EXPECT_EQ(Col(t["processes"], 1, "clean_end"), "1");
}

TEST(CsvExporter, TwoFilesMergeWithFileIndex) {
  std::string a = WriteTemp("a.kptrace", BuildFixedTrace());
  std::string b = WriteTemp("b.kptrace", BuildFixedTrace({false, 3}));
  std::string dir = TempDir("merged_csv");
  ASSERT_EQ(Convert({a, b, "--to", "csv", "-o", dir, "--no-progress"}), 0);
  auto t = LoadTables(dir);
  EXPECT_EQ(t["kernels"].size(), 13u);
  EXPECT_EQ(Col(t["kernels"], 12, "file"), "1");
  EXPECT_EQ(Col(t["processes"], 2, "clean_end"), "0");
}

// Shape ids are each file's own: the cached shape columns must not carry over between files.
std::string OneShapeTrace(const std::string& name, const std::string& kernel, uint32_t grid_x) {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000000000);
  InternedString* s = c.add_strings();
  s->set_id(1);
  s->set_value(kernel);
  KernelShape* sh = c.add_kernel_shapes();
  sh->set_id(1);
  sh->set_name(1);
  sh->set_demangled(1);
  sh->set_grid_x(grid_x);
  Kernel* k = c.add_kernels();
  k->set_start(1000000000);
  k->set_duration(5000);
  k->set_shape(1);
  w.Add(c);
  return WriteTemp(name, w.bytes());
}

TEST(CsvExporter, EachFileKeepsItsOwnShapes) {
  std::string a = OneShapeTrace("shape_a.kptrace", "_Z5alphav", 128);
  std::string b = OneShapeTrace("shape_b.kptrace", "_Z4betav", 64);
  std::string dir = TempDir("shapes_csv");
  ASSERT_EQ(Convert({a, b, "--to", "csv", "-o", dir, "--no-progress"}), 0);
  auto t = LoadTables(dir);
  ASSERT_EQ(t["kernels"].size(), 3u);  // the header and one row per file
  EXPECT_EQ(Col(t["kernels"], 1, "mangled_name"), "_Z5alphav");
  EXPECT_EQ(Col(t["kernels"], 1, "grid_x"), "128");
  EXPECT_EQ(Col(t["kernels"], 2, "mangled_name"), "_Z4betav");
  EXPECT_EQ(Col(t["kernels"], 2, "grid_x"), "64");
}

// API call names are cached per file by string id: two files whose id 1 names different calls
// (one that needs quoting) keep their own names, in api.csv and in the kernels' launch_api.
std::string OneLaunchTrace(const std::string& name, const std::string& api_name) {
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(1000000000);
  InternedString* s = c.add_strings();
  s->set_id(1);
  s->set_value(api_name);
  ApiCall* a = c.add_api_calls();
  a->set_start(1000000000);
  a->set_duration(100);
  a->set_name(1);
  a->set_domain(API_DRIVER);
  a->set_thread_id(77);
  a->set_correlation(5);
  Kernel* k = c.add_kernels();
  k->set_start(1000000500);
  k->set_duration(5000);
  k->set_correlation(5);
  w.Add(c);
  return WriteTemp(name, w.bytes());
}

TEST(CsvExporter, EachFileKeepsItsOwnApiNames) {
  std::string a = OneLaunchTrace("api_a.kptrace", "cuLaunchKernel");
  std::string b = OneLaunchTrace("api_b.kptrace", "cuLaunch, \"odd\"");
  std::string dir = TempDir("api_names_csv");
  ASSERT_EQ(Convert({a, b, "--to", "csv", "-o", dir, "--no-progress"}), 0);
  auto t = LoadTables(dir);
  ASSERT_EQ(t["api"].size(), 3u);
  EXPECT_EQ(Col(t["api"], 1, "name"), "cuLaunchKernel");
  EXPECT_EQ(Col(t["api"], 1, "domain"), "driver");
  EXPECT_EQ(Col(t["api"], 2, "name"), "cuLaunch, \"odd\"");
  ASSERT_EQ(t["kernels"].size(), 3u);
  EXPECT_EQ(Col(t["kernels"], 1, "launch_api"), "cuLaunchKernel");
  EXPECT_EQ(Col(t["kernels"], 2, "launch_api"), "cuLaunch, \"odd\"");
  EXPECT_EQ(Col(t["kernels"], 2, "launch_thread_id"), "77");
}

// A damaged trace whose first chunk uses API name id 1 without its string: that row says so,
// and the next chunk, which has the string, names its call (the id is not cached while unknown).
TEST(CsvExporter, AnApiNameIdWithoutItsStringIsNotCachedForLaterChunks) {
  ProtoTraceWriter w;
  for (int chunk = 0; chunk < 2; ++chunk) {
    Chunk c;
    c.set_sequence(static_cast<uint64_t>(chunk));
    c.set_time_base_ns(1000000000);
    if (chunk == 1) {
      InternedString* s = c.add_strings();
      s->set_id(1);
      s->set_value("cuLaunchKernel");
    }
    ApiCall* a = c.add_api_calls();
    a->set_start(1000000000 + chunk * 1000);
    a->set_duration(100);
    a->set_name(1);
    a->set_thread_id(77);
    a->set_correlation(5 + chunk);
    Kernel* k = c.add_kernels();
    k->set_start(1000000500 + chunk * 1000);
    k->set_duration(50);
    k->set_correlation(5 + chunk);
    w.Add(c);
  }
  std::string trace = WriteTemp("api_unknown.kptrace", w.bytes());
  std::string dir = TempDir("api_unknown_csv");
  ASSERT_EQ(Convert({trace, "--to", "csv", "-o", dir, "--no-progress"}), 0);
  auto t = LoadTables(dir);
  ASSERT_EQ(t["api"].size(), 3u);
  EXPECT_EQ(Col(t["api"], 1, "name"), "<unknown string 1>");
  EXPECT_EQ(Col(t["api"], 2, "name"), "cuLaunchKernel");
  ASSERT_EQ(t["kernels"].size(), 3u);
  EXPECT_EQ(Col(t["kernels"], 1, "launch_api"), "<unknown string 1>");
  EXPECT_EQ(Col(t["kernels"], 2, "launch_api"), "cuLaunchKernel");
}

TEST(CsvExporter, GoldenDiffOnFixedTrace) {
  std::string trace = WriteTemp("golden.kptrace", BuildFixedTrace());
  std::string dir = TempDir("golden_csv");
  ASSERT_EQ(Convert({trace, "--to", "csv", "-o", dir, "--no-progress"}), 0);
  const std::string golden = std::string(KP_SOURCE_DIR) + "/tests/data/golden/csv";
  const char* update = std::getenv("KP_UPDATE_GOLDEN");
  for (const char* t : kTables) {
    std::string got = ReadFile(dir + "/" + t + ".csv");
    // The path column differs per run; the golden holds a fixed placeholder.
    size_t p;
    while ((p = got.find(trace)) != std::string::npos) got.replace(p, trace.size(), "TRACE");
    const std::string gpath = golden + "/" + t + ".csv";
    if (update != nullptr && std::string(update) == "1") {
      std::ofstream(gpath, std::ios::binary) << got;
      continue;
    }
    EXPECT_EQ(got, ReadFile(gpath))
        << t << ".csv differs from " << gpath << " (KP_UPDATE_GOLDEN=1 regenerates)";
  }
}

TEST(CsvExporter, DamagedInputConvertsUpToTheDamage) {
  std::string bytes = BuildFixedTrace();
  std::string cut = WriteTemp("cut.kptrace", bytes.substr(0, bytes.size() - 30));
  std::string dir = TempDir("cut_csv");
  ASSERT_EQ(Convert({cut, "--to", "csv", "-o", dir, "--no-progress"}), 0);
  auto t = LoadTables(dir);
  EXPECT_EQ(t["kernels"].size(), 4u);
  std::string junk = WriteTemp("junk.kptrace", "KPTRACE1 but nothing else of use here");
  EXPECT_EQ(Convert({junk, "--to", "csv", "-o", TempDir("junk_csv"), "--no-progress"}), 1);
  std::string notrace = WriteTemp("no.kptrace", "plain text");
  EXPECT_EQ(Convert({notrace, "--to", "csv", "-o", TempDir("no_csv"), "--no-progress"}), 1);
  EXPECT_EQ(Convert({cut, "--to", "xml"}), 2);
}

}  // namespace
}  // namespace kp
