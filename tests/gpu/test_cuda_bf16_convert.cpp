// to_bf16 and from_bf16 (kernels/cuda/bf16_convert.cu), the conversions around the
// bf16 convolutions, against the CPU's rounding to 7 mantissa bits
// (kernels/cpu/round_mantissa.hpp), bit for bit: values across every binade,
// subnormals, ties both ways, values that round up into the next binade or past the
// largest finite bfloat16 into infinity, infinities, NaN (a NaN either way), counts
// with a tail of 1 to 3, and buffers one element off alignment (the scalar path).
// Exits 77 without a GPU.
//
// Written in a session without a GPU: it compiles, and has not run yet.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cpu/round_mantissa.hpp"
#include "kernels/cuda/bf16_convert.cuh"

namespace {

using namespace tandem::gpu_test;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The hard cases, then random values spread over the exponent range.
std::vector<float> inputs(size_t random_count) {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f,
                          from_bits(0x3F808000u),  // 1 + 2^-8: a tie, rounds to even (down)
                          from_bits(0x3F818000u),  // 1 + 3 * 2^-8: a tie, rounds to even (up)
                          from_bits(0x3F808001u),  // just above the tie: up
                          from_bits(0x3FFFFFFFu),  // rounds up into the next binade (2)
                          std::numeric_limits<float>::max(),  // past bfloat16's largest: infinity
                          from_bits(0x7F7F7FFFu),  // just below the halfway to infinity: stays finite
                          std::numeric_limits<float>::denorm_min(), from_bits(0x00018000u), from_bits(0x007FFFFFu),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> r = random_floats(random_count, 90);
  for (size_t i = 0; i < random_count; ++i) v.push_back(std::ldexp(r[i], static_cast<int>(i % 250) - 125));
  return v;
}

void check(size_t count, size_t offset, cudaStream_t stream) {
  std::vector<float> x = inputs(count > 17 ? count - 17 : 0);
  x.resize(count);
  std::vector<float> want = x;
  tandem::cpu::round_in_place(want.data(), want.size(), 7);
  DeviceBuffer<float> d_x = upload(x, offset), d_y(count + offset);
  DeviceBuffer<uint16_t> d_half(count + offset);
  poison(d_y);
  tandem::cuda::to_bf16(at(d_x, offset), at(d_half, offset), count, stream);
  tandem::cuda::from_bf16(at(d_half, offset), at(d_y, offset), count, stream);
  sync(stream);
  const std::vector<float> got = download(d_y, offset);
  size_t wrong = 0, first = count;
  for (size_t i = 0; i < count; ++i) {
    const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : bits_of(got[i]) == bits_of(want[i]);
    if (!same && wrong++ == 0) first = i;
  }
  const std::string shape = std::to_string(count) + " elements, offset " + std::to_string(offset);
  GPU_CHECK("bf16 round trip", shape, "every value the CPU's rounding, bit for bit", wrong == 0);
  if (wrong)
    std::printf("  %zu wrong, the first at %zu: %a became %a, the CPU rounds it to %a\n", wrong, first, x[first],
                got[first], want[first]);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("bf16_convert", [](cudaStream_t stream) {
    for (size_t count : {size_t{0}, size_t{17}, size_t{18}, size_t{19}, size_t{20}, size_t{4099}, (size_t{1} << 22) + 3})
      for (size_t offset : {size_t{0}, size_t{1}}) check(count, offset, stream);
    float x = 0.0f;
    GPU_CHECK_THROWS("to_bf16", "3 elements", "a null y", tandem::cuda::to_bf16(&x, nullptr, 3, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
