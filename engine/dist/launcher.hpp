#pragma once
// `tandem run EXP.lua` with workers = N > 1 starts N local ranks itself, through
// OpenMPI's mpirun, so one command runs a cluster on one machine. A user who
// outgrows the machine runs the same binary under their own `mpirun -np N
// --hostfile hosts tandem run EXP.lua`: across hosts MPI does the launching, not
// anything home-made.
#include <string>
#include <vector>

#include "engine/dist/hosts.hpp"

namespace tandem {

// The mpirun command line that starts `workers` ranks of this binary with `args` (the
// arguments after the program name): on this machine when `hosts` is empty, else on
// those hosts (--host, filling each host's slots in order). Adds the flags the job
// needs: --allow-run-as-root as root, --bind-to none so the OS schedules ranks that
// mostly sleep (emulated devices); on one machine --oversubscribe for more ranks than
// cores and shared memory only; across hosts OPENBLAS_NUM_THREADS passed on, and the
// words of $TANDEM_MPIRUN_FLAGS (--mca settings for the network, an rsh agent).
std::vector<std::string> mpirun_command(int workers, const std::vector<std::string>& args,
                                        const std::vector<HostSlots>& hosts = {});

// What mpirun's environment needs, unless the user set it: one OpenBLAS thread per
// rank, PMIx's `native` security (not munge, whose daemon may not run here).
void set_mpirun_environment();

// Replaces this process by mpirun (does not return on success).
[[noreturn]] void launch_ranks(int workers, const std::vector<std::string>& args,
                               const std::vector<HostSlots>& hosts = {});

// The ranks of the MPI job this process is one of, from what mpirun or srun puts in
// the environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, or under srun --mpi=pmix
// SLURM_STEP_NUM_TASKS); 0 when no mpirun started it (the
// launcher itself, tandem sim, a single worker). An experiment's per-worker settings
// must fit this many ranks, whatever its `workers` says.
int mpi_world_size();

}  // namespace tandem
