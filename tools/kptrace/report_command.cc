// report_command.cc: `kptrace report FILE... -o REPORT.html`: summarises the inputs (the shared
// input listing, as summary), reads their timeline once more, and writes tools/report's page.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/io/output_guard.h"
#include "tools/kptrace/commands.h"
#include "tools/kptrace/progress_line.h"
#include "tools/kptrace/trace_inputs.h"
#include "tools/report/html_report.h"
#include "tools/report/report_timeline.h"

namespace kp::cli {
namespace {

constexpr char kUsage[] =
    "usage: kptrace report FILE... -o REPORT.html [--bins N]\n"
    "  one self-contained HTML page (opens offline): setup and losses, GPU busy over time,\n"
    "  top kernels, NVTX ranges per step and rank, copies, speed of light, notices.\n"
    "  --bins N   time bins of the utilisation strips (default 300)\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "kptrace report: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

}  // namespace

int RunReport(int argc, char** argv) {
  std::vector<std::string> args;
  std::string out;
  size_t bins = 300;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-o" || a == "--output") && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--bins" && i + 1 < argc) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || n < 10 || n > 5000) {
        return Usage("--bins needs a number from 10 to 5000");
      }
      bins = static_cast<size_t>(n);
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      return Usage("unknown or incomplete flag '" + a + "'");
    } else {
      args.push_back(a);
    }
  }
  StatusOr<std::vector<std::string>> listed = ListTraceInputs(args);
  if (!listed.ok()) {
    std::fprintf(stderr, "kptrace report: %s\n", listed.status().message().c_str());
    return 2;
  }
  std::vector<std::string> files = std::move(listed.value());
  if (files.empty()) return Usage("no input file");
  if (out.empty()) return Usage("-o REPORT.html is required");
  InputSet inputs;  // a file given twice is read once; -o may not name an input
  inputs.AddAll(files, "kptrace report");
  files = inputs.paths();
  if (const Status usable = inputs.CheckOutput(out); !usable.ok()) {
    std::fprintf(stderr, "kptrace report: %s\n", usable.message().c_str());
    return 2;
  }
  SummaryOptions options;
  options.progress_label = "kptrace report (1/2)";
  const TraceSummary summary = SummarizeTraces(files, options);
  for (const std::string& e : summary.errors) {
    std::fprintf(stderr, "kptrace report: %s\n", e.c_str());
  }
  if (!summary.anything_read) {
    std::fprintf(stderr, "kptrace report: nothing could be read from the input\n");
    return 1;
  }
  ProgressLine progress("kptrace report (2/2)", ProgressLine::TotalFileBytes(files));
  const ReportTimeline timeline = BuildReportTimeline(files, bins, 6, &progress);
  const std::string html = RenderHtmlReport(summary, timeline, KP_VERSION);
  AtomicOutputFile output(out);  // written under a temporary name: no half-written page
  FILE* f = std::fopen(output.temp_path().c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "kptrace report: cannot write %s\n", out.c_str());
    return 1;
  }
  bool ok = std::fwrite(html.data(), 1, html.size(), f) == html.size();
  ok = std::fclose(f) == 0 && ok;
  const Status committed = ok ? output.Commit() : Status();
  if (!ok || !committed.ok()) {
    std::fprintf(stderr, "kptrace report: writing %s failed%s%s\n", out.c_str(),
                 committed.ok() ? "" : ": ", committed.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "kptrace report: %s (%zu KiB)\n", out.c_str(), html.size() / 1024);
  return 0;
}

}  // namespace kp::cli
