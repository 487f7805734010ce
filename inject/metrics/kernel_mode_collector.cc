#include "inject/metrics/kernel_mode_collector.h"

#include <cstdlib>

#include "inject/log/log.h"
#include "inject/metrics/launch_callbacks.h"

namespace kp {
namespace {

thread_local int t_runtime_launch_depth = 0;
// With targeting, a runtime launch without a symbol name is decided at the driver launch
// inside it (which has the name), still before the kernel runs.
thread_local bool t_deferred_to_driver = false;

}  // namespace

struct KernelModeCollector::KernelContext : Context {
  std::vector<Result> launches;    // since the last decode, in launch order
  bool stopped_undecoded = false;  // stopped before a capture; decoded at the next launch
  uint64_t launch_index = 0;
  uint64_t graph_launches = 0;
  uint64_t index_mismatches = 0;
  uint64_t range_number_mismatches = 0;  // CUPTI's range number != launch number
};

KernelModeCollector::KernelModeCollector(const Config& config, std::vector<std::string> metrics,
                                         EncoderPost post, std::unique_ptr<ProfilerBackend> backend)
    : ProfilerCollector(config, std::move(metrics), std::move(post), std::move(backend)),
      selector_(config),
      nvtx_include_(config.metrics_nvtx_include) {}

std::unique_ptr<ProfilerCollector::Context> KernelModeCollector::NewContext() {
  return std::make_unique<KernelContext>();
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
    if (graph || !selector_.Select(symbol, selector_.wants_nvtx() && InIncludedRange())) {
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
      if (status.ok()) {
        Result r;
        r.name = data->symbolName ? data->symbolName : "";
        r.occurrence = p->launch_index++;
        r.occurrences_used = 1;
        r.start = r.end = backend_->Now();
        r.thread_id = ThreadId();
        r.device = p->setup.device;
        r.context = p->setup.context_id;
        r.correlation = data->correlationId;
        p->launches.push_back(std::move(r));
      }
    }
    if (!status.ok()) {
      p->closed = true;
      p->session->Disable();
    }
  }
  PostResults(p, std::move(results));
  if (!status.ok()) Fail(status);
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

bool KernelModeCollector::InIncludedRange() {
  std::lock_guard<std::mutex> lock(nvtx_mu_);
  auto it = nvtx_stacks_.find(ThreadId());
  return it != nvtx_stacks_.end() && it->second.matching_open > 0;
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

void KernelModeCollector::ShutdownNotices() {
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
