// timeline_layout.h: which slice goes on which track and lane, shared by the Chrome JSON and
// Perfetto exporters so both formats show exactly the same slices with the same times.
//
// A timeline never changes a measured duration of GPU work. Records that overlap on one track
// (concurrent nodes of a CUDA graph on one stream, two threads synchronizing at once, CUPTI
// overhead records) go on extra lanes of that track: a record takes the first lane whose last
// slice has ended by its start, else a new lane. Each lane then holds disjoint slices, which
// every viewer draws correctly, in any order of arrival. CPU thread tracks (API calls and NVTX
// ranges) and the metrics track keep nesting instead (SliceNester): those records nest by
// construction, and a rare partial overlap is clamped and counted.
//
// Also here: which GPU records get a launch arrow (LaunchCorrelations) and the ids that keep
// two separately converted files apart (TimelineIds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kptrace.pb.h"

namespace kp {

// Things worth saying about the layout, reported at End (stderr), never fatal.
struct TimelineAnomalies {
  uint64_t gpu_records_on_extra_lanes = 0;  // GPU work concurrent with other work on its stream
  uint64_t cpu_overlaps_clamped = 0;        // API/NVTX slice partially overlapping its parent
  uint64_t negative_durations = 0;          // end before start: drawn with zero duration
  uint64_t untimed_records_skipped = 0;     // GPU records CUPTI gave no timestamps (start = 0)
  uint64_t metric_overlaps_clamped = 0;
  uint64_t sync_records_on_extra_lanes = 0;      // overlapping synchronization records
  uint64_t overhead_records_on_extra_lanes = 0;  // overlapping CUPTI overhead records
  // One line per non-zero counter.
  std::vector<std::string> Describe() const;
};

enum class SliceKind : uint8_t {
  kKernel,
  kMemcpy,
  kMemset,
  kApi,
  kNvtx,
  kMetric,
  kSync,
  kOverhead
};

// One slice after layout: which record (kind + index into the chunk's list), where and when to
// draw it. `track` is (device << 32 | stream) for GPU slices, the thread id for CPU slices, 0
// for the per-process tracks; `lane` is 0 for the track itself, 1.. for its extra lanes.
struct LaidOutSlice {
  SliceKind kind : 8;  // with the lane in one word: 32 bytes a slice, not 40
  uint32_t lane : 24;
  int index;
  uint64_t track;
  uint64_t start, end;
};

// The emit loops visit a chunk's records in track order, not in the order they are stored, so
// once a chunk's records outgrow the CPU's caches (a 4 MiB chunk expands to some 15 MB of
// record objects) nearly every record read waits on memory. Called with the loop's position,
// this asks for the record kPrefetchDistance slices ahead, and for the list slot of the one
// twice as far (the slot holds the record's address), so both arrive while the slices in
// between are written. Only a hint: nothing is read that the loop would not read anyway.
class RecordPrefetcher {
 public:
  static constexpr size_t kPrefetchDistance = 8;

  explicit RecordPrefetcher(const Chunk& chunk) : chunk_(chunk) {}
  // Always inlined: GCC drops the prefetches of a call it has judged free of side effects
  // before inlining it.
  [[gnu::always_inline]] void Ahead(const std::vector<LaidOutSlice>& slices, size_t i) const {
    if (i + 2 * kPrefetchDistance < slices.size()) {
      WithList(slices[i + 2 * kPrefetchDistance], [](const auto& list, int index) {
        __builtin_prefetch(list.data() + index);  // the slot
      });
    }
    if (i + kPrefetchDistance < slices.size()) {
      WithList(slices[i + kPrefetchDistance], [](const auto& list, int index) {
        const char* record = reinterpret_cast<const char*>(list.data()[index]);
        __builtin_prefetch(record);
        __builtin_prefetch(record + 64);  // a kernel's fields span two cache lines
      });
    }
  }

 private:
  // Calls f(list, index) with slice s's record list; nothing for kinds these loops do not read
  // (process-track and metric slices).
  template <typename F>
  [[gnu::always_inline]] void WithList(const LaidOutSlice& s, F f) const {
    switch (s.kind) {
      case SliceKind::kKernel:
        return f(chunk_.kernels(), s.index);
      case SliceKind::kMemcpy:
        return f(chunk_.memcpys(), s.index);
      case SliceKind::kMemset:
        return f(chunk_.memsets(), s.index);
      case SliceKind::kApi:
        return f(chunk_.api_calls(), s.index);
      case SliceKind::kNvtx:
        return f(chunk_.nvtx_ranges(), s.index);
      default:
        return;
    }
  }

  const Chunk& chunk_;
};

// Keeps the slices of one track properly nested or disjoint. Input must come sorted by
// (start ascending, end descending). A slice that starts before the end of an earlier, already
// closed slice is moved to start at that end; one that ends after its parent is cut at the
// parent's end.
class SliceNester {
 public:
  // Adjusts [*start, *end]; returns true if anything had to change.
  bool Place(uint64_t* start, uint64_t* end);

 private:
  std::vector<uint64_t> open_ends_;
  uint64_t floor_ = 0;
};

// The lanes of one track: where each lane's last slice ends.
class LaneSet {
 public:
  // The lane for a slice [start, end]: the first whose last slice ended by `start`.
  uint32_t Place(uint64_t start, uint64_t end);

 private:
  std::vector<uint64_t> ends_;
};

// Within a track: by start, the longer of two slices that start together first.
struct SliceStartOrder {
  bool operator()(const LaidOutSlice& a, const LaidOutSlice& b) const {
    if (a.start != b.start) return a.start < b.start;
    return a.end > b.end;
  }
};

// The slices of a chunk grouped by (track, kind) as they are collected, so that no pass over
// the whole chunk is needed to group them: each group is then put in SliceStartOrder on its own
// (its records mostly arrive in order, common/sort_runs.h), and Merge writes each track's
// groups out merged, tracks in ascending order and a track's kinds in SliceKind order on ties
// (the order a stable sort by (track, SliceStartOrder) of the kinds' lists gives; SortGroupedRuns,
// which the timelines used before, gives the same up to 256 groups per chunk and past them sorts
// the whole chunk with std::sort, which may order slices with equal times differently).
class SliceGroups {
 public:
  void Clear();
  // Adds a record's slice (lane 0) to its (track, kind) group, written field by field into the
  // group's list: a slice made whole on the stack first is copied with wide loads of its narrow
  // stores, which stall the loop.
  void Add(SliceKind kind, int index, uint64_t track, uint64_t start, uint64_t end) {
    LaidOutSlice& s = Group(track, kind).emplace_back();
    s.kind = kind;
    s.index = index;
    s.track = track;
    s.start = start;
    s.end = end;
  }
  // Sorts each group, then appends every slice to *out track by track, calling
  // begin_track(track) before a track's first slice and place(slice) on each, in output order.
  template <typename BeginTrack, typename Place>
  void Merge(std::vector<LaidOutSlice>* out, BeginTrack begin_track, Place place);

 private:
  std::vector<LaidOutSlice>& Group(uint64_t track, SliceKind kind);
  void SortGroups();
  struct Entry {
    uint64_t track;
    SliceKind kind;
    std::vector<LaidOutSlice> slices;
  };
  std::vector<Entry> groups_;  // the first `used_` are this chunk's; the rest keep capacity
  size_t used_ = 0;
  std::vector<uint32_t> slots_;  // open addressing: group index + 1, 0 = empty
  int slot_shift_ = 64;          // 64 - log2(slots_.size())
  size_t last_ = 0;              // the group found last (records of one track come in runs)
  std::vector<uint32_t> order_;  // groups by (track, kind)
};

template <typename BeginTrack, typename Place>
inline void SliceGroups::Merge(std::vector<LaidOutSlice>* out, BeginTrack begin_track,
                               Place place) {
  SortGroups();
  out->clear();
  size_t total = 0;
  for (size_t g = 0; g < used_; ++g) total += groups_[g].slices.size();
  out->reserve(total);
  constexpr size_t kMaxKinds = 8;  // SliceKind's values
  for (size_t i = 0; i < used_;) {
    const uint64_t track = groups_[order_[i]].track;
    size_t j = i;
    while (j < used_ && groups_[order_[j]].track == track) ++j;
    begin_track(track);
    if (j - i == 1) {
      for (const LaidOutSlice& s : groups_[order_[i]].slices) {
        out->push_back(s);
        place(out->back());
      }
    } else {
      // A stable merge of the track's kinds: the lowest head in SliceStartOrder, the first kind
      // on ties.
      const LaidOutSlice* head[kMaxKinds];
      const LaidOutSlice* end[kMaxKinds];
      size_t k = 0;
      for (size_t g = i; g < j; ++g, ++k) {
        head[k] = groups_[order_[g]].slices.data();
        end[k] = head[k] + groups_[order_[g]].slices.size();
      }
      for (;;) {
        size_t best = kMaxKinds;
        for (size_t g = 0; g < k; ++g) {
          if (head[g] != end[g] &&
              (best == kMaxKinds || SliceStartOrder()(*head[g], *head[best]))) {
            best = g;
          }
        }
        if (best == kMaxKinds) break;
        out->push_back(*head[best]++);
        place(out->back());
      }
    }
    i = j;
  }
}

class TimelineLayout {
 public:
  // Fills *gpu (kernels, copies, memsets sorted by track then time, each on a lane of its
  // stream), *cpu (API calls and NVTX ranges, nested per thread) and *metrics (metric ranges).
  void LayOut(int file_index, const Chunk& chunk, std::vector<LaidOutSlice>* gpu,
              std::vector<LaidOutSlice>* cpu, std::vector<LaidOutSlice>* metrics);
  // Fills *sync and *overhead: one per-process track each ("CUDA sync", "CUPTI overhead"), with
  // lanes. Synchronization records carry no thread id, and a sync spans the GPU work it waits
  // for, so it can go neither on a CPU thread nor on a stream track.
  void LayOutProcessTracks(int file_index, const Chunk& chunk, std::vector<LaidOutSlice>* sync,
                           std::vector<LaidOutSlice>* overhead);
  TimelineAnomalies& anomalies() { return anomalies_; }
  const TimelineAnomalies& anomalies() const { return anomalies_; }

 private:
  struct FileLanes {
    std::unordered_map<uint64_t, LaneSet> streams;  // by (device << 32 | stream)
    LaneSet sync, overhead;
  };
  FileLanes& Lanes(int file_index);
  std::vector<FileLanes> lanes_;
  std::vector<LaidOutSlice> scratch_;  // sorting space, reused across chunks
  SliceGroups groups_;                 // likewise, for GPU and CPU slices
  TimelineAnomalies anomalies_;
};

// The correlation ids of one input file's launch calls (API calls that start GPU work), so a
// GPU record gets a launch arrow only when its launch call is in the trace: the range
// profiler's own kernels have none, and an arrow end without a start is an error to a viewer.
// Correlation ids grow through a run and GPU work completes after its launch call, so a
// sliding window of the newest ids (a bitmap) is enough: O(1) memory per file.
class LaunchCorrelations {
 public:
  void Clear();
  void Add(uint64_t correlation);
  bool Contains(uint64_t correlation) const;

 private:
  static constexpr uint64_t kWindow = uint64_t{1} << 22;  // ids; 512 KiB of bits
  std::vector<uint64_t> bits_;
  uint64_t newest_ = 0;
  bool any_ = false;
};

// Ids that keep an input file's tracks, packet sequence and arrows apart from every other
// file's, in this conversion and in any other (so two converted files can be merged): derived
// from the host, pid and start time recorded in the trace, not from the file's position.
struct TimelineIds {
  uint64_t seed = 0;
  uint32_t sequence = 0;     // Perfetto trusted_packet_sequence_id, >= 1
  uint64_t flow_prefix = 0;  // 1 .. 2^20 - 1: arrow ids stay below 2^53 (exact in JSON)
  uint64_t FlowId(uint64_t correlation) const {
    return (flow_prefix << 32) | (correlation & 0xffffffffull);
  }
  uint64_t TrackUuid(uint64_t kind, uint64_t a, uint64_t b = 0) const;
};

// Hands out TimelineIds, unique within one conversion even for one file given twice.
class TimelineIdAllocator {
 public:
  TimelineIds ForFile(const Header* header, int file_index);

 private:
  std::vector<TimelineIds> used_;
};

}  // namespace kp
