# All external dependencies come from the system: Debian packages and the CUDA toolkit.
# Nothing is downloaded. See README "Building" for the package list.
find_package(Threads REQUIRED)
# Static libprotobuf: kptrace then runs on a machine without libprotobuf.so.32 (the GPU machine).
set(Protobuf_USE_STATIC_LIBS ON)
find_package(Protobuf REQUIRED)           # libprotobuf-dev, protobuf-compiler (tools and tests only)
find_package(PkgConfig REQUIRED)

# zstd: linked statically into the injector (hidden symbols; no clash with a host's own zstd).
find_path(ZSTD_INCLUDE_DIR zstd.h REQUIRED)
find_library(ZSTD_STATIC_LIBRARY NAMES libzstd.a REQUIRED)
add_library(kp_zstd STATIC IMPORTED GLOBAL)
set_target_properties(kp_zstd PROPERTIES IMPORTED_LOCATION "${ZSTD_STATIC_LIBRARY}"
                                         INTERFACE_INCLUDE_DIRECTORIES "${ZSTD_INCLUDE_DIR}")

# CUDA toolkit: headers (CUPTI, NVTX, driver API) and libcupti. The build needs no GPU and no nvcc.
set(KP_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root")
find_path(KP_CUPTI_INCLUDE_DIR cupti.h HINTS "${KP_CUDA_ROOT}/include" "${KP_CUDA_ROOT}/extras/CUPTI/include" REQUIRED)
find_path(KP_CUDA_INCLUDE_DIR cuda.h HINTS "${KP_CUDA_ROOT}/include" REQUIRED)
find_library(KP_CUPTI_LIBRARY NAMES cupti HINTS "${KP_CUDA_ROOT}/lib64" "${KP_CUDA_ROOT}/extras/CUPTI/lib64" REQUIRED)
get_filename_component(KP_CUPTI_LIBDIR "${KP_CUPTI_LIBRARY}" DIRECTORY)
add_library(kp_cupti INTERFACE)
target_include_directories(kp_cupti SYSTEM INTERFACE "${KP_CUPTI_INCLUDE_DIR}" "${KP_CUDA_INCLUDE_DIR}")
target_link_libraries(kp_cupti INTERFACE "${KP_CUPTI_LIBRARY}" ${CMAKE_DL_LIBS})

# GoogleTest (libgtest-dev).
if(KP_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
