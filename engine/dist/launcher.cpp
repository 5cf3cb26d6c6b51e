#include "engine/dist/launcher.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <climits>
#include <cstring>
#include <sstream>

#include "engine/core/error.hpp"
#include "engine/dist/abort_note.hpp"

namespace tandem {

namespace {
std::string self_executable() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  TANDEM_CHECK(n > 0, "cannot find this executable's path (/proc/self/exe): ", std::strerror(errno));
  return std::string(path, static_cast<size_t>(n));
}
}  // namespace

std::vector<std::string> mpirun_command(int workers, const std::vector<std::string>& args,
                                        const std::vector<HostSlots>& hosts) {
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(workers)};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(), {"--bind-to", "none"});
  if (hosts.empty()) {
    // One machine: shared memory and loopback only, so no network interface is probed.
    cmd.insert(cmd.end(), {"--oversubscribe", "--mca", "btl", "self,vader", "--mca",
                           "btl_vader_single_copy_mechanism", "none"});
  } else {
    TANDEM_CHECK_HINT(workers <= total_slots(hosts), "add hosts or slots, or ask for fewer workers",
                      workers, " workers do not fit the hosts' ", total_slots(hosts), " slots (", host_list(hosts), ")");
    cmd.insert(cmd.end(), {"--host", host_list(hosts), "-x", "OPENBLAS_NUM_THREADS"});
    if (std::getenv(kAbortNoteVar)) cmd.insert(cmd.end(), {"-x", kAbortNoteVar});
    if (const char* flags = std::getenv("TANDEM_MPIRUN_FLAGS")) {
      std::istringstream words(flags);
      for (std::string w; words >> w;) cmd.push_back(w);
    }
  }
  cmd.push_back(self_executable());
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

void set_mpirun_environment() {
  // OpenBLAS sizes its thread pool when it loads, before tandem can call
  // openblas_set_num_threads; idle pool threads spin for a while after each GEMM,
  // taking cores from the other ranks. One thread per rank unless asked otherwise.
  setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
  // A rank proves who it is to its local OpenMPI daemon through PMIx's security
  // plugin. With munge installed (slurm-wlm pulls it in) but its daemon not running,
  // PMIx tries munge's socket again and again before it falls back: 2.3 s more for
  // every mpirun, and for every host probe and restart of an elastic run. The ranks
  // and their daemon share a host and a user, which is what `native` checks.
  setenv("PMIX_MCA_psec", "native", /*overwrite=*/0);
}

void launch_ranks(int workers, const std::vector<std::string>& args, const std::vector<HostSlots>& hosts) {
  TANDEM_CHECK_HINT(workers >= 1, "set workers to 1 or more", "cannot start ", workers, " workers");
  const std::vector<std::string> cmd = mpirun_command(workers, args, hosts);
  set_mpirun_environment();
  std::vector<char*> argv;
  for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  const int err = errno;
  TANDEM_CHECK_HINT(err != ENOENT, "install OpenMPI with `apt-get install openmpi-bin`, or run with workers=1",
                    "cannot start mpirun for ", workers, " workers: it is not on PATH");
  size_t longest = 0;
  for (const auto& a : cmd) longest = std::max(longest, a.size());
  TANDEM_FAIL_HINT(err == E2BIG ? "shorten the overrides (a long list is better in the experiment file)"
                                : "check that mpirun can be run by this user",
                   "cannot start mpirun for ", workers, " workers: ", std::strerror(err), " (", cmd.size(),
                   " arguments, the longest ", longest, " bytes)");
}

int mpi_world_size() {
  // Under Slurm's srun --mpi=pmix (or pmi2) no launcher of OpenMPI's sets the size:
  // the step's task count is the job's, where the process is one of its ranks.
  const bool srun_rank = std::getenv("SLURM_PROCID") && (std::getenv("PMIX_RANK") || std::getenv("PMI_RANK"));
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", srun_rank ? "SLURM_STEP_NUM_TASKS" : "PMI_SIZE"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 1 && n <= INT_MAX) return static_cast<int>(n);
  }
  return 0;
}

}  // namespace tandem
