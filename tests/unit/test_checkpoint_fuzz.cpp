// Checkpoints altered on purpose (engine/train/checkpoint/file.hpp): a checksum only
// tells an accident from a good file, so every mutant here has its CRC recomputed
// (unless the class is about the CRC) and must meet the reader's own checks. A real
// checkpoint of a small model (linear, batch norm, linear, with momentum) is written
// through the real writer; its header's values, keys, bytes and bits, its prefix,
// its section counts (overflowing, wrapping, swapped, traded so the total stays the
// same) and its length are mutated, and every mutant goes through read_checkpoint
// and resume_from into the model. Each is judged by a small reference written from
// the documented contract (violations() below): a mutant that breaks a rule must be
// rejected with a CheckpointRejected naming a field it broke, one that keeps the
// file valid (a flipped bit in a weight, an experiment renamed) must load; never
// another exception, never a crash. Build with -fsanitize=address to have a heap
// overflow fail loudly rather than pass by luck. TANDEM_FUZZ_SEED=n explores other
// random cases; the suite runs the fixed seed in well under a few seconds.
#include <boost/test/unit_test.hpp>

#include "engine/core/log.hpp"
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <typeinfo>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/dist/local_comm.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/train/checkpoint/file.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/train/checkpoint/run_checkpoints.hpp"
#include "tests/unit/checkpoint_sample.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_checkpoint_fuzz)  // ctest's unit.test_checkpoint_fuzz (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
using nlohmann::json;

namespace {

constexpr size_t kPrefix = 16;  // magic, format version, header length
constexpr int64_t kMaxCount = int64_t{1} << 53;
constexpr const char* kCounts[] = {"param_count", "velocity_count", "layer_state_count",
                                   "stats_bytes", "window_bytes",   "cluster_bytes"};
constexpr size_t kWidths[] = {4, 4, 8, 1, 1, 1};
constexpr const char* kHole = "@@VALUE@@";

uint64_t fuzz_seed() {
  const char* s = std::getenv("TANDEM_FUZZ_SEED");
  return s && *s ? std::strtoull(s, nullptr, 10) : 20240623;
}

ModelSpec tiny_model() {
  ModelSpec spec;
  spec.name = "fuzz-mlp";
  spec.input = {6};
  spec.classes = 3;
  spec.layers = {{"linear", {{"out", 5}}, "fuzz:1"},
                 {"batchnorm", {}, "fuzz:2"},
                 {"relu", {}, "fuzz:3"},
                 {"linear", {{"out", 3}}, "fuzz:4"}};
  return spec;
}

// The shared sample (its model parts come from the model), in ksync so that every
// field of the plan matters, with a policy window and cluster stats as opaque bytes.
CheckpointState fuzz_state() {
  CheckpointState s = sample_state(40);
  s.plan.local_batch = {10, 11, 11};
  s.plan.sync.mode = SyncMode::ksync;
  s.plan.sync.k = 2;
  s.policy_window = std::string(24, '\x22');
  s.cluster_stats = std::string(48, '\x33');
  return s;
}

uint32_t crc_of(const std::string& body) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()), body.size()));
}

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }

// A body (everything before the checksum) with its CRC appended, as a writer would.
std::string sealed(const std::string& body) { return body + u32(crc_of(body)); }

// ---- the reference: the contract of file.hpp, written from its words ----------------

std::optional<int64_t> as_int(const json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return v.get<int64_t>();
}
bool int_in(const json* v, int64_t lo, int64_t hi) {
  const auto x = v ? as_int(*v) : std::nullopt;
  return x && *x >= lo && *x <= hi;
}
bool number_in(const json* v, double lo, double hi) {
  return v && v->is_number() && v->get<double>() >= lo && v->get<double>() <= hi;
}
const json* at(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

struct Expected {
  std::string model;
  int64_t params = 0, layer_state = 0;
};

// The section counts: types, and their total against the bytes between the header
// and the checksum (in 128 bits: no overflow here either); false when those fail,
// which the reader checks before anything else in the header.
bool count_violations(const json& h, size_t between, const Expected& e, std::set<std::string>& bad) {
  __int128 total = 0;
  int64_t n[6] = {};
  for (size_t i = 0; i < 6; ++i) {
    if (!int_in(at(h, kCounts[i]), 0, INT64_MAX)) {
      bad.insert(kCounts[i]);
      continue;
    }
    n[i] = *as_int(*at(h, kCounts[i]));
    total += static_cast<__int128>(n[i]) * static_cast<__int128>(kWidths[i]);
  }
  if (bad.empty() && total != static_cast<__int128>(between)) bad.insert("sections");
  if (!bad.empty()) return false;
  if (n[0] != e.params) bad.insert("param_count");
  if (n[1] != 0 && n[1] != n[0] && n[1] != 2 * n[0]) bad.insert("velocity_count");  // none, SGD's momentum, AdamW's m and v
  if (n[2] != e.layer_state) bad.insert("layer_state_count");
  return true;
}

void plan_violations(const json* p, int64_t world, std::set<std::string>& bad) {
  const json* lb = p && p->is_object() ? at(*p, "local_batch") : nullptr;
  const json* mode = p && p->is_object() ? at(*p, "mode") : nullptr;
  const json* group = p && p->is_object() ? at(*p, "group") : nullptr;
  Plan plan;
  bool ok = lb && lb->is_array() && lb->size() == static_cast<size_t>(world) && mode && mode->is_string() &&
            parse_sync_mode(mode->get<std::string>(), &plan.sync.mode) && group && group->is_array() &&
            (group->empty() || group->size() == static_cast<size_t>(world));
  int64_t sum = 0;
  for (size_t r = 0; ok && r < lb->size(); ++r) {
    ok = int_in(&(*lb)[r], 0, kMaxCount - sum);
    if (ok) plan.local_batch.push_back(*as_int((*lb)[r]));
    if (ok) sum += plan.local_batch.back();
  }
  for (size_t r = 0; ok && r < group->size(); ++r) {
    ok = int_in(&(*group)[r], 0, world - 1);
    if (ok) plan.sync.group.push_back(static_cast<int>(*as_int((*group)[r])));
  }
  int* fields[] = {&plan.sync.k, &plan.sync.local_steps, &plan.sync.staleness, &plan.sync.sync_every};
  const char* names[] = {"k", "local_steps", "staleness", "sync_every"};
  for (size_t i = 0; ok && i < 4; ++i) {
    ok = int_in(at(*p, names[i]), INT_MIN, INT_MAX);
    if (ok) *fields[i] = static_cast<int>(*as_int(*at(*p, names[i])));
  }
  try {
    if (ok) plan.validate(static_cast<int>(world), sum);
  } catch (const Error&) {
    ok = false;
  }
  if (!ok) bad.insert("plan");
}

// Every rule a header breaks, named as the reader's message names it; empty: the
// checkpoint must load.
std::set<std::string> violations(const std::string& header, size_t between, const Expected& e) {
  const json h = json::parse(header, nullptr, false);
  if (h.is_discarded() || !h.is_object()) return {"corrupted header"};
  std::set<std::string> bad;
  if (!count_violations(h, between, e, bad)) return bad;
  auto require = [&](bool ok, const char* name) {
    if (!ok) bad.insert(name);
  };
  auto is_string = [&](const char* k) { return at(h, k) && at(h, k)->is_string(); };
  require(int_in(at(h, "iteration"), 0, kMaxCount), "iteration");
  const bool world_ok = int_in(at(h, "world"), 1, INT_MAX);
  require(world_ok, "world");
  require(at(h, "seed") && at(h, "seed")->is_number_unsigned(), "seed");
  for (const char* k : {"experiment", "policy", "policy_state"}) require(is_string(k), k);
  require(is_string("model") && at(h, "model")->get<std::string>() == e.model, "model");
  const bool record_ok = int_in(at(h, "stats_record"), 0, int64_t{1} << 16);
  require(record_ok, "stats_record");
  if (world_ok && record_ok) {
    const int64_t bytes = *as_int(*at(h, "stats_bytes")), record = *as_int(*at(h, "stats_record"));
    const int64_t world = *as_int(*at(h, "world"));
    require(bytes == 0 || (record > 0 && bytes % record == 0 && bytes / record == world), "stats_bytes");
  }
  if (world_ok) plan_violations(at(h, "plan"), *as_int(*at(h, "world")), bad);
  require(number_in(at(h, "train_ms"), 0, kMaxCount), "train_ms");
  for (const char* k : {"samples", "version"}) require(int_in(at(h, k), 0, kMaxCount), k);
  // Absent in files from before AdamW: 0 then.
  require(!at(h, "optimizer_steps") || int_in(at(h, "optimizer_steps"), 0, kMaxCount), "optimizer_steps");
  // Absent in files from before the skipped steps were kept: 0 then.
  require(!at(h, "skipped_steps") || int_in(at(h, "skipped_steps"), 0, kMaxCount), "skipped_steps");
  // Absent in files from before adaptive global batches; the sampler's place comes
  // as a pair (sample_cursor alone is not read).
  if (at(h, "samples_drawn")) {
    require(int_in(at(h, "samples_drawn"), 0, kMaxCount), "samples_drawn");
    if (int_in(at(h, "samples_drawn"), 0, kMaxCount))
      require(int_in(at(h, "sample_cursor"), 0, kMaxCount), "sample_cursor");
  }
  require(!at(h, "noise_scale") || number_in(at(h, "noise_scale"), 0, 1e30), "noise_scale");
  for (const char* k : {"test_accuracy", "best_test_accuracy"}) require(number_in(at(h, k), 0, 1), k);
  const json* t = at(h, "time_to_target_s");
  require(t && (t->is_null() || number_in(t, 0, kMaxCount)), "time_to_target_s");
  return bad;
}

// ---- the run: a model, its checkpoint, and each mutant through the reader ------------

class Bench {
public:
  Bench()
      : dir_("ckpt-fuzz"), model_(cpu_device(), tiny_model(), 3), sgd_(cpu_device(), model_.param_count(), {}) {
    tandem::log::set_level("off");  // thousands of rejections, each logged by the loader
    CheckpointConfig cfg;
    cfg.every = 1;
    Checkpointer(cfg, dir_.path.string(), model_, sgd_).write(fuzz_state());
    path_ = checkpoint_path(checkpoint_dir(dir_.path.string()), 40);
    good_ = read_bytes(path_);
    std::memcpy(&header_len_, good_.data() + 12, sizeof header_len_);
    expected_ = {model_.summary(), static_cast<int64_t>(model_.param_count()),
                 static_cast<int64_t>(model_.layer_state().size())};
    expect_ = {expected_.model, expected_.params, expected_.layer_state};
  }
  ~Bench() { tandem::log::set_level("info"); }

  const std::string& good() const { return good_; }
  std::string header() const { return good_.substr(kPrefix, header_len_); }
  std::string payload() const {
    return good_.substr(kPrefix + header_len_, good_.size() - kPrefix - header_len_ - 4);
  }
  size_t section_end(size_t i) const {  // where section i ends in the file
    size_t at = kPrefix + header_len_;
    const json h = json::parse(header());
    for (size_t k = 0; k <= i; ++k) at += h.at(kCounts[k]).get<size_t>() * kWidths[k];
    return at;
  }
  // A file with this header text in place of the real one, its payload unchanged.
  std::string with_header(const std::string& h) const {
    return sealed(good_.substr(0, 8) + u32(1) + u32(static_cast<uint32_t>(h.size())) + h + payload());
  }

  // The mutant must be rejected, naming one of `any_of` (a keyword or a field).
  void rejected(const std::string& cls, const std::string& bytes, const std::set<std::string>& any_of) {
    const std::string msg = outcome(cls, bytes, false);
    bool named = any_of.empty();
    for (const std::string& k : any_of) named = named || contains(msg, k);
    BOOST_TEST(named, cls << ": the rejection names none of the broken fields:\n" << msg << "\nexpected one of: "
                          << join(any_of));
  }
  void accepted(const std::string& cls, const std::string& bytes) { outcome(cls, bytes, true); }
  // A header text judged by the reference.
  void judged(const std::string& cls, const std::string& h) {
    const std::set<std::string> bad = violations(h, payload().size(), expected_);
    if (bad.empty()) accepted(cls, with_header(h));
    else rejected(cls, with_header(h), bad);
  }

  // At the end of a case: how many mutants it ran, so a change that skips them shows.
  void ran_at_least(int n, int loaded) const {
    BOOST_TEST_MESSAGE(boost::unit_test::framework::current_test_case().p_name.get()
                       << ": " << rejected_ << " mutants rejected, " << accepted_ << " loaded");
    BOOST_TEST(rejected_ + accepted_ >= n);
    BOOST_TEST(accepted_ >= loaded);
  }

private:
  static std::string join(const std::set<std::string>& s) {
    std::string out;
    for (const std::string& x : s) out += (out.empty() ? "" : ", ") + x;
    return out;
  }

  // Through read_checkpoint, then resume_from into the model: the same verdict from
  // both, and nothing but a CheckpointRejected (a tandem::Error) out of either.
  std::string outcome(const std::string& cls, const std::string& bytes, bool should_load) {
    // A fresh file, not one truncated: ext4 flushes a file truncated and rewritten on
    // close (auto_da_alloc), which would make thousands of mutants slow.
    std::filesystem::remove(path_);
    write_bytes(path_, bytes);
    std::string msg;
    bool loaded = false;
    try {
      read_checkpoint(path_, expect_);
      loaded = true;
    } catch (const CheckpointRejected& e) {
      msg = e.what();
      BOOST_TEST(!e.what_failed().empty());
      BOOST_TEST(!e.hint().empty(), cls << ": a rejection without what to do: " << msg);
      // Bytes of the file reach the message escaped: a terminal shows it as it is.
      const bool plain = std::all_of(msg.begin(), msg.end(), [](char c) { return c == '\n' || (c >= 0x20 && c < 0x7f); });
      BOOST_TEST(plain, cls << ": the message holds raw bytes: " << msg);
    } catch (const std::exception& e) {
      BOOST_ERROR(cls << ": not a CheckpointRejected but " << typeid(e).name() << ": " << e.what());
    }
    BOOST_TEST(loaded == should_load, cls << (should_load ? ": rejected, expected to load: " : ": accepted") << msg);
    bool resumed = false;
    try {
      resume_from(dir_.path.string(), model_, sgd_, comm_);
      resumed = true;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      BOOST_ERROR(cls << ": resume_from threw " << typeid(e).name() << ": " << e.what());
    }
    BOOST_TEST(resumed == loaded, cls << ": read_checkpoint and resume_from disagree");
    ++(loaded ? accepted_ : rejected_);
    return msg;
  }

  TempDir dir_;
  Model model_;
  Sgd sgd_;
  LocalComm comm_;
  std::string path_, good_;
  uint32_t header_len_ = 0;
  Expected expected_;
  CheckpointExpect expect_;
  int accepted_ = 0, rejected_ = 0;
};

// The header with the value at `pointer` replaced by the JSON text `literal`, kept
// exactly as written (nlohmann would round 1e400 or 2^64 on the way through a json).
std::string replaced(const json& h, const std::string& pointer, const std::string& literal) {
  json m = h;
  m[json::json_pointer(pointer)] = kHole;
  std::string text = m.dump();
  const std::string hole = std::string("\"") + kHole + "\"";
  return text.replace(text.find(hole), hole.size(), literal);
}

// Every value's place in the header: the leaves and the plan's containers.
std::vector<std::string> pointers(const json& h) {
  std::vector<std::string> out;
  const json flat = h.flatten();
  for (const auto& [p, v] : flat.items()) out.push_back(p);
  for (const char* p : {"/plan", "/plan/local_batch", "/plan/group"}) out.push_back(p);
  return out;
}

const std::vector<std::string> kLiterals = {
    "0",   "-1",  "1",  "3",  "2147483648", "9007199254740993", "9223372036854775807", "9223372036854775808",
    "18446744073709551615", "18446744073709551616", "-9223372036854775808", "1e308", "-1e308", "1e400",
    "0.5", "1.5", "-0.0", "\"7\"", "\"\"", "null", "true", "[]", "{}", "[1,2,3]", "NaN", "Infinity"};

}  // namespace

BOOST_AUTO_TEST_CASE(every_header_value_replaced_by_boundary_values) {
  Bench b;
  const json h = json::parse(b.header());
  for (const std::string& p : pointers(h))
    for (const std::string& lit : kLiterals) b.judged("value " + p + "=" + lit, replaced(h, p, lit));
  // Every key removed, and one unknown key added (ignored: the format version says
  // what a file holds).
  const json flat = h.flatten();
  for (const auto& [p, v] : flat.items()) {
    json m = h;
    const json::json_pointer jp(p);
    json& parent = m[jp.parent_pointer()];
    if (parent.is_array()) parent.erase(std::stoul(jp.back()));
    else parent.erase(jp.back());
    b.judged("missing " + p, m.dump());
  }
  json extra = h;
  extra["from_the_future"] = 1;
  b.accepted("unknown key", b.with_header(extra.dump()));
  b.ran_at_least(800, 50);
}

// The section counts: off by one, zero, doubled, past int64, and the attacks that
// keep the total: a product that wraps 2^64 back to the true length, one count
// raised while another is lowered by as many bytes (the heap overflow of issue 18:
// param_count raised, CRC recomputed), and every pair of counts swapped.
BOOST_AUTO_TEST_CASE(section_counts_overflowing_traded_and_swapped) {
  Bench b;
  const json h = json::parse(b.header());
  auto judge = [&](const std::string& cls, const std::map<std::string, json>& set) {
    json m = h;
    for (const auto& [k, v] : set) m[k] = v;
    b.judged(cls, m.dump());
  };
  for (size_t i = 0; i < 6; ++i) {
    const std::string k = kCounts[i];
    const uint64_t n = h.at(k).get<uint64_t>();
    for (uint64_t v : {n - 1, n + 1, uint64_t{0}, 2 * n, n + 8, uint64_t{INT64_MAX}, uint64_t{1} << 62,
                       (uint64_t{1} << 62) + n, (uint64_t{1} << 61) + n, ~uint64_t{0}})
      judge("count " + k + "=" + std::to_string(v), {{k, v}});
  }
  const int64_t p = h.at("param_count").get<int64_t>();
  judge("params raised, momentum lowered", {{"param_count", p + 50}, {"velocity_count", p - 50}});
  judge("params doubled, momentum dropped", {{"param_count", 2 * p}, {"velocity_count", 0}});
  judge("momentum raised, layer state lowered", {{"velocity_count", p + 2}, {"layer_state_count", h["layer_state_count"].get<int64_t>() - 1}});
  judge("stats raised, window lowered", {{"stats_bytes", 21 + 7}, {"window_bytes", 24 - 7}});
  judge("stats lowered, window raised", {{"stats_bytes", 0}, {"window_bytes", 24 + 21}});
  judge("window raised, cluster lowered (opaque bytes: loads)", {{"window_bytes", 24 + 8}, {"cluster_bytes", 48 - 8}});
  for (size_t i = 0; i < 6; ++i)
    for (size_t j = i + 1; j < 6; ++j)
      judge(std::string("swap ") + kCounts[i] + " " + kCounts[j], {{kCounts[i], h[kCounts[j]]}, {kCounts[j], h[kCounts[i]]}});
  b.ran_at_least(75, 3);
}

BOOST_AUTO_TEST_CASE(the_issues_crafted_checkpoint_is_rejected_naming_param_count) {
  Bench b;
  json h = json::parse(b.header());
  const int64_t p = h.at("param_count").get<int64_t>();
  h["param_count"] = p + 50;
  h["velocity_count"] = p - 50;
  b.rejected("issue 18", b.with_header(h.dump()), {"param_count"});
  // Without the model to compare with, the file's own consistency still refuses it.
  TempDir dir("ckpt-fuzz-alone");
  const std::string path = dir.file("c.tdm");
  std::ofstream(path, std::ios::binary) << b.with_header(h.dump());
  CHECK_CONTAINS(error_of([&] { read_checkpoint(path); }), "velocity_count");
  b.ran_at_least(1, 0);
}

// Every bit of the header flipped, and random bytes overwritten: whatever JSON that
// leaves is judged by the reference.
BOOST_AUTO_TEST_CASE(header_bits_flipped_and_bytes_overwritten) {
  Bench b;
  const std::string h = b.header();
  for (size_t i = 0; i < h.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string m = h;
      m[i] = static_cast<char>(m[i] ^ (1 << bit));
      b.judged("header bit " + std::to_string(i) + "." + std::to_string(bit), m);
    }
  std::mt19937_64 rng(fuzz_seed());
  for (int n = 0; n < 400; ++n) {
    std::string m = h;
    const size_t at = rng() % m.size();
    m[at] = static_cast<char>(rng() & 0xFF);
    if (rng() % 4 == 0) m[(at + 1) % m.size()] = static_cast<char>(rng() & 0xFF);
    b.judged("header bytes at " + std::to_string(at), m);
  }
  // Whole headers: not an object, empty, deep, huge, with NUL bytes.
  for (const std::string& whole :
       {std::string(), std::string("null"), std::string("[]"), std::string("{}"), std::string("\"x\""),
        std::string("123"), std::string(100000, '[') + std::string(100000, ']'), std::string("{\"a\":"),
        "{\"model\":\"" + std::string(1 << 20, 'm') + "\"}", std::string("{\0}", 3)})
    b.judged("whole header of " + std::to_string(whole.size()) + " bytes", whole);
  b.ran_at_least(5000, 100);
}

BOOST_AUTO_TEST_CASE(prefix_fields_altered) {
  Bench b;
  const std::string good = b.good(), body = good.substr(0, good.size() - 4);
  for (size_t i = 0; i < 8; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string m = body;
      m[i] = static_cast<char>(m[i] ^ (1 << bit));
      b.rejected("magic", sealed(m), {"not a tandem checkpoint"});
    }
  for (uint32_t v : {0u, 2u, 99u, 1u << 16, 0xFFFFFFFFu})
    b.rejected("format " + std::to_string(v), sealed(body.substr(0, 8) + u32(v) + body.substr(12)), {"format version"});
  const uint32_t len = static_cast<uint32_t>(b.header().size());
  const uint32_t size = static_cast<uint32_t>(good.size());
  for (uint32_t v : {0u, 1u, 2u, len - 1, len + 1, len + 4, 2 * len, size - 20, size - 19, size, 0x7FFFFFFFu,
                     0xFFFFFFFFu})
    b.rejected("header length " + std::to_string(v), sealed(body.substr(0, 12) + u32(v) + body.substr(16)),
               {"truncated", "corrupted header", "wrong length"});
  b.ran_at_least(80, 0);
}

// Cut short everywhere in the prefix and header, at every section's end and one
// byte either side, and at random points; with the CRC recomputed over what is left
// and without. Then bytes appended.
BOOST_AUTO_TEST_CASE(truncated_and_appended) {
  Bench b;
  const std::string good = b.good(), body = good.substr(0, good.size() - 4);
  std::set<size_t> cuts;
  for (size_t n = 0; n <= kPrefix + b.header().size() + 8; ++n) cuts.insert(n);
  for (size_t i = 0; i < 6; ++i)
    for (size_t d : {b.section_end(i) - 1, b.section_end(i), b.section_end(i) + 1}) cuts.insert(d);
  std::mt19937_64 rng(fuzz_seed());
  for (int n = 0; n < 100; ++n) cuts.insert(rng() % good.size());
  for (size_t n : cuts) {
    if (n < good.size()) b.rejected("cut at " + std::to_string(n), good.substr(0, n), {"truncated"});
    if (n < body.size()) b.rejected("cut at " + std::to_string(n) + ", sealed", sealed(body.substr(0, n)), {"truncated"});
  }
  for (size_t extra : {1, 3, 4, 7, 8, 1000}) {
    b.rejected("appended " + std::to_string(extra), good + std::string(extra, '\0'), {"wrong length"});
    b.rejected("appended " + std::to_string(extra) + ", sealed", sealed(body + std::string(extra, 'x')),
               {"wrong length"});
  }
  b.ran_at_least(1500, 0);
}

// The payload is data: a flipped bit in a weight, the momentum, a running statistic
// or the opaque bytes is still a checkpoint once sealed, and a corrupted one without.
BOOST_AUTO_TEST_CASE(payload_bits_flipped) {
  Bench b;
  const std::string good = b.good(), body = good.substr(0, good.size() - 4);
  const size_t from = kPrefix + b.header().size();
  std::mt19937_64 rng(fuzz_seed());
  for (int n = 0; n < 150; ++n) {
    std::string m = body;
    const size_t at = from + rng() % (body.size() - from);
    m[at] = static_cast<char>(m[at] ^ (1 << (rng() % 8)));
    b.accepted("payload bit, sealed", sealed(m));
    b.rejected("payload bit", m + good.substr(body.size()), {"checksum mismatch"});
  }
  for (size_t i = body.size(); i < good.size(); ++i) {
    std::string m = good;
    m[i] = static_cast<char>(m[i] ^ 0x01);
    b.rejected("checksum bit", m, {"checksum mismatch"});
  }
  b.accepted("the file as written", good);
  b.ran_at_least(300, 150);
}

BOOST_AUTO_TEST_SUITE_END()  // test_checkpoint_fuzz
