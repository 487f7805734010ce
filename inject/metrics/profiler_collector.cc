#include "inject/metrics/profiler_collector.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <thread>

#include "common/metric_plan.h"
#include "inject/log/log.h"
#include "inject/metrics/l2_sweep.h"
#include "inject/trace/trace_encoder.h"

namespace kp {
namespace {

// Kernels the range profiler launches itself (one extra kernel record per measured range in
// range mode). Their names are only known once seen on a GPU: run with KP_LOG=debug, which
// prints each distinct kernel name once, and add the profiler's here. Seen on the H200
// (CUDA 13.0, CUPTI 130001): the range profiler launches one 1x1 "WaitNs" kernel per measured
// range on a stream of its own (~80 us), with no API call of the app. kp's own L2 sweep
// (l2_sweep.h) is listed too.
const std::vector<std::string_view> kProfilerInternalKernels = {
    "WaitNs", kL2SweepKernelName, kL2ZeroKernelName, kL2DiscardKernelName};

}  // namespace

ProfilerCollector::ProfilerCollector(const Config& config, std::vector<std::string> metrics,
                                     EncoderPost post, std::unique_ptr<ProfilerBackend> backend)
    : config_(config),
      mode_(config.metrics_mode),
      metrics_(std::move(metrics)),
      debug_(config.log == LogLevel::kDebug),
      post_(std::move(post)),
      backend_(std::move(backend)) {}

ProfilerCollector::~ProfilerCollector() = default;

uint32_t ProfilerCollector::ThreadId() {
  thread_local uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

void ProfilerCollector::Notice(int severity, const std::string& message) {
  uint64_t t = backend_->Now();
  post_([severity, message, t](TraceEncoder& enc) {
    enc.AddNotice(severity, "metrics", message, t);
  });
}

namespace {
std::string FlushFallbackMessage(const std::string& why) {
  return why +
         "; kp empties the L2 with its own sweep instead, whose L2 (lts__t_*) counts can read a "
         "few percent below ncu's (docs/metrics.md#l2-flush)";
}
}  // namespace

Status ProfilerCollector::FlushL2(Context* p) {
  auto t0 = std::chrono::steady_clock::now();
  Status s = p->session->FlushL2();
  p->session->AddTime(SessionCall::kFlush, MsSince(t0));
  // The line now; the trace's notice at the context's final flush (p->mu is held here).
  if (!p->session->flush_fallback().empty() && !flush_fallback_said_.exchange(true))
    Log(LogSeverity::kWarning, "metrics: %s",
        FlushFallbackMessage(p->session->flush_fallback()).c_str());
  return s;
}

void ProfilerCollector::Fail(const Status& failure) {
  off_.store(true);
  // One line, the first cause. Not off_: Shutdown sets it before the final flush, whose
  // failures must be said too.
  if (failed_.exchange(true)) return;
  Log(LogSeverity::kError, "metrics: %s; metrics are off, tracing goes on",
      failure.message().c_str());
  Notice(kNoticeError, failure.message() + "; metrics are off");
}

void ProfilerCollector::CheckNamesAtStartup(uint32_t device) {
  StatusOr<std::string> chip = backend_->ChipName(device);
  if (!chip.ok()) {
    Fail(chip.status());
    return;
  }
  StatusOr<std::unique_ptr<MetricHost>> host =
      MetricHost::Create(chip.value(), CUPTI_PROFILER_TYPE_RANGE_PROFILER, {});
  const Status valid = host.ok() ? host.value()->Validate(metrics_) : host.status();
  if (!valid.ok()) Fail(valid.WithContext("KP_METRICS"));
}

void ProfilerCollector::OnContextCreated(CUcontext ctx, uint32_t device_ordinal) {
  bool check = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    context_devices_[ctx] = device_ordinal;
    check = !names_checked_;
    names_checked_ = true;
  }
  // The first context: before the program's first kernel, whether or not a range is measured.
  if (check && !off_.load()) CheckNamesAtStartup(device_ordinal);
}

ProfilerCollector::Context* ProfilerCollector::ProfilerFor(CUcontext ctx) {
  if (off_.load(std::memory_order_relaxed) || !ctx) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(ctx);
    if (it != profilers_.end()) return it->second->closed ? nullptr : it->second.get();
  }
  std::lock_guard<std::mutex> setup(setup_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(ctx);
    if (it != profilers_.end()) return it->second->closed ? nullptr : it->second.get();
  }
  if (off_) return nullptr;
  // A capture began since the caller looked: set up later (a begin waits for setup_mu_).
  if (gate_.active()) return nullptr;

  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Context> p = NewContext();
  p->ctx = ctx;
  if (const Status initialized = backend_->Initialize(); !initialized.ok()) {
    Fail(initialized);
    return nullptr;
  }
  p->session = backend_->NewSession(ctx);
  StatusOr<SessionSetup> planned = PlanSession(p.get());
  if (!planned.ok()) {
    Fail(planned.status());
    return nullptr;
  }
  p->setup = std::move(planned.value());
  for (size_t i = 0; i < p->setup.names.size(); ++i) {
    const auto& n = p->setup.names[i];
    if (n == "sm__cycles_elapsed.avg.per_second" || n == "gpc__cycles_elapsed.avg.per_second" ||
        n == "sm__cycles_elapsed.max.per_second" || n == "gpc__cycles_elapsed.max.per_second")
      p->sm_clock_index = static_cast<int>(i);
  }
  p->multi_pass = mode_ == MetricsMode::kRange && p->setup.num_passes > 1;
  p->max_ranges = MaxRanges(p->setup);

  auto t_enable = std::chrono::steady_clock::now();
  // On a failure here the session (RAII) disables what it enabled when `p` goes.
  Status enabled = p->session->Enable(replay(), p->max_ranges);
  if (enabled.ok()) enabled = AfterEnable(p.get());
  if (!enabled.ok()) {
    Fail(enabled);
    return nullptr;
  }
  double enable_ms = MsSince(t_enable);
  double total_ms = MsSince(t0);

  const SessionSetup& s = p->setup;
  MetricConfigInfo info;
  info.metric_names.assign(s.names.begin(), s.names.begin() + p->shown_metrics());
  info.num_passes = static_cast<uint32_t>(s.num_passes);
  info.mode = mode_ == MetricsMode::kKernel ? "kernel" : "range";
  info.device = s.device;
  info.chip = s.chip;
  info.skip = mode_ == MetricsMode::kRange ? config_.metrics_skip : 0;
  auto id = p->config_id;
  post_([id, info](TraceEncoder& enc) { *id = enc.AddMetricConfig(info); });
  char msg[512];
  std::snprintf(msg, sizeof msg,
                "set up on device %u (%s, context %u) in %.1f ms (counter availability %.1f ms, "
                "config %.1f ms, enable+image+start %.1f ms): %zu metrics, %zu pass(es), %s mode%s",
                s.device, s.chip.c_str(), s.context_id, total_ms, s.availability_ms, s.config_ms,
                enable_ms, info.metric_names.size(), s.num_passes, info.mode.c_str(),
                p->multi_pass ? "; passes rotate over repeated occurrences of each range" : "");
  Notice(kNoticeInfo, msg);
  if (debug_) Log(LogSeverity::kDebug, "metrics: %s", msg);
  if (replay() == RangeReplay::kAutoRangesKernelReplay && s.num_passes > 1) {
    bool dram = false;
    for (const auto& n : s.names) dram |= n.rfind("dram__", 0) == 0;
    if (dram) {
      std::string warn =
          "kernel mode with a " + std::to_string(s.num_passes) +
          "-pass set and KP_METRICS_CACHE=none: CUPTI replays each kernel once per pass with no "
          "cache control between passes, and DRAM traffic reads high (on the H200, "
          "dram__bytes_write 8-23 MB more per kernel than with a single-pass set); the default "
          "KP_METRICS_CACHE=pass starts every pass from a flushed L2";
      Notice(kNoticeWarning, warn);
      if (debug_) Log(LogSeverity::kDebug, "metrics: %s", warn.c_str());
    }
  }

  Context* raw = p.get();
  std::lock_guard<std::mutex> lock(mu_);
  profilers_[ctx] = std::move(p);
  return raw;
}

StatusOr<SessionSetup> ProfilerCollector::PlanSession(Context* p) {
  return p->session->Plan(metrics_);
}

void ProfilerCollector::PostResults(Context* p, std::vector<Result> results) {
  if (results.empty()) return;
  auto id = p->config_id;
  int clock = p->sm_clock_index;
  const size_t shown = p->shown_metrics();
  post_([id, clock, shown, results = std::move(results)](TraceEncoder& enc) {
    for (const Result& r : results) {
      MetricRangeRecord rec;
      rec.config = *id;
      rec.name = r.name.c_str();
      rec.domain = r.domain.empty() ? nullptr : r.domain.c_str();
      rec.occurrence = r.occurrence;
      rec.occurrences_used = r.occurrences_used;
      rec.start = r.start;
      rec.end = r.end;
      rec.values = r.values.data();
      rec.num_values = static_cast<uint32_t>(std::min(r.values.size(), shown));
      rec.thread_id = r.thread_id;
      rec.device = r.device;
      rec.context = r.context;
      rec.correlation = r.correlation;
      rec.nesting_level = 1;
      rec.occurrence_min_ns = r.min_duration;
      rec.occurrence_max_ns = r.max_duration;
      rec.inconsistent = r.inconsistent;
      if (clock >= 0 && static_cast<size_t>(clock) < r.values.size() &&
          std::isfinite(r.values[clock]))
        rec.sm_clock_khz = static_cast<uint32_t>(r.values[clock] / 1000.0);
      enc.AddMetricRange(rec);
    }
  });
}

void ProfilerCollector::OnStreamCapture(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                        const CUpti_CallbackData* data) {
  if (gate_.OnCapture(domain, cbid, data) != StreamCaptureGate::Event::kBeginning) return;
  // Before the capture starts: wait for a profiler set-up in flight (setup_mu_), let the mode
  // do what must precede a capture, and raise the gate while holding every profiler's mutex,
  // so a push or launch either finished before or sees it.
  std::lock_guard<std::mutex> setup(setup_mu_);
  std::vector<Context*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [ctx, p] : profilers_) all.push_back(p.get());
  }
  std::sort(all.begin(), all.end());  // one lock order for concurrent begins
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(all.size());
  for (Context* p : all) locks.emplace_back(p->mu);
  std::vector<std::pair<Context*, std::vector<Result>>> posts;
  Status status;
  for (Context* p : all) {
    if (!status.ok() || p->closed) continue;
    posts.emplace_back(p, std::vector<Result>());
    status = BeforeCapture(p, &posts.back().second);
    if (!status.ok()) {
      p->closed = true;
      p->session->Disable();
    }
  }
  gate_.Raise();
  locks.clear();
  for (auto& [p, results] : posts) PostResults(p, std::move(results));
  if (!status.ok()) Fail(status);
}

void ProfilerCollector::FlushContext(Context* p, bool final) {
  std::vector<Result> results;
  std::vector<std::string> warnings;
  std::string call_times;
  Status status;
  uint64_t dropped = 0;
  {
    // Polled rather than a timed lock: ThreadSanitizer does not follow pthread_mutex_clocklock.
    std::unique_lock<std::mutex> lock(p->mu, std::try_to_lock);
    const auto deadline = std::chrono::steady_clock::now() + kFinalFlushWait;
    while (!lock.owns_lock() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.try_lock();
    }
    if (!lock.owns_lock()) {
      // Kernel mode's own replay is measuring a kernel on this context and has not come back
      // (a kernel that does not end): the trace is finished without this context's values.
      std::string msg = "device " + std::to_string(p->setup.device) + " (context " +
                        std::to_string(p->setup.context_id) + "): a kernel was still being " +
                        "measured after " + std::to_string(kFinalFlushWait.count()) +
                        " ms; this context's pending values are not in the trace";
      Log(LogSeverity::kWarning, "metrics: %s", msg.c_str());
      Notice(kNoticeWarning, msg);
      return;
    }
    if (p->closed) return;
    status = FlushLocked(p, &results);
    if (final) {
      FinalNotices(p, &warnings);
      if (!p->session->flush_fallback().empty() && !flush_fallback_noticed_.exchange(true))
        warnings.push_back(FlushFallbackMessage(p->session->flush_fallback()));
      dropped = p->ranges_dropped;
      call_times = p->session->FormatCallTimes();
      p->closed = true;
      p->session->Disable();
    } else if (!status.ok()) {
      p->closed = true;
      p->session->Disable();
    }
  }
  PostResults(p, std::move(results));
  if (!status.ok()) Fail(status);
  if (!call_times.empty()) {
    std::string msg = "host time in range-profiler calls on device " +
                      std::to_string(p->setup.device) + " (context " +
                      std::to_string(p->setup.context_id) + "): " + call_times;
    Notice(kNoticeInfo, msg);
    if (debug_) Log(LogSeverity::kDebug, "metrics: %s", msg.c_str());
  }
  if (dropped)
    post_([dropped](TraceEncoder& enc) { enc.stats().metric_ranges_dropped += dropped; });
  for (const std::string& w : warnings) Notice(kNoticeWarning, w);
}

void ProfilerCollector::OnContextDestroying(CUcontext ctx) {
  Context* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profilers_.find(ctx);
    if (it != profilers_.end()) p = it->second.get();
    context_devices_.erase(ctx);
  }
  if (p) FlushContext(p, /*final=*/true);
  // A new context may reuse the handle; keep the closed profiler alive (a racing callback may
  // still hold its pointer) but out of the map.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = profilers_.find(ctx);
  if (it != profilers_.end()) {
    retired_.push_back(std::move(it->second));
    profilers_.erase(it);
  }
}

void ProfilerCollector::Shutdown() {
  // Off first, so no thread starts setting up a profiler for a new context while (or after)
  // the profilers are closed and the profiler interface de-initialized.
  off_.store(true);
  std::lock_guard<std::mutex> setup(setup_mu_);
  std::vector<Context*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [ctx, p] : profilers_) all.push_back(p.get());
  }
  for (Context* p : all) FlushContext(p, /*final=*/true);
  if (uint64_t n = skipped_during_capture_.exchange(0))
    Notice(kNoticeInfo,
           std::to_string(n) +
               (mode_ == MetricsMode::kKernel ? " kernel launch(es)" : " range(s)") +
               " during CUDA-graph stream capture were not measured (the range profiler is not "
               "touched while an application captures, which would invalidate the capture)");
  ShutdownNotices();
  backend_->DeInitialize();
}

bool ProfilerCollector::IsProfilerInternalKernel(const char* name) const {
  if (!name) return false;
  std::string_view n(name);
  for (std::string_view known : kProfilerInternalKernels)
    if (n == known) return true;
  if (debug_ && mode_ == MetricsMode::kRange) {
    std::lock_guard<std::mutex> lock(seen_mu_);
    if (seen_kernels_.size() < 256 &&
        std::find(seen_kernels_.begin(), seen_kernels_.end(), n) == seen_kernels_.end()) {
      seen_kernels_.emplace_back(n);
      Log(LogSeverity::kDebug,
          "metrics: kernel '%s' seen (not a known profiler-internal kernel; if the range "
          "profiler launched it, add it to kProfilerInternalKernels)",
          name);
    }
  }
  return false;
}

}  // namespace kp
