# The injector and kptrace share code only through common/ (and the schema in proto/): no file
# in inject/ includes tools/, none in tools/ includes inject/, and common/ and proto/ include
# neither.
#   cmake -DSOURCE_DIR=... -P include_boundaries.cmake
# Fails naming every offending file and line.
set(rules
    "inject|tools"
    "tools|inject"
    "common|inject"
    "common|tools"
    "proto|inject"
    "proto|tools")
set(found "")
foreach(rule IN LISTS rules)
  string(REPLACE "|" ";" parts "${rule}")
  list(GET parts 0 from)
  list(GET parts 1 to)
  file(GLOB_RECURSE sources LIST_DIRECTORIES false "${SOURCE_DIR}/${from}/*.h"
       "${SOURCE_DIR}/${from}/*.cc" "${SOURCE_DIR}/${from}/*.cpp" "${SOURCE_DIR}/${from}/*.cu")
  foreach(f IN LISTS sources)
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]${to}/")
    foreach(line IN LISTS lines)
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
      string(APPEND found "  ${rel}: ${line}\n")
    endforeach()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "includes across the injector/kptrace boundary (share through common/):\n"
                      "${found}")
endif()
