#pragma once
// The C++ side of the experiment schema. scripts/tandem/experiment.lua is the one
// source of truth: every key, its kind, its default and its range. For each record
// of that schema, experiment_fields.cpp holds one table of its keys, each naming the
// ExperimentConfig member it sets (or saying that Lua alone uses it), and nothing
// else reads the resolved experiment. So a key cannot be forgotten on one side:
// reading fails on a key the Lua side resolved that no table names and on a key a
// table reads that the resolved experiment lacks, and schema_disagreements()
// compares the tables with the Lua schema (keys, kinds, which keys may be unset) and
// ExperimentConfig's defaults with the Lua ones (test_schema_agreement runs it).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/train/config.hpp"

namespace tandem {

// resolved: what tandem.experiment.resolve() returned, as JSON (lua_to_json). Sets
// every member the schema reaches; source, resolved_json and resume are the
// caller's. Writes the unset stop bounds into `resolved` as null, so that the
// config.json written from it shows every key. Throws a tandem::Error naming the key
// when the resolved experiment and the tables disagree.
ExperimentConfig config_from_resolved(nlohmann::json& resolved);

// Every disagreement between the tables and the Lua side, one line each, naming the
// key ("sim.latency_us: default 5 in scripts/tandem/experiment.lua, 6 in
// ExperimentConfig"); empty when they agree.
//   lua_schema: tandem.experiment.schema as JSON (lua_to_json);
//   resolved:   the resolved experiment of one that sets only what it must, with one
//               empty entry in each list of records (faults, emulation.workers,
//               emulation.events), so that the entries' defaults are compared too;
//   defaults:   a default ExperimentConfig with one default entry in those lists.
std::vector<std::string> schema_disagreements(const nlohmann::json& lua_schema, const nlohmann::json& resolved,
                                              const ExperimentConfig& defaults);

}  // namespace tandem
