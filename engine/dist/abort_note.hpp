#pragma once
// A rank that aborts the job says so in a file the launcher named, besides its log:
// across hosts, mpirun may not end after MPI_Abort while a host it cannot reach
// (powered off, its link down) still holds part of the job, and the launcher (the
// elastic supervisor) then ends mpirun itself, a grace period after the first note.
// The launcher sets TANDEM_ABORT_NOTE to the file's path for the job (mpirun passes
// it on to every host); each aborting rank appends one JSON line to it.
#include <string>

namespace tandem {

inline constexpr const char* kAbortNoteVar = "TANDEM_ABORT_NOTE";

// Appends {"rank", "host", "why"} to $TANDEM_ABORT_NOTE when set; async-unsafe but
// called only on the way to MPI_Abort. Never throws.
void note_abort(int rank, const std::string& why);

}  // namespace tandem
