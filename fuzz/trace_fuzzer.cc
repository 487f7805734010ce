// trace_fuzzer.cc: libFuzzer target for everything kptrace does with a trace file. Each input is
// a .kptrace file's bytes; it goes through the reader, `info` (text and JSON), `summary` (text,
// CSV, JSON) and the three exporters (CSV, Chrome JSON, Perfetto). A crash, a sanitizer report,
// an uncaught exception, a leak, a timeout or memory beyond -rss_limit_mb is a finding.
// Built with -DKP_FUZZ=ON (clang); run by fuzz/run_fuzz.sh (docs/robustness.md).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/frame.h"
#include "tools/export/exporter.h"
#include "tools/info/trace_info.h"
#include "tools/reader/trace_reader.h"
#include "tools/summary/trace_summary.h"

namespace {

// The input as a file the tools can open by name, without touching the disk.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("kp_fuzz_input", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { close(fd_); }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

const std::string& OutputDir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/kp_fuzz_out.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    return std::string(tmpl);
  }();
  return dir;
}

void Export(std::unique_ptr<kp::Exporter> exporter, const std::string& input) {
  if (!exporter || !exporter->Begin().ok()) return;
  auto reader = kp::TraceReader::Open(input).value_or(nullptr);
  if (reader) {
    kp::Chunk chunk;
    bool first = true;
    while (reader->Next(&chunk)) {
      if (first) exporter->BeginFile(0, *reader);
      first = false;
      exporter->AddChunk(0, *reader, chunk);
    }
  }
  (void)exporter->End();  // the fuzzer looks for crashes, not write errors
}

// Random mutations almost never keep a frame's CRCs right, so most would stop at the CRC check.
// Inputs whose last byte is odd get their frames' CRCs recomputed first (walking the frames as
// a writer laid them out), which lets mutations reach decompression, the decode budget, the
// protobuf parse, the reader's sequence bookkeeping and every exporter.
std::string WithFramesFixed(const uint8_t* data, size_t size) {
  std::string out(reinterpret_cast<const char*>(data), size);
  auto* p = reinterpret_cast<uint8_t*>(&out[0]);
  size_t pos = kp::kFileMagicSize;
  while (pos + kp::kFrameHeaderSize <= size) {
    kp::FrameHeader h;
    std::memcpy(&h.flags, p + pos + 4, 4);
    std::memcpy(&h.stored_size, p + pos + 8, 4);
    std::memcpy(&h.raw_size, p + pos + 12, 4);
    const size_t room = size - pos - kp::kFrameHeaderSize;
    if (h.stored_size > room) h.stored_size = static_cast<uint32_t>(room);
    h.payload_crc = kp::Crc32c(p + pos + kp::kFrameHeaderSize, h.stored_size);
    kp::EncodeFrameHeader(h, p + pos);
    pos += kp::kFrameHeaderSize + h.stored_size;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string fixed;
  if (size > 0 && (data[size - 1] & 1) != 0) {
    fixed = WithFramesFixed(data, size);
    data = reinterpret_cast<const uint8_t*>(fixed.data());
  }
  MemoryFile file(data, size);
  const std::string& in = file.path();

  kp::TraceInfo info = kp::CollectTraceInfo(in);
  kp::FormatTraceInfoText(info);
  kp::FormatTraceInfoJson({info});

  kp::TraceSummary summary = kp::SummarizeTraces({in});
  kp::FormatSummaryText(summary, 20);
  kp::FormatSummaryCsv(summary);
  kp::FormatSummaryJson(summary);

  kp::ExportOptions options;
  options.output = OutputDir() + "/csv/";
  Export(kp::MakeCsvExporter(options), in);
  options.output = OutputDir() + "/trace.json";
  Export(kp::MakeChromeExporter(options), in);
  options.output = OutputDir() + "/trace.perfetto-trace";
  Export(kp::MakePerfettoExporter(options), in);
  return 0;
}
