// The hosts a launcher hands mpirun (engine/dist/hosts.hpp), and the per-worker
// settings an elastic restart carries from slot to slot (engine/train/elastic_slots.hpp).
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.hpp"
#include "engine/dist/hosts.hpp"
#include "engine/dist/launcher.hpp"
#include "engine/train/elastic_slots.hpp"

BOOST_AUTO_TEST_SUITE(test_hosts)  // ctest's unit.test_hosts (tests/CMakeLists.txt)

using namespace tandem;
using json = nlohmann::json;

namespace {

std::string write_file(const std::string& text) {
  char path[] = "/tmp/tandem-hostfile-XXXXXX";
  const int fd = mkstemp(path);
  BOOST_REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(hostfile_in_openmpi_syntax) {
  const std::string path = write_file("# the cluster\nnode-a slots=2 max_slots=4\n\n  node-b   # one slot\nnode-c slots=3\n");
  const std::vector<HostSlots> h = read_hostfile(path);
  BOOST_REQUIRE_EQUAL(h.size(), 3u);
  BOOST_TEST(h[0].name == "node-a");
  BOOST_TEST(h[0].slots == 2);
  BOOST_TEST(h[1].name == "node-b");
  BOOST_TEST(h[1].slots == 1);
  BOOST_TEST(h[2].slots == 3);
  BOOST_TEST(total_slots(h) == 6);
  BOOST_TEST(host_list(h) == "node-a:2,node-b:1,node-c:3");
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(bad_hostfiles_say_which_line) {
  const std::string twice = write_file("a slots=1\nb\na slots=2\n");
  BOOST_TEST(error_of([&] { read_hostfile(twice); }).find("host 'a' is listed twice") != std::string::npos);
  const std::string bad = write_file("a slots=two\n");
  BOOST_TEST(error_of([&] { read_hostfile(bad); }).find(bad + ":1") != std::string::npos);
  const std::string word = write_file("a cpus=2\n");
  BOOST_TEST(error_of([&] { read_hostfile(word); }).find("unknown word 'cpus=2'") != std::string::npos);
  BOOST_TEST(error_of([] { read_hostfile("/nonexistent/hosts"); }).find("cannot read the hostfile") !=
             std::string::npos);
  // Empty (or being rewritten): never taken as "no hosts, so this machine".
  const std::string empty = write_file("# nothing yet\n\n");
  BOOST_TEST(error_of([&] { read_hostfile(empty); }).find("lists no host") != std::string::npos);
  for (const std::string& p : {twice, bad, word, empty}) std::remove(p.c_str());
}

BOOST_AUTO_TEST_CASE(host_lists_as_horovodrun_takes_them) {
  const std::vector<HostSlots> h = parse_host_list("a:2,b,c:4");
  BOOST_REQUIRE_EQUAL(h.size(), 3u);
  BOOST_TEST(h[1].slots == 1);
  BOOST_TEST(total_slots(h) == 7);
  BOOST_TEST(error_of([] { parse_host_list("a:0"); }).find("slots '0'") != std::string::npos);
  BOOST_TEST(error_of([] { parse_host_list(":2"); }).find("names no host") != std::string::npos);
  BOOST_TEST(error_of([] { parse_host_list("a:1,a:2"); }).find("listed twice") != std::string::npos);
  BOOST_TEST(parse_host_list("").empty());
  BOOST_TEST(error_of([] { parse_host_list(","); }).find("names no host") != std::string::npos);
  BOOST_TEST(error_of([] { parse_host_list("fe80::1"); }).find("more than one ':'") != std::string::npos);
  BOOST_TEST(parse_host_list(" a:2 , b ")[1].name == "b");
}

BOOST_AUTO_TEST_CASE(workers_default_to_the_slots_unless_given) {
  BOOST_TEST(slots_given({"hosts=a:2,b:2"}) == 4);
  BOOST_TEST(slots_given({" hosts = a:2, b:3 "}) == 5);  // trimmed, as the loader reads it
  BOOST_TEST(slots_given({"hosts=a:2,b:2", "workers = 3"}) == 0);
  BOOST_TEST(slots_given({"hosts=a:2,b:2", "workers=3"}) == 0);
  BOOST_TEST(slots_given({"stop.epochs=1"}) == 0);
}

BOOST_AUTO_TEST_CASE(ranks_fill_each_hosts_slots_in_order) {
  const std::vector<HostSlots> h = {{"a", 2}, {"b", 1}, {"c", 2}};
  BOOST_TEST(rank_hosts(h, 4) == (std::vector<int>{0, 0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(rank_hosts(h, 9).size() == 5u);  // no more ranks than slots
}

BOOST_AUTO_TEST_CASE(mpirun_line_across_hosts) {
  const std::vector<std::string> cmd = mpirun_command(3, {"run", "x.lua"}, {{"a", 2}, {"b", 1}});
  const std::string line = [&] {
    std::string s;
    for (const auto& w : cmd) s += w + " ";
    return s;
  }();
  BOOST_TEST(line.find("--host a:2,b:1") != std::string::npos);
  BOOST_TEST(line.find("--oversubscribe") == std::string::npos);  // hosts say their slots
  BOOST_TEST(line.find("btl self,vader") == std::string::npos);   // shared memory cannot cross hosts
  BOOST_TEST(error_of([] { mpirun_command(4, {}, {{"a", 2}, {"b", 1}}); }).find("do not fit") != std::string::npos);
  const std::vector<std::string> local = mpirun_command(3, {"run"});
  BOOST_TEST((std::find(local.begin(), local.end(), "--oversubscribe") != local.end()));
}

BOOST_AUTO_TEST_CASE(lua_literals_of_json) {
  BOOST_TEST(lua_literal(json::parse(R"([1, 0.5, {"speed": 0.25, "kind": "a\"b"}, null, true])")) ==
             R"({1, 0.5, {["kind"] = "a\"b", ["speed"] = 0.25}, nil, true})");
  BOOST_TEST(lua_literal(json::array()) == "{}");
  // Control bytes as \ddd (JSON's \u0001 is no escape LuaJIT reads), backslashes doubled.
  BOOST_TEST(lua_literal(json(std::string("a\x01" "2\\b\n"))) == R"("a\0012\\b\010")");
}

BOOST_AUTO_TEST_CASE(per_worker_settings_follow_the_slot) {
  const json resolved = json::parse(R"({"device": "cpu", "emulation": {"speeds": [1, 0.9, 0.5, 0.25],
      "events": [{"worker": 3, "speed": 0.1, "from": 5}, {"worker": 2, "speed": 0.3, "from": 1}]}})");
  const std::vector<HostSlots> first = {{"h0", 2}, {"h1", 1}, {"h2", 1}};
  // h1 left out: h0's two slots and h2's go on, as ranks 0, 1 and 2.
  const std::vector<std::string> o = per_slot_overrides(resolved, first, 4, {{"h0", 2}, {"h2", 1}}, 3);
  BOOST_REQUIRE_EQUAL(o.size(), 2u);
  BOOST_TEST(o[0] == "emulation.speeds={1, 0.9, 0.25}");
  BOOST_TEST(o[1] == R"(emulation.events={{["from"] = 5, ["speed"] = 0.1, ["worker"] = 2}})");
  // A host the first job did not have gets the defaults.
  const std::vector<std::string> n = per_slot_overrides(resolved, first, 4, {{"h0", 1}, {"h9", 1}}, 2);
  BOOST_TEST(n[0] == "emulation.speeds={1, 1}");
  // Nothing per worker: nothing to carry.
  BOOST_TEST(per_slot_overrides(json::parse(R"({"device": "cpu"})"), first, 4, first, 4).empty());
}

BOOST_AUTO_TEST_SUITE_END()  // test_hosts
