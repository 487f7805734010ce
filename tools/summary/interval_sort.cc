#include "tools/summary/interval_sort.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <queue>

#include "common/proto_wire.h"
#include "common/sort_runs.h"
#include "tools/reader/chunk_budget.h"

namespace kp {
namespace {

// A function object, not a function pointer, so the sort inlines the comparison.
struct StartBefore {
  bool operator()(const KeyedInterval& a, const KeyedInterval& b) const {
    return a.start < b.start;
  }
};

// Sorts by (key, start). There are few keys (devices) and tags (a device's streams, and 0 for
// its copies and memsets), and each (key, tag)'s intervals mostly arrive in time order
// (common/sort_runs.h). Past its 64 (key, tag) pairs in one run (e.g. 8 GPUs with 8 busy streams
// each) it sorts: the same order, more time.
void SortRun(std::vector<KeyedInterval>* v, std::vector<KeyedInterval>* scratch) {
  SortGroupedRuns(
      v, scratch,
      [](const KeyedInterval& iv) { return std::pair<uint64_t, uint64_t>(iv.key, iv.tag); },
      StartBefore());
}

// A run on disk: its entries in (key, start) order, each as four protobuf-style varints
// (common/proto_wire.h) -- the key's increase over the previous entry's, the start's increase
// (from 0 at a new key), the duration (end - start, or the wrapped difference of a damaged
// interval) and the tag's zigzag change -- about 6 bytes an entry instead of 32, since keys
// repeat, starts are close and tags rarely change.
constexpr size_t kMaxEncoded = 4 * wire::kMaxVarintBytes;  // bytes of one entry at most
constexpr size_t kReadBytes = 64 << 10;                    // per run while merging
constexpr size_t kWriteBytes = 1 << 20;  // the encoding buffer while a run is written

struct Cursor {
  uint64_t key = 0, start = 0, tag = 0;
};

// Writes iv at p (room for kMaxEncoded bytes); returns the byte after it.
uint8_t* Encode(const KeyedInterval& iv, Cursor* c, uint8_t* p) {
  if (iv.key != c->key) c->start = 0;
  wire::WireWriter w(p);
  w.RawVarint(iv.key - c->key);
  w.RawVarint(iv.start - c->start);
  w.RawVarint(iv.end - iv.start);
  w.RawVarint(wire::ZigZag(static_cast<int64_t>(iv.tag - c->tag)));
  c->key = iv.key;
  c->start = iv.start;
  c->tag = iv.tag;
  return p + w.size();
}

bool Decode(uint8_t** p, const uint8_t* end, Cursor* c, KeyedInterval* iv) {
  uint64_t dkey, dstart, duration, ztag;
  if (!ReadWireVarint(p, end, &dkey) || !ReadWireVarint(p, end, &dstart) ||
      !ReadWireVarint(p, end, &duration) || !ReadWireVarint(p, end, &ztag)) {
    return false;
  }
  if (dkey != 0) c->start = 0;
  c->key += dkey;
  c->start += dstart;
  c->tag += static_cast<uint64_t>(wire::UnZigZag(ztag));
  *iv = {c->key, c->start, c->start + duration, c->tag};
  return true;
}

// Hands intervals to a ForEach* callback in batches of kBatch.
class Batcher {
 public:
  explicit Batcher(const std::function<void(const KeyedInterval* batch, size_t n)>& f) : f_(f) {}
  void Add(const KeyedInterval& iv) {
    batch_[n_++] = iv;
    if (n_ == kBatch) Flush();
  }
  void Flush() {
    if (n_ > 0) f_(batch_, n_);
    n_ = 0;
  }

 private:
  static constexpr size_t kBatch = 1024;
  const std::function<void(const KeyedInterval* batch, size_t n)>& f_;
  KeyedInterval batch_[kBatch];
  size_t n_ = 0;
};

// Reads one run back from the file, entry by entry, through a buffer of kReadBytes.
struct RunReader {
  RunReader(uint64_t at, uint64_t bytes, uint64_t entries)
      : offset(at), bytes_left(bytes), entries_left(entries) {}
  uint64_t offset, bytes_left, entries_left;  // on disk, not yet read / decoded
  std::vector<uint8_t> buf;
  size_t pos = 0;
  Cursor cursor;
  KeyedInterval head{};

  // Decodes the next entry into head, reading more of the file when fewer bytes than one entry
  // may need are left in buf; false at the run's end, and (with *ok = false) on a read or
  // decoding error.
  bool Next(FILE* file, bool* ok) {
    if (entries_left == 0) return false;
    if (buf.size() - pos < kMaxEncoded && bytes_left > 0) {
      buf.erase(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(pos));
      pos = 0;
      const size_t kept = buf.size();
      const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes_left, kReadBytes));
      buf.resize(kept + n);
      if (fseeko(file, static_cast<off_t>(offset), SEEK_SET) != 0 ||
          std::fread(buf.data() + kept, 1, n, file) != n) {
        *ok = false;
        return false;
      }
      offset += n;
      bytes_left -= n;
    }
    uint8_t* p = buf.data() + pos;
    if (!Decode(&p, buf.data() + buf.size(), &cursor, &head)) {
      *ok = false;
      return false;
    }
    pos = static_cast<size_t>(p - buf.data());
    --entries_left;
    return true;
  }
};

}  // namespace

ExternalIntervalSort::~ExternalIntervalSort() {
  if (file_ != nullptr) std::fclose(file_);
}

void ExternalIntervalSort::Spill() {
  if (spill_failed_) return;
  if (file_ == nullptr) file_ = std::tmpfile();
  if (file_ == nullptr) {
    // Keep everything in memory from here on: slower to grow, same answer.
    spill_failed_ = true;
    return;
  }
  SortRun(&buffer_, &scratch_);
  // Encoded and written in pieces of kWriteBytes, so the encoding never holds a whole run.
  std::vector<uint8_t> encoded(kWriteBytes + kMaxEncoded);
  uint8_t* const begin = encoded.data();
  uint8_t* p = begin;
  uint64_t bytes = 0;
  bool ok = true;
  auto write = [&] {
    const size_t n = static_cast<size_t>(p - begin);
    ok = ok && std::fwrite(begin, 1, n, file_) == n;
    bytes += n;
    p = begin;
  };
  Cursor cursor;
  for (const KeyedInterval& iv : buffer_) {
    p = Encode(iv, &cursor, p);
    if (static_cast<size_t>(p - begin) >= kWriteBytes) write();
  }
  write();
  if (!ok) {
    // As above. The part of a run that was written is never read (runs_ does not name it).
    spill_failed_ = true;
    return;
  }
  runs_.push_back({file_bytes_, bytes, buffer_.size()});
  file_bytes_ += bytes;
  size_ += buffer_.size();
  buffer_.clear();
}

Status ExternalIntervalSort::ForEachSorted(
    const std::function<void(const KeyedInterval* batch, size_t n)>& f) {
  SortRun(&buffer_, &scratch_);
  std::vector<KeyedInterval>().swap(scratch_);
  if (runs_.empty()) {
    if (!buffer_.empty()) f(buffer_.data(), buffer_.size());
    std::vector<KeyedInterval>().swap(buffer_);
    return Status();
  }
  if (std::fflush(file_) != 0) {
    return Status::Error(std::string("summary: temporary sort file: ") + std::strerror(errno));
  }
  std::vector<RunReader> runs;
  for (const SpilledRun& sr : runs_) runs.emplace_back(sr.offset, sr.bytes, sr.entries);
  bool ok = true;
  auto advance = [&](RunReader& r) { return r.Next(file_, &ok); };
  // The in-memory remainder is one more run (index runs.size()).
  size_t memory_next = 0;
  auto head = [&](size_t i) -> const KeyedInterval& {
    return i < runs.size() ? runs[i].head : buffer_[memory_next];
  };
  // The heap holds each run's head's sort key beside the run's index, so that comparing two
  // entries reads neither run.
  struct Entry {
    uint64_t key, start;
    size_t run;
  };
  auto later = [](const Entry& a, const Entry& b) {
    return b.key != a.key ? b.key < a.key : b.start < a.start;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later);
  auto push = [&](size_t i) {
    const KeyedInterval& h = head(i);
    heap.push({h.key, h.start, i});
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    if (advance(runs[i])) push(i);
  }
  if (!buffer_.empty()) push(runs.size());
  Batcher out(f);
  // Runs are written in arrival order, so each covers a stretch of time and long spans of the
  // merge come from one run: while a run's next head is not after the heap's top, it is taken
  // without a trip through the heap.
  while (!heap.empty()) {
    const size_t i = heap.top().run;
    heap.pop();
    for (;;) {
      out.Add(head(i));
      const bool more = i < runs.size() ? advance(runs[i]) : ++memory_next < buffer_.size();
      if (!more) break;
      const KeyedInterval& h = head(i);
      if (!heap.empty() && later({h.key, h.start, i}, heap.top())) {
        push(i);
        break;
      }
    }
  }
  out.Flush();
  return Reset(ok);
}

Status ExternalIntervalSort::ForEachInRunOrder(
    const std::function<void(const KeyedInterval* batch, size_t n)>& f) {
  if (file_ != nullptr && std::fflush(file_) != 0) {
    return Status::Error(std::string("summary: temporary sort file: ") + std::strerror(errno));
  }
  bool ok = true;
  Batcher out(f);
  for (const SpilledRun& sr : runs_) {
    RunReader r(sr.offset, sr.bytes, sr.entries);
    while (r.Next(file_, &ok)) out.Add(r.head);
  }
  out.Flush();
  if (!buffer_.empty()) f(buffer_.data(), buffer_.size());
  std::vector<KeyedInterval>().swap(scratch_);
  return Reset(ok);
}

Status ExternalIntervalSort::Reset(bool read_ok) {
  std::vector<KeyedInterval>().swap(buffer_);
  runs_.clear();
  file_bytes_ = 0;
  size_ = 0;
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  if (!read_ok) return Status::Error("summary: temporary sort file could not be read back");
  return Status();
}

}  // namespace kp
