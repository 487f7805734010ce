// convert.cc: `kptrace convert FILE... --to csv|chrome|perfetto [-o OUT] [--no-progress]`.
// The progress line (tools/kptrace/progress_line.h) shows on a terminal only; --no-progress
// turns it off there too.
//
// Streams every input file through one Exporter (exporter.h), in command-line order, so several
// ranks or processes merge into one output. A file's first chunk is read before BeginFile so the
// exporter sees its header and devices. Damage is reported per file on stderr; the exit code is
// 1 only when nothing at all could be read.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/export/exporter.h"
#include "tools/kptrace/commands.h"
#include "tools/kptrace/progress_line.h"
#include "tools/kptrace/trace_inputs.h"
#include "tools/run/clock_alignment.h"
#include "tools/run/run_inputs.h"

namespace kp {
namespace {

constexpr char kUsage[] =
    "usage: kptrace convert FILE|RUN... --to csv|chrome|perfetto [-o OUT] [--no-progress]\n"
    "                       [--file-only] [--align collectives]\n"
    "  csv:      OUT is a directory of tables (default <first file>_csv/)\n"
    "  chrome:   OUT is a trace-event JSON file (default <first file>.json)\n"
    "  perfetto: OUT is a Perfetto protobuf trace (default <first file>.perfetto-trace)\n";

std::string StripTraceSuffix(const std::string& path) {
  const std::string ext = ".kptrace";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) {
    return path.substr(0, path.size() - ext.size());
  }
  return path;
}

}  // namespace

namespace cli {

int RunConvert(int argc, char** argv) {
  std::vector<std::string> args;
  std::string to, out;
  bool progress = ProgressLine::StderrIsTerminal();
  RunInputFlags run_flags;
  std::string flag_error;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--to" || a == "-o" || a == "--output") && i + 1 < argc) {
      (a == "--to" ? to : out) = argv[++i];
    } else if (a.rfind("--to=", 0) == 0) {
      to = a.substr(5);
    } else if (a == "--no-progress") {
      progress = false;
    } else if (FlagTaken t = TakeRunInputFlag(argc, argv, &i, &run_flags, &flag_error);
               t != FlagTaken::kNo) {
      if (t == FlagTaken::kBadValue) {
        std::fprintf(stderr, "kptrace convert: %s\n%s", flag_error.c_str(), kUsage);
        return 2;
      }
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "kptrace convert: unknown or incomplete flag '%s'\n%s", a.c_str(),
                   kUsage);
      return 2;
    } else {
      args.push_back(a);
    }
  }
  // One argument may name a whole run (tools/run/run_inputs.h).
  const TraceInputs inputs = ExpandTraceInputs(args, run_flags.file_only);
  for (const std::string& n : inputs.notes)
    std::fprintf(stderr, "kptrace convert: %s\n", n.c_str());
  for (const std::string& e : inputs.errors)
    std::fprintf(stderr, "kptrace convert: %s\n", e.c_str());
  const std::vector<std::string>& files = inputs.files;
  if (files.empty() || to.empty()) {
    std::fprintf(stderr, "kptrace convert: %s\n%s",
                 files.empty() ? "no input file" : "--to is required", kUsage);
    return 2;
  }
  if (to != "csv" && to != "chrome" && to != "json" && to != "perfetto") {
    std::fprintf(stderr,
                 "kptrace convert: unknown format '%s' (expected csv, chrome or "
                 "perfetto)\n",
                 to.c_str());
    return 2;
  }
  // Open every file and read its first chunk before writing anything: the progress bar needs
  // the total size, a missing file is reported before minutes of work, and the Chrome time base
  // is the earliest start across all inputs. Each first chunk is kept (the reader's string
  // tables point into it) and exported in the file's turn below.
  std::vector<int64_t> clock_offsets(files.size(), 0);
  if (run_flags.align_collectives && files.size() > 1) {
    const ClockAlignment alignment = AlignOnCollectives(files);
    clock_offsets = alignment.offset_ns;
    for (const std::string& line : alignment.lines) {
      std::fprintf(stderr, "kptrace convert: align: %s\n", line.c_str());
    }
  }
  std::vector<std::unique_ptr<TraceReader>> readers(files.size());
  std::vector<std::unique_ptr<Chunk>> first_chunks(files.size());
  uint64_t total_bytes = 0, earliest_ns = 0;
  std::string err;
  for (size_t i = 0; i < files.size(); ++i) {
    readers[i] = TraceReader::Open(files[i], &err);
    if (!readers[i]) {
      std::fprintf(stderr, "kptrace convert: %s (skipped)\n", err.c_str());
      continue;
    }
    total_bytes += readers[i]->stats().file_bytes;
    auto first = std::make_unique<Chunk>();
    if (!readers[i]->Next(first.get())) continue;
    ShiftChunkTimes(first.get(), clock_offsets[i]);
    const Header* h = readers[i]->header();
    uint64_t start =
        h != nullptr && h->start_time_trace_ns() != 0
            ? static_cast<uint64_t>(std::max<int64_t>(
                  0, static_cast<int64_t>(h->start_time_trace_ns()) + clock_offsets[i]))
            : first->time_base_ns();
    if (start != 0 && (earliest_ns == 0 || start < earliest_ns)) earliest_ns = start;
    first_chunks[i] = std::move(first);
  }

  ExportOptions options;
  options.progress = progress;
  options.time_base_ns = earliest_ns;
  std::string base = StripTraceSuffix(files[0]);
  std::unique_ptr<Exporter> exporter;
  if (to == "csv") {
    options.output = out.empty() ? base + "_csv/" : out;
    exporter = MakeCsvExporter(options);
  } else if (to == "chrome" || to == "json") {
    options.output = out.empty() ? base + ".json" : out;
    exporter = MakeChromeExporter(options);
  } else if (to == "perfetto") {
    options.output = out.empty() ? base + ".perfetto-trace" : out;
    exporter = MakePerfettoExporter(options);
  } else {
    std::fprintf(stderr,
                 "kptrace convert: unknown format '%s' (expected csv, chrome or "
                 "perfetto)\n",
                 to.c_str());
    return 2;
  }
  if (!exporter) {
    std::fprintf(stderr, "kptrace convert: the %s exporter is not available in this build\n",
                 to.c_str());
    return 1;
  }
  if (!exporter->Begin(&err)) {
    std::fprintf(stderr, "kptrace convert: %s\n", err.c_str());
    return 1;
  }

  ProgressLine bar("kptrace convert", total_bytes, options.progress);
  uint64_t done_bytes = 0, records = 0;
  int readable_files = 0;
  Chunk chunk;
  for (size_t i = 0; i < files.size(); ++i) {
    TraceReader* reader = readers[i].get();
    if (reader == nullptr) continue;
    const int index = static_cast<int>(i);
    if (first_chunks[i] != nullptr) {
      ++readable_files;
      exporter->BeginFile(index, *reader);
      exporter->AddChunk(index, *reader, *first_chunks[i]);
      bar.Update(done_bytes + reader->position(), records + reader->stats().records);
      while (reader->Next(&chunk)) {
        ShiftChunkTimes(&chunk, clock_offsets[i]);
        exporter->AddChunk(index, *reader, chunk);
        bar.Update(done_bytes + reader->position(), records + reader->stats().records);
      }
      first_chunks[i].reset();
    }
    done_bytes += reader->stats().file_bytes;
    records += reader->stats().records;
    bar.Finish();
    if (reader->stats().chunks_ok == 0) {
      std::fprintf(stderr, "kptrace convert: %s: nothing could be read (no intact chunk)\n",
                   files[i].c_str());
    }
    for (const std::string& line : reader->stats().Describe()) {
      std::fprintf(stderr, "kptrace convert: %s: %s\n", files[i].c_str(), line.c_str());
    }
    if (reader->stats().chunks_ok > 0 && reader->footer() == nullptr) {
      std::fprintf(stderr,
                   "kptrace convert: %s: no footer: the process ended without kp's exit flush "
                   "(killed?) -- data up to the last chunk is intact\n",
                   files[i].c_str());
    }
    readers[i].reset();  // one file's buffers at a time
  }
  bar.Finish();
  if (!exporter->End(&err)) {
    std::fprintf(stderr, "kptrace convert: %s\n", err.c_str());
    return 1;
  }
  if (readable_files == 0) {
    std::fprintf(stderr, "kptrace convert: nothing could be read from the input\n");
    return 1;
  }
  std::fprintf(stderr, "kptrace convert: %" PRIu64 " records from %d file%s -> %s\n", records,
               readable_files, readable_files == 1 ? "" : "s", options.output.c_str());
  return 0;
}

}  // namespace cli
}  // namespace kp
