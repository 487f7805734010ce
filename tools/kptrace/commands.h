// commands.h: the kptrace subcommands. Each takes the arguments after its name and returns the
// process exit code (0 ok, 1 failure, 2 usage error). main.cc only dispatches.
#pragma once

namespace kp::cli {

int RunInfo(int argc, char** argv);          // tools/info
int RunConvert(int argc, char** argv);       // tools/export
int RunSummary(int argc, char** argv);       // tools/summary
int RunMetrics(int argc, char** argv);       // tools/metrics
int RunLauncher(int argc, char** argv);      // tools/run: `kptrace run [flags] -- cmd ...`
int RunReport(int argc, char** argv);        // tools/report, entry in report_command.cc
int RunDiff(int argc, char** argv);          // tools/diff, entry in diff_command.cc
int RunCaptureStart(int argc, char** argv);  // tools/capture: `kptrace start PID`
int RunCaptureStop(int argc, char** argv);   // tools/capture: `kptrace stop PID`

}  // namespace kp::cli
