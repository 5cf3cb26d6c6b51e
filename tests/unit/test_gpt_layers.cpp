// The GPT layers (engine/nn/embedding, layernorm, transformer_block, lm_head) and a
// whole tiny GPT: finite-difference gradients (DESIGN.md habit 2), the block's
// forward against a naive double-precision reference of GPT-2's block (the layout a
// PyTorch replay relies on), causality, weight tying, split invariance with dropout,
// AdamW's parameter groups, and the builder's checks.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "engine/core/error.hpp"
#include "engine/nn/embedding.hpp"
#include "engine/nn/layernorm.hpp"
#include "engine/nn/lm_head.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/transformer_block.hpp"
#include "tests/unit/grad_check.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_gpt_layers)  // ctest's unit.test_gpt_layers (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;

namespace {

Device& dev() { return cpu_device(); }


Tensor random_tensor(const Shape& shape, uint64_t seed, float scale = 1.0f) {
  Tensor t(dev(), shape);
  const auto v = random_vector(static_cast<size_t>(t.numel()), seed, scale);
  t.from_host(v.data(), v.size());
  return t;
}

// Token ids in [0, vocab) as the float batch tensor carries them.
Tensor random_tokens(int n, int seq, int vocab, uint64_t seed) {
  Tensor t(dev(), {n, seq});
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(rng.below(static_cast<uint64_t>(vocab)));
  return t;
}

// A layer with parameter and gradient storage of its own, initialised.
struct Bound {
  std::vector<float> params, grads;
  Bound(Layer& layer, uint64_t seed) : params(layer.param_count()), grads(layer.param_count()) {
    layer.bind(params.data(), grads.data());
    Rng rng(seed);
    layer.init_params(rng);
  }
};

// Checks the parameter gradients of a bound layer at input x, and its input gradient
// when check_dx (token ids have none), on the probe sum(y * r).
void check_at(Layer& layer, std::vector<float>& params, const std::vector<float>& grads, Tensor& x,
              const StepContext& ctx, bool check_dx, double tol, float eps = 1e-2f) {
  const Shape out_shape = batched(x.dim(0), layer.output_shape());
  const auto r = random_vector(static_cast<size_t>(shape_numel(out_shape)), 4);
  auto probe = [&]() { return dot(layer.forward(x, ctx).data(), r); };
  probe();
  Tensor dy(dev(), out_shape);
  dy.from_host(r.data(), r.size());
  const Tensor& dx = layer.backward(dy, check_dx, ctx);
  const std::vector<float> dparams = grads;
  if (check_dx) {
    BOOST_REQUIRE(dx.defined());
    const std::vector<float> dx_analytic(dx.data(), dx.data() + dx.numel());
    const auto dx_numeric = numeric_gradient(x.data(), static_cast<size_t>(x.numel()), probe, eps);
    BOOST_TEST(max_scaled_error(dx_analytic, dx_numeric) < tol, layer.describe() << ": input gradient");
    BOOST_TEST(dx_numeric.kinks() == 0u, layer.describe() << ": a smooth layer has no kinks");
  }
  if (!params.empty()) {
    const auto dp_numeric = numeric_gradient(params.data(), params.size(), probe, eps);
    BOOST_TEST(max_scaled_error(dparams, dp_numeric) < tol, layer.describe() << ": parameter gradient");
  }
}

// Parameters away from their init (gamma 1, beta 0, biases 0), so every term of the
// gradient is exercised.
void randomise(std::vector<float>& params, uint64_t seed, float scale = 0.5f) {
  const auto v = random_vector(params.size(), seed, scale);
  for (size_t i = 0; i < params.size(); ++i) params[i] += v[i];
}

// GELU alone, through the device ops the block uses.
class Gelu final : public Layer {
public:
  Gelu(Device& dev, Shape shape) : Layer(dev), shape_(std::move(shape)) {}
  std::string describe() const override { return "gelu"; }
  const Shape& output_shape() const override { return shape_; }
  const Tensor& forward(const Tensor& x, const StepContext&) override {
    x_ = x;
    y_.ensure(dev_, x.shape());
    dev_.gelu_forward(x.data(), y_.data(), static_cast<size_t>(x.numel()));
    return y_;
  }
  const Tensor& backward(const Tensor& dy, bool, const StepContext&) override {
    dx_.ensure(dev_, dy.shape());
    dev_.gelu_backward(x_.data(), dy.data(), dx_.data(), static_cast<size_t>(dy.numel()));
    return dx_;
  }

private:
  Shape shape_;
  Tensor x_, y_, dx_;
};

// The tiny GPT of these tests: vocab 11, seq 5, n_embd 8, 2 heads, 2 layers.
constexpr int kVocab = 11, kSeq = 5, kEmbd = 8, kHeads = 2, kLayers = 2;

ModelSpec tiny_gpt(double dropout = 0.0, bool tied = true, int padded_vocab = kVocab) {
  ModelSpec spec;
  spec.name = "tiny-gpt";
  spec.input = {kSeq};
  spec.classes = kVocab;
  spec.layers = {{"embedding",
                  {{"n_embd", kEmbd}, {"seq_len", kSeq}, {"dropout", dropout}, {"padded_vocab", padded_vocab}},
                  "gpt.lua:1"}};
  for (int l = 0; l < kLayers; ++l)
    spec.layers.push_back(
        {"transformer_block", {{"n_head", kHeads}, {"dropout", dropout}, {"n_layer", kLayers}}, "gpt.lua:2"});
  spec.layers.push_back({"layernorm", {}, "gpt.lua:3"});
  spec.layers.push_back({"lm_head", {{"tied", tied ? 1 : 0}}, "gpt.lua:4"});
  return spec;
}

std::vector<int32_t> random_labels(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> labels(n);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(kVocab));
  return labels;
}

// The loss sum of the model on (x, labels), and its gradient left in model.grads().
double loss_and_grad(Model& model, const Tensor& x, const int32_t* labels, const StepContext& ctx) {
  SoftmaxCrossEntropy loss;
  const LossResult r = loss.forward(model.forward(x, ctx), labels, true);
  model.backward(loss.grad(), ctx);
  return r.loss_sum;
}

double loss_only(Model& model, const Tensor& x, const int32_t* labels, const StepContext& ctx) {
  SoftmaxCrossEntropy loss;
  return loss.forward(model.forward(x, ctx), labels, false).loss_sum;
}

// The first groups are `expected` (count, decay) in order.
void check_groups(const std::vector<ParamRange>& groups, const std::vector<std::pair<size_t, bool>>& expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    BOOST_TEST(groups[i].count == expected[i].first, "group " << i);
    BOOST_TEST(groups[i].decay == expected[i].second, "group " << i);
  }
}

// GPT-2's block on one sample x [seq, C], in double, straight from the definition,
// with the parameters in the order transformer_block.hpp documents.
std::vector<double> reference_block(const std::vector<float>& p, const std::vector<float>& x, int seq, int C,
                                    int heads) {
  size_t at = 0;
  auto take = [&](size_t n) { const float* s = p.data() + at; at += n; return s; };
  const float *ln1g = take(C), *ln1b = take(C), *wqkv = take(3 * C * C), *bqkv = take(3 * C), *wp = take(C * C),
              *bp = take(C), *ln2g = take(C), *ln2b = take(C), *w1 = take(4 * C * C), *b1 = take(4 * C),
              *w2 = take(4 * C * C), *b2 = take(C);
  BOOST_REQUIRE_EQUAL(at, p.size());
  auto layernorm = [](const std::vector<double>& v, const float* g, const float* b) {
    double mean = 0, var = 0;
    for (double e : v) mean += e / v.size();
    for (double e : v) var += (e - mean) * (e - mean) / v.size();
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = (v[i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i];
    return out;
  };
  auto linear = [](const std::vector<double>& v, const float* w, const float* b, size_t out_dim) {
    std::vector<double> out(out_dim);
    for (size_t o = 0; o < out_dim; ++o) {
      out[o] = b[o];
      for (size_t i = 0; i < v.size(); ++i) out[o] += w[o * v.size() + i] * v[i];
    }
    return out;
  };
  std::vector<std::vector<double>> stream(seq), qkv(seq);
  for (int t = 0; t < seq; ++t) {
    stream[t].assign(x.begin() + t * C, x.begin() + (t + 1) * C);
    qkv[t] = linear(layernorm(stream[t], ln1g, ln1b), wqkv, bqkv, 3 * C);
  }
  const int hd = C / heads;
  std::vector<double> y;
  for (int t = 0; t < seq; ++t) {
    std::vector<double> attn(C, 0.0);
    for (int h = 0; h < heads; ++h) {
      std::vector<double> w(t + 1);
      double z = 0;
      for (int s = 0; s <= t; ++s) {
        double dotp = 0;
        for (int d = 0; d < hd; ++d) dotp += qkv[t][h * hd + d] * qkv[s][C + h * hd + d];
        w[s] = std::exp(dotp / std::sqrt(double(hd)));
        z += w[s];
      }
      for (int s = 0; s <= t; ++s)
        for (int d = 0; d < hd; ++d) attn[h * hd + d] += w[s] / z * qkv[s][2 * C + h * hd + d];
    }
    const auto a = linear(attn, wp, bp, C);
    for (int c = 0; c < C; ++c) stream[t][c] += a[c];
    auto f = linear(layernorm(stream[t], ln2g, ln2b), w1, b1, 4 * C);
    for (double& v : f) v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    const auto m = linear(f, w2, b2, C);
    for (int c = 0; c < C; ++c) y.push_back(stream[t][c] + m[c]);
  }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_CASE(layernorm_gradients_over_the_last_dimension) {
  LayerNorm ln(dev(), {3, 6}, 1e-5f);
  Bound b(ln, 1);
  randomise(b.params, 2);
  Tensor x = random_tensor({2, 3, 6}, 3, 2.0f);
  StepContext ctx;
  check_at(ln, b.params, b.grads, x, ctx, true, 5e-3);
  std::vector<std::pair<size_t, size_t>> ranges;
  ln.no_decay_ranges(ranges, 100);
  BOOST_TEST(ranges.size() == 1u);
  BOOST_TEST(ranges[0].first == 100u);
  BOOST_TEST(ranges[0].second == 12u);
}

BOOST_AUTO_TEST_CASE(gelu_gradients) {
  Gelu gelu(dev(), {7});
  std::vector<float> none;
  Tensor x = random_tensor({3, 7}, 5, 3.0f);
  StepContext ctx;
  check_at(gelu, none, none, x, ctx, true, 2e-3, 1e-3f);
}

BOOST_AUTO_TEST_CASE(embedding_gradients_and_lookup) {
  for (const float dropout : {0.0f, 0.3f}) {
    Embedding emb(dev(), {4}, 7, 3, 6, dropout, 0);  // seq 4 < seq_len 6
    Bound b(emb, 1);
    Tensor tokens = random_tokens(3, 4, 7, 9);
    tokens.data()[0] = tokens.data()[1] = 2.0f;  // a token seen twice accumulates
    StepContext ctx;
    ctx.seed = 12;
    std::fill(b.grads.begin(), b.grads.end(), 5.0f);  // stale values must be overwritten
    check_at(emb, b.params, b.grads, tokens, ctx, false, 2e-3);
    // Positions past the input's length get no gradient.
    const auto g = b.grads;
    for (size_t i = (7 + 4) * 3; i < g.size(); ++i) BOOST_TEST(g[i] == 0.0f);
  }
  Embedding emb(dev(), {2}, 5, 2, 2, 0.0f, 0);
  Bound b(emb, 1);
  Tensor tokens(dev(), {1, 2});
  tokens.data()[0] = 4.0f;
  tokens.data()[1] = 0.0f;
  StepContext ctx;
  const auto y = emb.forward(tokens, ctx).to_host();
  for (int c = 0; c < 2; ++c) {
    BOOST_TEST(y[c] == b.params[4 * 2 + c] + b.params[5 * 2 + c]);
    BOOST_TEST(y[2 + c] == b.params[c] + b.params[5 * 2 + 2 + c]);
  }
}

BOOST_AUTO_TEST_CASE(embedding_rejects_bad_tokens_and_lengths) {
  CHECK_CONTAINS(error_of([] { Embedding(dev(), {9}, 5, 4, 8, 0.0f, 0); }), "embedding(seq_len=8) got input [9]");
  Embedding emb(dev(), {2}, 5, 2, 2, 0.0f, 0);
  Bound b(emb, 1);
  Tensor tokens(dev(), {1, 2});
  tokens.data()[1] = 5.0f;
  StepContext ctx;
  CHECK_CONTAINS(error_of([&] { emb.forward(tokens, ctx); }), "is not an integer in [0, 5)");
}

BOOST_AUTO_TEST_CASE(lm_head_untied_gradients) {
  LmHead head(dev(), {4, 6}, 9, nullptr);
  BOOST_TEST(head.param_count() == 54u);
  BOOST_TEST(head.output_shape() == (Shape{4, 9}), boost::test_tools::per_element());
  Bound b(head, 1);
  randomise(b.params, 2);
  Tensor x = random_tensor({2, 4, 6}, 3);
  StepContext ctx;
  check_at(head, b.params, b.grads, x, ctx, true, 2e-3);
}

BOOST_AUTO_TEST_CASE(transformer_block_gradients_with_and_without_dropout) {
  for (const float dropout : {0.0f, 0.25f}) {
    TransformerBlock block(dev(), {4, 8}, 2, dropout, 2, 3);
    BOOST_TEST(block.param_count() == 12u * 64 + 13u * 8);
    Bound b(block, 1);
    randomise(b.params, 2, 0.3f);
    Tensor x = random_tensor({2, 4, 8}, 3);
    StepContext ctx;
    ctx.seed = 17;
    std::fill(b.grads.begin(), b.grads.end(), 5.0f);  // stale values must be overwritten
    check_at(block, b.params, b.grads, x, ctx, true, 5e-3);
  }
}

BOOST_AUTO_TEST_CASE(transformer_block_matches_gpt2_reference) {
  const int seq = 5, C = 12, heads = 3;
  TransformerBlock block(dev(), {seq, C}, heads, 0.0f, 2, 0);
  Bound b(block, 4);
  randomise(b.params, 5, 0.3f);
  Tensor x = random_tensor({2, seq, C}, 6);
  StepContext ctx;
  const auto y = block.forward(x, ctx).to_host();
  const auto xs = x.to_host();
  for (int n = 0; n < 2; ++n) {
    const std::vector<float> sample(xs.begin() + n * seq * C, xs.begin() + (n + 1) * seq * C);
    const auto ref = reference_block(b.params, sample, seq, C, heads);
    // Scaled by the output's magnitude, not element by element (DESIGN.md habit 2): an
    // output near zero carries the float rounding of the sums that made it, which
    // OpenBLAS's kernels order differently from one CPU to another.
    double scale = 1.0;
    for (const double r : ref) scale = std::max(scale, std::fabs(r));
    for (int i = 0; i < seq * C; ++i)
      BOOST_TEST(std::fabs(y[n * seq * C + i] - ref[i]) <= 1e-4 * scale, "element " << i << ": " << y[n * seq * C + i] << " against " << ref[i]);
  }
}

BOOST_AUTO_TEST_CASE(attention_is_causal) {
  TransformerBlock block(dev(), {6, 8}, 2, 0.0f, 1, 0);
  Bound b(block, 4);
  randomise(b.params, 5, 0.3f);
  Tensor x = random_tensor({1, 6, 8}, 6);
  StepContext ctx;
  const auto before = block.forward(x, ctx).to_host();
  for (int c = 0; c < 8; ++c) x.data()[4 * 8 + c] += 1.0f;  // change position 4
  const auto after = block.forward(x, ctx).to_host();
  for (int i = 0; i < 4 * 8; ++i) BOOST_TEST(after[i] == before[i]);  // earlier positions see nothing
  bool changed = false;
  for (int i = 4 * 8; i < 6 * 8; ++i) changed = changed || after[i] != before[i];
  BOOST_TEST(changed);
}

BOOST_AUTO_TEST_CASE(transformer_block_init_is_gpt2s) {
  const int C = 16, n_layer = 8;
  TransformerBlock block(dev(), {4, C}, 4, 0.0f, n_layer, 0);
  Bound b(block, 3);
  auto stddev = [&](size_t from, size_t n) {
    double s = 0;
    for (size_t i = from; i < from + n; ++i) s += double(b.params[i]) * b.params[i];
    return std::sqrt(s / n);
  };
  const size_t qkv_w = 2 * C, proj_w = qkv_w + 3 * C * C + 3 * C, fc1_w = proj_w + C * C + C + 2 * C,
               fc2_w = fc1_w + 4 * C * C + 4 * C;
  BOOST_TEST(b.params[0] == 1.0f);          // ln1.gamma
  BOOST_TEST(b.params[C] == 0.0f);          // ln1.beta
  BOOST_TEST(b.params[qkv_w + 3 * C * C] == 0.0f);  // qkv.b
  BOOST_TEST(std::abs(stddev(qkv_w, 3 * C * C) - 0.02) < 0.002);
  BOOST_TEST(std::abs(stddev(fc1_w, 4 * C * C) - 0.02) < 0.002);
  const double resid = 0.02 / std::sqrt(2.0 * n_layer);
  BOOST_TEST(std::abs(stddev(fc2_w, 4 * C * C) - resid) < 0.1 * resid);
  BOOST_TEST(std::abs(stddev(proj_w, C * C) - resid) < 0.2 * resid);
}

BOOST_AUTO_TEST_CASE(whole_tiny_gpt_gradient) {
  for (const bool tied : {true, false}) {
    Model model(dev(), tiny_gpt(0.0, tied), 3);
    BOOST_TEST(model.targets_per_sample() == kSeq);
    std::vector<float> p = model.params().to_host();
    randomise(p, 7, 0.3f);
    model.params().from_host(p.data(), p.size());
    Tensor x = random_tokens(2, kSeq, kVocab, 8);
    const auto labels = random_labels(2 * kSeq, 9);
    StepContext ctx;
    model.grads().fill(5.0f);
    loss_and_grad(model, x, labels.data(), ctx);
    const std::vector<float> analytic = model.grads().to_host();
    auto f = [&]() { return loss_only(model, x, labels.data(), ctx); };
    const auto numeric = numeric_gradient(model.params().data(), model.param_count(), f, 1e-2f);
    BOOST_TEST(max_scaled_error(analytic, numeric) < 5e-3, (tied ? "tied" : "untied"));
  }
}

// The tied gradient is the head's part plus the embedding's: the same model untied,
// with the head's weight a copy of wte, gives both parts separately.
BOOST_AUTO_TEST_CASE(tied_gradient_is_head_part_plus_embedding_part) {
  Model tied(dev(), tiny_gpt(0.0, true), 3), untied(dev(), tiny_gpt(0.0, false), 3);
  const size_t wte = kVocab * kEmbd;
  BOOST_REQUIRE_EQUAL(untied.param_count(), tied.param_count() + wte);
  std::vector<float> p = tied.params().to_host();
  randomise(p, 7, 0.3f);
  tied.params().from_host(p.data(), p.size());
  const std::vector<float> head(p.begin(), p.begin() + wte);
  p.insert(p.end(), head.begin(), head.end());  // the untied head's weight, last
  untied.params().from_host(p.data(), p.size());
  Tensor x = random_tokens(3, kSeq, kVocab, 8);
  const auto labels = random_labels(3 * kSeq, 9);
  StepContext ctx;
  const double l1 = loss_and_grad(tied, x, labels.data(), ctx), l2 = loss_and_grad(untied, x, labels.data(), ctx);
  BOOST_TEST(l1 == l2, boost::test_tools::tolerance(1e-9));
  const auto gt = tied.grads().to_host(), gu = untied.grads().to_host();
  double head_part = 0.0;
  for (size_t i = 0; i < wte; ++i) {
    const float head = gu[tied.param_count() + i], lookup = gu[i];
    BOOST_TEST(gt[i] == head + lookup, boost::test_tools::tolerance(1e-4f));
    head_part = std::max(head_part, double(std::abs(head)));
  }
  BOOST_TEST(head_part > 1e-3);  // both parts really contribute
  for (size_t i = wte; i < tied.param_count(); ++i) BOOST_TEST(gt[i] == gu[i], boost::test_tools::tolerance(1e-4f));
}

// One worker with the whole batch and two with slices (first_sample set) compute
// the same loss and, summed, the same gradient: dropout masks included.
BOOST_AUTO_TEST_CASE(gradient_of_batch_is_sum_over_slices_with_dropout) {
  Model model(dev(), tiny_gpt(0.2), 3);
  const int n = 5, cut = 2;
  Tensor x = random_tokens(n, kSeq, kVocab, 8);
  const auto labels = random_labels(n * kSeq, 9);
  StepContext whole;
  whole.seed = 99;
  const double loss = loss_and_grad(model, x, labels.data(), whole);
  const auto g = model.grads().to_host();

  Tensor first = Tensor::view_of(dev(), x.data(), {cut, kSeq});
  Tensor second = Tensor::view_of(dev(), x.data() + cut * kSeq, {n - cut, kSeq});
  StepContext a = whole, b = whole;
  b.first_sample = cut;
  double sliced = loss_and_grad(model, first, labels.data(), a);
  auto gs = model.grads().to_host();
  sliced += loss_and_grad(model, second, labels.data() + cut * kSeq, b);
  const auto g2 = model.grads().to_host();
  for (size_t i = 0; i < gs.size(); ++i) gs[i] += g2[i];
  BOOST_TEST(loss == sliced, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(scaled_difference(g, gs, 1e-3) < 1e-5);

  // The masks are really on: evaluation (no dropout) gives another loss.
  StepContext eval = whole;
  eval.training = false;
  BOOST_TEST(std::abs(loss_only(model, x, labels.data(), eval) - loss) > 1e-4);
}

// A vocabulary padded to 16 (models/gpt.lua's vocab_multiple): the same model as the
// unpadded one, whatever the padded rows hold. The valid rows draw the same numbers,
// the padding starts at zero, the logits have 16 columns of which the first 11 are
// predicted (padded rows set large would win every arg-max were they read), the
// loss, the count and every valid gradient match the unpadded model's, and the
// padded rows' gradient is exactly 0 (so AdamW leaves them where they are).
BOOST_AUTO_TEST_CASE(padded_vocabulary_changes_no_result) {
  constexpr int kPadded = 16;
  const size_t C = kEmbd, pad = (kPadded - kVocab) * C, wte = kVocab * C;
  Model plain(dev(), tiny_gpt(), 3), padded(dev(), tiny_gpt(0.0, true, kPadded), 3);
  BOOST_REQUIRE(padded.param_count() == plain.param_count() + pad);
  BOOST_TEST(padded.targets_per_sample() == kSeq);
  std::vector<float> p = plain.params().to_host(), q = padded.params().to_host();
  BOOST_TEST(std::equal(p.begin(), p.begin() + wte, q.begin()));
  BOOST_TEST(std::all_of(q.begin() + wte, q.begin() + wte + pad, [](float v) { return v == 0.0f; }));
  BOOST_TEST(std::equal(p.begin() + wte, p.end(), q.begin() + wte + pad));
  randomise(p, 7, 0.3f);
  std::copy(p.begin(), p.begin() + wte, q.begin());
  std::fill(q.begin() + wte, q.begin() + wte + pad, 3.0f);
  std::copy(p.begin() + wte, p.end(), q.begin() + wte + pad);
  plain.params().from_host(p.data(), p.size());
  padded.params().from_host(q.data(), q.size());

  Tensor x = random_tokens(2, kSeq, kVocab, 8);
  const auto labels = random_labels(2 * kSeq, 9);
  StepContext ctx;
  SoftmaxCrossEntropy l1, l2;
  const Tensor& y = padded.forward(x, ctx);
  BOOST_TEST(y.shape() == (Shape{2, kSeq, kPadded}));
  const LossResult b = l2.forward(y, labels.data(), true, kVocab);
  padded.backward(l2.grad(), ctx);
  const LossResult a = l1.forward(plain.forward(x, ctx), labels.data(), true, kVocab);
  plain.backward(l1.grad(), ctx);
  BOOST_TEST(b.loss_sum == a.loss_sum, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(b.correct == a.correct);
  const std::vector<float> dlogits = l2.grad().to_host();
  for (size_t r = 0; r < 2 * kSeq; ++r)
    for (int c = kVocab; c < kPadded; ++c) BOOST_TEST(dlogits[r * kPadded + c] == 0.0f);
  const std::vector<float> gp = plain.grads().to_host(), gq = padded.grads().to_host();
  std::vector<float> gq_valid(gq.begin(), gq.begin() + wte);
  gq_valid.insert(gq_valid.end(), gq.begin() + wte + pad, gq.end());
  BOOST_REQUIRE(gq_valid.size() == gp.size());
  double scale = 1e-3, err = 0.0;
  for (size_t i = 0; i < gp.size(); ++i) {
    scale = std::max(scale, double(std::abs(gp[i])));
    err = std::max(err, double(std::abs(gq_valid[i] - gp[i])));
  }
  BOOST_TEST(err / scale < 1e-5);
  BOOST_TEST(std::all_of(gq.begin() + wte, gq.begin() + wte + pad, [](float v) { return v == 0.0f; }));
  // The head's work is the padded GEMM's (what the performance model and the MACs count).
  BOOST_TEST(padded.forward_macs_per_sample() - plain.forward_macs_per_sample() ==
             double(kSeq) * kEmbd * (kPadded - kVocab));

  ModelSpec smaller = tiny_gpt(0.0, true, kVocab - 1);
  BOOST_CHECK_EXCEPTION(Model(dev(), smaller, 3), Error, [](const Error& e) {
    return std::string(e.what()).find("padded_vocab 10 is smaller than vocab 11") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(tiny_gpt_param_groups_and_layout) {
  Model model(dev(), tiny_gpt(), 3);
  const size_t C = kEmbd, block = 12 * C * C + 13 * C, embed = (kVocab + kSeq) * C;
  BOOST_TEST(model.param_count() == embed + kLayers * block + 2 * C);
  const auto groups = model.param_groups();
  size_t at = 0, decay = 0;
  for (const ParamRange& r : groups) {
    BOOST_TEST(r.offset == at);
    at += r.count;
    if (r.decay) decay += r.count;
  }
  BOOST_TEST(at == model.param_count());
  BOOST_TEST(decay == embed + kLayers * (3 * C * C + C * C + 8 * C * C));  // wte, wpe and the four matrices
  // The first block: ln1 (no decay), qkv.W, qkv.b, proj.W, proj.b + ln2, fc1.W, fc1.b,
  // fc2.W, then fc2.b with the next block's ln1.
  const std::vector<std::pair<size_t, bool>> expected{{embed, true},     {2 * C, false}, {3 * C * C, true},
                                                      {3 * C, false},    {C * C, true},  {C + 2 * C, false},
                                                      {4 * C * C, true}, {4 * C, false}, {4 * C * C, true},
                                                      {C + 2 * C, false}};
  BOOST_REQUIRE(groups.size() > expected.size());
  check_groups(groups, expected);
  BOOST_TEST(!groups.back().decay);  // the final layer norm (the tied head owns nothing)
  BOOST_TEST(groups.back().count == C + 2 * C);
}

BOOST_AUTO_TEST_CASE(tiny_gpt_footprint_and_macs) {
  const ModelSpec spec = tiny_gpt(0.1);
  Model model(dev(), spec, 3);
  const ModelFootprint f = model_footprint(spec);
  BOOST_TEST(f.params == static_cast<int64_t>(model.param_count()));
  // At least the logits, and every block's attention weights (heads * seq^2).
  BOOST_TEST(f.buffer_floats_per_sample > 2.0 * kSeq * kVocab + kLayers * 2.0 * kHeads * kSeq * kSeq);
  const double block = 12.0 * kEmbd * kEmbd * kSeq + 2.0 * kHeads * kSeq * kSeq * (kEmbd / kHeads);
  BOOST_TEST(model.forward_macs_per_sample() == kLayers * block + double(kSeq) * kEmbd * kVocab);
}

BOOST_AUTO_TEST_CASE(gpt_builder_errors_name_the_layer) {
  ModelSpec spec = tiny_gpt();
  spec.layers.erase(spec.layers.begin());  // no embedding: the blocks get [5] token ids
  CHECK_CONTAINS(error_of([&] { Model(dev(), spec, 1); }), "transformer_block layer at gpt.lua:2 needs a [seq, n_embd]");
  struct BadArg {
    size_t layer;
    const char* arg;
    double value;
    const char* message;
  };
  for (const BadArg& bad : {
           BadArg{0, "seq_len", 4, "embedding layer at gpt.lua:1 with seq_len=4 got input [5]"},
           BadArg{0, "dropout", 1, "embedding layer at gpt.lua:1: dropout must be in [0, 1)"},
           BadArg{1, "n_head", 3, "does not split into n_head=3"},
           BadArg{2, "n_layer", 0, "transformer_block layer at gpt.lua:2: argument 'n_layer' must be >= 1, got 0"},
           BadArg{3, "eps", 0, "layernorm layer at gpt.lua:3: eps must be > 0"},
       }) {
    spec = tiny_gpt();
    spec.layers[bad.layer].args[bad.arg] = bad.value;
    CHECK_CONTAINS(error_of([&] { Model(dev(), spec, 1); }), bad.message);
  }
  spec.input = {kSeq, kEmbd};
  spec.layers = {{"layernorm", {}, "m.lua:1"}, {"lm_head", {}, "m.lua:2"}};
  CHECK_CONTAINS(error_of([&] { Model(dev(), spec, 1); }), "tied lm_head at m.lua:2 has no embedding before it");
  spec.layers[1].args["tied"] = 0;
  Model untied(dev(), spec, 1);  // an own weight needs no embedding
  BOOST_TEST(untied.param_count() == 2u * kEmbd + kVocab * kEmbd);
}

// GPT-2's init makes the first prediction nearly uniform: the loss per token starts
// near ln(vocab), a little above (logits of std about 0.02 sqrt(n_embd) = 0.23 add
// about var/2, and the tied head raises the input token's own logit). The default
// models/gpt.lua size, one step forward and back.
BOOST_AUTO_TEST_CASE(default_size_gpt_starts_near_uniform_prediction) {
  ModelSpec spec;
  spec.name = "gpt";
  spec.input = {64};
  spec.classes = 256;
  spec.layers = {{"embedding", {{"n_embd", 128}, {"seq_len", 64}}, "gpt.lua:1"},
                 {"transformer_block", {{"n_head", 4}, {"n_layer", 2}}, "gpt.lua:2"},
                 {"transformer_block", {{"n_head", 4}, {"n_layer", 2}}, "gpt.lua:2"},
                 {"layernorm", {}, "gpt.lua:3"},
                 {"lm_head", {}, "gpt.lua:4"}};
  Model model(dev(), spec, 1);
  const int n = 3;
  Tensor x = random_tokens(n, 64, 256, 2);
  Rng rng(3);
  std::vector<int32_t> labels(n * 64);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(256));
  StepContext ctx;
  const double loss = loss_and_grad(model, x, labels.data(), ctx) / labels.size();
  BOOST_TEST(loss > std::log(256.0) - 0.01);
  BOOST_TEST(loss < std::log(256.0) + 0.15);
  double norm = 0.0;
  for (float g : model.grads().to_host()) norm += double(g) * g;
  BOOST_TEST(std::isfinite(norm));
  BOOST_TEST(norm > 0.0);
}

// The image layers' no-decay ranges: biases, batch norms, inside residual blocks too.
BOOST_AUTO_TEST_CASE(param_groups_leave_biases_and_norms_out_of_decay) {
  ModelSpec spec;
  spec.name = "small-resnet";
  spec.input = {2, 4, 4};
  spec.classes = 3;
  LayerSpec block{"residual", {}, "r.lua:2"};
  block.body = {{"conv2d", {{"out_channels", 2}, {"kernel", 3}, {"padding", 1}, {"bias", 0}}, "r.lua:3"},
                {"batchnorm", {}, "r.lua:4"}};
  spec.layers = {{"conv2d", {{"out_channels", 2}, {"kernel", 1}}, "r.lua:1"},  // 4 weights, 2 biases
                 block,                                                          // 36 weights, 4 bn
                 {"flatten", {}, "r.lua:5"},
                 {"linear", {{"out", 3}}, "r.lua:6"}};                           // 96 weights, 3 biases
  Model model(dev(), spec, 1);
  const auto groups = model.param_groups();
  const std::vector<std::pair<size_t, bool>> expected{{4, true},  {2, false}, {36, true},
                                                      {4, false}, {96, true}, {3, false}};
  BOOST_REQUIRE_EQUAL(groups.size(), expected.size());
  check_groups(groups, expected);
}

// A step in micro-batches (engine/train/step.hpp) has every pass after the first add
// to the gradients (StepContext::accumulate_grads): the gradients then equal the
// passes' own gradients added up, for every parameter of a GPT (the tied head, which
// writes the token table before the embedding scatters into it, and an untied one;
// dropout on), and an empty pass adds nothing.
BOOST_AUTO_TEST_CASE(accumulating_passes_add_their_gradients) {
  for (bool tied : {true, false}) {
    BOOST_TEST_CONTEXT((tied ? "tied head" : "untied head")) {
      Model m(dev(), tiny_gpt(0.2, tied), 3);
      std::vector<float> p = m.params().to_host();
      randomise(p, 7, 0.3f);
      m.params().from_host(p.data(), p.size());
      const Tensor a = random_tokens(2, kSeq, kVocab, 8), b = random_tokens(3, kSeq, kVocab, 10);
      const Tensor none = random_tokens(0, kSeq, kVocab, 12);
      const auto la = random_labels(2 * kSeq, 9), lb = random_labels(3 * kSeq, 11);
      auto pass = [&](const Tensor& x, const int32_t* labels, int64_t first, bool accumulate) {
        StepContext ctx;
        ctx.seed = 4;
        ctx.first_sample = first;
        ctx.accumulate_grads = accumulate;
        SoftmaxCrossEntropy loss;
        loss.forward(m.forward(x, ctx), labels, true, kVocab);
        m.backward(loss.grad(), ctx);
        return m.grads().to_host();
      };
      const std::vector<float> ga = pass(a, la.data(), 0, false), gb = pass(b, lb.data(), 2, false);
      pass(a, la.data(), 0, false);
      const std::vector<float> sum = pass(b, lb.data(), 2, true);
      double scale = 1e-3, err = 0.0;
      for (size_t i = 0; i < sum.size(); ++i) {
        scale = std::max(scale, double(std::abs(ga[i] + gb[i])));
        err = std::max(err, double(std::abs(sum[i] - (ga[i] + gb[i]))));
      }
      BOOST_TEST(err / scale < 1e-6);
      BOOST_TEST(pass(none, lb.data(), 5, true) == sum);  // an empty pass adds nothing
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()  // test_gpt_layers
