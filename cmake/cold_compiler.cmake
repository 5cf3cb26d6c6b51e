# The -O0 code (the engine's cold part, the command line, the tests) compiled by clang
# where GCC is the project's compiler and clang++ is installed.
#
# Why: at -O0 the work is parsing and emitting code for the templates the STL,
# nlohmann/json, spdlog and Boost.Test instantiate, and clang does that in two
# thirds of GCC's time: a fresh build of everything, 121 CPU-s with GCC and 82 with
# clang 14 (2 cores, 2026-11-29). The -O3 part stays with GCC, whose code ran the
# steps 10 to 18% faster than clang's (tandem_step_bench: MLP, LeNet, ResNet, GPT).
# Both compile against the same libstdc++ (checked below), so the objects link
# together. The CUDA host files' check stays with GCC: a GPU build compiles them
# with GCC, so that is the compiler that must accept them.
#
# TANDEM_COLD_CXX: AUTO (the default: clang++ where found, with GCC as the project's
# compiler, looked for again at each configure), a compiler's name or path, or empty
# (or OFF) to compile everything with CMAKE_CXX_COMPILER.
set(TANDEM_COLD_CXX AUTO CACHE STRING
    "Compiler for the -O0 code (cmake/cold_compiler.cmake): AUTO, a clang++, or empty for CMAKE_CXX_COMPILER")
set(_cold_dir ${CMAKE_CURRENT_LIST_DIR})
set(TANDEM_COLD_CXX_PATH "")

# GCC's link cannot use what clang emits for these: LLVM bitcode (-flto, IPO) or
# LLVM's coverage counters (--coverage).
string(TOUPPER "${CMAKE_BUILD_TYPE}" _cold_type)
set(_cold_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_cold_type}}")
set(_cold_skip "")
if(CMAKE_INTERPROCEDURAL_OPTIMIZATION OR _cold_flags MATCHES "-flto")
  set(_cold_skip "link-time optimisation is on")
elseif(_cold_flags MATCHES "--coverage|-fprofile-arcs|-ftest-coverage|-fprofile-generate")
  set(_cold_skip "coverage or profiling flags are set")
elseif(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(_cold_skip "the project's compiler is ${CMAKE_CXX_COMPILER_ID}, not GCC")
endif()

set(_cold_wanted "")
set(_cold_auto OFF)
if(TANDEM_COLD_CXX STREQUAL "AUTO")
  set(_cold_auto ON)
  if(NOT _cold_skip)
    # Debian's clang-NN packages install clang++-NN; the clang package adds clang++.
    find_program(TANDEM_CLANGXX NAMES clang++ clang++-21 clang++-20 clang++-19 clang++-18 clang++-17 clang++-16
                                      clang++-15 clang++-14)
    mark_as_advanced(TANDEM_CLANGXX)
    if(TANDEM_CLANGXX)
      set(_cold_wanted ${TANDEM_CLANGXX})
    endif()
  endif()
elseif(TANDEM_COLD_CXX AND NOT TANDEM_COLD_CXX STREQUAL "OFF")
  if(_cold_skip)
    message(WARNING "TANDEM_COLD_CXX=${TANDEM_COLD_CXX} is not used: ${_cold_skip}; everything is compiled by "
                    "${CMAKE_CXX_COMPILER}")
  else()
    # A name is looked up on PATH once here, so that a compiler that is not there
    # fails the configure, not every compile.
    find_program(_cold_found NAMES ${TANDEM_COLD_CXX} NO_CACHE)
    if(NOT _cold_found)
      message(FATAL_ERROR "TANDEM_COLD_CXX='${TANDEM_COLD_CXX}' is not on PATH: install clang (`apt-get install "
                          "clang`), or configure with -DTANDEM_COLD_CXX= to compile everything with "
                          "${CMAKE_CXX_COMPILER}")
    endif()
    set(_cold_wanted ${_cold_found})
  endif()
endif()

# The cold compiler must read the libstdc++ GCC uses (the same _GLIBCXX_RELEASE and
# __GLIBCXX__ date), or the two halves would not agree on the library's types: both
# preprocess a few standard headers in C++17 and print the two macros. Checked once
# per pair of compilers (about 0.3 s).
if(_cold_wanted)
  set(_cold_key "${_cold_wanted};${CMAKE_CXX_COMPILER}")
  if(NOT TANDEM_COLD_CXX_CHECKED STREQUAL _cold_key)
    set(_probe ${CMAKE_BINARY_DIR}/CMakeFiles/tandem_cold_probe.cpp)
    file(WRITE ${_probe} "#include <string>\n#include <vector>\n#include <mutex>\nint libstdcxx[] = {_GLIBCXX_RELEASE, __GLIBCXX__};\n")
    set(_cold_ok OFF)
    execute_process(COMMAND ${_cold_wanted} -std=c++17 -E -P ${_probe} RESULT_VARIABLE _rc_cold
                    OUTPUT_VARIABLE _out_cold ERROR_VARIABLE _err_cold)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 -E -P ${_probe} OUTPUT_VARIABLE _out_gcc ERROR_QUIET)
    string(REGEX MATCH "int libstdcxx\\[\\] = {[^}]*}" _lib_cold "${_out_cold}")
    string(REGEX MATCH "int libstdcxx\\[\\] = {[^}]*}" _lib_gcc "${_out_gcc}")
    if(NOT _rc_cold EQUAL 0)
      string(REGEX MATCH "[^\n]+" _err_cold "${_err_cold}")  # its first line
      set(_cold_why "it cannot read C++17's standard headers (${_err_cold})")
    elseif(NOT _lib_cold STREQUAL _lib_gcc OR NOT _lib_gcc)
      set(_cold_why "it reads another libstdc++ than ${CMAKE_CXX_COMPILER} (${_lib_cold} against ${_lib_gcc})")
    else()
      set(_cold_ok ON)
      set(TANDEM_COLD_CXX_CHECKED "${_cold_key}" CACHE INTERNAL "the cold compiler pair last checked")
    endif()
    if(NOT _cold_ok)
      if(_cold_auto)
        message(WARNING "tandem: ${_cold_wanted} is not used for the -O0 code: ${_cold_why}; everything is "
                        "compiled by ${CMAKE_CXX_COMPILER} (set -DTANDEM_COLD_CXX= to silence this)")
        set(_cold_wanted "")
      else()
        message(FATAL_ERROR "TANDEM_COLD_CXX=${TANDEM_COLD_CXX} cannot compile the -O0 code: ${_cold_why}. "
                            "Configure with -DTANDEM_COLD_CXX= to compile everything with ${CMAKE_CXX_COMPILER}")
      endif()
    endif()
  endif()
endif()
if(_cold_wanted)
  set(TANDEM_COLD_CXX_PATH ${_cold_wanted})
  message(STATUS "tandem: -O0 code compiled by ${TANDEM_COLD_CXX_PATH}, -O3 code by ${CMAKE_CXX_COMPILER}")
elseif(_cold_skip AND _cold_auto)
  message(STATUS "tandem: everything compiled by ${CMAKE_CXX_COMPILER} (no clang for the -O0 code: ${_cold_skip})")
endif()

# tandem_cold_compiler(target ...): the targets' C++ compiled by the cold compiler.
function(tandem_cold_compiler)
  if(NOT TANDEM_COLD_CXX_PATH)
    return()
  endif()
  set(launcher ${_cold_dir}/compile_with.sh ${TANDEM_COLD_CXX_PATH} ${CMAKE_CXX_COMPILER_LAUNCHER} --)
  foreach(target ${ARGN})
    set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER "${launcher}")
  endforeach()
endfunction()
