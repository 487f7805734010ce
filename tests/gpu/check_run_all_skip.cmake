# check_run_all_skip.cmake: runs run_all.sh with no usable nvidia-smi: every suite must skip with
# its reason, run_all.sh must list each as OK with that SKIP line and exit 0, and an unknown suite
# name must be refused with exit status 2 (ctest: gpu_run_all_skip_without_gpu).
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/out" "${WORK_DIR}/dist")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env KP_NVIDIA_SMI=/nonexistent/nvidia-smi OUT=${WORK_DIR}/out
          bash "${SCRIPT}" "${WORK_DIR}/dist"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
message(STATUS "run_all.sh said:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit status 0 when every suite skips, got ${rc}")
endif()
foreach(suite gpu capture pc pm ptree metrics)
  if(NOT out MATCHES "OK +${suite} in [0-9]+ s: SKIP: no GPU")
    message(FATAL_ERROR "expected `OK ${suite} in N s: SKIP: no GPU ...`")
  endif()
endforeach()
if(NOT EXISTS "${WORK_DIR}/out/run_all.log")
  message(FATAL_ERROR "expected the summary in $OUT/run_all.log")
endif()
execute_process(
  COMMAND bash "${SCRIPT}" "${WORK_DIR}/dist" no_such_suite
  RESULT_VARIABLE rc
  OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "unknown suite 'no_such_suite'")
  message(FATAL_ERROR "expected exit 2 and a line naming the unknown suite, got ${rc}: ${err}")
endif()
