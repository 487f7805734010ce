// commands.h: the kptrace subcommands, one <command>_command.cc each in tools/kptrace. Each
// takes the arguments after its name, parses them, calls its library (tools/<component>) and
// prints; it returns the process exit code (0 ok, 1 failure, 2 usage error). main.cc only
// dispatches.
#pragma once

namespace kp::cli {

int RunInfo(int argc, char** argv);      // info_command.cc (tools/info)
int RunConvert(int argc, char** argv);   // convert_command.cc (tools/export/convert.h)
int RunSummary(int argc, char** argv);   // summary_command.cc (tools/summary)
int RunMetrics(int argc, char** argv);   // metrics_command.cc (tools/metrics)
int RunLauncher(int argc, char** argv);  // run_command.cc (tools/run): `kptrace run [flags] -- cmd`
int RunReport(int argc, char** argv);    // report_command.cc (tools/report)
int RunDiff(int argc, char** argv);      // diff_command.cc (tools/diff)

}  // namespace kp::cli
