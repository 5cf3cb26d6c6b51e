// The tokens data set (engine/data/token_files.hpp) on token files written here in
// both formats: windows and targets, shards no window crosses, globs, the capped
// validation set, every error a user meets before and during training, a 17 GB
// sparse file mapped without reading it, and the experiment keys that reach it.
// The computed permutation the sampler uses past 2^24 samples is checked here too.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/data/token_files.hpp"
#include "engine/script/experiment_loader.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_token_files)  // ctest's unit.test_token_files (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

// Tokens with no short period, all below vocab.
std::vector<uint16_t> tokens(size_t n, unsigned salt, int vocab = 50257) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<uint16_t>((i * 7919 + (i >> 5) * 31 + salt) % vocab);
  return t;
}

// nanoGPT's train.bin: the raw uint16 tokens.
std::string write_nanogpt(const TempDir& tmp, const std::string& name, const std::vector<uint16_t>& t) {
  std::ofstream f(tmp.file(name), std::ios::binary);
  f.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 2));
  return tmp.file(name);
}

// llm.c's shard: 256 int32 (magic, version, count), then the tokens.
std::string write_llmc(const TempDir& tmp, const std::string& name, const std::vector<uint16_t>& t,
                       int32_t magic = static_cast<int32_t>(kLlmcMagic), int32_t version = 1, int64_t count = -1) {
  int32_t header[256] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(count < 0 ? static_cast<int64_t>(t.size()) : count);
  std::ofstream f(tmp.file(name), std::ios::binary);
  f.write(reinterpret_cast<const char*>(header), sizeof header);
  f.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * 2));
  return tmp.file(name);
}

DataConfig token_config(const std::vector<std::string>& train, const std::vector<std::string>& validation,
                        int seq_len, int vocab = 50257) {
  DataConfig cfg;
  cfg.name = "tokens";
  cfg.train = train;
  cfg.validation_files = validation;
  cfg.seq_len = seq_len;
  cfg.vocab = vocab;
  return cfg;
}

// Gathers sample s; returns its inputs as integers and its targets.
std::pair<std::vector<int>, std::vector<int32_t>> sample(const Dataset& d, int64_t s) {
  const size_t len = static_cast<size_t>(d.sample_shape()[0]);
  std::vector<float> x(len);
  std::vector<int32_t> labels(len);
  d.gather(&s, 1, x.data(), labels.data());
  std::vector<int> in(len);
  for (size_t t = 0; t < len; ++t) in[t] = static_cast<int>(x[t]);
  return {in, labels};
}

std::vector<int> slice(const std::vector<uint16_t>& t, size_t from, size_t n) {
  return std::vector<int>(t.begin() + static_cast<long>(from), t.begin() + static_cast<long>(from + n));
}
std::vector<int32_t> slice32(const std::vector<uint16_t>& t, size_t from, size_t n) {
  return std::vector<int32_t>(t.begin() + static_cast<long>(from), t.begin() + static_cast<long>(from + n));
}

int64_t resident_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

}  // namespace

BOOST_AUTO_TEST_CASE(nanogpt_windows_are_every_start_and_validation_tiles) {
  TempDir tmp("tokens-nanogpt");
  const auto train_tokens = tokens(1000, 1), val_tokens = tokens(101, 2);
  const DataConfig cfg =
      token_config({write_nanogpt(tmp, "train.bin", train_tokens)}, {write_nanogpt(tmp, "val.bin", val_tokens)}, 10);
  auto train = make_dataset(cfg, true);
  auto val = make_dataset(cfg, false);
  BOOST_TEST(train->name() == "tokens/train");
  BOOST_TEST(train->size() == 1000 - 10);
  BOOST_TEST(val->size() == (101 - 1) / 10);
  BOOST_TEST(train->sample_shape() == Shape{10});
  BOOST_TEST(train->classes() == 50257);
  BOOST_TEST(train->targets_per_sample() == 10);
  BOOST_TEST(!train->byte_form());
  BOOST_TEST(!train->byte_rows());
  for (int64_t s : {int64_t{0}, int64_t{1}, int64_t{500}, int64_t{989}}) {
    const auto [in, labels] = sample(*train, s);
    BOOST_TEST(in == slice(train_tokens, static_cast<size_t>(s), 10), "window " << s);
    BOOST_TEST(labels == slice32(train_tokens, static_cast<size_t>(s) + 1, 10), "targets " << s);
  }
  for (int64_t s = 0; s < val->size(); ++s) {
    const auto [in, labels] = sample(*val, s);
    BOOST_TEST(in == slice(val_tokens, static_cast<size_t>(s) * 10, 10));
    BOOST_TEST(labels == slice32(val_tokens, static_cast<size_t>(s) * 10 + 1, 10));
  }
  const int64_t outside = train->size();
  std::vector<float> x(10);
  std::vector<int32_t> l(10);
  CHECK_CONTAINS(error_of([&] { train->gather(&outside, 1, x.data(), l.data()); }), "outside tokens/train");
}

BOOST_AUTO_TEST_CASE(llmc_shards_read_as_nanogpt_files_and_auto_tells_them_apart) {
  TempDir tmp("tokens-llmc");
  const auto t = tokens(777, 3), v = tokens(300, 4);
  const DataConfig nano = token_config({write_nanogpt(tmp, "a.bin", t)}, {write_nanogpt(tmp, "va.bin", v)}, 16);
  DataConfig llmc = token_config({write_llmc(tmp, "b.bin", t)}, {write_llmc(tmp, "vb.bin", v)}, 16);
  BOOST_TEST(inspect_token_shard(tmp.file("a.bin"), "auto").format == "nanogpt");
  const TokenShardInfo info = inspect_token_shard(tmp.file("b.bin"), "auto");
  BOOST_TEST(info.format == "llmc");
  BOOST_TEST(info.tokens == 777);
  BOOST_TEST(info.header_bytes == 1024);
  for (const char* format : {"auto", "llmc"}) {
    llmc.format = format;
    for (bool train : {true, false}) {
      auto a = make_dataset(nano, train), b = make_dataset(llmc, train);
      BOOST_REQUIRE(a->size() == b->size());
      for (int64_t s : {int64_t{0}, a->size() / 2, a->size() - 1}) BOOST_TEST((sample(*a, s) == sample(*b, s)));
    }
  }
}

// Shards are read in the order given, a glob's matches sorted; a window never spans
// two shards, and a shard too short for one window adds none.
BOOST_AUTO_TEST_CASE(shards_and_globs) {
  TempDir tmp("tokens-shards");
  const auto s0 = tokens(50, 5), s1 = tokens(5, 6), s2 = tokens(70, 7);
  write_nanogpt(tmp, "train_002.bin", s2);
  write_nanogpt(tmp, "train_000.bin", s0);
  write_llmc(tmp, "train_001.bin", s1);  // formats may mix under 'auto'
  const std::string val = write_nanogpt(tmp, "val.bin", tokens(40, 8));
  const std::vector<std::string> files = token_files({tmp.file("train_*.bin")}, "data.train");
  BOOST_TEST(files == (std::vector<std::string>{tmp.file("train_000.bin"), tmp.file("train_001.bin"),
                                                tmp.file("train_002.bin")}));
  auto train = make_dataset(token_config({tmp.file("train_*.bin")}, {val}, 8), true);
  BOOST_TEST(train->size() == (50 - 8) + 0 + (70 - 8));
  BOOST_TEST(sample(*train, 41).first == slice(s0, 41, 8));  // the last window of shard 0
  BOOST_TEST(sample(*train, 41).second == slice32(s0, 42, 8));
  BOOST_TEST(sample(*train, 42).first == slice(s2, 0, 8));  // shard 1 (5 tokens) has none
  BOOST_TEST(sample(*train, train->size() - 1).second == slice32(s2, 62, 8));
  // A list in the order given.
  auto listed = make_dataset(token_config({tmp.file("train_002.bin"), tmp.file("train_000.bin")}, {val}, 8), true);
  BOOST_TEST(sample(*listed, 0).first == slice(s2, 0, 8));
}

BOOST_AUTO_TEST_CASE(validation_windows_caps_the_validation_set_evenly) {
  TempDir tmp("tokens-cap");
  const auto v = tokens(1001, 9);
  DataConfig cfg = token_config({write_nanogpt(tmp, "t.bin", tokens(100, 1))}, {write_nanogpt(tmp, "v.bin", v)}, 10);
  cfg.validation_windows = 0;
  BOOST_TEST(make_dataset(cfg, false)->size() == 100);
  cfg.validation_windows = 1000;
  BOOST_TEST(make_dataset(cfg, false)->size() == 100);
  cfg.validation_windows = 25;
  auto val = make_dataset(cfg, false);
  BOOST_REQUIRE(val->size() == 25);
  // Window j of the capped set is window 4 j of the whole: spread over the file.
  for (int64_t j : {int64_t{0}, int64_t{1}, int64_t{24}})
    BOOST_TEST(sample(*val, j).first == slice(v, static_cast<size_t>(j) * 40, 10));
  BOOST_TEST(make_dataset(cfg, true)->size() == 90);  // the cap is validation's only
}

BOOST_AUTO_TEST_CASE(bad_files_are_errors_naming_the_file) {
  TempDir tmp("tokens-bad");
  const std::string good = write_nanogpt(tmp, "good.bin", tokens(100, 1));
  auto error_for = [&](const std::string& train_file, const std::string& format = "auto") {
    DataConfig cfg = token_config({train_file}, {good}, 8);
    cfg.format = format;
    return error_of([&] { check_dataset_files(cfg); });
  };
  // A nanoGPT file read as llm.c's: no magic.
  std::string msg = error_for(write_nanogpt(tmp, "plain.bin", tokens(600, 2)), "llmc");
  CHECK_CONTAINS(msg, tmp.file("plain.bin"));
  CHECK_CONTAINS(msg, "llm.c's magic number 20240520");
  msg = error_for(write_llmc(tmp, "v2.bin", tokens(600, 2), static_cast<int32_t>(kLlmcMagic), 2));
  CHECK_CONTAINS(msg, "format version 2");
  msg = error_for(write_llmc(tmp, "count.bin", tokens(600, 2), static_cast<int32_t>(kLlmcMagic), 1, 700));
  CHECK_CONTAINS(msg, "its header counts 700 tokens");
  CHECK_CONTAINS(msg, "the file is 2224 bytes");
  msg = error_for(write_llmc(tmp, "none.bin", {}));  // a header counting no tokens
  CHECK_CONTAINS(msg, "(" + tmp.file("none.bin") + ") holds no tokens");
  tmp.write("tiny.bin", "0123456789");
  msg = error_for(tmp.file("tiny.bin"), "llmc");
  CHECK_CONTAINS(msg, "shorter than llm.c's 1024-byte header");
  tmp.write("odd.bin", "abc");
  msg = error_for(tmp.file("odd.bin"));
  CHECK_CONTAINS(msg, "'" + tmp.file("odd.bin") + "' is 3 bytes, not a whole number of 2-byte tokens");
  tmp.write("empty.bin", "");
  msg = error_for(tmp.file("empty.bin"));
  CHECK_CONTAINS(msg, "data.train: the training split (" + tmp.file("empty.bin") + ") holds no tokens");
  msg = error_for(tmp.file("none_*.bin"));
  CHECK_CONTAINS(msg, "data.train: '" + tmp.file("none_*.bin") + "' matches no file");
  msg = error_for(tmp.file("no_folder/*.bin"));  // a glob under a folder that is not there
  CHECK_CONTAINS(msg, "data.train: '" + tmp.file("no_folder/*.bin") + "' matches no file");
  {  // an llm.c shard cut inside its header, told from the magic under 'auto'
    const int32_t magic = static_cast<int32_t>(kLlmcMagic);
    std::ofstream(tmp.file("cut.bin"), std::ios::binary).write(reinterpret_cast<const char*>(&magic), 4);
  }
  msg = error_for(tmp.file("cut.bin"));
  CHECK_CONTAINS(msg, "shorter than llm.c's 1024-byte header");
  msg = error_for(tmp.file("missing.bin"));
  CHECK_CONTAINS(msg, "data.train: '" + tmp.file("missing.bin") + "' does not exist");
  msg = error_for(tmp.path.string());
  CHECK_CONTAINS(msg, "is not a regular file");
  msg = error_of([&] { check_dataset_files(token_config({good}, {}, 8)); });
  CHECK_CONTAINS(msg, "data.validation is empty");
  // Too short for the window: 100 tokens hold no window of 100 and its targets.
  msg = error_of([&] { check_dataset_files(token_config({good}, {good}, 100)); });
  CHECK_CONTAINS(msg, "no shard holding a window of data.seq_len = 100");
  DataConfig bad_vocab = token_config({good}, {good}, 8, 70000);
  CHECK_CONTAINS(error_of([&] { check_dataset_files(bad_vocab); }), "data.vocab = 70000 is out of range");
}

// A token at or above data.vocab stops the gather that reads it, naming where it is.
BOOST_AUTO_TEST_CASE(a_token_outside_the_vocabulary_is_named_with_its_offset) {
  TempDir tmp("tokens-vocab");
  auto t = tokens(200, 3, 256);
  t[123] = 300;
  const DataConfig cfg = token_config({write_llmc(tmp, "t.bin", t)}, {write_nanogpt(tmp, "v.bin", tokens(50, 1, 256))},
                                      16, 256);
  auto train = make_dataset(cfg, true);  // opening reads no token
  BOOST_TEST(sample(*train, 0).first == slice(t, 0, 16));
  const std::string msg = error_of([&] { sample(*train, 110); });  // window [110, 126] holds token 123
  CHECK_CONTAINS(msg, "token file '" + tmp.file("t.bin") + "' holds token 300 at byte offset 1270 (token 123)");
  CHECK_CONTAINS(msg, "outside data.vocab = 256");
  // The target after a window counts as read: window [107, 123)'s last target is 123.
  CHECK_CONTAINS(error_of([&] { sample(*train, 107); }), "token 300");
  BOOST_TEST(sample(*train, 106).first == slice(t, 106, 16));
}

// A shard cut short while it is mapped is an error, not a SIGBUS that ends the run.
BOOST_AUTO_TEST_CASE(a_shard_cut_short_mid_run_is_an_error) {
  TempDir tmp("tokens-truncated");
  const std::string f = write_nanogpt(tmp, "t.bin", tokens(4096 * 4, 1));
  auto train = make_dataset(token_config({f}, {write_nanogpt(tmp, "v.bin", tokens(100, 2))}, 32), true);
  BOOST_TEST(sample(*train, 9000).first.size() == 32u);
  fs::resize_file(f, 1000);
  CHECK_CONTAINS(error_of([&] { sample(*train, 9000); }), "was cut short while training read it: 1000 bytes");
}

// 17 GB (OpenWebText's train.bin): mapped, not read. The file is sparse (no disk
// used); its windows read as zeros. Opening it adds no resident memory beyond a
// few pages, and the sampler's batches over its 8.5 billion windows are distinct.
BOOST_AUTO_TEST_CASE(a_17_gb_file_is_mapped_not_read) {
  TempDir tmp("tokens-large");
  const int64_t bytes = int64_t{17} << 30;
  {
    std::ofstream(tmp.file("big.bin"), std::ios::binary);
  }
  std::error_code ec;
  fs::resize_file(tmp.file("big.bin"), static_cast<uintmax_t>(bytes), ec);
  if (ec) {
    BOOST_TEST_MESSAGE("skipped: cannot make a 17 GB sparse file here (" << ec.message() << ")");
    return;
  }
  const int64_t before = resident_kb();
  DataConfig cfg = token_config({tmp.file("big.bin")}, {tmp.file("big.bin")}, 1024);
  auto train = make_dataset(cfg, true);
  auto val = make_dataset(cfg, false);
  const int64_t after = resident_kb();
  BOOST_TEST_MESSAGE("resident memory " << before << " kB before opening 17 GB twice, " << after << " kB after");
  BOOST_TEST(after - before < 4096, "opening grew resident memory by " << after - before << " kB");
  BOOST_TEST(train->size() == bytes / 2 - 1024);
  BOOST_TEST(val->size() == 512);  // the default cap
  GlobalSampler sampler(train->size(), 64, 11);
  std::vector<int64_t> batch;
  sampler.global_batch(3, batch);
  BOOST_TEST(std::set<int64_t>(batch.begin(), batch.end()).size() == 64u);
  std::vector<float> x(64 * 1024);
  std::vector<int32_t> labels(64 * 1024);
  train->gather(batch.data(), 64, x.data(), labels.data());
  BOOST_TEST(x[1000] == 0.0f);
}

// The permutation the sampler computes past 2^24 samples is a bijection of [0, n).
BOOST_AUTO_TEST_CASE(the_computed_permutation_is_a_bijection) {
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{1000}, int64_t{1037}, int64_t{65536},
                    int64_t{100003}}) {
    for (uint64_t key : {1ull, 99ull}) {
      const FeistelPermutation p(n, key);
      std::vector<bool> hit(static_cast<size_t>(n), false);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = p(i);
        BOOST_REQUIRE((v >= 0 && v < n));
        BOOST_REQUIRE(!hit[static_cast<size_t>(v)]);
        hit[static_cast<size_t>(v)] = true;
      }
    }
  }
  // Not the identity, and another key gives another order.
  const FeistelPermutation a(100003, 1), b(100003, 2);
  int fixed = 0, same = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    fixed += a(i) == i;
    same += a(i) == b(i);
  }
  BOOST_TEST(fixed < 10);
  BOOST_TEST(same < 10);
}

// Past 2^24 samples: ranks' slices still join into the global batch, a batch's
// indices are distinct, an epoch's batches do not repeat an index, and the next
// epoch is another order.
BOOST_AUTO_TEST_CASE(the_sampler_over_a_huge_data_set) {
  const int64_t n = (int64_t{1} << 24) + 12345;
  GlobalSampler s(n, 4096, 5);
  std::vector<int64_t> whole, part, joined;
  std::set<int64_t> seen;
  for (int64_t t = 0; t < 8; ++t) {
    s.global_batch(t, whole);
    joined.clear();
    for (int64_t off : {int64_t{0}, int64_t{1000}, int64_t{1001}, int64_t{3000}}) {
      const int64_t end = off == 0 ? 1000 : off == 1000 ? 1001 : off == 1001 ? 3000 : 4096;
      s.slice(t, off, end - off, part);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    BOOST_REQUIRE(joined == whole);
    for (int64_t i : whole) {
      BOOST_REQUIRE((i >= 0 && i < n));
      BOOST_REQUIRE(seen.insert(i).second);
    }
  }
  std::vector<int64_t> next;
  s.global_batch(s.iterations_per_epoch(), next);  // epoch 1's first batch
  s.global_batch(0, whole);
  BOOST_TEST(next != whole);
  GlobalSampler again(n, 4096, 5);
  again.global_batch(0, next);
  BOOST_TEST(next == whole);  // the same on every rank
}

// The experiment keys: data.validation takes the validation files (a list in the
// file, FILE[,FILE] on the command line), the model gets {seq_len} and vocab classes.
BOOST_AUTO_TEST_CASE(experiment_keys_reach_the_data_set) {
  TempDir tmp("tokens-experiment");
  const std::string t = write_nanogpt(tmp, "train.bin", tokens(5000, 1, 512));
  const std::string v = write_llmc(tmp, "val.bin", tokens(600, 2, 512));
  const std::string path = tmp.write("e.lua", "return { model = 'gpt', model_args = { n_layer = 1, n_head = 2, "
                                              "n_embd = 16 }, data = { name = 'tokens', train = {'" + t +
                                              "'}, validation = {'" + v + "'}, vocab = 512, seq_len = 32 } }");
  const ExperimentConfig c = load_experiment(path, {});
  BOOST_TEST(c.data.name == "tokens");
  BOOST_TEST(c.data.train == std::vector<std::string>{t});
  BOOST_TEST(c.data.validation_files == std::vector<std::string>{v});
  BOOST_TEST(c.data.vocab == 512);
  BOOST_TEST(c.data.format == "auto");
  BOOST_TEST(c.model.input == Shape({32}));
  BOOST_TEST(c.model.classes == 512);
  const ExperimentConfig o = load_experiment(path, {"data.validation=" + t + "," + v, "data.vocab=600"});
  BOOST_TEST(o.data.validation_files == (std::vector<std::string>{t, v}));
  BOOST_TEST(o.model.classes == 600);
  const ExperimentConfig lit = load_experiment(path, {"data.validation={'" + v + "'}"});
  BOOST_TEST(lit.data.validation_files == std::vector<std::string>{v});
  // Errors before any worker starts: an empty split, a missing file, a language
  // model's bsp-only rule.
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"data.train="}); }), "'data.train' lists no files");
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"data.validation=" + tmp.file("none.bin")}); }),
                 "data.validation: '" + tmp.file("none.bin") + "' does not exist");
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"sync.mode=local"}); }), "data.name = 'tokens'");
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"data.on_device=always"}); }),
                 "cannot hold the tokens data set on the device");
}

// models/gpt.lua's GPT-2 presets: the published sizes, a context of at most 1024.
BOOST_AUTO_TEST_CASE(gpt2_presets_set_the_published_sizes) {
  TempDir tmp("tokens-presets");
  const std::string t = write_nanogpt(tmp, "train.bin", tokens(5000, 1));
  const std::string path = tmp.write("e.lua", "return { model = 'gpt', model_args = { preset = 'gpt2-medium' }, "
                                              "data = { name = 'tokens', train = {'" + t + "'}, validation = {'" + t +
                                              "'}, seq_len = 256 } }");
  const ExperimentConfig c = load_experiment(path, {});
  BOOST_REQUIRE(c.model.layers.size() == 24u + 3u);
  BOOST_TEST(c.model.layers[0].args.at("n_embd") == 1024);
  BOOST_TEST(c.model.layers[1].args.at("n_head") == 16);
  BOOST_TEST(c.model.classes == 50257);
  for (const auto& [preset, layers, heads, width] :
       std::vector<std::tuple<std::string, size_t, double, double>>{
           {"gpt2", 12, 12, 768}, {"gpt2-large", 36, 20, 1280}, {"gpt2-xl", 48, 25, 1600}}) {
    const ExperimentConfig p = load_experiment(path, {"model_args={preset = '" + preset + "'}"});
    BOOST_TEST(p.model.layers.size() == layers + 3);
    BOOST_TEST(p.model.layers[1].args.at("n_head") == heads);
    BOOST_TEST(p.model.layers[0].args.at("n_embd") == width);
  }
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"model_args.n_layer=2"}); }),
                 "model_args.n_layer is set by preset = gpt2-medium (24)");
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"model_args.preset=gpt3"}); }), "is not a GPT-2 size");
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"data.seq_len=2048"}); }),
                 "a context of 1024 tokens; data.seq_len = 2048 is longer");
}

BOOST_AUTO_TEST_SUITE_END()  // test_token_files
