// sort_runs.h: sort a range that arrives as a few runs already in order, and a vector of a few
// groups (tracks, devices) that each arrive so.
//
// The exporters and the summary sort each stream's or thread's records by start time. Those
// records come as a handful of runs already in order (a stream's kernels, then its copies, then
// its memsets; a thread's API calls, then its NVTX ranges): merging the runs costs one pass per
// merge level (log2 of the runs), where a general sort costs a pass per halving of the range. Past
// kMaxRuns runs it sorts by insertion while records are only a few places out of order, else
// with std::sort.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kp {

// Sorts [first, last) by insertion if no record is out of place by much: false, with the range
// permuted but not sorted, once the moves pass kMovesPerRecord per record. Nested calls recorded
// as they end (an API call after the calls it made, an NVTX range after its children) are each a
// few places late: a run break apiece, but a few moves apiece.
template <typename It, typename Less>
bool InsertionSortIfNearlySorted(It first, It last, Less less) {
  constexpr size_t kMovesPerRecord = 8;
  const size_t budget = kMovesPerRecord * static_cast<size_t>(last - first);
  size_t moves = 0;
  if (last - first < 2) return true;
  for (It it = first + 1; it < last; ++it) {
    if (!less(*it, *(it - 1))) continue;
    auto x = std::move(*it);
    It hole = it;
    do {
      *hole = std::move(*(hole - 1));
      --hole;
      ++moves;
    } while (hole != first && less(x, *(hole - 1)));
    *hole = std::move(x);
    if (moves > budget) return false;
  }
  return true;
}

template <typename It, typename Less>
void SortRuns(It first, It last, Less less) {
  constexpr size_t kMaxRuns = 64;
  It bounds[kMaxRuns + 1];
  size_t runs = 0;
  bounds[0] = first;
  for (It it = first; it != last; ++it) {
    if (it != first && less(*it, *(it - 1))) {
      if (++runs == kMaxRuns) {
        if (!InsertionSortIfNearlySorted(first, last, less)) std::sort(first, last, less);
        return;
      }
      bounds[runs] = it;
    }
  }
  bounds[++runs] = last;
  while (runs > 1) {  // merge neighbouring runs pairwise until one is left
    size_t merged = 0;
    for (size_t r = 0; r + 1 < runs; r += 2) {
      std::inplace_merge(bounds[r], bounds[r + 1], bounds[r + 2], less);
      bounds[merged++] = bounds[r];
    }
    if (runs % 2 == 1) bounds[merged++] = bounds[runs - 1];
    bounds[merged] = last;
    runs = merged;
  }
}

// Sorts `v` by (group_of(x).first, then `less`). group_of(x) is an (outer, inner) pair of
// uint64_t: a record's track or device, and what subdivides it into sequences that each arrive
// mostly in `less` order (a device's streams; 0 where there is nothing to subdivide). The
// records are put into (outer, inner) groups by a stable counting pass (scratch holds the copy;
// its storage is swapped with v's), each group's runs are merged, then each outer value's groups
// are merged: a fraction of one general sort when there are few groups. Past kMaxGroups
// (outer, inner) pairs it sorts the whole vector.
template <typename T, typename GroupOf, typename Less>
void SortGroupedRuns(std::vector<T>* v, std::vector<T>* scratch, GroupOf group_of, Less less) {
  using Key = std::pair<uint64_t, uint64_t>;
  auto full = [&](const T& a, const T& b) {
    const uint64_t oa = group_of(a).first, ob = group_of(b).first;
    return oa != ob ? oa < ob : less(a, b);
  };
  if (v->size() < 2 || std::is_sorted(v->begin(), v->end(), full)) return;
  constexpr size_t kMaxGroups = 256;
  Key keys[kMaxGroups];
  size_t counts[kMaxGroups] = {};
  size_t n = 0, last = 0;
  // Groups by key through a small open-addressed table (at most a quarter full): records of
  // many groups interleave, so the group changes from record to record.
  constexpr size_t kSlots = 4 * kMaxGroups;
  static_assert(kSlots == 1024, "the hash below takes the top 10 bits");
  constexpr uint16_t kEmpty = 0xffff;
  uint16_t slot_group[kSlots];
  std::fill(slot_group, slot_group + kSlots, kEmpty);
  size_t free_slot = 0;
  // Points `last` at x's group; false (last == n, free_slot where it goes) if it has none yet.
  auto find = [&](const Key& k) {
    if (last < n && keys[last] == k) return true;
    size_t h = static_cast<size_t>(
        ((k.first * 0x9e3779b97f4a7c15ull) ^ (k.second * 0xc2b2ae3d27d4eb4full)) >> 54);
    while (slot_group[h] != kEmpty) {
      if (keys[slot_group[h]] == k) {
        last = slot_group[h];
        return true;
      }
      h = (h + 1) % kSlots;
    }
    last = n;
    free_slot = h;
    return false;
  };
  for (const T& x : *v) {
    const Key k = group_of(x);
    if (!find(k)) {
      if (n == kMaxGroups) {
        std::sort(v->begin(), v->end(), full);
        return;
      }
      keys[n] = k;
      slot_group[free_slot] = static_cast<uint16_t>(n);
      last = n++;
    }
    ++counts[last];
  }
  size_t order[kMaxGroups], offset[kMaxGroups], next[kMaxGroups];
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order, order + n, [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    offset[order[i]] = at;
    at += counts[order[i]];
  }
  std::copy(offset, offset + n, next);
  scratch->resize(v->size());
  for (const T& x : *v) {
    find(group_of(x));
    (*scratch)[next[last]++] = x;
  }
  v->swap(*scratch);
  auto at_offset = [&](size_t o) { return v->begin() + static_cast<std::ptrdiff_t>(o); };
  for (size_t g = 0; g < n; ++g)
    SortRuns(at_offset(offset[g]), at_offset(offset[g] + counts[g]), less);
  // An outer value's groups are consecutive in `order`: merge them into one run.
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && keys[order[j]].first == keys[order[i]].first) ++j;
    if (j - i > 1) {
      SortRuns(at_offset(offset[order[i]]), at_offset(offset[order[j - 1]] + counts[order[j - 1]]),
               less);
    }
    i = j;
  }
}

}  // namespace kp
