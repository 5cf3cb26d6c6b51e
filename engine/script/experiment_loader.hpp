#pragma once
// Loads an experiment: runs its Lua file, resolves it through the schema in
// scripts/tandem/experiment.lua (overrides, unknown keys, types, defaults, ranges,
// the model file) and turns the resolved table into an ExperimentConfig through the
// one table per record of experiment_fields.hpp. Any Lua error, in the experiment
// or in its model, comes back as a tandem::Error with file:line (and the traceback
// for runtime errors) before anything is trained.
// Every setting is checked here, where the launcher loads the experiment before it
// starts any rank: the per-worker settings against the number of workers (or, under
// an mpirun started by hand, the ranks it started), the data set's files, and, when
// several workers are about to be started, that the model's layers fit the data.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/train/config.hpp"

struct lua_State;

namespace tandem {

// path: the experiment file (a Lua file returning a table). overrides: "key=value"
// strings from the command line; dotted keys reach into tables (stop.epochs=3).
// config.source = path; config.resolved_json = the resolved experiment as JSON, its
// `model` being the built model {name, file, input, classes, layers}.
ExperimentConfig load_experiment(const std::string& path, const std::vector<std::string>& overrides);

// The Lua value at idx as JSON: tables whose keys are exactly 1..n become arrays,
// other tables objects (an empty table is {}), integral numbers integers, functions
// and other values without a JSON form a descriptive string. Does not raise Lua
// errors (no metamethods run). `path` names the value in messages.
nlohmann::json lua_to_json(lua_State* L, int idx, const std::string& path = "value");

}  // namespace tandem
