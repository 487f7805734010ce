// convert.cc: the conversion pass (convert.h). Damage is reported per file through
// ConvertOptions::report; the result says whether anything could be read and written.
#include "tools/export/convert.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/time_math.h"
#include "tools/export/exporter.h"
#include "tools/kptrace/progress_line.h"
#include "tools/run/clock_alignment.h"

namespace kp {
namespace {

std::string StripTraceSuffix(const std::string& path) {
  const std::string ext = ".kptrace";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) {
    return path.substr(0, path.size() - ext.size());
  }
  return path;
}

}  // namespace

ConvertResult ConvertTraces(const InputSet& unique, const ConvertOptions& convert) {
  ConvertResult result;
  auto report = [&](const std::string& line) {
    if (convert.report) convert.report(line);
  };
  auto fail = [&](std::string message) {
    result.status = Status::Error(std::move(message));
    return result;
  };
  const std::vector<std::string>& files = unique.paths();
  const std::string& to = convert.format;
  std::vector<int64_t> clock_offsets(files.size(), 0);
  if (convert.align_collectives && files.size() > 1) {
    const ClockAlignment alignment = AlignOnCollectives(files);
    clock_offsets = alignment.offset_ns;
    for (const std::string& line : alignment.lines) report("align: " + line);
  }
  // Read every file's first chunk before writing anything: the progress bar needs the total
  // size, a missing file is reported before minutes of work, and the Chrome time base is the
  // earliest start across all inputs. The first readable file stays open with its first chunk
  // decoded in `chunk` (times shifted), where the export pass starts; every other file is closed
  // again, so many inputs cost no memory at rest, and the export pass reopens them one at a time.
  std::vector<bool> readable(files.size(), false);
  uint64_t total_bytes = 0, earliest_ns = 0;
  Chunk chunk, other_first;
  std::unique_ptr<TraceReader> kept;
  size_t kept_index = files.size();
  for (size_t i = 0; i < files.size(); ++i) {
    StatusOr<std::unique_ptr<TraceReader>> opened = TraceReader::Open(files[i]);
    if (!opened.ok()) {
      report(opened.status().message() + " (skipped)");
      continue;
    }
    std::unique_ptr<TraceReader>& reader = opened.value();
    total_bytes += reader->stats().file_bytes;
    Chunk& first = kept ? other_first : chunk;
    if (!reader->Next(&first)) {
      report(files[i] + ": nothing could be read (no intact chunk)");
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
    if (!kept) {
      kept = std::move(reader);
      kept_index = i;
    }
  }
  other_first = Chunk();  // its records go: only the kept chunk is used below
  if (std::find(readable.begin(), readable.end(), true) == readable.end()) {
    // Before anything is created: a failed conversion leaves no output behind.
    return fail("nothing could be read from the input");
  }

  ExportOptions options;
  options.progress = convert.progress;
  options.time_base_ns = earliest_ns;
  const std::string base = StripTraceSuffix(files[0]);
  const std::string& out = convert.output;
  std::string& output = result.output;
  if (to == "csv") {
    output = out.empty() ? base + "_csv/" : out;
  } else if (to == "chrome" || to == "json") {
    output = out.empty() ? base + ".json" : out;
  } else {
    output = out.empty() ? base + ".perfetto-trace" : out;
  }
  Status usable = unique.CheckOutput(output);
  if (usable.ok() && to == "csv") usable = unique.CheckOutputDirectory(output, ".csv");
  if (!usable.ok()) {
    result.bad_output = true;
    result.status = usable;
    return result;
  }
  struct stat st;
  if (to == "csv" && stat(output.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return fail(output + ": exists and is not a directory (CSV output is a directory of tables)");
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
  if (!exporter) return fail("the " + to + " exporter is not available in this build");
  // The exporter writes the temporary; its messages name the output the user asked for.
  const std::string temp = out_file ? out_file->temp_path() : out_dir->temp_path();
  auto named_for_user = [&](std::string message) {
    for (size_t at = 0; temp != output && (at = message.find(temp, at)) != std::string::npos;
         at += output.size()) {
      message.replace(at, temp.size(), output);
    }
    return message;
  };
  if (Status begun = exporter->Begin(); !begun.ok()) return fail(named_for_user(begun.message()));

  ProgressLine bar("kptrace convert", total_bytes, options.progress);
  uint64_t done_bytes = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!readable[i]) continue;
    std::unique_ptr<TraceReader> reader;
    bool shifted = i == kept_index;  // the kept first chunk's times are shifted already
    if (shifted) {
      reader = std::move(kept);
    } else {
      reader = TraceReader::Open(files[i]).value_or(nullptr);
      if (!reader || !reader->Next(&chunk)) {  // changed since the first look
        report(files[i] + ": could no longer be read (skipped)");
        continue;
      }
    }
    const int index = static_cast<int>(i);
    ++result.files_read;
    exporter->BeginFile(index, *reader);
    do {
      if (!shifted) ShiftChunkTimes(&chunk, clock_offsets[i]);
      shifted = false;
      exporter->AddChunk(index, *reader, chunk);
      bar.Update(done_bytes + reader->position(), result.records + reader->stats().records);
    } while (reader->Next(&chunk));
    done_bytes += reader->stats().file_bytes;
    result.records += reader->stats().records;
    bar.Finish();
    for (const std::string& line : reader->stats().Describe()) report(files[i] + ": " + line);
    if (reader->footer() == nullptr) {
      report(files[i] +
             ": no footer: the process ended without kp's exit flush (killed?) -- data up to "
             "the last chunk is intact");
    }
  }
  bar.Finish();
  if (Status ended = exporter->End(); !ended.ok()) return fail(named_for_user(ended.message()));
  if (result.files_read == 0) return fail("nothing could be read from the input");
  result.status = out_file ? out_file->Commit() : out_dir->Commit();
  return result;
}

}  // namespace kp
