#pragma once
// A rank that aborts the job says so in a file the launcher named, besides its log:
// across hosts, mpirun may not end after MPI_Abort while a host it cannot reach
// (powered off, its link down) still holds part of the job, and the launcher (the
// elastic supervisor) then ends mpirun itself, a grace period after the first note.
// The launcher sets TANDEM_ABORT_NOTE to a folder of the job's own (mpirun passes it
// on to every host; a folder per job, so that ranks of an earlier job, orphaned on a
// host cut off, cannot speak for the next); each aborting rank writes one JSON line
// to rank-R.json there.
#include <string>

namespace tandem {

inline constexpr const char* kAbortNoteVar = "TANDEM_ABORT_NOTE";

// Writes {"rank", "host", "why"} to $TANDEM_ABORT_NOTE/rank-R.json when set;
// called only on the way to MPI_Abort. Never throws.
void note_abort(int rank, const std::string& why);

}  // namespace tandem
