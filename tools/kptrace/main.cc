// kptrace: read, convert and summarise kp traces; validate metrics; launch a profiled program.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/io/output_guard.h"
#include "tools/kptrace/commands.h"
#include "tools/kptrace/cupti_library.h"
#include "tools/kptrace/huge_page_heap.h"

namespace {

void PrintUsage(FILE* out) {
  std::fputs(
      "usage: kptrace <command> [args]\n"
      "\n"
      "commands:\n"
      "  run [flags] -- CMD...        profile CMD with libkpinject (flags set the KP_* variables)\n"
      "  info FILE...                 header, devices, record counts, losses, clean end\n"
      "  convert FILE... --to csv|chrome|perfetto [-o OUT]\n"
      "                               export for pandas, chrome://tracing or ui.perfetto.dev\n"
      "  summary FILE... [--format text|csv|json] [--append-log LOG.csv]\n"
      "                               per-kernel and per-range statistics, copies, API, metrics\n"
      "  report FILE... -o REPORT.html\n"
      "                               one self-contained HTML page: charts, tables, speed of "
      "light\n"
      "  diff A B [--threshold 5%] [--format text|csv|json] [--fail-on-regression]\n"
      "                               per kernel/range/metric change with CI and significance\n"
      "  start PID / stop PID         open / close an on-demand capture window "
      "(KP_CAPTURE=signal)\n"
      "  metrics list|check --chip CHIP [...]\n"
      "                               list or validate CUPTI metric names offline (no GPU)\n"
      "  version                      print the kp version\n"
      "\n"
      "Run 'kptrace <command> --help' for the command's flags.\n",
      out);
}

int Dispatch(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  int sub_argc = argc - 2;
  char** sub_argv = argv + 2;
  if (cmd == "info" || cmd == "convert" || cmd == "summary" || cmd == "report" || cmd == "diff") {
    kp::BackHeapWithHugePages();  // where it is not possible, the commands run as they are
  }
  if (cmd == "info") return kp::cli::RunInfo(sub_argc, sub_argv);
  if (cmd == "convert") return kp::cli::RunConvert(sub_argc, sub_argv);
  if (cmd == "summary") return kp::cli::RunSummary(sub_argc, sub_argv);
  if (cmd == "metrics") {
    // The only command that needs libcupti (the Profiler Host API); the others run without CUDA.
    const bool help = sub_argc > 0 && (std::strcmp(sub_argv[0], "--help") == 0 ||
                                       std::strcmp(sub_argv[0], "-h") == 0);
    if (!help) {
      const kp::Status cupti = kp::LoadCuptiLibrary().WithContext("kptrace metrics");
      if (!cupti.ok()) {
        std::fprintf(stderr, "%s\n", cupti.message().c_str());
        return 1;
      }
    }
    return kp::cli::RunMetrics(sub_argc, sub_argv);
  }
  if (cmd == "run") return kp::cli::RunLauncher(sub_argc, sub_argv);
  if (cmd == "report") return kp::cli::RunReport(sub_argc, sub_argv);
  if (cmd == "diff") return kp::cli::RunDiff(sub_argc, sub_argv);
  if (cmd == "start") return kp::cli::RunCaptureStart(sub_argc, sub_argv);
  if (cmd == "stop") return kp::cli::RunCaptureStop(sub_argc, sub_argv);
  if (cmd == "version" || cmd == "--version") {
    std::printf("kptrace %s\n", KP_VERSION);
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    PrintUsage(stdout);
    return 0;
  }
  std::fprintf(stderr, "kptrace: unknown command '%s'\n\n", cmd.c_str());
  PrintUsage(stderr);
  return 2;
}

}  // namespace

// Output that could not be written is an error whatever the command: `kptrace info > /dev/full`
// says so and fails.
int main(int argc, char** argv) {
  int rc = Dispatch(argc, argv);
  if (const kp::Status flushed = kp::FlushStandardStreams(); !flushed.ok()) {
    std::fprintf(stderr, "kptrace: %s\n", flushed.message().c_str());
    if (rc == 0) rc = 1;
  }
  return rc;
}
