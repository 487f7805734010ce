#include "inject/cupti/nvtx_forward.h"

#include <cupti.h>
#include <dlfcn.h>

namespace kp {

int ForwardNvtxInitToCupti(void* get_export_table) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) == 0 || info.dli_fname == nullptr) {
    return 0;
  }
  void* cupti = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (cupti == nullptr) return 0;
  using NvtxInitFn = int (*)(void*);
  auto forward = reinterpret_cast<NvtxInitFn>(dlsym(cupti, "InitializeInjectionNvtx2"));
  return forward != nullptr ? forward(get_export_table) : 0;
}

}  // namespace kp
