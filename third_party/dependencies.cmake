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
# kp_cupti_headers: the CUDA/CUPTI headers only, for code that reaches libcupti some other way
# (kptrace loads it with dlopen: tools/kptrace/cupti_library.h). kp_cupti also links libcupti.
add_library(kp_cupti_headers INTERFACE)
target_include_directories(kp_cupti_headers SYSTEM INTERFACE "${KP_CUPTI_INCLUDE_DIR}"
                                                             "${KP_CUDA_INCLUDE_DIR}")
add_library(kp_cupti INTERFACE)
target_link_libraries(kp_cupti INTERFACE kp_cupti_headers "${KP_CUPTI_LIBRARY}" ${CMAKE_DL_LIBS})
# The name the loader knows libcupti by (e.g. libcupti.so.13), for dlopen.
file(GLOB KP_CUPTI_SONAME_CANDIDATES "${KP_CUPTI_LIBDIR}/libcupti.so.[0-9]*")
list(FILTER KP_CUPTI_SONAME_CANDIDATES INCLUDE REGEX "libcupti\\.so\\.[0-9]+$")
if(KP_CUPTI_SONAME_CANDIDATES)
  list(GET KP_CUPTI_SONAME_CANDIDATES 0 KP_CUPTI_SONAME)
  get_filename_component(KP_CUPTI_SONAME "${KP_CUPTI_SONAME}" NAME)
else()
  set(KP_CUPTI_SONAME "libcupti.so")
endif()

# GoogleTest (libgtest-dev).
if(KP_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
