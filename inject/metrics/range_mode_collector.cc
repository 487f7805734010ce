#include "inject/metrics/range_mode_collector.h"

#include <chrono>
#include <cstdio>

#include "inject/log/log.h"
#include "inject/metrics/launch_callbacks.h"

namespace kp {
namespace {

enum class Slot { kNone, kMeasured, kSkipped };
struct OpenRange {
  const void* domain;
  Slot slot;
};
// This thread's open NVTX ranges, and whether one of them holds the outermost measured slot
// (measured or skipped as warm-up), with the context it was measured on.
thread_local std::vector<OpenRange> t_open_ranges;
thread_local bool t_in_outermost = false;
thread_local CUcontext t_measured_ctx = nullptr;
thread_local bool t_launched = false;  // this thread has launched a kernel

std::string RangeName(const std::pair<std::string, std::string>& key) {
  return key.first.empty() ? key.second : key.first + "::" + key.second;
}

}  // namespace

struct RangeModeCollector::RangeContext : Context {
  Result open;  // the measured range now open (owner thread only)
  // Its pop came during a stream capture: the owner closes it at its next measured push or the
  // final flush, and drops its values (FinishDeferredPop); the end is the application's pop.
  bool deferred_pop = false;
  uint64_t deferred_pop_end = 0;
  std::string open_range_name;
  std::pair<std::string, std::string> open_key;
  // Single-pass: occurrences since the last decode, by CUPTI range name.
  std::vector<Result> pending;
  std::unordered_map<std::string, size_t> pending_by_range_name;
  // Multi-pass: the names of the current pass and the per-name state of the cycle.
  std::set<std::pair<std::string, std::string>> names_in_pass;
  std::map<std::pair<std::string, std::string>, Result> cycle;
  uint32_t passes_submitted = 0;
  uint64_t names_over_capacity = 0;  // occurrences past kNamesPerPass in a pass
  // The L2 flush: whether a Start happened since the last one, and whether it failed.
  bool flush_pending = false;
  bool flush_failed = false;
};

RangeModeCollector::RangeModeCollector(const Config& config, std::vector<std::string> metrics,
                                       EncoderPost post, std::unique_ptr<ProfilerBackend> backend)
    : ProfilerCollector(config, std::move(metrics), std::move(post), std::move(backend)),
      selector_(config.metrics_ranges),
      cache_(config.metrics_cache),
      skip_(config.metrics_skip) {}

std::unique_ptr<ProfilerCollector::Context> RangeModeCollector::NewContext() {
  return std::make_unique<RangeContext>();
}

size_t RangeModeCollector::MaxRanges(const SessionSetup& setup) const {
  return setup.num_passes > 1 ? kNamesPerPass : kRangesPerImage;
}

Status RangeModeCollector::Start(RangeContext* p) {
  if (Status started = p->session->Start(); !started.ok()) return started;
  p->flush_pending = true;
  return Status();
}

// Single-pass starts once at set-up; multi-pass starts per pass.
Status RangeModeCollector::AfterEnable(Context* c) {
  auto* p = static_cast<RangeContext*>(c);
  return p->multi_pass ? Status() : Start(p);
}

Status RangeModeCollector::BeforeCapture(Context*, std::vector<Result>*) {
  return Status();  // nothing: no range is pushed while the gate is raised
}

void RangeModeCollector::OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                  const CUpti_CallbackData* data) {
  if (t_launched || !data || data->callbackSite != CUPTI_API_ENTER) return;
  if (!IsKernelLaunch(domain, cbid) && !IsGraphLaunch(domain, cbid)) return;
  t_launched = true;
  any_launch_.store(true, std::memory_order_relaxed);
}

void RangeModeCollector::OnNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data) {
  if (!data || off_.load(std::memory_order_relaxed)) return;
  NvtxRangeEvent ev = nvtx_.Decode(cbid, data);
  if (ev.kind == NvtxRangeEvent::kPush) OnRangePush(ev.domain, ev.message);
  if (ev.kind == NvtxRangeEvent::kPop) OnRangePop(ev.domain);
}

void RangeModeCollector::AnnounceOwner(uint32_t tid, const std::string& domain,
                                       const std::string& message) {
  std::string msg =
      "measuring the outermost matching ranges of thread " + std::to_string(tid) +
      (t_launched ? " (the thread launching GPU work)" : "") + ", from its range '" + message +
      "' in " +
      (domain.empty() ? std::string("the default NVTX domain") : "NVTX domain '" + domain + "'") +
      "; matching ranges on other threads are not measured" +
      (selector_.selects_every_range() ? ", nor those of library domains (NCCL, cuBLAS, ...)" : "");
  Notice(kNoticeInfo, msg);
  if (debug_) Log(LogSeverity::kDebug, "metrics: %s", msg.c_str());
}

void RangeModeCollector::OnRangePush(const void* domain, const std::string& message) {
  if (t_in_outermost) {
    t_open_ranges.push_back({domain, Slot::kNone});
    return;
  }
  std::string domain_name = nvtx_.DomainName(domain);
  bool measure = selector_.Matches(domain_name, message);
  const uint32_t tid = ThreadId();
  uint64_t owner = owner_thread_.load(std::memory_order_relaxed);
  // Not the owner, or (no owner yet) a thread that launches no GPU work while another does.
  if (measure && ((owner != 0 && owner != tid) ||
                  (owner == 0 && !t_launched && any_launch_.load(std::memory_order_relaxed)))) {
    if (skipped_other_thread_.fetch_add(1) == 0 && debug_)
      Log(LogSeverity::kDebug,
          "metrics: range '%s' on thread %u not measured: only the thread launching GPU work "
          "is measured",
          message.c_str(), tid);
    measure = false;
  }
  if (measure && gate_.active()) {
    skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
    measure = false;
  }
  CUcontext ctx = nullptr;
  if (measure) {
    ctx = backend_->CurrentContext();
    measure = ctx != nullptr;
  }
  RangeContext* p = nullptr;
  if (measure) {
    // The first call does the set-up (keeps it out of the range's time).
    p = static_cast<RangeContext*>(ProfilerFor(ctx));
    measure = p != nullptr;
  }
  if (measure) {
    uint64_t expected = 0;
    if (owner_thread_.compare_exchange_strong(expected, tid))
      AnnounceOwner(tid, domain_name, message);
    else
      measure = expected == tid;
  }
  if (!measure) {
    t_open_ranges.push_back({domain, Slot::kNone});
    return;
  }
  std::pair<std::string, std::string> key(domain_name, message);
  uint64_t k = 0;
  {
    std::lock_guard<std::mutex> maps(mu_);
    k = occurrences_[key]++;
  }
  if (k < skip_) {
    // Warm-up: traced, not measured; it still holds the outermost slot.
    skipped_warmup_.fetch_add(1, std::memory_order_relaxed);
    t_open_ranges.push_back({domain, Slot::kSkipped});
    t_in_outermost = true;
    return;
  }

  std::vector<Result> results;
  Status status;
  bool skip = false;
  std::string flush_warning;
  std::string range_name = RangeName(key);
  // Opens the CUPTI range; p->mu held.
  auto push = [&] {
    p->open = Result();
    p->open.name = message;
    p->open.domain = domain_name;
    p->open.occurrence = k;
    p->open.occurrences_used = 1;
    p->open.thread_id = tid;
    p->open.device = p->setup.device;
    p->open.context = p->setup.context_id;
    p->open_range_name = range_name;
    p->open_key = key;
    p->open.start = backend_->Now();
    status = p->session->PushRange(p->open_range_name);
    if (status.ok() && p->multi_pass) p->names_in_pass.insert(key);
  };
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed || gate_.active()) {
      if (!p->closed) skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
      t_open_ranges.push_back({domain, Slot::kNone});
      return;
    }
    // A pop that came during a capture, which has ended since: close that range now.
    if (p->deferred_pop) status = FinishDeferredPop(p, &results);
    if (!status.ok()) {
      // falls through to the failure handling below
    } else if (p->multi_pass) {
      if (p->session->started() && p->names_in_pass.count(key))
        status = Collect(p, /*restart=*/false, &results);  // the unit repeats: end pass
      if (status.ok() && !p->session->started()) {
        status = Start(p);
        p->names_in_pass.clear();
      }
      // More names in one pass than the image holds: leave this one unmeasured.
      skip = status.ok() && p->names_in_pass.size() + 1 >= p->max_ranges;
      if (skip) ++p->names_over_capacity;
    } else {
      range_name += "#" + std::to_string(k);
    }
    const bool flush =
        status.ok() && !skip && !p->flush_failed &&
        (cache_ == MetricsCache::kRange || (cache_ == MetricsCache::kPass && p->flush_pending));
    if (flush) {
      // Driver calls under p->mu (see the header on locking): a capture begin waits for them.
      const Status flushed = FlushL2(p);
      if (flushed.ok()) {
        p->flush_pending = false;
      } else {
        p->flush_failed = true;
        flush_warning = flushed.message() +
                        "; ranges are measured without it from here on (the first range after "
                        "each range-profiler start can then read ~30 MB more dram writes)";
      }
    }
    if (status.ok() && !skip) push();
    if (!status.ok()) {
      p->closed = true;
      p->session->Disable();
    }
  }
  if (!flush_warning.empty()) {
    Log(LogSeverity::kWarning, "metrics: %s", flush_warning.c_str());
    Notice(kNoticeWarning, flush_warning);
  }
  PostResults(p, std::move(results));
  if (!status.ok() || skip) {
    if (!status.ok()) Fail(status);
    t_open_ranges.push_back({domain, Slot::kNone});
    return;
  }
  t_open_ranges.push_back({domain, Slot::kMeasured});
  t_in_outermost = true;
  t_measured_ctx = ctx;
}

void RangeModeCollector::OnRangePop(const void* domain) {
  // Close the innermost open range of this domain (NVTX keeps one stack per domain).
  Slot slot = Slot::kNone;
  for (size_t i = t_open_ranges.size(); i-- > 0;) {
    if (t_open_ranges[i].domain == domain) {
      slot = t_open_ranges[i].slot;
      t_open_ranges.erase(t_open_ranges.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (slot == Slot::kNone) return;
  t_in_outermost = false;
  if (slot == Slot::kSkipped) return;
  RangeContext* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(t_measured_ctx);
    if (it != profilers_.end()) p = static_cast<RangeContext*>(it->second.get());
  }
  if (!p) return;
  std::vector<Result> results;
  Status status;
  {
    std::lock_guard<std::mutex> lock(p->mu);
    if (p->closed) return;
    if (gate_.active()) {
      // Not during a capture: the owner closes it later (FinishDeferredPop).
      p->deferred_pop = true;
      p->deferred_pop_end = backend_->Now();
      return;
    }
    status = PopLocked(p, /*end=*/0, /*keep=*/true, &results);
    if (!status.ok()) p->session->Disable();
  }
  PostResults(p, std::move(results));
  if (!status.ok()) Fail(status);
}

Status RangeModeCollector::PopLocked(RangeContext* p, uint64_t end, bool keep,
                                     std::vector<Result>* results) {
  Status status = p->session->PopRange();
  // The end is taken after PopRange, which waits for the range's GPU work in multi-pass mode,
  // so the range's time window holds its kernels (the summary's "while busy" reading uses it).
  p->open.end = end ? end : backend_->Now();
  if (status.ok() && p->multi_pass) {
    Result& r = p->cycle[p->open_key];
    uint32_t used = r.occurrences_used + 1;
    bool tainted = r.tainted || !keep;
    uint64_t d = p->open.end > p->open.start ? p->open.end - p->open.start : 0;
    uint64_t lo = used == 1 ? d : std::min(r.min_duration, d);
    uint64_t hi = used == 1 ? d : std::max(r.max_duration, d);
    r = p->open;  // the latest occurrence gives the times and index
    r.occurrences_used = used;
    r.tainted = tainted;  // a pass of this cycle is not trustworthy: the set is dropped
    r.min_duration = lo;
    r.max_duration = hi;
  } else if (status.ok() && keep) {
    p->pending_by_range_name[p->open_range_name] = p->pending.size();
    p->pending.push_back(p->open);
    // Flush point: the image is nearly full (no measured range is open on the owner now).
    if (p->pending.size() + 1 >= p->max_ranges) status = Collect(p, /*restart=*/true, results);
  }
  if (!status.ok()) p->closed = true;
  return status;
}

Status RangeModeCollector::FinishDeferredPop(RangeContext* p, std::vector<Result>* results) {
  p->deferred_pop = false;
  // Its CUPTI range stayed open past the capture, so its counters hold whatever ran until now:
  // the values are not kept (counted with the ranges skipped during captures).
  skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
  return PopLocked(p, p->deferred_pop_end, /*keep=*/false, results);
}

Status RangeModeCollector::Collect(RangeContext* p, bool restart, std::vector<Result>* out) {
  if (!p->session->started()) return Status();
  StatusOr<bool> stopped = p->session->Stop();
  if (!stopped.ok()) return stopped.status();
  const bool all = stopped.value();
  if (!p->multi_pass) {
    StatusOr<std::vector<DecodedRange>> decoded = p->session->Decode(
        [p](size_t, const std::string& name) { return p->pending_by_range_name.count(name) > 0; },
        &p->ranges_dropped);
    if (!decoded.ok()) return decoded.status();
    for (DecodedRange& d : decoded.value()) {
      Result r = p->pending[p->pending_by_range_name[d.name]];
      r.values = std::move(d.values);
      out->push_back(std::move(r));
    }
    p->pending.clear();
    p->pending_by_range_name.clear();
  } else {
    ++p->passes_submitted;
    if (all) {
      std::map<std::string, Result*> by_name;
      for (auto& [key, r] : p->cycle) by_name[RangeName(key)] = &r;
      StatusOr<std::vector<DecodedRange>> decoded = p->session->Decode(
          [p, &by_name](size_t, const std::string& name) {
            auto it = by_name.find(name);
            if (it == by_name.end()) return false;
            if (it->second->tainted) {
              ++p->ranges_dropped;  // one pass held a range closed late (a capture)
              return false;
            }
            return true;
          },
          &p->ranges_dropped);
      if (!decoded.ok()) return decoded.status();
      for (DecodedRange& d : decoded.value()) {
        Result r = *by_name[d.name];
        r.values = std::move(d.values);
        r.inconsistent = r.occurrences_used > 1 &&
                         static_cast<double>(r.max_duration) >
                             (1.0 + kInconsistentSpread) * static_cast<double>(r.min_duration);
        out->push_back(std::move(r));
      }
      p->cycle.clear();
      p->passes_submitted = 0;
    }
    p->names_in_pass.clear();
  }
  if (restart) return Start(p);
  return Status();
}

Status RangeModeCollector::FlushLocked(Context* c, std::vector<Result>* results) {
  auto* p = static_cast<RangeContext*>(c);
  if (p->deferred_pop)
    if (Status popped = FinishDeferredPop(p, results); !popped.ok()) return popped;
  return Collect(p, /*restart=*/false, results);
}

void RangeModeCollector::FinalNotices(Context* c, std::vector<std::string>* warnings) {
  auto* p = static_cast<RangeContext*>(c);
  if (!p->cycle.empty()) {
    // The cycle still open at exit: its occurrences gave passes but no full value set.
    warnings->push_back(
        std::to_string(p->cycle.size()) + " range name(s) ended inside an unfinished pass cycle: " +
        std::to_string(p->passes_submitted) + " of the " + std::to_string(p->setup.num_passes) +
        " occurrences a value set needs were measured, so their last "
        "occurrences carry no values (complete cycles before it are in the "
        "trace)");
    p->cycle.clear();
  }
  if (p->names_over_capacity)
    warnings->push_back(std::to_string(p->names_over_capacity) +
                        " range occurrence(s) not measured: more than " +
                        std::to_string(kNamesPerPass - 1) +
                        " distinct measured range names in one pass (one repeating unit); "
                        "narrow KP_METRICS_RANGES");
  if (p->ranges_dropped)
    warnings->push_back(std::to_string(p->ranges_dropped) +
                        " measured range(s) dropped or incomplete (no values)");
}

void RangeModeCollector::ShutdownNotices() {
  if (uint64_t n = skipped_warmup_.exchange(0))
    Notice(kNoticeInfo, std::to_string(n) +
                            " warm-up range occurrence(s) traced but not "
                            "measured (KP_METRICS_SKIP=" +
                            std::to_string(skip_) + ": the first occurrence(s) of each name)");
  if (uint64_t skipped = skipped_other_thread_.exchange(0))
    Notice(kNoticeInfo, std::to_string(skipped) +
                            " matching range(s) on threads other than the measured one were not "
                            "measured (range mode measures one thread)");
}

}  // namespace kp
