#include "tools/export/record_args.h"

namespace kp {

const char* const kArgNames[kArgCount] = {
    "",
    "grid",
    "block",
    "cluster",
    "registers per thread",
    "static shared memory (bytes)",
    "dynamic shared memory (bytes)",
    "correlation",
    "stream",
    "device",
    "graph id",
    "graph node id",
    "mangled name",
    "kind",
    "bytes",
    "bandwidth (GB/s)",
    "src memory",
    "dst memory",
    "value",
    "memory kind",
    "domain",
    "category",
    "payload",
    "return value",
    "occurrence",
    "occurrences used",
    "SM clock (kHz)",
    "context",
    "src device",
    "dst device",
    "end thread",
    "event id",
    "thread",
    "open",
};

}  // namespace kp
