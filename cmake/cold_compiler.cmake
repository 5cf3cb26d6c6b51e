# The -O0 code (the engine's cold part, the command line, the tests, the CUDA check)
# compiled by clang where GCC is the project's compiler and clang++ is installed.
#
# Why: at -O0 the work is parsing and emitting code for the templates the STL,
# nlohmann/json, spdlog and Boost.Test instantiate, and clang does that in two
# thirds of GCC's time: a fresh build of everything, 121 CPU-s with GCC and 82 with
# clang 14 (2 cores, 2026-11-29). The -O3 part stays with GCC, whose code ran the
# steps 10 to 18% faster than clang's (tandem_step_bench: MLP, LeNet, ResNet, GPT).
# Both compile against libstdc++ with the same ABI, so the objects link together.
#
# TANDEM_COLD_CXX: the compiler for the -O0 code; empty (or OFF) compiles it with
# CMAKE_CXX_COMPILER like the rest. Default: clang++ where found, with GCC as the
# project's compiler.
if(NOT DEFINED TANDEM_COLD_CXX)
  set(_cold_default "")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Debian's clang-NN packages install clang++-NN; the clang package adds clang++.
    find_program(TANDEM_CLANGXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14)
    mark_as_advanced(TANDEM_CLANGXX)
    if(TANDEM_CLANGXX)
      set(_cold_default ${TANDEM_CLANGXX})
    endif()
  endif()
  set(TANDEM_COLD_CXX "${_cold_default}" CACHE STRING
      "Compiler for the -O0 code (cmake/cold_compiler.cmake); empty for CMAKE_CXX_COMPILER")
endif()
if(TANDEM_COLD_CXX AND NOT TANDEM_COLD_CXX STREQUAL "OFF")
  # A name is looked up on PATH once here, so that a compiler that is not there fails
  # the configure, not every compile.
  find_program(_cold_path NAMES ${TANDEM_COLD_CXX} NO_CACHE)
  if(NOT _cold_path)
    message(FATAL_ERROR "TANDEM_COLD_CXX='${TANDEM_COLD_CXX}' is not an executable compiler: install clang "
                        "(`apt-get install clang`), or configure with -DTANDEM_COLD_CXX= to compile everything "
                        "with ${CMAKE_CXX_COMPILER}")
  endif()
  set(TANDEM_COLD_CXX_PATH ${_cold_path})
  message(STATUS "tandem: -O0 code compiled by ${TANDEM_COLD_CXX}, -O3 code by ${CMAKE_CXX_COMPILER}")
endif()

# tandem_cold_compiler(target ...): the targets' C++ compiled by TANDEM_COLD_CXX.
function(tandem_cold_compiler)
  if(NOT TANDEM_COLD_CXX OR TANDEM_COLD_CXX STREQUAL "OFF")
    return()
  endif()
  set(launcher ${CMAKE_SOURCE_DIR}/cmake/compile_with.sh ${TANDEM_COLD_CXX_PATH} ${CMAKE_CXX_COMPILER_LAUNCHER} --)
  foreach(target ${ARGN})
    set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER "${launcher}")
  endforeach()
endfunction()
