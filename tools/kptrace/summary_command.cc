// summary_command.cc: `kptrace summary FILE|RUN... [--format text|csv|json] [--append-log LOG]`:
// expands runs, summarises them (tools/summary) and prints the chosen format.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/io/output_guard.h"
#include "tools/kptrace/commands.h"
#include "tools/kptrace/trace_inputs.h"
#include "tools/run/run_inputs.h"
#include "tools/summary/trace_summary.h"

namespace kp::cli {

int RunSummary(int argc, char** argv) {
  static const char kUsage[] =
      "usage: kptrace summary FILE|RUN... [--format text|csv|json] [--append-log LOG.csv] "
      "[--top N] [--all] [--file-only] [--align collectives]\n"
      "  --all  count multi-pass value sets flagged inconsistent in the metric medians too\n";
  std::vector<std::string> args;
  RunInputFlags run_flags;
  std::string format = "text", log;
  size_t top = 20;
  bool all_sets = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--all") {
      all_sets = true;
    } else if (a == "--format" && i + 1 < argc) {
      format = argv[++i];
    } else if (a == "--append-log" && i + 1 < argc) {
      log = argv[++i];
    } else if (a == "--top" && i + 1 < argc) {
      char* end = nullptr;
      long n = std::strtol(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || n <= 0) {
        std::fprintf(stderr, "kptrace summary: --top needs a positive number\n%s", kUsage);
        return 2;
      }
      top = static_cast<size_t>(n);
    } else if (const StatusOr<bool> taken = TakeRunInputFlag(argc, argv, &i, &run_flags);
               !taken.ok() || taken.value()) {
      if (!taken.ok()) {
        std::fprintf(stderr, "kptrace summary: %s\n%s", taken.status().message().c_str(), kUsage);
        return 2;
      }
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "kptrace summary: unknown or incomplete flag '%s'\n%s", a.c_str(),
                   kUsage);
      return 2;
    } else {
      args.push_back(a);
    }
  }
  TraceInputs inputs = ExpandTraceInputs(args, run_flags.file_only);
  SummaryOptions options;
  options.progress_label = "kptrace summary";
  options.align_collectives = run_flags.align_collectives;
  options.include_inconsistent = all_sets;
  for (const std::string& n : inputs.notes)
    std::fprintf(stderr, "kptrace summary: %s\n", n.c_str());
  for (const std::string& e : inputs.errors)
    std::fprintf(stderr, "kptrace summary: %s\n", e.c_str());
  std::vector<std::string> files = inputs.files;
  if (files.empty() || (format != "text" && format != "csv" && format != "json")) {
    std::fprintf(stderr, "kptrace summary: %s\n%s",
                 files.empty() ? "no input file" : "--format must be text, csv or json", kUsage);
    return 2;
  }
  InputSet unique;
  unique.AddAll(files, "kptrace summary");
  files = unique.paths();
  if (!log.empty()) {
    if (const Status usable = unique.CheckOutput(log).WithContext("--append-log"); !usable.ok()) {
      std::fprintf(stderr, "kptrace summary: %s\n", usable.message().c_str());
      return 2;
    }
  }
  TraceSummary s = SummarizeTraces(files, options);
  for (const std::string& e : s.errors) std::fprintf(stderr, "kptrace summary: %s\n", e.c_str());
  if (!s.anything_read) {
    std::fprintf(stderr, "kptrace summary: nothing could be read from the input\n");
    return 1;
  }
  std::string out = format == "json"  ? FormatSummaryJson(s)
                    : format == "csv" ? FormatSummaryCsv(s)
                                      : FormatSummaryText(s, top);
  std::fputs(out.c_str(), stdout);
  if (!log.empty()) {
    if (const Status appended = AppendSummaryLog(s, log); !appended.ok()) {
      std::fprintf(stderr, "kptrace summary: %s\n", appended.message().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace kp::cli
