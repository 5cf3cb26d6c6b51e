// How a batch reaches the device (engine/train/device_input.hpp): the data set held
// on the device and gathered there by index (kernels/cpu/gather_rows.cpp on the CPU)
// against the data set's own gather, bit for bit; the choice data.on_device makes,
// and its errors; the batch loader and the evaluation through either way. The GPU's
// side of the same checks is tests/gpu/test_cuda_device.cpp.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/fashion_mnist.hpp"
#include "engine/data/sampler.hpp"
#include "engine/data/synthetic.hpp"
#include "engine/nn/model.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/device_input.hpp"
#include "engine/train/evaluate.hpp"
#include "kernels/cpu/gather_rows.hpp"
#include "tests/unit/byte_rows_dataset.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_device_input)  // ctest's unit.test_device_input (tests/CMakeLists.txt)

using namespace tandem;
using tandem::testing::ByteRowsDataset;
using tandem::testing::contains;
using tandem::testing::error_of;

namespace {

const std::string kFashionDir = "/usr/share/datasets/fashion-mnist";

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const std::vector<float> x = a.to_host(), y = b.to_host();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Every index once, shuffled, then repeats: a batch may hold a sample twice (a
// sampler's epoch boundary does).
std::vector<int64_t> some_indices(int64_t size, int64_t count) {
  std::vector<int64_t> idx(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) idx[static_cast<size_t>(i)] = (i * 37 + 11) % size;
  return idx;
}

// The batch `indices` gathered through a DeviceInput made with on_device.
void fill_with(const Dataset& data, const std::string& on_device, const std::vector<int64_t>& indices, Tensor& x,
               Tensor& labels, bool* resident = nullptr) {
  DeviceInput input(cpu_device(), data, on_device);
  if (resident) *resident = input.resident();
  input.fill(indices.data(), static_cast<int64_t>(indices.size()), x, labels);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gather_kernel_equals_the_data_sets_gather) {
  for (const int64_t targets : {1, 5}) {
    for (const Shape& shape : {Shape{1, 28, 28}, Shape{3}, Shape{7, 1}}) {
      const ByteRowsDataset data(50, shape, targets, 10);
      const auto idx = some_indices(data.size(), 70);
      const int64_t values = shape_numel(shape);
      std::vector<float> want_x(idx.size() * values), got_x(want_x.size(), -1.0f);
      std::vector<int32_t> want_l(idx.size() * targets), got_l(want_l.size(), -1);
      data.gather(idx.data(), static_cast<int64_t>(idx.size()), want_x.data(), want_l.data());
      cpu::gather_byte_rows(*data.byte_rows(), idx.data(), static_cast<int64_t>(idx.size()), got_x.data(),
                            got_l.data());
      BOOST_TEST(std::memcmp(want_x.data(), got_x.data(), want_x.size() * sizeof(float)) == 0);
      BOOST_TEST(want_l == got_l);
    }
  }
  const ByteRowsDataset data(5, {4}, 1, 3);
  float x[4];
  int32_t l;
  const int64_t bad = 5;
  BOOST_TEST(contains(error_of([&] { cpu::gather_byte_rows(*data.byte_rows(), &bad, 1, x, &l); }),
                      "sample index 5 outside [0, 5)"));
}

BOOST_AUTO_TEST_CASE(every_way_gives_the_same_batch) {
  const ByteRowsDataset data(40, {2, 3, 3}, 3, 7);
  for (const int64_t count : {0, 1, 17, 64}) {
    const auto idx = some_indices(data.size(), count);
    Tensor xa, la, xn, ln;
    bool resident_auto = false, resident_never = true;
    fill_with(data, "auto", idx, xa, la, &resident_auto);
    fill_with(data, "never", idx, xn, ln, &resident_never);
    BOOST_TEST(resident_auto);
    BOOST_TEST(!resident_never);
    BOOST_TEST(xa.shape() == (Shape{count, 2, 3, 3}));
    BOOST_TEST(same_bits(xa, xn));
    BOOST_TEST(same_bits(la, ln));
    BOOST_TEST(la.numel() == count * 3);
  }
}

BOOST_AUTO_TEST_CASE(text_windows_are_rows_too) {
  // A text's windows overlap (the training set's start every byte, the validation
  // set's every seq_len bytes) and their labels are the next bytes: strided rows.
  tandem::testing::TempDir tmp("device-input-text");
  std::string text(3000, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>((i * 131 + (i >> 8) * 7) & 0xff);
  tmp.write("corpus.txt", text);
  DataConfig cfg;
  cfg.name = "text";
  cfg.files = {tmp.path.string()};
  cfg.seq_len = 12;
  cfg.validation = 0.2;
  for (const bool train : {true, false}) {
    const auto data = make_dataset(cfg, train);
    BOOST_REQUIRE(data->byte_rows() != nullptr);
    const auto idx = some_indices(data->size(), 50);
    Tensor xa, la, xn, ln;
    bool resident = false;
    fill_with(*data, "auto", idx, xa, la, &resident);
    fill_with(*data, "never", idx, xn, ln);
    BOOST_TEST(resident);
    BOOST_TEST(same_bits(xa, xn));
    BOOST_TEST(same_bits(la, ln));
    BOOST_TEST(la.numel() == 50 * 12);
    // One copy holds windows and next tokens: the text from the first window's start
    // to the last one's next token.
    const DeviceInput held(cpu_device(), *data, "auto");
    const int64_t stride = train ? 1 : 12;
    BOOST_TEST(held.resident_bytes() == static_cast<size_t>((data->size() - 1) * stride + 12 + 1));
  }
}

BOOST_AUTO_TEST_CASE(on_device_choices_and_their_errors) {
  const auto synthetic = make_synthetic({1, 4, 4}, 3, 20, 1);
  // auto and never stage (here: gather directly) what has no rows; always refuses.
  BOOST_TEST(!DeviceInput(cpu_device(), *synthetic, "auto").resident());
  BOOST_TEST(!DeviceInput(cpu_device(), *synthetic, "never").resident());
  const std::string always = error_of([&] { DeviceInput(cpu_device(), *synthetic, "always"); });
  BOOST_TEST(contains(always, "cannot be held on the device"));
  BOOST_TEST(contains(always, "data.on_device = 'auto'"));
  const ByteRowsDataset data(10, {4}, 1, 3);
  BOOST_TEST(DeviceInput(cpu_device(), data, "always").resident());
  BOOST_TEST(contains(error_of([&] { DeviceInput(cpu_device(), data, "gpu"); }), "data.on_device = 'gpu' is not a choice"));
  BOOST_TEST(contains(DeviceInput(cpu_device(), data, "auto").describe(), "held on the device"));
  BOOST_TEST(DeviceInput(cpu_device(), data, "never").describe() == "gathered on the host");
}

BOOST_AUTO_TEST_CASE(a_bad_label_is_reported_either_way) {
  ByteRowsDataset data(10, {4}, 2, 3);
  data.spoil_label(13);  // sample 6's second label
  // Held on the device: the whole data set is checked when it is made resident.
  const std::string resident = error_of([&] { DeviceInput(cpu_device(), data, "auto"); });
  BOOST_TEST(contains(resident, "label 3 at position 13 of byte-rows is outside [0, 3)"));
  // Gathered per batch: checked when the batch holding it is drawn, not before.
  DeviceInput input(cpu_device(), data, "never");
  Tensor x, labels;
  const std::vector<int64_t> fine{0, 1, 2}, bad{5, 6};
  input.fill(fine.data(), 3, x, labels);
  BOOST_TEST(contains(error_of([&] { input.fill(bad.data(), 2, x, labels); }), "label 3 at position 3 of a batch"));
}

BOOST_AUTO_TEST_CASE(fashion_mnist_batches_and_evaluation_agree) {
  if (!std::filesystem::exists(kFashionDir)) {
    BOOST_TEST_MESSAGE("skipped: " << kFashionDir << " is missing (apt-get install dataset-fashion-mnist)");
    return;
  }
  const auto train = load_fashion_mnist(kFashionDir, true);
  const auto test = load_fashion_mnist(kFashionDir, false);
  BOOST_REQUIRE(train->byte_rows() != nullptr);
  GlobalSampler sampler(train->size(), 64, 3);
  BatchLoader held(*train, sampler, cpu_device(), "auto"), staged(*train, sampler, cpu_device(), "never");
  BOOST_TEST(held.input().resident());
  BOOST_TEST(held.input().resident_bytes() == 60000u * 785u);  // pixels and labels: two spans
  BOOST_TEST(!staged.input().resident());
  for (const int64_t t : {0, 1, 937, 938, 2000}) {  // across an epoch's end
    const Tensor& a = held.load(t, 5, 40);
    const Tensor& b = staged.load(t, 5, 40);
    BOOST_TEST(same_bits(a, b));
    BOOST_TEST(std::memcmp(held.labels(), staged.labels(), 40 * sizeof(int32_t)) == 0);
  }
  // The evaluation's sums, to the bit, whichever way its batches came.
  ModelSpec spec;
  spec.name = "probe";
  spec.input = {1, 28, 28};
  spec.classes = 10;
  LayerSpec flat, fc;
  flat.type = "flatten";
  fc.type = "linear";
  fc.args["out"] = 10;
  spec.layers = {flat, fc};
  Model model(cpu_device(), spec, 1);
  DeviceInput held_test(cpu_device(), *test, "auto"), staged_test(cpu_device(), *test, "never");
  const EvalSums a = evaluate_range(model, held_test, 256, 100, 1700);
  const EvalSums b = evaluate_range(model, staged_test, 256, 100, 1700);
  BOOST_TEST(a.loss_sum == b.loss_sum);
  BOOST_TEST(a.correct == b.correct);
  BOOST_TEST(a.count == 1600.0);
}

BOOST_AUTO_TEST_SUITE_END()  // test_device_input
