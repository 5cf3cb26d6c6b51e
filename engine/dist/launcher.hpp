#pragma once
// `tandem run EXP.lua` with workers = N > 1 starts N local ranks itself, through
// OpenMPI's mpirun, so one command runs a cluster on one machine. A user who
// outgrows the machine runs the same binary under their own `mpirun -np N
// --hostfile hosts tandem run EXP.lua`: across hosts MPI does the launching, not
// anything home-made.
#include <string>
#include <vector>

namespace tandem {

// The mpirun command line that starts `workers` local ranks of this binary with
// `args` (the arguments after the program name). Adds the flags this machine needs:
// --allow-run-as-root as root, --oversubscribe for more ranks than cores, and
// --bind-to none so the OS schedules ranks that mostly sleep (emulated devices).
std::vector<std::string> mpirun_command(int workers, const std::vector<std::string>& args);

// Replaces this process by mpirun (does not return on success).
[[noreturn]] void launch_local_ranks(int workers, const std::vector<std::string>& args);

}  // namespace tandem
