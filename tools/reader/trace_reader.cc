#include "tools/reader/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "common/frame.h"

namespace kp {
namespace {

constexpr size_t kReadBytes = 4u << 20;
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

// A damaged or crafted chunk of tiny records (2 bytes each) would parse into ~100 bytes of
// message per byte of input. The writer's chunks hold at most a few million records (about
// 4 MiB, never more than 64 MiB, of records of 5+ bytes), so a chunk with more top-level
// fields than this is refused as undecodable before libprotobuf allocates anything.
constexpr uint64_t kMaxFieldsPerChunk = 16u << 20;

// Counts the top-level fields of a serialized message without decoding them (stops early, and
// returns UINT64_MAX on malformed wire data: the parse would fail anyway).
uint64_t CountTopLevelFields(const uint8_t* p, size_t n) {
  const uint8_t* end = p + n;
  uint64_t fields = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const uint8_t b = *p++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  };
  while (p < end) {
    uint64_t tag = 0, v = 0;
    if (!varint(&tag)) return UINT64_MAX;
    switch (tag & 7) {
      case 0:
        if (!varint(&v)) return UINT64_MAX;
        break;
      case 1:
        if (end - p < 8) return UINT64_MAX;
        p += 8;
        break;
      case 2:
        if (!varint(&v) || v > static_cast<uint64_t>(end - p)) return UINT64_MAX;
        p += v;
        break;
      case 5:
        if (end - p < 4) return UINT64_MAX;
        p += 4;
        break;
      default:
        return UINT64_MAX;
    }
    if (++fields > kMaxFieldsPerChunk) return fields;
  }
  return fields;
}

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
  IdTable<std::string> strings;
  IdTable<KernelShape> shapes;
  std::string unknown;  // backing store for "<unknown string N>"

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
    if (buf.size() < n) buf.resize(std::max(n, kReadBytes));
    while (!eof && tail < n) {
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

std::unique_ptr<TraceReader> TraceReader::Open(const std::string& path, std::string* error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": cannot open: " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<TraceReader> r(new TraceReader());
  r->impl_ = std::make_unique<Impl>();
  r->impl_->fd = fd;
  r->path_ = path;
  struct stat st;
  if (fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      *error = path + ": is a directory, not a kp trace";
      return nullptr;
    }
    r->stats_.file_bytes = static_cast<uint64_t>(st.st_size);
  }
  Impl& im = *r->impl_;
  if (!im.Ensure(kFileMagicSize) ||
      std::memcmp(im.buf.data() + im.head, kFileMagic, kFileMagicSize) != 0) {
    *error = path + " is not a kp trace (bad magic); expected a file written by libkpinject";
    if (im.avail() < kFileMagicSize)
      *error += " (file is only " + std::to_string(im.avail()) + " bytes)";
    return nullptr;
  }
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
    if (!im.Ensure(frame)) {
      stats_.truncated_tail_bytes += im.avail();
      pos_ += im.avail();
      im.head = im.tail;
      return false;
    }
    const uint8_t* payload = im.buf.data() + im.head + kFrameHeaderSize;
    im.head += frame;
    pos_ += frame;
    if (Crc32c(payload, fh.stored_size) != fh.payload_crc) {
      ++stats_.chunks_bad_crc;
      continue;
    }
    const uint8_t* msg = payload;
    size_t msg_size = fh.stored_size;
    if (fh.flags & kFrameFlagZstd) {
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
    if (CountTopLevelFields(msg, msg_size) > kMaxFieldsPerChunk ||
        !chunk->ParseFromArray(msg, static_cast<int>(msg_size))) {
      ++stats_.chunks_undecodable;
      continue;
    }
    // Only a chunk that fully decoded counts, so damaged data never reaches the caller.
    ++stats_.chunks_ok;
    if (chunk->sequence() > im.next_sequence) {
      stats_.sequence_gaps += chunk->sequence() - im.next_sequence;
    }
    if (chunk->sequence() >= im.next_sequence) im.next_sequence = chunk->sequence() + 1;
    im.seen_chunk = true;

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
    if (chunk->has_stats()) trace_stats_ = chunk->stats();
    if (chunk->has_footer()) {
      footer_ = chunk->footer();
      stats_.saw_footer = true;
    }

    im.strings.Clear();
    for (const InternedString& s : chunk->strings()) im.strings.Put(s.id(), &s.value());
    im.shapes.Clear();
    for (const KernelShape& s : chunk->kernel_shapes()) im.shapes.Put(s.id(), &s);

    const uint64_t base = chunk->time_base_ns();
    uint64_t* neg = &stats_.negative_durations;
    UndoStartDeltas(chunk->mutable_kernels(), base, neg);
    UndoStartDeltas(chunk->mutable_memcpys(), base, neg);
    UndoStartDeltas(chunk->mutable_memsets(), base, neg);
    UndoStartDeltas(chunk->mutable_api_calls(), base, neg);
    UndoStartDeltas(chunk->mutable_nvtx_ranges(), base, neg);
    UndoStartDeltas(chunk->mutable_syncs(), base, neg);
    UndoStartDeltas(chunk->mutable_overheads(), base, neg);
    UndoStartDeltas(chunk->mutable_graph_launches(), base, neg);
    UndoStartDeltas(chunk->mutable_metric_ranges(), base, neg);
    uint64_t prev = base;
    for (NvtxMark& m : *chunk->mutable_nvtx_marks()) {
      prev += static_cast<uint64_t>(m.time());
      m.set_time(static_cast<int64_t>(prev));
    }
    UndoCorrelationDeltas(chunk->mutable_kernels());
    UndoCorrelationDeltas(chunk->mutable_memcpys());
    UndoCorrelationDeltas(chunk->mutable_memsets());
    UndoCorrelationDeltas(chunk->mutable_api_calls());
    UndoCorrelationDeltas(chunk->mutable_syncs());
    UndoCorrelationDeltas(chunk->mutable_overheads());
    UndoCorrelationDeltas(chunk->mutable_graph_launches());
    // MetricRange.correlation is absolute by the schema.

    stats_.records += chunk->kernels_size() + chunk->memcpys_size() + chunk->memsets_size() +
                      chunk->api_calls_size() + chunk->nvtx_ranges_size() +
                      chunk->nvtx_marks_size() + chunk->syncs_size() + chunk->overheads_size() +
                      chunk->metric_ranges_size() + chunk->graph_launches_size();
    return true;
  }
}

std::string_view TraceReader::Str(uint32_t id) {
  if (id == 0) return {};
  const std::string* s = impl_->strings.Get(id);
  if (s != nullptr) return *s;
  ++stats_.unknown_string_ids;
  impl_->unknown = "<unknown string " + std::to_string(id) + ">";
  return impl_->unknown;
}

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
  add(unknown_string_ids, "reference", "references", " to an unknown string id");
  add(unknown_shape_ids, "reference", "references", " to an unknown kernel shape id");
  add(negative_durations, "record", "records", " with end before start (negative duration)");
  return out;
}

}  // namespace kp
