#pragma once
// The policy worker process: the one place a policy's Lua runs (policy_process.hpp is
// the host's side). It confines itself (worker_confinement.hpp) at the first request,
// then serves one policy: load, init, step, observe, save and restore requests,
// one at a time, each answered with its result or its failure. It leaves at the
// end of its socket, without running anything of the policy's (no finalizers).
namespace tandem {

// Serves requests on fd until the peer closes it; never returns. stats_fd: the
// host's shared stats region (mapped read-only), or -1.
[[noreturn]] void run_policy_worker(int fd, int stats_fd);

}  // namespace tandem
