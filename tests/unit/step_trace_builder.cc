#include "step_trace_builder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "kptrace.pb.h"
#include "tests/unit/scratch_dir.h"
#include "tools/reader/proto_trace_writer.h"

namespace kp {

std::string WriteTestTrace(const std::string& name, const std::string& bytes) {
  std::string path = kp::test::ScratchPath(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string BuildStepTrace(const StepTraceSpec& spec) {
  constexpr uint64_t kT0 = 1700000000000000000ull;
  uint64_t state = spec.seed * 6364136223846793005ull + 1442695040888963407ull;
  auto uniform = [&] {  // in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / static_cast<double>(1ull << 52) - 1.0;
  };
  ProtoTraceWriter w;
  Chunk c;
  c.set_time_base_ns(kT0);
  Header* h = c.mutable_header();
  h->set_kp_version("0.1.0");
  h->set_hostname("node");
  h->set_rank(spec.rank);
  h->set_world_size(spec.rank >= 0 ? 2 : -1);
  h->set_driver_version(spec.driver);
  h->set_cuda_driver_version(13000);
  h->set_start_time_unix_ns(kT0);
  h->set_start_time_trace_ns(kT0);
  KeyValue* kv = h->add_config();
  kv->set_key("KP_METRICS");
  kv->set_value("sol");
  Device* d = c.add_devices();
  d->set_id(0);
  d->set_name(spec.gpu);
  d->set_sm_count(132);
  d->set_core_clock_khz(spec.core_clock_khz);
  const char* names[] = {"", "gemm_kernel", "relu_kernel", "step"};
  for (uint32_t id = 1; id <= 3; ++id) {
    InternedString* s = c.add_strings();
    s->set_id(id);
    s->set_value(names[id]);
  }
  for (uint32_t id = 1; id <= 2; ++id) {
    KernelShape* sh = c.add_kernel_shapes();
    sh->set_id(id);
    sh->set_name(id);
    sh->set_demangled(id);
  }
  MetricConfig* mc = c.add_metric_configs();
  mc->set_id(1);
  mc->add_metric_names("sm__throughput.avg.pct_of_peak_sustained_elapsed");
  mc->add_metric_names("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
  mc->set_num_passes(1);
  mc->set_mode("range");
  mc->set_chip("GH100");
  uint64_t t = kT0 + 1000;
  for (int i = 0; i < spec.steps; ++i) {
    const double slow = spec.slow_from_step >= 0 && i >= spec.slow_from_step ? spec.slow_factor : 1;
    const uint64_t step_start = t;
    const double base[2] = {100000, 20000};
    for (uint32_t k = 0; k < 2; ++k) {
      const auto dur =
          static_cast<int64_t>(base[k] * spec.scale * slow * (1 + spec.noise * uniform()));
      Kernel* kr = c.add_kernels();
      kr->set_start(static_cast<int64_t>(t));
      kr->set_duration(dur);
      kr->set_shape(k + 1);
      kr->set_stream(7);
      t += static_cast<uint64_t>(dur) + 2000;
    }
    NvtxRange* r = c.add_nvtx_ranges();
    r->set_start(static_cast<int64_t>(step_start));
    r->set_duration(static_cast<int64_t>(t - step_start));
    r->set_name(3);
    MetricRange* m = c.add_metric_ranges();
    m->set_config(1);
    m->set_name(3);
    m->set_occurrence(static_cast<uint32_t>(i));
    m->set_start(static_cast<int64_t>(step_start));
    m->set_duration(static_cast<int64_t>(t - step_start));
    m->add_values(spec.sm_pct * (1 + spec.noise * uniform()));
    m->add_values(spec.mem_pct * (1 + spec.noise * uniform()));
    t += 5000;
  }
  Footer* f = c.mutable_footer();
  f->set_clean_end(true);
  f->set_end_reason("exit");
  f->set_end_time_ns(t);
  f->set_kernels(static_cast<uint64_t>(spec.steps) * 2);
  f->set_nvtx_ranges(static_cast<uint64_t>(spec.steps));
  f->set_metric_ranges(static_cast<uint64_t>(spec.steps));
  w.Add(c);
  return w.bytes();
}

}  // namespace kp
