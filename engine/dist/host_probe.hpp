#pragma once
// Which hosts of a job still work: before an elastic restart the supervisor asks
// each host, through mpirun itself (so whatever reaches the hosts for a job, an ssh
// or rsh agent, reaches them for the probe), to run this binary's `version`. A host
// that does not answer within the deadline (powered off, its link down, its daemon
// unable to call back) is left out of the next job; every host is probed at once.
#include <string>
#include <vector>

#include "engine/dist/hosts.hpp"

namespace tandem {

// The hosts of `hosts` that ran the probe within `timeout_s`, in their order. With
// `why_not`, each other host's name and why: "no answer within 10 s" or "the probe
// failed (exit 1)" (ssh refused, tandem not at that path there, ...).
std::vector<HostSlots> responding_hosts(const std::vector<HostSlots>& hosts, double timeout_s,
                                        std::vector<std::string>* why_not = nullptr);

}  // namespace tandem
