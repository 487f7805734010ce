#include "inject/metrics/kernel_mode_collector.h"

#include <cstdlib>

#include "inject/metrics/launch_callbacks.h"

namespace kp {
namespace {

thread_local int t_runtime_launch_depth = 0;

}  // namespace

struct KernelModeCollector::KernelContext : Context {
  std::vector<Result> launches;    // since the last decode, in launch order
  bool stopped_undecoded = false;  // stopped before a capture; decoded at the next launch
  uint64_t launch_index = 0;
  uint64_t graph_launches = 0;
  uint64_t index_mismatches = 0;
  uint64_t range_number_mismatches = 0;  // CUPTI's range number != launch number
};

std::unique_ptr<ProfilerCollector::Context> KernelModeCollector::NewContext() {
  return std::make_unique<KernelContext>();
}

bool KernelModeCollector::Collect(KernelContext* p, std::vector<Result>* out, std::string* error) {
  if (p->session->started()) {
    bool all = false;
    if (!p->session->Stop(&all, error)) return false;
    p->stopped_undecoded = true;
  }
  if (!p->stopped_undecoded) return true;
  p->stopped_undecoded = false;
  std::vector<DecodedRange> decoded;
  if (!p->session->Decode(
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
          &decoded, &p->ranges_dropped, error))
    return false;
  size_t before = out->size();
  for (DecodedRange& d : decoded) {
    Result r = p->launches[d.index];
    r.values = std::move(d.values);
    out->push_back(std::move(r));
  }
  // Auto ranges are numbered in launch order; a count that differs means launches we did not
  // see (or a range CUPTI dropped), so the mapping of the tail is uncertain.
  if (out->size() - before + p->ranges_dropped != p->launches.size()) ++p->index_mismatches;
  p->launches.clear();
  return true;
}

bool KernelModeCollector::BeforeCapture(Context* c, std::vector<Result>*, std::string* error) {
  auto* p = static_cast<KernelContext*>(c);
  if (!p->session->started()) return true;
  bool all = false;
  if (!p->session->Stop(&all, error)) return false;
  p->stopped_undecoded = true;
  return true;
}

bool KernelModeCollector::FlushLocked(Context* c, std::vector<Result>* results,
                                      std::string* error) {
  return Collect(static_cast<KernelContext*>(c), results, error);
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
    return;
  }
  bool nested = !runtime && t_runtime_launch_depth > 0;
  if (runtime) ++t_runtime_launch_depth;
  if (off_.load(std::memory_order_relaxed)) return;
  // While a CUDA graph is being captured the profiler stays stopped (capture_gate.h):
  // launches then (captured ones do not even run) are not measured.
  if (gate_.active()) {
    if (kernel && !nested) skipped_during_capture_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto* p = static_cast<KernelContext*>(ProfilerFor(data->context));
  if (!p) return;
  std::vector<Result> results;
  std::string error;
  bool ok = true;
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
      ok = Collect(p, &results, &error);
    } else {
      if (p->launches.size() >= kKernelsPerBatch || p->stopped_undecoded)
        ok = Collect(p, &results, &error);
      if (ok && !p->session->started()) ok = p->session->Start(&error);
      if (ok) {
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
    if (!ok) {
      p->closed = true;
      p->session->Disable();
    }
  }
  PostResults(p, std::move(results));
  if (!ok) Fail(error);
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
