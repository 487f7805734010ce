// convert.h: streams trace files through one Exporter (exporter.h) into one output, in input
// order, so several ranks or processes merge into one CSV directory, Chrome JSON or Perfetto
// trace. The command line is tools/kptrace/convert_command.cc.
//
// A file's first chunk is read before BeginFile so the exporter sees its header and devices.
// Inputs are open one at a time; the output is written under a temporary name and renamed into
// place at the end (tools/io/output_guard.h), so a failed conversion leaves no output behind.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "tools/io/output_guard.h"

namespace kp {

struct ConvertOptions {
  std::string format;  // csv | chrome (or json) | perfetto
  // A directory for csv, a file otherwise; "" = next to the first input (<base>_csv/,
  // <base>.json, <base>.perfetto-trace).
  std::string output;
  bool progress = false;           // a progress line on stderr
  bool align_collectives = false;  // shift each process's clock onto the first's
  // Receives one line per warning (a file skipped, damage met, clock alignment), without the
  // command's prefix. May be empty.
  std::function<void(const std::string&)> report;
};

struct ConvertResult {
  Status status;            // not OK: nothing was written; the message names the problem
  bool bad_output = false;  // the failure is the output the caller chose (a usage error)
  std::string output;       // the path written (or that would have been)
  uint64_t records = 0;
  int files_read = 0;
};

// `inputs` holds each file once; the output may not be one of them.
ConvertResult ConvertTraces(const InputSet& inputs, const ConvertOptions& options);

}  // namespace kp
