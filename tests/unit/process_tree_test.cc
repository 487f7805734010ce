// Process trees on CPU: the ownership of trace files (threads and forked processes racing on
// one path, a file left by an earlier run, joining by run id), the deferred file that appears
// only with a CUDA context, the run manifest written by many processes at once, one argument
// expanding to a whole run, the cross-rank summary and clock alignment on collective kernels.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/run_files.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/run_manifest.h"
#include "inject/trace/trace_file_claim.h"
#include "tests/unit/scratch_dir.h"
#include "tests/unit/status_assertions.h"
#include "tools/info/trace_info.h"
#include "tools/reader/proto_trace_writer.h"
#include "tools/reader/trace_reader.h"
#include "tools/run/clock_alignment.h"
#include "tools/run/launcher.h"
#include "tools/run/run_inputs.h"
#include "tools/summary/trace_summary.h"

namespace kp {
namespace {

std::string TempDir() {
  std::string pattern = kp::test::ScratchPath("ptree_XXXXXX");
  const char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

ClaimRequest Request(const std::string& path, uint32_t pid, int rank = -1,
                     const std::string& run_id = "") {
  ClaimRequest r;
  r.requested = path;
  r.run_id = run_id;
  r.rank = rank;
  r.host = "node1";
  r.pid = pid;
  return r;
}

// ---- ownership ----

// ClaimTraceFile, passing with the file in *claimed or failing with the message.
::testing::AssertionResult Claimed(const ClaimRequest& request, ClaimedFile* claimed) {
  StatusOr<ClaimedFile> c = ClaimTraceFile(request);
  if (!c.ok()) return ::testing::AssertionFailure() << c.status().message();
  *claimed = c.value();
  return ::testing::AssertionSuccess();
}

TEST(TraceFileClaim, SecondWriterOfALiveFileGetsAMemberName) {
  const std::string dir = TempDir();
  const std::string path = dir + "/t.kptrace";
  ClaimedFile a, b;
  std::string error;
  ASSERT_TRUE(Claimed(Request(path, 100, 0), &a));
  EXPECT_TRUE(a.is_root);
  EXPECT_EQ(a.path, path);
  EXPECT_TRUE(a.note.empty());
  ASSERT_EQ(write(a.fd, "KPTRACE1", 8), 8);
  EXPECT_EQ(ProbeTraceFile(path), TraceFileState::kHeld);
  ASSERT_TRUE(Claimed(Request(path, 101, 1), &b));
  EXPECT_FALSE(b.is_root);
  EXPECT_EQ(b.root, path);
  EXPECT_EQ(b.path, dir + "/t.r1.node1.101.kptrace");
  EXPECT_EQ(b.note, "kp: " + path + " is written by another process of this run; this process " +
                        "writes " + b.path);
  EXPECT_EQ(ReadAll(path), "KPTRACE1");  // never truncated
  close(a.fd);
  close(b.fd);
  EXPECT_EQ(ProbeTraceFile(path), TraceFileState::kFree);
}

size_t Occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Every root name taken by earlier runs: one error that gives its advice once (the writer adds
// only "; nothing is traced").
TEST(TraceFileClaim, EveryNameTakenIsOneErrorWithItsAdviceOnce) {
  const std::string dir = TempDir();
  const std::string path = dir + "/t.kptrace";
  std::ofstream(path) << "earlier run";
  for (int n = 2; n <= 1000; ++n) {
    std::ofstream(dir + "/t." + std::to_string(n) + ".kptrace") << "earlier run";
  }
  const StatusOr<ClaimedFile> claimed = ClaimTraceFile(Request(path, 200));
  ASSERT_FALSE(claimed.ok());
  const std::string message = claimed.status().message();
  EXPECT_EQ(message, "cannot create trace " + path +
                         ": it and 999 numbered names exist already (remove old traces or choose "
                         "another KP_OUTPUT)");
  EXPECT_EQ(Occurrences(message, "KP_OUTPUT"), 1u);
}

TEST(TraceFileClaim, AnUnwritableDirectoryNamesTheFixOnce) {
  const std::string dir = TempDir() + "/readonly";
  ASSERT_EQ(mkdir(dir.c_str(), 0555), 0);
  // root ignores directory permissions; /sys refuses new files to everyone.
  const std::string path = geteuid() == 0 ? "/sys/kp-test.kptrace" : dir + "/t.kptrace";
  const StatusOr<ClaimedFile> claimed = ClaimTraceFile(Request(path, 200));
  ASSERT_FALSE(claimed.ok());
  EXPECT_EQ(
      claimed.status().message(),
      "cannot create trace " + path + ": Permission denied (set KP_OUTPUT to a writable path)");
  rmdir(dir.c_str());
}

TEST(TraceFileClaim, AFileLeftByAnEarlierRunIsKeptAndTheRunGetsTheNextRootName) {
  const std::string dir = TempDir();
  const std::string path = dir + "/t.kptrace";
  std::ofstream(path) << "earlier run";
  ClaimedFile c;
  std::string error;
  ASSERT_TRUE(Claimed(Request(path, 200), &c));
  EXPECT_TRUE(c.is_root);
  EXPECT_EQ(c.path, dir + "/t.2.kptrace");
  EXPECT_EQ(c.note, "kp: " + path + " is from an earlier run and is kept; this run writes " + dir +
                        "/t.2.kptrace");
  EXPECT_EQ(ReadAll(path), "earlier run");
  close(c.fd);
}

// A root trace whose first chunk carries `run_id` in its header (zstd-compressed or not).
std::string RootBytes(const std::string& run_id, int zstd_level) {
  ProtoTraceWriter w(zstd_level);
  Chunk c;
  c.set_sequence(0);
  Header* h = c.mutable_header();
  h->set_pid(300);
  h->set_hostname("node1");
  h->add_command_line(std::string(300, 'x'));  // something to compress
  h->set_run_id(run_id);
  w.Add(c);
  return w.bytes();
}

TEST(TraceFileClaim, AProcessOfTheSameRunJoinsARootWhoseWriterHasEnded) {
  for (int zstd_level : {0, 3}) {
    const std::string dir = TempDir();
    const std::string path = dir + "/t.kptrace";
    ClaimedFile root;
    std::string error;
    ASSERT_TRUE(Claimed(Request(path, 300, 0, "job-7"), &root));
    const std::string bytes = RootBytes("job-7", zstd_level);
    ASSERT_EQ(write(root.fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(root.fd);  // the root's writer ended
    EXPECT_EQ(RootRunId(path), "job-7");
    ClaimedFile late, other_run;
    ASSERT_TRUE(Claimed(Request(path, 301, 1, "job-7"), &late));
    EXPECT_FALSE(late.is_root);
    EXPECT_EQ(late.root, path);
    ASSERT_TRUE(Claimed(Request(path, 302, 1, "job-8"), &other_run));
    EXPECT_TRUE(other_run.is_root);
    EXPECT_EQ(other_run.path, dir + "/t.2.kptrace");
    close(late.fd);
    close(other_run.fd);
  }
  // Not a trace, a damaged first chunk: no run id (the file counts as an earlier run's).
  const std::string dir = TempDir();
  std::ofstream(dir + "/junk.kptrace") << "KPTRACE1 and then no frame at all";
  EXPECT_EQ(RootRunId(dir + "/junk.kptrace"), "");
  std::string damaged = RootBytes("job-7", 0);
  damaged[damaged.size() - 3] ^= 0x40;
  std::ofstream(dir + "/damaged.kptrace", std::ios::binary) << damaged;
  EXPECT_EQ(RootRunId(dir + "/damaged.kptrace"), "");
}

TEST(TraceFileClaim, ThreadsRacingOnOnePathGetOneFileEach) {
  const std::string dir = TempDir();
  const std::string path = dir + "/race.kptrace";
  constexpr int kThreads = 16;
  std::vector<ClaimedFile> claimed(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kThreads) {
      }
      std::string error;
      EXPECT_TRUE(Claimed(Request(path, 1000 + i, i), &claimed[i]));
      const std::string mine = "writer " + std::to_string(i);
      EXPECT_EQ(write(claimed[i].fd, mine.data(), mine.size()), static_cast<ssize_t>(mine.size()));
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> paths;
  int roots = 0;
  for (int i = 0; i < kThreads; ++i) {
    paths.insert(claimed[i].path);
    roots += claimed[i].is_root ? 1 : 0;
    EXPECT_EQ(ReadAll(claimed[i].path), "writer " + std::to_string(i));
    close(claimed[i].fd);
  }
  EXPECT_EQ(paths.size(), static_cast<size_t>(kThreads));
  // Threads of one process see each other's files as held or just created: one run, one root.
  EXPECT_EQ(roots, 1);
}

TEST(TraceFileClaim, ForkedProcessesRacingOnOnePathNeverShareAFile) {
  const std::string dir = TempDir();
  const std::string path = dir + "/fork.kptrace";
  constexpr int kChildren = 12;
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      char byte;
      if (read(go[0], &byte, 1) != 0) _exit(3);  // EOF = everyone starts at once
      ClaimedFile c;
      std::string error;
      if (!Claimed(Request(path, static_cast<uint32_t>(getpid()), i), &c)) _exit(4);
      const std::string mine = "pid " + std::to_string(getpid()) + (c.is_root ? " root" : "");
      // Write in small pieces: an interleaving writer would show up as mixed content.
      for (char ch : mine) {
        if (write(c.fd, &ch, 1) != 1) _exit(5);
        usleep(200);
      }
      std::ofstream(dir + "/claimed." + std::to_string(getpid())) << c.path;
      _exit(0);
    }
    children.push_back(pid);
  }
  close(go[0]);
  close(go[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  std::set<std::string> files;
  int roots = 0;
  for (pid_t pid : children) {
    const std::string file = ReadAll(dir + "/claimed." + std::to_string(pid));
    files.insert(file);
    const std::string content = ReadAll(file);
    EXPECT_EQ(content.substr(0, content.find(" root")), "pid " + std::to_string(pid));
    roots += content.find(" root") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(files.size(), static_cast<size_t>(kChildren));
  EXPECT_GE(roots, 1);
}

// ---- the deferred file ----

DeferredFileOptions Deferred(const std::string& path, uint32_t pid,
                             const std::atomic<bool>* context) {
  DeferredFileOptions o;
  o.claim = Request(path, pid);
  o.entry.host = "node1";
  o.entry.pid = pid;
  o.create_when = context;
  return o;
}

TEST(DeferredTraceFile, NoContextNoFileNoManifest) {
  const std::string dir = TempDir();
  std::atomic<bool> context{false};
  std::unique_ptr<FileChunkWriter> w(
      FileChunkWriter::CreateDeferred(Deferred(dir + "/lazy.kptrace", 400, &context), 3));
  const uint8_t chunk[] = {1, 2, 3};
  EXPECT_TRUE(w->WriteChunk(chunk, sizeof chunk));
  w->MarkEnded("exit");
  EXPECT_FALSE(w->created());
  EXPECT_FALSE(Exists(dir + "/lazy.kptrace"));
  EXPECT_FALSE(Exists(dir + "/lazy.kptrace.procs"));
}

TEST(DeferredTraceFile, TheFileAppearsWithEveryChunkOnceAContextExists) {
  const std::string dir = TempDir();
  const std::string path = dir + "/lazy.kptrace";
  std::atomic<bool> context{false};
  auto options = [&](uint32_t pid, int rank) {
    DeferredFileOptions o = Deferred(path, pid, &context);
    o.claim.rank = rank;
    o.entry.rank = rank;
    o.entry.run_id = "r1";
    return o;
  };
  std::unique_ptr<FileChunkWriter> w(FileChunkWriter::CreateDeferred(options(401, 0), 0));
  MemoryChunkSink expected(0);
  const uint8_t a[] = {8, 1}, b[] = {8, 2};  // sequence = 1, 2
  EXPECT_TRUE(w->WriteChunk(a, sizeof a));
  expected.WriteChunk(a, sizeof a);
  EXPECT_FALSE(Exists(path));
  context = true;
  EXPECT_TRUE(w->WriteChunk(b, sizeof b));
  expected.WriteChunk(b, sizeof b);
  ASSERT_TRUE(w->created());
  EXPECT_EQ(w->path(), path);
  const std::string bytes = ReadAll(path);
  EXPECT_EQ(bytes, std::string(expected.file().begin(), expected.file().end()));
  EXPECT_EQ(ProbeTraceFile(path), TraceFileState::kHeld);
  // Alone, the root leaves no manifest.
  EXPECT_FALSE(Exists(ManifestDirFor(path)));
  // A second process joins: it lists itself at once; the root lists itself when it ends.
  std::unique_ptr<FileChunkWriter> member(FileChunkWriter::CreateDeferred(options(402, 1), 0));
  EXPECT_TRUE(member->WriteChunk(a, sizeof a));
  EXPECT_EQ(member->path(), dir + "/lazy.r1.node1.402.kptrace");
  // (These chunks carry no header, so the root's rank is unknown until its entry exists: it is
  // listed after the ranked member.)
  RunManifest m;
  ASSERT_TRUE(ReadRunManifest(path, &m));
  ASSERT_EQ(m.processes.size(), 2u);
  EXPECT_EQ(m.processes[0].file, member->path());
  EXPECT_EQ(m.processes[0].state, "writing");
  EXPECT_FALSE(m.processes[0].root);
  EXPECT_EQ(m.processes[1].file, path);  // from the root's file while it has no entry
  EXPECT_TRUE(m.processes[1].root);
  w->MarkEnded("signal SIGTERM");
  member->MarkEnded("exit");
  ASSERT_TRUE(ReadRunManifest(path, &m));
  ASSERT_EQ(m.processes.size(), 2u);
  EXPECT_EQ(m.processes[0].file, path);  // rank 0 now, from its entry
  EXPECT_EQ(m.processes[0].state, "ended");
  EXPECT_EQ(m.processes[0].end_reason, "signal SIGTERM");
  EXPECT_EQ(m.processes[0].run_id, "r1");
  EXPECT_EQ(m.processes[1].end_reason, "exit");
}

TEST(DeferredTraceFile, ARunOfOneProcessLeavesNoManifest) {
  const std::string dir = TempDir();
  std::atomic<bool> context{true};
  std::unique_ptr<FileChunkWriter> w(
      FileChunkWriter::CreateDeferred(Deferred(dir + "/one.kptrace", 403, &context), 3));
  const uint8_t a[] = {8, 1};
  EXPECT_TRUE(w->WriteChunk(a, sizeof a));
  w->MarkEnded("exit");
  EXPECT_TRUE(Exists(dir + "/one.kptrace"));
  EXPECT_FALSE(Exists(dir + "/one.kptrace.procs"));
}

// ---- manifest ----

TEST(RunManifest, EntryIsValidJsonWhateverTheCommandHolds) {
  ManifestEntry e;
  e.run_id = "kprun-h-1-2";
  e.file = "t.kptrace";
  e.pid = 7;
  e.ppid = 1;
  e.host = "h";
  e.rank = 3;
  e.local_rank = 1;
  e.world_size = 4;
  e.command = {"python3", "-c", "print(\"a\\\\b\")\n\t\x01", "caf\xc3\xa9", "\xff"};
  e.start_unix_ns = 1700000000000000000ull;
  const nlohmann::json j = nlohmann::json::parse(ManifestEntryJson(e));
  EXPECT_EQ(j["run_id"], "kprun-h-1-2");
  EXPECT_EQ(j["rank"], 3);
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["command"][2], "print(\"a\\\\b\")\n\t\x01");
  EXPECT_EQ(j["command"].size(), 5u);
  EXPECT_EQ(j["start_unix_ns"], 1700000000000000000ull);
  EXPECT_EQ(j["state"], "writing");
}

TEST(RunManifest, ManyProcessesWriteTheirEntriesAtOnce) {
  const std::string dir = TempDir();
  const std::string root = dir + "/m.kptrace";
  constexpr int kChildren = 16;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ManifestEntry e;
      e.run_id = "x";
      e.host = "node1";
      e.pid = static_cast<uint32_t>(getpid());
      e.rank = kChildren - 1 - i;
      e.file = "m.r" + std::to_string(e.rank) + ".kptrace";
      std::string error;
      for (int round = 0; round < 20; ++round) {
        e.state = round == 19 ? "ended" : "writing";
        if (!WriteManifestEntry(ManifestDirFor(root), e).ok()) _exit(1);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  RunManifest m;
  ASSERT_TRUE(ReadRunManifest(root, &m));
  EXPECT_TRUE(m.problems.empty());
  ASSERT_EQ(m.processes.size(), static_cast<size_t>(kChildren));
  for (int i = 0; i < kChildren; ++i) {
    EXPECT_EQ(m.processes[i].rank, i);  // rank order
    EXPECT_EQ(m.processes[i].state, "ended");
  }
}

// ---- a run as one argument, the cross-rank summary, clock alignment ----

constexpr uint64_t kT0 = 1700000000000000000ull;
constexpr uint64_t kMs = 1000000;

void AddString(Chunk* c, uint32_t id, const std::string& v) {
  InternedString* s = c->add_strings();
  s->set_id(id);
  s->set_value(v);
}

// One rank of a 2-rank data-parallel job: `steps` NVTX "train_step" ranges on the main thread,
// each with a compute kernel and an NCCL all-reduce that overlaps its last half; an NCCL-domain
// range inside each step; `open_ranges` ranges left open. `step_ms(i)` is step i's length and
// `clock_skew` shifts every time stamp (another host's clock).
std::string RankTrace(int rank, uint32_t pid, const std::string& host, int steps,
                      const std::vector<uint64_t>& step_ms, int64_t clock_skew,
                      int open_ranges = 0) {
  ProtoTraceWriter w(0);
  Chunk c;
  c.set_sequence(0);
  c.set_time_base_ns(kT0 + clock_skew);
  Header* h = c.mutable_header();
  h->set_pid(pid);
  h->set_ppid(1);
  h->set_hostname(host);
  h->set_boot_id("boot-" + host);
  h->set_rank(rank);
  h->set_local_rank(rank);
  h->set_world_size(2);
  h->set_start_time_trace_ns(kT0 + clock_skew);
  AddString(&c, 1, "void gemm_kernel<float>(float*)");
  AddString(&c, 2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  AddString(&c, 3, "train_step");
  AddString(&c, 4, "NCCL");
  AddString(&c, 5, "ncclAllReduce");
  AddString(&c, 6, "epoch");
  for (uint32_t id : {1u, 2u}) {
    KernelShape* s = c.add_kernel_shapes();
    s->set_id(id);
    s->set_name(id);
    s->set_demangled(id);
  }
  uint64_t t = kT0 + clock_skew + kMs;
  const uint64_t epoch_start = t;
  int64_t correlation = 1;
  for (int i = 0; i < steps; ++i) {
    const uint64_t len = step_ms[i] * kMs;
    NvtxRange* r = c.add_nvtx_ranges();
    r->set_start(static_cast<int64_t>(t));
    r->set_duration(static_cast<int64_t>(len));
    r->set_name(3);
    r->set_thread_id(10);
    NvtxRange* nccl = c.add_nvtx_ranges();  // NCCL's own range, on the same thread, nested
    nccl->set_start(static_cast<int64_t>(t + len / 2));
    nccl->set_duration(static_cast<int64_t>(len / 4));
    nccl->set_name(5);
    nccl->set_domain(4);
    nccl->set_thread_id(10);
    Kernel* k = c.add_kernels();  // compute: the first 3/4 of the step
    k->set_start(static_cast<int64_t>(t));
    k->set_duration(static_cast<int64_t>(len * 3 / 4));
    k->set_shape(1);
    k->set_stream(7);
    k->set_correlation(correlation++);
    Kernel* ar = c.add_kernels();  // all-reduce: from 1/2 to the end; ends with the step
    ar->set_start(static_cast<int64_t>(t + len / 2));
    ar->set_duration(static_cast<int64_t>(len / 2));
    ar->set_shape(2);
    ar->set_stream(8);
    ar->set_correlation(correlation++);
    t += len;
  }
  NvtxRange* epoch = c.add_nvtx_ranges();  // encloses every step on another thread: not a step
  epoch->set_start(static_cast<int64_t>(epoch_start));
  epoch->set_duration(static_cast<int64_t>(t - epoch_start));
  epoch->set_name(6);
  epoch->set_thread_id(11);
  c.mutable_stats()->set_nvtx_open_ranges(static_cast<uint64_t>(open_ranges));
  Footer* f = c.mutable_footer();
  f->set_clean_end(true);
  f->set_end_reason(rank == 1 ? "signal SIGTERM" : "exit");
  w.Add(c);
  return w.bytes();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A 2-rank run on disk: root (rank 1 came first) + member + manifest, as the injector leaves it.
std::string MakeRun(const std::string& dir, int64_t rank1_skew = 0) {
  const std::string root = dir + "/ddp.kptrace";
  const std::string member = dir + "/ddp.r0.node1.500.kptrace";
  WriteBytes(root, RankTrace(1, 501, "node2", 4, {10, 12, 10, 10}, rank1_skew, 2));
  WriteBytes(member, RankTrace(0, 500, "node1", 4, {10, 10, 11, 10}, 0, 0));
  std::string error;
  ManifestEntry e;
  e.run_id = "kprun-test";
  e.root = true;
  e.file = "ddp.kptrace";
  e.host = "node2";
  e.pid = 501;
  e.rank = 1;
  EXPECT_TRUE(IsOk(WriteManifestEntry(ManifestDirFor(root), e)));
  e.root = false;
  e.file = "ddp.r0.node1.500.kptrace";
  e.host = "node1";
  e.pid = 500;
  e.rank = 0;
  EXPECT_TRUE(IsOk(WriteManifestEntry(ManifestDirFor(root), e)));
  return root;
}

TEST(RunInputs, AnyFileOfARunBringsTheWholeRunInRankOrder) {
  const std::string dir = TempDir();
  const std::string root = MakeRun(dir);
  const std::string member = dir + "/ddp.r0.node1.500.kptrace";
  for (const std::string& arg : {root, member, ManifestDirFor(root), ManifestDirFor(root) + "/"}) {
    TraceInputs in = ExpandTraceInputs({arg});
    ASSERT_EQ(in.files.size(), 2u) << arg;
    EXPECT_EQ(in.files[0], member) << arg;  // rank 0 first
    EXPECT_EQ(in.files[1], root) << arg;
    ASSERT_FALSE(in.notes.empty());
    EXPECT_EQ(in.notes[0], "run " + root + ": 2 processes (ranks 0-1)");
  }
  // Named twice (a shell glob): read once.
  EXPECT_EQ(ExpandTraceInputs({root, member}).files.size(), 2u);
  // --file-only: as given.
  TraceInputs one = ExpandTraceInputs({root}, true);
  ASSERT_EQ(one.files.size(), 1u);
  EXPECT_EQ(one.files[0], root);
  // A directory: its traces.
  EXPECT_EQ(ExpandTraceInputs({dir}).files.size(), 2u);
  // A member whose file is gone is named, the rest still read.
  ASSERT_EQ(unlink(member.c_str()), 0);
  TraceInputs gone = ExpandTraceInputs({root});
  EXPECT_EQ(gone.files.size(), 1u);
  bool named = false;
  for (const std::string& n : gone.notes) named |= n.find(member + " (pid 500, rank 0)") == 0;
  EXPECT_TRUE(named);
}

TEST(CrossRankSummary, StepsSideBySideStragglerCollectivesAndOverlap) {
  const std::string dir = TempDir();
  const std::string root = MakeRun(dir);
  TraceInputs in = ExpandTraceInputs({root});
  TraceSummary s = SummarizeTraces(in.files);
  ASSERT_EQ(s.processes.size(), 2u);
  EXPECT_EQ(s.step_range, "train_step");  // not NCCL's range, not the epoch on another thread
  EXPECT_EQ(s.processes[0].rank, 0);
  EXPECT_EQ(s.processes[1].rank, 1);
  EXPECT_EQ(s.processes[0].step_ns, (std::vector<double>{10e6, 10e6, 11e6, 10e6}));
  EXPECT_EQ(s.processes[1].step_ns, (std::vector<double>{10e6, 12e6, 10e6, 10e6}));
  // Per step: compute 3/4, all-reduce 1/2 of the step; they overlap for 1/4.
  const ProcessSummary& p0 = s.processes[0];
  EXPECT_DOUBLE_EQ(p0.collective_ns / p0.kernel_ns, 0.4);  // 2/4 of (3/4 + 2/4)
  EXPECT_DOUBLE_EQ(p0.overlap_ns / p0.collective_busy_ns, 0.5);
  EXPECT_EQ(p0.end_reason, "exit");
  EXPECT_EQ(s.processes[1].end_reason, "signal SIGTERM");
  // Open ranges are not a loss.
  EXPECT_TRUE(s.losses.empty());
  ASSERT_EQ(s.trace_notes.size(), 1u);
  EXPECT_NE(s.trace_notes[0].find("2 NVTX ranges were still open at the end"), std::string::npos);
  const std::string text = FormatSummaryText(s, 20);
  EXPECT_EQ(text.find("DATA LOSS"), std::string::npos);
  EXPECT_NE(text.find("Steps across processes: outermost repeated range \"train_step\""),
            std::string::npos);
  EXPECT_NE(text.find("rank 1     +2.000 ms (+20.0%)"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0     +1.000 ms (+10.0%)"), std::string::npos) << text;
  EXPECT_NE(text.find("40.0%"), std::string::npos);
  EXPECT_NE(text.find("50.0%"), std::string::npos);
  // kptrace info: the same counter is listed, not as a loss.
  TraceInfo root_info = CollectTraceInfo(root);
  const std::string info_text = FormatTraceInfoText(root_info);
  EXPECT_NE(info_text.find("nvtx_open_ranges             2  (not a loss)\n"), std::string::npos)
      << info_text;
  EXPECT_EQ(info_text.find("loss or anomaly"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(FormatSummaryJson(s));
  EXPECT_EQ(j["processes"].size(), 2u);
  EXPECT_EQ(j["step_range"], "train_step");
  EXPECT_EQ(j["processes"][1]["step_ns"][1], 12e6);
}

TEST(ClockAlignment, CollectiveEndsUndoAnArtificialOffset) {
  const std::string dir = TempDir();
  const int64_t skew = 3 * static_cast<int64_t>(kMs) + 250000;  // rank 1's host is 3.25 ms ahead
  const std::string root = MakeRun(dir, skew);
  TraceInputs in = ExpandTraceInputs({root});
  ClockAlignment a = AlignOnCollectives(in.files);
  ASSERT_EQ(a.offset_ns.size(), 2u);
  EXPECT_EQ(a.offset_ns[0], 0);
  // All-reduce ends: rank 0 steps 10,10,11,10 ms; rank 1 steps 10,12,10,10 ms: the k-th ends
  // differ by 0, 2, 1, 1 ms before the skew. The median (lower middle, 1 ms) is the offset left
  // by the different step lengths; the skew itself is undone exactly.
  EXPECT_EQ(a.offset_ns[1], -skew + static_cast<int64_t>(kMs) * -1 + 0);
  EXPECT_EQ(a.matched[1], 4u);
  SummaryOptions aligned;
  aligned.align_collectives = true;
  TraceSummary s = SummarizeTraces(in.files, aligned);
  EXPECT_EQ(s.processes[1].clock_offset_ns, a.offset_ns[1]);
  EXPECT_EQ(s.alignment.size(), 2u);
  // Shifting a chunk moves every time stamp by the offset and leaves durations alone.
  Chunk c;
  Kernel* k = c.add_kernels();
  k->set_start(1000);
  k->set_duration(50);
  NvtxMark* m = c.add_nvtx_marks();
  m->set_time(2000);
  c.set_time_base_ns(900);
  c.mutable_header()->set_start_time_trace_ns(800);
  ShiftChunkTimes(&c, -100);
  EXPECT_EQ(c.kernels(0).start(), 900);
  EXPECT_EQ(c.kernels(0).duration(), 50);
  EXPECT_EQ(c.nvtx_marks(0).time(), 1900);
  EXPECT_EQ(c.time_base_ns(), 800u);
  EXPECT_EQ(c.header().start_time_trace_ns(), 700u);
}

TEST(ClockAlignment, EqualStepsOnTwoHostsGiveExactlyTheArtificialOffset) {
  const std::string dir = TempDir();
  const int64_t skew = -7 * static_cast<int64_t>(kMs) - 123;
  WriteBytes(dir + "/a.kptrace", RankTrace(0, 1, "host-a", 5, {10, 9, 12, 10, 10}, 0));
  WriteBytes(dir + "/b.kptrace", RankTrace(1, 2, "host-b", 5, {10, 9, 12, 10, 10}, skew));
  ClockAlignment a = AlignOnCollectives({dir + "/a.kptrace", dir + "/b.kptrace"});
  EXPECT_EQ(a.offset_ns[1], -skew);
  EXPECT_EQ(a.spread_ns[1], 0);
  EXPECT_EQ(a.matched[1], 5u);
}

TEST(ClockAlignment, SameHostNeedsNoOffset) {
  const std::string dir = TempDir();
  WriteBytes(dir + "/a.kptrace", RankTrace(0, 1, "same", 3, {10, 10, 10}, 0));
  WriteBytes(dir + "/b.kptrace", RankTrace(1, 2, "same", 3, {10, 10, 10}, 5 * kMs));
  ClockAlignment a = AlignOnCollectives({dir + "/a.kptrace", dir + "/b.kptrace"});
  EXPECT_EQ(a.offset_ns[1], 0);
  EXPECT_NE(a.lines[1].find("same host as the reference"), std::string::npos);
}

// ---- kptrace run: a fixed -o left by an earlier run ----

TEST(LauncherOutput, ForceRemovesTheEarlierRunButNeverALiveOne) {
  const std::string dir = TempDir();
  const std::string root = MakeRun(dir);
  EXPECT_TRUE(IsFixedOutputPath(root));
  EXPECT_FALSE(IsFixedOutputPath(dir + "/t-%r.kptrace"));
  EXPECT_TRUE(IsFixedOutputPath(dir + "/100%%.kptrace"));
  const int fd = open((dir + "/ddp.r0.node1.500.kptrace").c_str(), O_RDONLY);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);  // a live writer
  const Status held = RemoveEarlierRun(root);
  EXPECT_FALSE(held.ok());
  EXPECT_EQ(held.message(), dir +
                                "/ddp.r0.node1.500.kptrace is being written by a running process; "
                                "wait for it to end or choose another -o");
  EXPECT_TRUE(Exists(root));
  close(fd);
  const Status removed = RemoveEarlierRun(root);
  EXPECT_TRUE(removed.ok()) << removed.message();
  EXPECT_FALSE(Exists(root));
  EXPECT_FALSE(Exists(dir + "/ddp.r0.node1.500.kptrace"));
  EXPECT_FALSE(Exists(ManifestDirFor(root)));
}

}  // namespace
}  // namespace kp
