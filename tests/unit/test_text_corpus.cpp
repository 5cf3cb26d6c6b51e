// The text data set (engine/data/text_corpus.hpp) on small files written here, so
// that it needs no corpus: windows and their shifted targets, the held-out tail,
// gather against gather_bytes, the errors a user meets; then the sampler, the batch
// loader and evaluation over it; and one test on Debian's fortunes corpus, which
// prints its sizes and the unigram baseline a trained model must beat.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/data/text_corpus.hpp"
#include "engine/nn/model.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/evaluate.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_text_corpus)  // ctest's unit.test_text_corpus (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

const char* const kFortunes = "/usr/share/games/fortunes";

// Bytes with no short period, every value 0..255 among them, so a wrong offset shows.
std::string pattern(size_t n, unsigned salt) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + (i >> 8) * 7 + salt) & 0xff);
  return s;
}

DataConfig text_config(const std::vector<std::string>& files, int seq_len, double validation) {
  DataConfig cfg;
  cfg.name = "text";
  cfg.files = files;
  cfg.seq_len = seq_len;
  cfg.validation = validation;
  return cfg;
}

uint8_t byte_at(const std::string& s, int64_t i) { return static_cast<uint8_t>(s[static_cast<size_t>(i)]); }

}  // namespace

BOOST_AUTO_TEST_CASE(windows_and_targets_are_the_shifted_bytes) {
  TempDir tmp("text-windows");
  const std::string text = pattern(1200, 1) + pattern(800, 2);
  tmp.write("a.txt", text.substr(0, 1200));
  tmp.write("b.txt", text.substr(1200));
  const DataConfig cfg = text_config({tmp.path.string()}, 8, 0.25);
  auto train = make_dataset(cfg, true);
  auto val = make_dataset(cfg, false);
  // 2000 bytes: a 500-byte tail; 1500 training bytes give 1492 windows; the tail
  // holds (500 - 1) / 8 = 62 windows whose targets fit.
  BOOST_TEST(train->size() == 1492);
  BOOST_TEST(val->size() == 62);
  BOOST_TEST(train->sample_shape() == Shape{8});
  BOOST_TEST(train->classes() == 256);
  BOOST_TEST(val->classes() == 256);
  BOOST_TEST(train->targets_per_sample() == 8);
  BOOST_TEST(val->targets_per_sample() == 8);

  const std::vector<int64_t> idx = {0, 1, 777, 1491};
  std::vector<float> x(idx.size() * 8);
  std::vector<int32_t> labels(idx.size() * 8);
  train->gather(idx.data(), static_cast<int64_t>(idx.size()), x.data(), labels.data());
  for (size_t i = 0; i < idx.size(); ++i)
    for (int64_t t = 0; t < 8; ++t) {
      BOOST_TEST(x[i * 8 + t] == static_cast<float>(byte_at(text, idx[i] + t)), "window " << idx[i] << " at " << t);
      BOOST_TEST(labels[i * 8 + t] == byte_at(text, idx[i] + t + 1), "target " << idx[i] << " at " << t);
    }

  const std::vector<int64_t> vidx = {0, 61};
  val->gather(vidx.data(), 2, x.data(), labels.data());
  for (size_t i = 0; i < vidx.size(); ++i)
    for (int64_t t = 0; t < 8; ++t) {
      const int64_t at = 1500 + vidx[i] * 8 + t;
      BOOST_TEST(x[i * 8 + t] == static_cast<float>(byte_at(text, at)));
      BOOST_TEST(labels[i * 8 + t] == byte_at(text, at + 1));
    }

  const int64_t outside = train->size();
  CHECK_CONTAINS(error_of([&] { train->gather(&outside, 1, x.data(), labels.data()); }), "outside text/train");
}

// No training window reads a byte of the tail (its last target is the byte before
// it), and the validation windows read every tail position once at most.
BOOST_AUTO_TEST_CASE(the_validation_tail_is_disjoint_and_tiled) {
  const TextSplit s = text_split(100000, 128, 0.1, "test");
  BOOST_TEST(s.train_tokens == 90000);
  BOOST_TEST(s.train_windows == 90000 - 128);
  BOOST_TEST(s.validation_windows == 9999 / 128);
  // The last training window's last target.
  BOOST_TEST((s.train_windows - 1) + 128 == s.train_tokens - 1);

  TempDir tmp("text-tail");
  const std::string text = pattern(3001, 3);
  const DataConfig cfg = text_config({tmp.write("t.txt", text)}, 16, 0.2);
  auto train = make_dataset(cfg, true);
  auto val = make_dataset(cfg, false);
  const int64_t tail = 3001 - static_cast<int64_t>(std::floor(3001 * 0.2));
  BOOST_TEST(train->size() == tail - 16);
  std::set<int64_t> seen;  // positions read by validation windows, inputs and targets
  std::vector<float> x(16);
  std::vector<int32_t> labels(16);
  for (int64_t j = 0; j < val->size(); ++j) {
    val->gather(&j, 1, x.data(), labels.data());
    const int64_t start = tail + j * 16;
    for (int64_t t = 0; t < 16; ++t) {
      BOOST_TEST(x[t] == static_cast<float>(byte_at(text, start + t)));
      BOOST_TEST(seen.insert(start + t).second, "position " << start + t << " read twice");
    }
    BOOST_TEST(start + 16 < 3001);  // the last target is in the text
  }
  BOOST_TEST(*seen.begin() == tail);
  BOOST_TEST(seen.size() == static_cast<size_t>(val->size() * 16));  // contiguous, no gaps
}

BOOST_AUTO_TEST_CASE(gather_and_gather_bytes_agree) {
  TempDir tmp("text-bytes");
  const DataConfig cfg = text_config({tmp.write("t.txt", pattern(4000, 4))}, 32, 0.1);
  for (bool train : {true, false}) {
    auto d = make_dataset(cfg, train);
    const Dataset::ByteForm* form = d->byte_form();
    BOOST_REQUIRE(form);
    BOOST_TEST(form->scale == 1.0f);
    BOOST_TEST(form->shift == 0.0f);
    const std::vector<int64_t> idx = {d->size() - 1, 0, 3, 3};
    const int64_t n = static_cast<int64_t>(idx.size());
    // One label past the end, to show the count is n * seq_len, no more.
    std::vector<float> x(static_cast<size_t>(n * 32));
    std::vector<uint8_t> bytes(x.size());
    std::vector<int32_t> la(x.size() + 1, -7), lb(x.size() + 1, -7);
    d->gather(idx.data(), n, x.data(), la.data());
    d->gather_bytes(idx.data(), n, bytes.data(), lb.data());
    BOOST_TEST(la == lb);
    BOOST_TEST(la.back() == -7);
    BOOST_TEST(la[la.size() - 2] != -7);
    for (size_t i = 0; i < x.size(); ++i) BOOST_TEST(x[i] == bytes[i] * form->scale + form->shift);
  }
}

BOOST_AUTO_TEST_CASE(a_folder_gives_its_text_files_by_name) {
  TempDir tmp("text-folder");
  tmp.write("b", "bbbb");
  tmp.write("a", "aaaa");
  tmp.write("a.dat", "index");
  tmp.write(".hidden", "h");
  fs::create_symlink(tmp.file("a"), tmp.file("a.link"));
  tmp.write("b.u8", "bbbb");  // fortune's link, copied as a file
  fs::create_directories(tmp.path / "sub");
  tmp.write("sub/c", "cccc");
  const std::vector<std::string> files = text_corpus_files({tmp.path.string()});
  BOOST_TEST(files == (std::vector<std::string>{tmp.file("a"), tmp.file("b")}), files.size() << " files");
  // Files named one by one keep their order; a named symbolic link is read.
  const std::vector<std::string> named = text_corpus_files({tmp.file("b"), tmp.file("a.link"), tmp.file("sub/c")});
  BOOST_TEST(named == (std::vector<std::string>{tmp.file("b"), tmp.file("a.link"), tmp.file("sub/c")}));
}

// The training and validation sets read the files once: the validation set made
// while the training set lives sees the bytes the training set read.
BOOST_AUTO_TEST_CASE(train_and_validation_share_one_copy) {
  TempDir tmp("text-shared");
  const std::string path = tmp.write("t.txt", std::string(1000, 'x'));
  const DataConfig cfg = text_config({path}, 4, 0.5);
  auto train = make_dataset(cfg, true);
  tmp.write("t.txt", std::string(1000, 'y'));
  auto val = make_dataset(cfg, false);
  std::vector<float> x(4);
  std::vector<int32_t> labels(4);
  const int64_t i = 0;
  val->gather(&i, 1, x.data(), labels.data());
  BOOST_TEST(x[0] == static_cast<float>('x'));
  train.reset();
  val.reset();
  auto fresh = make_dataset(cfg, false);  // no set alive: read again
  fresh->gather(&i, 1, x.data(), labels.data());
  BOOST_TEST(x[0] == static_cast<float>('y'));
}

BOOST_AUTO_TEST_CASE(bad_inputs_name_the_key_the_file_and_what_to_do) {
  TempDir tmp("text-errors");
  const std::string missing = tmp.file("nope.txt");
  std::string msg = error_of([&] { make_dataset(text_config({missing}, 8, 0.1), true); });
  CHECK_CONTAINS(msg, "data.files");
  CHECK_CONTAINS(msg, missing);
  CHECK_CONTAINS(msg, "apt-get install fortunes");

  // check_dataset_files reports the same before anything is read.
  msg = error_of([&] { check_dataset_files(text_config({missing}, 8, 0.1)); });
  CHECK_CONTAINS(msg, missing);
  CHECK_CONTAINS(msg, "apt-get install fortunes");

  fs::create_directories(tmp.path / "empty");
  tmp.write("empty/x.dat", "index only");
  msg = error_of([&] { check_dataset_files(text_config({tmp.file("empty")}, 8, 0.1)); });
  CHECK_CONTAINS(msg, "holds no text file");
  CHECK_CONTAINS(msg, tmp.file("empty"));

  msg = error_of([&] { make_dataset(text_config({}, 8, 0.1), true); });
  CHECK_CONTAINS(msg, "data.files is empty");

  const std::string empty = tmp.write("zero.txt", "");
  msg = error_of([&] { make_dataset(text_config({empty}, 8, 0.1), true); });
  CHECK_CONTAINS(msg, "is empty");
  CHECK_CONTAINS(msg, empty);

  const std::string small = tmp.write("small.txt", pattern(100, 5));
  msg = error_of([&] { make_dataset(text_config({small}, 32, 0.1), true); });
  CHECK_CONTAINS(msg, "too short for data.seq_len = 32");
  CHECK_CONTAINS(msg, small);
  CHECK_CONTAINS(msg, "point data.files at more text");
  CHECK_CONTAINS(msg, "lower data.seq_len");
  // Long enough to train on, but the tail cannot hold a window.
  const std::string tailless = tmp.write("tailless.txt", pattern(400, 6));
  msg = error_of([&] { make_dataset(text_config({tailless}, 32, 0.05), true); });
  CHECK_CONTAINS(msg, "raise data.validation");

  const std::string fine = tmp.write("fine.txt", pattern(5000, 7));
  for (int bad : {0, -1, kTextMaxSeqLen + 1}) {
    msg = error_of([&] { make_dataset(text_config({fine}, bad, 0.1), true); });
    CHECK_CONTAINS(msg, "data.seq_len = " + std::to_string(bad) + " is out of range");
    CHECK_CONTAINS(msg, "set data.seq_len from 1 to");
  }
  for (double bad : {0.0, 0.75, -0.1}) {
    msg = error_of([&] { make_dataset(text_config({fine}, 8, bad), true); });
    CHECK_CONTAINS(msg, "data.validation");
  }
  check_dataset_files(text_config({fine}, 8, 0.1));  // no throw
}

BOOST_AUTO_TEST_CASE(unigram_cross_entropy_of_known_counts) {
  const uint8_t train[] = {'a', 'a', 'b'};
  const uint8_t eval[] = {'a', 'b'};
  // Add-one smoothing over 256 values: p(a) = 3 / 259, p(b) = 2 / 259.
  const double want = -(std::log(3.0 / 259.0) + std::log(2.0 / 259.0)) / 2.0;
  BOOST_TEST(unigram_cross_entropy(train, 3, eval, 2) == want, boost::test_tools::tolerance(1e-12));
  // With no training text every byte costs ln 256.
  BOOST_TEST(unigram_cross_entropy(train, 0, eval, 2) == std::log(256.0), boost::test_tools::tolerance(1e-12));
}

// The sampler draws from every window; a rank's slice loads the labels of exactly
// those windows.
BOOST_AUTO_TEST_CASE(batch_loader_gives_a_slice_its_windows_labels) {
  TempDir tmp("text-loader");
  const std::string text = pattern(6000, 8);
  const DataConfig cfg = text_config({tmp.write("t.txt", text)}, 16, 0.1);
  auto train = make_dataset(cfg, true);
  GlobalSampler sampler(train->size(), 24, 99);
  BatchLoader loader(*train, sampler, cpu_device());
  for (int64_t t : {int64_t{0}, int64_t{7}, sampler.iterations_per_epoch() + 1}) {
    const Tensor& x = loader.load(t, 5, 11);
    BOOST_TEST(x.shape() == (Shape{11, 16}));
    std::vector<int64_t> want;
    sampler.slice(t, 5, 11, want);
    BOOST_TEST(loader.indices() == want);
    const int32_t* labels = loader.labels();
    for (size_t i = 0; i < want.size(); ++i)
      for (int64_t p = 0; p < 16; ++p) {
        BOOST_TEST(x.data()[i * 16 + p] == static_cast<float>(byte_at(text, want[i] + p)));
        BOOST_TEST(labels[i * 16 + p] == byte_at(text, want[i] + p + 1));
      }
  }
}

// A model predicting 256 values at every position of a window: the sums count
// targets, so with all-zero parameters the mean loss per target is ln 256. Until the
// sequence layers exist, a 1x1 convolution with 256 channels over a [1, 1, 256]
// view of a 256-byte window stands in for one: [256, 1, 256] logits, 256 targets.
BOOST_AUTO_TEST_CASE(evaluate_range_counts_targets) {
  TempDir tmp("text-eval");
  const DataConfig cfg = text_config({tmp.write("t.txt", pattern(8000, 9))}, 256, 0.2);
  auto val = make_dataset(cfg, false);
  BOOST_REQUIRE(val->size() == 1599 / 256);
  ModelSpec spec;
  spec.name = "per-position";
  spec.input = {1, 1, 256};
  spec.classes = 256;
  spec.layers = {{"conv2d", {{"out_channels", 256}, {"kernel", 1}}, "test:1"}};
  Model model(cpu_device(), spec, 1);
  BOOST_REQUIRE(model.targets_per_sample() == 256);
  cpu_device().fill(model.params().data(), model.param_count(), 0.0f);
  const EvalSums sums = evaluate_range(model, *val, 2, 1, val->size());
  BOOST_TEST(sums.count == static_cast<double>((val->size() - 1) * 256));
  BOOST_TEST(sums.loss_sum / sums.count == std::log(256.0), boost::test_tools::tolerance(1e-5));
  BOOST_TEST(sums.correct <= sums.count);

  // A classifier (one prediction per sample) cannot be evaluated on text.
  spec.input = {256};
  spec.layers = {{"linear", {{"out", 256}}, "test:1"}};
  Model classifier(cpu_device(), spec, 1);
  CHECK_CONTAINS(error_of([&] { evaluate_range(classifier, *val, 2, 0, 2); }), "1 predictions per sample");
}

BOOST_AUTO_TEST_CASE(the_fortunes_corpus) {
  if (!fs::is_directory(kFortunes)) {
    BOOST_TEST_MESSAGE("skipped: " << kFortunes << " is absent (apt-get install fortunes)");
    return;
  }
  const DataConfig cfg = text_config({kFortunes}, 128, 0.1);
  const std::vector<std::string> files = text_corpus_files(cfg.files);
  int64_t bytes = 0;
  for (const std::string& f : files) bytes += static_cast<int64_t>(fs::file_size(f));
  for (const std::string& f : files) {
    BOOST_TEST(f.find(".dat") == std::string::npos, f);
    BOOST_TEST(!fs::is_symlink(f), f);
  }
  const TextSplit s = text_split(bytes, cfg.seq_len, cfg.validation, "fortunes");
  auto train = make_dataset(cfg, true);
  auto val = make_dataset(cfg, false);
  BOOST_TEST(train->size() == s.train_windows);
  BOOST_TEST(val->size() == s.validation_windows);
  // The sampler over every training window: an index drawn gathers.
  GlobalSampler sampler(train->size(), 64, 1);
  std::vector<int64_t> idx;
  sampler.slice(sampler.iterations_per_epoch() - 1, 0, 64, idx);
  std::vector<uint8_t> x(64 * 128);
  std::vector<int32_t> labels(64 * 128);
  train->gather_bytes(idx.data(), 64, x.data(), labels.data());

  const double nats = unigram_cross_entropy(cfg);
  std::printf("fortunes: %zu files, %lld bytes; seq_len 128, validation 0.1: %lld training tokens (%lld windows), "
              "%lld validation tokens (%lld windows, %lld targets)\n"
              "unigram baseline on the validation targets: %.4f nats per byte, %.4f bits per byte\n",
              files.size(), static_cast<long long>(bytes), static_cast<long long>(s.train_tokens),
              static_cast<long long>(s.train_windows), static_cast<long long>(bytes - s.train_tokens),
              static_cast<long long>(s.validation_windows), static_cast<long long>(s.validation_windows * 128), nats,
              nats / std::log(2.0));
  // English bytes: about 4.4 bits by frequency alone; far below 8 (uniform).
  BOOST_TEST(nats > 2.0);
  BOOST_TEST(nats < 3.5);
}

BOOST_AUTO_TEST_SUITE_END()  // test_text_corpus
