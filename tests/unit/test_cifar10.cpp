// The cifar10 data set (engine/data/cifar10.hpp) on small files written here in the
// binary version's format (the real set does not ship): records, labels, per-channel
// normalisation, the augmentation's crops and flips (each output found among the 162
// crops and flips of its padded image), its independence from the batch a sample is
// gathered in, the errors a user meets; and the CIFAR ResNet-18's size.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/data/cifar10.hpp"
#include "engine/data/datasets.hpp"
#include "engine/nn/model.hpp"
#include "engine/script/experiment_loader.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_cifar10)  // ctest's unit.test_cifar10 (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

// Record r of file f: label (r + f) % 10, pixels from a pattern with no symmetry.
std::vector<uint8_t> record(int file, int r) {
  std::vector<uint8_t> rec(static_cast<size_t>(kCifarRecordBytes));
  rec[0] = static_cast<uint8_t>((r + file) % 10);
  for (int64_t i = 0; i < kCifarImageBytes; ++i) rec[static_cast<size_t>(1 + i)] = static_cast<uint8_t>((i * 37 + r * 11 + file * 101 + (i >> 7)) & 0xff);
  return rec;
}

// data_batch_1..5 with `per_file` records each, test_batch with 7.
std::string write_cifar(const TempDir& tmp, int per_file) {
  for (int f = 1; f <= 6; ++f) {
    std::ofstream out(tmp.file(f <= 5 ? "data_batch_" + std::to_string(f) + ".bin" : "test_batch.bin"),
                      std::ios::binary);
    for (int r = 0; r < (f <= 5 ? per_file : 7); ++r) {
      const auto rec = record(f, r);
      out.write(reinterpret_cast<const char*>(rec.data()), static_cast<std::streamsize>(rec.size()));
    }
  }
  return tmp.path.string();
}

DataConfig cifar_config(const std::string& dir, bool augment = true) {
  DataConfig cfg;
  cfg.name = "cifar10";
  cfg.dir = dir;
  cfg.augment = augment;
  return cfg;
}

float normalised(int channel, uint8_t v) { return (v / 255.0f - kCifarMean[channel]) / kCifarStd[channel]; }

// The image of `rec` cropped at (dx, dy) from its padded image, flipped or not.
std::vector<float> expected(const std::vector<uint8_t>& rec, int dx, int dy, bool flip) {
  std::vector<float> out(static_cast<size_t>(kCifarImageBytes));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) {
        const int sx = (flip ? 31 - x : x) + dx - 4, sy = y + dy - 4;
        const bool in = sx >= 0 && sx < 32 && sy >= 0 && sy < 32;
        out[static_cast<size_t>(c * 1024 + y * 32 + x)] =
            normalised(c, in ? rec[static_cast<size_t>(1 + c * 1024 + sy * 32 + sx)] : 0);
      }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(records_labels_and_normalisation) {
  TempDir tmp("cifar-records");
  const DataConfig cfg = cifar_config(write_cifar(tmp, 4), false);
  auto train = make_dataset(cfg, true);
  auto test = make_dataset(cfg, false);
  BOOST_TEST(train->size() == 20);
  BOOST_TEST(test->size() == 7);
  BOOST_TEST(dataset_size(cfg, true) == 20);
  BOOST_TEST(dataset_size(cfg, false) == 7);
  BOOST_TEST(train->sample_shape() == Shape({3, 32, 32}));
  BOOST_TEST(train->classes() == 10);
  BOOST_TEST(!train->byte_rows());  // per-channel normalisation and augmentation: gathered on the host
  std::vector<float> x(static_cast<size_t>(kCifarImageBytes));
  int32_t label = -1;
  for (int64_t s : {int64_t{0}, int64_t{5}, int64_t{19}}) {  // file s / 4 + 1, record s % 4
    const auto rec = record(static_cast<int>(s / 4) + 1, static_cast<int>(s % 4));
    train->gather_drawn(&s, 1, 3, x.data(), &label);  // augment = false: the image itself
    BOOST_TEST(label == rec[0]);
    BOOST_TEST(x == expected(rec, 4, 4, false));
  }
  const int64_t t = 6;
  test->gather(&t, 1, x.data(), &label);
  BOOST_TEST(x == expected(record(6, 6), 4, 4, false));
  BOOST_TEST(std::abs(normalised(0, 0) - (-0.4914f / 0.2470f)) < 1e-6f);
}

// Every augmented sample is one of its padded image's 81 crops, flipped or not; the
// same (epoch, index) gives the same one whatever batch it is gathered in; epochs
// differ; the test set is never augmented.
BOOST_AUTO_TEST_CASE(augmentation_is_a_crop_and_flip_drawn_per_epoch_and_sample) {
  TempDir tmp("cifar-augment");
  const DataConfig cfg = cifar_config(write_cifar(tmp, 10), true);
  auto train = make_dataset(cfg, true);
  std::vector<float> x(static_cast<size_t>(kCifarImageBytes) * 3), one(static_cast<size_t>(kCifarImageBytes));
  std::vector<int32_t> labels(3);
  std::set<std::vector<int>> draws;
  int flips = 0;
  for (int64_t epoch = 0; epoch < 4; ++epoch)
    for (int64_t s = 0; s < 50; s += 7) {
      const auto rec = record(static_cast<int>(s / 10) + 1, static_cast<int>(s % 10));
      train->gather_drawn(&s, 1, epoch, one.data(), labels.data());
      const CifarDraw d = cifar10_draw(cfg.seed, epoch, s);
      BOOST_TEST(one == expected(rec, d.dx, d.dy, d.flip), "sample " << s << " epoch " << epoch);
      int found = 0;
      for (int dx = 0; dx <= 8; ++dx)
        for (int dy = 0; dy <= 8; ++dy)
          for (bool flip : {false, true}) found += one == expected(rec, dx, dy, flip);
      BOOST_TEST(found >= 1);
      draws.insert({d.dx, d.dy, d.flip});
      flips += d.flip;
    }
  BOOST_TEST(draws.size() > 10u);  // 32 draws over 162 possibilities
  BOOST_TEST(flips > 4);
  BOOST_TEST(flips < 28);
  // In a batch with others, sample 12 of epoch 2 is what it is alone.
  const std::vector<int64_t> batch = {3, 12, 40};
  train->gather_drawn(batch.data(), 3, 2, x.data(), labels.data());
  const int64_t s = 12;
  train->gather_drawn(&s, 1, 2, one.data(), labels.data());
  BOOST_TEST(std::vector<float>(x.begin() + kCifarImageBytes, x.begin() + 2 * kCifarImageBytes) == one);
  auto test = make_dataset(cfg, false);
  const int64_t t = 2;
  test->gather_drawn(&t, 1, 5, one.data(), labels.data());
  BOOST_TEST(one == expected(record(6, 2), 4, 4, false));
}

BOOST_AUTO_TEST_CASE(missing_and_damaged_files_are_named) {
  TempDir tmp("cifar-bad");
  const std::string dir = write_cifar(tmp, 3);
  std::filesystem::remove(tmp.file("data_batch_4.bin"));
  std::string msg = error_of([&] { check_dataset_files(cifar_config(dir)); });
  CHECK_CONTAINS(msg, "data_batch_4.bin' does not exist");
  CHECK_CONTAINS(msg, "cifar-10-binary.tar.gz");
  write_cifar(tmp, 3);
  tmp.write("test_batch.bin", std::string(100, 'x'));
  msg = error_of([&] { make_dataset(cifar_config(dir), false); });
  CHECK_CONTAINS(msg, "test_batch.bin' is 100 bytes, not a whole number of 3073-byte records");
  std::string bad(static_cast<size_t>(kCifarRecordBytes), '\0');
  bad[0] = 12;
  tmp.write("test_batch.bin", bad);
  CHECK_CONTAINS(error_of([&] { make_dataset(cifar_config(dir), false); }), "record 0 has label 12");
}

// models/resnet.lua's depth = 18: the CIFAR ResNet-18, 11,173,962 parameters at 10
// classes (torchvision's resnet18 with a 3x3 stem and no max pool, as CIFAR code
// builds it), data.dir defaulting to data/cifar-10-batches-bin.
BOOST_AUTO_TEST_CASE(the_cifar_resnet18) {
  TempDir tmp("cifar-resnet");
  const std::string dir = write_cifar(tmp, 2);
  const std::string path = tmp.write("e.lua", "return { model = 'resnet', model_args = { depth = 18 }, global_batch = 4,"
                                              " data = { name = 'cifar10', dir = '" + dir + "' } }");
  const ExperimentConfig c = load_experiment(path, {});
  BOOST_TEST(c.model.input == Shape({3, 32, 32}));
  BOOST_TEST(c.model.classes == 10);
  Model model(cpu_device(), c.model, 1);
  BOOST_TEST(model.param_count() == 11173962u);
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"model_args.depth=50"}); }), "must be 18 or 34");
  CHECK_CONTAINS(error_of([&] { load_experiment(path, {"data.on_device=always"}); }),
                 "cannot hold the cifar10 data set on the device");
  const std::string plain = tmp.write("p.lua", "return { model = 'resnet', data = { name = 'cifar10' } }");
  CHECK_CONTAINS(error_of([&] { load_experiment(plain, {}); }), "data/cifar-10-batches-bin");
}

BOOST_AUTO_TEST_SUITE_END()  // test_cifar10
