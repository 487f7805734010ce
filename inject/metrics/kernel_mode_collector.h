// kernel_mode_collector.h: KP_METRICS_MODE=kernel. Each measured kernel is one range, matched to
// its launch (correlation id, symbol name). Two ways, chosen by KP_METRICS_CACHE:
//
//  - kp's own replay (KP_METRICS_CACHE=pass or range, the default): user ranges and user replay.
//    The profiler runs with auto ranges (CUPTI brackets each kernel itself, so time and
//    throughput cover the kernel alone) and user replay (kp decides what runs between passes).
//    At the entry of the kernel's driver launch kp waits for the context (cuCtxSynchronize),
//    saves its device memory when the set needs several passes (CUPTI checkpoint), empties the
//    L2 (ProfilerSession::FlushL2: the driver's evict, as ncu's default --cache-control all
//    leaves it) and starts the profiler; the application's launch is the
//    first pass. At the launch's exit kp stops the profiler; for each further pass it restores
//    the memory, flushes the L2 again, starts, launches the kernel again itself (same function,
//    grid, arguments and stream; kernel_launch.h) and stops, then decodes the one range. The
//    application's launch keeps its timestamps; CUPTI gives the relaunches the application
//    call's correlation id, and kp marks every record of that id after the first one
//    profiler-internal.
//    With kernel records on (KernelRecords), CUPTI instruments every kernel to time it, and
//    the profiler would count those instructions (+8 per warp on an H200):
//     - A one-pass set (with gpu__time_duration.sum, which kp adds, hidden, when the set stays
//       one pass with it) is measured on the application's launch itself, with kernel records
//       switched off at its entry and back on at its exit; no memory is saved. CUPTI makes no
//       record of that launch, so kp posts one (RECORD_FLAG_PROFILER_TIMED): the launch's
//       arguments and the driver's function attributes (kernel_facts.h), start when the launch
//       was submitted, duration the measured gpu__time_duration. This needs no other launch
//       in flight at the entry; else (and for multi-pass sets) the way below.
//     - Otherwise the application's launch is not a pass: kp saves the memory at its entry,
//       lets it run unmeasured with its record, and at its exit synchronizes, switches kernel
//       records off, measures every pass with its own relaunches (restore, flush, start,
//       relaunch, stop) and switches them back on; one more kernel run per measured launch.
//       A memory save changes what the L2 counts of the kernel afterwards (2-4 % fewer
//       lts__t_bytes for kernels streaming through the L2 on the H200, as ncu's own kernel
//       replay of a multi-pass set), which the first way avoids.
//    A kernel launch by another thread while records are off switches them back on at its
//    entry (its record is kept) and drops the measurement (counted); a launch measured the
//    first way keeps kp's record then, and a record CUPTI may also have made of it is marked
//    profiler-internal.
//    The context's mutex is held from the entry to the exit, so measured
//    kernels are serialized like under ncu. Another thread's kernel launch on the context during
//    a measurement is not made to wait and is not measured; the measurement it may have entered
//    is dropped (also when the decode finds more than one range); both are counted. A capture
//    begin and a flush do wait for the measured kernel (the final flush at most
//    kFinalFlushWait). A launch whose callback
//    carries no parameters is counted and not measured.
//  - CUPTI's kernel replay (KP_METRICS_CACHE=none): auto ranges, started at the first launch;
//    every kKernelsPerBatch launches the batch is stopped, decoded and posted. CUPTI replays
//    each kernel internally with no cache control between kernels or passes; replayed kernels
//    have no timestamps.
//
// Graph launches are not measured per kernel.
//
// Stream capture (capture_gate.h): launches during a capture are not measured (counted, a
// notice at exit); with CUPTI's replay, at a capture begin the batch is stopped (a started
// profiler would invalidate the capture) and decoded at the next launch after the capture.
//
// Targeting (kernel_selector.h: KP_METRICS_KERNELS, KP_METRICS_LAUNCH_*,
// KP_METRICS_NVTX_INCLUDE): a launch not selected makes no profiler call and sets up no
// session; with CUPTI's replay, if its context's profiler is running (the previous launch was
// selected), the profiler is stopped first (as before a capture), so the launch runs
// unserialized and unreplayed. Once a global launch count is reached every context's profiler
// is flushed and disabled at the next launch, and later launches cost one atomic load.
//
// Locking: see profiler_collector.h; a context's batch is under its Context::mu. The selector
// and the NVTX stacks have mutexes of their own, never held across a call out of this class.
// records_mu_ serializes the kernel-record switch: it is held across the switch's CUPTI call
// (cuptiActivityEnable/Disable), taken after Context::mu in a measurement and alone in a launch's
// entry callback (InterruptRecords). internal_mu_ (the correlation ids whose CUPTI records are
// kp's) and own_names_mu_ (the names of kp's records) are leaves: nothing is called under them.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "inject/metrics/kernel_selector.h"
#include "inject/metrics/nvtx_range_events.h"
#include "inject/metrics/profiler_collector.h"
#include "inject/metrics/range_selector.h"

namespace kp {

class KernelModeCollector final : public ProfilerCollector {
 public:
  static constexpr size_t kKernelsPerBatch = 16;

  KernelModeCollector(const Config& config, std::vector<std::string> metrics, EncoderPost post,
                      std::unique_ptr<ProfilerBackend> backend);

  bool wants_nvtx_callbacks() const override { return selector_.wants_nvtx(); }
  bool wants_launch_callbacks() const override { return true; }
  void OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) override;
  void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                const CUpti_CallbackData* data) override;
  bool IsProfilerInternalLaunch(uint32_t correlation) const override;
  void SetKernelRecords(KernelRecords* records) override { records_ = records; }
  void SetKernelRecordSink(KernelRecordSink sink) override { record_sink_ = std::move(sink); }

 private:
  struct KernelContext;

  std::unique_ptr<Context> NewContext() override;
  size_t MaxRanges(const SessionSetup&) const override {
    return own_replay_ ? 2 : 2 * kKernelsPerBatch;
  }
  RangeReplay replay() const override {
    return own_replay_ ? RangeReplay::kAutoRangesUserReplay : RangeReplay::kAutoRangesKernelReplay;
  }
  Status AfterEnable(Context*) override { return Status(); }  // started at a launch
  // kp's own replay with kernel records: plans the set with gpu__time_duration.sum added
  // (hidden) when it stays one pass, for the records of launches measured on their own run.
  StatusOr<SessionSetup> PlanSession(Context* p) override;
  // Posts the kernel record of a launch measured on its own run with kernel records off:
  // `facts` from DescribeLaunch, `start` when it was submitted, `duration` its measured
  // gpu__time_duration in ns (0: unknown, the record is then untimed). p->mu not held.
  void PostOwnRecord(const KernelContext* p, const KernelFacts& facts, uint64_t start,
                     double duration, uint32_t correlation);
  Status BeforeCapture(Context* p, std::vector<Result>* results) override;
  Status FlushLocked(Context* p, std::vector<Result>* results) override;
  void FinalNotices(Context* p, std::vector<std::string>* warnings) override;
  void ShutdownNotices() override;

  // A measured launch's result before its values (p->mu held: numbers the launch).
  Result LaunchResult(KernelContext* p, const std::string& name, uint32_t correlation);
  // Stops the batch if started; decodes a stopped batch.
  Status Collect(KernelContext* p, std::vector<Result>* results);
  Status StopSession(KernelContext* p);  // p->mu held, session started
  // A launch not selected: stops `ctx`'s running profiler, or, once the selection is done,
  // flushes and disables every context's profiler (once).
  void NotSelected(CUcontext ctx);
  // Whether the selection takes this launch of `symbol` (counting it); whether a
  // KP_METRICS_NVTX_INCLUDE range is open on the calling thread is looked up only when one is set.
  bool Selects(const char* symbol);

  // kp's own replay (see the top of this file).
  void OnLaunchOwnReplay(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const CUpti_CallbackData* data);
  // Whether launches may be measured now; counts a kernel launch skipped during a capture.
  bool Admissible(bool count_capture_skip);
  // A selected driver launch's entry: the first pass begins (p->mu is locked here and stays
  // locked until FinishOwnReplay). False when nothing was begun (p->mu then unlocked).
  bool BeginOwnReplay(KernelContext* p, const std::string& name, uint32_t correlation);
  // The context's state if it has a profiler (never sets one up).
  KernelContext* FindContext(CUcontext ctx);
  // Sync, L2 flush, Start: one pass up to the launch (p->mu held).
  Status BeginPass(KernelContext* p);
  // The launch's exit: the remaining passes, the decode, the result (unlocks p->mu).
  void FinishOwnReplay(const CUpti_CallbackData* data);
  // The measurement on `p` is over: on a failure the session is closed; the counts of kernels
  // being measured go down and p->mu (held by `lock`) is released.
  void EndMeasurement(KernelContext* p, std::unique_lock<std::mutex> lock, const Status& status);
  // Kernel records off for a measurement's passes (the first measurement that suspends them
  // switches them off; the last to resume switches them back on). False, and nothing held,
  // when another launch is between its entry and exit or the switch failed. *epoch is what
  // ResumeRecords and RecordsInterrupted compare against.
  // `own_launch`: the caller is inside a launch's entry callback, which counts itself in flight.
  bool SuspendRecords(uint64_t* epoch, bool own_launch);
  void ResumeRecords(uint64_t epoch);
  // Another thread's launch while records are off: they go back on at once (its record is
  // kept), and every measurement that had them off is spoilt (RecordsInterrupted).
  void InterruptRecords();
  bool RecordsInterrupted(uint64_t epoch) const {
    return records_epoch_.load(std::memory_order_acquire) != epoch;
  }
  // SuspendRecords for one measurement's passes, ResumeRecords when it goes (exceptions too).
  class RecordsOff {
   public:
    explicit RecordsOff(KernelModeCollector* c, bool own_launch = false);
    ~RecordsOff();
    RecordsOff(const RecordsOff&) = delete;
    RecordsOff& operator=(const RecordsOff&) = delete;
    bool held() const { return held_; }
    // Records came back on (or were never off): the passes would carry CUPTI's instructions.
    bool interrupted() const { return !held_ || c_->RecordsInterrupted(epoch_); }

   private:
    KernelModeCollector* c_;
    uint64_t epoch_ = 0;
    bool held_ = false;
  };
  // After a failed pass that had restored the memory: runs the kernel once more on it, so the
  // program goes on from the kernel's results (an error line and notice if that fails too).
  void RerunAfterRestore(KernelContext* p, const KernelLaunch& launch);
  // The error line and notice when the program's memory may lack a measured kernel's results.
  void MemoryNotice(const char* what, const Status& why);

  const bool own_replay_;             // KP_METRICS_CACHE is not none
  KernelRecords* records_ = nullptr;  // set before any callback; null: no kernel records
  std::mutex records_mu_;  // serializes the writes of records_suspended_ and the switch's calls
  // Measurements with kernel records suspended (written under records_mu_; read lock-free on
  // the launch path).
  std::atomic<int> records_suspended_{0};
  std::atomic<uint64_t> records_epoch_{0};  // bumped by every InterruptRecords
  // Driver kernel/graph launch calls between their entry and exit (a line of its own: every
  // thread's launches touch it).
  alignas(64) std::atomic<int> launches_in_flight_{0};
  std::atomic<uint64_t> unreplayable_{0};  // selected launches of a form kp cannot relaunch
  std::atomic<uint64_t> own_records_{0};   // kernel records kp made (PostOwnRecord)
  KernelRecordSink record_sink_;           // set before any callback; empty: the encoder
  // Their kernel names, one string per name for the process's life: the encoder interns names
  // by pointer first (as CUPTI keeps its names' pointers), so a pointer is never reused.
  std::mutex own_names_mu_;
  std::map<std::string, std::shared_ptr<const std::string>> own_names_;
  // Correlation ids of measured launches whose records follow (IsProfilerInternalLaunch): the
  // first record is the application's, the next `relaunches` are kp's.
  struct Relaunched {
    bool first_seen = false;
    uint32_t relaunches = 0;
  };
  mutable std::mutex internal_mu_;  // guards internal_launches_
  mutable std::unordered_map<uint32_t, Relaunched> internal_launches_;
  std::atomic<bool> any_internal_launch_{false};
  // Adds (or replaces) `correlation`'s entry, emptying the map first when it is full.
  void MarkInternalLaunch(uint32_t correlation, Relaunched r);
  // Kernels between their launch's entry and exit, all contexts (a hint: each context counts
  // its own, with the launches other threads made on it meanwhile, which may fall inside the
  // measured kernel's passes: with auto ranges every kernel launched while the profiler runs is
  // a range, so such a measurement is dropped).
  std::atomic<int> measuring_{0};
  std::atomic<uint64_t> concurrent_skips_{0};  // selected launches made during another's
  static constexpr size_t kMaxRelaunchedIds = 65536;
  KernelSelector selector_;
  RangeSelector nvtx_include_;
  NvtxRangeEvents nvtx_;
  std::atomic<int> sessions_started_{0};  // a hint: profilers started and not yet stopped
  std::atomic<bool> torn_down_{false};
  // One thread's open push/pop ranges: per domain, whether each matches
  // KP_METRICS_NVTX_INCLUDE; and how many open ones match.
  struct ThreadRanges {
    std::unordered_map<const void*, std::vector<bool>> stacks;
    int matching_open = 0;
  };
  std::mutex nvtx_mu_;  // guards nvtx_stacks_
  std::unordered_map<uint32_t, ThreadRanges> nvtx_stacks_;
};

}  // namespace kp
