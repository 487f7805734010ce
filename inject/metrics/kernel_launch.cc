#include "inject/metrics/kernel_launch.h"

#include <cupti_driver_cbid.h>

#include <string>

#include "inject/cupti/driver_symbol.h"

namespace kp {
namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
using LaunchExFn = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using CooperativeFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void**);

template <typename P>
void ReadGrid(const P& p, KernelLaunch* out) {
  out->function = p.f;
  out->grid[0] = p.gridDimX;
  out->grid[1] = p.gridDimY;
  out->grid[2] = p.gridDimZ;
  out->block[0] = p.blockDimX;
  out->block[1] = p.blockDimY;
  out->block[2] = p.blockDimZ;
  out->shared_bytes = p.sharedMemBytes;
  out->stream = p.hStream;
  out->params = p.kernelParams;
}

// cuLaunchKernelEx and its _ptsz twin: the grid is in the launch config. False without one.
template <typename P>
bool ReadEx(const P& p, KernelLaunch* out) {
  out->config = p.config;
  out->function = p.f;
  out->params = p.kernelParams;
  out->extra = p.extra;
  return p.config != nullptr;
}

Status Checked(const char* name, CUresult r) {
  if (r == CUDA_SUCCESS) return Status();
  return Status::Error(std::string("kernel replay: ") + name + " failed (CUresult " +
                       std::to_string(static_cast<int>(r)) + ")");
}

}  // namespace

bool ReadKernelLaunch(CUpti_CallbackId cbid, const void* function_params, KernelLaunch* out) {
  if (function_params == nullptr) return false;
  *out = KernelLaunch();
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      const auto& p = *static_cast<const cuLaunchKernel_params*>(function_params);
      out->form = KernelLaunch::Form::kKernel;
      ReadGrid(p, out);
      out->extra = p.extra;
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      const auto& p = *static_cast<const cuLaunchKernel_ptsz_params*>(function_params);
      out->form = KernelLaunch::Form::kKernelPtsz;
      ReadGrid(p, out);
      out->extra = p.extra;
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const auto& p = *static_cast<const cuLaunchKernelEx_params*>(function_params);
      out->form = KernelLaunch::Form::kKernelEx;
      return ReadEx(p, out);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const auto& p = *static_cast<const cuLaunchKernelEx_ptsz_params*>(function_params);
      out->form = KernelLaunch::Form::kKernelExPtsz;
      return ReadEx(p, out);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: {
      const auto& p = *static_cast<const cuLaunchCooperativeKernel_params*>(function_params);
      out->form = KernelLaunch::Form::kCooperative;
      ReadGrid(p, out);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
      const auto& p = *static_cast<const cuLaunchCooperativeKernel_ptsz_params*>(function_params);
      out->form = KernelLaunch::Form::kCooperativePtsz;
      ReadGrid(p, out);
      return true;
    }
    default:
      return false;
  }
}

Status Relaunch(const KernelLaunch& l) {
  using Form = KernelLaunch::Form;
  switch (l.form) {
    case Form::kKernel:
    case Form::kKernelPtsz: {
      const char* name = l.form == Form::kKernel ? "cuLaunchKernel" : "cuLaunchKernel_ptsz";
      static const LaunchFn plain = FindDriverSymbol<LaunchFn>("cuLaunchKernel");
      static const LaunchFn ptsz = FindDriverSymbol<LaunchFn>("cuLaunchKernel_ptsz");
      const LaunchFn fn = l.form == Form::kKernel ? plain : ptsz;
      if (fn == nullptr) return Status::Error(std::string("kernel replay: no ") + name);
      return Checked(name, fn(l.function, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                              l.block[2], l.shared_bytes, l.stream, l.params, l.extra));
    }
    case Form::kKernelEx:
    case Form::kKernelExPtsz: {
      const char* name = l.form == Form::kKernelEx ? "cuLaunchKernelEx" : "cuLaunchKernelEx_ptsz";
      static const LaunchExFn plain = FindDriverSymbol<LaunchExFn>("cuLaunchKernelEx");
      static const LaunchExFn ptsz = FindDriverSymbol<LaunchExFn>("cuLaunchKernelEx_ptsz");
      const LaunchExFn fn = l.form == Form::kKernelEx ? plain : ptsz;
      if (fn == nullptr) return Status::Error(std::string("kernel replay: no ") + name);
      return Checked(name, fn(l.config, l.function, l.params, l.extra));
    }
    case Form::kCooperative:
    case Form::kCooperativePtsz: {
      const char* name = l.form == Form::kCooperative ? "cuLaunchCooperativeKernel"
                                                      : "cuLaunchCooperativeKernel_ptsz";
      static const CooperativeFn plain =
          FindDriverSymbol<CooperativeFn>("cuLaunchCooperativeKernel");
      static const CooperativeFn ptsz =
          FindDriverSymbol<CooperativeFn>("cuLaunchCooperativeKernel_ptsz");
      const CooperativeFn fn = l.form == Form::kCooperative ? plain : ptsz;
      if (fn == nullptr) return Status::Error(std::string("kernel replay: no ") + name);
      return Checked(name, fn(l.function, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                              l.block[2], l.shared_bytes, l.stream, l.params));
    }
  }
  return Status::Error("kernel replay: unknown launch form");
}

}  // namespace kp
