// Capture-window records end to end on CPU: the injector's encoder writes them (Chunk field 23),
// libprotobuf-based readers show them in `kptrace info` (text and JSON), `summary`, and as one
// slice per window on a "kp capture windows" track in Chrome and Perfetto exports.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "tools/export/chrome_exporter.h"
#include "tools/export/perfetto_exporter.h"
#include "tools/info/trace_info.h"
#include "tools/reader/trace_reader.h"
#include "tools/summary/trace_summary.h"

namespace {

constexpr uint64_t kT0 = 1700000000000000000ull;

std::string WriteWindowTrace(const std::string& path) {
  kp::MemoryChunkSink sink(0);
  kp::TraceEncoder enc(&sink, kp::TraceEncoder::Options());
  kp::HeaderInfo h;
  h.kp_version = "0.1.0";
  h.pid = 77;
  h.command_line = {"python3", "train.py"};
  h.start_time_unix_ns = kT0;
  h.start_time_trace_ns = kT0;
  enc.SetHeader(h);
  kp::KernelRecord k;
  k.name = "_Z4stepv";
  k.start = kT0 + 2'000'000;
  k.end = kT0 + 2'500'000;
  k.correlation = 1;
  enc.AddKernel(k);
  kp::CaptureWindowRecord w;
  w.index = 0;
  w.trigger = kp::CAPTURE_WINDOW_TRIGGER_SCHEDULE;
  w.start_ns = kT0 + 1'000'000;
  w.end_ns = kT0 + 3'000'000;
  w.range = "step";
  w.first_step = 4;
  w.last_step = 5;
  w.end_reason = "schedule";
  enc.AddCaptureWindow(w);
  enc.Flush(true);  // the second window in a later chunk
  w.index = 1;
  w.start_ns = kT0 + 7'000'000;
  w.end_ns = kT0 + 8'500'000;
  w.first_step = 10;
  w.last_step = 11;
  enc.AddCaptureWindow(w);
  kp::FooterInfo f;
  f.end_time_ns = kT0 + 9'000'000;
  f.end_reason = "exit";
  enc.Finish(f);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(sink.file().data()),
             static_cast<std::streamsize>(sink.file().size()));
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CaptureWindowRecord, InfoListsEveryWindow) {
  const std::string path = WriteWindowTrace("capture_info.kptrace");
  kp::TraceInfo info = kp::CollectTraceInfo(path);
  ASSERT_EQ(info.capture_windows.size(), 2u);
  EXPECT_EQ(info.capture_windows[1].first_step(), 10u);
  const std::string t = kp::FormatTraceInfoText(info);
  EXPECT_TRUE(Has(t, "capture windows 2 (only these times were traced)")) << t;
  EXPECT_TRUE(Has(t,
                  "#0 schedule 'step' steps 4..5: +1.000 ms .. +3.000 ms (2.000 ms), closed "
                  "by schedule"))
      << t;
  EXPECT_TRUE(Has(t, "#1 schedule 'step' steps 10..11")) << t;
  nlohmann::json j = nlohmann::json::parse(kp::FormatTraceInfoJson({info}));
  ASSERT_EQ(j[0]["capture_windows"].size(), 2u);
  EXPECT_EQ(j[0]["capture_windows"][0]["trigger"], "schedule");
  EXPECT_EQ(j[0]["capture_windows"][0]["start_ns"].get<uint64_t>(), kT0 + 1'000'000);
  EXPECT_EQ(j[0]["capture_windows"][1]["end_reason"], "schedule");
}

TEST(CaptureWindowRecord, SummarySaysWhichWindowsWereCaptured) {
  const std::string path = WriteWindowTrace("capture_summary.kptrace");
  kp::TraceSummary s = kp::SummarizeTraces({path});
  ASSERT_EQ(s.capture_windows.size(), 2u);
  const std::string t = kp::FormatSummaryText(s, 10);
  EXPECT_TRUE(Has(t, "Capture windows (only these times were traced)")) << t;
  EXPECT_TRUE(Has(t, "#1 schedule 'step' steps 10..11")) << t;
}

TEST(CaptureWindowRecord, ChromeAndPerfettoShowAWindowTrack) {
  const std::string path = WriteWindowTrace("capture_export.kptrace");
  kp::ExportOptions copt, popt;
  copt.output = "capture_export.json";
  popt.output = "capture_export.pftrace";
  for (int format = 0; format < 2; ++format) {
    std::unique_ptr<kp::Exporter> e =
        format == 0 ? kp::MakeChromeExporter(copt) : kp::MakePerfettoExporter(popt);
    const kp::Status begun = e->Begin();
    ASSERT_TRUE(begun.ok()) << begun.message();
    kp::StatusOr<std::unique_ptr<kp::TraceReader>> opened = kp::TraceReader::Open(path);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    std::unique_ptr<kp::TraceReader>& reader = opened.value();
    kp::Chunk c;
    bool have = reader->Next(&c);  // the header first: BeginFile names the process from it
    e->BeginFile(0, *reader);
    for (; have; have = reader->Next(&c)) e->AddChunk(0, *reader, c);
    const kp::Status ended = e->End();
    ASSERT_TRUE(ended.ok()) << ended.message();
  }
  nlohmann::json j = nlohmann::json::parse(ReadAll(copt.output));
  int windows = 0;
  int64_t track = -1;
  for (const nlohmann::json& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "kp capture windows") {
      track = e["tid"].get<int64_t>();
    }
    if (e["ph"] == "X" && e["cat"] == "kp_capture") {
      ++windows;
      EXPECT_EQ(e["name"], "capture #" + std::to_string(windows - 1) + " (schedule)");
      EXPECT_EQ(e["tid"].get<int64_t>(), track);
    }
  }
  EXPECT_EQ(windows, 2);
  EXPECT_NE(track, -1);
  const std::string pf = ReadAll(popt.output);
  EXPECT_TRUE(Has(pf, "kp capture windows"));
  EXPECT_TRUE(Has(pf, "capture #0 (schedule 'step' steps 4..5)"));
  EXPECT_TRUE(Has(pf, "capture #1 (schedule 'step' steps 10..11)"));
}

}  // namespace
