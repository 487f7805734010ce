#include "inject/metrics/kernel_facts.h"

#include <cupti_activity.h>

#include "inject/cupti/driver_symbol.h"

namespace kp {
namespace {

using GetAttributeFn = CUresult (*)(int*, CUfunction_attribute, CUfunction);
using GetNameFn = CUresult (*)(const char**, CUfunction);
using KernelFunctionFn = CUresult (*)(CUfunction*, CUkernel);

uint32_t Attribute(CUfunction f, CUfunction_attribute a) {
  static const auto get = FindDriverSymbol<GetAttributeFn>("cuFuncGetAttribute");
  int v = 0;
  if (get == nullptr || get(&v, a, f) != CUDA_SUCCESS || v < 0) return 0;
  return static_cast<uint32_t>(v);
}

}  // namespace

KernelFacts DescribeKernelLaunch(const KernelLaunch& l) {
  using Form = KernelLaunch::Form;
  KernelFacts k;
  const bool ex = l.form == Form::kKernelEx || l.form == Form::kKernelExPtsz;
  k.per_thread_stream = l.form == Form::kKernelPtsz || l.form == Form::kKernelExPtsz ||
                        l.form == Form::kCooperativePtsz;
  if (l.form == Form::kCooperative || l.form == Form::kCooperativePtsz)
    k.launch_type = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE;
  if (ex && l.config != nullptr) {
    const CUlaunchConfig& c = *l.config;
    k.grid[0] = c.gridDimX, k.grid[1] = c.gridDimY, k.grid[2] = c.gridDimZ;
    k.block[0] = c.blockDimX, k.block[1] = c.blockDimY, k.block[2] = c.blockDimZ;
    k.dynamic_shared = c.sharedMemBytes;
    k.stream = c.hStream;
    for (unsigned i = 0; c.attrs != nullptr && i < c.numAttrs; ++i) {
      const CUlaunchAttribute& a = c.attrs[i];
      if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        k.cluster[0] = a.value.clusterDim.x;
        k.cluster[1] = a.value.clusterDim.y;
        k.cluster[2] = a.value.clusterDim.z;
      } else if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && a.value.cooperative != 0) {
        k.launch_type = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE;
      }
    }
  } else {
    for (int i = 0; i < 3; ++i) k.grid[i] = l.grid[i], k.block[i] = l.block[i];
    k.dynamic_shared = l.shared_bytes;
    k.stream = l.stream;
  }
  if (l.function == nullptr) return k;
  static const auto get_name = FindDriverSymbol<GetNameFn>("cuFuncGetName");
  static const auto kernel_function = FindDriverSymbol<KernelFunctionFn>("cuKernelGetFunction");
  CUfunction f = l.function;
  const char* name = nullptr;
  if (get_name != nullptr && get_name(&name, f) != CUDA_SUCCESS) {
    // The runtime launches CUkernel handles (context-independent) through cuLaunchKernel; the
    // driver's function queries take the current context's CUfunction of one.
    name = nullptr;
    CUfunction resolved = nullptr;
    if (kernel_function != nullptr &&
        kernel_function(&resolved, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS &&
        resolved != nullptr) {
      f = resolved;
      if (get_name(&name, f) != CUDA_SUCCESS) name = nullptr;
    }
  }
  if (name != nullptr) k.name = name;
  // CUPTI's records give at least 16 (seen on the H200: 16 for kernels compiled to 8 and 10,
  // the compiled count above that).
  k.registers_per_thread = Attribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS);
  if (k.registers_per_thread > 0 && k.registers_per_thread < 16) k.registers_per_thread = 16;
  k.static_shared = Attribute(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  k.local_per_thread = Attribute(f, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
  if (k.cluster[0] == 0) {
    // A cluster size the kernel was compiled with (__cluster_dims__).
    const uint32_t x = Attribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH);
    if (x > 0) {
      k.cluster[0] = x;
      k.cluster[1] = Attribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT);
      k.cluster[2] = Attribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH);
    }
  }
  return k;
}

}  // namespace kp
