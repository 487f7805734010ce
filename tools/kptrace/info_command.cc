// info_command.cc: `kptrace info [--json] [--file-only] FILE|RUN...`: expands runs, reads each
// file once (tools/info) and prints text or JSON; exit 1 when nothing at all could be read.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/info/trace_info.h"
#include "tools/io/output_guard.h"
#include "tools/kptrace/commands.h"
#include "tools/run/run_inputs.h"

namespace kp::cli {

int RunInfo(int argc, char** argv) {
  static const char kUsage[] = "usage: kptrace info [--json] [--file-only] FILE|RUN...\n";
  bool json_out = false, file_only = false;
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") {
      json_out = true;
    } else if (a == "--file-only") {
      file_only = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "kptrace info: unknown flag '%s' (%s)\n", a.c_str(), kUsage);
      return 2;
    } else {
      args.push_back(a);
    }
  }
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  TraceInputs expanded = ExpandTraceInputs(args, file_only);
  for (const std::string& e : expanded.errors) {
    std::fprintf(stderr, "kptrace info: %s\n", e.c_str());
  }
  InputSet inputs;  // a file given twice is read once
  inputs.AddAll(expanded.files, "kptrace info");
  const std::vector<std::string> files = inputs.paths();
  std::vector<TraceInfo> infos;
  bool any = false;
  for (const std::string& f : files) {
    infos.push_back(CollectTraceInfo(f));
    any |= infos.back().readable();
    if (!infos.back().opened)
      std::fprintf(stderr, "kptrace info: %s\n", infos.back().open_error.c_str());
  }
  if (json_out) {
    for (const std::string& n : expanded.notes)
      std::fprintf(stderr, "kptrace info: %s\n", n.c_str());
    std::fputs(FormatTraceInfoJson(infos).c_str(), stdout);
  } else {
    for (const std::string& n : expanded.notes) std::printf("%s\n", n.c_str());
    if (infos.size() > 1) std::fputs(FormatProcessTable(infos).c_str(), stdout);
    for (size_t i = 0; i < infos.size(); ++i) {
      if (i > 0 || infos.size() > 1) std::fputs("\n", stdout);
      std::fputs(FormatTraceInfoText(infos[i]).c_str(), stdout);
    }
  }
  if (!any) {
    std::fprintf(stderr, "kptrace info: nothing could be read from %s\n",
                 files.size() == 1 ? files[0].c_str() : "any of the files");
  }
  return any ? 0 : 1;
}

}  // namespace kp::cli
