# tandem_unity_batches(TARGET NAME SIZE SOURCES...): the sources in batches of at most
# SIZE files, as even as the count allows, each one unity file named NAME_<i> (CMake's
# UNITY_BUILD_MODE GROUP; the target sets it). CMake's own BATCH mode cuts a list in
# order, so one more file anywhere moved which files share a batch: a group of its
# own keeps the files that parse nlohmann/json together whatever else is added.
# Sources that cannot share a batch are left out by the caller: in GROUP mode a
# source without a group compiles alone.
function(tandem_unity_batches target name size)
  set(sources ${ARGN})
  list(LENGTH sources n)
  if(n EQUAL 0)
    return()
  endif()
  math(EXPR batches "(${n} + ${size} - 1) / ${size}")
  math(EXPR per "(${n} + ${batches} - 1) / ${batches}")
  set(i 0)
  foreach(source ${sources})
    math(EXPR batch "${i} / ${per}")
    set_source_files_properties(${source} TARGET_DIRECTORY ${target} PROPERTIES UNITY_GROUP ${name}_${batch})
    math(EXPR i "${i} + 1")
  endforeach()
endfunction()
