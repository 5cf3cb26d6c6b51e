#pragma once
// The hosts a job's ranks run on, as the launcher (`tandem run --hostfile FILE`,
// `--host a:2,b:2`, or the experiment's hostfile/hosts settings) hands them to
// mpirun: a convenience over the mpirun line a user would write, like horovodrun's
// -H. Both empty: this machine only, through shared memory.
//
// Every host must see the same paths (the tandem binary, the experiment, its data and
// the run directory: a shared file system or identical copies); rank 0 runs on the
// first host and writes the run directory there.
#include <string>
#include <vector>

namespace tandem {

struct HostSlots {
  std::string name;  // a host name or address mpirun can reach
  int slots = 1;     // ranks it takes
};

// An OpenMPI hostfile: one host per line, "NAME [slots=N] [max_slots=M]" (slots 1
// when not given), '#' comments. A host listed twice is refused.
std::vector<HostSlots> read_hostfile(const std::string& path);

// "a:2,b:2" (host:slots; "a" alone is one slot), as mpirun's --host and horovodrun -H.
std::vector<HostSlots> parse_host_list(const std::string& list);

// The hosts of `hostfile` then those of `list` (either may be empty).
std::vector<HostSlots> job_hosts(const std::string& hostfile, const std::string& list);

int total_slots(const std::vector<HostSlots>& hosts);

// The slots of the hosts that key=value overrides name (hostfile=FILE, hosts=LIST:
// what --hostfile and --host stand for), when they give no workers=N; else 0.
int slots_given(const std::vector<std::string>& overrides);

// "a:2,b:2", the form mpirun's --host takes.
std::string host_list(const std::vector<HostSlots>& hosts);

// The hosts that take ranks 0..workers-1 when mpirun fills each host's slots in
// order (its default, --map-by slot): rank r runs on hosts[host_of_rank(r)].
std::vector<int> rank_hosts(const std::vector<HostSlots>& hosts, int workers);

}  // namespace tandem
