# kptrace info|convert|summary must run where no CUDA is installed; only `kptrace metrics`
# loads libcupti (tools/kptrace/cupti_library.h).
#   cmake -DKPTRACE=... -DTRACE=... -DCUDA_LIBDIR=... -DWORK_DIR=... -P kptrace_without_cuda.cmake
# 1. No DT_NEEDED entry on a CUDA library.
# 2. info/convert/summary never open libcupti or libnvperf (LD_DEBUG=files).
# 3. Where user namespaces are allowed: with CUDA_LIBDIR hidden under an empty tmpfs, the three
#    commands succeed and `kptrace metrics` fails with one message naming libcupti.
execute_process(COMMAND readelf -d ${KPTRACE} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${KPTRACE} failed")
endif()
if(dyn MATCHES "NEEDED[^\n]*(libcupti|libnvperf|libcuda|libcudart)")
  message(FATAL_ERROR "kptrace has a hard dependency on a CUDA library:\n${dyn}")
endif()

file(MAKE_DIRECTORY ${WORK_DIR})
set(commands
    "info ${TRACE}"
    "convert ${TRACE} --to csv -o ${WORK_DIR}/csv"
    "summary ${TRACE}")
foreach(c IN LISTS commands)
  separate_arguments(args UNIX_COMMAND "${c}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_DEBUG=files ${KPTRACE} ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kptrace ${c} failed (${rc}):\n${err}")
  endif()
  if(err MATCHES "file=[^\n]*(libcupti|libnvperf)")
    message(FATAL_ERROR "kptrace ${c} loaded a CUDA library:\n${CMAKE_MATCH_0}")
  endif()
endforeach()

execute_process(COMMAND unshare -r -m true RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(STATUS "user namespaces not available here: skipped the hidden-CUDA run")
  return()
endif()
set(script "mount -t tmpfs none '${CUDA_LIBDIR}' || exit 99")
foreach(c IN LISTS commands)
  string(APPEND script " && '${KPTRACE}' ${c} > /dev/null")
endforeach()
string(APPEND script " && ! '${KPTRACE}' metrics check --chip GH100 gpu__time_duration.sum")
execute_process(COMMAND unshare -r -m sh -c "${script}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 99)
  message(STATUS "cannot mount over ${CUDA_LIBDIR} here: skipped the hidden-CUDA run")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "with ${CUDA_LIBDIR} hidden, kptrace failed (${rc}):\n${out}\n${err}")
endif()
if(NOT err MATCHES "kptrace metrics: cannot load libcupti")
  message(FATAL_ERROR "kptrace metrics without libcupti did not name it:\n${err}")
endif()
