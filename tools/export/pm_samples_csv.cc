#include "tools/export/pm_samples_csv.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "common/pm_counters.h"

namespace kp {
namespace {

struct SpillRow {
  int32_t file;
  uint32_t pid, device;
  int64_t start, duration;
  double t_ms;
  uint32_t column_set, num_values;
};

void AppendNumber(std::string* out, double v) {
  char tmp[32];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  out->append(tmp, static_cast<size_t>(r.ptr - tmp));
}

}  // namespace

PmSamplesCsv::~PmSamplesCsv() {
  if (spill_ != nullptr) std::fclose(spill_);
}

Status PmSamplesCsv::Begin() {
  spill_ = std::tmpfile();
  if (spill_ == nullptr) {
    return Status::Error(std::string("cannot create a temporary file for pm_samples.csv: ") +
                         std::strerror(errno));
  }
  return Status();
}

void PmSamplesCsv::AddChunk(int file_index, uint32_t pid, uint64_t base_ns, const Chunk& c) {
  for (const PmSampleConfig& pc : c.pm_sample_configs()) {
    const auto key = std::make_pair(file_index, pc.id());
    if (column_set_of_.count(key) != 0) continue;
    std::vector<size_t> columns;
    for (const std::string& n : pc.counter_names()) {
      auto [it, added] = column_of_.emplace(n, counters_.size());
      if (added) counters_.push_back(n);
      columns.push_back(it->second);
    }
    column_set_of_[key] = column_sets_.size();
    column_sets_.push_back(std::move(columns));
  }
  for (const PmSample& s : c.pm_samples()) {
    auto it = column_set_of_.find({file_index, s.config()});
    SpillRow row{};
    row.file = file_index;
    row.pid = pid;
    row.device = s.device();
    row.start = s.start();
    row.duration = s.duration();
    row.t_ms = (static_cast<double>(s.start()) - static_cast<double>(base_ns)) / 1e6;
    row.column_set = it == column_set_of_.end() ? UINT32_MAX : static_cast<uint32_t>(it->second);
    row.num_values = static_cast<uint32_t>(s.values_size());
    if (std::fwrite(&row, sizeof row, 1, spill_) != 1 ||
        (row.num_values > 0 && std::fwrite(s.values().data(), sizeof(double), row.num_values,
                                           spill_) != row.num_values)) {
      spill_failed_ = true;
    }
  }
}

Status PmSamplesCsv::End(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::Error(path + ": cannot create: " + std::strerror(errno));
  std::string out = "file,pid,device,start_ns,end_ns,duration_ns,t_ms";
  for (const std::string& n : counters_) out += "," + PmCounterLabel(n);
  out += "\r\n";
  std::rewind(spill_);
  SpillRow row;
  std::vector<double> values, columns(counters_.size());
  while (!spill_failed_ && std::fread(&row, sizeof row, 1, spill_) == 1) {
    values.resize(row.num_values);
    if (row.num_values > 0 &&
        std::fread(values.data(), sizeof(double), row.num_values, spill_) != row.num_values) {
      spill_failed_ = true;
      break;
    }
    std::fill(columns.begin(), columns.end(), std::nan(""));
    if (row.column_set < column_sets_.size()) {
      const std::vector<size_t>& set = column_sets_[row.column_set];
      for (size_t i = 0; i < values.size() && i < set.size(); ++i) {
        const std::string& name = counters_[set[i]];
        columns[set[i]] = PmCounterShownValue(
            name, values[i], static_cast<uint64_t>(std::max<int64_t>(row.duration, 0)));
      }
    }
    out += std::to_string(row.file) + "," + std::to_string(row.pid) + "," +
           std::to_string(row.device) + "," + std::to_string(row.start) + "," +
           std::to_string(row.start + row.duration) + "," + std::to_string(row.duration) + ",";
    char tmp[48];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, row.t_ms, std::chars_format::fixed, 6);
    out.append(tmp, static_cast<size_t>(r.ptr - tmp));
    for (double v : columns) {
      out += ',';
      if (!std::isnan(v)) AppendNumber(&out, v);
    }
    out += "\r\n";
    if (out.size() > (1u << 20)) {
      if (std::fwrite(out.data(), 1, out.size(), f) != out.size()) spill_failed_ = true;
      out.clear();
    }
  }
  bool ok = !spill_failed_ && std::fwrite(out.data(), 1, out.size(), f) == out.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return Status::Error(path + ": write failed (disk full?)");
  return Status();
}

}  // namespace kp
