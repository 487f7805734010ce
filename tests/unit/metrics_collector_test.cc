// metrics_collector_test.cc: the range-mode and kernel-mode collectors driven through their
// real callback entry points (NVTX, launch, stream-capture and context callbacks built as CUPTI
// passes them) with a scripted ProfilerSession in place of CUPTI's range profiler. Results go
// through the real TraceEncoder and are read back with the libprotobuf classes of
// proto/kptrace.proto. Covers pass rotation, warm-up skip, consistency flags, deferred pops,
// capture begin/end races (run under ThreadSanitizer in CI: the `tsan` preset), the choice of
// the measured thread and domain, a failure at each range-profiler call (at set-up and mid-run:
// every enabled session disabled again, one line on stderr), and the start-up check of metric
// names (the real Profiler Host API, chip GH100, no GPU).
#include "inject/metrics/metrics_collector.h"

#include <generated_nvtx_meta.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/metric_plan.h"
#include "inject/config/config.h"
#include "inject/cupti/profiler_support.h"
#include "inject/log/log.h"
#include "inject/metrics/kernel_selector.h"
#include "inject/metrics/profiler_session.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "kptrace.pb.h"
#include "tools/reader/chunk_columns.h"

namespace kp {
namespace {

const CUcontext kCtx = reinterpret_cast<CUcontext>(0x1000);

// The tracer's kernel-record switch with an open capture window: on unless suspended.
class FakeKernelRecords final : public KernelRecords {
 public:
  bool on() const override { return on_.load(); }
  bool Suspend() override {
    ++suspends;
    if (fail_suspend) return false;
    on_ = false;
    return true;
  }
  void Resume() override {
    ++resumes;
    on_ = true;
  }
  std::atomic<bool> on_{true};
  std::atomic<bool> fail_suspend{false};  // the CUPTI call fails: records stay on
  std::atomic<int> suspends{0}, resumes{0};
};

// What the scripted sessions saw; shared by the test and every session of one backend.
struct Script {
  size_t num_passes = 1;
  // The call that fails: a session's "Plan", or a range-profiler call of ProfilerSession's
  // Do*: "Enable", "SizeImage", "InitImage", "SetConfig", "Start", "Stop", "PushRange",
  // "PopRange", "Decode", "Disable"; the session's "FlushL2"; or the backend's "Initialize",
  // "ChipName".
  std::string fail_call;
  int fail_after = 0;  // that many successful calls first
  // CUPTI_SUCCESS: the failure reads "<call> failed: scripted"; else it is the message kp
  // builds for that CUPTI result (inject/cupti/profiler_support.h).
  CUptiResult fail_result = CUPTI_SUCCESS;
  std::atomic<int> sessions_enabled{0};  // enabled and not (successfully) disabled
  std::atomic<int> sessions_created{0};
  std::atomic<int> calls_during_capture{0};
  std::atomic<bool> capture_open{false};  // set by the test strictly inside a capture
  std::atomic<int> pushes{0}, pops{0}, starts{0}, stops{0}, decodes{0}, flushes{0}, disables{0};
  // Non-empty: every FlushL2 reports that the driver's flush was refused for this reason (as
  // the real session does before it sweeps); the flush itself succeeds.
  std::string flush_fallback;
  std::atomic<int> set_configs{0};
  // kp's own kernel replay: the calls, and the replay kind of the latest Enable.
  std::atomic<int> syncs{0}, saves{0}, restores{0}, frees{0}, relaunches{0};
  std::atomic<bool> kernel_replay{false};
  std::atomic<int> plans{0};
  // Non-zero: the passes of a set that holds gpu__time_duration.sum (kernel mode adds it).
  size_t duration_passes = 0;
  std::atomic<int> describes{0};  // DescribeLaunch calls
  bool never_all_passes = false;  // Stop never says every pass was submitted
  // Kernel records (when the test gives the collector a switch): relaunches made while they
  // were on, and what runs inside each relaunch (another thread's launch, say).
  FakeKernelRecords* records = nullptr;
  std::atomic<int> relaunches_with_records{0};
  std::function<void()> on_relaunch;
  std::mutex mu;
  std::vector<std::string> pushed_names;
  class ScriptedSession* current = nullptr;  // the latest session (kernel mode's auto ranges)
  std::map<std::string, int> calls;          // per call name, under mu

  // The scripted error for `call`, or OK.
  Status Fails(const char* call) {
    if (fail_call != call) return Status();
    std::lock_guard<std::mutex> lock(mu);
    if (calls[call]++ < fail_after) return Status();
    const std::string name = std::string("cuptiRangeProfiler") + call;
    if (fail_result != CUPTI_SUCCESS) return CheckCuptiCall(name.c_str(), fail_result);
    return Status::Error(name + " failed: scripted");
  }
};

// The range profiler's calls, scripted; ProfilerSession (the code under test) keeps the state
// and disables what was enabled.
class ScriptedSession final : public ProfilerSession {
 public:
  explicit ScriptedSession(Script* s) : s_(s) {
    s_->current = this;
    ++s_->sessions_created;
  }
  ~ScriptedSession() override {
    Disable();
    if (s_->current == this) s_->current = nullptr;
  }

  // Kernel mode: CUPTI opens an auto range per kernel launched while the profiler runs,
  // numbered since it was enabled.
  // With user replay (kp's own kernel replay) the ranges are numbered within each pass, and a
  // further pass adds to the ranges of the first.
  void KernelLaunched() {
    std::lock_guard<std::mutex> lock(image_mu_);
    if (!running_) return;
    if (s_->kernel_replay) {
      image_.push_back(std::to_string(auto_ranges_++));
      return;
    }
    const std::string name = std::to_string(pass_ranges_++);
    if (std::find(image_.begin(), image_.end(), name) == image_.end()) image_.push_back(name);
  }

  StatusOr<SessionSetup> Plan(const std::vector<std::string>& metrics) override {
    if (Status s = s_->Fails("Plan"); !s.ok()) return s;
    ++s_->plans;
    SessionSetup setup;
    setup.chip = "GH100";
    setup.names = metrics;
    setup.num_passes = s_->num_passes;
    if (s_->duration_passes > 0 &&
        std::find(metrics.begin(), metrics.end(), "gpu__time_duration.sum") != metrics.end())
      setup.num_passes = s_->duration_passes;
    return setup;
  }
  Status FlushL2() override {
    ++s_->flushes;
    flush_fallback_ = s_->flush_fallback;
    return s_->Fails("FlushL2");
  }

 protected:
  Status DoEnable(RangeReplay replay, size_t) override {
    if (Status s = s_->Fails("Enable"); !s.ok()) return s;
    s_->kernel_replay = replay == RangeReplay::kAutoRangesKernelReplay;
    s_->current = this;  // the session in use (kernel mode may plan on another one first)
    EXPECT_FALSE(enabled_) << "enabled twice";
    enabled_ = true;
    ++s_->sessions_enabled;
    return Status();
  }
  Status DoSizeImage() override {
    EXPECT_TRUE(enabled_);
    return s_->Fails("SizeImage");
  }
  Status DoInitImage() override {
    EXPECT_TRUE(enabled_);
    return s_->Fails("InitImage");
  }
  Status DoSetConfig() override {
    EXPECT_TRUE(enabled_);
    ++s_->set_configs;
    pass_ = 0;  // SetConfig starts the pass cycle again (passIndex 0)
    return s_->Fails("SetConfig");
  }
  Status DoStart() override {
    Check();
    ++s_->starts;
    if (Status s = s_->Fails("Start"); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(image_mu_);
    running_ = true;
    pass_ranges_ = 0;
    return Status();
  }
  StatusOr<bool> DoStop() override {
    Check();
    ++s_->stops;
    {
      std::lock_guard<std::mutex> lock(image_mu_);
      running_ = false;
    }
    if (Status s = s_->Fails("Stop"); !s.ok()) return s;
    ++pass_;
    if (s_->never_all_passes) return false;
    return pass_ % s_->num_passes == 0;
  }
  Status DoPushRange(const std::string& name) override {
    Check();
    ++s_->pushes;
    if (Status s = s_->Fails("PushRange"); !s.ok()) return s;
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->pushed_names.push_back(name);
    }
    std::lock_guard<std::mutex> lock(image_mu_);
    bool seen = false;
    for (const auto& n : image_) seen |= n == name;
    if (!seen) image_.push_back(name);
    return Status();
  }
  Status DoPopRange() override {
    Check();
    ++s_->pops;
    return s_->Fails("PopRange");
  }
  StatusOr<std::vector<DecodedRange>> DoDecode(
      const std::function<bool(size_t, const std::string&)>& want, uint64_t*) override {
    Check();
    ++s_->decodes;
    if (Status s = s_->Fails("Decode"); !s.ok()) return s;
    std::vector<DecodedRange> out;
    std::lock_guard<std::mutex> lock(image_mu_);
    for (size_t i = 0; i < image_.size(); ++i) {
      if (!want(i, image_[i])) continue;
      DecodedRange d;
      d.index = i;
      d.name = image_[i];
      for (size_t m = 0; m < 3; ++m) d.values.push_back(static_cast<double>(m + 1));
      out.push_back(std::move(d));
    }
    image_.clear();
    return out;
  }
  Status DoSynchronizeContext() override {
    ++s_->syncs;
    return s_->Fails("Synchronize");
  }
  Status DoSaveMemory() override {
    ++s_->saves;
    saved_ = true;
    return s_->Fails("Save");
  }
  Status DoRestoreMemory() override {
    EXPECT_TRUE(saved_) << "restored without a save";
    ++s_->restores;
    return s_->Fails("Restore");
  }
  void DoFreeMemory() override {
    if (saved_) ++s_->frees;
    saved_ = false;
  }
  Status DoRelaunch(const KernelLaunch&) override {
    ++s_->relaunches;
    if (s_->records != nullptr && s_->records->on()) ++s_->relaunches_with_records;
    if (s_->on_relaunch) s_->on_relaunch();
    if (Status s = s_->Fails("Relaunch"); !s.ok()) return s;
    KernelLaunched();
    return Status();
  }
  KernelFacts DoDescribeLaunch(const KernelLaunch& launch) override {
    ++s_->describes;
    KernelFacts k;
    k.name = "described_kernel";
    for (int i = 0; i < 3; ++i) k.grid[i] = launch.grid[i], k.block[i] = launch.block[i];
    k.registers_per_thread = 40;
    k.stream_id = 13;
    return k;
  }
  Status DoDisable() override {
    EXPECT_TRUE(enabled_) << "disabled without being enabled";
    EXPECT_FALSE(disable_failed_) << "a failed disable retried";
    ++s_->disables;
    {
      std::lock_guard<std::mutex> lock(image_mu_);
      running_ = false;
    }
    if (Status s = s_->Fails("Disable"); !s.ok()) {
      disable_failed_ = true;
      return s;
    }
    enabled_ = false;
    --s_->sessions_enabled;
    return Status();
  }

 private:
  void Check() {
    if (s_->capture_open.load()) ++s_->calls_during_capture;
  }
  Script* s_;
  std::mutex image_mu_;
  bool running_ = false;
  uint64_t auto_ranges_ = 0;
  uint64_t pass_ranges_ = 0;  // user replay: auto ranges opened in this pass
  bool enabled_ = false;
  bool disable_failed_ = false;
  bool saved_ = false;
  uint64_t pass_ = 0;
  std::vector<std::string> image_;
};

class ScriptedBackend final : public ProfilerBackend {
 public:
  ScriptedBackend(Script* s, std::atomic<uint64_t>* clock) : s_(s), clock_(clock) {}
  std::unique_ptr<ProfilerSession> NewSession(CUcontext) override {
    return std::make_unique<ScriptedSession>(s_);
  }
  Status Initialize() override { return s_->Fails("Initialize"); }
  void DeInitialize() override {}
  CUcontext CurrentContext() override { return kCtx; }
  uint64_t Now() override { return clock_->fetch_add(10) + 10; }
  StatusOr<std::string> ChipName(uint32_t) override {
    if (Status s = s_->Fails("ChipName"); !s.ok()) return s;
    return std::string("GH100");
  }

 private:
  Script* s_;
  std::atomic<uint64_t>* clock_;
};

// One collector with its encoder output.
class Harness {
 public:
  // No L2 flush unless `cache` says otherwise.
  explicit Harness(Config config, MetricsCache cache = MetricsCache::kNone) {
    if (config.metrics.empty())
      config.metrics = {"dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"};
    config.metrics_cache = cache;
    StatusOr<std::unique_ptr<MetricsCollector>> created = MetricsCollector::CreateWithBackend(
        config,
        [this](std::function<void(TraceEncoder&)> task) {
          std::lock_guard<std::mutex> lock(mu_);
          tasks_.push_back(std::move(task));
        },
        std::make_unique<ScriptedBackend>(&script, &clock));
    EXPECT_TRUE(created.ok()) << created.status().message();
    if (created.ok()) collector_ = std::move(created.value());
    EXPECT_TRUE(collector_);
  }

  MetricsCollector& c() { return *collector_; }

  // Advances the trace clock (a long range).
  void Elapse(uint64_t ns) { clock.fetch_add(ns); }

  void Push(const char* message) {
    nvtxRangePushA_params p{message};
    CUpti_NvtxData d{};
    d.functionName = "nvtxRangePushA";
    d.functionParams = &p;
    collector_->OnNvtx(CUPTI_CBID_NVTX_nvtxRangePushA, &d);
  }
  void Pop() {
    CUpti_NvtxData d{};
    d.functionName = "nvtxRangePop";
    collector_->OnNvtx(CUPTI_CBID_NVTX_nvtxRangePop, &d);
  }
  nvtxDomainHandle_t CreateDomain(const char* name) {
    static int handles[8];
    static std::atomic<int> next{0};
    nvtxDomainHandle_t h = reinterpret_cast<nvtxDomainHandle_t>(&handles[next++ % 8]);
    nvtxDomainCreateA_params p{name};
    CUpti_NvtxData d{};
    d.functionParams = &p;
    d.functionReturnValue = &h;
    collector_->OnNvtx(CUPTI_CBID_NVTX_nvtxDomainCreateA, &d);
    return h;
  }
  void DomainPush(nvtxDomainHandle_t domain, const char* message) {
    nvtxEventAttributes_t attr{};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = message;
    nvtxDomainRangePushEx_params p{};
    p.domain = domain;
    p.core.eventAttrib = &attr;
    CUpti_NvtxData d{};
    d.functionParams = &p;
    collector_->OnNvtx(CUPTI_CBID_NVTX_nvtxDomainRangePushEx, &d);
  }
  void DomainPop(nvtxDomainHandle_t domain) {
    nvtxDomainRangePop_params p{domain};
    CUpti_NvtxData d{};
    d.functionParams = &p;
    collector_->OnNvtx(CUPTI_CBID_NVTX_nvtxDomainRangePop, &d);
  }
  // A cudaLaunchKernel call (ENTER and EXIT).
  void Launch(const char* symbol, uint32_t correlation) {
    CUpti_CallbackData d{};
    d.context = kCtx;
    d.symbolName = symbol;
    d.correlationId = correlation;
    d.callbackSite = CUPTI_API_ENTER;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_RUNTIME_API,
                         CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &d);
    if (script.current) script.current->KernelLaunched();
    d.callbackSite = CUPTI_API_EXIT;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_RUNTIME_API,
                         CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &d);
  }
  // A cudaLaunchKernel whose runtime callback has no symbol name, with the cuLaunchKernel
  // inside it that has one.
  void LaunchThroughDriver(const char* symbol, uint32_t correlation) {
    CUpti_CallbackData d{};
    d.context = kCtx;
    d.symbolName = "";
    d.correlationId = correlation;
    d.callbackSite = CUPTI_API_ENTER;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_RUNTIME_API,
                         CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &d);
    CUpti_CallbackData drv = d;
    drv.symbolName = symbol;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &drv);
    if (script.current) script.current->KernelLaunched();
    drv.callbackSite = CUPTI_API_EXIT;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &drv);
    d.callbackSite = CUPTI_API_EXIT;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_RUNTIME_API,
                         CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &d);
  }
  // kp's own kernel replay sees the driver launch: a cudaLaunchKernel (`via_runtime`) with the
  // cuLaunchKernel inside it, or a cuLaunchKernel alone (`correlation` is then the driver
  // call's). `params` false: the driver callback carries no parameters. `result`: what the
  // application's launch returned.
  void DriverLaunch(const char* symbol, uint32_t correlation, bool via_runtime = true,
                    bool params = true, CUresult result = CUDA_SUCCESS, CUcontext ctx = kCtx,
                    const char* runtime_symbol = nullptr) {
    static int function;
    cuLaunchKernel_params p{};
    p.f = reinterpret_cast<CUfunction>(&function);
    p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    CUpti_CallbackData rt{};
    rt.context = ctx;
    rt.symbolName = runtime_symbol ? runtime_symbol : symbol;
    rt.correlationId = correlation;
    rt.callbackSite = CUPTI_API_ENTER;
    if (via_runtime)
      collector_->OnLaunch(CUPTI_CB_DOMAIN_RUNTIME_API,
                           CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rt);
    CUpti_CallbackData drv{};
    drv.context = ctx;
    drv.symbolName = symbol;
    drv.correlationId = via_runtime ? correlation + 1000 : correlation;
    drv.functionParams = params ? &p : nullptr;
    drv.callbackSite = CUPTI_API_ENTER;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &drv);
    if (script.current && result == CUDA_SUCCESS) script.current->KernelLaunched();
    if (script.records != nullptr && script.records->on()) ++app_launches_with_records;
    drv.callbackSite = CUPTI_API_EXIT;
    drv.functionReturnValue = &result;
    collector_->OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &drv);
    rt.callbackSite = CUPTI_API_EXIT;
    if (via_runtime)
      collector_->OnLaunch(CUPTI_CB_DOMAIN_RUNTIME_API,
                           CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &rt);
  }
  // cudaStreamBeginCapture / cudaStreamEndCapture, as the runtime reports them (status 0).
  void Capture(bool begin, int site_mask = 3) {
    int status = 0;
    CUpti_CallbackData d{};
    d.functionReturnValue = &status;
    CUpti_CallbackId cbid = begin ? CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000
                                  : CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000;
    if (site_mask & 1) {
      d.callbackSite = CUPTI_API_ENTER;
      collector_->OnStreamCapture(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &d);
    }
    if (site_mask & 2) {
      d.callbackSite = CUPTI_API_EXIT;
      collector_->OnStreamCapture(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &d);
    }
  }

  // Shuts the collector down, runs every posted task on a real encoder and parses the trace.
  void Finish() {
    collector_->Shutdown();
    MemoryChunkSink sink;
    TraceEncoder encoder(&sink, TraceEncoder::Options());
    HeaderInfo header;
    header.kp_version = "test";
    encoder.SetHeader(header);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& t : tasks_) t(encoder);
    }
    FooterInfo footer;
    footer.end_reason = "test";
    encoder.Finish(footer);
    for (const auto& raw : sink.raw_chunks()) {
      Chunk chunk;
      ASSERT_TRUE(chunk.ParseFromArray(raw.data(), static_cast<int>(raw.size())));
      ASSERT_EQ(ExpandColumns(&chunk, UINT64_MAX), ColumnsResult::kOk);
      for (const auto& k : chunk.kernel_shapes()) shapes[k.id()] = k;
      for (const auto& k : chunk.kernels()) kernels.push_back(k);
      for (const auto& s : chunk.strings()) strings[s.id()] = s.value();
      for (const auto& r : chunk.metric_ranges()) ranges.push_back(r);
      for (const auto& c : chunk.metric_configs()) configs.push_back(c);
      for (const auto& n : chunk.notices()) notices.push_back(n.message());
      if (chunk.has_stats()) stats = chunk.stats();
    }
  }
  std::string Name(const MetricRange& r) const {
    auto it = strings.find(r.name());
    return it == strings.end() ? "" : it->second;
  }
  bool Noticed(const std::string& fragment) const { return NoticeCount(fragment) > 0; }
  int NoticeCount(const std::string& fragment) const {
    int count = 0;
    for (const auto& n : notices) count += n.find(fragment) != std::string::npos;
    return count;
  }

  // Gives the collector `script.records` as its kernel-record switch.
  void UseKernelRecords(FakeKernelRecords* records) {
    script.records = records;
    collector_->SetKernelRecords(records);
  }

  Script script;
  std::atomic<int> app_launches_with_records{0};  // DriverLaunch's kernels, records on
  std::atomic<uint64_t> clock{1000};
  std::vector<MetricRange> ranges;
  std::vector<MetricConfig> configs;
  std::vector<Kernel> kernels;  // kp's own kernel records (start is coded, not absolute)
  std::map<uint32_t, KernelShape> shapes;
  std::vector<std::string> notices;
  std::map<uint32_t, std::string> strings;
  Stats stats;

 private:
  std::mutex mu_;
  std::vector<std::function<void(TraceEncoder&)>> tasks_;
  std::unique_ptr<MetricsCollector> collector_;
};

Config RangeConfig(uint32_t skip) {
  Config c;
  c.metrics_mode = MetricsMode::kRange;
  c.metrics_skip = skip;
  return c;
}

// Runs `body` on a thread of its own (the collectors keep per-thread range stacks).
// The measured ranges' names, in posting order.
std::vector<std::string> Names(const Harness& h) {
  std::vector<std::string> names;
  for (const auto& r : h.ranges) names.push_back(h.Name(r));
  return names;
}

// The same, in name order (for measurements whose order between threads is not fixed).
std::vector<std::string> SortedNames(const Harness& h) {
  std::vector<std::string> names = Names(h);
  std::sort(names.begin(), names.end());
  return names;
}

template <typename F>
void OnThread(F body) {
  std::thread t(body);
  t.join();
}

// Runs `work` on one thread while another begins and ends captures as fast as it can (the
// scripted session counts any profiler call strictly inside a capture); then, on the same
// thread with the captures over, `after` (so that something is measured however the race
// went), and finishes `h`.
template <typename F, typename G>
void RaceWithCaptures(Harness* h, F work, G after) {
  std::atomic<bool> done{false}, captures_over{false};
  std::thread worker([&] {
    work();
    done = true;
    while (!captures_over.load()) std::this_thread::yield();
    after();
  });
  std::thread captures([&] {
    while (!done.load()) {
      h->Capture(true);
      h->script.capture_open = true;
      std::this_thread::yield();
      h->script.capture_open = false;
      h->Capture(false);
    }
    captures_over = true;
  });
  worker.join();
  captures.join();
  h->Finish();
}

TEST(RangeMode, SinglePassMeasuresEachOccurrenceAfterTheWarmUp) {
  Harness h(RangeConfig(/*skip=*/1));
  OnThread([&] {
    for (int i = 0; i < 5; ++i) {
      h.Push("step");
      h.Push("forward");  // nested: part of step's values, never measured on its own
      h.Pop();
      h.Pop();
    }
  });
  h.Finish();
  ASSERT_EQ(h.configs.size(), 1u);
  EXPECT_EQ(h.configs[0].skip(), 1u);
  ASSERT_EQ(h.ranges.size(), 4u);
  for (size_t i = 0; i < h.ranges.size(); ++i) {
    EXPECT_EQ(h.Name(h.ranges[i]), "step");
    EXPECT_EQ(h.ranges[i].occurrence(), i + 1);  // occurrence 0 was the warm-up
    EXPECT_EQ(h.ranges[i].occurrences_used(), 1u);
    EXPECT_FALSE(h.ranges[i].inconsistent());
    EXPECT_EQ(h.ranges[i].values_size(), 3);
  }
  EXPECT_EQ(h.script.pushed_names,
            (std::vector<std::string>{"step#1", "step#2", "step#3", "step#4"}));
  EXPECT_TRUE(h.Noticed("1 warm-up range occurrence(s) traced but not measured"));
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);
}

TEST(RangeMode, SkipZeroMeasuresTheFirstOccurrence) {
  Harness h(RangeConfig(/*skip=*/0));
  OnThread([&] {
    h.Push("step");
    h.Pop();
  });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.ranges[0].occurrence(), 0u);
}

TEST(RangeMode, MultiPassRotatesPassesOverRepeatedUnits) {
  Harness h(RangeConfig(/*skip=*/0));
  h.script.num_passes = 3;
  OnThread([&] {
    for (int step = 0; step < 7; ++step) {
      h.Push("forward");
      h.Pop();
      h.Push("backward");
      h.Pop();
    }
  });
  h.Finish();
  // 7 units: two full 3-pass cycles give one set per name each; the 7th pass is incomplete.
  ASSERT_EQ(h.ranges.size(), 4u);
  std::map<std::string, int> sets;
  for (const auto& r : h.ranges) {
    ++sets[h.Name(r)];
    EXPECT_EQ(r.occurrences_used(), 3u);
    EXPECT_GT(r.occurrence_max_ns(), 0u);
    EXPECT_FALSE(r.inconsistent());
  }
  EXPECT_EQ(sets["forward"], 2);
  EXPECT_EQ(sets["backward"], 2);
  EXPECT_EQ(h.script.starts.load(), 7);  // one Start per pass (unit)
  EXPECT_TRUE(h.Noticed("ended inside an unfinished pass cycle: 1 of the 3"));
}

TEST(RangeMode, MultiPassSetOfUnlikeOccurrencesIsFlagged) {
  Harness h(RangeConfig(/*skip=*/0));
  h.script.num_passes = 3;
  OnThread([&] {
    for (int step = 0; step < 6; ++step) {
      h.Push("step");
      h.Elapse(step == 0 ? 170'000'000 : 1'500'000);  // a warm-up-like first occurrence
      h.Pop();
    }
  });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 2u);
  EXPECT_TRUE(h.ranges[0].inconsistent());
  EXPECT_GE(h.ranges[0].occurrence_max_ns(), 170'000'000u);
  EXPECT_LT(h.ranges[0].occurrence_min_ns(), 2'000'000u);
  EXPECT_FALSE(h.ranges[1].inconsistent());
  EXPECT_LE(h.ranges[1].occurrence_max_ns() - h.ranges[1].occurrence_min_ns(), 1000u);
}

TEST(RangeMode, PopDuringCaptureIsDeferredAndItsValuesDropped) {
  Harness h(RangeConfig(/*skip=*/0));
  OnThread([&] {
    h.Push("step");
    h.Capture(/*begin=*/true);
    h.script.capture_open = true;
    h.Pop();         // deferred: nothing may touch the profiler now
    h.Push("step");  // not measured during the capture
    h.Pop();
    h.script.capture_open = false;
    h.Capture(/*begin=*/false);
    h.Push("step");  // closes the deferred range first, then measures this one
    h.Pop();
  });
  h.Finish();
  EXPECT_EQ(h.script.calls_during_capture.load(), 0);
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.ranges[0].occurrence(), 1u);
  EXPECT_EQ(h.script.pops.load(), 2);  // the deferred pop ran after the capture
  EXPECT_TRUE(h.Noticed("2 range(s) during CUDA-graph stream capture were not measured"));
}

TEST(RangeMode, CaptureBeginsAndEndsRacingWithRangesNeverTouchTheProfiler) {
  for (uint32_t passes : {1u, 2u}) {
    Harness h(RangeConfig(/*skip=*/0));
    h.script.num_passes = passes;
    auto steps = [&h](int n) {
      for (int i = 0; i < n; ++i) {
        h.Push("step");
        h.Push("inner");
        h.Pop();
        h.Pop();
      }
    };
    RaceWithCaptures(
        &h, [&] { steps(3000); }, [&] { steps(2 * static_cast<int>(passes) + 1); });
    EXPECT_EQ(h.script.calls_during_capture.load(), 0) << passes << " pass(es)";
    EXPECT_EQ(h.script.pushes.load(), h.script.pops.load());
    EXPECT_GT(h.ranges.size(), 0u);
    EXPECT_EQ(h.script.sessions_enabled.load(), 0);
  }
}

TEST(RangeMode, MeasuresTheLaunchingThreadAndNotLibraryDomains) {
  Harness h(RangeConfig(/*skip=*/0));
  std::atomic<int> phase{0};
  std::thread main_thread([&] {
    h.Launch("init_kernel", 1);  // this thread launches the GPU work
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    nvtxDomainHandle_t nccl = h.CreateDomain("NCCL");
    h.DomainPush(nccl, "ncclAllReduce");  // a library's range: not picked by default
    h.DomainPop(nccl);
    for (int i = 0; i < 3; ++i) {
      h.Push("step");
      h.Pop();
    }
  });
  std::thread helper([&] {
    while (phase.load() != 1) std::this_thread::yield();
    // A helper thread (no launches) opens a matching range first: not chosen.
    h.Push("proxy");
    h.Pop();
    phase = 2;
  });
  main_thread.join();
  helper.join();
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 3u);
  for (const auto& r : h.ranges) EXPECT_EQ(h.Name(r), "step");
  EXPECT_TRUE(
      h.Noticed("(the thread launching GPU work), from its range 'step' in the default "
                "NVTX domain"));
  EXPECT_TRUE(h.Noticed("1 matching range(s) on threads other than the measured one"));
}

TEST(RangeMode, ExplicitPatternsMayNameALibraryDomain) {
  Config config = RangeConfig(/*skip=*/0);
  config.metrics_ranges = {"NCCL::*"};
  Harness h(config);
  OnThread([&] {
    nvtxDomainHandle_t nccl = h.CreateDomain("NCCL");
    h.DomainPush(nccl, "ncclAllReduce");
    h.DomainPop(nccl);
  });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.Name(h.ranges[0]), "ncclAllReduce");
}

TEST(RangeMode, AFailedStartAtSetUpDisablesTheSessionAndTurnsMetricsOff) {
  Harness h(RangeConfig(/*skip=*/0));
  h.script.fail_call = "Start";
  testing::internal::CaptureStderr();
  OnThread([&] {
    h.Push("step");
    h.Pop();
    h.Push("step");
    h.Pop();
  });
  std::string err = testing::internal::GetCapturedStderr();
  h.Finish();
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);  // enabled, then disabled on the failure
  EXPECT_EQ(h.script.pushes.load(), 0);
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_NE(err.find("kp: metrics: cuptiRangeProfilerStart failed: scripted; metrics are off, "
                     "tracing goes on"),
            std::string::npos)
      << err;
  EXPECT_TRUE(h.Noticed("metrics are off"));
}

TEST(RangeMode, AFailedPopMidRunDisablesTheSession) {
  Harness h(RangeConfig(/*skip=*/0));
  h.script.fail_call = "PopRange";
  h.script.fail_after = 2;
  testing::internal::CaptureStderr();
  OnThread([&] {
    for (int i = 0; i < 5; ++i) {
      h.Push("step");
      h.Pop();
    }
  });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);
  h.Finish();
  EXPECT_EQ(h.script.pushes.load(), 3);  // nothing after the failure
  EXPECT_NE(err.find("cuptiRangeProfilerPopRange failed"), std::string::npos) << err;
}

TEST(RangeMode, AFailedEnableLeavesNothingEnabled) {
  Harness h(RangeConfig(/*skip=*/0));
  h.script.fail_call = "Enable";
  testing::internal::CaptureStderr();
  OnThread([&] {
    h.Push("step");
    h.Pop();
  });
  testing::internal::GetCapturedStderr();
  h.Finish();
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);
  EXPECT_TRUE(h.configs.empty());
}

// The start-up check runs the real Profiler Host API (libnvperf_host.so, dlopen'ed by libcupti
// with RTLD_DEEPBIND, which the sanitizers' runtimes cannot load: google/sanitizers#611).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif
#define REQUIRE_HOST_API()                                                                    \
  do {                                                                                        \
    if (kUnderSanitizer)                                                                      \
      GTEST_SKIP() << "libnvperf_host.so is loaded with RTLD_DEEPBIND, which the sanitizers " \
                      "cannot run (google/sanitizers#611); the plain build runs this test";   \
    const Status host_api =                                                                   \
        MetricHost::Create("GH100", CUPTI_PROFILER_TYPE_RANGE_PROFILER, {}).status();         \
    if (!host_api.ok())                                                                       \
      GTEST_SKIP() << "Profiler Host API unavailable here: " << host_api.message();           \
  } while (0)

TEST(StartupCheck, ABadNameAtTheFirstContextTurnsMetricsOffBeforeAnyRange) {
  REQUIRE_HOST_API();
  Config config = RangeConfig(/*skip=*/0);
  config.metrics = {"dram__bytes_read.sum", "dram__bytes_reed.sum"};
  Harness h(config);
  testing::internal::CaptureStderr();
  h.c().OnContextCreated(kCtx, 0);  // no range pushed yet, and none ever
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("kp: metrics: KP_METRICS: unknown metric 'dram__bytes_reed.sum' for GH100"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("did you mean 'dram__bytes_read.sum'"), std::string::npos) << err;
  EXPECT_NE(err.find("metrics are off, tracing goes on"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;  // one line
  OnThread([&] {
    h.Push("step");
    h.Pop();
  });
  h.Finish();
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_EQ(h.script.starts.load(), 0);  // never set up
  EXPECT_TRUE(h.Noticed("unknown metric 'dram__bytes_reed.sum'"));
}

TEST(StartupCheck, GoodNamesPassAndMeasurementGoesOn) {
  REQUIRE_HOST_API();
  Harness h(RangeConfig(/*skip=*/0));
  testing::internal::CaptureStderr();
  h.c().OnContextCreated(kCtx, 0);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  OnThread([&] {
    h.Push("step");
    h.Pop();
  });
  h.Finish();
  EXPECT_EQ(h.ranges.size(), 1u);
}

Config KernelConfig() {
  Config c;
  c.metrics_mode = MetricsMode::kKernel;
  return c;
}

// Kernel mode with a one-pass set without gpu__time_duration.sum; with `h.script.duration_passes
// = 2` adding it would make two passes, so kernels measured with kernel records on are relaunched.
Config KernelConfigWithoutTime() {
  Config c = KernelConfig();
  c.metrics = {"dram__bytes_read.sum", "dram__bytes_write.sum"};
  return c;
}

TEST(KernelMode, BatchesLaunchesInOrder) {
  Harness h(KernelConfig());
  OnThread([&] {
    for (uint32_t i = 0; i < 40; ++i) h.Launch(i % 2 ? "odd" : "even", 100 + i);
  });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 40u);
  for (uint32_t i = 0; i < 40; ++i) {
    EXPECT_EQ(h.ranges[i].occurrence(), i);
    EXPECT_EQ(h.ranges[i].correlation(), static_cast<int64_t>(100 + i));
    EXPECT_EQ(h.Name(h.ranges[i]), i % 2 ? "odd" : "even");
  }
  EXPECT_EQ(h.configs[0].skip(), 0u);  // warm-up skip is range mode's
}

TEST(KernelMode, CaptureBeginOnlyStopsTheBatchAndLaunchesDuringItAreNotMeasured) {
  Harness h(KernelConfig());
  OnThread([&] {
    h.Launch("a", 1);
    h.Launch("b", 2);
    int decodes_before = h.script.decodes.load();
    h.Capture(true);
    EXPECT_EQ(h.script.decodes.load(), decodes_before);  // no decode inside the begin callback
    h.script.capture_open = true;
    h.Launch("captured", 3);
    h.script.capture_open = false;
    h.Capture(false);
    h.Launch("c", 4);
  });
  h.Finish();
  EXPECT_EQ(h.script.calls_during_capture.load(), 0);
  EXPECT_EQ(Names(h), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(h.Noticed("1 kernel launch(es) during CUDA-graph stream capture"));
}

TEST(KernelMode, CaptureRacesWithLaunches) {
  Harness h(KernelConfig());
  RaceWithCaptures(
      &h,
      [&] {
        for (uint32_t i = 0; i < 5000; ++i) h.Launch("k", i);
      },
      [&] { h.Launch("k", 5000); });
  EXPECT_EQ(h.script.calls_during_capture.load(), 0);
  EXPECT_GT(h.ranges.size(), 0u);
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);
}

// --- kernel targeting (kernel_selector.h) ---

std::vector<int64_t> Correlations(const Harness& h) {
  std::vector<int64_t> ids;
  for (const auto& r : h.ranges) ids.push_back(r.correlation());
  return ids;
}

// Kernel mode with a name filter, a launch skip and a launch count (global scope).
Config Targeting(const char* kernels, uint64_t skip, uint64_t count) {
  Config c = KernelConfig();
  c.metrics_kernels = kernels;
  c.metrics_launch_skip = skip;
  c.metrics_launch_count = count;
  return c;
}

TEST(KernelTargeting, RegexSkipAndCountMeasureExactlyTheSelectedLaunchesThenTearDown) {
  Harness h(Targeting("regex:gemm", 3, 2));
  OnThread([&] {
    // gemm launches have correlation 100+i, relu 200+i.
    for (uint32_t i = 0; i < 10; ++i) {
      h.Launch("sgemm_128x64", 100 + i);
      int starts = h.script.starts.load(), stops = h.script.stops.load();
      int decodes = h.script.decodes.load();
      h.Launch("relu_kernel", 200 + i);
      // A launch not selected at most stops a running profiler: no start, no decode; except
      // the one after the count is reached (i = 4), which flushes and disables the profiler.
      EXPECT_EQ(h.script.starts.load(), starts);
      EXPECT_EQ(h.script.decodes.load(), decodes + (i == 4 ? 1 : 0)) << i;
      EXPECT_LE(h.script.stops.load(), stops + 1);
    }
    // The count was reached: every profiler was flushed and disabled at the next launch.
    EXPECT_EQ(h.script.sessions_enabled.load(), 0);
  });
  int starts = h.script.starts.load(), stops = h.script.stops.load();
  h.Finish();
  EXPECT_EQ(Names(h), (std::vector<std::string>{"sgemm_128x64", "sgemm_128x64"}));
  EXPECT_EQ(Correlations(h), (std::vector<int64_t>{103, 104}));
  for (const auto& r : h.ranges) EXPECT_EQ(r.values_size(), 3);
  EXPECT_EQ(starts, 2);  // one start per selected launch (a relu launch stopped the first)
  EXPECT_EQ(stops, 2);
  EXPECT_EQ(h.script.starts.load(), starts);  // nothing after the tear-down
  EXPECT_EQ(h.script.sessions_created.load(), 1);
  EXPECT_TRUE(
      h.Noticed("kernel selection complete (KP_METRICS_KERNELS=regex:gemm, "
                "KP_METRICS_LAUNCH_SKIP=3, KP_METRICS_LAUNCH_COUNT=2): 2 launch(es) "
                "measured"));
}

TEST(KernelTargeting, ConsecutiveSelectedLaunchesShareOneStart) {
  Config c = KernelConfig();
  c.metrics_kernels = "regex:^k";
  Harness h(c);
  OnThread([&] {
    for (uint32_t i = 0; i < 20; ++i) h.Launch("k", i);
    h.Launch("other", 20);
    h.Launch("k", 21);
  });
  h.Finish();
  EXPECT_EQ(h.ranges.size(), 21u);
  EXPECT_EQ(h.ranges.back().correlation(), 21);
  // 20 launches: one start, a batch boundary at 16 (stop, decode, start), the other kernel
  // stops, the last k starts again.
  EXPECT_EQ(h.script.starts.load(), 3);
}

TEST(KernelTargeting, UnselectedLaunchesNeverTouchTheProfiler) {
  Config c = KernelConfig();
  c.metrics_kernels = "regex:no_such_kernel";
  Harness h(c);
  OnThread([&] {
    for (uint32_t i = 0; i < 100; ++i) h.Launch(i % 2 ? "a" : "b", i);
  });
  h.Finish();
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_EQ(h.script.sessions_created.load(), 0);  // not even set up
  EXPECT_EQ(h.script.starts.load(), 0);
  EXPECT_TRUE(h.configs.empty());
  EXPECT_TRUE(
      h.Noticed("no kernel launch was selected by KP_METRICS_KERNELS=regex:no_such_kernel "
                "(100 launch(es) seen, 0 passed the name and NVTX filters)"));
}

TEST(KernelTargeting, TheNoSelectionWarningGoesThroughTheLogSink) {
  for (LogLevel level : {LogLevel::kInfo, LogLevel::kQuiet}) {
    Config c = KernelConfig();
    c.metrics_kernels = "regex:no_such_kernel";
    Harness h(c);
    SetLogLevel(level);
    testing::internal::CaptureStderr();
    OnThread([&] { h.Launch("a", 1); });
    h.Finish();
    const std::string err = testing::internal::GetCapturedStderr();
    SetLogLevel(LogLevel::kInfo);
    EXPECT_EQ(err, level == LogLevel::kQuiet
                       ? ""
                       : "kp: metrics: no kernel launch was selected by "
                         "KP_METRICS_KERNELS=regex:no_such_kernel (1 launch(es) seen, 0 passed "
                         "the name and NVTX filters)\n");
    EXPECT_TRUE(h.Noticed("no kernel launch was selected"));  // in the trace either way
  }
}

TEST(KernelTargeting, PerNameSkipAndCount) {
  Config c = KernelConfig();
  c.metrics_launch_skip = 1;
  c.metrics_launch_count = 2;
  c.metrics_launch_per_name = true;
  Harness h(c);
  OnThread([&] {
    uint32_t corr = 0;
    for (int round = 0; round < 5; ++round)
      for (const char* name : {"a", "b", "c"}) h.Launch(name, corr++);
  });
  h.Finish();
  // Each name: its first launch skipped, the next two measured, the rest not.
  EXPECT_EQ(Names(h), (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
  EXPECT_EQ(Correlations(h), (std::vector<int64_t>{3, 4, 5, 6, 7, 8}));
}

TEST(KernelTargeting, ExactNameMatchesMangledDemangledAndBaseNames) {
  EXPECT_EQ(DemangleKernelName("_ZN2at6native4gemmILi4EEEvPf"), "void at::native::gemm<4>(float*)");
  EXPECT_EQ(KernelBaseName("void at::native::gemm<4>(float*)"), "gemm");
  EXPECT_EQ(KernelBaseName("void (anonymous namespace)::k<(int)1>(int)"), "k");
  EXPECT_EQ(KernelBaseName("gemm(float*, int)"), "gemm");
  EXPECT_EQ(KernelBaseName("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(DemangleKernelName("plain_c_kernel"), "plain_c_kernel");

  for (const char* filter : {"gemm", "_Z4gemmPfi", "gemm(float*, int)"}) {
    Config c = KernelConfig();
    c.metrics_kernels = filter;
    Harness h(c);
    OnThread([&] {
      h.Launch("_Z4gemmPfi", 1);
      h.Launch("_Z5gemm2Pf", 2);  // gemm2: a longer name, not the same kernel
      h.Launch("_ZN2at6native4gemmILi4EEEvPf", 3);
    });
    h.Finish();
    if (std::string(filter) == "gemm")
      EXPECT_EQ(Correlations(h), (std::vector<int64_t>{1, 3})) << filter;
    else
      EXPECT_EQ(Correlations(h), (std::vector<int64_t>{1})) << filter;
  }
  // A regex searches the demangled name too.
  Config c = KernelConfig();
  c.metrics_kernels = "regex:at::native::gemm<";
  Harness h(c);
  OnThread([&] {
    h.Launch("_Z4gemmPfi", 1);
    h.Launch("_ZN2at6native4gemmILi4EEEvPf", 2);
  });
  h.Finish();
  EXPECT_EQ(Correlations(h), (std::vector<int64_t>{2}));
}

TEST(KernelTargeting, SkipBeforeMatchCountsEveryLaunch) {
  Config c = Targeting("regex:^k$", 0, 1);
  c.metrics_launch_skip_before_match = 3;
  Harness h(c);
  OnThread([&] {
    h.Launch("k", 1);  // 1st launch: before the match window
    h.Launch("x", 2);  // 2nd
    h.Launch("k", 3);  // 3rd
    h.Launch("x", 4);  // filtered out
    h.Launch("k", 5);  // the first match: measured
    h.Launch("k", 6);  // count reached
  });
  h.Finish();
  EXPECT_EQ(Correlations(h), (std::vector<int64_t>{5}));
}

TEST(KernelTargeting, NvtxIncludeMeasuresOnlyInsideMatchingRangesOfTheLaunchingThread) {
  Config c = KernelConfig();
  c.metrics_nvtx_include = {"step*", "torch::opt"};
  Harness h(c);
  EXPECT_TRUE(h.c().wants_nvtx_callbacks());
  OnThread([&] {
    h.Launch("k", 1);  // outside
    h.Push("step 1");
    h.Launch("k", 2);
    h.Push("inner");  // nested inside a matching range: still selected
    h.Launch("k", 3);
    h.Pop();
    h.Pop();
    h.Launch("k", 4);  // outside again
    h.Push("warmup");
    h.Launch("k", 5);
    h.Pop();
    nvtxDomainHandle_t torch = h.CreateDomain("torch");
    h.DomainPush(torch, "opt");
    h.Launch("k", 6);
    h.DomainPop(torch);
    h.Push("opt");  // the default domain: "torch::opt" does not match it
    h.Launch("k", 7);
    h.Pop();
  });
  // Another thread's open range does not select this thread's launches.
  std::atomic<bool> pushed{false}, launched{false};
  std::thread other([&] {
    h.Push("step 2");
    pushed = true;
    while (!launched.load()) std::this_thread::yield();
    h.Pop();
  });
  while (!pushed.load()) std::this_thread::yield();
  OnThread([&] { h.Launch("k", 8); });
  launched = true;
  other.join();
  h.Finish();
  EXPECT_EQ(Correlations(h), (std::vector<int64_t>{2, 3, 6}));
}

TEST(KernelTargeting, RuntimeLaunchWithoutANameIsDecidedAtTheDriverLaunch) {
  Config c = KernelConfig();
  c.metrics_kernels = "wanted";
  Harness h(c);
  OnThread([&] {
    h.LaunchThroughDriver("other", 1);
    h.LaunchThroughDriver("wanted", 2);
    h.Launch("wanted", 3);
    h.LaunchThroughDriver("other", 4);
  });
  h.Finish();
  EXPECT_EQ(Names(h), (std::vector<std::string>{"wanted", "wanted"}));
  EXPECT_EQ(Correlations(h), (std::vector<int64_t>{2, 3}));
}

TEST(KernelTargeting, NoTargetingMeasuresEveryLaunchAsBefore) {
  Config c = KernelConfig();
  c.metrics_launch_per_name = false;
  Harness h(c);
  EXPECT_FALSE(h.c().wants_nvtx_callbacks());
  OnThread([&] {
    for (uint32_t i = 0; i < 5; ++i) h.LaunchThroughDriver("k", i);
  });
  h.Finish();
  EXPECT_EQ(h.ranges.size(), 5u);
  for (const auto& r : h.ranges) EXPECT_EQ(h.Name(r), "k");  // the driver's name filled in
}

// --- failures at each range-profiler call ---

// The one line a failure prints (KP_LOG=info): one "kp:", the call, "metrics are off".
std::string FailureLine(const std::string& call) {
  return "kp: metrics: cuptiRangeProfiler" + call +
         " failed: scripted; metrics are off, tracing goes on\n";
}

TEST(ProfilerSession, AFailedStepOfEnableDisablesWhatWasEnabled) {
  for (const std::string call : {"Enable", "SizeImage", "InitImage", "SetConfig"}) {
    Script script;
    script.fail_call = call;
    {
      ScriptedSession session(&script);
      const Status enabled = session.Enable(RangeReplay::kUserRangesUserReplay, 8);
      EXPECT_EQ(enabled.message(), "cuptiRangeProfiler" + call + " failed: scripted");
      EXPECT_FALSE(session.enabled()) << call;
      EXPECT_EQ(script.sessions_enabled.load(), 0) << call;
      EXPECT_EQ(script.disables.load(), call == "Enable" ? 0 : 1) << call;
    }
    EXPECT_EQ(script.disables.load(), call == "Enable" ? 0 : 1) << call;  // not again
  }
}

TEST(ProfilerSession, DestroyingAStartedSessionStopsAndDisablesItOnce) {
  Script script;
  {
    ScriptedSession session(&script);
    ASSERT_TRUE(session.Enable(RangeReplay::kUserRangesUserReplay, 8).ok());
    ASSERT_TRUE(session.Start().ok());
    EXPECT_TRUE(session.started());
    session.Disable();
    session.Disable();
  }
  EXPECT_EQ(script.stops.load(), 1);
  EXPECT_EQ(script.disables.load(), 1);
  EXPECT_EQ(script.sessions_enabled.load(), 0);
}

TEST(ProfilerSession, FailedStartAndStopLeaveItStopped) {
  Script script;
  script.fail_call = "Start";
  {
    ScriptedSession session(&script);
    ASSERT_TRUE(session.Enable(RangeReplay::kUserRangesUserReplay, 8).ok());
    EXPECT_FALSE(session.Start().ok());
    EXPECT_FALSE(session.started());
  }
  EXPECT_EQ(script.stops.load(), 0);  // never started: nothing to stop
  EXPECT_EQ(script.sessions_enabled.load(), 0);
  script.fail_call = "Stop";
  {
    ScriptedSession session(&script);
    ASSERT_TRUE(session.Enable(RangeReplay::kUserRangesUserReplay, 8).ok());
    ASSERT_TRUE(session.Start().ok());
    const StatusOr<bool> stopped = session.Stop();
    EXPECT_EQ(stopped.status().message(), "cuptiRangeProfilerStop failed: scripted");
    EXPECT_FALSE(session.started());
  }
  EXPECT_EQ(script.stops.load(), 1);  // not stopped again by the disable
  EXPECT_EQ(script.sessions_enabled.load(), 0);
}

TEST(ProfilerSession, AFailedReArmAfterADecodeIsTheDecodesError) {
  Script script;
  script.fail_call = "SetConfig";
  script.fail_after = 1;  // the set-up's SetConfig works, the re-arm's fails
  ScriptedSession session(&script);
  ASSERT_TRUE(session.Enable(RangeReplay::kUserRangesUserReplay, 8).ok());
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(session.PushRange("step").ok());
  ASSERT_TRUE(session.PopRange().ok());
  ASSERT_TRUE(session.Stop().ok());
  uint64_t dropped = 0;
  const StatusOr<std::vector<DecodedRange>> decoded =
      session.Decode([](size_t, const std::string&) { return true; }, &dropped);
  EXPECT_EQ(decoded.status().message(), "cuptiRangeProfilerSetConfig failed: scripted");
  EXPECT_EQ(script.set_configs.load(), 2);
  EXPECT_EQ(session.times(SessionCall::kDecode).count, 1u);
  EXPECT_EQ(session.times(SessionCall::kRearm).count, 1u);
}

TEST(ProfilerSession, AFailedDisableIsNotRetried) {
  Script script;
  script.fail_call = "Disable";
  {
    ScriptedSession session(&script);
    ASSERT_TRUE(session.Enable(RangeReplay::kUserRangesUserReplay, 8).ok());
    session.Disable();
    EXPECT_FALSE(session.enabled());
  }
  EXPECT_EQ(script.disables.load(), 1);
}

// `steps` push/pop pairs of range "step" (range mode) or launches of kernel "k" (kernel mode:
// `kernels`), on a thread of their own, with `call` failing after `after` successful calls;
// then finishes `h` and returns what was printed on stderr.
std::string RunFailing(Harness& h, const std::string& call, int steps, int after = 0,
                       bool kernels = false) {
  h.script.fail_call = call;
  h.script.fail_after = after;
  testing::internal::CaptureStderr();
  OnThread([&] {
    for (int i = 0; i < steps; ++i) {
      if (kernels) {
        h.Launch("k", static_cast<uint32_t>(i));
        continue;
      }
      h.Push("step");
      h.Pop();
    }
  });
  h.Finish();
  return testing::internal::GetCapturedStderr();
}

TEST(RangeMode, AFailureAtEachSetUpStepDisablesTheSessionWithOneLine) {
  for (const std::string call :
       {"Initialize", "Plan", "Enable", "SizeImage", "InitImage", "SetConfig", "Start"}) {
    Harness h(RangeConfig(/*skip=*/0));
    EXPECT_EQ(RunFailing(h, call, /*steps=*/2), FailureLine(call));
    const bool enabled = call != "Initialize" && call != "Plan" && call != "Enable";
    EXPECT_EQ(h.script.disables.load(), enabled ? 1 : 0) << call;
    EXPECT_EQ(h.script.sessions_enabled.load(), 0) << call;
    EXPECT_EQ(h.script.sessions_created.load(), call == "Initialize" ? 0 : 1) << call;
    EXPECT_EQ(h.script.pushes.load(), 0) << call;
    EXPECT_TRUE(h.configs.empty()) << call;
    EXPECT_TRUE(h.ranges.empty()) << call;
    EXPECT_TRUE(h.Noticed("cuptiRangeProfiler" + call + " failed: scripted; metrics are off"))
        << call;
  }
}

// A failure after set-up: the session is disabled once, metrics go off with one line, and
// nothing touches the profiler after it.
void ExpectFailedMidRun(Harness& h, const std::string& call, const std::string& err) {
  EXPECT_EQ(err, FailureLine(call));
  EXPECT_EQ(h.script.disables.load(), 1) << call;
  EXPECT_EQ(h.script.sessions_enabled.load(), 0) << call;
  EXPECT_EQ(h.configs.size(), 1u) << call;
  EXPECT_TRUE(h.Noticed("cuptiRangeProfiler" + call + " failed: scripted; metrics are off"))
      << call;
}

TEST(RangeMode, AFailedPushMidRunDisablesTheSession) {
  Harness h(RangeConfig(/*skip=*/0));
  ExpectFailedMidRun(h, "PushRange", RunFailing(h, "PushRange", /*steps=*/4, /*after=*/1));
  EXPECT_EQ(h.script.pushes.load(), 2);
  EXPECT_EQ(h.script.pops.load(), 1);
  EXPECT_TRUE(h.ranges.empty());  // the pending range went with the session
}

TEST(RangeMode, AFailedStopOrDecodeAtTheFinalFlushIsSaid) {
  for (const std::string call : {"Stop", "Decode"}) {
    Harness h(RangeConfig(/*skip=*/0));
    ExpectFailedMidRun(h, call, RunFailing(h, call, /*steps=*/1));
    EXPECT_EQ(h.script.stops.load(), 1) << call;
    EXPECT_TRUE(h.ranges.empty()) << call;
  }
}

TEST(KernelMode, AFailedStopOrDecodeAtTheFinalFlushIsSaid) {
  for (const std::string call : {"Stop", "Decode"}) {
    Harness h(KernelConfig());
    ExpectFailedMidRun(h, call, RunFailing(h, call, /*steps=*/3, /*after=*/0, /*kernels=*/true));
    EXPECT_TRUE(h.ranges.empty()) << call;
  }
}

TEST(RangeMode, AFailedDecodeOrReArmAtTheEndOfAMultiPassCycleDisablesTheSession) {
  for (const std::string call : {"Decode", "SetConfig"}) {
    Harness h(RangeConfig(/*skip=*/0));
    h.script.num_passes = 2;
    const int after = call == "SetConfig" ? 1 : 0;  // the re-arm after the decode
    ExpectFailedMidRun(h, call, RunFailing(h, call, /*steps=*/5, after));
    EXPECT_EQ(h.script.decodes.load(), 1) << call;
    EXPECT_EQ(h.script.pushes.load(), 2) << call;  // two passes, then the cycle's decode
    EXPECT_TRUE(h.ranges.empty()) << call;
  }
}

TEST(RangeMode, AFailedDeferredPopAfterACaptureDisablesTheSession) {
  Harness h(RangeConfig(/*skip=*/0));
  testing::internal::CaptureStderr();
  OnThread([&] {
    h.Push("step");
    h.Capture(/*begin=*/true);
    h.Pop();  // deferred
    h.Capture(/*begin=*/false);
    h.script.fail_call = "PopRange";
    h.Push("step");  // closes the deferred range first: that pop fails
    h.Pop();
  });
  h.Finish();
  ExpectFailedMidRun(h, "PopRange", testing::internal::GetCapturedStderr());
  EXPECT_EQ(h.script.pushes.load(), 1);
  EXPECT_EQ(h.script.pops.load(), 1);
}

TEST(RangeMode, AFailedDisableKeepsTheResultsAndPrintsNothing) {
  Harness h(RangeConfig(/*skip=*/0));
  EXPECT_EQ(RunFailing(h, "Disable", /*steps=*/3), "");  // KP_LOG=debug shows it
  EXPECT_EQ(h.ranges.size(), 3u);
  EXPECT_EQ(h.script.disables.load(), 1);  // at the final flush (the session never retries)
  EXPECT_FALSE(h.Noticed("metrics are off"));
}

TEST(RangeMode, AFailedL2FlushIsAWarningOnceAndRangesAreStillMeasured) {
  for (MetricsCache cache : {MetricsCache::kPass, MetricsCache::kRange}) {
    Harness h(RangeConfig(/*skip=*/0), cache);
    EXPECT_EQ(RunFailing(h, "FlushL2", /*steps=*/3),
              "kp: metrics: cuptiRangeProfilerFlushL2 failed: scripted; ranges are measured "
              "without it from here on (the first range after each range-profiler start can then "
              "read ~30 MB more dram writes)\n");
    EXPECT_EQ(h.script.flushes.load(), 1);  // not tried again
    EXPECT_EQ(h.ranges.size(), 3u);
    EXPECT_TRUE(h.Noticed("cuptiRangeProfilerFlushL2 failed: scripted; ranges are measured"));
    EXPECT_FALSE(h.Noticed("metrics are off"));
  }
}

TEST(RangeMode, TheL2FlushRunsAfterEachStartOrBeforeEachRange) {
  for (MetricsCache cache : {MetricsCache::kPass, MetricsCache::kRange}) {
    Harness h(RangeConfig(/*skip=*/0), cache);
    h.script.num_passes = 2;
    EXPECT_EQ(RunFailing(h, /*call=*/"", /*steps=*/4), "");  // nothing fails
    EXPECT_EQ(h.script.starts.load(), 4);                    // one per pass
    EXPECT_EQ(h.script.flushes.load(), 4);  // pass: after each Start; range: before each range
    EXPECT_EQ(h.ranges.size(), 2u);
  }
}

TEST(RangeMode, ADriverFlushFallbackIsOneWarningLineAndOneTraceNotice) {
  for (MetricsCache cache : {MetricsCache::kPass, MetricsCache::kRange}) {
    Harness h(RangeConfig(/*skip=*/0), cache);
    h.script.flush_fallback = "driver L2 flush: opening /dev/nvidiactl: Permission denied";
    const std::string line =
        "driver L2 flush: opening /dev/nvidiactl: Permission denied; kp empties the L2 with its "
        "own sweep instead, whose L2 (lts__t_*) counts can read a few percent below ncu's "
        "(docs/metrics.md#l2-flush)";
    EXPECT_EQ(RunFailing(h, /*call=*/"", /*steps=*/3), "kp: metrics: " + line + "\n");
    EXPECT_EQ(h.ranges.size(), 3u);  // measured all the same
    EXPECT_EQ(h.NoticeCount(line), 1);
    EXPECT_FALSE(h.Noticed("metrics are off"));
  }
}

TEST(KernelModeOwnReplay, ADriverFlushFallbackIsOneWarningLineAndOneTraceNotice) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  h.script.flush_fallback = "driver L2 flush: flushing the L2: the driver answered status 0x56";
  const std::string line =
      "driver L2 flush: flushing the L2: the driver answered status 0x56; kp empties the L2 with "
      "its own sweep instead, whose L2 (lts__t_*) counts can read a few percent below ncu's "
      "(docs/metrics.md#l2-flush)";
  testing::internal::CaptureStderr();
  OnThread([&] {
    for (uint32_t i = 1; i <= 3; ++i) h.DriverLaunch("gemm", i);
  });
  h.Finish();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "kp: metrics: " + line + "\n");
  EXPECT_EQ(h.script.flushes.load(), 3);
  EXPECT_EQ(h.ranges.size(), 3u);
  EXPECT_EQ(h.NoticeCount(line), 1);
}

// What a range-mode run whose Enable fails with CUPTI's `result` prints on stderr.
std::string StderrOfAnEnableFailingWith(CUptiResult result) {
  Harness h(RangeConfig(/*skip=*/0));
  h.script.fail_result = result;
  return RunFailing(h, "Enable", /*steps=*/1);
}

TEST(RangeMode, ACounterPermissionErrorPrintsTheFixOnce) {
  const std::string err = StderrOfAnEnableFailingWith(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  EXPECT_EQ(err.rfind("kp: metrics: cuptiRangeProfilerEnable failed: ", 0), 0u) << err;
  EXPECT_NE(err.find("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), std::string::npos) << err;
  EXPECT_NE(err.find(": no permission to read GPU performance counters (ERR_NVGPUCTRPERM): run "
                     "as root or with CAP_SYS_ADMIN"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("; metrics are off, tracing goes on\n"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(err.find("kp:", 1), std::string::npos) << err;
  EXPECT_EQ(err.find("ERR_NVGPUCTRPERM"), err.rfind("ERR_NVGPUCTRPERM")) << err;
}

TEST(RangeMode, HardwareBusyNamesTheCodeAndTheOtherSession) {
  const std::string err = StderrOfAnEnableFailingWith(CUPTI_ERROR_HARDWARE_BUSY);
  // What tests/gpu/run_metrics_tests.sh looks for in the second rank's stderr.
  EXPECT_NE(err.find("kp: metrics: cuptiRangeProfilerEnable failed: CUPTI_ERROR_HARDWARE_BUSY"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("another profiler"), std::string::npos) << err;
  EXPECT_NE(err.find("; metrics are off, tracing goes on\n"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(RangeMode, AFailedChipLookupAtTheFirstContextTurnsMetricsOff) {
  Harness h(RangeConfig(/*skip=*/0));
  h.script.fail_call = "ChipName";
  testing::internal::CaptureStderr();
  h.c().OnContextCreated(kCtx, 0);
  OnThread([&] {
    h.Push("step");
    h.Pop();
  });
  h.Finish();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), FailureLine("ChipName"));
  EXPECT_EQ(h.script.sessions_created.load(), 0);
  EXPECT_TRUE(h.ranges.empty());
}

TEST(KernelMode, AFailureAtEachCallDisablesTheSessionWithOneLine) {
  // Start: the first launch; Stop and Decode: the batch boundary (launch 17).
  for (const std::string call : {"Start", "Stop", "Decode"}) {
    Harness h(KernelConfig());
    ExpectFailedMidRun(h, call, RunFailing(h, call, /*steps=*/40, /*after=*/0, /*kernels=*/true));
    EXPECT_TRUE(h.ranges.empty()) << call;
    EXPECT_EQ(h.script.starts.load(), 1) << call;
  }
}

TEST(KernelMode, AFailedStopAtACaptureBeginDisablesTheSession) {
  Harness h(KernelConfig());
  testing::internal::CaptureStderr();
  OnThread([&] {
    h.Launch("k", 1);
    h.script.fail_call = "Stop";
    h.Capture(/*begin=*/true);
    h.Capture(/*begin=*/false);
    h.Launch("k", 2);
  });
  h.Finish();
  ExpectFailedMidRun(h, "Stop", testing::internal::GetCapturedStderr());
  EXPECT_EQ(h.script.stops.load(), 1);
  EXPECT_EQ(h.script.starts.load(), 1);
}

TEST(KernelMode, AFailedDisableKeepsTheResultsAndPrintsNothing) {
  Harness h(KernelConfig());
  EXPECT_EQ(RunFailing(h, "Disable", /*steps=*/3, /*after=*/0, /*kernels=*/true), "");
  EXPECT_EQ(h.ranges.size(), 3u);
  EXPECT_EQ(h.script.disables.load(), 1);
}

TEST(MetricsCollectorCreate, NoMetricsIsNoCollectorAndBadNamesAreOneLine) {
  Config none;
  StatusOr<std::unique_ptr<MetricsCollector>> created = MetricsCollector::CreateWithBackend(
      none, [](auto) {}, nullptr);
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(created.value() == nullptr);

  Config bad;
  bad.metrics = {"dram__bytes_read.sum,Dram__bytes.sum"};
  created = MetricsCollector::CreateWithBackend(
      bad, [](auto) {}, nullptr);
  EXPECT_EQ(created.status().message(),
            "KP_METRICS: unknown metric 'Dram__bytes.sum': invalid character 'D' (metric names use "
            "lower-case letters, digits, '_' and '.') (kptrace metrics list --chip <chip> lists "
            "valid names)");

  Config empty;
  empty.metrics = {" , "};
  created = MetricsCollector::CreateWithBackend(
      empty, [](auto) {}, nullptr);
  EXPECT_EQ(created.status().message(), "KP_METRICS: no metric names given (e.g. KP_METRICS=sol)");
}

// A driver launch (cuLaunchKernel) whose entry and exit callbacks a test calls itself, from the
// thread of its choice, to hold a kernel-mode measurement open.
struct SplitLaunch {
  SplitLaunch(const char* symbol, uint32_t correlation, CUcontext ctx = kCtx) {
    static int function;
    params.f = reinterpret_cast<CUfunction>(&function);
    params.gridDimX = params.gridDimY = params.gridDimZ = 1;
    params.blockDimX = params.blockDimY = params.blockDimZ = 1;
    data.context = ctx;
    data.symbolName = symbol;
    data.correlationId = correlation;
    data.functionParams = &params;
  }
  void Enter(MetricsCollector& c) {
    data.callbackSite = CUPTI_API_ENTER;
    c.OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  }
  void Exit(MetricsCollector& c) {
    data.callbackSite = CUPTI_API_EXIT;
    data.functionReturnValue = &result;
    c.OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &data);
  }
  cuLaunchKernel_params params{};
  CUpti_CallbackData data{};
  CUresult result = CUDA_SUCCESS;
};

// Holds `a` open on a thread of its own (entered, not yet returned) while `during` runs on the
// calling thread; `in_launch` runs on the measuring thread between the entry and the wait.
template <typename F, typename G>
void WhileMeasuring(MetricsCollector& c, SplitLaunch& a, F during, G in_launch) {
  std::atomic<bool> entered{false}, done{false};
  std::thread measuring([&] {
    a.Enter(c);
    in_launch();
    entered = true;
    while (!done) std::this_thread::yield();
    a.Exit(c);
  });
  while (!entered) std::this_thread::yield();
  during();
  done = true;
  measuring.join();
}
template <typename F>
void WhileMeasuring(MetricsCollector& c, SplitLaunch& a, F during) {
  WhileMeasuring(c, a, during, [] {});
}

// --- kernel mode, kp's own replay (KP_METRICS_CACHE=pass/range) ---

TEST(KernelModeOwnReplay, OnePassSetSweepsBeforeEachKernelAndKeepsTheLaunchCorrelation) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  OnThread([&] {
    h.DriverLaunch("k", 7);                         // cudaLaunchKernel -> cuLaunchKernel
    h.DriverLaunch("t", 9, /*via_runtime=*/false);  // a driver launch (Triton, cuBLAS)
  });
  h.Finish();
  EXPECT_FALSE(h.script.kernel_replay.load());  // user ranges, user replay
  ASSERT_EQ(h.ranges.size(), 2u);
  EXPECT_EQ(h.Name(h.ranges[0]), "k");
  EXPECT_EQ(h.ranges[0].correlation(), 7);  // the runtime call's, as on the kernel record
  EXPECT_EQ(h.Name(h.ranges[1]), "t");
  EXPECT_EQ(h.ranges[1].correlation(), 9);
  EXPECT_EQ(h.ranges[0].occurrence(), 0u);
  EXPECT_EQ(h.ranges[1].occurrence(), 1u);
  EXPECT_EQ(h.script.syncs.load(), 2);
  EXPECT_EQ(h.script.flushes.load(), 2);
  EXPECT_EQ(h.script.starts.load(), 2);
  EXPECT_EQ(h.script.stops.load(), 2);
  EXPECT_EQ(h.script.decodes.load(), 2);
  EXPECT_EQ(h.script.saves.load(), 0);  // one pass: the application's launch is all of it
  EXPECT_EQ(h.script.relaunches.load(), 0);
  EXPECT_EQ(h.script.pushes.load(), 0);  // auto ranges: CUPTI brackets the kernel itself
  // One pass: nothing is relaunched, so no record is kp's.
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
}

TEST(KernelModeOwnReplay, MultiPassSetRestoresMemoryAndRelaunchesForEachFurtherPass) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  h.script.num_passes = 3;
  OnThread([&] { h.DriverLaunch("gemm", 7); });
  EXPECT_EQ(h.script.saves.load(), 1);
  EXPECT_EQ(h.script.restores.load(), 2);
  EXPECT_EQ(h.script.relaunches.load(), 2);
  EXPECT_EQ(h.script.frees.load(), 1);  // the saved memory is not kept between kernels
  EXPECT_EQ(h.script.starts.load(), 3);
  EXPECT_EQ(h.script.stops.load(), 3);
  // Every pass starts from a flushed L2; the first kernel flushes once more before the save, so
  // that the flush is set up (the sweep's buffer allocated, if it is the sweep) before the
  // checkpoint takes the free memory.
  EXPECT_EQ(h.script.flushes.load(), 4);
  // Before the save, before each pass, and before each restore.
  EXPECT_EQ(h.script.syncs.load(), 6);
  EXPECT_EQ(h.script.decodes.load(), 1);  // once, after the last pass
  // The records of correlation 7 in arrival order: the application's launch, then kp's two.
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(1007));  // the driver call's own id: not used
  EXPECT_TRUE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_TRUE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));  // a later launch's record
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.Name(h.ranges[0]), "gemm");
  EXPECT_EQ(h.ranges[0].correlation(), 7);
}

TEST(KernelModeOwnReplay, ADirectDriverLaunchIsKeyedByItsOwnCorrelation) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  h.script.num_passes = 2;
  OnThread([&] { h.DriverLaunch("triton_mm", 9, /*via_runtime=*/false); });
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(9));
  EXPECT_TRUE(h.c().IsProfilerInternalLaunch(9));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(9));
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.ranges[0].correlation(), 9);
}

TEST(KernelModeOwnReplay, CacheNoneKeepsCuptisKernelReplay) {
  Harness h(KernelConfig(), MetricsCache::kNone);
  OnThread([&] { h.Launch("k", 1); });
  h.Finish();
  EXPECT_TRUE(h.script.kernel_replay.load());
  EXPECT_EQ(h.script.syncs.load(), 0);
  EXPECT_EQ(h.ranges.size(), 1u);
}

TEST(KernelModeOwnReplay, ALaunchWithoutParametersIsCountedNotMeasured) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  OnThread([&] {
    h.DriverLaunch("k", 7, true, /*params=*/false);
    h.DriverLaunch("k", 8);
  });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.ranges[0].correlation(), 8);
  EXPECT_TRUE(h.Noticed("1 selected kernel launch(es) not measured"));
}

TEST(KernelModeOwnReplay, AFailedApplicationLaunchIsNotReplayedAndGivesNoValues) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  h.script.num_passes = 2;
  OnThread([&] {
    h.DriverLaunch("bad", 7, true, true, CUDA_ERROR_LAUNCH_FAILED);
    h.DriverLaunch("good", 8);
  });
  h.Finish();
  EXPECT_EQ(h.script.relaunches.load(), 1);  // only for "good"
  // The failed launch left no record; its id expects none of kp's either.
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.Name(h.ranges[0]), "good");
  EXPECT_TRUE(h.Noticed("1 measured kernel launch(es) failed in the application"));
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);
}

TEST(KernelModeOwnReplay, AFailedRelaunchTurnsMetricsOffAndDisablesTheSession) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  h.script.num_passes = 2;
  h.script.fail_call = "Relaunch";
  OnThread([&] {
    h.DriverLaunch("k", 7);
    h.DriverLaunch("k", 8);  // metrics are off: not measured
  });
  h.Finish();
  // The pass's relaunch, then one more on the restored memory (fails too: said).
  EXPECT_EQ(h.script.relaunches.load(), 2);
  EXPECT_TRUE(h.Noticed("a measured kernel could not run again after kp restored its memory"));
  EXPECT_EQ(h.script.starts.load(), 2);
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);
  EXPECT_EQ(h.script.frees.load(), 1);
}

TEST(KernelModeOwnReplay, TargetingSelectsWhichLaunchesAreReplayed) {
  Config c = KernelConfig();
  c.metrics_kernels = "regex:gemm";
  Harness h(c, MetricsCache::kPass);
  h.script.num_passes = 2;
  OnThread([&] {
    h.DriverLaunch("elementwise", 1);
    h.DriverLaunch("gemm_a", 2);
    h.DriverLaunch("elementwise", 3, /*via_runtime=*/false);
    h.DriverLaunch("gemm_b", 4, /*via_runtime=*/false);
  });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 2u);
  EXPECT_EQ(h.Name(h.ranges[0]), "gemm_a");
  EXPECT_EQ(h.Name(h.ranges[1]), "gemm_b");
  EXPECT_EQ(h.script.relaunches.load(), 2);
  EXPECT_EQ(h.script.syncs.load(), 8);  // only the selected kernels are serialized (4 each)
}

TEST(KernelModeOwnReplay, AnotherThreadsLaunchDuringAMeasurementDropsItAndIsNotMeasured) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  h.script.num_passes = 2;
  SplitLaunch a("measured", 7);
  // Another thread's launch while "measured" is between its entry and exit: it neither waits
  // (this returns) nor is measured.
  WhileMeasuring(h.c(), a,
                 [&] { OnThread([&] { h.DriverLaunch("other", 9, /*via_runtime=*/false); }); });
  OnThread([&] { h.DriverLaunch("after", 11, /*via_runtime=*/false); });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.Name(h.ranges[0]), "after");
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) dropped: another thread launched work"));
  EXPECT_TRUE(h.Noticed("1 selected kernel launch(es) not measured: made while another thread"));
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);
}

TEST(KernelModeOwnReplay, ADeferredRuntimeLaunchKeepsItsOwnCorrelation) {
  // Targeting with a runtime launch whose callback has no symbol name: decided at the driver
  // launch inside it, still under the runtime call's correlation id.
  Config c = KernelConfig();
  c.metrics_kernels = "regex:gemm";
  Harness h(c, MetricsCache::kPass);
  h.script.num_passes = 2;
  OnThread([&] {
    h.DriverLaunch("gemm_a", 5);
    h.DriverLaunch("gemm_b", 7, true, true, CUDA_SUCCESS, kCtx, /*runtime_symbol=*/"");
  });
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 2u);
  EXPECT_EQ(h.Name(h.ranges[1]), "gemm_b");
  EXPECT_EQ(h.ranges[1].correlation(), 7);
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));  // the application's record
  EXPECT_TRUE(h.c().IsProfilerInternalLaunch(7));   // kp's relaunch
}

TEST(KernelModeOwnReplay, NoMoreRelaunchesThanTheSetHasPasses) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  h.script.num_passes = 2;
  h.script.never_all_passes = true;
  OnThread([&] { h.DriverLaunch("k", 7); });
  h.Finish();
  EXPECT_EQ(h.script.relaunches.load(), 1);  // 2 passes: the application's and one of kp's
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);  // metrics off after the error
}

TEST(KernelModeOwnReplay, ALaunchOnAnotherContextDoesNotDisturbAMeasurement) {
  const CUcontext other = reinterpret_cast<CUcontext>(0x2000);
  Harness h(KernelConfig(), MetricsCache::kPass);
  SplitLaunch a("on_gpu0", 7);
  WhileMeasuring(
      h.c(), a,
      [&] { OnThread([&] { h.DriverLaunch("on_gpu1", 9, false, true, CUDA_SUCCESS, other); }); },
      // the application's kernel, on this context's session
      [&] { h.script.current->KernelLaunched(); });
  h.Finish();
  EXPECT_EQ(SortedNames(h), (std::vector<std::string>{"on_gpu0", "on_gpu1"}));
  EXPECT_FALSE(h.Noticed("dropped: another thread launched work"));
}

// --- kernel mode, kp's own replay with kernel records on ---

TEST(KernelModeRecordsOn, OnePassSetMeasuresTheApplicationsLaunchAndMakesItsRecord) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  OnThread([&] { h.DriverLaunch("k", 7); });
  // Records are off from the launch's entry to its exit: the application's kernel runs once,
  // without CUPTI's instructions, and is the pass; nothing is saved or relaunched.
  EXPECT_EQ(h.app_launches_with_records.load(), 0);
  EXPECT_EQ(h.script.saves.load(), 0);
  EXPECT_EQ(h.script.restores.load(), 0);
  EXPECT_EQ(h.script.relaunches.load(), 0);
  EXPECT_EQ(h.script.starts.load(), 1);
  EXPECT_EQ(h.script.plans.load(), 1);  // the set already holds gpu__time_duration.sum
  EXPECT_EQ(records.suspends.load(), 1);
  EXPECT_EQ(records.resumes.load(), 1);
  EXPECT_TRUE(records.on());
  EXPECT_EQ(h.script.describes.load(), 1);
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));  // a CUPTI record of it would be the app's
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.ranges[0].correlation(), 7);
  EXPECT_EQ(h.ranges[0].values_size(), 3);
  // CUPTI made no record of the launch: kp's, from the launch and the measured time.
  ASSERT_EQ(h.kernels.size(), 1u);
  const Kernel& k = h.kernels[0];
  EXPECT_EQ(k.flags(), uint32_t{RECORD_FLAG_PROFILER_TIMED});
  EXPECT_EQ(k.correlation(), 7);
  EXPECT_EQ(k.duration(), 3);  // the scripted gpu__time_duration.sum, the set's third value
  EXPECT_EQ(k.stream(), 13u);
  const KernelShape& shape = h.shapes[k.shape()];
  EXPECT_EQ(h.strings[shape.name()], "described_kernel");
  EXPECT_EQ(shape.registers_per_thread(), 40u);
  EXPECT_EQ(shape.grid_x(), 1u);
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) ran with kernel records off for their own launch"));
}

TEST(KernelModeRecordsOn, ItsRecordsGoToTheTracersSinkWhenSet) {
  // The tracer routes them through its activity decoder (capture windows, discard intervals).
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  std::vector<std::pair<uint32_t, uint32_t>> seen;  // correlation, flags
  h.c().SetKernelRecordSink(
      [&](TraceEncoder&, const KernelRecord& k) { seen.emplace_back(k.correlation, k.flags); });
  OnThread([&] { h.DriverLaunch("k", 7); });
  h.Finish();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, 7u);
  EXPECT_EQ(seen[0].second, uint32_t{RECORD_FLAG_PROFILER_TIMED});
  EXPECT_TRUE(h.kernels.empty());  // not also to the encoder
  ASSERT_EQ(h.ranges.size(), 1u);
}

TEST(KernelModeRecordsOn, TheKernelsTimeIsMeasuredHiddenWhenTheSetLacksIt) {
  Config config = KernelConfig();
  config.metrics = {"dram__bytes_read.sum"};
  Harness h(config, MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  OnThread([&] { h.DriverLaunch("k", 7); });
  EXPECT_EQ(h.script.plans.load(), 1);  // planned with gpu__time_duration.sum: still one pass
  EXPECT_EQ(h.script.sessions_created.load(), 1);
  EXPECT_EQ(h.script.saves.load(), 0);
  h.Finish();
  ASSERT_EQ(h.configs.size(), 1u);
  EXPECT_EQ(std::vector<std::string>(h.configs[0].metric_names().begin(),
                                     h.configs[0].metric_names().end()),
            std::vector<std::string>{"dram__bytes_read.sum"});
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.ranges[0].values_size(), 1);  // the hidden time is not posted
  ASSERT_EQ(h.kernels.size(), 1u);
  EXPECT_EQ(h.kernels[0].duration(), 2);  // the hidden metric, the session's second value
  EXPECT_TRUE(h.Noticed("1 metrics, 1 pass(es)"));
}

TEST(KernelModeRecordsOn, AFailedSwitchAtTheEntryMeasuresARelaunchInstead) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  records.fail_suspend = true;
  h.UseKernelRecords(&records);
  OnThread([&] { h.DriverLaunch("k", 7); });
  EXPECT_EQ(h.app_launches_with_records.load(), 1);  // its CUPTI record is kept
  EXPECT_EQ(h.script.saves.load(), 1);               // the relaunch way, whose switch fails too
  EXPECT_EQ(h.script.relaunches.load(), 0);
  EXPECT_TRUE(records.on());
  h.Finish();
  EXPECT_TRUE(h.kernels.empty());
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) dropped"));
}

TEST(KernelModeRecordsOn, ALaunchDuringAnOwnLaunchMeasurementDropsItsValuesAndKeepsOneRecord) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  SplitLaunch measured("measured", 7);
  WhileMeasuring(h.c(), measured, [&] {
    // Another thread's launch (one kp does not measure) enters while records are off for the
    // measured launch: they go back on at its entry, so its kernel keeps its record.
    CUpti_CallbackData legacy{};
    legacy.context = kCtx;
    legacy.callbackSite = CUPTI_API_ENTER;
    h.c().OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, &legacy);
    EXPECT_TRUE(records.on());
    legacy.callbackSite = CUPTI_API_EXIT;
    h.c().OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, &legacy);
  });
  EXPECT_TRUE(records.on());
  // The measured kernel may have been submitted with records on: CUPTI's record of it, if any,
  // is kp's (profiler-internal), and kp's own stands.
  EXPECT_TRUE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  h.Finish();
  EXPECT_TRUE(h.ranges.empty());  // its values may hold CUPTI's instructions
  ASSERT_EQ(h.kernels.size(), 1u);
  EXPECT_EQ(h.kernels[0].correlation(), 7);
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) dropped: another thread launched a kernel"));
}

TEST(KernelModeRecordsOn, AFailedApplicationLaunchGetsNoRecord) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  OnThread([&] {
    h.DriverLaunch("k", 7, /*via_runtime=*/true, /*params=*/true, CUDA_ERROR_INVALID_VALUE);
  });
  EXPECT_TRUE(records.on());
  h.Finish();
  EXPECT_TRUE(h.kernels.empty());
  EXPECT_TRUE(h.ranges.empty());
}

TEST(KernelModeRecordsOn, AFailedDecodeLeavesTheRecordUntimed) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  h.script.fail_call = "Decode";
  OnThread([&] { h.DriverLaunch("k", 7); });
  EXPECT_TRUE(records.on());
  h.Finish();
  ASSERT_EQ(h.kernels.size(), 1u);  // the kernel ran: it keeps a record, with no time
  EXPECT_EQ(h.kernels[0].flags(), uint32_t{RECORD_FLAG_PROFILER_TIMED | RECORD_FLAG_NO_TIMING});
  EXPECT_TRUE(h.ranges.empty());
}

TEST(KernelModeRecordsOn, OnePassSetWithoutTheTimeMeasuresARelaunchAndKeepsTheApplications) {
  Harness h(KernelConfigWithoutTime(), MetricsCache::kPass);
  h.script.duration_passes = 2;
  // The time would add a pass: the set is planned again alone, on a new session (the first is
  // never enabled), and the kernel is relaunched.
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  OnThread([&] { h.DriverLaunch("k", 7); });
  // The application's launch ran with records on and the profiler stopped (CUPTI would have
  // counted its timing instructions); the one pass is kp's relaunch, with records off.
  EXPECT_EQ(h.app_launches_with_records.load(), 1);
  EXPECT_EQ(h.script.saves.load(), 1);  // one pass, yet the memory is saved for the relaunch
  EXPECT_EQ(h.script.restores.load(), 1);
  EXPECT_EQ(h.script.relaunches.load(), 1);
  EXPECT_EQ(h.script.relaunches_with_records.load(), 0);
  EXPECT_EQ(h.script.starts.load(), 1);
  EXPECT_EQ(h.script.frees.load(), 1);
  EXPECT_EQ(records.suspends.load(), 1);
  EXPECT_EQ(records.resumes.load(), 1);
  EXPECT_TRUE(records.on());
  // Its record is the application's; the relaunch, with records off, left none.
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_EQ(h.script.plans.load(), 2);
  EXPECT_EQ(h.script.sessions_created.load(), 2);
  EXPECT_EQ(h.script.sessions_enabled.load(), 1);  // the first session was never enabled
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.Name(h.ranges[0]), "k");
  EXPECT_EQ(h.ranges[0].correlation(), 7);
}

TEST(KernelModeRecordsOn, MultiPassSetRelaunchesEveryPassWithRecordsOff) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  h.script.num_passes = 3;
  OnThread([&] {
    h.DriverLaunch("gemm", 7);
    h.DriverLaunch("gemm", 8);
  });
  EXPECT_EQ(h.app_launches_with_records.load(), 2);
  EXPECT_EQ(h.script.saves.load(), 2);
  EXPECT_EQ(h.script.restores.load(), 6);
  EXPECT_EQ(h.script.relaunches.load(), 6);
  EXPECT_EQ(h.script.relaunches_with_records.load(), 0);
  EXPECT_EQ(h.script.starts.load(), 6);
  EXPECT_EQ(h.script.stops.load(), 6);
  EXPECT_EQ(records.suspends.load(), 2);
  EXPECT_EQ(records.resumes.load(), 2);
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(8));
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 2u);
  EXPECT_EQ(h.ranges[0].correlation(), 7);
  EXPECT_EQ(h.ranges[1].correlation(), 8);
}

TEST(KernelModeRecordsOn, RecordsOffAtTheLaunchKeepTheApplicationsLaunchAsTheFirstPass) {
  // Outside a capture window (or KP_ACTIVITIES without kernel) nothing instruments the kernel.
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  records.on_ = false;
  h.UseKernelRecords(&records);
  OnThread([&] { h.DriverLaunch("k", 7); });
  EXPECT_EQ(h.script.saves.load(), 0);
  EXPECT_EQ(h.script.relaunches.load(), 0);
  EXPECT_EQ(records.suspends.load(), 0);
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
}

TEST(KernelModeRecordsOn, AnotherThreadsLaunchWhileRecordsAreOffTurnsThemOnAndDropsTheMeasurement) {
  const CUcontext other = reinterpret_cast<CUcontext>(0x2000);
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  h.script.num_passes = 3;
  std::atomic<int> relaunch{0};
  std::atomic<bool> other_launched_with_records{false};
  h.script.on_relaunch = [&] {
    if (relaunch++ != 0) return;
    // During kp's first relaunch of "measured", another thread launches on another GPU: at
    // its entry records go back on, so its record is kept (and it is measured on its own).
    OnThread([&] {
      SplitLaunch o("elsewhere", 20, other);
      o.Enter(h.c());
      other_launched_with_records = records.on();
      o.Exit(h.c());
    });
  };
  OnThread([&] { h.DriverLaunch("measured", 7); });
  EXPECT_TRUE(other_launched_with_records.load());
  // No further pass of "measured" after the interruption: its one, and the other's three.
  EXPECT_EQ(h.script.relaunches.load(), 4);
  EXPECT_EQ(h.script.restores.load(), 4);
  EXPECT_EQ(h.script.relaunches_with_records.load(), 0);
  EXPECT_TRUE(records.on());
  // The relaunch during which records came back on may have left a record: kp's.
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_TRUE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  // Later measurements switch records off again.
  h.script.on_relaunch = nullptr;
  OnThread([&] { h.DriverLaunch("after", 9); });
  EXPECT_EQ(h.script.relaunches_with_records.load(), 0);
  EXPECT_TRUE(records.on());
  h.Finish();
  EXPECT_EQ(SortedNames(h), (std::vector<std::string>{"after", "elsewhere"}));
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) dropped: another thread launched a kernel"));
}

TEST(KernelModeRecordsOn, ASameContextInterloperStopsThePassesBeforeAnyRestore) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  h.script.num_passes = 2;
  SplitLaunch a("measured", 7);
  WhileMeasuring(h.c(), a,
                 [&] { OnThread([&] { h.DriverLaunch("other", 9, /*via_runtime=*/false); }); });
  // The other kernel ran after the save: restoring would undo its writes, so no pass runs.
  EXPECT_EQ(h.script.restores.load(), 0);
  EXPECT_EQ(h.script.relaunches.load(), 0);
  EXPECT_TRUE(records.on());
  h.Finish();
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) dropped: another thread launched work"));
}

TEST(KernelModeRecordsOn, ALaunchInFlightKeepsRecordsOnAndDropsTheMeasurement) {
  // Another thread is between its launch's entry and exit (its kernel not yet submitted) when
  // the measured launch would switch records off: they stay on, and no pass runs.
  const CUcontext other = reinterpret_cast<CUcontext>(0x2000);
  Harness h(KernelConfigWithoutTime(), MetricsCache::kPass);
  h.script.duration_passes = 2;
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  SplitLaunch o("elsewhere", 20, other);
  WhileMeasuring(h.c(), o, [&] { OnThread([&] { h.DriverLaunch("measured", 7); }); });
  EXPECT_EQ(records.suspends.load(), 1);  // only "elsewhere", after "measured"
  EXPECT_TRUE(records.on());
  h.Finish();
  EXPECT_EQ(Names(h), (std::vector<std::string>{"elsewhere"}));
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) dropped: another thread launched a kernel"));
}

TEST(KernelModeRecordsOn, AFailedSwitchOffDropsTheMeasurementWithoutAPass) {
  Harness h(KernelConfigWithoutTime(), MetricsCache::kPass);
  h.script.duration_passes = 2;
  FakeKernelRecords records;
  records.fail_suspend = true;
  h.UseKernelRecords(&records);
  OnThread([&] { h.DriverLaunch("k", 7); });
  EXPECT_EQ(h.script.restores.load(), 0);  // the memory stays as the application's launch left it
  EXPECT_EQ(h.script.relaunches.load(), 0);
  EXPECT_EQ(records.resumes.load(), 1);  // the switch's suspension undone
  EXPECT_TRUE(records.on());
  h.Finish();
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_TRUE(h.Noticed("1 measured kernel(s) dropped"));
}

TEST(KernelModeRecordsOn, AFailedSaveMeasuresAOnePassSetOnTheApplicationsLaunch) {
  Harness h(KernelConfigWithoutTime(), MetricsCache::kPass);
  h.script.duration_passes = 2;
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  h.script.fail_call = "Save";
  OnThread([&] {
    h.DriverLaunch("k", 7);
    h.DriverLaunch("k", 8);
  });
  EXPECT_EQ(h.script.saves.load(), 1);  // not tried again on this context
  EXPECT_EQ(h.script.relaunches.load(), 0);
  EXPECT_EQ(h.script.starts.load(), 2);  // the application's launches are the passes
  EXPECT_EQ(records.suspends.load(), 0);
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  EXPECT_FALSE(h.c().IsProfilerInternalLaunch(7));
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 2u);  // metrics stay on
  EXPECT_EQ(h.ranges[0].correlation(), 7);
  EXPECT_TRUE(h.Noticed("2 one-pass kernel measurement(s) include CUPTI's timing instructions"));
}

TEST(KernelModeRecordsOn, AnUnmeasuredLaunchCallInFlightKeepsRecordsOn) {
  // cuLaunchGrid (and the other launch calls kp does not measure) submit kernels too.
  Harness h(KernelConfig(), MetricsCache::kPass);
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  CUpti_CallbackData legacy{};
  legacy.context = kCtx;
  legacy.callbackSite = CUPTI_API_ENTER;
  std::atomic<bool> entered{false}, done{false};
  std::thread other([&] {
    h.c().OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, &legacy);
    entered = true;
    while (!done) std::this_thread::yield();
    legacy.callbackSite = CUPTI_API_EXIT;
    h.c().OnLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, &legacy);
  });
  while (!entered) std::this_thread::yield();
  OnThread([&] { h.DriverLaunch("measured", 7); });
  done = true;
  other.join();
  EXPECT_EQ(records.suspends.load(), 0);
  EXPECT_EQ(h.script.relaunches.load(), 0);
  OnThread([&] { h.DriverLaunch("after", 9); });  // the count is back to zero
  EXPECT_EQ(records.suspends.load(), 1);
  h.Finish();
  ASSERT_EQ(h.ranges.size(), 1u);
  EXPECT_EQ(h.Name(h.ranges[0]), "after");
}

TEST(KernelModeRecordsOn, AFailedPassAfterTheRestoreRunsTheKernelOnceMore) {
  Harness h(KernelConfigWithoutTime(), MetricsCache::kPass);
  h.script.duration_passes = 2;
  FakeKernelRecords records;
  h.UseKernelRecords(&records);
  h.script.fail_call = "Start";  // the pass's start, after its restore
  OnThread([&] { h.DriverLaunch("k", 7); });
  EXPECT_EQ(h.script.restores.load(), 1);
  EXPECT_EQ(h.script.relaunches.load(), 1);  // not a pass: the program's results back
  EXPECT_EQ(h.script.relaunches_with_records.load(), 0);
  EXPECT_TRUE(records.on());
  h.Finish();
  EXPECT_TRUE(h.ranges.empty());
  EXPECT_FALSE(h.Noticed("could not run again"));
  EXPECT_EQ(h.script.sessions_enabled.load(), 0);  // metrics off after the error
}

TEST(KernelModeOwnReplay, TheFinalFlushWaitsForAStuckMeasurementAtMostItsLimit) {
  Harness h(KernelConfig(), MetricsCache::kPass);
  SplitLaunch a("never_ends", 7);
  std::atomic<bool> entered{false}, finished{false};
  std::thread measuring([&] {
    a.Enter(h.c());
    entered = true;
    while (!finished) std::this_thread::yield();  // the launch has not returned yet
    a.Exit(h.c());
  });
  while (!entered) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  h.Finish();  // the exit's flush: gives up on the context after kFinalFlushWait
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  finished = true;
  measuring.join();
  EXPECT_GE(waited, 2.9);
  EXPECT_LT(waited, 10.0);
  EXPECT_TRUE(h.Noticed("a kernel was still being measured after 3000 ms"));
}

}  // namespace
}  // namespace kp
