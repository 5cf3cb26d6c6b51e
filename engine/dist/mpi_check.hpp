#pragma once
// An MPI call's error code as a tandem::Error that says which call failed while doing
// what (MPI_ERRORS_RETURN is set on every communicator tandem uses).
#include <mpi.h>

#include <string>

#include "engine/core/error.hpp"

namespace tandem {

inline void check_mpi(int rc, const char* call, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  TANDEM_FAIL_HINT("check that every rank runs the same tandem and experiment", call, " failed during ", what, ": ",
                   std::string(text, static_cast<size_t>(len)));
}

}  // namespace tandem
