// precision = 'tf32' | 'bf16' on the CPU (engine/core/precision.hpp): the rounding
// itself (to nearest, ties to even, the special values), and that the CPU device's
// GEMMs and convolutions compute exactly the float32 product of rounded inputs
// (bit for bit, every transpose, leading dimensions wider than the matrix, k = 0,
// batched; bf16 convolutions also round each output once), while the default device
// stays plain float32.
#include <boost/test/unit_test.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"
#include "engine/core/precision.hpp"
#include "kernels/cpu/bf16_wire.hpp"
#include "kernels/cpu/round_mantissa.hpp"
#include "tests/unit/grad_check.hpp"

BOOST_AUTO_TEST_SUITE(test_reduced_precision)  // ctest's unit.test_reduced_precision (tests/CMakeLists.txt)

using namespace tandem;

namespace {

constexpr int kBf16 = 7, kTf32 = 10;

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (bits_of(a[i]) != bits_of(b[i])) return false;
  return true;
}

std::vector<float> rounded(const std::vector<float>& v, int bits) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = cpu::round_mantissa(v[i], bits);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(names_parse_and_unknown_ones_fail) {
  for (const char* name : {"fp32", "tf32", "bf16"})
    BOOST_TEST(std::string(precision_name(parse_precision(name))) == name);
  BOOST_TEST(std::string(precision_name(Precision::bf16)) == "bf16");
  BOOST_CHECK_THROW(parse_precision("fp16"), Error);
  BOOST_TEST(gemm_mantissa_bits(Precision::bf16) == kBf16);
  BOOST_TEST(conv_mantissa_bits(Precision::bf16) == kBf16);
  BOOST_TEST(conv_mantissa_bits(Precision::tf32) == kTf32);
  // Only bf16 convolutions round their outputs (cuDNN writes them as bfloat16).
  BOOST_TEST(conv_output_mantissa_bits(Precision::bf16) == kBf16);
  BOOST_TEST(conv_output_mantissa_bits(Precision::tf32) == 23);
  BOOST_TEST(conv_output_mantissa_bits(Precision::fp32) == 23);
  BOOST_TEST(gemm_mantissa_bits(Precision::fp32) == 23);
}

BOOST_AUTO_TEST_CASE(rounding_is_to_nearest_with_ties_to_even) {
  const float ulp = std::ldexp(1.0f, -kBf16);  // bfloat16's spacing at 1
  BOOST_TEST(cpu::round_mantissa(1.0f, kBf16) == 1.0f);
  BOOST_TEST(cpu::round_mantissa(1.0f + ulp, kBf16) == 1.0f + ulp);  // representable: unchanged
  // Halfway cases go to the even neighbour: 1 (even) below, 1 + 2 ulp above 1 + ulp (odd).
  BOOST_TEST(cpu::round_mantissa(1.0f + ulp / 2, kBf16) == 1.0f);
  BOOST_TEST(cpu::round_mantissa(1.0f + 1.5f * ulp, kBf16) == 1.0f + 2 * ulp);
  // Past halfway rounds up, short of it down, negative values alike.
  BOOST_TEST(cpu::round_mantissa(1.0f + ulp / 2 + std::ldexp(1.0f, -20), kBf16) == 1.0f + ulp);
  BOOST_TEST(cpu::round_mantissa(1.0f + ulp / 2 - std::ldexp(1.0f, -20), kBf16) == 1.0f);
  BOOST_TEST(cpu::round_mantissa(-(1.0f + 1.5f * ulp), kBf16) == -(1.0f + 2 * ulp));
  // TF32 keeps 10 bits.
  const float tulp = std::ldexp(1.0f, -kTf32);
  BOOST_TEST(cpu::round_mantissa(1.0f + tulp + tulp / 4, kTf32) == 1.0f + tulp);
  BOOST_TEST(cpu::round_mantissa(1.0f + tulp / 2, kTf32) == 1.0f);
  // A carry out of the mantissa moves the exponent: just under 2 rounds to 2.
  BOOST_TEST(cpu::round_mantissa(std::nextafter(2.0f, 0.0f), kBf16) == 2.0f);
  // 23 bits: float32 itself, nothing changes.
  BOOST_TEST(cpu::round_mantissa(1.0f + FLT_EPSILON, 23) == 1.0f + FLT_EPSILON);
  // Every result has its dropped bits zero.
  for (float x : {3.14159f, -2.71828e-20f, 6.02e23f, 1e-40f})
    BOOST_TEST((bits_of(cpu::round_mantissa(x, kBf16)) & 0xFFFFu) == 0u);
}

BOOST_AUTO_TEST_CASE(special_values_pass_and_overflow_goes_to_infinity) {
  const float inf = std::numeric_limits<float>::infinity();
  BOOST_TEST(std::isnan(cpu::round_mantissa(std::numeric_limits<float>::quiet_NaN(), kBf16)));
  BOOST_TEST(cpu::round_mantissa(inf, kBf16) == inf);
  BOOST_TEST(cpu::round_mantissa(-inf, kTf32) == -inf);
  BOOST_TEST(cpu::round_mantissa(FLT_MAX, kBf16) == inf);  // past bfloat16's largest finite
  BOOST_TEST(cpu::round_mantissa(-FLT_MAX, kTf32) == -inf);
  BOOST_TEST(cpu::round_mantissa(0.0f, kBf16) == 0.0f);
  BOOST_TEST(std::signbit(cpu::round_mantissa(-0.0f, kBf16)));
  // The smallest float32 subnormal is below half of bfloat16's smallest: it goes to 0.
  BOOST_TEST(cpu::round_mantissa(std::ldexp(1.0f, -149), kBf16) == 0.0f);
}

// Gradients on the wire in bfloat16 (comm.dtype = 'bf16'): 16 bits that read back as
// the float32 rounded to 7 mantissa bits, NaN still NaN (whatever its payload), the
// infinities and overflow as a conversion gives them; the sum of parts in float32.
BOOST_AUTO_TEST_CASE(bf16_wire_keeps_the_rounded_value_in_16_bits) {
  const float nan_low_payload = [] {
    const uint32_t u = 0x7F800001u;  // a NaN whose payload lies in the low 16 bits alone
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }();
  const std::vector<float> x{1.0f, -3.14159f, 1e-30f, 65504.7f, std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(), FLT_MAX, nan_low_payload, 0.0f, -0.0f};
  std::vector<uint16_t> wire(x.size());
  std::vector<float> back(x.size());
  cpu::to_bf16(x.data(), x.size(), wire.data());
  cpu::from_bf16(wire.data(), wire.size(), back.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = cpu::round_mantissa(x[i], 7);
    if (std::isnan(want))
      BOOST_TEST(std::isnan(back[i]), "element " << i);
    else
      BOOST_TEST(std::memcmp(&back[i], &want, sizeof want) == 0, "element " << i << ": " << back[i] << " vs " << want);
  }
  BOOST_TEST(std::isinf(back[6]));  // FLT_MAX rounds past bfloat16's largest finite
  std::vector<float> acc{0.5f, 1.0f};
  const std::vector<uint16_t> part{wire[0], wire[1]};
  cpu::add_bf16(part.data(), part.size(), acc.data());
  BOOST_TEST(acc[0] == 1.5f);
  BOOST_TEST(acc[1] == 1.0f + cpu::round_mantissa(-3.14159f, 7));
}

BOOST_AUTO_TEST_CASE(round_matrix_reads_only_the_matrix_within_its_leading_dimension) {
  const int rows = 3, cols = 4, ld = 6;
  std::vector<float> src(static_cast<size_t>(rows) * ld);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 1.0f + 0.001f * static_cast<float>(i);
  std::vector<float> dst(static_cast<size_t>(rows) * cols, -1.0f);
  cpu::round_matrix(src.data(), rows, cols, ld, kBf16, dst.data());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      BOOST_TEST(dst[static_cast<size_t>(r) * cols + c] == cpu::round_mantissa(src[static_cast<size_t>(r) * ld + c], kBf16));
}

// The bf16 device's GEMM is the float32 GEMM of the rounded operands, bit for bit,
// for every transpose, with padded leading dimensions, and keeps C = beta C at k = 0.
BOOST_AUTO_TEST_CASE(bf16_gemm_is_the_float32_product_of_rounded_inputs) {
  Device& fp32 = cpu_device();
  Device& bf16 = cpu_device(Precision::bf16);
  const int m = 5, n = 7;
  for (int k : {0, 1, 9})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
        const int lda = a_cols + 3, ldb = b_cols + 2, ldc = n + 1;
        const auto a = testing::random_vector(static_cast<size_t>(a_rows) * lda + 1, 10 + k);
        const auto b = testing::random_vector(static_cast<size_t>(b_rows) * ldb + 1, 20 + k);
        const auto c0 = testing::random_vector(static_cast<size_t>(m) * ldc, 30 + k);
        std::vector<float> got = c0, want = c0, plain = c0;
        bf16.gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, got.data(), ldc);
        const auto ra = rounded(a, kBf16), rb = rounded(b, kBf16);
        fp32.gemm(ta, tb, m, n, k, 0.5f, ra.data(), lda, rb.data(), ldb, 0.25f, want.data(), ldc);
        BOOST_TEST(same_bits(got, want), "k " << k << " ta " << ta << " tb " << tb);
        fp32.gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, plain.data(), ldc);
        if (k == 0) BOOST_TEST(same_bits(got, plain), "k = 0 leaves beta C");
        // Rounded, but to bfloat16's precision: within 2^-7 of the sum of |a||b| (two
        // roundings of 2^-8 each).
        if (k > 0) {
          bool differs = false;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              const size_t at = static_cast<size_t>(i) * ldc + j;
              double bound = 0.0;
              for (int p = 0; p < k; ++p) {
                const float av = ta ? a[static_cast<size_t>(p) * lda + i] : a[static_cast<size_t>(i) * lda + p];
                const float bv = tb ? b[static_cast<size_t>(j) * ldb + p] : b[static_cast<size_t>(p) * ldb + j];
                bound += std::fabs(0.5 * av * bv);
              }
              differs = differs || got[at] != plain[at];
              BOOST_TEST(std::fabs(got[at] - plain[at]) <= std::ldexp(bound, -7) + 1e-6, "at " << i << "," << j);
            }
          BOOST_TEST(differs, "bf16 rounding changed nothing (k " << k << ")");
        }
      }
}

BOOST_AUTO_TEST_CASE(tf32_and_batched_gemms_round_too) {
  Device& fp32 = cpu_device();
  const int m = 4, n = 3, k = 6, count = 3;
  const int64_t sa = m * k + 5, sb = k * n + 2, sc = m * n + 1;
  const auto a = testing::random_vector(static_cast<size_t>(sa * count), 1);
  const auto b = testing::random_vector(static_cast<size_t>(sb * count), 2);
  for (Precision p : {Precision::tf32, Precision::bf16}) {
    const int bits = gemm_mantissa_bits(p);
    std::vector<float> got(static_cast<size_t>(sc * count), 0.0f), want = got;
    cpu_device(p).gemm_batched(false, false, m, n, k, 1.0f, a.data(), k, sa, b.data(), n, sb, 0.0f, got.data(), n, sc,
                               count);
    const auto ra = rounded(a, bits), rb = rounded(b, bits);
    fp32.gemm_batched(false, false, m, n, k, 1.0f, ra.data(), k, sa, rb.data(), n, sb, 0.0f, want.data(), n, sc,
                      count);
    BOOST_TEST(same_bits(got, want), precision_name(p));
  }
}

// A convolution in tf32 is the float32 convolution of TF32-rounded inputs; in bf16,
// of bfloat16-rounded inputs with each output (y, dW, dx) rounded to bfloat16 once,
// after the float32 sums over the whole batch: forward and both gradients, bit for
// bit.
BOOST_AUTO_TEST_CASE(convolutions_round_their_inputs_and_bf16_its_outputs) {
  ConvShape s;
  s.batch = 2, s.in_channels = 3, s.height = 6, s.width = 5, s.out_channels = 4, s.kernel = 3, s.pad = 1;
  const size_t xs = s.x_size(), ws = s.w_size(), ys = s.y_size();
  const auto x = testing::random_vector(xs, 3), w = testing::random_vector(ws, 4), dy = testing::random_vector(ys, 5);
  Device& fp32 = cpu_device();
  for (Precision p : {Precision::tf32, Precision::bf16}) {
    const int in_bits = p == Precision::bf16 ? kBf16 : kTf32, out_bits = p == Precision::bf16 ? kBf16 : 23;
    const auto rx = rounded(x, in_bits), rw = rounded(w, in_bits), rdy = rounded(dy, in_bits);
    Device& dev = cpu_device(p);
    std::vector<float> y(ys), want_y(ys), dw(ws), want_dw(ws), dx(xs), want_dx(xs);
    dev.conv2d_forward(s, x.data(), w.data(), y.data());
    fp32.conv2d_forward(s, rx.data(), rw.data(), want_y.data());
    BOOST_TEST(same_bits(y, rounded(want_y, out_bits)), precision_name(p));
    dev.conv2d_backward(s, x.data(), w.data(), dy.data(), dw.data(), dx.data());
    fp32.conv2d_backward(s, rx.data(), rw.data(), rdy.data(), want_dw.data(), want_dx.data());
    // dx's GEMM reads W and dy; dW's reads dy and the columns of x: all rounded.
    BOOST_TEST(same_bits(dw, rounded(want_dw, out_bits)), precision_name(p));
    BOOST_TEST(same_bits(dx, rounded(want_dx, out_bits)), precision_name(p));
    if (p == Precision::bf16) {
      // The outputs were rounded: the unrounded sums have low bits a bfloat16 lacks.
      BOOST_TEST(!same_bits(want_y, rounded(want_y, kBf16)));
      BOOST_TEST(!same_bits(want_dw, rounded(want_dw, kBf16)));
      BOOST_TEST(!same_bits(want_dx, rounded(want_dx, kBf16)));
    }
  }
  // The default device is plain float32.
  const auto rx = rounded(x, kTf32), rw = rounded(w, kTf32);
  std::vector<float> y(ys), rounded_y(ys);
  fp32.conv2d_forward(s, x.data(), w.data(), y.data());
  fp32.conv2d_forward(s, rx.data(), rw.data(), rounded_y.data());
  BOOST_TEST(!same_bits(y, rounded_y));
}

BOOST_AUTO_TEST_SUITE_END()  // test_reduced_precision
