#include "inject/metrics/kernel_mode_collector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "inject/log/log.h"
#include "inject/metrics/launch_callbacks.h"
#include "inject/trace/records.h"
#include "inject/trace/trace_encoder.h"

namespace kp {
namespace {

thread_local int t_runtime_launch_depth = 0;
// With targeting, a runtime launch without a symbol name is decided at the driver launch
// inside it (which has the name), still before the kernel runs.
thread_local bool t_deferred_to_driver = false;

// kp's own replay, per thread: the outermost runtime launch's decision, and the driver launch
// being measured between its entry and exit callbacks.
struct OwnReplayThread {
  int runtime_depth = 0;
  bool runtime_selected = false;  // measure the driver launch inside it
  bool runtime_deferred = false;  // no symbol name: decide at the driver launch inside it
  std::string runtime_name;
  uint32_t runtime_correlation = 0;
  void* measuring = nullptr;            // KernelContext*, its mu locked by this thread
  CUpti_CallbackId measuring_cbid = 0;  // the driver launch whose exit ends the measurement
  KernelLaunch launch;
};
thread_local OwnReplayThread t_own;

}  // namespace

struct KernelModeCollector::KernelContext : Context {
  std::vector<Result> launches;    // since the last decode, in launch order
  bool stopped_undecoded = false;  // stopped before a capture; decoded at the next launch
  uint64_t launch_index = 0;
  uint64_t graph_launches = 0;
  uint64_t index_mismatches = 0;
  uint64_t range_number_mismatches = 0;  // CUPTI's range number != launch number
  Result measuring_result;       // kp's own replay: the kernel between its launch's entry and exit
  uint64_t failed_launches = 0;  // kp's own replay: the application's launch failed
  // kp's own replay: a kernel is being measured on this context (between its launch's entry
  // and exit), and the kernel or graph launches other threads made on it meanwhile.
  std::atomic<int> measuring{0};
  std::atomic<uint64_t> interlopers{0};
  uint64_t interloper_base = 0;         // interlopers at the entry
  uint64_t disturbed = 0;               // dropped: another thread launched meanwhile
  uint64_t interrupted = 0;             // dropped: kernel records on during the passes
  uint64_t instrumented_fallbacks = 0;  // one-pass, records on, save failed: app launch measured
  std::string fallback_reason;          // the save's failure
  bool save_failed = false;             // a memory save failed on this context
  // The application's launch runs unmeasured with its record; kp's relaunches are every pass.
  bool record_first = false;
  // gpu__time_duration.sum's index in the values (-1: not in the set), for kp's own records.
  int duration_index = -1;
  // The measurement in progress runs on the application's launch with kernel records off for
  // it, from the launch's entry to its exit (own_launch_off), submitted at `submitted`.
  bool own_launch = false;
  std::optional<RecordsOff> own_launch_off;
  uint64_t submitted = 0;
  // The L2 flush is set up (the driver's client opened or, for the sweep, its buffer allocated)
  // before the first memory save.
  bool flush_ready = false;
};

KernelModeCollector::KernelModeCollector(const Config& config, std::vector<std::string> metrics,
                                         EncoderPost post, std::unique_ptr<ProfilerBackend> backend)
    : ProfilerCollector(config, std::move(metrics), std::move(post), std::move(backend)),
      own_replay_(config.metrics_cache != MetricsCache::kNone),
      selector_(config),
      nvtx_include_(config.metrics_nvtx_include) {}

std::unique_ptr<ProfilerCollector::Context> KernelModeCollector::NewContext() {
  return std::make_unique<KernelContext>();
}

ProfilerCollector::Result KernelModeCollector::LaunchResult(KernelContext* p,
                                                            const std::string& name,
                                                            uint32_t correlation) {
  Result r;
  r.name = name;
  r.occurrence = p->launch_index++;
  r.occurrences_used = 1;
  r.start = r.end = backend_->Now();
  r.thread_id = ThreadId();
  r.device = p->setup.device;
  r.context = p->setup.context_id;
  r.correlation = correlation;
  return r;
}

Status KernelModeCollector::StopSession(KernelContext* p) {
  sessions_started_.fetch_sub(1, std::memory_order_relaxed);
  if (StatusOr<bool> stopped = p->session->Stop(); !stopped.ok()) return stopped.status();
  p->stopped_undecoded = true;
  return Status();
}

Status KernelModeCollector::Collect(KernelContext* p, std::vector<Result>* out) {
  if (p->session->started())
    if (Status stopped = StopSession(p); !stopped.ok()) return stopped;
  if (!p->stopped_undecoded) return Status();
  p->stopped_undecoded = false;
  StatusOr<std::vector<DecodedRange>> decoded = p->session->Decode(
      [p](size_t i, const std::string& name) {
        if (i >= p->launches.size()) return false;
        // CUPTI names auto ranges by their number since the profiler was enabled ("0",
        // "1", ...; seen on the H200), and kp numbers the launches it records the same
        // way: a difference means a launch CUPTI measured and kp did not see, or the
        // reverse, and the values from there on may belong to other kernels.
        char* end = nullptr;
        unsigned long long n = std::strtoull(name.c_str(), &end, 10);
        if (end != name.c_str() && *end == '\0' && n != p->launches[i].occurrence)
          ++p->range_number_mismatches;
        return true;
      },
      &p->ranges_dropped);
  if (!decoded.ok()) return decoded.status();
  size_t before = out->size();
  for (DecodedRange& d : decoded.value()) {
    Result r = p->launches[d.index];
    r.values = std::move(d.values);
    out->push_back(std::move(r));
  }
  // Auto ranges are numbered in launch order; a count that differs means launches we did not
  // see (or a range CUPTI dropped), so the mapping of the tail is uncertain.
  if (out->size() - before + p->ranges_dropped != p->launches.size()) ++p->index_mismatches;
  p->launches.clear();
  return Status();
}

Status KernelModeCollector::BeforeCapture(Context* c, std::vector<Result>*) {
  auto* p = static_cast<KernelContext*>(c);
  if (!p->session->started()) return Status();
  return StopSession(p);
}

Status KernelModeCollector::FlushLocked(Context* c, std::vector<Result>* results) {
  return Collect(static_cast<KernelContext*>(c), results);
}

void KernelModeCollector::OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                   const CUpti_CallbackData* data) {
  if (!data) return;
  if (own_replay_) {
    OnLaunchOwnReplay(domain, cbid, data);
    return;
  }
  bool kernel = IsKernelLaunch(domain, cbid);
  bool graph = !kernel && IsGraphLaunch(domain, cbid);
  if (!kernel && !graph) return;
  // A runtime launch calls a driver launch inside it: count the outermost call only.
  bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (data->callbackSite == CUPTI_API_EXIT) {
    if (runtime && t_runtime_launch_depth > 0) --t_runtime_launch_depth;
    if (runtime && t_runtime_launch_depth == 0) t_deferred_to_driver = false;
    return;
  }
  bool nested = !runtime && t_runtime_launch_depth > 0;
  if (runtime) ++t_runtime_launch_depth;
  if (off_.load(std::memory_order_relaxed)) return;
  // The selection is complete and every profiler disabled: the rest of the run is untouched.
  if (torn_down_.load(std::memory_order_acquire)) return;
  // While a CUDA graph is being captured the profiler stays stopped (capture_gate.h):
  // launches then (captured ones do not even run) are not measured.
  if (gate_.active()) {
    if (kernel && !nested) skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (selector_.active()) {
    const char* symbol = data->symbolName;
    if (kernel && runtime && (!symbol || !*symbol)) {
      t_deferred_to_driver = true;
      return;
    }
    if (nested) {
      if (!kernel || !t_deferred_to_driver) return;
      t_deferred_to_driver = false;
      nested = false;  // this driver launch is the one decided on
    }
    // A graph's kernels cannot be measured one by one: like any launch not selected.
    if (graph || !Selects(symbol)) {
      NotSelected(data->context);
      return;
    }
  }
  auto* p = static_cast<KernelContext*>(ProfilerFor(data->context));
  if (!p) return;
  std::vector<Result> results;
  Status status;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed || gate_.active()) return;
    if (nested) {
      // The runtime's symbolName can be empty for some launch forms; the driver's has it.
      if (kernel && !p->launches.empty() && p->launches.back().name.empty() && data->symbolName)
        p->launches.back().name = data->symbolName;
      return;
    }
    if (graph) {
      // Per-kernel ranges inside a graph cannot be matched to launches: close the batch and
      // leave the graph unmeasured.
      ++p->graph_launches;
      status = Collect(p, &results);
    } else {
      if (p->launches.size() >= kKernelsPerBatch || p->stopped_undecoded)
        status = Collect(p, &results);
      if (status.ok() && !p->session->started()) {
        status = p->session->Start();
        if (status.ok()) sessions_started_.fetch_add(1, std::memory_order_relaxed);
      }
      if (status.ok())
        p->launches.push_back(
            LaunchResult(p, data->symbolName ? data->symbolName : "", data->correlationId));
    }
    if (!status.ok()) {
      p->closed = true;
      p->session->Disable();
    }
  }
  PostResults(p, std::move(results));
  if (!status.ok()) Fail(status);
}

// ---- kp's own replay ----

bool KernelModeCollector::Admissible(bool count_capture_skip) {
  if (off_.load(std::memory_order_relaxed)) return false;
  if (torn_down_.load(std::memory_order_acquire)) return false;
  if (gate_.active()) {
    if (count_capture_skip) skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void KernelModeCollector::OnLaunchOwnReplay(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                            const CUpti_CallbackData* data) {
  const bool kernel = IsKernelLaunch(domain, cbid);
  const bool unmeasured = IsUnmeasuredKernelLaunch(domain, cbid);
  if (!kernel && !unmeasured && !IsGraphLaunch(domain, cbid)) return;
  OwnReplayThread& t = t_own;
  const bool exit = data->callbackSite == CUPTI_API_EXIT;
  if (records_ != nullptr && domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    // Kernel records must be on when this launch submits its kernel: it counts as in flight
    // from its entry to its exit (no measurement switches records off meanwhile), and at its
    // entry records go back on if a measurement holds them off. Sequentially consistent, with
    // SuspendRecords's store and load in the opposite order: one of the two sees the other.
    if (exit) {
      launches_in_flight_.fetch_sub(1);
    } else {
      launches_in_flight_.fetch_add(1);
      if (records_suspended_.load() > 0) InterruptRecords();
    }
  }
  if (unmeasured) return;
  if (!exit && domain == CUPTI_CB_DOMAIN_DRIVER_API && t.measuring == nullptr &&
      measuring_.load(std::memory_order_acquire) > 0) {
    if (KernelContext* q = FindContext(data->context);
        q != nullptr && q->measuring.load(std::memory_order_acquire) > 0)
      q->interlopers.fetch_add(1, std::memory_order_acq_rel);
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (exit) {
      if (t.runtime_depth > 0 && --t.runtime_depth == 0)
        t.runtime_selected = t.runtime_deferred = false;
      return;
    }
    if (t.runtime_depth++ > 0 || !kernel) return;  // graphs are not measured per kernel
    if (!Admissible(/*count_capture_skip=*/true)) return;
    const char* symbol = data->symbolName;
    t.runtime_correlation = data->correlationId;  // the kernel record carries this id
    if (selector_.active()) {
      if (!symbol || !*symbol) {
        t.runtime_deferred = true;
        return;
      }
      if (!Selects(symbol)) {
        NotSelected(data->context);
        return;
      }
    }
    t.runtime_selected = true;
    t.runtime_name = symbol ? symbol : "";
    return;
  }
  // Driver domain.
  if (exit) {
    if (kernel && t.measuring != nullptr && cbid == t.measuring_cbid) FinishOwnReplay(data);
    return;
  }
  if (!kernel || t.measuring != nullptr) return;
  std::string name;
  uint32_t correlation = 0;
  if (t.runtime_depth > 0) {
    // The driver launch inside a runtime launch: the runtime call decided (or deferred).
    if (t.runtime_deferred) {
      t.runtime_deferred = false;
      if (!Admissible(/*count_capture_skip=*/false)) return;
      if (!Selects(data->symbolName)) {
        NotSelected(data->context);
        return;
      }
      name = data->symbolName ? data->symbolName : "";
    } else if (t.runtime_selected) {
      t.runtime_selected = false;
      name = !t.runtime_name.empty() || !data->symbolName ? t.runtime_name : data->symbolName;
    } else {
      return;
    }
    correlation = t.runtime_correlation;  // the kernel record carries the runtime call's id
  } else {
    if (!Admissible(/*count_capture_skip=*/true)) return;
    if (selector_.active() && !Selects(data->symbolName)) {
      NotSelected(data->context);
      return;
    }
    name = data->symbolName ? data->symbolName : "";
    correlation = data->correlationId;
  }
  KernelLaunch launch;
  if (!ReadKernelLaunch(cbid, data->functionParams, &launch)) {
    unreplayable_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto* p = static_cast<KernelContext*>(ProfilerFor(data->context));
  if (!p) return;
  if (BeginOwnReplay(p, name, correlation)) {
    t.measuring = p;
    t.measuring_cbid = cbid;
    t.launch = launch;
  }
}

KernelModeCollector::KernelContext* KernelModeCollector::FindContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = profilers_.find(ctx);
  return it == profilers_.end() ? nullptr : static_cast<KernelContext*>(it->second.get());
}

Status KernelModeCollector::BeginPass(KernelContext* p) {
  if (Status s = p->session->SynchronizeContext(); !s.ok()) return s;
  // The flush runs before the Start: with auto ranges every kernel launched while the profiler
  // runs is a range (the sweep's too).
  if (Status flushed = FlushL2(p); !flushed.ok()) return flushed;
  return p->session->Start();
}

bool KernelModeCollector::BeginOwnReplay(KernelContext* p, const std::string& name,
                                         uint32_t correlation) {
  std::unique_lock<std::mutex> lock(p->mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    if (p->measuring.load(std::memory_order_acquire) > 0) {
      // Another thread is measuring a kernel here: measuring this one would wait for it (kp
      // does not make the application wait for a measurement); it runs unmeasured, and the
      // other measurement, which it may enter, is dropped.
      p->interlopers.fetch_add(1, std::memory_order_acq_rel);
      concurrent_skips_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    lock.lock();  // a brief holder: a flush or a capture begin
  }
  if (p->closed || gate_.active()) return false;
  // Counted before anything runs, so that another thread's launch from here on is seen.
  p->measuring.fetch_add(1, std::memory_order_acq_rel);
  measuring_.fetch_add(1, std::memory_order_acq_rel);
  p->interloper_base = p->interlopers.load(std::memory_order_acquire);
  // Kernel records on: the application's launch would be instrumented, so it is not a pass.
  // (No measurement holds them off now: this launch is in flight, see OnLaunchOwnReplay.)
  p->record_first = records_ != nullptr && records_->on();
  const size_t passes = std::max<size_t>(p->setup.num_passes, 1);
  // A one-pass set whose values give the kernel's time is measured on the application's launch
  // itself, with its kernel record off (kp makes the record): no memory save, whose copies
  // change what the L2 counts afterwards. Only if no other launch is in flight now.
  p->own_launch = false;
  if (p->record_first && passes == 1 && p->duration_index >= 0) {
    try {
      p->own_launch_off.emplace(this, /*own_launch=*/true);
      if (p->own_launch_off->held()) {
        p->own_launch = true;
        p->record_first = false;
      } else {
        p->own_launch_off.reset();
      }
    } catch (...) {
      p->own_launch_off.reset();  // out of memory: the relaunch way, which may fail alike
    }
  }
  // A one-pass set can still measure the application's own launch, with CUPTI's timing
  // instructions in it, when the memory save fails (counted and said at exit, rather than
  // metrics off); after one failure the context does not try again.
  const bool may_fall_back = p->record_first && passes == 1;
  auto fall_back = [p] {
    ++p->instrumented_fallbacks;
    p->record_first = false;
  };
  if (may_fall_back && p->save_failed) fall_back();
  size_t relaunches = passes - (p->record_first ? 0 : 1);
  Status status;
  try {
    if (relaunches > 0) {
      // The memory the first pass starts from, for the others: after a synchronize (the
      // application's earlier work is in it) and after the flush is set up (the save may take
      // most of the free device memory, and the sweep's buffer would no longer fit).
      status = p->session->SynchronizeContext();
      if (status.ok() && !p->flush_ready) status = FlushL2(p);
      if (status.ok()) p->flush_ready = true;
      if (status.ok()) {
        status = p->session->SaveMemory();
        if (!status.ok()) {
          p->save_failed = true;
          p->fallback_reason = status.message();
          if (may_fall_back) {
            fall_back();
            relaunches = 0;
            status = Status();
          }
        }
      }
    }
    if (status.ok() && !p->record_first) status = BeginPass(p);
    if (status.ok()) {
      p->measuring_result = LaunchResult(p, name, correlation);
      if (relaunches > 0) {
        // With records off for them, kp's relaunches leave none, unless another thread
        // switches records back on meanwhile: FinishOwnReplay then says how many may follow.
        MarkInternalLaunch(correlation, Relaunched{false, static_cast<uint32_t>(relaunches)});
      }
      if (p->own_launch) {
        // A CUPTI record of this launch can only come if another thread switches records back
        // on before it submits; such a record is kp's (its own stands), and it may be decoded
        // before the launch's exit: marked now, unmarked at the exit when records held.
        MarkInternalLaunch(correlation, Relaunched{true, 1});
        p->submitted = backend_->Now();  // the launch submits right after
      }
    }
  } catch (...) {
    status = Status::Error("kernel replay: out of memory while beginning a measurement");
  }
  if (!status.ok()) {
    EndMeasurement(p, std::move(lock), status);
    Fail(status);
    return false;
  }
  lock.release();  // p->mu stays locked until the launch's exit (FinishOwnReplay)
  return true;
}

void KernelModeCollector::FinishOwnReplay(const CUpti_CallbackData* data) {
  OwnReplayThread& t = t_own;
  auto* p = static_cast<KernelContext*>(t.measuring);
  t.measuring = nullptr;
  // Adopts the lock BeginOwnReplay kept: released on every path, exceptions included.
  std::unique_lock<std::mutex> lock(p->mu, std::adopt_lock);
  const bool launched = data->functionReturnValue == nullptr ||
                        *static_cast<const CUresult*>(data->functionReturnValue) == CUDA_SUCCESS;
  std::vector<Result> results;
  Status status;
  const bool record_first = p->record_first;
  const size_t set_passes = std::max<size_t>(p->setup.num_passes, 1);
  size_t passes = record_first ? 0 : 1;  // the application's launch is the first, or none
  size_t relaunched = 0;
  bool interrupted = false;
  // Measured on its own launch with records off: the kernel is submitted, records go back on.
  // If another thread's launch switched them on meanwhile, the kernel may carry CUPTI's
  // instructions (the values are dropped) and have a CUPTI record too: kp's stands, and that
  // one is marked profiler-internal.
  const bool own_launch = p->own_launch;
  std::optional<KernelFacts> own_facts;
  double own_duration = 0;
  if (own_launch) {
    interrupted = p->own_launch_off->interrupted();
    p->own_launch_off.reset();
    if (!interrupted || !launched) {
      // Records were off when the kernel was submitted (or nothing was): no CUPTI record.
      std::lock_guard<std::mutex> internal(internal_mu_);
      internal_launches_.erase(p->measuring_result.correlation);
    }
  }
  bool restored_unrun = false;  // memory put back and the kernel not run on it again yet
  // Another thread launched on this context since the entry.
  auto interloped = [p] {
    return p->interlopers.load(std::memory_order_acquire) != p->interloper_base;
  };
  try {
    if (own_launch && launched) {
      own_facts = p->session->DescribeLaunch(t.launch);
      // The driver could not name it (no cuFuncGetName before CUDA 12.3): the launch's symbol.
      if (own_facts->name.empty()) own_facts->name = p->measuring_result.name;
      if (own_facts->name.empty()) own_facts->name = "<unknown>";
    }
    StatusOr<bool> all = false;
    if (!record_first) {
      all = p->session->Stop();
      if (!all.ok()) status = all.status();
    }
    std::optional<RecordsOff> records_off;
    if (status.ok() && launched && record_first && !interloped()) {
      // The application's kernel is over (its record taken) before records go off.
      status = p->session->SynchronizeContext();
      if (status.ok()) {
        records_off.emplace(this);
        interrupted = !records_off->held();
      }
    }
    while (status.ok() && launched && !interrupted && !all.value()) {
      if (passes >= set_passes) {
        status = Status::Error("kernel replay: CUPTI wanted more than the " +
                               std::to_string(set_passes) + " passes of the set");
        break;
      }
      // Another thread's kernel ran meanwhile, or records are back on: the measurement is
      // dropped, and the memory is left as the last kernel left it (not restored over the
      // other kernel's writes, as far as they were launched before this check).
      if (interloped() || (records_off && records_off->interrupted())) break;
      ++passes;
      // The pass before is over on the GPU before its memory is put back.
      status = p->session->SynchronizeContext();
      if (status.ok() && interloped()) break;
      if (status.ok()) {
        status = p->session->RestoreMemory();
        restored_unrun = status.ok();
        if (!status.ok()) MemoryNotice("could not restore a measured kernel's memory", status);
      }
      if (status.ok()) status = BeginPass(p);
      if (status.ok()) {
        ++relaunched;
        status = p->session->Relaunch(t.launch);
        if (status.ok()) restored_unrun = false;
      }
      if (status.ok()) {
        all = p->session->Stop();
        if (!all.ok()) status = all.status();
      }
    }
    // A pass failed between the restore and the relaunch: the kernel runs once more on its
    // memory, so that the program goes on from the kernel's results.
    if (restored_unrun) {
      ++relaunched;
      restored_unrun = false;
      RerunAfterRestore(p, t.launch);
    }
    if (records_off) {
      interrupted = interrupted || records_off->interrupted();
      records_off.reset();  // records back on
    }
    // The relaunches' records: with records off there were none (unless they came back on).
    const size_t recorded = record_first && !interrupted ? 0 : relaunched;
    const size_t announced = set_passes - (record_first ? 0 : 1);
    if (announced > 0 && recorded < announced) {
      // Fewer relaunch records than announced (records off, a failure, a failed launch):
      // expect only those.
      std::lock_guard<std::mutex> internal(internal_mu_);
      auto it = internal_launches_.find(p->measuring_result.correlation);
      if (it != internal_launches_.end()) {
        it->second.relaunches = static_cast<uint32_t>(recorded);
        if (recorded == 0 && it->second.first_seen) internal_launches_.erase(it);
      }
    }
    p->session->FreeMemory();
    if (status.ok() && p->session->started()) {
      StatusOr<bool> stopped = p->session->Stop();
      if (!stopped.ok()) status = stopped.status();
    }
    if (status.ok()) {
      // Decoding also re-arms the image: an unfinished cycle (a failed launch) is dropped.
      uint64_t dropped = 0;
      StatusOr<std::vector<DecodedRange>> decoded =
          p->session->Decode([](size_t, const std::string&) { return true; }, &dropped);
      p->ranges_dropped += dropped;
      if (own_launch && decoded.ok() && decoded.value().size() == 1) {
        const std::vector<double>& v = decoded.value().front().values;
        const size_t i = static_cast<size_t>(p->duration_index);
        if (i < v.size() && std::isfinite(v[i]) && v[i] > 0) own_duration = v[i];
      }
      if (!decoded.ok()) {
        status = decoded.status();
      } else if (!launched) {
        ++p->failed_launches;
      } else if (interrupted) {
        ++p->interrupted;
      } else if (decoded.value().size() > 1 || interloped()) {
        // Another kernel ran while the profiler did (another thread's launch): its range or
        // its counters are mixed into this one's.
        ++p->disturbed;
      } else if (decoded.value().empty()) {
        ++p->ranges_dropped;
      } else {
        Result r = std::move(p->measuring_result);
        r.values = std::move(decoded.value().front().values);
        results.push_back(std::move(r));
      }
    }
  } catch (...) {
    status = Status::Error("kernel replay: out of memory while measuring a kernel");
    if (restored_unrun) RerunAfterRestore(p, t.launch);
  }
  const uint64_t submitted = p->submitted;
  const uint32_t correlation = p->measuring_result.correlation;
  EndMeasurement(p, std::move(lock), status);
  if (own_facts) PostOwnRecord(p, *own_facts, submitted, own_duration, correlation);
  PostResults(p, std::move(results));
  if (!status.ok()) Fail(status);
}

void KernelModeCollector::PostOwnRecord(const KernelContext* p, const KernelFacts& facts,
                                        uint64_t start, double duration, uint32_t correlation) {
  own_records_.fetch_add(1, std::memory_order_relaxed);
  KernelRecord k;
  // Untimed without a duration (start = end = 0: the encoder flags it NO_TIMING).
  k.end = duration > 0 ? start + static_cast<uint64_t>(std::llround(duration)) : 0;
  k.start = k.end == 0 ? 0 : start;
  for (int i = 0; i < 3; ++i) {
    k.grid[i] = facts.grid[i];
    k.block[i] = facts.block[i];
    k.cluster[i] = facts.cluster[i];
  }
  k.registers_per_thread = facts.registers_per_thread;
  k.static_shared = facts.static_shared;
  k.dynamic_shared = facts.dynamic_shared;
  k.local_per_thread = facts.local_per_thread;
  k.device = p->setup.device;
  k.context = p->setup.context_id;
  k.stream = facts.stream_id;
  k.correlation = correlation;
  k.launch_type = facts.launch_type;
  k.flags = schema::RecordFlag::kProfilerTimed;
  try {
    std::shared_ptr<const std::string> name;
    {
      std::lock_guard<std::mutex> lock(own_names_mu_);
      auto& slot = own_names_[facts.name];
      if (!slot) slot = std::make_shared<const std::string>(facts.name);
      name = slot;
    }
    k.name = name->c_str();  // kept alive by the task's copy of `name`
    post_([k, name, sink = record_sink_](TraceEncoder& enc) {
      if (sink)
        sink(enc, k);
      else
        enc.AddKernel(k);
    });
  } catch (...) {
    // out of memory: the record is lost (counted as made)
  }
}

void KernelModeCollector::RerunAfterRestore(KernelContext* p, const KernelLaunch& launch) {
  Status rerun;
  try {
    rerun = p->session->Relaunch(launch);
  } catch (...) {
    rerun = Status::Error("out of memory");
  }
  if (!rerun.ok())
    MemoryNotice("a measured kernel could not run again after kp restored its memory", rerun);
}

void KernelModeCollector::MemoryNotice(const char* what, const Status& why) {
  const std::string msg = std::string(what) + " (" + why.message() +
                          "): the program's memory may lack that kernel's results";
  Log(LogSeverity::kError, "metrics: %s", msg.c_str());
  Notice(kNoticeError, msg);
}

bool KernelModeCollector::SuspendRecords(uint64_t* epoch, bool own_launch) {
  std::lock_guard<std::mutex> lock(records_mu_);
  const int holders = records_suspended_.load() + 1;
  // Seen by every launch entering from now on; a launch already between its entry and its
  // exit may still submit its kernel, and its record must not be lost: then nothing is
  // switched (sequentially consistent, against OnLaunchOwnReplay's increment and load).
  records_suspended_.store(holders);
  // An imbalance fails safe without `own_launch` (a count above 0 holds nothing); with it, a
  // count one short would let another launch in flight go unrecorded, so the count's increments
  // and decrements are paired on every path (OnLaunchOwnReplay). A launch entering between this
  // one's submission and its exit also ends the suspension: a valid measurement dropped.
  bool held = launches_in_flight_.load() == (own_launch ? 1 : 0);
  if (held && holders == 1 && !records_->Suspend()) {
    records_->Resume();  // the switch failed; its suspension is undone
    held = false;
  }
  if (!held) records_suspended_.store(holders - 1);
  *epoch = records_epoch_.load();
  return held;
}

void KernelModeCollector::ResumeRecords(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(records_mu_);
  if (RecordsInterrupted(epoch)) return;  // already back on, and no longer held by this one
  const int holders = records_suspended_.load() - 1;
  records_suspended_.store(holders);
  if (holders == 0) records_->Resume();
}

void KernelModeCollector::InterruptRecords() {
  std::lock_guard<std::mutex> lock(records_mu_);
  if (records_suspended_.load() == 0) return;
  records_epoch_.fetch_add(1);
  records_->Resume();
  records_suspended_.store(0);
}

KernelModeCollector::RecordsOff::RecordsOff(KernelModeCollector* c, bool own_launch) : c_(c) {
  held_ = c_->SuspendRecords(&epoch_, own_launch);
}

KernelModeCollector::RecordsOff::~RecordsOff() {
  if (held_) c_->ResumeRecords(epoch_);
}

void KernelModeCollector::EndMeasurement(KernelContext* p, std::unique_lock<std::mutex> lock,
                                         const Status& status) {
  p->own_launch_off.reset();  // records back on (when BeginOwnReplay failed after switching)
  p->own_launch = false;
  if (!status.ok()) {
    p->closed = true;
    p->session->Disable();
  }
  p->measuring.fetch_sub(1, std::memory_order_acq_rel);
  measuring_.fetch_sub(1, std::memory_order_acq_rel);
  lock.unlock();
}

void KernelModeCollector::MarkInternalLaunch(uint32_t correlation, Relaunched r) {
  std::lock_guard<std::mutex> internal(internal_mu_);
  // Bounded: entries whose records never came (kernel records off, a failed launch).
  if (internal_launches_.size() >= kMaxRelaunchedIds) internal_launches_.clear();
  internal_launches_[correlation] = r;
  any_internal_launch_.store(true, std::memory_order_release);
}

bool KernelModeCollector::IsProfilerInternalLaunch(uint32_t correlation) const {
  if (!any_internal_launch_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(internal_mu_);
  auto it = internal_launches_.find(correlation);
  if (it == internal_launches_.end()) return false;
  Relaunched& r = it->second;
  if (!r.first_seen) {  // the application's own launch (the first pass) completes first
    r.first_seen = true;
    if (r.relaunches == 0) internal_launches_.erase(it);
    return false;
  }
  if (r.relaunches == 0) return false;
  if (--r.relaunches == 0) internal_launches_.erase(it);
  return true;
}

void KernelModeCollector::NotSelected(CUcontext ctx) {
  if (selector_.done()) {
    // The launch count is reached: flush and disable every context's profiler, once.
    std::lock_guard<std::mutex> setup(setup_mu_);
    if (torn_down_.load(std::memory_order_acquire)) return;
    std::vector<Context*> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& entry : profilers_) all.push_back(entry.second.get());
    }
    for (Context* c : all) FlushContext(c, /*final=*/true);
    torn_down_.store(true, std::memory_order_release);
    std::string msg = "kernel selection complete (" + selector_.Describe() +
                      "): " + std::to_string(selector_.launches_selected()) +
                      " launch(es) measured; the range profiler is disabled for the rest of "
                      "the run";
    Notice(kNoticeInfo, msg);
    if (debug_) Log(LogSeverity::kDebug, "metrics: %s", msg.c_str());
    return;
  }
  if (sessions_started_.load(std::memory_order_relaxed) <= 0) return;
  KernelContext* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(ctx);
    if (it != profilers_.end()) p = static_cast<KernelContext*>(it->second.get());
  }
  if (!p) return;
  Status status;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed || !p->session || !p->session->started()) return;
    // Stopped, not decoded: the batch is decoded at the next selected launch or the flush.
    status = StopSession(p);
    if (!status.ok()) {
      p->closed = true;
      p->session->Disable();
    }
  }
  if (!status.ok()) Fail(status);
}

bool KernelModeCollector::Selects(const char* symbol) {
  bool in_range = false;
  if (selector_.wants_nvtx()) {
    std::lock_guard<std::mutex> lock(nvtx_mu_);
    auto it = nvtx_stacks_.find(ThreadId());
    in_range = it != nvtx_stacks_.end() && it->second.matching_open > 0;
  }
  return selector_.Select(symbol, in_range);
}

void KernelModeCollector::OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) {
  if (!data || !selector_.wants_nvtx()) return;
  NvtxRangeEvent ev = nvtx_.Decode(cbid, data);
  if (ev.kind == NvtxRangeEvent::kNone) return;
  bool match = ev.kind == NvtxRangeEvent::kPush &&
               nvtx_include_.Matches(nvtx_.DomainName(ev.domain), ev.message);
  std::lock_guard<std::mutex> lock(nvtx_mu_);
  ThreadRanges& t = nvtx_stacks_[ThreadId()];
  std::vector<bool>& stack = t.stacks[ev.domain];  // NVTX keeps one stack per domain
  if (ev.kind == NvtxRangeEvent::kPush) {
    stack.push_back(match);
    if (match) ++t.matching_open;
  } else if (!stack.empty()) {
    if (stack.back()) --t.matching_open;
    stack.pop_back();
  }
}

StatusOr<SessionSetup> KernelModeCollector::PlanSession(Context* c) {
  static const char kDuration[] = "gpu__time_duration.sum";
  auto* p = static_cast<KernelContext*>(c);
  const bool wanted = own_replay_ && records_ != nullptr;
  const bool asked = std::find(metrics_.begin(), metrics_.end(), kDuration) != metrics_.end();
  if (wanted && !asked) {
    // The set with the kernel's time added (hidden), kept if it stays one pass; otherwise the
    // configured set alone, planned again on a new session, and kernels measured on relaunches.
    std::vector<std::string> with = metrics_;
    with.push_back(kDuration);
    StatusOr<SessionSetup> extended = p->session->Plan(with);
    if (extended.ok() && extended.value().num_passes == 1 &&
        extended.value().names.size() == with.size() &&
        extended.value().names.back() == kDuration) {
      p->duration_index = static_cast<int>(with.size() - 1);
      p->hidden_metrics = 1;
      return extended;
    }
    if (debug_)
      Log(LogSeverity::kDebug, "metrics: %s would add a pass to the set: kernels are relaunched",
          kDuration);
    p->session = backend_->NewSession(p->ctx);
  }
  StatusOr<SessionSetup> planned = ProfilerCollector::PlanSession(c);
  if (planned.ok() && wanted && planned.value().num_passes == 1) {
    const std::vector<std::string>& names = planned.value().names;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == kDuration) p->duration_index = static_cast<int>(i);
  }
  return planned;
}

void KernelModeCollector::ShutdownNotices() {
  if (const uint64_t n = own_records_.load(); n > 0) {
    std::string msg =
        std::to_string(n) +
        " measured kernel(s) ran with kernel records off for their own launch (a one-pass set "
        "needs no memory save); kp made their kernel records (RECORD_FLAG_PROFILER_TIMED: start "
        "when the launch was submitted, duration gpu__time_duration)";
    Notice(kNoticeInfo, msg);
    if (debug_) Log(LogSeverity::kDebug, "metrics: %s", msg.c_str());
  }
  if (const uint64_t n = concurrent_skips_.load(); n > 0) {
    std::string msg = std::to_string(n) +
                      " selected kernel launch(es) not measured: made while another thread's "
                      "kernel was being measured";
    Log(LogSeverity::kWarning, "metrics: %s", msg.c_str());
    Notice(kNoticeWarning, msg);
  }
  if (const uint64_t n = unreplayable_.load(); n > 0) {
    std::string msg = std::to_string(n) +
                      " selected kernel launch(es) not measured: their launch callback carried "
                      "no launch parameters for kp's own replay; KP_METRICS_CACHE=none measures "
                      "them with CUPTI's kernel replay";
    Log(LogSeverity::kWarning, "metrics: %s", msg.c_str());
    Notice(kNoticeWarning, msg);
  }
  if (!selector_.active() || selector_.launches_selected() > 0) return;
  std::string msg = "no kernel launch was selected by " + selector_.Describe() + " (" +
                    std::to_string(selector_.launches_seen()) + " launch(es) seen, " +
                    std::to_string(selector_.launches_matched()) +
                    " passed the name and NVTX filters)";
  Log(LogSeverity::kWarning, "metrics: %s", msg.c_str());
  Notice(kNoticeWarning, msg);
}

void KernelModeCollector::FinalNotices(Context* c, std::vector<std::string>* warnings) {
  auto* p = static_cast<KernelContext*>(c);
  if (p->failed_launches)
    warnings->push_back(std::to_string(p->failed_launches) +
                        " measured kernel launch(es) failed in the application; no values");
  if (p->disturbed)
    warnings->push_back(std::to_string(p->disturbed) +
                        " measured kernel(s) dropped: another thread launched work while they "
                        "were measured, which kernel mode would have counted into them");
  if (p->interrupted)
    warnings->push_back(
        std::to_string(p->interrupted) +
        " measured kernel(s) dropped: another thread launched a kernel (on any GPU) while kernel "
        "records were to be off for their passes, so they stayed on (its record is kept); "
        "KP_ACTIVITIES without kernel measures without switching them");
  if (p->instrumented_fallbacks)
    warnings->push_back(std::to_string(p->instrumented_fallbacks) +
                        " one-pass kernel measurement(s) include CUPTI's timing instructions (8 "
                        "per warp): the memory save for kp's own pass failed (" +
                        p->fallback_reason +
                        "), so the application's launch was measured "
                        "(the save is not tried again on this context)");
  if (p->ranges_dropped || p->graph_launches || p->index_mismatches || p->range_number_mismatches)
    warnings->push_back(
        std::to_string(p->ranges_dropped) + " measured range(s) dropped or incomplete, " +
        std::to_string(p->graph_launches) + " graph launch(es) not measured per kernel, " +
        std::to_string(p->index_mismatches) +
        " kernel batch(es) with a range count unlike the launch count, " +
        std::to_string(p->range_number_mismatches) +
        " kernel value set(s) whose CUPTI range number differs from the launch "
        "number (from there on values may belong to other kernels)");
}

}  // namespace kp
