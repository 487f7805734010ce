#include "inject/metrics/l2_sweep.h"

#include <algorithm>
#include <cstdint>

#include "inject/cupti/driver_symbol.h"

namespace kp {
namespace {

// kp_l2_sweep(p, n, sink): each thread XORs the 16-byte words p[i], i = tid, tid + stride, ...
// below n, loaded with ld.global.cg, and stores the XOR to *sink only if it is non-zero (the
// buffer is zeroed once, by kp_l2_zero(p, n), so it never does). PTX ISA 7.0 / sm_70: JIT-compiled
// for any newer GPU. Both are kernels (no memset) so that everything the sweep puts on the GPU
// is a kernel record marked profiler-internal: the sweep runs inside kp's CUPTI callbacks, where
// kp's own driver calls are not recorded as API calls.
constexpr const char kPtx[] = R"(.version 7.0
.target sm_70
.address_size 64

.visible .entry kp_l2_sweep(
    .param .u64 kp_l2_sweep_p,
    .param .u64 kp_l2_sweep_n,
    .param .u64 kp_l2_sweep_sink)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<9>;

    ld.param.u64 %rd1, [kp_l2_sweep_p];
    ld.param.u64 %rd2, [kp_l2_sweep_n];
    ld.param.u64 %rd3, [kp_l2_sweep_sink];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
    mov.u32 %r5, 0;
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra DONE;
LOOP:
    shl.b64 %rd7, %rd4, 4;
    add.u64 %rd8, %rd1, %rd7;
    ld.global.cg.v4.u32 {%r6, %r7, %r8, %r9}, [%rd8];
    xor.b32 %r5, %r5, %r6;
    xor.b32 %r5, %r5, %r7;
    xor.b32 %r5, %r5, %r8;
    xor.b32 %r5, %r5, %r9;
    add.u64 %rd4, %rd4, %rd6;
    setp.lt.u64 %p1, %rd4, %rd2;
    @%p1 bra LOOP;
DONE:
    setp.eq.u32 %p2, %r5, 0;
    @%p2 bra END;
    st.global.u32 [%rd3], %r5;
END:
    ret;
}

.visible .entry kp_l2_zero(
    .param .u64 kp_l2_zero_p,
    .param .u64 kp_l2_zero_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<9>;

    ld.param.u64 %rd1, [kp_l2_zero_p];
    ld.param.u64 %rd2, [kp_l2_zero_n];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
    mov.u32 %r5, 0;
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra ZDONE;
ZLOOP:
    shl.b64 %rd7, %rd4, 4;
    add.u64 %rd8, %rd1, %rd7;
    st.global.v4.u32 [%rd8], {%r5, %r5, %r5, %r5};
    add.u64 %rd4, %rd4, %rd6;
    setp.lt.u64 %p1, %rd4, %rd2;
    @%p1 bra ZLOOP;
ZDONE:
    ret;
}
)";

// kp_l2_discard(p, lines): each thread discards the 128-byte lines p + 128 * i, i = tid,
// tid + stride, ... below `lines`, from L2 without writing them back (discard.global.L2,
// PTX ISA 7.4, sm_80 and newer; a separate module so that the sweep still loads on older GPUs).
// Run after the sweep, it turns the sweep buffer's clean lines into free ones: the measured
// kernel then starts from an empty L2, as after ncu's flush and invalidate, not from one full of
// kp's lines (under which a write-heavy kernel ran ~3 % slower than under ncu on the H200). The
// lines were clean, so DRAM keeps kp_l2_zero's zeros; were a later read to see other values (PTX
// leaves them unspecified), the sweep would only store its XOR to the 16-byte sink.
constexpr const char kDiscardPtx[] = R"(.version 7.4
.target sm_80
.address_size 64

.visible .entry kp_l2_discard(
    .param .u64 kp_l2_discard_p,
    .param .u64 kp_l2_discard_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<9>;

    ld.param.u64 %rd1, [kp_l2_discard_p];
    ld.param.u64 %rd2, [kp_l2_discard_n];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.u64 %rd4, %rd4, %rd5;
    mul.wide.u32 %rd6, %r4, %r2;
    setp.ge.u64 %p1, %rd4, %rd2;
    @%p1 bra DDONE;
DLOOP:
    shl.b64 %rd7, %rd4, 7;
    add.u64 %rd8, %rd1, %rd7;
    discard.global.L2 [%rd8], 128;
    add.u64 %rd4, %rd4, %rd6;
    setp.lt.u64 %p1, %rd4, %rd2;
    @%p1 bra DLOOP;
DDONE:
    ret;
}
)";

constexpr unsigned kBlock = 256;

// Driver entry points, looked up once (RTLD_NOLOAD: never load a driver the app did not load).
struct Driver {
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*exchange_capture_mode)(CUstreamCaptureMode*) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  bool ok = false;
};

template <typename Fn>
void Lookup(const char* name, Fn* fn) {
  *fn = FindDriverSymbol<Fn>(name);
}

const Driver& GetDriver() {
  static const Driver d = [] {
    Driver d;
    Lookup("cuCtxGetDevice", &d.ctx_get_device);
    Lookup("cuDeviceGetAttribute", &d.device_get_attribute);
    Lookup("cuModuleLoadData", &d.module_load_data);
    Lookup("cuModuleGetFunction", &d.module_get_function);
    Lookup("cuMemAlloc_v2", &d.mem_alloc);
    Lookup("cuThreadExchangeStreamCaptureMode", &d.exchange_capture_mode);
    Lookup("cuStreamCreate", &d.stream_create);
    Lookup("cuStreamSynchronize", &d.stream_synchronize);
    Lookup("cuLaunchKernel", &d.launch_kernel);
    Lookup("cuGetErrorName", &d.get_error_name);
    Lookup("cuMemFree_v2", &d.mem_free);
    Lookup("cuModuleUnload", &d.module_unload);
    Lookup("cuStreamDestroy_v2", &d.stream_destroy);
    d.ok = d.ctx_get_device && d.device_get_attribute && d.module_load_data &&
           d.module_get_function && d.mem_alloc && d.stream_create && d.stream_synchronize &&
           d.launch_kernel && d.exchange_capture_mode;
    return d;
  }();
  return d;
}

// "<call> failed: <name> (<code>)"; the public functions add "L2 sweep" as context.
Status Check(const Driver& d, const char* call, CUresult r) {
  if (r == CUDA_SUCCESS) return Status();
  const char* name = nullptr;
  if (!d.get_error_name || d.get_error_name(r, &name) != CUDA_SUCCESS || !name) name = "?";
  return Status::Error(std::string(call) + " failed: " + name + " (" + std::to_string(r) + ")");
}

// While it lives, the calling thread may make calls that a stream capture in progress would
// otherwise forbid (cudaStreamCaptureModeRelaxed), so kp's sweep can neither fail nor invalidate
// an application's CUDA-graph capture; the sweep itself only touches kp's own stream.
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const Driver& d) : d_(d) {
    ok_ = d_.exchange_capture_mode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (ok_) d_.exchange_capture_mode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  const Driver& d_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool ok_ = false;
};

}  // namespace

const char* L2SweepPtx() { return kPtx; }
const char* L2DiscardPtx() { return kDiscardPtx; }

Status L2Sweep::Init(CUcontext ctx) {
  const Driver& d = GetDriver();
  if (!d.ok)
    return Status::Error("L2 sweep: the CUDA driver's entry points were not found in the process");
  ctx_ = ctx;
  RelaxedCaptureMode relaxed(d);
  CUdevice dev = 0;
  int l2 = 0, sms = 0, major = 0;
  Status s = Check(d, "cuCtxGetDevice", d.ctx_get_device(&dev));
  if (s.ok())
    s = Check(d, "cuDeviceGetAttribute(L2_CACHE_SIZE)",
              d.device_get_attribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  if (s.ok())
    s = Check(d, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)",
              d.device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  if (s.ok())
    s = Check(d, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)",
              d.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  if (!s.ok()) return s.WithContext("L2 sweep");
  // Twice the L2, at least 8 MiB, in whole 16-byte words.
  bytes_ = std::max<size_t>(2 * static_cast<size_t>(l2 > 0 ? l2 : 0), size_t{8} << 20);
  bytes_ &= ~size_t{127};  // whole 128-byte lines (and so 16-byte words)
  grid_ = static_cast<unsigned>(sms > 0 ? sms : 1) * 8;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUfunction zero = nullptr;
  s = Check(d, "cuModuleLoadData", d.module_load_data(&module, kPtx));
  if (s.ok())
    s = Check(d, "cuModuleGetFunction",
              d.module_get_function(&function, module, kL2SweepKernelName));
  if (s.ok())
    s = Check(d, "cuModuleGetFunction", d.module_get_function(&zero, module, kL2ZeroKernelName));
  if (s.ok()) s = Check(d, "cuMemAlloc", d.mem_alloc(&buffer_, bytes_));
  if (s.ok()) s = Check(d, "cuMemAlloc", d.mem_alloc(&sink_, 16));
  if (s.ok()) s = Check(d, "cuStreamCreate", d.stream_create(&stream_, CU_STREAM_NON_BLOCKING));
  // Zeroed on kp's own stream (never the legacy one, which would wait for the application).
  uint64_t words = bytes_ / 16;
  void* zero_args[] = {&buffer_, &words};
  if (s.ok())
    s = Check(d, "cuLaunchKernel",
              d.launch_kernel(zero, grid_, 1, 1, kBlock, 1, 1, 0, stream_, zero_args, nullptr));
  if (s.ok()) s = Check(d, "cuStreamSynchronize", d.stream_synchronize(stream_));
  if (!s.ok()) {
    // Give back what was made (best effort) so a failed set-up holds no memory.
    if (stream_ && d.stream_destroy) d.stream_destroy(stream_);
    if (sink_ && d.mem_free) d.mem_free(sink_);
    if (buffer_ && d.mem_free) d.mem_free(buffer_);
    if (module && d.module_unload) d.module_unload(module);
    stream_ = nullptr;
    sink_ = buffer_ = 0;
    return s.WithContext("L2 sweep");
  }
  module_ = module;
  function_ = function;
  // The discard kernel where the GPU has the instruction; without it the sweep still leaves no
  // dirty line, only clean ones of kp's buffer.
  CUmodule discard_module = nullptr;
  if (major >= 8 && d.module_load_data(&discard_module, kDiscardPtx) == CUDA_SUCCESS &&
      d.module_get_function(&discard_, discard_module, kL2DiscardKernelName) != CUDA_SUCCESS) {
    discard_ = nullptr;
    if (d.module_unload) d.module_unload(discard_module);
  }
  return Status();
}

Status L2Sweep::Run() {
  const Driver& d = GetDriver();
  if (!function_) return Status::Error("L2 sweep: not initialized");
  RelaxedCaptureMode relaxed(d);
  uint64_t words = bytes_ / 16;
  void* args[] = {&buffer_, &words, &sink_};
  Status s =
      Check(d, "cuLaunchKernel",
            d.launch_kernel(function_, grid_, 1, 1, kBlock, 1, 1, 0, stream_, args, nullptr));
  uint64_t lines = bytes_ / 128;
  void* discard_args[] = {&buffer_, &lines};
  if (s.ok() && discard_)
    s = Check(
        d, "cuLaunchKernel",
        d.launch_kernel(discard_, grid_, 1, 1, kBlock, 1, 1, 0, stream_, discard_args, nullptr));
  if (s.ok()) s = Check(d, "cuStreamSynchronize", d.stream_synchronize(stream_));
  return s.WithContext("L2 sweep");
}

}  // namespace kp
