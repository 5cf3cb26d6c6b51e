// The CPU kernels (kernels/cpu) in the harness, each against a reference written
// from the definition, at the sizes the bundled models run.
#include <cmath>
#include <memory>
#include <random>

#include "kernels/cpu/batchnorm.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"
#include "kernels/cpu/sgd_step.hpp"
#include "tools/kernels/harness.hpp"

namespace tandem::kernels {

namespace {

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

struct Conv {
  int c, h, w, k, stride, pad;
  int oh() const { return cpu::conv_out_size(h, k, pad, stride); }
  int ow() const { return cpu::conv_out_size(w, k, pad, stride); }
  size_t columns() const { return static_cast<size_t>(c) * k * k * oh() * ow(); }
  size_t image() const { return static_cast<size_t>(c) * h * w; }
  std::string str() const {
    return "c" + std::to_string(c) + " " + std::to_string(h) + "x" + std::to_string(w) + " k" + std::to_string(k) +
           " s" + std::to_string(stride) + " p" + std::to_string(pad);
  }
  // columns[(ch, i, j), (y, x)] = image[ch, y*stride - pad + i, x*stride - pad + j] or 0
  template <typename F>
  void each(F f) const {
    for (int ch = 0; ch < c; ++ch)
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < k; ++j)
          for (int y = 0; y < oh(); ++y)
            for (int x = 0; x < ow(); ++x) {
              const size_t col = ((static_cast<size_t>(ch) * k + i) * k + j) * oh() * ow() + y * ow() + x;
              const int iy = y * stride - pad + i, ix = x * stride - pad + j;
              const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
              f(col, inside ? (static_cast<size_t>(ch) * h + iy) * w + ix : SIZE_MAX);
            }
  }
};

OpCase im2col_case(const Conv& cv) {
  auto image = std::make_shared<std::vector<float>>(random_floats(cv.image(), 1));
  auto out = std::make_shared<std::vector<float>>(cv.columns());
  OpCase oc{"im2col", cv.str(), 4.0 * (cv.image() + cv.columns()), 0.0, 0.0, {}, {}};
  oc.reference = [=] {
    std::vector<float> want(cv.columns());
    cv.each([&](size_t col, size_t px) { want[col] = px == SIZE_MAX ? 0.0f : (*image)[px]; });
    return want;
  };
  oc.versions.push_back({"cpu", [=] {
                           cpu::im2col(image->data(), cv.c, cv.h, cv.w, cv.k, cv.k, cv.pad, cv.stride, out->data());
                         },
                         [=] { return *out; }});
  return oc;
}

OpCase col2im_case(const Conv& cv) {
  auto columns = std::make_shared<std::vector<float>>(random_floats(cv.columns(), 2));
  auto out = std::make_shared<std::vector<float>>(cv.image());
  OpCase oc{"col2im", cv.str(), 4.0 * (cv.columns() + 2 * cv.image()), 0.0, 1e-5, {}, {}};
  oc.reference = [=] {
    std::vector<float> want(cv.image(), 0.0f);
    cv.each([&](size_t col, size_t px) {
      if (px != SIZE_MAX) want[px] += (*columns)[col];
    });
    return want;
  };
  oc.versions.push_back({"cpu", [=] {
                           std::fill(out->begin(), out->end(), 0.0f);
                           cpu::col2im(columns->data(), cv.c, cv.h, cv.w, cv.k, cv.k, cv.pad, cv.stride, out->data());
                         },
                         [=] { return *out; }});
  return oc;
}

OpCase sgd_case(size_t n) {
  const float lr = 0.05f, momentum = 0.9f, wd = 5e-4f, scale = 1.0f / 128;
  auto grad = std::make_shared<std::vector<float>>(random_floats(n, 3));
  auto param0 = random_floats(n, 4), velocity0 = random_floats(n, 5);
  auto param = std::make_shared<std::vector<float>>(param0), velocity = std::make_shared<std::vector<float>>(velocity0);
  // param r/w, velocity r/w, grad r
  OpCase oc{"sgd_step", std::to_string(n) + " parameters", 4.0 * 5 * static_cast<double>(n), 0.0, 1e-6, {}, {}};
  oc.reference = [=] {
    std::vector<float> p = param0, v = velocity0;
    for (size_t i = 0; i < n; ++i) {
      const float g = (*grad)[i] * scale + wd * p[i];
      v[i] = momentum * v[i] + g;
      p[i] -= lr * v[i];
    }
    return p;
  };
  oc.versions.push_back({"cpu",
                         [=] { cpu::sgd_step(param->data(), grad->data(), velocity->data(), n, lr, momentum, wd, scale, false); },
                         [=] {  // one step from the start, as the reference
                           *param = param0;
                           *velocity = velocity0;
                           cpu::sgd_step(param->data(), grad->data(), velocity->data(), n, lr, momentum, wd, scale, false);
                           return *param;
                         }});
  return oc;
}

OpCase batchnorm_case(int batch, int channels, int spatial) {
  const size_t n = static_cast<size_t>(batch) * channels * spatial;
  auto x = std::make_shared<std::vector<float>>(random_floats(n, 6));
  auto mean = std::make_shared<std::vector<float>>(random_floats(static_cast<size_t>(channels), 7));
  auto invstd = std::make_shared<std::vector<float>>(static_cast<size_t>(channels), 1.5f);
  auto gamma = std::make_shared<std::vector<float>>(random_floats(static_cast<size_t>(channels), 8));
  auto beta = std::make_shared<std::vector<float>>(random_floats(static_cast<size_t>(channels), 9));
  auto xhat = std::make_shared<std::vector<float>>(n), y = std::make_shared<std::vector<float>>(n);
  OpCase oc{"batchnorm_forward",
            std::to_string(batch) + "x" + std::to_string(channels) + "x" + std::to_string(spatial),
            4.0 * 3 * static_cast<double>(n), 0.0, 1e-6, {}, {}};
  oc.reference = [=] {
    std::vector<float> want(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = (i / static_cast<size_t>(spatial)) % static_cast<size_t>(channels);
      want[i] = (*gamma)[c] * (((*x)[i] - (*mean)[c]) * (*invstd)[c]) + (*beta)[c];
    }
    return want;
  };
  oc.versions.push_back({"cpu", [=] {
                           cpu::batchnorm_forward(x->data(), mean->data(), invstd->data(), gamma->data(), beta->data(),
                                                  batch, channels, spatial, xhat->data(), y->data());
                         },
                         [=] { return *y; }});
  return oc;
}

OpCase gemm_case(int m, int n, int k) {
  auto a = std::make_shared<std::vector<float>>(random_floats(static_cast<size_t>(m) * k, 10));
  auto b = std::make_shared<std::vector<float>>(random_floats(static_cast<size_t>(k) * n, 11));
  auto c = std::make_shared<std::vector<float>>(static_cast<size_t>(m) * n);
  OpCase oc{"gemm", std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k), 0.0,
            2.0 * m * n * static_cast<double>(k), 1e-4, {}, {}};
  oc.reference = [=] {
    std::vector<float> want(static_cast<size_t>(m) * n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0.0;
        for (int p = 0; p < k; ++p) s += double((*a)[static_cast<size_t>(i) * k + p]) * (*b)[static_cast<size_t>(p) * n + j];
        want[static_cast<size_t>(i) * n + j] = static_cast<float>(s);
      }
    return want;
  };
  oc.versions.push_back({"cpu (OpenBLAS)",
                         [=] { cpu::gemm(false, false, m, n, k, 1.0f, a->data(), k, b->data(), n, 0.0f, c->data(), n); },
                         [=] { return *c; }});
  return oc;
}

// GELU (tanh approximation) against the definition in double, over [-6, 6] so the
// tails where tanh rounds to +-1 are in; backward's dy in [-1, 1].
OpCase gelu_case(size_t n, bool backward) {
  auto x = std::make_shared<std::vector<float>>(random_floats(n, 12));
  for (auto& v : *x) v *= 6.0f;
  auto dy = std::make_shared<std::vector<float>>(random_floats(n, 13));
  auto out = std::make_shared<std::vector<float>>(n);
  const double bytes = 4.0 * (backward ? 3 : 2) * static_cast<double>(n);  // x (dy) in, y (dx) out
  OpCase oc{backward ? "gelu_backward" : "gelu_forward", std::to_string(n), bytes, 0.0, 1e-6, {}, {}};
  oc.reference = [=] {
    std::vector<float> want(n);
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    for (size_t i = 0; i < n; ++i) {
      const double v = (*x)[i], th = std::tanh(k * (v + c * v * v * v));
      const double slope = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k * (1 + 3 * c * v * v);
      want[i] = static_cast<float>(backward ? (*dy)[i] * slope : 0.5 * v * (1 + th));
    }
    return want;
  };
  oc.versions.push_back({"cpu", [=] {
                           if (backward)
                             cpu::gelu_backward(x->data(), dy->data(), out->data(), n);
                           else
                             cpu::gelu_forward(x->data(), out->data(), n);
                         },
                         [=] { return *out; }});
  return oc;
}

}  // namespace

double scaled_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double scale = 1.0, err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(double(want[i])));
    err = std::max(err, std::fabs(double(got[i]) - double(want[i])));
  }
  return err / scale;
}

std::vector<OpCase> cpu_cases() {
  std::vector<OpCase> cases;
  // The small ResNet's stem and its strided second stage, and LeNet's second conv.
  for (const Conv& cv : {Conv{8, 28, 28, 3, 1, 1}, Conv{8, 28, 28, 3, 2, 1}, Conv{6, 14, 14, 5, 1, 0}}) {
    cases.push_back(im2col_case(cv));
    cases.push_back(col2im_case(cv));
  }
  cases.push_back(batchnorm_case(128, 16, 14 * 14));
  cases.push_back(sgd_case(269322));  // the quickstart MLP's parameters
  cases.push_back(gemm_case(256, 256, 784));
  cases.push_back(gelu_case(32 * 64 * 512, false));  // the GPT's MLP hidden layer: batch x seq x 4 dim
  cases.push_back(gelu_case(32 * 64 * 512, true));
  return cases;
}

}  // namespace tandem::kernels
