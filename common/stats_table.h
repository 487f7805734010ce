// stats_table.h: what each kp.Stats counter means to a reader of a trace. The one place that
// decides "DATA LOSS": `kptrace info` and `summary` both ask here. The classification is the
// (stat_severity) option on each Stats field in proto/kptrace.proto, via the generated table.
#pragma once

#include <string_view>

#include "proto/kptrace_schema.h"

namespace kp {

enum class StatClass {
  kLoss,         // records or time were lost or damaged: numbers built on the trace are low
  kBookkeeping,  // the writer's own counters (bytes, chunks, buffers)
  kInfo,         // a fact about the run that loses nothing (e.g. NVTX ranges left open)
};

// The class of the Stats counter `name`. A name this build does not know (a counter added
// by a newer writer) counts as a loss: a false alarm is better than a hidden loss.
StatClass ClassifyStat(std::string_view name);

}  // namespace kp
