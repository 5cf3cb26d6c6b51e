// Finite-difference gradient checks for every layer and for the loss, plus the
// fused-op and shape behaviour each layer promises (DESIGN.md habit 2).
#include <boost/test/unit_test.hpp>

#include "engine/core/error.hpp"
#include "engine/nn/activation.hpp"
#include "engine/nn/conv2d.hpp"
#include "engine/nn/linear.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/maxpool2d.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/avgpool.hpp"
#include "engine/nn/batchnorm.hpp"
#include "engine/nn/residual.hpp"
#include "engine/nn/shape_ops.hpp"
#include "tests/unit/grad_check.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_layers)  // ctest's unit.test_layers (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

Device& dev() { return cpu_device(); }


// Checks dL/dx and dL/dparams of `layer` for input of per-sample shape `in`.
void check_layer(Layer& layer, const Shape& in, int batch, double tol, float input_scale = 1.0f,
                 float eps = 1e-2f) {
  std::vector<float> params(layer.param_count()), grads(layer.param_count());
  Rng rng(11);
  layer.bind(params.data(), grads.data());
  layer.init_params(rng);

  Tensor x(dev(), batched(batch, in));
  auto xv = random_vector(static_cast<size_t>(x.numel()), 3, input_scale);
  std::copy(xv.begin(), xv.end(), x.data());
  StepContext ctx;
  ctx.seed = 5;

  const Shape out_shape = batched(batch, layer.output_shape());
  const auto r = random_vector(static_cast<size_t>(shape_numel(out_shape)), 4);
  auto probe = [&]() { return dot(layer.forward(x, ctx).data(), r); };

  probe();
  Tensor dy(dev(), out_shape);
  std::copy(r.begin(), r.end(), dy.data());
  const Tensor& dx = layer.backward(dy, true, ctx);
  BOOST_REQUIRE(dx.defined());
  std::vector<float> dx_analytic(dx.data(), dx.data() + dx.numel());
  std::vector<float> dparams_analytic = grads;

  const auto dx_numeric = numeric_gradient(x.data(), static_cast<size_t>(x.numel()), probe, eps);
  BOOST_TEST(max_scaled_error(dx_analytic, dx_numeric) < tol, layer.describe() << ": input gradient");
  BOOST_TEST(dx_numeric.kinks() * 10 <= dx_analytic.size(), layer.describe() << ": too many kinks to check");
  if (!params.empty()) {
    const auto dp_numeric = numeric_gradient(params.data(), params.size(), probe, eps);
    BOOST_TEST(max_scaled_error(dparams_analytic, dp_numeric) < tol, layer.describe() << ": parameter gradient");
    BOOST_TEST(dp_numeric.kinks() * 10 <= params.size(), layer.describe() << ": too many kinks to check");
  }
}

}  // namespace

// A pass with StepContext::accumulate_grads adds its parameter gradients to those
// there (a step's micro-batches after the first: engine/train/step.hpp): two passes,
// the second accumulating, leave the sum of each pass's own gradients; an empty
// accumulating pass adds nothing.
void check_accumulates(Layer& layer, const Shape& in, int first, int second) {
  std::vector<float> params(layer.param_count()), grads(layer.param_count());
  Rng rng(11);
  layer.bind(params.data(), grads.data());
  layer.init_params(rng);
  auto pass = [&](int n, uint64_t seed, bool accumulate) {
    Tensor x(dev(), batched(n, in));
    const auto xv = random_vector(static_cast<size_t>(x.numel()), seed);
    std::copy(xv.begin(), xv.end(), x.data());
    StepContext ctx;
    ctx.accumulate_grads = accumulate;
    const Shape out_shape = batched(n, layer.output_shape());
    layer.forward(x, ctx);
    Tensor dy(dev(), out_shape);
    const auto r = random_vector(static_cast<size_t>(shape_numel(out_shape)), seed + 1);
    std::copy(r.begin(), r.end(), dy.data());
    layer.backward(dy, true, ctx);
    return grads;
  };
  const std::vector<float> ga = pass(first, 3, false), gb = pass(second, 5, false);
  pass(first, 3, false);
  const std::vector<float> sum = pass(second, 5, true);
  double scale = 1e-3, err = 0.0;
  for (size_t i = 0; i < sum.size(); ++i) {
    scale = std::max(scale, double(std::abs(ga[i] + gb[i])));
    err = std::max(err, double(std::abs(sum[i] - (ga[i] + gb[i]))));
  }
  BOOST_TEST(err / scale < 1e-6, layer.describe() << ": accumulated gradient");
  BOOST_TEST(pass(0, 7, true) == sum, layer.describe() << ": an empty pass adds nothing");
}

BOOST_AUTO_TEST_CASE(linear_gradients) {
  Linear layer(dev(), 7, 5, true, Activation::none);
  check_layer(layer, {7}, 4, 2e-3);
}

BOOST_AUTO_TEST_CASE(linear_without_bias_gradients) {
  Linear layer(dev(), 6, 3, false, Activation::none);
  check_layer(layer, {6}, 3, 2e-3);
  BOOST_TEST(layer.param_count() == 18u);
}

// A fused activation must equal the layer without it followed by a ReLU, exactly in
// forward and to rounding in backward. (A finite-difference check of the fused layer's
// weights is unreliable: one weight moves every output of its unit, so some output
// always crosses the kink; the parts are checked by finite differences on their own.)
template <typename MakeLayer>
void check_fused_equals_composition(MakeLayer make, const Shape& in, int batch) {
  auto fused = make(Activation::relu);
  auto plain = make(Activation::none);
  ReLU relu(dev(), fused->output_shape());
  std::vector<float> p(fused->param_count()), g_fused(p.size()), g_plain(p.size());
  Rng rng(21);
  fused->bind(p.data(), g_fused.data());
  fused->init_params(rng);
  plain->bind(p.data(), g_plain.data());
  Tensor x(dev(), batched(batch, in));
  auto xv = random_vector(static_cast<size_t>(x.numel()), 22);
  std::copy(xv.begin(), xv.end(), x.data());
  StepContext ctx;
  auto y_fused = fused->forward(x, ctx).to_host();
  auto y_plain = relu.forward(plain->forward(x, ctx), ctx).to_host();
  BOOST_TEST(y_fused == y_plain, boost::test_tools::per_element());
  const Shape out = batched(batch, fused->output_shape());
  const auto r = random_vector(static_cast<size_t>(shape_numel(out)), 23);
  Tensor dy1(dev(), out), dy2(dev(), out);
  std::copy(r.begin(), r.end(), dy1.data());
  std::copy(r.begin(), r.end(), dy2.data());
  auto dx_fused = fused->backward(dy1, true, ctx).to_host();
  auto dx_plain = plain->backward(relu.backward(dy2, true, ctx), true, ctx).to_host();
  for (size_t i = 0; i < dx_fused.size(); ++i) BOOST_TEST(dx_fused[i] == dx_plain[i], boost::test_tools::tolerance(1e-5f));
  for (size_t i = 0; i < p.size(); ++i) BOOST_TEST(g_fused[i] == g_plain[i], boost::test_tools::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(linear_fused_relu_equals_linear_then_relu) {
  check_fused_equals_composition(
      [](Activation a) { return std::make_unique<Linear>(dev(), 8, 6, true, a); }, {8}, 5);
}

BOOST_AUTO_TEST_CASE(relu_gradients) {
  ReLU layer(dev(), {3, 4});
  check_layer(layer, {3, 4}, 2, 5e-3, 1.0f, 1e-3f);
}

BOOST_AUTO_TEST_CASE(conv2d_gradients) {
  Conv2d layer(dev(), {2, 6, 5}, 3, 3, 1, 1, true, Activation::none);
  check_layer(layer, {2, 6, 5}, 2, 2e-3);
  BOOST_TEST(layer.output_shape() == (Shape{3, 6, 5}));
}

BOOST_AUTO_TEST_CASE(conv2d_strided_gradients) {
  Conv2d layer(dev(), {3, 7, 7}, 4, 3, 2, 0, true, Activation::none);
  BOOST_TEST(layer.output_shape() == (Shape{4, 3, 3}));
  check_layer(layer, {3, 7, 7}, 2, 2e-3);
}

BOOST_AUTO_TEST_CASE(conv2d_fused_relu_equals_conv_then_relu) {
  check_fused_equals_composition(
      [](Activation a) { return std::make_unique<Conv2d>(dev(), Shape{3, 7, 7}, 4, 3, 2, 1, true, a); }, {3, 7, 7},
      2);
}

BOOST_AUTO_TEST_CASE(maxpool2d_gradients) {
  MaxPool2d layer(dev(), {2, 4, 6}, 2, 2);
  BOOST_TEST(layer.output_shape() == (Shape{2, 2, 3}));
  check_layer(layer, {2, 4, 6}, 2, 5e-3, 1.0f, 1e-3f);
}

BOOST_AUTO_TEST_CASE(maxpool2d_overlapping_gradients) {
  MaxPool2d layer(dev(), {1, 5, 5}, 3, 1);
  check_layer(layer, {1, 5, 5}, 2, 5e-3, 1.0f, 1e-3f);
}

BOOST_AUTO_TEST_CASE(batchnorm_gradients) {
  BatchNorm conv_bn(dev(), {3, 4, 5}, 1e-5f, 0.1f, true);
  check_layer(conv_bn, {3, 4, 5}, 3, 2e-3);
  BatchNorm feature_bn(dev(), {6}, 1e-5f, 0.1f, true);
  check_layer(feature_bn, {6}, 5, 2e-3);
}

BOOST_AUTO_TEST_CASE(batchnorm_normalises_and_keeps_running_statistics) {
  BatchNorm bn(dev(), {2, 3, 3}, 1e-5f, 0.5f, true);
  std::vector<float> params(bn.param_count()), grads(bn.param_count());
  Rng rng(1);
  bn.bind(params.data(), grads.data());
  bn.init_params(rng);
  Tensor x(dev(), {4, 2, 3, 3});
  auto xv = random_vector(static_cast<size_t>(x.numel()), 9, 3.0f);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] += (i / 9) % 2 ? 5.0f : -2.0f;  // channel 1 around 5, 0 around -2
  std::copy(xv.begin(), xv.end(), x.data());
  StepContext train;
  const Tensor& y = bn.forward(x, train);
  for (int c = 0; c < 2; ++c) {  // each channel: mean 0, variance 1 over batch and space
    double s = 0, q = 0;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 9; ++i) {
        const double v = y.data()[(n * 2 + c) * 9 + i];
        s += v;
        q += v * v;
      }
    BOOST_TEST(std::abs(s / 36) < 1e-5);
    BOOST_TEST(std::abs(q / 36 - 1.0) < 1e-3);
  }
  // Momentum 0.5 from (0, 1): halfway to the batch mean and unbiased variance.
  BOOST_TEST(std::abs(bn.running_mean()[1] - 0.5 * 5.0) < 0.6);
  BOOST_TEST(bn.running_var()[0] > 1.0);
  StepContext eval;
  eval.training = false;
  const std::vector<double> before = bn.running_mean();
  bn.forward(x, eval);  // evaluation uses the running statistics and leaves them
  BOOST_TEST(bn.running_mean() == before, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(avgpool_gradients) {
  GlobalAvgPool layer(dev(), {3, 4, 5});
  check_layer(layer, {3, 4, 5}, 2, 1e-3);
}

BOOST_AUTO_TEST_CASE(residual_gradients) {
  // Identity shortcut: body conv(3x3, pad 1) + batch norm keeps the shape.
  LayerList body;
  body.push_back(std::make_unique<Conv2d>(dev(), Shape{2, 5, 5}, 2, 3, 1, 1, false, Activation::relu));
  body.push_back(std::make_unique<Conv2d>(dev(), Shape{2, 5, 5}, 2, 3, 1, 1, false, Activation::none));
  body.push_back(std::make_unique<BatchNorm>(dev(), Shape{2, 5, 5}, 1e-5f, 0.1f, true));
  Residual identity(dev(), {2, 5, 5}, std::move(body), {});
  check_layer(identity, {2, 5, 5}, 3, 5e-3, 1.0f, 1e-3f);
  // Projection shortcut: the body halves the size and doubles the channels.
  LayerList down, shortcut;
  down.push_back(std::make_unique<Conv2d>(dev(), Shape{2, 6, 6}, 4, 3, 2, 1, true, Activation::none));
  shortcut.push_back(std::make_unique<Conv2d>(dev(), Shape{2, 6, 6}, 4, 1, 2, 0, true, Activation::none));
  Residual projection(dev(), {2, 6, 6}, std::move(down), std::move(shortcut));
  BOOST_TEST(projection.output_shape() == (Shape{4, 3, 3}), boost::test_tools::per_element());
  check_layer(projection, {2, 6, 6}, 2, 5e-3, 1.0f, 1e-3f);
}

BOOST_AUTO_TEST_CASE(residual_shapes_must_match) {
  LayerList body;
  body.push_back(std::make_unique<Conv2d>(dev(), Shape{2, 6, 6}, 4, 3, 2, 1, true, Activation::none));
  const std::string msg = error_of([&] { Residual r(dev(), {2, 6, 6}, std::move(body), {}); });
  CHECK_CONTAINS(msg, "the body gives [4,3,3] but the identity shortcut gives [2,6,6]");
}

BOOST_AUTO_TEST_CASE(flatten_gradients) {
  Flatten layer(dev(), {2, 3, 4});
  BOOST_TEST(layer.output_shape() == (Shape{24}));
  check_layer(layer, {2, 3, 4}, 3, 1e-3);
}

BOOST_AUTO_TEST_CASE(dropout_gradients) {
  Dropout layer(dev(), {10}, 0.3f, 1);
  check_layer(layer, {10}, 4, 1e-3);
}

BOOST_AUTO_TEST_CASE(dropout_mask_depends_on_global_position_not_split) {
  Dropout layer(dev(), {16}, 0.5f, 1);
  Tensor x(dev(), {8, 16});
  x.fill(1.0f);
  StepContext whole;
  whole.seed = 9;
  auto all = layer.forward(x, whole).to_host();
  // The same rows processed as a slice starting at global position 3.
  Tensor part(dev(), {2, 16});
  part.fill(1.0f);
  StepContext slice = whole;
  slice.first_sample = 3;
  auto sub = layer.forward(part, slice).to_host();
  for (int i = 0; i < 32; ++i) BOOST_TEST(sub[i] == all[3 * 16 + i]);
  int kept = 0;
  for (float v : all) kept += v != 0.0f;
  BOOST_TEST(kept > 32);
  BOOST_TEST(kept < 96);
  for (float v : all) BOOST_TEST((v == 0.0f || v == 2.0f));
}

BOOST_AUTO_TEST_CASE(dropout_is_identity_in_evaluation) {
  Dropout layer(dev(), {4}, 0.5f, 1);
  Tensor x(dev(), {2, 4});
  x.fill(3.0f);
  StepContext ctx;
  ctx.training = false;
  for (float v : layer.forward(x, ctx).to_host()) BOOST_TEST(v == 3.0f);
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_gradient_and_sum_reduction) {
  const int rows = 4, classes = 5;
  Tensor logits(dev(), {rows, classes});
  auto lv = random_vector(rows * classes, 8, 3.0f);
  std::copy(lv.begin(), lv.end(), logits.data());
  std::vector<int32_t> labels{0, 3, 4, 1};
  SoftmaxCrossEntropy loss;
  const LossResult r = loss.forward(logits, labels.data(), true);
  std::vector<float> analytic = loss.grad().to_host();
  auto f = [&]() { return loss.forward(logits, labels.data(), false).loss_sum; };
  auto numeric = numeric_gradient(logits.data(), lv.size(), f, 1e-3f);
  BOOST_TEST(max_scaled_error(analytic, numeric) < 2e-3);
  BOOST_TEST(numeric.kinks() == 0u);  // the loss is smooth everywhere
  // SUM reduction: the loss of the batch is the sum of per-row losses.
  double sum = 0.0;
  for (int i = 0; i < rows; ++i) {
    Tensor one = Tensor::view_of(dev(), logits.data() + i * classes, {1, classes});
    SoftmaxCrossEntropy l1;
    sum += l1.forward(one, &labels[i], false).loss_sum;
  }
  BOOST_TEST(r.loss_sum == sum, boost::test_tools::tolerance(1e-9));
  // Into device totals: the rows one by one, added there, give the batch's sums (the
  // micro-batches of a step and the batches of an evaluation add up so), and a pass
  // without `accumulate` starts them over.
  LossTotals totals;
  SoftmaxCrossEntropy each;
  for (int i = 0; i < rows; ++i) {
    Tensor one = Tensor::view_of(dev(), logits.data() + i * classes, {1, classes});
    each.forward(one, &labels[i], false, totals, /*accumulate=*/i > 0);
  }
  const LossResult added = totals.read();
  BOOST_TEST(added.loss_sum == sum, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(added.correct == r.correct);
  each.forward(logits, labels.data(), true, totals, false);
  BOOST_TEST(totals.read().loss_sum == r.loss_sum);
  BOOST_TEST(LossTotals().read().loss_sum == 0.0);  // never written: zeros
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_is_stable_for_large_logits) {
  Tensor logits(dev(), {1, 3});
  const float big[3] = {1000.0f, -1000.0f, 999.0f};
  std::copy(big, big + 3, logits.data());
  int32_t label = 2;
  SoftmaxCrossEntropy loss;
  const LossResult r = loss.forward(logits, &label, true);
  BOOST_TEST(std::isfinite(r.loss_sum));
  BOOST_TEST(r.loss_sum == std::log(1.0 + std::exp(1.0) + std::exp(-1999.0)), boost::test_tools::tolerance(1e-5));
  BOOST_TEST(r.correct == 0);
}

BOOST_AUTO_TEST_CASE(whole_model_gradient_through_every_layer_type) {
  ModelSpec spec;
  spec.name = "tiny-lenet";
  spec.input = {1, 8, 8};
  spec.classes = 3;
  spec.layers = {{"conv2d", {{"out_channels", 2}, {"kernel", 3}, {"padding", 1}}, "t:1"},
                 {"relu", {}, "t:2"},
                 {"maxpool2d", {{"kernel", 2}}, "t:3"},
                 {"flatten", {}, "t:4"},
                 {"linear", {{"out", 6}}, "t:5"},
                 {"relu", {}, "t:6"},
                 {"linear", {{"out", 3}}, "t:7"}};
  Model model(dev(), spec, 3);
  Tensor x(dev(), {3, 1, 8, 8});
  auto xv = random_vector(static_cast<size_t>(x.numel()), 12);
  std::copy(xv.begin(), xv.end(), x.data());
  std::vector<int32_t> labels{0, 2, 1};
  StepContext ctx;
  SoftmaxCrossEntropy loss;
  loss.forward(model.forward(x, ctx), labels.data(), true);
  model.backward(loss.grad(), ctx);
  std::vector<float> analytic = model.grads().to_host();
  auto f = [&]() {
    SoftmaxCrossEntropy l;
    return l.forward(model.forward(x, ctx), labels.data(), false).loss_sum;
  };
  auto numeric = numeric_gradient(model.params().data(), model.param_count(), f, 1e-3f);
  BOOST_TEST(max_scaled_error(analytic, numeric) < 1e-2);
  BOOST_TEST(numeric.kinks() * 10 <= analytic.size());
}

BOOST_AUTO_TEST_CASE(zero_batch_gives_zero_gradients) {
  ModelSpec spec;
  spec.name = "mlp";
  spec.input = {4};
  spec.classes = 2;
  spec.layers = {{"linear", {{"out", 3}}, "t:1"}, {"relu", {}, "t:2"}, {"linear", {{"out", 2}}, "t:3"}};
  Model model(dev(), spec, 1);
  model.grads().fill(7.0f);
  Tensor x(dev(), {0, 4});
  StepContext ctx;
  SoftmaxCrossEntropy loss;
  const LossResult r = loss.forward(model.forward(x, ctx), nullptr, true);
  BOOST_TEST(r.loss_sum == 0.0);
  model.backward(loss.grad(), ctx);
  for (float g : model.grads().to_host()) BOOST_TEST(g == 0.0f);
}

BOOST_AUTO_TEST_CASE(model_errors_name_the_layer) {
  ModelSpec spec;
  spec.name = "bad";
  spec.input = {1, 4, 4};
  spec.classes = 2;
  spec.layers = {{"flatten", {}, "models/bad.lua:3", {}, {}},
                 {"linear", {{"out", 2}, {"in", 10}}, "models/bad.lua:4", {}, {}}};
  try {
    Model model(dev(), spec, 1);
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("models/bad.lua:4") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("in=10") != std::string::npos);
  }
  spec.layers = {{"wobble", {}, "models/bad.lua:7"}};
  BOOST_CHECK_EXCEPTION(Model(dev(), spec, 1), Error, [](const Error& e) {
    return std::string(e.what()).find("unknown layer type 'wobble' at models/bad.lua:7") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(accumulating_passes_add_their_gradients) {
  Linear linear(dev(), 6, 4, true, Activation::relu);
  check_accumulates(linear, {6}, 3, 5);
  Conv2d conv(dev(), {2, 5, 5}, 3, 3, 1, 1, true, Activation::relu);
  check_accumulates(conv, {2, 5, 5}, 2, 3);
  BatchNorm norm(dev(), {3, 4, 4}, 1e-5f, 0.1f, true);
  check_accumulates(norm, {3, 4, 4}, 2, 3);
}

BOOST_AUTO_TEST_SUITE_END()  // test_layers
