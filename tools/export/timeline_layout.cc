#include "tools/export/timeline_layout.h"

#include <algorithm>
#include <functional>

#include "common/mix64.h"
#include "common/sort_runs.h"
#include "common/time_math.h"

namespace kp {

std::vector<std::string> TimelineAnomalies::Describe() const {
  std::vector<std::string> out;
  auto add = [&out](uint64_t n, const char* what) {
    if (n != 0) out.push_back(std::to_string(n) + " " + what);
  };
  add(gpu_records_on_extra_lanes,
      "GPU records ran concurrently with other work on their stream: drawn on extra lanes");
  add(cpu_overlaps_clamped, "API/NVTX slices overlapped their parent slice: clamped");
  add(negative_durations, "records ended before they started: drawn with zero duration");
  add(untimed_records_skipped, "GPU records without timestamps: skipped");
  add(metric_overlaps_clamped, "metric ranges overlapped another metric range: clamped");
  add(sync_records_on_extra_lanes,
      "synchronization records overlapped another one: drawn on extra lanes");
  add(overhead_records_on_extra_lanes,
      "CUPTI overhead records overlapped another one: drawn on extra lanes");
  return out;
}

bool SliceNester::Place(uint64_t* start, uint64_t* end) {
  bool changed = false;
  while (!open_ends_.empty() && open_ends_.back() <= *start) {
    floor_ = std::max(floor_, open_ends_.back());
    open_ends_.pop_back();
  }
  if (*start < floor_) {
    *start = floor_;
    if (*end < *start) *end = *start;
    changed = true;
  }
  if (!open_ends_.empty() && *end > open_ends_.back()) {
    *end = open_ends_.back();
    changed = true;
  }
  open_ends_.push_back(*end);
  return changed;
}

uint32_t LaneSet::Place(uint64_t start, uint64_t end) {
  // A lane's slices are disjoint because its end only grows: a slice goes on a lane only when
  // it starts at or after everything already there.
  for (size_t i = 0; i < ends_.size(); ++i) {
    if (ends_[i] <= start) {
      ends_[i] = end;
      return static_cast<uint32_t>(i);
    }
  }
  ends_.push_back(end);
  return static_cast<uint32_t>(ends_.size() - 1);
}

namespace {

// Sorts by (track, SliceStartOrder). A chunk holds few tracks (streams, threads), and each track's
// records of one kind mostly arrive in time order (common/sort_runs.h): each kind is sorted on
// its own, then a track's kinds are merged.
void SortSlices(std::vector<LaidOutSlice>* slices, std::vector<LaidOutSlice>* scratch) {
  SortGroupedRuns(
      slices, scratch,
      [](const LaidOutSlice& s) {
        return std::pair<uint64_t, uint64_t>(s.track, static_cast<uint64_t>(s.kind));
      },
      SliceStartOrder());
}

// The timed records of one list as slices, handed to `add` in list order.
template <typename R, typename Add>
void CollectTimed(const R& records, SliceKind kind, bool gpu,
                  uint64_t (*track)(const typename R::value_type&), Add add,
                  TimelineAnomalies* anomalies) {
  int i = 0;
  for (const auto& r : records) {
    const int64_t start = r.start();
    int64_t duration = r.duration();
    if (gpu && start == 0) {
      ++anomalies->untimed_records_skipped;
      ++i;
      continue;
    }
    if (duration < 0) {
      ++anomalies->negative_durations;
      duration = 0;
    }
    add(kind, i, track(r), static_cast<uint64_t>(start),
        static_cast<uint64_t>(EndTime(start, duration)));
    ++i;
  }
}

template <typename R>
void CollectTimed(const R& records, SliceKind kind, bool gpu,
                  uint64_t (*track)(const typename R::value_type&), std::vector<LaidOutSlice>* out,
                  TimelineAnomalies* anomalies) {
  CollectTimed(
      records, kind, gpu, track,
      [out](SliceKind k, int index, uint64_t t, uint64_t start, uint64_t end) {
        out->push_back(LaidOutSlice{k, 0, index, t, start, end});
      },
      anomalies);
}

template <typename R>
void CollectGrouped(const R& records, SliceKind kind, bool gpu,
                    uint64_t (*track)(const typename R::value_type&), SliceGroups* out,
                    TimelineAnomalies* anomalies) {
  CollectTimed(
      records, kind, gpu, track,
      [out](SliceKind k, int index, uint64_t t, uint64_t start, uint64_t end) {
        out->Add(k, index, t, start, end);
      },
      anomalies);
}

uint64_t GpuTrack(uint32_t device, uint32_t stream) {
  return (static_cast<uint64_t>(device) << 32) | stream;
}

}  // namespace

void SliceGroups::Clear() {
  for (size_t g = 0; g < used_; ++g) groups_[g].slices.clear();
  used_ = 0;
  last_ = 0;
  std::fill(slots_.begin(), slots_.end(), 0);
}

std::vector<LaidOutSlice>& SliceGroups::Group(uint64_t track, SliceKind kind) {
  if (last_ < used_ && groups_[last_].track == track && groups_[last_].kind == kind) {
    return groups_[last_].slices;
  }
  // A group's home slot: (track, kind) mixed by one multiplication, its top bits.
  auto home = [this](uint64_t t, SliceKind k) {
    return static_cast<size_t>(((t ^ (static_cast<uint64_t>(k) << 56)) * 0x9e3779b97f4a7c15ull) >>
                               slot_shift_);
  };
  if (2 * (used_ + 1) > slots_.size()) {  // at most half full: grow and re-file the groups
    slots_.assign(std::max<size_t>(64, 2 * slots_.size()), 0);
    slot_shift_ = 64;
    for (size_t n = slots_.size(); n > 1; n >>= 1) --slot_shift_;
    const size_t mask = slots_.size() - 1;
    for (size_t g = 0; g < used_; ++g) {
      size_t h = home(groups_[g].track, groups_[g].kind);
      while (slots_[h & mask] != 0) ++h;
      slots_[h & mask] = static_cast<uint32_t>(g + 1);
    }
  }
  const size_t mask = slots_.size() - 1;
  size_t h = home(track, kind);
  for (;; ++h) {
    const uint32_t slot = slots_[h & mask];
    if (slot == 0) break;
    if (groups_[slot - 1].track == track && groups_[slot - 1].kind == kind) {
      last_ = slot - 1;
      return groups_[last_].slices;
    }
  }
  if (used_ == groups_.size()) groups_.emplace_back();
  groups_[used_].track = track;
  groups_[used_].kind = kind;
  slots_[h & mask] = static_cast<uint32_t>(used_ + 1);
  last_ = used_++;
  return groups_[last_].slices;
}

void SliceGroups::SortGroups() {
  order_.resize(used_);
  for (size_t g = 0; g < used_; ++g) {
    order_[g] = static_cast<uint32_t>(g);
    SortRuns(groups_[g].slices.begin(), groups_[g].slices.end(), SliceStartOrder());
  }
  std::sort(order_.begin(), order_.end(), [this](uint32_t a, uint32_t b) {
    const Entry& x = groups_[a];
    const Entry& y = groups_[b];
    return x.track != y.track ? x.track < y.track : x.kind < y.kind;
  });
}

TimelineLayout::FileLanes& TimelineLayout::Lanes(int file_index) {
  if (static_cast<size_t>(file_index) >= lanes_.size()) lanes_.resize(file_index + 1);
  return lanes_[file_index];
}

void TimelineLayout::LayOut(int file_index, const Chunk& chunk, std::vector<LaidOutSlice>* gpu,
                            std::vector<LaidOutSlice>* cpu, std::vector<LaidOutSlice>* metrics) {
  gpu->clear();
  cpu->clear();
  metrics->clear();
  groups_.Clear();
  CollectGrouped(
      chunk.kernels(), SliceKind::kKernel, true,
      +[](const Kernel& k) { return GpuTrack(k.device(), k.stream()); }, &groups_, &anomalies_);
  CollectGrouped(
      chunk.memcpys(), SliceKind::kMemcpy, true,
      +[](const Memcpy& m) { return GpuTrack(m.device(), m.stream()); }, &groups_, &anomalies_);
  CollectGrouped(
      chunk.memsets(), SliceKind::kMemset, true,
      +[](const Memset& m) { return GpuTrack(m.device(), m.stream()); }, &groups_, &anomalies_);
  FileLanes& lanes = Lanes(file_index);
  LaneSet* set = nullptr;
  groups_.Merge(
      gpu, [&](uint64_t track) { set = &lanes.streams[track]; },
      [&](LaidOutSlice& s) {
        s.lane = set->Place(s.start, s.end);
        if (s.lane != 0) ++anomalies_.gpu_records_on_extra_lanes;
      });

  groups_.Clear();
  CollectGrouped(
      chunk.api_calls(), SliceKind::kApi, false,
      +[](const ApiCall& a) { return static_cast<uint64_t>(a.thread_id()); }, &groups_,
      &anomalies_);
  CollectGrouped(
      chunk.nvtx_ranges(), SliceKind::kNvtx, false,
      +[](const NvtxRange& r) { return static_cast<uint64_t>(r.thread_id()); }, &groups_,
      &anomalies_);
  SliceNester nester;
  groups_.Merge(
      cpu, [&](uint64_t) { nester = SliceNester(); },
      [&](LaidOutSlice& s) {
        if (nester.Place(&s.start, &s.end)) ++anomalies_.cpu_overlaps_clamped;
      });

  CollectTimed(
      chunk.metric_ranges(), SliceKind::kMetric, false,
      +[](const MetricRange&) { return uint64_t{0}; }, metrics, &anomalies_);
  SortSlices(metrics, &scratch_);
  {
    SliceNester nester;
    for (LaidOutSlice& s : *metrics) {
      if (nester.Place(&s.start, &s.end)) ++anomalies_.metric_overlaps_clamped;
    }
  }
}

void TimelineLayout::LayOutProcessTracks(int file_index, const Chunk& chunk,
                                         std::vector<LaidOutSlice>* sync,
                                         std::vector<LaidOutSlice>* overhead) {
  sync->clear();
  overhead->clear();
  FileLanes& lanes = Lanes(file_index);
  CollectTimed(
      chunk.syncs(), SliceKind::kSync, false, +[](const Synchronization&) { return uint64_t{0}; },
      sync, &anomalies_);
  SortSlices(sync, &scratch_);
  for (LaidOutSlice& s : *sync) {
    s.lane = lanes.sync.Place(s.start, s.end);
    if (s.lane != 0) ++anomalies_.sync_records_on_extra_lanes;
  }
  CollectTimed(
      chunk.overheads(), SliceKind::kOverhead, false, +[](const Overhead&) { return uint64_t{0}; },
      overhead, &anomalies_);
  SortSlices(overhead, &scratch_);
  for (LaidOutSlice& s : *overhead) {
    s.lane = lanes.overhead.Place(s.start, s.end);
    if (s.lane != 0) ++anomalies_.overhead_records_on_extra_lanes;
  }
}

void LaunchCorrelations::Clear() {
  bits_.clear();
  newest_ = 0;
  any_ = false;
}

void LaunchCorrelations::Add(uint64_t c) {
  if (c == 0) return;
  if (bits_.empty()) bits_.assign(kWindow / 64, 0);
  if (!any_) {
    any_ = true;
    newest_ = c;
  } else if (c > newest_) {
    // Ids between the newest and c leave the window's far end: clear their bits.
    if (c - newest_ >= kWindow) {
      std::fill(bits_.begin(), bits_.end(), 0);
    } else {
      for (uint64_t id = newest_ + 1; id < c; ++id) {
        bits_[(id % kWindow) / 64] &= ~(uint64_t{1} << (id % 64));
      }
    }
    newest_ = c;
  } else if (newest_ - c >= kWindow) {
    return;  // older than the window
  }
  bits_[(c % kWindow) / 64] |= uint64_t{1} << (c % 64);
}

bool LaunchCorrelations::Contains(uint64_t c) const {
  if (!any_ || c == 0 || c > newest_ || newest_ - c >= kWindow) return false;
  return (bits_[(c % kWindow) / 64] >> (c % 64)) & 1;
}

uint64_t TimelineIds::TrackUuid(uint64_t kind, uint64_t a, uint64_t b) const {
  return Mix64(Mix64(Mix64(seed ^ kind) ^ a) ^ (b * 31 + 7));
}

TimelineIds TimelineIdAllocator::ForFile(const Header* header, int file_index) {
  uint64_t seed = 0x6b70ull;  // "kp"
  if (header != nullptr) {
    seed = Mix64(seed ^ std::hash<std::string>()(header->hostname()));
    seed = Mix64(seed ^ header->pid());
    seed = Mix64(seed ^ header->start_time_trace_ns());
    seed = Mix64(seed ^ header->start_time_unix_ns());
  } else {
    seed = Mix64(seed ^ static_cast<uint64_t>(file_index));
  }
  for (;;) {
    TimelineIds ids;
    ids.seed = seed;
    ids.sequence = static_cast<uint32_t>(seed % 0x7ffffffeull) + 1;
    ids.flow_prefix = (seed >> 32) % 0xfffffull + 1;
    bool clash = false;
    for (const TimelineIds& u : used_) {
      clash |= u.seed == ids.seed || u.sequence == ids.sequence || u.flow_prefix == ids.flow_prefix;
    }
    if (!clash) {
      used_.push_back(ids);
      return ids;
    }
    // The same file twice, or a one-in-a-million clash: derive another from the position.
    seed = Mix64(seed ^ (static_cast<uint64_t>(file_index) + 1));
  }
}

}  // namespace kp
