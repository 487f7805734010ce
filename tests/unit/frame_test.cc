// Framing tests: frame header round trip and CRC checks, MemoryChunkSink and FileChunkWriter
// output parsed back, and the writer's failure policy (one line, truncation, refusal).
#include "common/frame.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "inject/trace/chunk_writer.h"

namespace kp {
namespace {

TEST(FrameTest, Crc32cKnownValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  // Continuing a CRC over two pieces equals one pass over the whole.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
}

TEST(FrameTest, HeaderRoundTrip) {
  FrameHeader h;
  h.flags = kFrameFlagZstd;
  h.stored_size = 1234;
  h.raw_size = 99999;
  h.payload_crc = 0xDEADBEEF;
  uint8_t bytes[kFrameHeaderSize];
  EncodeFrameHeader(h, bytes);
  FrameHeader back;
  ASSERT_EQ(DecodeFrameHeader(bytes, &back), FrameHeaderStatus::kOk);
  EXPECT_EQ(back.magic, kChunkMagic);
  EXPECT_EQ(back.flags, kFrameFlagZstd);
  EXPECT_EQ(back.stored_size, 1234u);
  EXPECT_EQ(back.raw_size, 99999u);
  EXPECT_EQ(back.payload_crc, 0xDEADBEEFu);
  EXPECT_EQ(back.header_crc, Crc32c(bytes, 20));
  EXPECT_EQ(0, std::memcmp(bytes, "KPCK", 4));  // little-endian magic reads as text
}

TEST(FrameTest, EveryFlippedBitIsDetected) {
  FrameHeader h;
  h.stored_size = 10;
  h.raw_size = 10;
  uint8_t good[kFrameHeaderSize];
  EncodeFrameHeader(h, good);
  for (size_t bit = 0; bit < kFrameHeaderSize * 8; ++bit) {
    uint8_t bad[kFrameHeaderSize];
    std::memcpy(bad, good, sizeof bad);
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    FrameHeader out;
    FrameHeaderStatus s = DecodeFrameHeader(bad, &out);
    if (bit < 32) {
      EXPECT_EQ(s, FrameHeaderStatus::kBadMagic) << bit;
    } else {
      EXPECT_EQ(s, FrameHeaderStatus::kBadHeaderCrc) << bit;
    }
  }
}

TEST(FrameTest, OversizedFrameIsRefused) {
  FrameHeader h;
  h.stored_size = kMaxChunkBytes + 1;
  uint8_t bytes[kFrameHeaderSize];
  EncodeFrameHeader(h, bytes);
  FrameHeader out;
  EXPECT_EQ(DecodeFrameHeader(bytes, &out), FrameHeaderStatus::kTooLarge);
}

// Reads frames back; returns the payloads after decompression.
std::vector<std::vector<uint8_t>> ReadFrames(const std::vector<uint8_t>& file,
                                             std::vector<uint32_t>* flags = nullptr) {
  std::vector<std::vector<uint8_t>> out;
  EXPECT_GE(file.size(), kFileMagicSize);
  EXPECT_EQ(0, std::memcmp(file.data(), kFileMagic, kFileMagicSize));
  size_t pos = kFileMagicSize;
  while (pos + kFrameHeaderSize <= file.size()) {
    FrameHeader h;
    EXPECT_EQ(DecodeFrameHeader(file.data() + pos, &h), FrameHeaderStatus::kOk);
    const uint8_t* payload = file.data() + pos + kFrameHeaderSize;
    EXPECT_LE(pos + kFrameHeaderSize + h.stored_size, file.size());
    EXPECT_EQ(Crc32c(payload, h.stored_size), h.payload_crc);
    std::vector<uint8_t> raw(h.raw_size);
    if (h.flags & kFrameFlagZstd) {
      EXPECT_EQ(ZSTD_decompress(raw.data(), raw.size(), payload, h.stored_size), h.raw_size);
    } else if (h.raw_size > 0) {
      std::memcpy(raw.data(), payload, h.raw_size);
    }
    if (flags) flags->push_back(h.flags);
    out.push_back(std::move(raw));
    pos += kFrameHeaderSize + h.stored_size;
  }
  EXPECT_EQ(pos, file.size()) << "trailing bytes after the last frame";
  return out;
}

std::vector<uint8_t> Compressible(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i / 16) % 7);
  return v;
}

std::vector<uint8_t> Incompressible(size_t n) {
  std::vector<uint8_t> v(n);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

std::vector<uint8_t> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string base = dir != nullptr ? dir : "/tmp";
  return base + "/kp_frame_test_" + std::to_string(getpid()) + "_" + name;
}

TEST(MemoryChunkSinkTest, FramesParseBackRawAndCompressed) {
  for (int level : {0, 3}) {
    MemoryChunkSink sink(level);
    std::vector<uint8_t> a = Compressible(100000), b = Incompressible(5000), empty;
    ASSERT_TRUE(sink.WriteChunk(a.data(), a.size()));
    ASSERT_TRUE(sink.WriteChunk(b.data(), b.size()));
    ASSERT_TRUE(sink.WriteChunk(empty.data(), 0));
    std::vector<uint32_t> flags;
    auto frames = ReadFrames(sink.file(), &flags);
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0], a);
    EXPECT_EQ(frames[1], b);
    EXPECT_TRUE(frames[2].empty());
    EXPECT_EQ(sink.raw_chunks()[0], a);
    EXPECT_EQ(sink.bytes_written(), sink.file().size());
    if (level > 0) {
      EXPECT_EQ(flags[0], kFrameFlagZstd);
      EXPECT_LT(sink.file().size(), a.size() / 10);
      EXPECT_EQ(flags[1], 0u) << "incompressible data must be stored raw";
    } else {
      EXPECT_EQ(flags[0], 0u);
    }
  }
}

TEST(FileChunkWriterTest, WritesTheSameBytesAsMemorySink) {
  for (int level : {0, 5}) {
    std::string path = TempPath("same" + std::to_string(level));
    StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open(path, level);
    const std::string error = opened.status().message();
    std::unique_ptr<FileChunkWriter> w = std::move(opened).value_or(nullptr);
    ASSERT_NE(w, nullptr) << error;
    MemoryChunkSink mem(level);
    std::vector<uint8_t> a = Compressible(300000), b = Incompressible(777);
    for (auto* chunk : {&a, &b, &a}) {
      ASSERT_TRUE(w->WriteChunk(chunk->data(), chunk->size()));
      ASSERT_TRUE(mem.WriteChunk(chunk->data(), chunk->size()));
    }
    EXPECT_FALSE(w->failed());
    EXPECT_EQ(w->bytes_written(), mem.bytes_written());
    EXPECT_EQ(ReadWholeFile(path), mem.file());
    EXPECT_EQ(ReadFrames(ReadWholeFile(path)).size(), 3u);
    ::unlink(path.c_str());
  }
}

TEST(FileChunkWriterTest, DiskFullGivesOneLineAndRefusesFurtherWrites) {
  StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open("/dev/full", 3);
  const std::string error = opened.status().message();
  std::unique_ptr<FileChunkWriter> w = std::move(opened).value_or(nullptr);
  ASSERT_NE(w, nullptr) << error;
  std::vector<uint8_t> a = Compressible(1000);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(w->WriteChunk(a.data(), a.size()));
  EXPECT_FALSE(w->WriteChunk(a.data(), a.size()));  // refused silently
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(w->failed());
  EXPECT_EQ(err,
            "kp: cannot write trace /dev/full: No space left on device (free disk space or set "
            "KP_OUTPUT to a path on another file system); tracing stops here, the 0 chunks "
            "written so far stay readable\n");
}

TEST(FileChunkWriterTest, ReadOnlyDirectoryFailsAtOpenWithTheFix) {
  std::string dir = TempPath("rodir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0555), 0);
  // root ignores directory permissions; /sys refuses new files to everyone.
  std::string path = geteuid() == 0 ? "/sys/kp-test.kptrace" : dir + "/t.kptrace";
  StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open(path, 3);
  const std::string error = opened.status().message();
  std::unique_ptr<FileChunkWriter> w = std::move(opened).value_or(nullptr);
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(error, "cannot create trace " + path +
                       ": Permission denied (set KP_OUTPUT to a writable path); nothing is traced");
  ::rmdir(dir.c_str());
}

// A write that fails half way (file size limit) leaves the file cut back to the last chunk.
TEST(FileChunkWriterTest, PartialWriteIsTruncatedToTheLastChunk) {
  std::string path = TempPath("fsize");
  StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open(path, 0);
  const std::string error = opened.status().message();
  std::unique_ptr<FileChunkWriter> w = std::move(opened).value_or(nullptr);
  ASSERT_NE(w, nullptr) << error;
  std::vector<uint8_t> small = Incompressible(1000), big = Incompressible(200000);
  ASSERT_TRUE(w->WriteChunk(small.data(), small.size()));
  uint64_t good = w->bytes_written();

  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct sigaction ignore = {}, old_action = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = good + 100000;  // the big chunk gets half written, then EFBIG
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  testing::internal::CaptureStderr();
  bool ok = w->WriteChunk(big.data(), big.size());
  std::string err = testing::internal::GetCapturedStderr();
  setrlimit(RLIMIT_FSIZE, &old_limit);
  sigaction(SIGXFSZ, &old_action, nullptr);

  EXPECT_FALSE(ok);
  EXPECT_TRUE(w->failed());
  EXPECT_EQ(err, "kp: cannot write trace " + path +
                     ": File too large (raise the file size limit (ulimit -f) or shorten the "
                     "capture with KP_DURATION); tracing stops here, the 1 chunks written so "
                     "far stay readable\n");
  std::vector<uint8_t> file = ReadWholeFile(path);
  EXPECT_EQ(file.size(), good);
  auto frames = ReadFrames(file);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0], small);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace kp
