// convert_command.cc: `kptrace convert FILE|RUN... --to csv|chrome|perfetto [-o OUT]
// [--no-progress]`. The progress line (progress_line.h) shows on a terminal only; --no-progress
// turns it off there too. The exit code is 1 when nothing at all could be read or the output
// could not be written, 2 for a usage error (including an output that names an input).
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/export/convert.h"
#include "tools/io/output_guard.h"
#include "tools/kptrace/commands.h"
#include "tools/kptrace/progress_line.h"
#include "tools/kptrace/trace_inputs.h"
#include "tools/run/run_inputs.h"

namespace kp::cli {
namespace {

constexpr char kUsage[] =
    "usage: kptrace convert FILE|RUN... --to csv|chrome|perfetto [-o OUT] [--no-progress]\n"
    "                       [--file-only] [--align collectives]\n"
    "  csv:      OUT is a directory of tables (default <first file>_csv/)\n"
    "  chrome:   OUT is a trace-event JSON file (default <first file>.json)\n"
    "  perfetto: OUT is a Perfetto protobuf trace (default <first file>.perfetto-trace)\n";

void Say(const std::string& line) { std::fprintf(stderr, "kptrace convert: %s\n", line.c_str()); }

}  // namespace

int RunConvert(int argc, char** argv) {
  std::vector<std::string> args;
  ConvertOptions options;
  options.progress = ProgressLine::StderrIsTerminal();
  options.report = Say;
  RunInputFlags run_flags;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--to" || a == "-o" || a == "--output") && i + 1 < argc) {
      (a == "--to" ? options.format : options.output) = argv[++i];
    } else if (a.rfind("--to=", 0) == 0) {
      options.format = a.substr(5);
    } else if (a == "--no-progress") {
      options.progress = false;
    } else if (const StatusOr<bool> taken = TakeRunInputFlag(argc, argv, &i, &run_flags);
               !taken.ok() || taken.value()) {
      if (!taken.ok()) {
        std::fprintf(stderr, "kptrace convert: %s\n%s", taken.status().message().c_str(), kUsage);
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
  for (const std::string& n : inputs.notes) Say(n);
  for (const std::string& e : inputs.errors) Say(e);
  const std::string& to = options.format;
  if (inputs.files.empty() || to.empty()) {
    std::fprintf(stderr, "kptrace convert: %s\n%s",
                 inputs.files.empty() ? "no input file" : "--to is required", kUsage);
    return 2;
  }
  if (to != "csv" && to != "chrome" && to != "json" && to != "perfetto") {
    Say("unknown format '" + to + "' (expected csv, chrome or perfetto)");
    return 2;
  }
  InputSet unique;  // a file given twice is read once; no output may be one of these
  unique.AddAll(inputs.files, "kptrace convert");
  options.align_collectives = run_flags.align_collectives;
  const ConvertResult result = ConvertTraces(unique, options);
  if (!result.status.ok()) {
    Say(result.status.message());
    return result.bad_output ? 2 : 1;
  }
  std::fprintf(stderr, "kptrace convert: %" PRIu64 " records from %d file%s -> %s\n",
               result.records, result.files_read, result.files_read == 1 ? "" : "s",
               result.output.c_str());
  return 0;
}

}  // namespace kp::cli
