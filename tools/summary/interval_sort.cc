#include "tools/summary/interval_sort.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <queue>

#include "common/sort_runs.h"

namespace kp {
namespace {

constexpr size_t kReadEntries = 4096;  // per run while merging

// A function object, not a function pointer, so std::sort inlines the comparison.
struct Before {
  bool operator()(const KeyedInterval& a, const KeyedInterval& b) const {
    return a.key != b.key ? a.key < b.key : a.start < b.start;
  }
};

struct StartBefore {
  bool operator()(const KeyedInterval& a, const KeyedInterval& b) const {
    return a.start < b.start;
  }
};

// Sorts by (key, start). There are few keys (devices, streams) and each key's intervals mostly
// arrive in time order: they are grouped by key in one counting pass, and each group's runs are
// merged by start (common/sort_runs.h).
void SortRun(std::vector<KeyedInterval>* v) {
  if (std::is_sorted(v->begin(), v->end(), Before())) return;
  constexpr size_t kMaxKeys = 64;
  uint64_t keys[kMaxKeys];
  size_t counts[kMaxKeys] = {};
  size_t n = 0, last = 0;
  for (const KeyedInterval& iv : *v) {
    if (n == 0 || keys[last] != iv.key) {
      last = 0;
      while (last < n && keys[last] != iv.key) ++last;
      if (last == n) {
        if (n == kMaxKeys) {
          std::sort(v->begin(), v->end(), Before());
          return;
        }
        keys[n++] = iv.key;
      }
    }
    ++counts[last];
  }
  size_t order[kMaxKeys], offset[kMaxKeys];
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order, order + n, [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    offset[order[i]] = at;
    at += counts[order[i]];
  }
  std::vector<KeyedInterval> grouped(v->size());
  size_t next[kMaxKeys];
  std::copy(offset, offset + n, next);
  last = 0;
  for (const KeyedInterval& iv : *v) {
    if (keys[last] != iv.key) {
      last = 0;
      while (keys[last] != iv.key) ++last;
    }
    grouped[next[last]++] = iv;
  }
  v->swap(grouped);
  for (size_t g = 0; g < n; ++g) {
    auto first = v->begin() + static_cast<ptrdiff_t>(offset[g]);
    auto end = first + static_cast<ptrdiff_t>(counts[g]);
    SortRuns(first, end, StartBefore());
  }
}

}  // namespace

ExternalIntervalSort::~ExternalIntervalSort() {
  if (file_ != nullptr) std::fclose(file_);
}

void ExternalIntervalSort::Spill() {
  if (spill_failed_) return;
  if (file_ == nullptr) file_ = std::tmpfile();
  SortRun(&buffer_);
  if (file_ == nullptr ||
      std::fwrite(buffer_.data(), sizeof(KeyedInterval), buffer_.size(), file_) != buffer_.size()) {
    // Keep everything in memory from here on: slower to grow, same answer. The part of a run
    // that was written is never read (run_sizes_ does not name it).
    spill_failed_ = true;
    return;
  }
  run_sizes_.push_back(buffer_.size());
  size_ += buffer_.size();
  buffer_.clear();
}

Status ExternalIntervalSort::ForEachSorted(const std::function<void(const KeyedInterval&)>& f) {
  SortRun(&buffer_);
  if (run_sizes_.empty()) {
    for (const KeyedInterval& iv : buffer_) f(iv);
    std::vector<KeyedInterval>().swap(buffer_);
    return Status();
  }
  if (std::fflush(file_) != 0) {
    return Status::Error(std::string("summary: temporary sort file: ") + std::strerror(errno));
  }
  struct Run {
    uint64_t offset, left;  // entries not yet read into `data`
    std::vector<KeyedInterval> data;
    size_t next = 0;
  };
  std::vector<Run> runs;
  uint64_t offset = 0;
  for (uint64_t n : run_sizes_) {
    runs.push_back({offset, n, {}, 0});
    offset += n;
  }
  bool ok = true;
  auto refill = [&](Run& r) {
    r.data.resize(static_cast<size_t>(std::min<uint64_t>(r.left, kReadEntries)));
    r.next = 0;
    if (r.data.empty()) return false;
    if (fseeko(file_, static_cast<off_t>(r.offset * sizeof(KeyedInterval)), SEEK_SET) != 0 ||
        std::fread(r.data.data(), sizeof(KeyedInterval), r.data.size(), file_) != r.data.size()) {
      ok = false;
      r.data.clear();
      return false;
    }
    r.offset += r.data.size();
    r.left -= r.data.size();
    return true;
  };
  // The in-memory remainder is one more run (index runs.size()).
  size_t memory_next = 0;
  auto head = [&](size_t i) -> const KeyedInterval& {
    return i < runs.size() ? runs[i].data[runs[i].next] : buffer_[memory_next];
  };
  auto later = [&](size_t a, size_t b) { return Before()(head(b), head(a)); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (refill(runs[i])) heap.push(i);
  }
  if (!buffer_.empty()) heap.push(runs.size());
  while (!heap.empty()) {
    const size_t i = heap.top();
    heap.pop();
    f(head(i));
    bool more;
    if (i < runs.size()) {
      Run& r = runs[i];
      more = ++r.next < r.data.size() || refill(r);
    } else {
      more = ++memory_next < buffer_.size();
    }
    if (more) heap.push(i);
  }
  std::vector<KeyedInterval>().swap(buffer_);
  run_sizes_.clear();
  size_ = 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok) return Status::Error("summary: temporary sort file could not be read back");
  return Status();
}

}  // namespace kp
