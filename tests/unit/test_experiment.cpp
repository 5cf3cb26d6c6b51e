// Experiment loading: the bundled experiments resolve to the documented models and
// settings, overrides apply, and every kind of mistake (unknown key, bad override,
// wrong type, Lua syntax or runtime error, missing file) is an error that names
// what and where. Also the Lua host's guard rails: protected calls and C functions
// that throw.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/core/error.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/script/lua_state.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_experiment)  // ctest's unit.test_experiment (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = TANDEM_SOURCE_DIR;
const std::string kQuickstart = kRoot + "/scripts/experiments/quickstart.lua";



}  // namespace

BOOST_AUTO_TEST_CASE(quickstart_resolves_to_the_mlp) {
  const ExperimentConfig c = load_experiment(kQuickstart, {});
  BOOST_TEST(c.name == "quickstart");
  BOOST_TEST(c.source == kQuickstart);
  BOOST_TEST(c.model.name == "mlp");
  BOOST_TEST(c.model.input == Shape({1, 28, 28}));
  BOOST_TEST(c.model.classes == 10);
  const std::vector<std::string> types = {"flatten", "linear", "relu", "linear", "relu", "linear"};
  BOOST_TEST_REQUIRE(c.model.layers.size() == types.size());
  for (size_t i = 0; i < types.size(); ++i) BOOST_TEST(c.model.layers[i].type == types[i]);
  BOOST_TEST(c.model.layers[1].args.at("out") == 256);
  BOOST_TEST(c.model.layers[1].args.at("bias") == 1);
  BOOST_TEST(c.model.layers[3].args.at("out") == 256);
  BOOST_TEST(c.model.layers[5].args.at("out") == 10);
  BOOST_TEST(c.model.layers[0].args.empty());
  CHECK_CONTAINS(c.model.layers[1].where, "models/mlp.lua:");

  BOOST_TEST(c.data.name == "fashion-mnist");
  BOOST_TEST(c.global_batch == 64);
  BOOST_TEST(c.optimizer.name == "sgd");
  BOOST_TEST(c.optimizer.lr == 0.05);
  BOOST_TEST(c.optimizer.momentum == 0.9);
  BOOST_TEST(c.optimizer.weight_decay == 5e-4);
  BOOST_TEST(!c.optimizer.nesterov);
  BOOST_TEST(c.schedule.kind == "cosine");
  BOOST_TEST(c.stop.epochs == 2.0);
  BOOST_TEST_REQUIRE(c.stop.target_accuracy.has_value());
  BOOST_TEST(*c.stop.target_accuracy == 0.85);
  BOOST_TEST(!c.stop.max_iterations.has_value());
  BOOST_TEST(c.eval_every == 0);

  // Defaults not in the file match engine/train/config.hpp.
  const ExperimentConfig d;
  BOOST_TEST(c.log_every == d.log_every);
  BOOST_TEST(c.eval_batch == d.eval_batch);
  BOOST_TEST(c.blas_threads == d.blas_threads);
  BOOST_TEST(c.log_level == d.log_level);
  BOOST_TEST(c.out_dir == d.out_dir);
  BOOST_TEST(c.data.dir == d.data.dir);
  BOOST_TEST(c.data.seed == d.data.seed);
  BOOST_TEST(c.schedule.gamma == d.schedule.gamma);
  BOOST_TEST(c.schedule.step_epochs == d.schedule.step_epochs);

  const auto j = nlohmann::json::parse(c.resolved_json);
  BOOST_TEST(j.at("model").at("layers").size() == types.size());
  BOOST_TEST(j.at("model").at("layers").at(1).at("args").at("out") == 256);
  BOOST_TEST(j.at("stop").at("max_seconds").is_null());
  BOOST_TEST(j.at("global_batch") == 64);
}

BOOST_AUTO_TEST_CASE(lenet_resolves_to_lenet5) {
  const ExperimentConfig c = load_experiment(kRoot + "/scripts/experiments/lenet.lua", {});
  BOOST_TEST(c.model.name == "lenet");
  const std::vector<std::string> types = {"conv2d", "relu",   "maxpool2d", "conv2d", "relu", "maxpool2d",
                                          "flatten", "linear", "relu",      "linear", "relu", "linear"};
  BOOST_TEST_REQUIRE(c.model.layers.size() == types.size());
  for (size_t i = 0; i < types.size(); ++i) BOOST_TEST(c.model.layers[i].type == types[i]);
  BOOST_TEST(c.model.layers[0].args.at("out_channels") == 6);
  BOOST_TEST(c.model.layers[0].args.at("kernel") == 5);
  BOOST_TEST(c.model.layers[0].args.at("padding") == 2);
  BOOST_TEST(c.model.layers[3].args.at("out_channels") == 16);
  BOOST_TEST(c.model.layers[3].args.at("padding") == 0);
  BOOST_TEST(c.model.layers[2].args.at("kernel") == 2);
  BOOST_TEST(c.model.layers[2].args.at("stride") == 2);
  BOOST_TEST(c.model.layers[7].args.at("out") == 120);
  BOOST_TEST(c.model.layers[9].args.at("out") == 84);
  BOOST_TEST(c.model.layers[11].args.at("out") == 10);
  BOOST_TEST(c.stop.epochs == 3.0);
  BOOST_TEST(*c.stop.target_accuracy == 0.88);
}

BOOST_AUTO_TEST_CASE(overrides_apply) {
  const ExperimentConfig c =
      load_experiment(kQuickstart, {"global_batch=128", "lr=0.02", "schedule.kind=step", "stop.epochs=3",
                                    "nesterov=true", "model_args.hidden=64,32", "name=mine", "stop.max_seconds=60"});
  BOOST_TEST(c.global_batch == 128);
  BOOST_TEST(c.optimizer.lr == 0.02);
  BOOST_TEST(c.schedule.kind == "step");
  BOOST_TEST(c.stop.epochs == 3.0);
  BOOST_TEST(c.optimizer.nesterov);
  BOOST_TEST(c.name == "mine");
  BOOST_TEST_REQUIRE(c.stop.max_seconds.has_value());
  BOOST_TEST(*c.stop.max_seconds == 60.0);
  BOOST_TEST_REQUIRE(c.model.layers.size() == 6u);
  BOOST_TEST(c.model.layers[1].args.at("out") == 64);
  BOOST_TEST(c.model.layers[3].args.at("out") == 32);
  // Untouched keys keep the file's values.
  BOOST_TEST(c.optimizer.momentum == 0.9);
  BOOST_TEST(*c.stop.target_accuracy == 0.85);
}

BOOST_AUTO_TEST_CASE(synthetic_data_sets_the_model_input) {
  TempDir tmp("experiment");
  const std::string path = tmp.write("synth.lua", R"(return {
  model = 'mlp', model_args = { hidden = { 16 } },
  data = { name = 'synthetic', shape = { 3, 8, 8 }, classes = 5, train_size = 100, test_size = 20 },
})");
  const ExperimentConfig c = load_experiment(path, {});
  BOOST_TEST(c.name == "synth");
  BOOST_TEST(c.data.name == "synthetic");
  BOOST_TEST(c.data.shape == Shape({3, 8, 8}));
  BOOST_TEST(c.model.input == Shape({3, 8, 8}));
  BOOST_TEST(c.model.classes == 5);
  BOOST_TEST(c.model.layers.back().args.at("out") == 5);
  BOOST_TEST(c.data.train_size == 100);
  const ExperimentConfig o = load_experiment(path, {"data.shape=1,4,4", "data.classes=3"});
  BOOST_TEST(o.model.input == Shape({1, 4, 4}));
  BOOST_TEST(o.model.classes == 3);
}

// Text gives the model a window of data.seq_len bytes and a class per byte value;
// the sizes depend on the files, so resolve() leaves global_batch to the engine.
BOOST_AUTO_TEST_CASE(text_data_sets_the_model_input) {
  TempDir tmp("experiment-text");
  tmp.write("bytes.lua", R"(local nn = require 'tandem.nn'
return function(args)
  return nn.model{ name = 'bytes', layers = { nn.linear(args.classes) } }
end
)");
  const std::string path = tmp.write("text.lua", R"(return {
  model = 'bytes.lua', global_batch = 100000,
  data = { name = 'text', seq_len = 64 },
})");
  const ExperimentConfig c = load_experiment(path, {});
  BOOST_TEST(c.data.name == "text");
  BOOST_TEST(c.data.files == std::vector<std::string>{"/usr/share/games/fortunes"});
  BOOST_TEST(c.data.seq_len == 64);
  BOOST_TEST(c.data.validation == 0.1);
  BOOST_TEST(c.model.input == Shape({64}));
  BOOST_TEST(c.model.classes == 256);
  const std::string a = tmp.write("a.txt", "a"), b = tmp.write("b.txt", "b");
  const ExperimentConfig o =
      load_experiment(path, {"data.files=" + a + "," + b, "data.validation=0.2", "data.seq_len=32"});
  BOOST_TEST(o.data.files == (std::vector<std::string>{a, b}));
  BOOST_TEST(o.data.validation == 0.2);
  BOOST_TEST(o.model.input == Shape({32}));

  // The files are checked as the experiment loads, before any worker starts.
  std::string msg = error_of([&] { load_experiment(path, {"data.files=" + tmp.file("none.txt")}); });
  CHECK_CONTAINS(msg, "data.files: '" + tmp.file("none.txt") + "' does not exist");
  msg = error_of([&] { load_experiment(path, {"data.shape=1,8"}); });
  CHECK_CONTAINS(msg, "data.shape and data.classes are set by the text data set");
  msg = error_of([&] { load_experiment(path, {"model_args.seq_len=32"}); });
  CHECK_CONTAINS(msg, "model_args.seq_len = number 32 differs from data.seq_len = 64");
  const std::string none = tmp.write("none.lua", "return { model = 'bytes.lua', data = { name = 'text', files = {} } }");
  msg = error_of([&] { load_experiment(none, {}); });
  CHECK_CONTAINS(msg, "'data.files' is empty");
  msg = error_of([&] { load_experiment(path, {"data.seq_len=0"}); });
  CHECK_CONTAINS(msg, "'data.seq_len' must be >= 1");
  msg = error_of([&] { load_experiment(path, {"data.seq_len=100000"}); });
  CHECK_CONTAINS(msg, "'data.seq_len' must be <= 65536");
  msg = error_of([&] { load_experiment(path, {"data.validation=0.6"}); });
  CHECK_CONTAINS(msg, "'data.validation' must be <= 0.5");
  msg = error_of([&] { load_experiment(path, {"data.name=texts"}); });
  CHECK_CONTAINS(msg, "fashion-mnist, synthetic, text");
}

BOOST_AUTO_TEST_CASE(model_given_as_a_path_next_to_the_experiment) {
  TempDir tmp("experiment");
  tmp.write("tiny.lua", R"(local nn = require 'tandem.nn'
return function(args)
  return nn.model{ name = 'tiny', layers = { nn.flatten(), nn.linear(args.classes) } }
end
)");
  const std::string path = tmp.write("uses_tiny.lua", "return { model = 'tiny.lua' }\n");
  const ExperimentConfig c = load_experiment(path, {});
  BOOST_TEST(c.model.name == "tiny");
  BOOST_TEST_REQUIRE(c.model.layers.size() == 2u);
  CHECK_CONTAINS(c.model.layers[1].where, "tiny.lua:3");
}

BOOST_AUTO_TEST_CASE(unknown_key_in_file_is_named_with_a_suggestion) {
  TempDir tmp("experiment");
  const std::string path = tmp.write("typo.lua", "return {\n  model = 'mlp',\n  global_bach = 64,\n}\n");
  const std::string msg = error_of([&] { load_experiment(path, {}); });
  CHECK_CONTAINS(msg, "unknown key 'global_bach' in experiment (did you mean 'global_batch'?)");
  CHECK_CONTAINS(msg, path);

  const std::string nested = tmp.write("nested.lua", "return { model = 'mlp', stop = { epoch = 2 } }\n");
  CHECK_CONTAINS(error_of([&] { load_experiment(nested, {}); }),
                 "unknown key 'stop.epoch' in experiment (did you mean 'stop.epochs'?)");

  const std::string misplaced = tmp.write("misplaced.lua", "return { model = 'mlp', epochs = 2 }\n");
  CHECK_CONTAINS(error_of([&] { load_experiment(misplaced, {}); }), "(did you mean 'stop.epochs'?)");

  const std::string far = tmp.write("far.lua", "return { model = 'mlp', zzzzzzzz = 1 }\n");
  const std::string far_msg = error_of([&] { load_experiment(far, {}); });
  CHECK_CONTAINS(far_msg, "unknown key 'zzzzzzzz'");
  BOOST_TEST(!contains(far_msg, "did you mean"), far_msg);
}

BOOST_AUTO_TEST_CASE(unknown_or_bad_override_is_an_error) {
  std::string msg = error_of([&] { load_experiment(kQuickstart, {"bogus_key=3"}); });
  CHECK_CONTAINS(msg, "unknown key 'bogus_key' in override 'bogus_key=3'");
  msg = error_of([&] { load_experiment(kQuickstart, {"schedule.knd=step"}); });
  CHECK_CONTAINS(msg, "unknown key 'schedule.knd'");
  CHECK_CONTAINS(msg, "did you mean 'schedule.kind'?");
  CHECK_CONTAINS(error_of([&] { load_experiment(kQuickstart, {"lr=fast"}); }), "'lr' must be a number, got 'fast'");
  CHECK_CONTAINS(error_of([&] { load_experiment(kQuickstart, {"lr"}); }), "is not key=value");
  CHECK_CONTAINS(error_of([&] { load_experiment(kQuickstart, {"stop=3"}); }), "'stop' is a table");
  CHECK_CONTAINS(error_of([&] { load_experiment(kQuickstart, {"nesterov=yes"}); }), "must be true or false");
  msg = error_of([&] { load_experiment(kQuickstart, {"lr=-1"}); });
  CHECK_CONTAINS(msg, "'lr' must be > 0, got -1");
  CHECK_CONTAINS(msg, "override 'lr=-1'");
}

BOOST_AUTO_TEST_CASE(types_and_ranges_are_checked) {
  TempDir tmp("experiment");
  auto msg_for = [&](const std::string& body) {
    const std::string path = tmp.write("bad.lua", "return { model = 'mlp', " + body + " }\n");
    return error_of([&] { load_experiment(path, {}); });
  };
  CHECK_CONTAINS(msg_for("lr = 'fast'"), "'lr' must be a number, got string \"fast\"");
  CHECK_CONTAINS(msg_for("global_batch = 12.5"), "'global_batch' must be an integer, got number 12.5");
  CHECK_CONTAINS(msg_for("global_batch = 0"), "'global_batch' must be >= 1, got 0");
  CHECK_CONTAINS(msg_for("momentum = 1"), "'momentum' must be < 1");
  CHECK_CONTAINS(msg_for("stop = { epochs = 0 }"), "'stop.epochs' must be > 0");
  CHECK_CONTAINS(msg_for("stop = { target_accuracy = 1.5 }"), "'stop.target_accuracy' must be <= 1");
  CHECK_CONTAINS(msg_for("schedule = { kind = 'linear' }"), "'schedule.kind' must be one of constant, step, cosine");
  CHECK_CONTAINS(msg_for("data = { name = 'cifar' }"), "'data.name' must be one of fashion-mnist, synthetic");
  CHECK_CONTAINS(msg_for("nesterov = 1"), "'nesterov' must be true or false, got number 1");
  CHECK_CONTAINS(msg_for("stop = 2"), "'stop' must be a table, got number 2");
  CHECK_CONTAINS(msg_for("data = { name = 'synthetic', shape = { 3, 0 } }"), "'data.shape[2]' must be a positive integer");
  CHECK_CONTAINS(msg_for("data = { classes = 5 }"), "fixed for fashion-mnist");
  CHECK_CONTAINS(msg_for("model_args = { classes = 3 }"), "model_args.classes is set by the data set");
  CHECK_CONTAINS(msg_for("'positional'"), "unexpected entry [1]");

  const std::string no_model = tmp.write("no_model.lua", "return { lr = 0.1 }\n");
  CHECK_CONTAINS(error_of([&] { load_experiment(no_model, {}); }), "experiment has no 'model'");
  const std::string not_table = tmp.write("not_table.lua", "return 42\n");
  CHECK_CONTAINS(error_of([&] { load_experiment(not_table, {}); }), "returned number 42, not a table");
  CHECK_CONTAINS(error_of([&] { load_experiment(kQuickstart, {"model=nosuch"}); }), "model 'nosuch' not found");
}

// Issue 18's inputs: each refused naming the setting, its value and its range.
BOOST_AUTO_TEST_CASE(settings_past_their_bounds_are_refused_with_the_range) {
  TempDir tmp("experiment");
  auto msg_for = [&](const std::string& body) {
    const std::string path = tmp.write("bounds.lua", "return { model = 'mlp', " + body + " }\n");
    return error_of([&] { load_experiment(path, {}); });
  };
  // Once -9223372036854775808: an integer past 2^53 is refused before anything
  // formats it as one.
  CHECK_CONTAINS(error_of([&] { load_experiment(kQuickstart, {"global_batch=1e308"}); }),
                 "'global_batch' must be an integer from 1 to 9007199254740992, got 1e+308");
  CHECK_CONTAINS(msg_for("global_batch = -1e308"), "'global_batch' must be >= 1, got -1e+308");
  CHECK_CONTAINS(msg_for("sync = { local_steps = 1e9 }"), "'sync.local_steps' must be <= 10000, got 1000000000");
  CHECK_CONTAINS(msg_for("policy = { budget_ms = 1e9 }"), "'policy.budget_ms' must be <= 60000, got 1000000000");
  CHECK_CONTAINS(msg_for("policy = { memory_mb = 1e12 }"), "'policy.memory_mb' must be <= 65536");
  CHECK_CONTAINS(msg_for("emulation = { reference = 1e-300 }"), "'emulation.reference' must be >= 0.001, got 1e-300");
  CHECK_CONTAINS(msg_for("emulation = { speeds = { 1e-9 } }"), "'emulation.speeds[1]' must be >= 1e-06");
  CHECK_CONTAINS(msg_for("workers = 1e10"), "'workers' must be <= 2147483647, got 10000000000");
  // A NUL cuts a string short where C reads it: 'bsp\0evil' must not pass for bsp.
  const std::string nul = msg_for("sync = { mode = 'bsp\\0evil' }");
  CHECK_CONTAINS(nul, "'sync.mode' holds a NUL byte at position 4: 'bsp\\0evil'");
  CHECK_CONTAINS(msg_for("out_dir = 'runs/x\\0y'"), "'out_dir' holds a NUL byte");
}

// A model or experiment file that never finishes loading is stopped at the load
// deadline, naming the file, where it looped, and what to do.
BOOST_AUTO_TEST_CASE(files_that_loop_at_load_are_stopped_at_the_deadline) {
  TempDir tmp("experiment");
  setenv("TANDEM_LOAD_TIMEOUT_S", "0.3", 1);
  const std::string model = tmp.write("loop_model.lua", R"(local nn = require 'tandem.nn'
return function(args)
  local n = 0
  while true do n = n + 1 end
end
)");
  const std::string uses = tmp.write("uses_loop.lua", "return { model = 'loop_model.lua' }\n");
  std::string msg = error_of([&] { load_experiment(uses, {}); });
  CHECK_CONTAINS(msg, "model file " + model + " did not finish loading within 0.3 s");
  CHECK_CONTAINS(msg, "look for a loop that never ends in model file " + model);
  CHECK_CONTAINS(msg, "TANDEM_LOAD_TIMEOUT_S");
  CHECK_CONTAINS(msg, model + ":4:");  // the traceback shows the loop
  // A loop the model's code guards with pcall is stopped all the same.
  const std::string guarded = tmp.write("guarded_model.lua", R"(return function(args)
  while true do pcall(function() while true do end end) end
end
)");
  const std::string uses_guarded = tmp.write("uses_guarded.lua", "return { model = 'guarded_model.lua' }\n");
  CHECK_CONTAINS(error_of([&] { load_experiment(uses_guarded, {}); }), "did not finish loading within 0.3 s");

  const std::string experiment = tmp.write("loop_experiment.lua", "while true do end\nreturn { model = 'mlp' }\n");
  msg = error_of([&] { load_experiment(experiment, {}); });
  CHECK_CONTAINS(msg, "experiment file " + experiment + " did not finish loading within 0.3 s");
  CHECK_CONTAINS(msg, experiment + ":1:");
  unsetenv("TANDEM_LOAD_TIMEOUT_S");
  // The deadline is gone with the load: the same state's later Lua is not interrupted.
  BOOST_TEST(load_experiment(kQuickstart, {}).model.name == "mlp");
}

BOOST_AUTO_TEST_CASE(lua_syntax_error_names_file_and_line) {
  TempDir tmp("experiment");
  const std::string path = tmp.write("syntax.lua", "return {\n  model = 'mlp',\n  global_batch = 64 +,\n}\n");
  const std::string msg = error_of([&] { load_experiment(path, {}); });
  CHECK_CONTAINS(msg, "syntax error in experiment");
  CHECK_CONTAINS(msg, path + ":3:");

  tmp.write("broken_model.lua", "local nn = require 'tandem.nn'\nreturn function(args)\n  return nn.model{ layers = { nn.flatten() nn.relu() } }\nend\n");
  const std::string uses = tmp.write("uses_broken.lua", "return { model = 'broken_model.lua' }\n");
  const std::string model_msg = error_of([&] { load_experiment(uses, {}); });
  CHECK_CONTAINS(model_msg, "syntax error in model");
  CHECK_CONTAINS(model_msg, "broken_model.lua:3:");
}

BOOST_AUTO_TEST_CASE(runtime_errors_carry_file_line_and_traceback) {
  TempDir tmp("experiment");
  const std::string path = tmp.write("runtime.lua", "local x = nil\nreturn { model = 'mlp', global_batch = x.y }\n");
  std::string msg = error_of([&] { load_experiment(path, {}); });
  CHECK_CONTAINS(msg, "running experiment");
  CHECK_CONTAINS(msg, path + ":2:");
  CHECK_CONTAINS(msg, "stack traceback");

  const std::string model = tmp.write("crash_model.lua", R"(local nn = require 'tandem.nn'
return function(args)
  local widths = nil
  return nn.model{ layers = { nn.flatten(), nn.linear(widths[1]) } }
end
)");
  const std::string uses = tmp.write("uses_crash.lua", "return { model = 'crash_model.lua' }\n");
  msg = error_of([&] { load_experiment(uses, {}); });
  CHECK_CONTAINS(msg, model + ":4:");
  CHECK_CONTAINS(msg, "traceback");

  // A bad layer argument points at the model file's line, not at tandem/nn.lua.
  tmp.write("badarg_model.lua", R"(local nn = require 'tandem.nn'
return function(args)
  local layers = { nn.flatten() }
  layers[2] = nn.linear('ten')
  return nn.model{ layers = layers }
end
)");
  const std::string uses_badarg = tmp.write("uses_badarg.lua", "return { model = 'badarg_model.lua' }\n");
  msg = error_of([&] { load_experiment(uses_badarg, {}); });
  CHECK_CONTAINS(msg, "badarg_model.lua:4: nn.linear: 'out' must be a positive integer");

  // A layer written without () is caught even though `return nn.model{...}` is a tail call.
  tmp.write("noparens_model.lua", R"(local nn = require 'tandem.nn'
return function(args)
  return nn.model{ layers = { nn.flatten(), nn.relu, nn.linear(args.classes) } }
end
)");
  const std::string uses_noparens = tmp.write("uses_noparens.lua", "return { model = 'noparens_model.lua' }\n");
  msg = error_of([&] { load_experiment(uses_noparens, {}); });
  CHECK_CONTAINS(msg, "noparens_model.lua:3: nn.model: layer 2 is the function nn.relu itself");
}

BOOST_AUTO_TEST_CASE(missing_files_are_named) {
  const std::string msg = error_of([&] { load_experiment("/nonexistent/no-such-experiment.lua", {}); });
  CHECK_CONTAINS(msg, "/nonexistent/no-such-experiment.lua");
  CHECK_CONTAINS(msg, "does not exist");
}

// --- the Lua host ---------------------------------------------------------------

namespace {
int throws_error(lua_State*) { TANDEM_FAIL_HINT("do something else", "the C++ side refused"); }
int returns_two(lua_State* L) {
  lua_pushinteger(L, 2);
  return 1;
}
// A Lua error raised inside a guarded function must pass through the guard untouched.
int checks_integer(lua_State* L) {
  lua_pushinteger(L, luaL_checkinteger(L, 1) + 1);
  return 1;
}
}  // namespace

BOOST_AUTO_TEST_CASE(cpp_exceptions_become_lua_errors) {
  LuaState L;
  lua_pushcfunction(L, &lua_guard<throws_error>);
  lua_setglobal(L, "refuse");
  lua_pushcfunction(L, &lua_guard<returns_two>);
  lua_setglobal(L, "two");
  lua_pushcfunction(L, &lua_guard<checks_integer>);
  lua_setglobal(L, "inc");
  lua_pushcfunction(L, [](lua_State* S) { return lua_guard(S, [&] { throw std::runtime_error("lambda threw"); return 0; }); });
  lua_setglobal(L, "lambda");

  // Lua can catch it with pcall: the C++ exception never crossed the Lua frames.
  BOOST_TEST(luaL_dostring(L, R"(
    local ok, err = pcall(refuse)
    assert(not ok and err:find('the C++ side refused', 1, true), tostring(err))
    local ok2, err2 = pcall(lambda)
    assert(not ok2 and err2:find('lambda threw', 1, true), tostring(err2))
    assert(two() == 2)
    assert(inc(4) == 5)
    local ok3, err3 = pcall(inc, 'four')
    assert(not ok3 and err3:find('bad argument #1', 1, true), tostring(err3))
  )") == 0, lua_tostring(L, -1));

  // Through protected_call it comes back as a tandem::Error with the traceback.
  BOOST_TEST_REQUIRE(luaL_loadstring(L, "local function f() refuse() end\nf()") == 0);
  const std::string msg = error_of([&] { protected_call(L, 0, 0, "calling refuse"); });
  CHECK_CONTAINS(msg, "calling refuse");
  CHECK_CONTAINS(msg, "the C++ side refused");
  CHECK_CONTAINS(msg, "stack traceback");
  BOOST_TEST(lua_gettop(L) == 0);
}

BOOST_AUTO_TEST_CASE(protected_call_keeps_the_stack_and_reports_user_errors) {
  LuaState L;
  lua_pushinteger(L, 7);  // something below, which must survive
  BOOST_TEST_REQUIRE(luaL_loadstring(L, "local a, b = ... return a + b, 'x'") == 0);
  lua_pushinteger(L, 2);
  lua_pushinteger(L, 3);
  protected_call(L, 2, 2, "adding");
  BOOST_TEST(lua_gettop(L) == 3);
  BOOST_TEST(lua_tointeger(L, 2) == 5);
  BOOST_TEST(std::string(lua_tostring(L, 3)) == "x");
  lua_settop(L, 1);

  BOOST_TEST_REQUIRE(
      luaL_loadstring(L, "error({ message = 'bad input', hint = 'fix it', where = 'input.lua' }, 0)") == 0);
  try {
    protected_call(L, 0, 0, "checking input");
    BOOST_FAIL("no error");
  } catch (const LuaError& e) {
    BOOST_TEST(e.lua_message() == "bad input");
    BOOST_TEST(e.hint() == "fix it");
    BOOST_TEST(e.where() == "input.lua");
    BOOST_TEST(e.traceback().empty());
    CHECK_CONTAINS(std::string(e.what()), "checking input: bad input");
  }
  BOOST_TEST(lua_gettop(L) == 1);
  BOOST_TEST(lua_tointeger(L, 1) == 7);
}

BOOST_AUTO_TEST_CASE(root_and_package_path) {
  const char* home = std::getenv("TANDEM_HOME");
  const std::string saved = home ? home : "";
  if (saved.empty()) BOOST_TEST(tandem_root() == kRoot);
  ::setenv("TANDEM_HOME", "/somewhere/else/", 1);
  BOOST_TEST(tandem_root() == "/somewhere/else");
  {
    LuaState L;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    CHECK_CONTAINS(std::string(lua_tostring(L, -1)), "/somewhere/else/scripts/?.lua");
  }
  if (saved.empty()) {
    ::unsetenv("TANDEM_HOME");
    BOOST_TEST(tandem_root() == kRoot);
  } else {
    ::setenv("TANDEM_HOME", saved.c_str(), 1);
  }
}

BOOST_AUTO_TEST_SUITE_END()  // test_experiment
