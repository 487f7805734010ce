# check_skip.cmake: runs run_gpu_tests.sh with no usable nvidia-smi and checks that it skips
# with a reason and exit status 0 (ctest: gpu_tests_skip_without_gpu).
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/out")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env KP_NVIDIA_SMI=/nonexistent/nvidia-smi OUT=${WORK_DIR}/out
          bash "${SCRIPT}" "${WORK_DIR}/no-dist"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
message(STATUS "run_gpu_tests.sh said:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit status 0 when skipping, got ${rc}")
endif()
if(NOT out MATCHES "SKIP: no GPU \\([^)]+\\)")
  message(FATAL_ERROR "expected a line `SKIP: no GPU (<reason>)`")
endif()
if(NOT EXISTS "${WORK_DIR}/out/gpu_tests.log")
  message(FATAL_ERROR "expected the skip to be logged in $OUT/gpu_tests.log")
endif()
