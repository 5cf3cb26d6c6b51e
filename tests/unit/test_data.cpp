// The data sets: the Fashion-MNIST reader against the installed files (sizes, labels,
// the normalisation), its errors for missing and damaged files, and the synthetic
// data set's determinism and learnability.
#include <boost/test/unit_test.hpp>

#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/fashion_mnist.hpp"
#include "engine/data/idx_reader.hpp"
#include "engine/data/inflated_cache.hpp"
#include "engine/data/synthetic.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_data)  // ctest's unit.test_data (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
namespace fs = std::filesystem;

namespace {

const std::string kDir = "/usr/share/datasets/fashion-mnist";

uint8_t be_byte(uint32_t v, int i) { return static_cast<uint8_t>(v >> (24 - 8 * i)); }

// An IDX file: header (magic, dims) followed by payload, gzip-compressed.
void write_idx_gz(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
                  const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> bytes;
  for (uint32_t word : [&] {
         std::vector<uint32_t> w{magic};
         w.insert(w.end(), dims.begin(), dims.end());
         return w;
       }())
    for (int i = 0; i < 4; ++i) bytes.push_back(be_byte(word, i));
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  gzFile f = gzopen(path.c_str(), "wb");
  BOOST_REQUIRE(f != nullptr);
  if (!bytes.empty()) BOOST_REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
  BOOST_REQUIRE(gzclose(f) == Z_OK);
}

std::vector<char> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_raw(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Gathers a whole data set in chunks (all 60,000 images at once would be 188 MB).
template <typename Visit>
void for_each_chunk(const Dataset& d, Visit visit) {
  const int64_t chunk = 1000, numel = shape_numel(d.sample_shape());
  std::vector<int64_t> idx(chunk);
  std::vector<float> x(static_cast<size_t>(chunk * numel));
  std::vector<int32_t> labels(chunk);
  for (int64_t start = 0; start < d.size(); start += chunk) {
    const int64_t n = std::min(chunk, d.size() - start);
    std::iota(idx.begin(), idx.begin() + n, start);
    d.gather(idx.data(), n, x.data(), labels.data());
    visit(n, x.data(), labels.data());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fashion_mnist)

BOOST_AUTO_TEST_CASE(sizes_shape_and_classes) {
  auto train = load_fashion_mnist(kDir, true);
  auto test = load_fashion_mnist(kDir, false);
  BOOST_TEST(train->size() == 60000);
  BOOST_TEST(test->size() == 10000);
  for (const auto* d : {train.get(), test.get()}) {
    BOOST_TEST(d->sample_shape() == (Shape{1, 28, 28}), d->name());
    BOOST_TEST(d->classes() == 10);
  }
}

BOOST_AUTO_TEST_CASE(labels_in_range_and_balanced) {
  for (bool train : {true, false}) {
    auto d = load_fashion_mnist(kDir, train);
    std::vector<int64_t> per_class(10, 0);
    for_each_chunk(*d, [&](int64_t n, const float*, const int32_t* labels) {
      for (int64_t i = 0; i < n; ++i) {
        BOOST_REQUIRE(labels[i] >= 0 && labels[i] < 10);
        ++per_class[static_cast<size_t>(labels[i])];
      }
    });
    for (int c = 0; c < 10; ++c) BOOST_TEST(per_class[c] == (train ? 6000 : 1000), "class " << c);
  }
}

// The normalisation constants are the training set's mean and std: normalised training
// pixels have mean ~0 and std ~1.
BOOST_AUTO_TEST_CASE(normalised_train_pixels_are_centred) {
  auto d = load_fashion_mnist(kDir, true);
  const int64_t numel = shape_numel(d->sample_shape());
  double sum = 0.0, sum_sq = 0.0, lo = 1e9, hi = -1e9;
  for_each_chunk(*d, [&](int64_t n, const float* x, const int32_t*) {
    for (int64_t i = 0; i < n * numel; ++i) {
      sum += x[i];
      sum_sq += double(x[i]) * x[i];
      lo = std::min(lo, double(x[i]));
      hi = std::max(hi, double(x[i]));
    }
  });
  const double count = double(d->size()) * double(numel);
  const double mean = sum / count, std = std::sqrt(sum_sq / count - mean * mean);
  BOOST_TEST(std::abs(mean) < 0.01, "mean " << mean);
  BOOST_TEST(std::abs(std - 1.0) < 0.01, "std " << std);
  // Byte 0 and byte 255 both occur, mapped through the same affine normalisation.
  BOOST_TEST(std::abs(lo - (0.0 - kFashionMnistMean) / kFashionMnistStd) < 1e-5);
  BOOST_TEST(std::abs(hi - (1.0 - kFashionMnistMean) / kFashionMnistStd) < 1e-5);
}

BOOST_AUTO_TEST_CASE(gather_follows_index_order) {
  auto d = load_fashion_mnist(kDir, false);
  const int64_t numel = 28 * 28;
  const std::vector<int64_t> fwd = {3, 9999, 0}, rev = {0, 9999, 3};
  std::vector<float> a(3 * numel), b(3 * numel);
  std::vector<int32_t> la(3), lb(3);
  d->gather(fwd.data(), 3, a.data(), la.data());
  d->gather(rev.data(), 3, b.data(), lb.data());
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(la[i] == lb[2 - i]);
    BOOST_TEST(std::equal(a.begin() + i * numel, a.begin() + (i + 1) * numel, b.begin() + (2 - i) * numel));
  }
  const int64_t bad = 10000;
  const std::string msg = error_of([&] { d->gather(&bad, 1, a.data(), la.data()); });
  BOOST_TEST(contains(msg, "10000"), msg);
}

BOOST_AUTO_TEST_CASE(missing_dir_names_path_and_package) {
  const std::string dir = "/nonexistent/tandem-fashion";
  const std::string msg = error_of([&] { load_fashion_mnist(dir, true); });
  BOOST_TEST(contains(msg, dir + "/train-images-idx3-ubyte.gz"), msg);
  BOOST_TEST(contains(msg, "apt-get install dataset-fashion-mnist"), msg);
  BOOST_TEST(contains(msg, "data.dir"), msg);
  // Through the factory too, which is what a user's experiment reaches.
  DataConfig cfg;
  cfg.dir = dir;
  const std::string via_factory = error_of([&] { make_dataset(cfg, false); });
  BOOST_TEST(contains(via_factory, dir + "/t10k-images-idx3-ubyte.gz"), via_factory);
}

BOOST_AUTO_TEST_CASE(truncated_gzip_is_reported) {
  TempDir tmp("data");
  std::vector<char> gz = read_raw(kDir + "/t10k-labels-idx1-ubyte.gz");
  BOOST_REQUIRE(gz.size() > 1000);
  gz.resize(gz.size() / 2);
  const std::string path = tmp.file("labels-truncated.gz");
  write_raw(path, gz);
  const std::string msg = error_of([&] { read_idx_gz(path, 1, "dataset-fashion-mnist"); });
  BOOST_TEST(contains(msg, path), msg);
  BOOST_TEST(contains(msg, "truncated"), msg);
}

BOOST_AUTO_TEST_CASE(corrupt_gzip_is_reported) {
  TempDir tmp("data");
  std::vector<char> gz = read_raw(kDir + "/t10k-labels-idx1-ubyte.gz");
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  const std::string path = tmp.file("labels-corrupt.gz");
  write_raw(path, gz);
  const std::string msg = error_of([&] { read_idx_gz(path, 1, "dataset-fashion-mnist"); });
  BOOST_TEST(contains(msg, path), msg);
  BOOST_TEST(contains(msg, "corrupt"), msg);
}

BOOST_AUTO_TEST_CASE(bad_idx_contents_are_reported) {
  TempDir tmp("data");
  // Wrong magic: a labels file where images are expected.
  const std::string magic_path = tmp.file("wrong-magic.gz");
  write_idx_gz(magic_path, 2049, {4}, {1, 2, 3, 4});
  std::string msg = error_of([&] { read_idx_gz(magic_path, 3, "dataset-fashion-mnist"); });
  BOOST_TEST(contains(msg, magic_path), msg);
  BOOST_TEST(contains(msg, "magic 2049"), msg);
  BOOST_TEST(contains(msg, "expected 2051"), msg);

  // Data shorter than the header announces (a valid gzip stream of a short file).
  const std::string short_path = tmp.file("short.gz");
  write_idx_gz(short_path, 2049, {10}, {1, 2, 3, 4, 5});
  msg = error_of([&] { read_idx_gz(short_path, 1, "dataset-fashion-mnist"); });
  BOOST_TEST(contains(msg, short_path), msg);
  BOOST_TEST(contains(msg, "5 data bytes"), msg);
  BOOST_TEST(contains(msg, "says 10"), msg);

  // Not even a header.
  const std::string empty_path = tmp.file("two-bytes.gz");
  {
    gzFile f = gzopen(empty_path.c_str(), "wb");
    BOOST_REQUIRE(f != nullptr);
    BOOST_REQUIRE(gzwrite(f, "\0\0", 2) == 2);
    BOOST_REQUIRE(gzclose(f) == Z_OK);
  }
  msg = error_of([&] { read_idx_gz(empty_path, 1, "dataset-fashion-mnist"); });
  BOOST_TEST(contains(msg, empty_path), msg);
  BOOST_TEST(contains(msg, "too short"), msg);

  // A good file reads back as written.
  const std::string good_path = tmp.file("good.gz");
  write_idx_gz(good_path, 2051, {2, 1, 3}, {0, 1, 2, 3, 4, 255});
  IdxArray a = read_idx_gz(good_path, 3, "dataset-fashion-mnist");
  BOOST_TEST(a.dims == (std::vector<uint32_t>{2, 1, 3}));
  BOOST_TEST(std::vector<uint8_t>(a.bytes.data, a.bytes.data + a.bytes.size) == (std::vector<uint8_t>{0, 1, 2, 3, 4, 255}));
}

// The inflated cache (engine/data/inflated_cache.hpp): a second read is served from
// the cache file, a changed source is inflated again, a damaged cache file is passed
// over, and TANDEM_CACHE_DIR=off writes nothing.
BOOST_AUTO_TEST_CASE(inflated_copies_are_cached_and_kept_current) {
  TempDir tmp("data");
  const std::string cache = tmp.file("cache");
  struct Restore {
    const char* was = std::getenv("TANDEM_CACHE_DIR");
    std::string value = was ? was : "";
    ~Restore() { was ? ::setenv("TANDEM_CACHE_DIR", value.c_str(), 1) : ::unsetenv("TANDEM_CACHE_DIR"); }
  } restore;
  ::setenv("TANDEM_CACHE_DIR", cache.c_str(), 1);
  BOOST_TEST(inflated_cache_dir() == cache + "/inflated");
  auto entries = [&] {
    std::vector<fs::path> out;
    if (fs::exists(cache + "/inflated"))
      for (const auto& e : fs::directory_iterator(cache + "/inflated")) out.push_back(e.path());
    return out;
  };
  // 2 MiB of images: large enough to be cached.
  std::vector<uint8_t> payload(2048 * 32 * 32);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::string path = tmp.file("images.gz");
  write_idx_gz(path, 2051, {2048, 32, 32}, payload);
  auto read = [&] {
    IdxArray a = read_idx_gz(path, 3, "dataset-fashion-mnist");
    return std::vector<uint8_t>(a.bytes.data, a.bytes.data + a.bytes.size);
  };
  BOOST_TEST(read() == payload);
  auto files = entries();
  BOOST_REQUIRE_EQUAL(files.size(), 1u);
  BOOST_TEST(fs::file_size(files[0]) == payload.size() + 16);

  // The second read maps the cache file: a byte changed there shows.
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);
    f.put(static_cast<char>(payload[0] ^ 0xff));
  }
  std::vector<uint8_t> served = read();
  BOOST_REQUIRE_EQUAL(served.size(), payload.size());
  BOOST_TEST(served[0] == (payload[0] ^ 0xff));

  // A new source (its modification time changes) is inflated again, and its stale
  // copy leaves the cache.
  payload[5] = 99;
  ::usleep(20000);
  write_idx_gz(path, 2051, {2048, 32, 32}, payload);
  BOOST_TEST(read() == payload);
  files = entries();
  BOOST_REQUIRE_EQUAL(files.size(), 1u);

  // A damaged (truncated) cache file is passed over: the source is inflated again.
  fs::resize_file(files[0], 100);
  BOOST_TEST(read() == payload);
  BOOST_TEST(fs::file_size(entries().at(0)) == payload.size() + 16);

  // Small files are not cached; TANDEM_CACHE_DIR=off caches nothing.
  const std::string small = tmp.file("small.gz");
  write_idx_gz(small, 2049, {3}, {1, 2, 3});
  BOOST_TEST(read_idx_gz(small, 1, "dataset-fashion-mnist").bytes.size == 3u);
  BOOST_TEST(entries().size() == 1u);
  ::setenv("TANDEM_CACHE_DIR", "off", 1);
  BOOST_TEST(inflated_cache_dir() == "");
  fs::remove_all(cache);
  BOOST_TEST(read() == payload);
  BOOST_TEST(!fs::exists(cache));
}

BOOST_AUTO_TEST_CASE(inconsistent_pair_is_reported) {
  TempDir tmp("data");
  const std::vector<uint8_t> two_images(2 * 28 * 28, 7);
  write_idx_gz(tmp.file("train-images-idx3-ubyte.gz"), 2051, {2, 28, 28}, two_images);

  // Three labels for two images.
  write_idx_gz(tmp.file("train-labels-idx1-ubyte.gz"), 2049, {3}, {0, 1, 2});
  std::string msg = error_of([&] { load_fashion_mnist(tmp.path.string(), true); });
  BOOST_TEST(contains(msg, "2 images"), msg);
  BOOST_TEST(contains(msg, "3 labels"), msg);

  // A label outside 0..9.
  write_idx_gz(tmp.file("train-labels-idx1-ubyte.gz"), 2049, {2}, {4, 10});
  msg = error_of([&] { load_fashion_mnist(tmp.path.string(), true); });
  BOOST_TEST(contains(msg, "label 10"), msg);
  BOOST_TEST(contains(msg, "train-labels-idx1-ubyte.gz"), msg);

  // Consistent: loads, and byte 7 normalises as the constants say.
  write_idx_gz(tmp.file("train-labels-idx1-ubyte.gz"), 2049, {2}, {4, 9});
  auto d = load_fashion_mnist(tmp.path.string(), true);
  BOOST_TEST(d->size() == 2);
  const int64_t idx = 1;
  std::vector<float> x(28 * 28);
  int32_t label = -1;
  d->gather(&idx, 1, x.data(), &label);
  BOOST_TEST(label == 9);
  BOOST_TEST(std::abs(x[0] - (7.0f / 255.0f - kFashionMnistMean) / kFashionMnistStd) < 1e-6f);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(synthetic)

BOOST_AUTO_TEST_CASE(shape_and_determinism) {
  const Shape shape = {3, 5, 7};
  const int64_t numel = shape_numel(shape);
  auto a = make_synthetic(shape, 4, 1000, 42);
  auto b = make_synthetic(shape, 4, 1000, 42);
  BOOST_TEST(a->sample_shape() == shape);
  BOOST_TEST(a->classes() == 4);
  BOOST_TEST(a->size() == 1000);

  const std::vector<int64_t> idx = {17, 999, 0, 17};
  std::vector<float> xa(idx.size() * numel), xb(idx.size() * numel);
  std::vector<int32_t> la(idx.size()), lb(idx.size());
  a->gather(idx.data(), 4, xa.data(), la.data());
  b->gather(idx.data(), 4, xb.data(), lb.data());
  BOOST_TEST(xa == xb);
  BOOST_TEST(la == lb);
  // The same index gives the same sample wherever it sits in a batch.
  BOOST_TEST(std::equal(xa.begin(), xa.begin() + numel, xa.begin() + 3 * numel));
  for (int32_t l : la) BOOST_TEST((l >= 0 && l < 4));

  // Another seed: other data.
  auto c = make_synthetic(shape, 4, 1000, 43);
  std::vector<float> xc(idx.size() * numel);
  std::vector<int32_t> lc(idx.size());
  c->gather(idx.data(), 4, xc.data(), lc.data());
  BOOST_TEST(xa != xc);

  const int64_t bad = 1000;
  const std::string msg = error_of([&] { a->gather(&bad, 1, xa.data(), la.data()); });
  BOOST_TEST(contains(msg, "1000"), msg);
}

// Learnable: class means of the training split and of the test split (other samples,
// same prototypes) agree, and differ between classes.
BOOST_AUTO_TEST_CASE(train_and_test_share_classes) {
  const Shape shape = {64};
  const int classes = 3;
  auto train = make_synthetic(shape, classes, 3000, 5, 0);
  auto test = make_synthetic(shape, classes, 3000, 5, 1);
  auto class_means = [&](const Dataset& d) {
    std::vector<std::vector<double>> m(classes, std::vector<double>(64, 0.0));
    std::vector<int64_t> n(classes, 0);
    for_each_chunk(d, [&](int64_t count, const float* x, const int32_t* labels) {
      for (int64_t i = 0; i < count; ++i) {
        ++n[labels[i]];
        for (int p = 0; p < 64; ++p) m[labels[i]][p] += x[i * 64 + p];
      }
    });
    for (int c = 0; c < classes; ++c) {
      BOOST_TEST(n[c] > 800, "class " << c << " has " << n[c] << " samples");  // labels spread over classes
      for (double& v : m[c]) v /= double(n[c]);
    }
    return m;
  };
  auto dist = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0.0;
    for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(s);
  };
  const auto mtr = class_means(*train), mte = class_means(*test);
  for (int c = 0; c < classes; ++c)
    for (int k = 0; k < classes; ++k) {
      const double d = dist(mtr[c], mte[k]);
      if (c == k) BOOST_TEST(d < 1.0, "class " << c << ": train and test means " << d << " apart");
      else BOOST_TEST(d > 5.0, "classes " << c << " and " << k << ": means only " << d << " apart");
    }
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  BOOST_TEST(contains(error_of([] { make_synthetic({4}, 1, 10, 1); }), "classes"));
  BOOST_TEST(contains(error_of([] { make_synthetic({4}, 3, 0, 1); }), "size"));
  BOOST_TEST(contains(error_of([] { make_synthetic({0, 4}, 3, 10, 1); }), "shape"));
  BOOST_TEST(contains(error_of([] { make_synthetic({-2, -4}, 3, 10, 1); }), "shape"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(factory_chooses_and_rejects) {
  DataConfig cfg;
  cfg.name = "synthetic";
  cfg.shape = {2, 3};
  cfg.classes = 5;
  cfg.train_size = 100;
  cfg.test_size = 20;
  auto train = make_dataset(cfg, true);
  auto test = make_dataset(cfg, false);
  BOOST_TEST(train->size() == 100);
  BOOST_TEST(test->size() == 20);
  BOOST_TEST(train->sample_shape() == (Shape{2, 3}));
  BOOST_TEST(test->classes() == 5);
  // The test split draws other samples than the training split.
  std::vector<float> a(6), b(6);
  int32_t la, lb;
  const int64_t i = 0;
  train->gather(&i, 1, a.data(), &la);
  test->gather(&i, 1, b.data(), &lb);
  BOOST_TEST(a != b);

  cfg.name = "imagenet";
  const std::string msg = error_of([&] { make_dataset(cfg, true); });
  BOOST_TEST(contains(msg, "imagenet"), msg);
  BOOST_TEST(contains(msg, "fashion-mnist"), msg);
  BOOST_TEST(contains(msg, "synthetic"), msg);
}

BOOST_AUTO_TEST_SUITE_END()  // test_data
