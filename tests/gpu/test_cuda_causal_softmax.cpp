// The causal softmax on the GPU (kernels/cuda/causal_softmax.cu) against
// kernels/cpu/causal_softmax.cpp, forward and backward: no matrices, seq 0 and 1,
// rows shorter and longer than a warp (7, 33, 257, 1024 columns), scales 1 and
// 1/sqrt(64), large scores (the max subtraction), in place (att = scores, dscores =
// datt). The upper triangles of scores and datt hold NaN: a kernel that reads them
// turns its row NaN; the outputs' upper triangles must be exactly 0 (they start
// poisoned).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/causal_softmax.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/causal_softmax.cuh"

namespace {

using namespace tandem::gpu_test;

// NaN above the diagonal of every matrix.
void mask_upper(std::vector<float>& a, int64_t mats, int seq) {
  for (int64_t m = 0; m < mats; ++m)
    for (int i = 0; i < seq; ++i)
      for (int j = i + 1; j < seq; ++j) a[(static_cast<size_t>(m) * seq + i) * seq + j] = NAN;
}

bool upper_zero(const std::vector<float>& a, int64_t mats, int seq) {
  for (int64_t m = 0; m < mats; ++m)
    for (int i = 0; i < seq; ++i)
      for (int j = i + 1; j < seq; ++j)
        if (a[(static_cast<size_t>(m) * seq + i) * seq + j] != 0.0f) return false;
  return true;
}

void check(int64_t mats, int seq, float scale, float range, cudaStream_t stream) {
  const std::string shape = std::to_string(mats) + " x " + std::to_string(seq) + "^2, scale " +
                            std::to_string(scale) + ", scores in +-" + std::to_string(range);
  const size_t n = static_cast<size_t>(mats) * seq * seq;
  std::vector<float> scores = random_floats(n, 70, -range, range), datt = random_floats(n, 71, -1.0f, 1.0f);
  mask_upper(scores, mats, seq);
  mask_upper(datt, mats, seq);
  std::vector<float> want_att(n), want_d(n);
  tandem::cpu::causal_softmax_forward(scores.data(), want_att.data(), mats, seq, scale);
  tandem::cpu::causal_softmax_backward(want_att.data(), datt.data(), want_d.data(), mats, seq, scale);

  DeviceBuffer<float> d_scores = upload(scores), d_att(n);
  poison(d_att);
  tandem::cuda::causal_softmax_forward(at(d_scores), at(d_att), mats, seq, scale, stream);
  sync(stream);
  const std::vector<float> att = download(d_att);
  GPU_CHECK_CLOSE("causal_softmax_forward", shape, "att", att, want_att, 1e-5);
  GPU_CHECK("causal_softmax_forward", shape, "zeros above the diagonal", upper_zero(att, mats, seq));

  // Backward from the CPU's att, so the two sides see the same input.
  DeviceBuffer<float> d_ref_att = upload(want_att), d_datt = upload(datt), d_d(n);
  poison(d_d);
  tandem::cuda::causal_softmax_backward(at(d_ref_att), at(d_datt), at(d_d), mats, seq, scale, stream);
  sync(stream);
  const std::vector<float> d = download(d_d);
  GPU_CHECK_CLOSE("causal_softmax_backward", shape, "dscores", d, want_d, 1e-5);
  GPU_CHECK("causal_softmax_backward", shape, "zeros above the diagonal", upper_zero(d, mats, seq));

  tandem::cuda::causal_softmax_forward(at(d_scores), at(d_scores), mats, seq, scale, stream);  // att = scores
  tandem::cuda::causal_softmax_backward(at(d_ref_att), at(d_datt), at(d_datt), mats, seq, scale, stream);  // = datt
  sync(stream);
  GPU_CHECK_CLOSE("causal_softmax_forward", shape, "att in place of scores", download(d_scores), want_att, 1e-5);
  GPU_CHECK_CLOSE("causal_softmax_backward", shape, "dscores in place of datt", download(d_datt), want_d, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("causal_softmax", [](cudaStream_t stream) {
    const struct {
      int64_t mats;
      int seq;
    } shapes[] = {{0, 5}, {3, 0}, {1, 1}, {2, 7}, {5, 33}, {24, 64}, {3, 257}, {2, 1024}};
    for (const auto& s : shapes)
      for (float scale : {1.0f, 0.125f})
        for (float range : {3.0f, 80.0f}) check(s.mats, s.seq, scale, range, stream);
    check(64 * 6 / 16, 256, 0.125f, 4.0f, stream);  // a GPT's layer, a sixteenth of its batch
    GPU_CHECK_THROWS("causal_softmax_forward", "2 x 3^2", "a null scores",
                     tandem::cuda::causal_softmax_forward(nullptr, nullptr, 2, 3, 1.0f, stream));
    GPU_CHECK_THROWS("causal_softmax_forward", "-1 x 3^2", "a negative matrix count",
                     tandem::cuda::causal_softmax_forward(nullptr, nullptr, -1, 3, 1.0f, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
