// Softmax cross-entropy on the GPU (kernels/cuda/softmax_xent.cu) against
// kernels/cpu/softmax_xent.cpp: the loss sum, the gradient, and the correct count
// exactly (ties included: logits drawn from a few integers, where the first maximum
// must win as on the CPU). Zero rows (totals {0, 0}), one class, one row, rows of
// more than a warp's 32 classes, 4096 classes, more than 65535 rows; without a
// gradient; in place (dlogits == logits); run twice for bitwise-equal totals; and
// labels outside [0, classes): no fault, counted wrong, NaN loss. Padded rows (a
// vocabulary padded to a multiple of 64): rows ld apart, the padded columns never
// predicted and their gradient 0, in place too.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/softmax_xent.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/softmax_xent.cuh"

namespace {

using namespace tandem::gpu_test;

std::vector<int32_t> random_labels(int rows, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, classes - 1);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (auto& l : labels) l = u(rng);
  return labels;
}

// ld > classes: rows of ld floats, the first `classes` predicted (a padded
// vocabulary); the padded columns hold the largest logits, which would win every
// arg-max and change the loss were they read.
void check(int rows, int classes, bool ties, cudaStream_t stream, int ld = 0) {
  if (ld == 0) ld = classes;
  const std::string shape = std::to_string(rows) + " x " + std::to_string(classes) +
                            (ld != classes ? " in rows of " + std::to_string(ld) : std::string()) +
                            (ties ? ", tied logits" : ", random logits");
  const size_t count = static_cast<size_t>(rows) * ld;
  std::vector<float> logits = random_floats(count, 30, -8.0f, 8.0f);
  if (ties)
    for (auto& z : logits) z = std::floor(z / 4.0f);  // {-2, -1, 0, 1}: many rows with tied maxima
  for (int r = 0; r < rows; ++r)
    for (int c = classes; c < ld; ++c) logits[static_cast<size_t>(r) * ld + c] = 50.0f;
  const std::vector<int32_t> labels = random_labels(rows, classes > 0 ? classes : 1, 31);

  std::vector<float> want_grad(count);
  int64_t want_correct = -1;
  const double want_loss = tandem::cpu::softmax_xent(logits.data(), labels.data(), rows, classes, want_grad.data(),
                                                     &want_correct, ld);

  DeviceBuffer<float> d_logits = upload(logits), d_grad(count);
  DeviceBuffer<int32_t> d_labels = upload(labels);
  DeviceBuffer<double> d_totals(2);
  poison(d_grad);
  poison(d_totals);
  tandem::cuda::softmax_xent(at(d_logits), at(d_labels), rows, classes, at(d_grad), at(d_totals), stream, false, ld);
  sync(stream);
  const std::vector<double> totals = download(d_totals);
  GPU_CHECK_CLOSE("softmax_xent", shape, "loss sum", std::vector<double>{totals[0]}, std::vector<double>{want_loss},
                  1e-9);
  GPU_CHECK("softmax_xent", shape, "correct count", totals[1] == static_cast<double>(want_correct));
  GPU_CHECK_CLOSE("softmax_xent", shape, "dlogits", download(d_grad), want_grad, 1e-5);

  // Deterministic: the same totals, bit for bit; and the same without a gradient.
  poison(d_totals);
  tandem::cuda::softmax_xent(at(d_logits), at(d_labels), rows, classes, nullptr, at(d_totals), stream, false, ld);
  sync(stream);
  GPU_CHECK("softmax_xent", shape, "totals without gradient, bitwise", bitwise_equal(download(d_totals), totals));
  // Accumulated: a second pass adds to the totals (x + x is exact: 2x, bit for bit).
  tandem::cuda::softmax_xent(at(d_logits), at(d_labels), rows, classes, nullptr, at(d_totals), stream,
                             /*accumulate=*/true, ld);
  sync(stream);
  GPU_CHECK("softmax_xent", shape, "totals accumulated, bitwise",
            bitwise_equal(download(d_totals), std::vector<double>{2 * totals[0], 2 * totals[1]}));

  // In place: the gradient overwrites the logits.
  poison(d_totals);
  tandem::cuda::softmax_xent(at(d_logits), at(d_labels), rows, classes, at(d_logits), at(d_totals), stream, false, ld);
  sync(stream);
  GPU_CHECK("softmax_xent", shape, "totals in place, bitwise", bitwise_equal(download(d_totals), totals));
  GPU_CHECK_CLOSE("softmax_xent", shape, "dlogits in place", download(d_logits), want_grad, 1e-5);
}

void check_bad_labels(cudaStream_t stream) {
  const int rows = 5, classes = 10;
  const std::string shape = "5 x 10, labels {3, -1, 10, 7, 2147483647}";
  std::vector<float> logits = random_floats(static_cast<size_t>(rows) * classes, 32);
  logits[0 * classes + 3] = 9.0f;  // row 0: label 3 is the arg-max (right)
  logits[3 * classes + 1] = 9.0f;  // row 3: label 7 is not (wrong)
  const std::vector<int32_t> labels = {3, -1, 10, 7, 2147483647};
  DeviceBuffer<float> d_logits = upload(logits), d_grad(logits.size());
  DeviceBuffer<int32_t> d_labels = upload(labels);
  DeviceBuffer<double> d_totals(2);
  tandem::cuda::softmax_xent(at(d_logits), at(d_labels), rows, classes, at(d_grad), at(d_totals), stream);
  sync(stream);
  const std::vector<double> totals = download(d_totals);
  GPU_CHECK("softmax_xent", shape, "an out-of-range label makes the loss NaN", std::isnan(totals[0]));
  GPU_CHECK("softmax_xent", shape, "and counts as wrong", totals[1] == 1.0);
  const std::vector<float> grad = download(d_grad);
  double row_sum = 0.0;  // row 1's gradient is the softmax alone: it sums to 1
  for (int c = 0; c < classes; ++c) row_sum += grad[static_cast<size_t>(classes) + c];
  GPU_CHECK("softmax_xent", shape, "the bad row's gradient is the softmax", std::fabs(row_sum - 1.0) < 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("softmax_xent", [](cudaStream_t stream) {
    // Each kernel and the seams between them: a thread per row up to 32 classes (a
    // block over several tiles past 2048 * 256 rows), a warp per row with the row in
    // registers up to 1024, streaming beyond (several rows per warp past 2048 * 8).
    const int shapes[][2] = {{0, 10},     {1, 1},      {1, 10},    {3, 33},     {7, 64},     {128, 10},
                             {1000, 10},  {8193, 10},  {300, 1000}, {64, 4096}, {70000, 10}, {5, 4097},
                             {3, 32},     {257, 31},   {600000, 10}, {20000, 40}, {3, 1024},  {3, 1025}};
    for (const auto& s : shapes)
      for (bool ties : {false, true}) check(s[0], s[1], ties, stream);
    check_bad_labels(stream);
    // GPT-2's 50257 padded to 50304 (streaming), a byte vocabulary's 250 in 256
    // (registers), and 10 classes in 16 (short rows: the warp layout takes them).
    for (bool ties : {false, true}) {
      check(3, 50257, ties, stream, 50304);
      check(100, 250, ties, stream, 256);
      check(300, 10, ties, stream, 16);
    }

    double totals[2];
    GPU_CHECK_THROWS("softmax_xent", "3 x 0", "rows without classes",
                     tandem::cuda::softmax_xent(nullptr, nullptr, 3, 0, nullptr, totals, stream));
    GPU_CHECK_THROWS("softmax_xent", "3 x 10", "null totals",
                     tandem::cuda::softmax_xent(nullptr, nullptr, 3, 10, nullptr, nullptr, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
