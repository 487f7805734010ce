#include "tools/pc_stalls/pc_stall_table.h"

#include <cxxabi.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tools/summary/text_format.h"

namespace kp {
namespace {

constexpr char kPrefix[] = "smsp__pcsamp_warps_issue_stalled_";
constexpr char kNotIssued[] = "_not_issued";

std::string BareReason(const std::string& name) {
  std::string s = name;
  if (s.rfind(kPrefix, 0) == 0) s = s.substr(sizeof(kPrefix) - 1);
  if (s.rfind("smsp__pcsamp_", 0) == 0) s = s.substr(13);
  return s;
}

struct Reading {
  const char* reason;
  const char* text;
};

// The profiling workflow's reading of each reason (Nsight Compute's Warp State names), with
// what to try first.
constexpr Reading kReadings[] = {
    {"long_scoreboard",
     "waiting on global/local memory (HBM, L2, register spills): improve locality and "
     "coalescing, prefetch or pipeline the loads, raise occupancy to hide the latency"},
    {"short_scoreboard",
     "waiting on shared memory or special math (MUFU): likely shared-memory bank conflicts"},
    {"wait",
     "waiting on a fixed-latency dependency between instructions: give each thread more "
     "independent work (ILP); with Barrier, sync overhead or warp imbalance"},
    {"barrier", "waiting at a block barrier (__syncthreads): sync overhead or warp imbalance"},
    {"not_selected",
     "eligible but another warp was issued: occupancy is healthy, the scheduler had other warps"},
    {"selected", "issuing an instruction: not a stall"},
    {"math_pipe_throttle",
     "a math pipe is busy: compute-bound; use tensor cores or lower precision"},
    {"mio_throttle",
     "the MIO queue is full (shared memory, special math, dynamic branches): fewer or wider "
     "shared-memory instructions"},
    {"lg_throttle",
     "the local/global memory queue is full: fewer, wider (vectorized) memory instructions, "
     "fewer register spills"},
    {"tex_throttle", "the texture/L1TEX pipe is full: fewer texture or surface fetches"},
    {"membar", "waiting on a memory fence: fewer or narrower fences"},
    {"branch_resolving", "waiting for a branch target: divergent or dense branching"},
    {"no_instructions",
     "no instruction fetched (instruction-cache miss, just after a branch): smaller or less "
     "unrolled code"},
    {"dispatch_stall", "the dispatcher could not issue (pipeline conflict)"},
    {"drain", "waiting for memory stores to drain at the warp's exit"},
    {"imc_miss", "immediate-constant cache miss: constants reached divergently"},
    {"sleeping", "the warp is sleeping (nanosleep or a yield)"},
    {"misc", "other reasons"},
    {"warpgroup_arrive",
     "waiting at a warpgroup arrive/wait (wgmma) barrier: the tensor-core pipeline is the "
     "limit or its stages are too few"},
};

// RFC 4180: quoted when it holds a comma, quote, CR or LF, quotes doubled.
std::string CsvQuoted(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

}  // namespace

bool IsNotIssuedReason(const std::string& name) {
  const size_t n = sizeof(kNotIssued) - 1;
  return name.size() > n && name.compare(name.size() - n, n, kNotIssued) == 0;
}

std::string PcStallDisplayName(const std::string& cupti_name) {
  // Nsight Compute's spelling: words in title case, the unit acronyms in capitals.
  static const char* const kAcronyms[] = {"mio", "lg", "imc", "tex"};
  std::string out, word;
  auto flush = [&] {
    if (word.empty()) return;
    bool acronym = false;
    for (const char* a : kAcronyms) acronym = acronym || word == a;
    for (size_t i = 0; i < word.size(); ++i) {
      if (acronym || i == 0)
        word[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[i])));
    }
    out += (out.empty() ? "" : " ") + word;
    word.clear();
  };
  for (char c : BareReason(cupti_name)) {
    if (c == '_') {
      flush();
    } else {
      word += c;
    }
  }
  flush();
  return out;
}

const char* PcStallReading(const std::string& cupti_name) {
  std::string bare = BareReason(cupti_name);
  if (IsNotIssuedReason(bare)) bare.resize(bare.size() - (sizeof(kNotIssued) - 1));
  for (const Reading& r : kReadings) {
    if (bare == r.reason) return r.text;
  }
  return "";
}

std::string DemangledKernelName(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return mangled;
  std::string out(d);
  std::free(d);
  return out;
}

void PcStallTable::AddChunk(const Chunk& chunk) {
  for (const PcStallReason& r : chunk.pc_stall_reasons()) {
    reason_names_[{r.device(), r.index()}] = r.name();
  }
  for (const PcStalls& p : chunk.pc_stalls()) {
    Accum& a = kernels_[{p.device(), p.kernel()}];
    if (p.sampling_period() != 0) a.period = p.sampling_period();
    const int n = std::min(p.reason_index_size(), p.samples_size());
    for (int i = 0; i < n; ++i) a.reasons[p.reason_index(i)] += p.samples(i);
    for (const PcStallPc& pc : p.top_pcs()) {
      auto& row = a.pcs[pc.pc_offset()];
      const int m = std::min(pc.reason_index_size(), pc.samples_size());
      for (int i = 0; i < m; ++i) row.first[pc.reason_index(i)] += pc.samples(i);
      if (!pc.file().empty()) row.second = {pc.file(), pc.line()};
    }
  }
}

std::string PcStallTable::ReasonName(uint32_t device, uint32_t index) const {
  auto it = reason_names_.find({device, index});
  return it != reason_names_.end() ? it->second : "reason " + std::to_string(index);
}

std::vector<PcStallKernel> PcStallTable::Kernels(size_t max_pcs) const {
  std::vector<PcStallKernel> out;
  for (const auto& [key, a] : kernels_) {
    PcStallKernel k;
    k.device = key.first;
    k.kernel = key.second;
    k.sampling_period = a.period;
    for (const auto& [index, n] : a.reasons) {
      PcStallReasonShare r;
      r.name = ReasonName(k.device, index);
      r.display = PcStallDisplayName(r.name);
      r.samples = n;
      if (!IsNotIssuedReason(r.name)) k.samples += n;
      k.reasons.push_back(std::move(r));
    }
    for (PcStallReasonShare& r : k.reasons) {
      r.fraction =
          (k.samples == 0 || IsNotIssuedReason(r.name)) ? 0 : double(r.samples) / k.samples;
    }
    std::sort(k.reasons.begin(), k.reasons.end(),
              [](const PcStallReasonShare& x, const PcStallReasonShare& y) {
                return x.samples != y.samples ? x.samples > y.samples : x.name < y.name;
              });
    for (const auto& [offset, row] : a.pcs) {
      PcStallLine line;
      line.pc_offset = offset;
      uint64_t best = 0;
      for (const auto& [index, n] : row.first) {
        const std::string name = ReasonName(k.device, index);
        if (IsNotIssuedReason(name)) continue;
        line.samples += n;
        if (n > best) {
          best = n;
          line.top_reason = PcStallDisplayName(name);
        }
      }
      line.file = row.second.first;
      line.line = row.second.second;
      k.top_pcs.push_back(std::move(line));
    }
    std::sort(k.top_pcs.begin(), k.top_pcs.end(), [](const PcStallLine& x, const PcStallLine& y) {
      return x.samples != y.samples ? x.samples > y.samples : x.pc_offset < y.pc_offset;
    });
    if (k.top_pcs.size() > max_pcs) k.top_pcs.resize(max_pcs);
    if (k.samples > 0) out.push_back(std::move(k));
  }
  std::stable_sort(out.begin(), out.end(), [](const PcStallKernel& x, const PcStallKernel& y) {
    return x.samples > y.samples;
  });
  return out;
}

std::string FormatPcStallsText(const PcStallTable& table, size_t top_kernels) {
  const std::vector<PcStallKernel> kernels = table.Kernels();
  if (kernels.empty()) return "";
  uint64_t all = 0;
  for (const PcStallKernel& k : kernels) all += k.samples;
  std::string o =
      "\nWarp stalls (PC sampling: share of each kernel's warp samples per reason, all launches "
      "together)\n";
  size_t shown = 0;
  for (const PcStallKernel& k : kernels) {
    if (shown++ == top_kernels) {
      o += StringPrintf("  ... %zu more kernels (kptrace convert --to csv: pc_stalls.csv)\n",
                        kernels.size() - top_kernels);
      break;
    }
    o += StringPrintf("  %s  [GPU %u, %" PRIu64 " samples, %.1f%% of all",
                      ShortKernelName(DemangledKernelName(k.kernel), 90).c_str(), k.device,
                      k.samples, all == 0 ? 0.0 : 100.0 * k.samples / all);
    if (k.sampling_period != 0) o += StringPrintf(", every 2^%u cycles", k.sampling_period);
    o += "]\n    ";
    int listed = 0;
    std::string top_name;
    for (const PcStallReasonShare& r : k.reasons) {
      if (IsNotIssuedReason(r.name) || r.fraction < 0.01) continue;
      if (listed == 5) break;
      if (listed == 0) top_name = r.name;
      o += StringPrintf("%s%s %.0f %%", listed == 0 ? "" : ", ", r.display.c_str(),
                        r.fraction * 100);
      ++listed;
    }
    o += "\n";
    if (!top_name.empty()) {
      const char* reading = PcStallReading(top_name);
      if (reading[0] != '\0') {
        o += "    => " + PcStallDisplayName(top_name) + ": " + reading + "\n";
      }
    }
    for (size_t i = 0; i < k.top_pcs.size() && i < 3; ++i) {
      const PcStallLine& pc = k.top_pcs[i];
      o += StringPrintf("    pc +0x%04" PRIx64 "  %5.1f%%  %s", pc.pc_offset,
                        100.0 * pc.samples / k.samples, pc.top_reason.c_str());
      if (!pc.file.empty()) o += StringPrintf("  %s:%u", pc.file.c_str(), pc.line);
      o += "\n";
    }
  }
  return o;
}

Status WritePcStallsCsv(const std::string& dir, const std::map<int, PcStallTable>& tables) {
  std::string reasons = "file,device,kernel,mangled_kernel,reason,cupti_reason,samples,percent\n";
  std::string pcs =
      "file,device,kernel,mangled_kernel,pc_offset,samples,top_reason,source_file,line\n";
  for (const auto& [file, table] : tables) {
    for (const PcStallKernel& k : table.Kernels(SIZE_MAX)) {
      const std::string prefix = std::to_string(file) + "," + std::to_string(k.device) + "," +
                                 CsvQuoted(DemangledKernelName(k.kernel)) + "," +
                                 CsvQuoted(k.kernel) + ",";
      for (const PcStallReasonShare& r : k.reasons) {
        reasons +=
            prefix + CsvQuoted(r.display) + "," + CsvQuoted(r.name) + "," +
            std::to_string(r.samples) + "," +
            (IsNotIssuedReason(r.name) ? std::string() : StringPrintf("%.3f", r.fraction * 100)) +
            "\n";
      }
      for (const PcStallLine& pc : k.top_pcs) {
        pcs += prefix + std::to_string(pc.pc_offset) + "," + std::to_string(pc.samples) + "," +
               CsvQuoted(pc.top_reason) + "," + CsvQuoted(pc.file) + "," +
               (pc.line == 0 ? std::string() : std::to_string(pc.line)) + "\n";
      }
    }
  }
  for (const auto& [name, text] :
       {std::make_pair("/pc_stalls.csv", &reasons), std::make_pair("/pc_stall_pcs.csv", &pcs)}) {
    const std::string path = dir + name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return Status::Error(path + ": cannot create: " + std::strerror(errno));
    const bool ok = std::fwrite(text->data(), 1, text->size(), f) == text->size();
    if (std::fclose(f) != 0 || !ok) {
      return Status::Error(path + ": write failed: " + std::strerror(errno));
    }
  }
  return Status();
}

}  // namespace kp
