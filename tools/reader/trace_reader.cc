#include "tools/reader/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_map>

#include "common/frame.h"
#include "tools/reader/chunk_budget.h"
#include "tools/reader/chunk_columns.h"
#include "tools/reader/chunk_decoder.h"
#include "tools/reader/start_keys.h"

namespace kp {
namespace {

constexpr size_t kReadBytes = 1u << 20;  // read size; frames larger than it grow the buffer
// Duplicate chunks are recognised among the last this many chunks read; sequence gaps are
// remembered (as ranges) up to this many, so a late chunk counts as reordered, not lost. Both
// tables stay small whatever the file holds.
constexpr size_t kRecentChunks = 1u << 16;
constexpr size_t kMaxGapRanges = 1u << 16;
// The format versions this reader reads: the last byte of the file magic.
constexpr char kFormatVersionsRead[] = "versions 1, 2 and 3";
// Ids below this resolve through a flat table; larger (corrupt or exotic) ids through a map,
// so a damaged id cannot make the reader allocate gigabytes.
constexpr uint32_t kFlatIdLimit = 1u << 20;
constexpr char kChunkMagicBytes[4] = {'K', 'P', 'C', 'K'};

template <typename T>
class IdTable {
 public:
  void Clear() {
    for (uint32_t id : used_) flat_[id] = nullptr;
    used_.clear();
    sparse_.clear();
  }
  void Put(uint32_t id, const T* value) {
    if (id < kFlatIdLimit) {
      if (id >= flat_.size()) flat_.resize(std::max<size_t>(id + 1, flat_.size() * 2), nullptr);
      if (flat_[id] == nullptr) used_.push_back(id);
      flat_[id] = value;
    } else {
      sparse_[id] = value;
    }
  }
  const T* Get(uint32_t id) const {
    if (id < flat_.size()) return flat_[id];
    if (sparse_.empty()) return nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : it->second;
  }

 private:
  std::vector<const T*> flat_;
  std::vector<uint32_t> used_;
  std::unordered_map<uint32_t, const T*> sparse_;
};

// Undoes the per-list delta coding of `start`/`time` (from time_base) and of `correlation`.
template <typename List>
void UndoStartDeltas(List* list, uint64_t time_base, uint64_t* negative_durations) {
  uint64_t prev = time_base;
  for (auto& r : *list) {
    prev += static_cast<uint64_t>(r.start());
    r.set_start(static_cast<int64_t>(prev));
    if (r.duration() < 0) ++*negative_durations;
  }
}
template <typename List>
void UndoCorrelationDeltas(List* list) {
  uint64_t prev = 0;
  for (auto& r : *list) {
    prev += static_cast<uint64_t>(r.correlation());
    r.set_correlation(static_cast<int64_t>(prev));
  }
}
// Format versions 2 and 3: the keyed `start` and the `correlation` of one list, in one pass;
// `state` carries on into the list's column rows (ExpandColumns).
template <typename List>
void UndoKeyedDeltas(List* list, RowDeltas* state) {
  for (auto& r : *list) state->Undo(&r);
}

}  // namespace

struct TraceReader::Impl {
  int fd = -1;
  bool eof = false;
  std::vector<uint8_t> buf;
  size_t head = 0;           // first unconsumed byte
  size_t tail = 0;           // end of valid data
  std::vector<uint8_t> raw;  // decompressed payload, reused
  ZSTD_DCtx* dctx = nullptr;
  uint64_t next_sequence = 0;
  bool seen_chunk = false;
  bool regular_file = false;
  uint64_t file_size = 0;
  char version = kFileMagic[kFileMagicSize - 1];  // from the file magic
  // Sequence bookkeeping (see kRecentChunks): sequence -> payload CRC of recent chunks, in
  // arrival order for eviction; missing sequence ranges [first, last].
  std::unordered_map<uint64_t, uint32_t> recent;
  std::vector<uint64_t> recent_order;
  size_t recent_next = 0;
  std::map<uint64_t, uint64_t> gaps;
  IdTable<std::string> strings;
  IdTable<KernelShape> shapes;
  // Backing store for "<unknown string N>", one node per id so that every view Str() returned
  // stays valid while the reader lives (a caller may hold two at once); at most
  // kMaxUnknownStrings ids, later ones share one text without the id.
  static constexpr size_t kMaxUnknownStrings = 4096;
  std::unordered_map<uint32_t, std::string> unknown;

  // Records a chunk's sequence; returns how it relates to those read before.
  enum class Order { kInOrder, kDuplicate, kReordered, kReused };
  Order Sequence(uint64_t seq, uint32_t crc, ReaderStats* st) {
    Order order = Order::kInOrder;
    if (seen_chunk && seq < next_sequence) {
      auto it = recent.find(seq);
      if (it != recent.end() && it->second == crc) return Order::kDuplicate;
      order = Order::kReused;
      auto g = gaps.upper_bound(seq);
      if (it == recent.end() && g != gaps.begin()) {
        --g;
        if (seq >= g->first && seq <= g->second) {  // a missing chunk arrived late
          const uint64_t first = g->first, last = g->second;
          gaps.erase(g);
          if (first < seq) gaps[first] = seq - 1;
          if (seq < last) gaps[seq + 1] = last;
          --st->sequence_gaps;
          order = Order::kReordered;
        }
      }
    } else if (seq > next_sequence || (!seen_chunk && seq > 0)) {
      const uint64_t first = seen_chunk ? next_sequence : 0;
      st->sequence_gaps += seq - first;
      gaps[first] = seq - 1;
      if (gaps.size() > kMaxGapRanges) gaps.erase(gaps.begin());  // oldest gap: stays lost
    }
    if (!seen_chunk || seq >= next_sequence) next_sequence = seq + 1;
    seen_chunk = true;
    if (recent_order.size() < kRecentChunks) {
      recent_order.push_back(seq);
    } else {
      recent.erase(recent_order[recent_next]);
      recent_order[recent_next] = seq;
      recent_next = (recent_next + 1) % kRecentChunks;
    }
    recent[seq] = crc;
    return order;
  }

  ~Impl() {
    if (fd >= 0) close(fd);
    if (dctx != nullptr) ZSTD_freeDCtx(dctx);
  }
  size_t avail() const { return tail - head; }
  // Makes at least `n` bytes available unless the file ends first. Returns avail() >= n.
  bool Ensure(size_t n) {
    if (avail() >= n) return true;
    if (head > 0) {
      std::memmove(buf.data(), buf.data() + head, avail());
      tail -= head;
      head = 0;
    }
    // The buffer grows only as data actually arrives: a header that claims a huge chunk costs
    // the bytes the file really holds, not the size it claims.
    while (!eof && tail < n) {
      if (buf.size() == tail) {
        buf.resize(n <= kReadBytes ? kReadBytes
                                   : std::min(n, std::max(kReadBytes, 2 * buf.size())));
      }
      size_t want = buf.size() - tail;
      ssize_t got = read(fd, buf.data() + tail, want);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        eof = true;  // a read error ends the file like EOF; what was read stays valid
        break;
      }
      tail += static_cast<size_t>(got);
    }
    return avail() >= n;
  }
};

StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::Error(path + ": cannot open: " + std::strerror(errno));
  }
  std::unique_ptr<TraceReader> r(new TraceReader());
  r->impl_ = std::make_unique<Impl>();
  r->impl_->fd = fd;
  r->path_ = path;
  struct stat st = {};
  if (fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Status::Error(path + ": is a directory, not a kp trace");
    }
    r->stats_.file_bytes = static_cast<uint64_t>(st.st_size);
  }
  Impl& im = *r->impl_;
  im.regular_file = S_ISREG(st.st_mode);
  im.file_size = r->stats_.file_bytes;
  if (im.Ensure(kFileMagicSize)) {
    const uint8_t* magic = im.buf.data() + im.head;
    const uint8_t version = magic[kFileMagicSize - 1];
    if (std::memcmp(magic, kFileMagic, kFileMagicSize - 1) == 0 &&
        version != static_cast<uint8_t>(kFileMagic[kFileMagicSize - 1]) &&
        version != static_cast<uint8_t>(kFormatVersion2) &&
        version != static_cast<uint8_t>(kFormatVersion1)) {
      return Status::Error(path + ": kp trace format version " +
                           (version >= 0x21 && version < 0x7f
                                ? std::string(1, static_cast<char>(version))
                                : "byte " + std::to_string(version)) +
                           " found; this kptrace reads " + kFormatVersionsRead +
                           " -- read it with the kptrace of the kp release that wrote it");
    }
  }
  if (im.avail() < kFileMagicSize ||
      std::memcmp(im.buf.data() + im.head, kFileMagic, kFileMagicSize - 1) != 0) {
    std::string error =
        path + " is not a kp trace (bad magic); expected a file written by libkpinject";
    if (im.avail() < kFileMagicSize)
      error += " (file is only " + std::to_string(im.avail()) + " bytes)";
    return Status::Error(std::move(error));
  }
  im.version = static_cast<char>(im.buf[im.head + kFileMagicSize - 1]);
  im.head += kFileMagicSize;
  r->pos_ = kFileMagicSize;
  im.dctx = ZSTD_createDCtx();
  return r;
}

TraceReader::~TraceReader() = default;

bool TraceReader::Next(Chunk* chunk) {
  Impl& im = *impl_;
  bool resyncing = false;
  while (true) {
    if (!im.Ensure(kFrameHeaderSize)) {
      if (im.avail() > 0) {
        if (resyncing) {
          stats_.skipped_bytes += im.avail();
        } else {
          stats_.truncated_tail_bytes += im.avail();
        }
        pos_ += im.avail();
        im.head = im.tail;
      }
      return false;
    }
    FrameHeader fh;
    const uint8_t* hp = im.buf.data() + im.head;
    FrameHeaderStatus hs = DecodeFrameHeader(hp, &fh);
    if (hs != FrameHeaderStatus::kOk) {
      if (!resyncing) {
        ++stats_.chunks_bad_header;
        resyncing = true;
      }
      // Scan forward for the next chunk magic; a candidate is accepted by the loop above only
      // if its header CRC checks.
      const uint8_t* from = hp + 1;
      const uint8_t* end = im.buf.data() + im.tail;
      const void* found = memmem(from, static_cast<size_t>(end - from), kChunkMagicBytes, 4);
      size_t skip;
      if (found != nullptr) {
        skip = static_cast<size_t>(static_cast<const uint8_t*>(found) - hp);
      } else {
        // Keep the last 3 bytes: they may begin a magic split across reads.
        skip = im.avail() > 3 ? im.avail() - 3 : 1;
      }
      if (found == nullptr && im.eof) skip = im.avail();
      stats_.skipped_bytes += skip;
      pos_ += skip;
      im.head += skip;
      continue;
    }
    resyncing = false;
    const size_t frame = kFrameHeaderSize + fh.stored_size;
    // A frame longer than what is left of a regular file is the torn end of the trace: known
    // without reading (or allocating) what it claims.
    if (im.regular_file && pos_ + frame > im.file_size) {
      struct stat st;  // the trace may still be growing: look again before calling it torn
      if (fstat(im.fd, &st) == 0) im.file_size = static_cast<uint64_t>(st.st_size);
    }
    if (im.regular_file && pos_ + frame > im.file_size && im.file_size >= pos_) {
      const uint64_t rest = im.file_size - pos_;
      stats_.truncated_tail_bytes += rest;
      pos_ += rest;
      im.head = im.tail;
      im.eof = true;
      return false;
    }
    if (fh.stored_size > kMaxStoredChunkBytes) {
      // Over budget before reading: skip the frame's bytes as they stream past.
      ++stats_.chunks_over_budget;
      uint64_t left = frame;
      while (left > 0 && im.Ensure(1)) {
        const size_t step = static_cast<size_t>(std::min<uint64_t>(left, im.avail()));
        im.head += step;
        pos_ += step;
        left -= step;
      }
      continue;
    }
    if (!im.Ensure(frame)) {
      stats_.truncated_tail_bytes += im.avail();
      pos_ += im.avail();
      im.head = im.tail;
      return false;
    }
    uint8_t* payload = im.buf.data() + im.head + kFrameHeaderSize;
    im.head += frame;
    pos_ += frame;
    if (Crc32c(payload, fh.stored_size) != fh.payload_crc) {
      ++stats_.chunks_bad_crc;
      continue;
    }
    uint8_t* msg = payload;
    size_t msg_size = fh.stored_size;
    if (fh.flags & kFrameFlagZstd) {
      if (fh.raw_size > kMaxRawChunkBytes ||
          fh.raw_size > kMaxCompressionRatio * uint64_t{fh.stored_size}) {
        ++stats_.chunks_over_budget;
        continue;
      }
      im.raw.resize(fh.raw_size);
      size_t n =
          ZSTD_decompressDCtx(im.dctx, im.raw.data(), im.raw.size(), payload, fh.stored_size);
      if (ZSTD_isError(n) || n != fh.raw_size) {
        ++stats_.chunks_undecodable;
        continue;
      }
      msg = im.raw.data();
      msg_size = n;
    }
    ColumnSpans spans;
    const ChunkScanResult scan = DecodeChunk(msg, msg_size, DecodeBudget(msg_size), chunk, &spans);
    if (scan.over_budget) {
      ++stats_.chunks_over_budget;
      continue;
    }
    if (!scan.well_formed) {
      ++stats_.chunks_undecodable;
      continue;
    }
    // Versions 2 and 3 code `start` by key and `correlation` from the previous record: the
    // kernels and API calls are undone here, their row-form records first, then their column
    // rows as ExpandColumns makes them, so each record is touched once.
    // (Their negative durations count once the chunk is taken, below.)
    const uint64_t base = chunk->time_base_ns();
    const bool keyed = im.version != kFormatVersion1;
    uint64_t early_negative_durations = 0;
    RowDeltas kernel_deltas(base, &early_negative_durations),
        api_deltas(base, &early_negative_durations);
    // (A list still holding the last chunk's records, ColumnSpans::stale_*, has no row-form
    // records of this chunk: ExpandColumns overwrites or clears it.)
    if (keyed) {
      if (!spans.stale_kernels) UndoKeyedDeltas(chunk->mutable_kernels(), &kernel_deltas);
      if (!spans.stale_api_calls) UndoKeyedDeltas(chunk->mutable_api_calls(), &api_deltas);
    }
    const uint64_t budget = ColumnsDecodeBudget(msg_size);
    switch (ExpandColumns(chunk, budget - std::min(budget, scan.decoded_bytes),
                          keyed ? &kernel_deltas : nullptr, keyed ? &api_deltas : nullptr,
                          &spans)) {
      case ColumnsResult::kOk:
        break;
      case ColumnsResult::kOverBudget:
        ++stats_.chunks_over_budget;
        continue;
      case ColumnsResult::kMalformed:
        ++stats_.chunks_undecodable;
        continue;
    }
    switch (im.Sequence(chunk->sequence(), fh.payload_crc, &stats_)) {
      case Impl::Order::kDuplicate:
        ++stats_.chunks_duplicate;
        continue;
      case Impl::Order::kReordered:
        ++stats_.chunks_reordered;
        break;
      case Impl::Order::kReused:
        ++stats_.chunks_sequence_reused;
        break;
      case Impl::Order::kInOrder:
        break;
    }
    stats_.strings_repaired += scan.strings_repaired;
    stats_.negative_durations += early_negative_durations;
    // Only a chunk that fully decoded counts, so damaged data never reaches the caller.
    ++stats_.chunks_ok;

    if (chunk->has_header() && !have_header_) {
      header_ = chunk->header();
      have_header_ = true;
    }
    for (const Device& d : chunk->devices()) {
      auto it = std::find_if(devices_.begin(), devices_.end(),
                             [&](const Device& x) { return x.id() == d.id(); });
      if (it == devices_.end()) {
        devices_.push_back(d);
      } else {
        *it = d;
      }
    }
    // Stats are cumulative: the latest chunk's win, whatever order the chunks arrived in.
    if (chunk->has_stats() && (!have_trace_stats_ || chunk->sequence() >= stats_sequence_)) {
      trace_stats_ = chunk->stats();
      stats_sequence_ = chunk->sequence();
      have_trace_stats_ = true;
    }
    if (chunk->has_footer()) {
      footer_ = chunk->footer();
      stats_.saw_footer = true;
    }

    im.strings.Clear();
    for (const InternedString& s : chunk->strings()) im.strings.Put(s.id(), &s.value());
    im.shapes.Clear();
    for (const KernelShape& s : chunk->kernel_shapes()) im.shapes.Put(s.id(), &s);

    uint64_t* neg = &stats_.negative_durations;
    if (keyed) {
      RowDeltas memcpy_deltas(base, neg), memset_deltas(base, neg);
      UndoKeyedDeltas(chunk->mutable_memcpys(), &memcpy_deltas);
      UndoKeyedDeltas(chunk->mutable_memsets(), &memset_deltas);
    } else {
      UndoStartDeltas(chunk->mutable_kernels(), base, neg);
      UndoStartDeltas(chunk->mutable_memcpys(), base, neg);
      UndoStartDeltas(chunk->mutable_memsets(), base, neg);
      UndoStartDeltas(chunk->mutable_api_calls(), base, neg);
      UndoCorrelationDeltas(chunk->mutable_kernels());
      UndoCorrelationDeltas(chunk->mutable_memcpys());
      UndoCorrelationDeltas(chunk->mutable_memsets());
      UndoCorrelationDeltas(chunk->mutable_api_calls());
    }
    UndoStartDeltas(chunk->mutable_nvtx_ranges(), base, neg);
    UndoStartDeltas(chunk->mutable_syncs(), base, neg);
    UndoStartDeltas(chunk->mutable_overheads(), base, neg);
    UndoStartDeltas(chunk->mutable_graph_launches(), base, neg);
    UndoStartDeltas(chunk->mutable_metric_ranges(), base, neg);
    UndoStartDeltas(chunk->mutable_pm_samples(), base, neg);
    uint64_t prev = base;
    for (NvtxMark& m : *chunk->mutable_nvtx_marks()) {
      prev += static_cast<uint64_t>(m.time());
      m.set_time(static_cast<int64_t>(prev));
    }
    UndoCorrelationDeltas(chunk->mutable_syncs());
    UndoCorrelationDeltas(chunk->mutable_overheads());
    UndoCorrelationDeltas(chunk->mutable_graph_launches());
    // MetricRange.correlation is absolute by the schema.

    stats_.records += chunk->kernels_size() + chunk->memcpys_size() + chunk->memsets_size() +
                      chunk->api_calls_size() + chunk->nvtx_ranges_size() +
                      chunk->nvtx_marks_size() + chunk->syncs_size() + chunk->overheads_size() +
                      chunk->metric_ranges_size() + chunk->graph_launches_size() +
                      chunk->pm_samples_size();
    return true;
  }
}

std::string_view TraceReader::Str(uint32_t id) {
  if (id == 0) return {};
  const std::string* s = impl_->strings.Get(id);
  if (s != nullptr) return *s;
  ++stats_.unknown_string_ids;
  auto it = impl_->unknown.find(id);
  if (it != impl_->unknown.end()) return it->second;
  if (impl_->unknown.size() >= Impl::kMaxUnknownStrings) return "<unknown string>";
  return impl_->unknown.emplace(id, "<unknown string " + std::to_string(id) + ">").first->second;
}

bool TraceReader::HasStr(uint32_t id) const { return id == 0 || impl_->strings.Get(id) != nullptr; }

const KernelShape* TraceReader::Shape(uint32_t id) {
  const KernelShape* s = impl_->shapes.Get(id);
  if (s == nullptr) ++stats_.unknown_shape_ids;
  return s;
}

std::vector<std::string> ReaderStats::Describe() const {
  std::vector<std::string> out;
  auto add = [&out](uint64_t n, const char* one, const char* many, const char* what) {
    if (n == 0) return;
    out.push_back(std::to_string(n) + " " + (n == 1 ? one : many) + what);
  };
  if (bad_file_magic) out.push_back("bad file magic: not a kp trace");
  add(chunks_bad_crc, "chunk", "chunks", " skipped: payload CRC mismatch");
  add(chunks_bad_header, "damaged chunk header", "damaged chunk headers",
      " (bad magic or header CRC): resynchronised on the next chunk");
  add(chunks_undecodable, "chunk", "chunks", " skipped: could not be decompressed or parsed");
  add(truncated_tail_bytes, "byte", "bytes",
      " of a torn final chunk ignored (trace cut short while writing)");
  add(skipped_bytes, "byte", "bytes", " skipped while resynchronising");
  add(sequence_gaps, "chunk", "chunks", " missing (sequence gaps): their records are lost");
  add(chunks_over_budget, "chunk", "chunks",
      " skipped: over the decode budget (claims more memory than its size allows)");
  add(chunks_duplicate, "duplicate chunk", "duplicate chunks",
      " (same sequence number and CRC as one already read) read once");
  add(chunks_reordered, "chunk", "chunks",
      " out of order (arrived after later chunks): read, nothing lost");
  add(chunks_sequence_reused, "chunk", "chunks",
      " reuse a sequence number already read, with other content: read as separate chunks");
  add(strings_repaired, "string", "strings", " held invalid UTF-8: each bad byte shown as '?'");
  add(unknown_string_ids, "reference", "references", " to an unknown string id");
  add(unknown_shape_ids, "reference", "references", " to an unknown kernel shape id");
  add(negative_durations, "record", "records", " with end before start (negative duration)");
  return out;
}

}  // namespace kp
