// driver_symbol.h: libkpinject does not link libcuda (the application brings it). Driver entry
// points are looked up in the process: the global scope first, then libcuda.so.1 if it is
// already loaded (cudart loads it RTLD_LOCAL, so RTLD_DEFAULT misses it). RTLD_NOLOAD: kp never
// loads a driver the application did not load. The reference a successful RTLD_NOLOAD takes is
// kept: the symbol stays valid for the life of the process.
#pragma once

#include <dlfcn.h>

namespace kp {

// The driver function `name` as type Fn, or nullptr when the process has no such symbol.
template <typename Fn>
Fn FindDriverSymbol(const char* name) {
  void* sym = dlsym(RTLD_DEFAULT, name);
  if (sym == nullptr) {
    if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) sym = dlsym(lib, name);
  }
  return reinterpret_cast<Fn>(sym);
}

}  // namespace kp
