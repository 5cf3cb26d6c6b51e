// im2col / col2im against the definition, element by element, over kernel sizes,
// strides and paddings (including paddings as large as the kernel, and strides
// that skip the last pixels): the fast kernels work out the in-bounds range once
// per kernel column, so every edge case of that range is checked here.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "kernels/cpu/im2col.hpp"
#include "tests/unit/grad_check.hpp"

BOOST_AUTO_TEST_SUITE(test_im2col)  // ctest's unit.test_im2col (tests/CMakeLists.txt)

using namespace tandem;

BOOST_AUTO_TEST_CASE(im2col_and_col2im_match_the_definition) {
  int cases = 0;
  for (int k : {1, 2, 3, 5})
    for (int stride : {1, 2, 3})
      for (int pad = 0; pad <= k; ++pad)
        for (int h : {5, 7}) {
          const int w = h + 1, c = 2;
          const int oh = cpu::conv_out_size(h, k, pad, stride), ow = cpu::conv_out_size(w, k, pad, stride);
          if (oh <= 0 || ow <= 0) continue;
          ++cases;
          const auto image = testing::random_vector(static_cast<size_t>(c * h * w), 1 + cases);
          std::vector<float> cols(static_cast<size_t>(c * k * k * oh * ow), -7.0f);
          cpu::im2col(image.data(), c, h, w, k, k, pad, stride, cols.data());
          const auto grad = testing::random_vector(cols.size(), 100 + cases);
          std::vector<float> back(image.size(), 0.0f), want_back(image.size(), 0.0f);
          cpu::col2im(grad.data(), c, h, w, k, k, pad, stride, back.data());
          size_t bad = 0;
          for (int ch = 0; ch < c; ++ch)
            for (int i = 0; i < k; ++i)
              for (int j = 0; j < k; ++j)
                for (int y = 0; y < oh; ++y)
                  for (int x = 0; x < ow; ++x) {
                    const size_t at = ((static_cast<size_t>(ch) * k + i) * k + j) * oh * ow + y * ow + x;
                    const int iy = y * stride - pad + i, ix = x * stride - pad + j;
                    const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                    const float want = inside ? image[(ch * h + iy) * w + ix] : 0.0f;
                    if (cols[at] != want) ++bad;
                    if (inside) want_back[(ch * h + iy) * w + ix] += grad[at];
                  }
          BOOST_TEST(bad == 0u, "im2col k" << k << " s" << stride << " p" << pad << " h" << h);
          for (size_t i = 0; i < back.size(); ++i)
            BOOST_TEST(std::abs(back[i] - want_back[i]) < 1e-5f, "col2im k" << k << " s" << stride << " p" << pad);
        }
  BOOST_TEST(cases > 50);
}

BOOST_AUTO_TEST_SUITE_END()  // test_im2col
