#!/usr/bin/env bash
# A compiler launcher (CMake's <LANG>_COMPILER_LAUNCHER) that compiles with another
# compiler: cmake/cold_compiler.cmake says why.
#
# usage: compile_with.sh COMPILER [LAUNCHER ...] -- CMAKE_COMPILER ARGS...
# runs   [LAUNCHER ...] COMPILER ARGS...   (LAUNCHER: ccache, where it is used)
set -eu
compiler=$1
shift
launchers=()
while [[ $# -gt 0 && $1 != -- ]]; do
  launchers+=("$1")
  shift
done
if [[ $# -lt 2 ]]; then
  echo "cmake/compile_with.sh: expected 'COMPILER [LAUNCHER ...] -- CMAKE_COMPILER ARGS...'" >&2
  exit 2
fi
shift 2  # the "--" and the compiler CMake chose
exec "${launchers[@]}" "$compiler" "$@"
