// gemm_helpers.h: what metrics_sol.cu and metrics_cache.cu share: deterministic GEMM inputs
// (ValueAt) and their host reference (MatmulCell), cuBLAS's entry points resolved with dlopen
// (the GPU test programs are built with nvcc alone, without -lcublas), and "--name value"
// arguments.
#pragma once

#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

// Deterministic values in [-1, 1) from the index.
static __host__ __device__ inline float ValueAt(uint64_t i, uint32_t seed) {
  uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed * 2246822519u ^
               static_cast<uint32_t>(i >> 32) * 3266489917u;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return static_cast<float>(x & 0xffff) / 32768.f - 1.f;
}

// Host reference for C[row][col] of row-major A * B, both filled by ValueAt with seeds 3 and 4.
inline double MatmulCell(long n, long row, long col) {
  double want = 0;
  for (long k = 0; k < n; ++k)
    want += static_cast<double>(ValueAt(static_cast<uint64_t>(row) * n + k, 3)) *
            ValueAt(static_cast<uint64_t>(k) * n + col, 4);
  return want;
}

// The value after `name` in argv, or `fallback`.
inline long ArgValue(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtol(argv[i + 1], nullptr, 10);
  return fallback;
}

// The three cuBLAS entry points the programs need, resolved from the shared library.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
};

// Fills `blas` and creates `*handle`; an empty string, or why cuBLAS cannot be used.
inline std::string LoadCublas(Cublas* blas, cublasHandle_t* handle) {
  const char* const names[] = {"libcublas.so.13", "libcublas.so",
                               "/usr/local/cuda/lib64/libcublas.so.13",
                               "/usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13"};
  std::string why;
  void* lib = nullptr;
  for (const char* name : names) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) != nullptr) break;
    why += std::string(why.empty() ? "" : "; ") + dlerror();
  }
  if (lib == nullptr) return why;
  blas->create = reinterpret_cast<decltype(blas->create)>(dlsym(lib, "cublasCreate_v2"));
  blas->destroy = reinterpret_cast<decltype(blas->destroy)>(dlsym(lib, "cublasDestroy_v2"));
  blas->sgemm = reinterpret_cast<decltype(blas->sgemm)>(dlsym(lib, "cublasSgemm_v2"));
  if (!blas->create || !blas->destroy || !blas->sgemm)
    return "libcublas lacks cublasCreate_v2/cublasDestroy_v2/cublasSgemm_v2";
  if (blas->create(handle) != CUBLAS_STATUS_SUCCESS) return "cublasCreate failed";
  return "";
}
