// trace_expect.h: checks a kp trace against what a GPU test program says it did.
//
// The programs in tests/gpu/programs (and pytorch_train.py) print `expect key=value` lines; the
// checker reads the trace once through the real reader (tools/reader), gathers every record, and
// compares. Besides the program's own expectations it always checks what any good trace must
// hold: readable without damage, a clean end (or, for a killed run, none), nothing dropped, every
// GPU record linked to its launch call, per-stream timestamps ordered and non-overlapping, and
// described devices. One CheckResult per check, so the log says what passed with its numbers.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace kp::gputest {

// `expect key=value` or `expect key[arg]=value`. The arg may hold anything but "]=" (kernel
// names hold commas and spaces). Keys ending in _min / _max compare with >= / <=.
struct Expectation {
  std::string key;
  std::string arg;
  std::string value;
  int line = 0;
};

// Lines that do not start with "expect " are ignored (programs also print `info` lines).
// Malformed expect lines are appended to *errors.
std::vector<Expectation> ParseExpectations(std::istream& in, std::vector<std::string>* errors);

struct CheckResult {
  bool pass = false;
  std::string name;    // e.g. "kernel_count[axpy_kernel]" or "linked"
  std::string detail;  // the numbers behind the verdict
};

// Everything the checks need, gathered in one pass over the trace. Times are absolute ns.
struct TraceFacts {
  struct Kernel {
    uint64_t start = 0, end = 0;
    std::string name, demangled;
    uint32_t grid[3] = {}, block[3] = {}, cluster[3] = {};
    uint32_t dynamic_shared = 0;
    uint32_t device = 0, stream = 0, correlation = 0, graph_id = 0, flags = 0;
    uint64_t graph_node_id = 0;
  };
  struct Copy {  // memcpy and memset
    uint64_t start = 0, end = 0, bytes = 0;
    std::string kind;         // memcpy: "HTOD", ...; memset: "MEMSET"
    std::string host_memory;  // memcpy: source memory for HTOD/others, destination for DTOH
    bool async = false;
    uint32_t device = 0, stream = 0, correlation = 0, graph_id = 0, flags = 0;
    uint64_t graph_node_id = 0;
    bool peer = false;  // memcpy from a peer-to-peer record: src/dst devices below
    uint32_t src_device = 0, dst_device = 0;
  };
  struct Api {
    uint64_t start = 0, end = 0;
    std::string name;
    uint32_t thread_id = 0, correlation = 0;
  };
  struct Range {
    uint64_t start = 0, end = 0;
    std::string name, domain, payload;
    uint32_t thread_id = 0, end_thread_id = 0, category = 0, color = 0, flags = 0;
    bool has_color = false;
  };
  struct Mark {
    uint64_t time = 0;
    std::string name, domain, payload;
    uint32_t thread_id = 0, category = 0, color = 0;
    bool has_color = false;
  };
  struct DeviceDesc {
    uint32_t id = 0;
    std::string name, uuid_hex;
    uint32_t cc_major = 0, cc_minor = 0, sm_count = 0;
  };

  std::vector<Kernel> kernels;
  std::vector<Copy> memcpys, memsets;
  std::vector<Api> api_calls;
  std::vector<Range> ranges;
  std::vector<Mark> marks;
  std::multimap<std::string, uint32_t> thread_names;  // name -> OS thread id
  std::vector<DeviceDesc> devices;

  bool have_header = false;
  std::string header_kp_version, header_hostname, header_driver_version;
  uint32_t header_pid = 0, header_command_args = 0;
  int32_t header_cuda_driver_version = 0;
  uint64_t header_start_time_unix_ns = 0;
  bool have_footer = false;
  bool clean_end = false;
  uint64_t footer_kernels = 0, footer_memcpys = 0, footer_memsets = 0, footer_api_calls = 0,
           footer_nvtx_ranges = 0, footer_nvtx_marks = 0;
  uint64_t chunks = 0;
  // Trace Stats (cumulative, from the last chunk read).
  uint64_t cupti_dropped = 0, buffers_refused = 0, zero_timestamps = 0, write_errors = 0,
           nvtx_unmatched_ends = 0, unknown_records = 0;
  // Reader damage, one line per kind; truncated tail bytes kept apart (a killed run has one).
  std::vector<std::string> damage;
  uint64_t truncated_tail_bytes = 0;
};

// Reads the whole trace. An error only if it cannot be opened at all.
Status LoadTraceFacts(const std::string& path, TraceFacts* facts);

// The always-on checks plus one check per expectation.
std::vector<CheckResult> CheckTrace(const TraceFacts& facts,
                                    const std::vector<Expectation>& expectations);

}  // namespace kp::gputest
