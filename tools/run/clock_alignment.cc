#include "tools/run/clock_alignment.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/time_math.h"
#include "tools/reader/trace_reader.h"

namespace kp {
namespace {

struct CollectiveEnds {
  bool opened = false;
  std::string host, boot_id;
  int rank = -1;
  // kernel name -> end times in start order
  std::map<std::string, std::vector<int64_t>> ends;
};

CollectiveEnds ReadCollectiveEnds(const std::string& path) {
  CollectiveEnds out;
  auto reader = TraceReader::Open(path).value_or(nullptr);
  if (!reader) return out;
  out.opened = true;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> by_name;  // (start, end)
  Chunk c;
  while (reader->Next(&c)) {
    for (const Kernel& k : c.kernels()) {
      if (k.start() <= 0 || k.duration() < 0) continue;
      const KernelShape* shape = reader->Shape(k.shape());
      if (shape == nullptr) continue;
      const std::string name(reader->Str(shape->demangled()));
      if (!IsCollectiveKernelName(name)) continue;
      by_name[name].emplace_back(k.start(), SaturatingAdd(k.start(), k.duration()));
    }
  }
  if (const Header* h = reader->header()) {
    out.host = h->hostname();
    out.boot_id = h->boot_id();
    out.rank = h->rank();
  }
  for (auto& [name, v] : by_name) {
    std::sort(v.begin(), v.end());
    std::vector<int64_t>& ends = out.ends[name];
    for (const auto& [start, end] : v) ends.push_back(end);
  }
  return out;
}

double Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[(v.size() - 1) / 2]);
}

void ShiftMessage(google::protobuf::Message* m, int64_t offset) {
  const auto* d = m->GetDescriptor();
  const auto* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    using FD = google::protobuf::FieldDescriptor;
    if (f->cpp_type() == FD::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        const int n = r->FieldSize(*m, f);
        for (int j = 0; j < n; ++j) ShiftMessage(r->MutableRepeatedMessage(m, f, j), offset);
      } else if (r->HasField(*m, f)) {
        ShiftMessage(r->MutableMessage(m, f), offset);
      }
      continue;
    }
    if (f->is_repeated()) continue;
    const std::string& name = f->name();
    const bool is_time = name == "start" || name == "time" || name == "time_base_ns" ||
                         name == "start_time_trace_ns" || name == "end_time_ns" ||
                         name == "time_ns";
    if (!is_time) continue;
    if (f->cpp_type() == FD::CPPTYPE_INT64) {
      const int64_t v = r->GetInt64(*m, f);
      if (v > 0) r->SetInt64(m, f, SaturatingAdd(v, offset));
    } else if (f->cpp_type() == FD::CPPTYPE_UINT64) {
      const uint64_t v = r->GetUInt64(*m, f);
      if (v > 0) {
        const int64_t shifted = SaturatingAdd(static_cast<int64_t>(v), offset);
        r->SetUInt64(m, f, shifted > 0 ? static_cast<uint64_t>(shifted) : 0);
      }
    }
  }
}

}  // namespace

bool IsCollectiveKernelName(const std::string& name) {
  for (size_t i = 0; i + 4 <= name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(name[i])) == 'n' &&
        std::tolower(static_cast<unsigned char>(name[i + 1])) == 'c' &&
        std::tolower(static_cast<unsigned char>(name[i + 2])) == 'c' &&
        std::tolower(static_cast<unsigned char>(name[i + 3])) == 'l') {
      return true;
    }
  }
  return false;
}

ClockAlignment AlignOnCollectives(const std::vector<std::string>& files) {
  ClockAlignment a;
  a.offset_ns.assign(files.size(), 0);
  a.matched.assign(files.size(), 0);
  a.spread_ns.assign(files.size(), 0);
  if (files.empty()) return a;
  std::vector<CollectiveEnds> ends;
  for (const std::string& f : files) ends.push_back(ReadCollectiveEnds(f));
  const CollectiveEnds& ref = ends[0];
  char line[512];
  std::snprintf(line, sizeof line, "%s: reference clock (rank %d, host %s)", files[0].c_str(),
                ref.rank, ref.host.c_str());
  a.lines.push_back(line);
  for (size_t i = 1; i < files.size(); ++i) {
    const CollectiveEnds& e = ends[i];
    if (!e.opened) continue;
    if (!ref.boot_id.empty() && e.boot_id == ref.boot_id) {
      std::snprintf(line, sizeof line, "%s: same host as the reference (boot id): no offset",
                    files[i].c_str());
      a.lines.push_back(line);
      continue;
    }
    std::vector<int64_t> diffs;
    for (const auto& [name, ref_ends] : ref.ends) {
      auto it = e.ends.find(name);
      if (it == e.ends.end()) continue;
      const size_t n = std::min(ref_ends.size(), it->second.size());
      for (size_t k = 0; k < n; ++k) diffs.push_back(ref_ends[k] - it->second[k]);
    }
    if (diffs.empty()) {
      std::snprintf(line, sizeof line,
                    "%s: no collective kernel (NCCL) in common with the reference: left as "
                    "recorded",
                    files[i].c_str());
      a.lines.push_back(line);
      continue;
    }
    const int64_t offset = static_cast<int64_t>(Median(diffs));
    std::vector<int64_t> residuals;
    for (int64_t d : diffs) residuals.push_back(d > offset ? d - offset : offset - d);
    a.offset_ns[i] = offset;
    a.matched[i] = diffs.size();
    a.spread_ns[i] = Median(residuals);
    std::snprintf(line, sizeof line,
                  "%s: clock offset %+.3f ms (rank %d, host %s; %zu collective ends matched, "
                  "median residual %.1f us)",
                  files[i].c_str(), static_cast<double>(offset) / 1e6, e.rank, e.host.c_str(),
                  diffs.size(), a.spread_ns[i] / 1e3);
    a.lines.push_back(line);
  }
  return a;
}

void ShiftChunkTimes(Chunk* chunk, int64_t offset_ns) {
  if (offset_ns == 0) return;
  ShiftMessage(chunk, offset_ns);
}

}  // namespace kp
