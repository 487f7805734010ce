#include "tools/summary/step_ranges.h"

#include <algorithm>
#include <map>

#include "tools/run/clock_alignment.h"

namespace kp {

struct StepRanges::File {
  explicit File(size_t run_entries) : occurrences(run_entries) {}
  std::vector<uint32_t> by_key;  // the caller's key -> index into names + 1; 0: not seen
  std::vector<Name> names;
  // Every occurrence: key thread, tag the name's index.
  ExternalIntervalSort occurrences;
  // Per name, the count and time of its outermost occurrences.
  std::vector<uint64_t> outer_count;
  std::vector<double> outer_ns;
  bool finished = false;
};

StepRanges::StepRanges(size_t files, size_t run_entries)
    : run_entries_(run_entries), outermost_(std::min(run_entries, kOuterRunEntries)) {
  files_.resize(files);
}

StepRanges::~StepRanges() = default;

void StepRanges::Add(size_t fi, uint32_t key, const Name& name, uint32_t thread, uint64_t start,
                     uint64_t end) {
  if (fi >= files_.size()) return;
  if (files_[fi] == nullptr) files_[fi] = std::make_unique<File>(run_entries_);
  File& f = *files_[fi];
  if (key >= f.by_key.size()) f.by_key.resize(key + size_t{1}, 0);
  if (f.by_key[key] == 0) {
    f.names.push_back(name);
    f.by_key[key] = static_cast<uint32_t>(f.names.size());
  }
  f.occurrences.Add(thread, start, end, f.by_key[key] - 1);
}

Status StepRanges::FinishFile(size_t fi) {
  if (fi >= files_.size() || files_[fi] == nullptr) return Status();
  File& f = *files_[fi];
  f.outer_count.assign(f.names.size(), 0);
  f.outer_ns.assign(f.names.size(), 0);
  // Occurrences come by (thread, start); those with one start are ordered longest first (then
  // by name and domain), so that an enclosing range is seen before what it encloses. An occurrence
  // is outermost when no earlier one of its thread is still open at its start.
  bool have = false;
  uint64_t thread = 0, enclosing_end = 0;
  auto visit = [&](const KeyedInterval& r) {
    if (have && r.key == thread && r.start < enclosing_end) return;
    have = true;
    thread = r.key;
    enclosing_end = r.end;
    ++f.outer_count[r.tag];
    f.outer_ns[r.tag] += static_cast<double>(r.end - r.start);
    outermost_.Add(OuterKey(fi, r.tag), r.start, r.end);
  };
  std::vector<KeyedInterval> same_start;
  auto flush = [&] {
    std::sort(same_start.begin(), same_start.end(),
              [&f](const KeyedInterval& a, const KeyedInterval& b) {
                if (a.end != b.end) return a.end > b.end;
                return f.names[a.tag] < f.names[b.tag];  // the same choice in every process
              });
    for (const KeyedInterval& r : same_start) visit(r);
    same_start.clear();
  };
  const Status sorted = f.occurrences.ForEachSorted([&](const KeyedInterval* batch, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (!same_start.empty() &&
          (batch[i].key != same_start[0].key || batch[i].start != same_start[0].start)) {
        flush();
      }
      same_start.push_back(batch[i]);
    }
  });
  flush();
  f.finished = sorted.ok();
  return sorted;
}

Status StepRanges::Choose(Name* step, std::vector<std::vector<double>>* steps) {
  *step = {};
  steps->clear();
  // Per name: in how many files it repeats (as an outermost range), and its time in the first.
  struct Candidate {
    size_t files = 0;
    double first_file_ns = 0;
  };
  std::map<Name, Candidate> candidates;
  for (size_t fi = 0; fi < files_.size(); ++fi) {
    const File* f = files_[fi].get();
    if (f == nullptr || !f->finished) continue;
    for (size_t id = 0; id < f->names.size(); ++id) {
      const Name& name = f->names[id];
      if (f->outer_count[id] < 2 || IsCollectiveKernelName(name.second) ||
          IsCollectiveKernelName(name.first)) {
        continue;
      }
      Candidate& c = candidates[name];
      ++c.files;
      if (fi == 0) c.first_file_ns = f->outer_ns[id];
    }
  }
  const Candidate* best = nullptr;
  for (const auto& [name, c] : candidates) {
    if (best == nullptr || c.files > best->files ||
        (c.files == best->files && c.first_file_ns > best->first_file_ns)) {
      best = &c;
      *step = name;
    }
  }
  if (best == nullptr || best->files < 2) {
    *step = {};
    return Status();
  }
  // Each file's occurrences of the step range: one pass over what the sorter holds, run after
  // run (no merge), then each file's sorted by start.
  std::vector<uint64_t> wanted(files_.size(), UINT64_MAX);
  for (size_t fi = 0; fi < files_.size(); ++fi) {
    const File* f = files_[fi].get();
    if (f == nullptr || !f->finished) continue;
    const auto it = std::find(f->names.begin(), f->names.end(), *step);
    const auto id = static_cast<uint32_t>(it - f->names.begin());
    if (it != f->names.end() && f->outer_count[id] >= 2) wanted[fi] = OuterKey(fi, id);
  }
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> occurrences(files_.size());
  const Status read = outermost_.ForEachInRunOrder([&](const KeyedInterval* batch, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const size_t fi = static_cast<size_t>(batch[i].key >> 32);
      if (fi < wanted.size() && batch[i].key == wanted[fi])
        occurrences[fi].emplace_back(batch[i].start, batch[i].end - batch[i].start);
    }
  });
  if (!read.ok()) {
    *step = {};
    return read;
  }
  steps->resize(files_.size());
  for (size_t fi = 0; fi < files_.size(); ++fi) {
    std::sort(occurrences[fi].begin(), occurrences[fi].end());  // one start: shortest first
    (*steps)[fi].reserve(occurrences[fi].size());
    for (const auto& [start, duration] : occurrences[fi])
      (*steps)[fi].push_back(static_cast<double>(duration));
  }
  return Status();
}

}  // namespace kp
