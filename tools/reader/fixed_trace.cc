#include "tools/reader/fixed_trace.h"

#include "tools/reader/proto_trace_writer.h"

namespace kp {
namespace {

constexpr uint64_t kT0 = 1700000000000000000ull;  // 2023-11-14T22:13:20Z on the trace clock

void AddString(Chunk* c, uint32_t id, const std::string& v) {
  InternedString* s = c->add_strings();
  s->set_id(id);
  s->set_value(v);
}

void AddDevice(Chunk* c) {
  Device* d = c->add_devices();
  d->set_id(0);
  d->set_name("NVIDIA H200");
  d->set_uuid(std::string("\x01\x23\x45\x67\x89\xab\xcd\xef\x01\x23\x45\x67\x89\xab\xcd\xef", 16));
  d->set_compute_capability_major(9);
  d->set_compute_capability_minor(0);
  d->set_sm_count(132);
  d->set_global_memory_bytes(150ull << 30);
  d->set_global_memory_bandwidth_kbps(4800000000ull);
  d->set_core_clock_khz(1980000);
  d->set_memory_clock_khz(2619000);
  d->set_pci_bus_id("0000:19:00.0");
}

void AddStrings(Chunk* c) {
  AddString(c, 1, "_Z4gemmIfLi128EEvPKfS1_Pf");
  AddString(c, 2, "void gemm<float, 128>(float const*, float const*, float*)");
  AddString(c, 3, "relu_kernel");
  AddString(c, 4, "cudaLaunchKernel_v7000");
  AddString(c, 5, "cudaMemcpyAsync_v3020");
  AddString(c, 6, "train \"step\", phase 1");
  AddString(c, 7, "my_domain");
  AddString(c, 8, "checkpoint\nsaved");
  AddString(c, 9, "CUPTI_INSTRUMENTATION");
  AddString(c, 10, "forward");
  AddString(c, 11, "cudaMemsetAsync_v3020");
  AddString(c, 12, "kp_internal_kernel");
}

void AddShapes(Chunk* c) {
  KernelShape* s = c->add_kernel_shapes();
  s->set_id(1);
  s->set_name(1);
  s->set_demangled(2);
  s->set_grid_x(128);
  s->set_grid_y(2);
  s->set_grid_z(1);
  s->set_block_x(256);
  s->set_block_y(1);
  s->set_block_z(1);
  s->set_registers_per_thread(64);
  s->set_static_shared_bytes(16384);
  s->set_dynamic_shared_bytes(1024);
  s = c->add_kernel_shapes();
  s->set_id(2);
  s->set_name(3);
  s->set_demangled(3);
  s->set_grid_x(1024);
  s->set_grid_y(1);
  s->set_grid_z(1);
  s->set_block_x(128);
  s->set_block_y(1);
  s->set_block_z(1);
  s->set_registers_per_thread(16);
  s = c->add_kernel_shapes();
  s->set_id(3);
  s->set_name(12);
  s->set_demangled(12);
  s->set_grid_x(1);
  s->set_grid_y(1);
  s->set_grid_z(1);
  s->set_block_x(32);
  s->set_block_y(1);
  s->set_block_z(1);
}

void AddApi(Chunk* c, uint64_t start, int64_t dur, uint32_t name, uint32_t corr) {
  ApiCall* a = c->add_api_calls();
  a->set_start(static_cast<int64_t>(start));
  a->set_duration(dur);
  a->set_name(name);
  a->set_domain(API_RUNTIME);
  a->set_cbid(211);
  a->set_thread_id(4243);
  a->set_correlation(corr);
}

void AddKernel(Chunk* c, uint64_t start, int64_t dur, uint32_t shape, uint32_t stream,
               uint32_t corr, uint32_t flags = 0) {
  Kernel* k = c->add_kernels();
  k->set_start(static_cast<int64_t>(start));
  k->set_duration(dur);
  k->set_shape(shape);
  k->set_stream(stream);
  k->set_correlation(corr);
  k->set_context(1);
  k->set_device(0);
  k->set_flags(flags);
}

}  // namespace

std::string BuildFixedTrace(const FixedTraceOptions& options) {
  ProtoTraceWriter w(options.zstd_level);

  Chunk c0;
  c0.set_sequence(0);
  c0.set_time_base_ns(kT0);
  Header* h = c0.mutable_header();
  h->set_kp_version("0.1.0");
  h->set_pid(4242);
  h->set_ppid(1);
  h->set_hostname("gpu-node-1");
  h->add_command_line("python");
  h->add_command_line("train.py");
  h->add_command_line("--epochs=1");
  h->set_rank(0);
  h->set_local_rank(0);
  h->set_world_size(1);
  h->set_start_time_unix_ns(kT0);
  h->set_start_time_trace_ns(kT0);
  h->set_clock("CLOCK_REALTIME (cupti default)");
  KeyValue* kv = h->add_config();
  kv->set_key("KP_API");
  kv->set_value("default");
  h->set_cupti_api_version(130001);
  h->set_cuda_driver_version(13000);
  h->set_driver_version("580.159.03");
  h->set_injection_mode("injection");
  h->set_output_path("kp-4242.kptrace");
  AddDevice(&c0);
  Context* ctx = c0.add_contexts();
  ctx->set_id(1);
  ctx->set_device(0);
  ctx->set_null_stream(7);
  ThreadInfo* th = c0.add_threads();
  th->set_thread_id(4243);
  th->set_name("python");
  AddStrings(&c0);
  AddShapes(&c0);

  // Launch API calls, then the kernels they launched (microseconds after kT0).
  const uint64_t us = 1000;
  AddApi(&c0, kT0 + 10 * us, 5 * us, 4, 100);
  AddApi(&c0, kT0 + 20 * us, 4 * us, 4, 101);
  AddApi(&c0, kT0 + 30 * us, 4 * us, 4, 102);
  AddApi(&c0, kT0 + 40 * us, 6 * us, 5, 103);
  AddApi(&c0, kT0 + 50 * us, 3 * us, 11, 104);
  AddKernel(&c0, kT0 + 100 * us, 40 * us, 1, 7, 100);
  AddKernel(&c0, kT0 + 150 * us, 50 * us, 1, 7, 101);
  AddKernel(&c0, kT0 + 160 * us, 20 * us, 2, 13, 102);
  Memcpy* m = c0.add_memcpys();
  m->set_start(static_cast<int64_t>(kT0 + 210 * us));
  m->set_duration(100 * us);
  m->set_bytes(50000000);  // 50 MB in 100 us = 500 GB/s
  m->set_copy_kind(COPY_HTOD);
  m->set_src_kind(MEMORY_PINNED);
  m->set_dst_kind(MEMORY_DEVICE);
  m->set_stream(7);
  m->set_correlation(103);
  m->set_context(1);
  m->set_flags(RECORD_FLAG_ASYNC);
  Memset* ms = c0.add_memsets();
  ms->set_start(static_cast<int64_t>(kT0 + 320 * us));
  ms->set_duration(10 * us);
  ms->set_bytes(1 << 20);
  ms->set_value(0);
  ms->set_memory_kind(MEMORY_DEVICE);
  ms->set_stream(7);
  ms->set_correlation(104);
  ms->set_context(1);
  NvtxRange* r = c0.add_nvtx_ranges();
  r->set_start(static_cast<int64_t>(kT0 + 5 * us));
  r->set_duration(400 * us);
  r->set_name(6);
  r->set_domain(7);
  r->set_thread_id(4243);
  r->set_color(0xFF00FF00u);
  r->set_has_color(true);
  r->mutable_payload()->set_i64(-3);
  r->set_id(1);
  r = c0.add_nvtx_ranges();
  r->set_start(static_cast<int64_t>(kT0 + 8 * us));
  r->set_duration(100 * us);
  r->set_name(10);
  r->set_thread_id(4243);
  r->set_id(2);
  NvtxMark* mk = c0.add_nvtx_marks();
  mk->set_time(static_cast<int64_t>(kT0 + 300 * us));
  mk->set_name(8);
  mk->set_thread_id(4243);
  Synchronization* sy = c0.add_syncs();
  sy->set_start(static_cast<int64_t>(kT0 + 330 * us));
  sy->set_duration(20 * us);
  sy->set_type(SYNC_STREAM_SYNCHRONIZE);
  sy->set_stream(7);
  sy->set_context(1);
  sy->set_correlation(105);
  Overhead* ov = c0.add_overheads();
  ov->set_start(static_cast<int64_t>(kT0 + 1 * us));
  ov->set_duration(2 * us);
  ov->set_kind(4);
  ov->set_name(9);
  ov->set_thread_id(4243);
  MetricConfig* mc = c0.add_metric_configs();
  mc->set_id(1);
  mc->add_metric_names("sm__throughput.avg.pct_of_peak_sustained_elapsed");
  mc->add_metric_names("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
  mc->add_metric_names("gpc__cycles_elapsed.avg.per_second");
  mc->set_num_passes(1);
  mc->set_mode("range");
  mc->set_device(0);
  mc->set_chip("GH100");
  Notice* n = c0.add_notices();
  n->set_severity(NOTICE_WARNING);
  n->set_component("nvtx");
  n->set_message("1 NVTX range left open at exit");
  n->set_time_ns(kT0 + 400 * us);
  Stats* st = c0.mutable_stats();
  st->set_buffers_completed(1);
  w.Add(c0);

  Chunk c1;
  c1.set_sequence(1);
  c1.set_time_base_ns(kT0 + 500 * us);
  AddStrings(&c1);
  AddShapes(&c1);
  AddDevice(&c1);
  AddApi(&c1, kT0 + 510 * us, 4 * us, 4, 106);
  AddApi(&c1, kT0 + 520 * us, 4 * us, 4, 107);
  AddKernel(&c1, kT0 + 600 * us, 45 * us, 1, 7, 106);
  AddKernel(&c1, kT0 + 700 * us, 30 * us, 2, 7, 107);
  AddKernel(&c1, kT0 + 740 * us, 5 * us, 3, 7, 108, RECORD_FLAG_PROFILER_INTERNAL);
  for (int i = 0; i < 2; ++i) {
    MetricRange* mr = c1.add_metric_ranges();
    mr->set_config(1);
    mr->set_name(10);
    mr->set_occurrence(i);
    mr->set_occurrences_used(1);
    mr->set_start(static_cast<int64_t>(kT0 + (550 + 100 * i) * us));
    mr->set_duration(80 * us);
    mr->add_values(i == 0 ? 72.5 : 77.5);
    mr->add_values(i == 0 ? 20.0 : 30.0);
    mr->add_values(1.98e9);
    mr->set_thread_id(4243);
    mr->set_nesting_level(1);
    mr->set_sm_clock_khz(1980000);
  }
  Stats* st1 = c1.mutable_stats();
  st1->set_buffers_completed(2);
  st1->set_cupti_dropped_records(3);
  st1->set_profiler_internal_kernels(1);
  st1->set_chunks_written(1);
  if (options.footer) {
    Footer* f = c1.mutable_footer();
    f->set_clean_end(true);
    f->set_end_time_ns(kT0 + 800 * us);
    f->set_end_reason("exit");
    f->set_kernels(6);
    f->set_memcpys(1);
    f->set_memsets(1);
    f->set_api_calls(7);
    f->set_nvtx_ranges(2);
    f->set_nvtx_marks(1);
    f->set_syncs(1);
    f->set_overheads(1);
    f->set_metric_ranges(2);
    f->set_chunks(2);
  }
  w.Add(c1);
  return w.bytes();
}

}  // namespace kp
