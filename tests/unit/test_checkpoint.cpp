// Checkpoint files (engine/train/checkpoint/file.hpp): a round trip keeps every byte; the
// newest `keep` stay; each way a file can be bad (truncated, corrupted, another
// format version, another model, not a checkpoint at all) is rejected naming the
// check, and load_latest falls back to the previous good one; a write that fails
// (a full disk, here /dev/full) leaves the checkpoints that were there intact.
// And the policy's state through a checkpoint: save() as a Lua literal, read back
// by restore() in a fresh state, values exact (NaN, infinities, odd strings).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "engine/script/policy_sandbox.hpp"
#include "engine/train/checkpoint/file.hpp"
#include "engine/train/checkpoint/run_checkpoints.hpp"
#include "engine/train/worker_stats.hpp"
#include "tests/unit/checkpoint_sample.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_checkpoint)  // ctest's unit.test_checkpoint (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

std::string rejection(const std::string& path, const std::string& model = "") {
  try {
    read_checkpoint(path, model);
  } catch (const CheckpointRejected& e) {
    return e.what();
  }
  BOOST_FAIL("the checkpoint " << path << " was accepted");
  return {};
}

// The message of the PolicyFailure f throws; "" when it throws none.
template <typename F>
std::string policy_failure_of(F&& f) {
  try {
    f();
  } catch (const PolicyFailure& e) {
    return e.what();
  }
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_keeps_every_value) {
  TempDir dir("ckpt-roundtrip");
  const CheckpointState s = sample_state(40);
  write_checkpoint(dir.path.string(), s, 3);
  const CheckpointState r = read_checkpoint(checkpoint_path(dir.path.string(), 40), s.model);
  BOOST_TEST(r.iteration == 40);
  BOOST_TEST(r.world == 3);
  BOOST_TEST(r.seed == 7u);
  BOOST_TEST(std::memcmp(r.params.data(), s.params.data(), s.params.size() * sizeof(float)) == 0);
  BOOST_TEST(r.velocity == s.velocity, boost::test_tools::per_element());
  BOOST_TEST(r.layer_state == s.layer_state, boost::test_tools::per_element());
  BOOST_TEST(r.pending_stats == s.pending_stats);
  BOOST_TEST(r.plan.local_batch == s.plan.local_batch, boost::test_tools::per_element());
  BOOST_TEST(r.policy_state == s.policy_state);
  BOOST_TEST(r.train_ms == s.train_ms);
  BOOST_TEST(r.samples == s.samples);
  BOOST_TEST(r.skipped_steps == 2);
  BOOST_TEST(*r.time_to_target_s == 12.5);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir.path)) BOOST_TEST(e.path().filename().string().rfind("ckpt-", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(the_newest_keep_stay) {
  TempDir dir("ckpt-keep");
  for (int64_t it : {10, 20, 30, 40, 50}) write_checkpoint(dir.path.string(), sample_state(it), 2);
  const std::vector<std::string> left = list_checkpoints(dir.path.string());
  BOOST_TEST_REQUIRE(left.size() == 2u);
  BOOST_TEST(left[0] == checkpoint_path(dir.path.string(), 50));
  BOOST_TEST(left[1] == checkpoint_path(dir.path.string(), 40));
}

BOOST_AUTO_TEST_CASE(each_bad_file_is_rejected_naming_the_check_and_the_previous_one_is_used) {
  TempDir dir("ckpt-bad");
  const std::string d = dir.path.string();
  write_checkpoint(d, sample_state(10), 10);
  write_checkpoint(d, sample_state(20), 10);
  const std::string newest = checkpoint_path(d, 20), good = read_bytes(newest);

  write_bytes(newest, good.substr(0, good.size() / 2));
  CHECK_CONTAINS(rejection(newest), "truncated");
  write_bytes(newest, good.substr(0, 10));
  CHECK_CONTAINS(rejection(newest), "truncated");

  std::string flipped = good;
  flipped[good.size() - 20] ^= 0x10;  // inside the payload
  write_bytes(newest, flipped);
  CHECK_CONTAINS(rejection(newest), "checksum mismatch");

  std::string version = good;
  version[8] = 99;  // the format version follows the 8-byte magic
  write_bytes(newest, version);
  CHECK_CONTAINS(rejection(newest), "format version 99");

  std::string magic = good;
  magic[0] = 'X';
  write_bytes(newest, magic);
  CHECK_CONTAINS(rejection(newest), "not a tandem checkpoint");

  write_bytes(newest, good);
  CHECK_CONTAINS(rejection(newest, "model 'lenet': 61706 parameters"), "written for another model");
  BOOST_TEST(read_checkpoint(newest, sample_state(20).model).iteration == 20);

  // The newest corrupted: the one before it is taken, and the rejection said why.
  write_bytes(newest, flipped);
  std::vector<std::string> why;
  const auto loaded = load_latest_checkpoint(d, CheckpointExpect{sample_state(10).model, 6, 2}, &why);
  BOOST_TEST_REQUIRE(loaded.has_value());
  BOOST_TEST(loaded->state.iteration == 10);
  BOOST_TEST_REQUIRE(why.size() == 1u);
  CHECK_CONTAINS(why[0], "checksum mismatch");

  // None good: nothing, and every reason.
  write_bytes(checkpoint_path(d, 10), "garbage");
  why.clear();
  BOOST_TEST(!load_latest_checkpoint(d, CheckpointExpect{}, &why).has_value());
  BOOST_TEST(why.size() == 2u);
}

// A full disk in the middle of a write: the temporary file is /dev/full, every write
// to it fails with ENOSPC. The error names the file and the reason; the checkpoints
// already there are untouched and no new one appears.
BOOST_AUTO_TEST_CASE(a_full_disk_fails_the_write_and_keeps_the_old_checkpoints) {
  if (!fs::exists("/dev/full")) return;
  TempDir dir("ckpt-full");
  const std::string d = dir.path.string();
  write_checkpoint(d, sample_state(10), 3);
  const std::string before = read_bytes(checkpoint_path(d, 10));
  fs::create_symlink("/dev/full", d + "/.writing-" + fs::path(checkpoint_path(d, 20)).filename().string());
  const std::string msg = error_of([&] { write_checkpoint(d, sample_state(20), 3); });
  CHECK_CONTAINS(msg, "No space left on device");
  CHECK_CONTAINS(msg, "free disk space");
  BOOST_TEST(!fs::exists(checkpoint_path(d, 20)));
  BOOST_TEST(list_checkpoints(d).size() == 1u);
  BOOST_TEST(read_bytes(checkpoint_path(d, 10)) == before);
}

// Pending stats are raw WorkerStats the recorder indexes by rank: a record that does
// not name its own slot's rank (or has an impossible group, sync mode, valid flag or
// batch) leaves them all out rather than write past the recorder's arrays.
BOOST_AUTO_TEST_CASE(pending_stats_with_a_foreign_rank_or_group_are_left_out) {
  auto state_of = [](std::vector<WorkerStats> records) {
    CheckpointState s;
    s.world = static_cast<int>(records.size());
    s.stats_record = sizeof(WorkerStats);
    s.pending_stats.assign(reinterpret_cast<const char*>(records.data()), records.size() * sizeof(WorkerStats));
    return s;
  };
  std::vector<WorkerStats> good(2);
  for (int r = 0; r < 2; ++r) {
    good[static_cast<size_t>(r)].rank = r;
    good[static_cast<size_t>(r)].valid = 1;
  }
  BOOST_TEST(usable_pending_stats(state_of(good), 2) == state_of(good).pending_stats);
  BOOST_TEST(usable_pending_stats(state_of(good), 3).empty());  // another cluster size
  BOOST_TEST(usable_pending_stats(CheckpointState{}, 2).empty());
  for (auto bad : std::vector<std::function<void(WorkerStats&)>>{
           [](WorkerStats& w) { w.rank = 1000000; }, [](WorkerStats& w) { w.rank = -1; },
           [](WorkerStats& w) { w.group = 2; },      [](WorkerStats& w) { w.group = -5; },
           [](WorkerStats& w) { w.sync_mode = 9; },  [](WorkerStats& w) { w.valid = 7; },
           [](WorkerStats& w) { w.local_batch = -3; }}) {
    std::vector<WorkerStats> records = good;
    bad(records[1]);
    BOOST_TEST(usable_pending_stats(state_of(records), 2).empty());
  }
}

BOOST_AUTO_TEST_CASE(policy_state_round_trips_through_a_lua_literal) {
  TempDir dir("ckpt-policy");
  const std::string file = dir.write("p.lua", R"(
local P = {}
function P.init(cluster) end
function P.step(stats) return nil end
function P.save()
  return { n = 0.1 + 0.2, big = 2^60 + 1, tiny = 5e-324, neg = -1/3, inf = 1/0, ninf = -1/0, nan = 0/0,
           s = 'quote " backslash \\ newline \n nul \0 byte \200 end', t = true, f = false,
           list = { 1, 2, { 3, { 4 } } }, [7] = 'seven', [1.5] = 'x', nested = { a = { b = { c = 'd' } } } }
end
-- The round trip is checked where it lands: restore() asserts every value.
function P.restore(s)
  assert(s.n == 0.1 + 0.2 and s.big == 2^60 + 1 and s.tiny == 5e-324 and s.neg == -1/3, 'numbers')
  assert(s.inf == 1/0 and s.ninf == -1/0 and s.nan ~= s.nan, 'infinities and NaN')
  assert(s.s == 'quote " backslash \\ newline \n nul \0 byte \200 end', 'string')
  assert(s.t == true and s.f == false, 'booleans')
  assert(s.list[3][2][1] == 4 and s[7] == 'seven' and s[1.5] == 'x' and s.nested.a.b.c == 'd', 'tables')
end
return P
)");
  PolicySandbox a(file, {1000.0, 32.0});
  const std::string literal = a.save_literal();
  BOOST_TEST_MESSAGE(literal);
  PolicySandbox b(file, {1000.0, 32.0});
  const std::string changed = policy_failure_of([&] { BOOST_TEST(b.restore_literal(literal)); });
  BOOST_TEST(changed.empty(), "restore() found a value changed: " << changed);
  // Data only: a literal that tries to call something finds an empty environment.
  CHECK_CONTAINS(policy_failure_of([&] { b.restore_literal("os.exit(3)"); }), "os");
}

BOOST_AUTO_TEST_CASE(a_policy_state_that_is_not_data_is_refused) {
  TempDir dir("ckpt-policy-fn");
  const std::string file = dir.write("p.lua", R"(
local P = {}
function P.init(cluster) end
function P.step(stats) return nil end
function P.save() return { f = function() end } end
return P
)");
  PolicySandbox a(file, {1000.0, 32.0});
  CHECK_CONTAINS(policy_failure_of([&] { a.save_literal(); }), "plain data");
}

BOOST_AUTO_TEST_SUITE_END()  // test_checkpoint
