#pragma once
// An elastic job that restarts on other hosts (one left out after it failed, one
// taken back after it returned) has other ranks than the first job. The experiment's
// per-worker settings describe slots of the cluster (emulation.speeds: how fast the
// device in that slot is), so they follow the slot, not the rank number: the new
// job's rank on host H, slot k, takes the settings the first job's rank there had,
// and a slot the first job did not use gets the default. They reach the resumed job
// as overrides (key=value in Lua syntax).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/dist/hosts.hpp"

namespace tandem {

// Overrides carrying the per-worker settings of `resolved` (the first job's resolved
// experiment) from the first job's ranks (`first_workers` on `first_hosts`) to a job
// of `workers` on `hosts`: emulation.speeds, emulation.comm_delay_ms,
// emulation.workers, devices and emulation.events (by worker; those of a slot not
// in the job are dropped). Only keys the experiment sets.
std::vector<std::string> per_slot_overrides(const nlohmann::json& resolved, const std::vector<HostSlots>& first_hosts,
                                            int first_workers, const std::vector<HostSlots>& hosts, int workers);

// A JSON value as a Lua constructor expression (null as nil).
std::string lua_literal(const nlohmann::json& value);

}  // namespace tandem
