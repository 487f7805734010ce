// diff_command.cc: `kptrace diff A... [--vs] B...`: parses the flags, summarises both sides
// through the shared input listing and prints tools/diff's comparison.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/diff/trace_diff.h"
#include "tools/io/output_guard.h"
#include "tools/kptrace/commands.h"
#include "tools/kptrace/trace_inputs.h"

namespace kp::cli {
namespace {

constexpr char kUsage[] =
    "usage: kptrace diff A B [flags]\n"
    "       kptrace diff A1 A2... --vs B1 B2... [flags]   (several traces per side)\n"
    "  --threshold N%          smallest change that is marked (default 5%)\n"
    "  --format text|csv|json  output format (default text)\n"
    "  --top N                 unmarked rows shown per text section (default 20)\n"
    "  --fail-on-regression    exit 1 when a kernel or range got significantly slower\n"
    "A change is marked when Mann-Whitney p < 0.05 and |change| >= the threshold.\n";

int Usage(const char* problem) {
  std::fprintf(stderr, "kptrace diff: %s\n%s", problem, kUsage);
  return 2;
}

// "5", "5%", "2.5 %" -> percent. False when it is not a number >= 0.
bool ParsePercent(std::string s, double* out) {
  while (!s.empty() && (s.back() == '%' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == nullptr || *end != '\0' || !(v >= 0)) return false;
  *out = v;
  return true;
}

}  // namespace

int RunDiff(int argc, char** argv) {
  std::vector<std::string> side_a, side_b;
  bool saw_vs = false, fail_on_regression = false;
  std::string format = "text";
  size_t top = 20;
  DiffOptions options;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threshold" && i + 1 < argc) {
      if (!ParsePercent(argv[++i], &options.threshold_pct)) {
        return Usage("--threshold needs a percentage >= 0, e.g. 5%");
      }
    } else if (a.rfind("--threshold=", 0) == 0) {
      if (!ParsePercent(a.substr(12), &options.threshold_pct)) {
        return Usage("--threshold needs a percentage >= 0, e.g. 5%");
      }
    } else if (a == "--format" && i + 1 < argc) {
      format = argv[++i];
    } else if (a == "--top" && i + 1 < argc) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || n <= 0) return Usage("--top needs a positive number");
      top = static_cast<size_t>(n);
    } else if (a == "--fail-on-regression") {
      fail_on_regression = true;
    } else if (a == "--vs") {
      if (saw_vs) return Usage("--vs given twice");
      saw_vs = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      return Usage(("unknown or incomplete flag '" + a + "'").c_str());
    } else {
      (saw_vs ? side_b : side_a).push_back(a);
    }
  }
  if (format != "text" && format != "csv" && format != "json") {
    return Usage("--format must be text, csv or json");
  }
  if (!saw_vs) {
    if (side_a.size() != 2) {
      return Usage("give two traces (A B), or several per side separated by --vs");
    }
    side_b.push_back(side_a.back());
    side_a.pop_back();
  }
  if (side_a.empty() || side_b.empty()) return Usage("both sides need at least one trace");
  StatusOr<std::vector<std::string>> listed_a = ListTraceInputs(side_a);
  StatusOr<std::vector<std::string>> listed_b =
      listed_a.ok() ? ListTraceInputs(side_b) : listed_a.status();
  if (!listed_b.ok()) {
    std::fprintf(stderr, "kptrace diff: %s\n", listed_b.status().message().c_str());
    return 2;
  }
  std::vector<std::string> files_a = std::move(listed_a.value());
  std::vector<std::string> files_b = std::move(listed_b.value());
  // Within one side a file named twice is read once (with a warning), as every command does.
  for (std::vector<std::string>* side : {&files_a, &files_b}) {
    InputSet unique;
    unique.AddAll(*side, "kptrace diff");
    *side = unique.paths();
  }
  SummaryOptions summary_options;
  summary_options.keep_samples = true;
  summary_options.progress_label = "kptrace diff: A";
  const TraceSummary a = SummarizeTraces(files_a, summary_options);
  summary_options.progress_label = "kptrace diff: B";
  const TraceSummary b = SummarizeTraces(files_b, summary_options);
  for (const std::string& e : a.errors) std::fprintf(stderr, "kptrace diff: A: %s\n", e.c_str());
  for (const std::string& e : b.errors) std::fprintf(stderr, "kptrace diff: B: %s\n", e.c_str());
  if (!a.anything_read || !b.anything_read) {
    std::fprintf(stderr, "kptrace diff: nothing could be read from side %s\n",
                 !a.anything_read ? "A" : "B");
    return 1;
  }
  const TraceDiff d = DiffSummaries(a, b, options);
  const std::string out = format == "json"  ? FormatDiffJson(d)
                          : format == "csv" ? FormatDiffCsv(d)
                                            : FormatDiffText(d, top);
  std::fputs(out.c_str(), stdout);
  if (format != "text") {
    for (const std::string& w : d.warnings) std::fprintf(stderr, "kptrace diff: %s\n", w.c_str());
  }
  if (fail_on_regression && d.any_regression) {
    std::fprintf(stderr, "kptrace diff: significant slowdown found (--fail-on-regression)\n");
    return 1;
  }
  return 0;
}

}  // namespace kp::cli
