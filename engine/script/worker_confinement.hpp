#pragma once
// What the policy worker process (policy_worker.hpp) does to itself before it reads
// any policy, so that code which escapes the Lua sandbox (a VM crash on crafted
// input, a C function) still cannot reach the machine:
//  - resource limits: address space (what the process maps now plus room for the
//    policy's memory cap), no core files, few open files;
//  - a seccomp filter (libseccomp, where the build and the kernel have it) that
//    refuses exec, new processes and threads, sockets, opening files for writing,
//    and changing the file system, and signals to any process but itself;
//  - the parent-death signal: the worker dies with the process that started it.
// A per-call CPU limit (arm_cpu_limit) backs the host's wall-clock deadline.
#include <string>

namespace tandem {

// Applies the limits and the filter; returns what was applied, for the host's log
// ("rlimits + seccomp", or why seccomp is missing).
std::string confine_policy_worker(double memory_mb);

// The CPU-time limit for the next call: the process is ended (SIGXCPU, then SIGKILL)
// if it spends more than seconds of CPU from now.
void arm_cpu_limit(double seconds);

}  // namespace tandem
