// convert.cc: `kptrace convert FILE... --to csv|chrome|perfetto [-o OUT] [--no-progress]`.
// The progress line (tools/kptrace/progress_line.h) shows on a terminal only; --no-progress
// turns it off there too.
//
// Streams every input file through one Exporter (exporter.h), in command-line order, so several
// ranks or processes merge into one output. A file's first chunk is read before BeginFile so the
// exporter sees its header and devices. Damage is reported per file on stderr; the exit code is
// 1 when nothing at all could be read or the output could not be written, 2 for a usage error
// (including an output that names an input). Inputs are open one at a time, the output is
// written under a temporary name and renamed into place at the end (tools/io/output_guard.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "common/time_math.h"
#include "tools/export/exporter.h"
#include "tools/io/output_guard.h"
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
  if (inputs.files.empty() || to.empty()) {
    std::fprintf(stderr, "kptrace convert: %s\n%s",
                 inputs.files.empty() ? "no input file" : "--to is required", kUsage);
    return 2;
  }
  if (to != "csv" && to != "chrome" && to != "json" && to != "perfetto") {
    std::fprintf(stderr,
                 "kptrace convert: unknown format '%s' (expected csv, chrome or "
                 "perfetto)\n",
                 to.c_str());
    return 2;
  }
  InputSet unique;  // a file given twice is read once; no output may be one of these
  unique.AddAll(inputs.files, "kptrace convert");
  const std::vector<std::string> files = unique.paths();
  std::vector<int64_t> clock_offsets(files.size(), 0);
  if (run_flags.align_collectives && files.size() > 1) {
    const ClockAlignment alignment = AlignOnCollectives(files);
    clock_offsets = alignment.offset_ns;
    for (const std::string& line : alignment.lines) {
      std::fprintf(stderr, "kptrace convert: align: %s\n", line.c_str());
    }
  }
  // Read every file's first chunk before writing anything: the progress bar needs the total
  // size, a missing file is reported before minutes of work, and the Chrome time base is the
  // earliest start across all inputs. Each file is closed again, so many inputs cost no memory
  // at rest; the export pass below reopens them one at a time.
  std::vector<bool> readable(files.size(), false);
  uint64_t total_bytes = 0, earliest_ns = 0;
  std::string err;
  for (size_t i = 0; i < files.size(); ++i) {
    auto reader = TraceReader::Open(files[i], &err);
    if (!reader) {
      std::fprintf(stderr, "kptrace convert: %s (skipped)\n", err.c_str());
      continue;
    }
    total_bytes += reader->stats().file_bytes;
    Chunk first;
    if (!reader->Next(&first)) {
      std::fprintf(stderr, "kptrace convert: %s: nothing could be read (no intact chunk)\n",
                   files[i].c_str());
      continue;
    }
    readable[i] = true;
    const Header* h = reader->header();
    ShiftChunkTimes(&first, clock_offsets[i]);  // as the export pass does (0 stays 0)
    uint64_t start = h != nullptr && h->start_time_trace_ns() != 0
                         ? static_cast<uint64_t>(std::max<int64_t>(
                               0, SaturatingAdd(static_cast<int64_t>(h->start_time_trace_ns()),
                                                clock_offsets[i])))
                         : first.time_base_ns();
    if (start != 0 && (earliest_ns == 0 || start < earliest_ns)) earliest_ns = start;
  }
  if (std::find(readable.begin(), readable.end(), true) == readable.end()) {
    std::fprintf(stderr, "kptrace convert: nothing could be read from the input\n");
    return 1;  // before anything is created: a failed conversion leaves no output behind
  }

  ExportOptions options;
  options.progress = progress;
  options.time_base_ns = earliest_ns;
  std::string base = StripTraceSuffix(files[0]);
  std::string output;
  if (to == "csv") {
    output = out.empty() ? base + "_csv/" : out;
  } else if (to == "chrome" || to == "json") {
    output = out.empty() ? base + ".json" : out;
  } else {
    output = out.empty() ? base + ".perfetto-trace" : out;
  }
  if (!unique.CheckOutput(output, &err) ||
      (to == "csv" && !unique.CheckOutputDirectory(output, ".csv", &err))) {
    std::fprintf(stderr, "kptrace convert: %s\n", err.c_str());
    return 2;
  }
  struct stat st;
  if (to == "csv" && stat(output.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr,
                 "kptrace convert: %s: exists and is not a directory (CSV output is a directory "
                 "of tables)\n",
                 output.c_str());
    return 1;
  }
  std::unique_ptr<AtomicOutputFile> out_file;
  std::unique_ptr<AtomicOutputDirectory> out_dir;
  std::unique_ptr<Exporter> exporter;
  if (to == "csv") {
    out_dir = std::make_unique<AtomicOutputDirectory>(output);
    options.output = out_dir->temp_path() + "/";
    exporter = MakeCsvExporter(options);
  } else {
    out_file = std::make_unique<AtomicOutputFile>(output);
    options.output = out_file->temp_path();
    exporter = to == "perfetto" ? MakePerfettoExporter(options) : MakeChromeExporter(options);
  }
  if (!exporter) {
    std::fprintf(stderr, "kptrace convert: the %s exporter is not available in this build\n",
                 to.c_str());
    return 1;
  }
  // The exporter writes the temporary; its messages name the output the user asked for.
  const std::string temp = out_file ? out_file->temp_path() : out_dir->temp_path();
  auto say = [&](std::string message) {
    for (size_t at = 0; temp != output && (at = message.find(temp, at)) != std::string::npos;
         at += output.size()) {
      message.replace(at, temp.size(), output);
    }
    std::fprintf(stderr, "kptrace convert: %s\n", message.c_str());
  };
  if (!exporter->Begin(&err)) {
    say(err);
    return 1;
  }

  ProgressLine bar("kptrace convert", total_bytes, options.progress);
  uint64_t done_bytes = 0, records = 0;
  int readable_files = 0;
  Chunk chunk;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!readable[i]) continue;
    auto reader = TraceReader::Open(files[i], &err);
    if (!reader || !reader->Next(&chunk)) {  // changed since the first look
      std::fprintf(stderr, "kptrace convert: %s: could no longer be read (skipped)\n",
                   files[i].c_str());
      continue;
    }
    const int index = static_cast<int>(i);
    ++readable_files;
    exporter->BeginFile(index, *reader);
    do {
      ShiftChunkTimes(&chunk, clock_offsets[i]);
      exporter->AddChunk(index, *reader, chunk);
      bar.Update(done_bytes + reader->position(), records + reader->stats().records);
    } while (reader->Next(&chunk));
    done_bytes += reader->stats().file_bytes;
    records += reader->stats().records;
    bar.Finish();
    for (const std::string& line : reader->stats().Describe()) {
      std::fprintf(stderr, "kptrace convert: %s: %s\n", files[i].c_str(), line.c_str());
    }
    if (reader->footer() == nullptr) {
      std::fprintf(stderr,
                   "kptrace convert: %s: no footer: the process ended without kp's exit flush "
                   "(killed?) -- data up to the last chunk is intact\n",
                   files[i].c_str());
    }
  }
  bar.Finish();
  if (!exporter->End(&err)) {
    say(err);
    return 1;
  }
  if (readable_files == 0) {
    std::fprintf(stderr, "kptrace convert: nothing could be read from the input\n");
    return 1;
  }
  if (!(out_file ? out_file->Commit(&err) : out_dir->Commit(&err))) {
    std::fprintf(stderr, "kptrace convert: %s\n", err.c_str());
    return 1;
  }
  std::fprintf(stderr, "kptrace convert: %" PRIu64 " records from %d file%s -> %s\n", records,
               readable_files, readable_files == 1 ? "" : "s", output.c_str());
  return 0;
}

}  // namespace cli
}  // namespace kp
