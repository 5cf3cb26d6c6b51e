// The head permutation on the GPU (kernels/cuda/heads_permute.cu) against
// kernels/cpu/heads_permute.cpp, both directions, bit for bit (it is a copy): empty
// shapes, one element, parts 1 and 3, head sizes below and above a warp and not a
// multiple of 4, a GPT's layer; outputs start poisoned, so a missed element shows.
#include <string>
#include <vector>

#include "kernels/cpu/heads_permute.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/heads_permute.cuh"

namespace {

using namespace tandem::gpu_test;

void check(int batch, int seq, int parts, int heads, int head_dim, cudaStream_t stream) {
  const std::string shape = std::to_string(batch) + " x " + std::to_string(seq) + " x " + std::to_string(parts) +
                            " x " + std::to_string(heads) + " x " + std::to_string(head_dim);
  const size_t n = static_cast<size_t>(batch) * seq * parts * heads * head_dim;
  std::vector<float> seq_layout = random_floats(n, 80), head_layout = random_floats(n, 81);
  std::vector<float> want_heads(n), want_seq(n);
  tandem::cpu::heads_permute(seq_layout.data(), want_heads.data(), batch, seq, parts, heads, head_dim, true);
  tandem::cpu::heads_permute(want_seq.data(), head_layout.data(), batch, seq, parts, heads, head_dim, false);

  DeviceBuffer<float> d_seq = upload(seq_layout), d_heads(n);
  poison(d_heads);
  tandem::cuda::heads_permute(at(d_seq), at(d_heads), batch, seq, parts, heads, head_dim, true, stream);
  sync(stream);
  GPU_CHECK("heads_permute", shape, "to heads, bitwise the CPU's", bitwise_equal(download(d_heads), want_heads));

  DeviceBuffer<float> d_heads2 = upload(head_layout), d_seq2(n);
  poison(d_seq2);
  tandem::cuda::heads_permute(at(d_seq2), at(d_heads2), batch, seq, parts, heads, head_dim, false, stream);
  sync(stream);
  GPU_CHECK("heads_permute", shape, "to sequence, bitwise the CPU's", bitwise_equal(download(d_seq2), want_seq));
}

}  // namespace

int main() {
  return tandem::gpu_test::run("heads_permute", [](cudaStream_t stream) {
    check(0, 4, 3, 2, 8, stream);
    check(2, 0, 3, 2, 8, stream);
    check(1, 1, 1, 1, 1, stream);
    check(2, 3, 3, 2, 5, stream);
    check(3, 17, 1, 4, 7, stream);
    check(2, 33, 3, 3, 33, stream);
    check(8, 256, 3, 6, 64, stream);  // a GPT's q, k, v at an eighth of its batch
    check(8, 256, 1, 6, 64, stream);  // its attention output
    GPU_CHECK_THROWS("heads_permute", "1 x 2 x 1 x 1 x 4", "overlapping layouts", [&] {
      DeviceBuffer<float> d(12);
      tandem::cuda::heads_permute(d.data(), d.data() + 4, 1, 2, 1, 1, 4, true, stream);
    }());
    GPU_CHECK_THROWS("heads_permute", "-1 x 2 x 1 x 1 x 4", "a negative batch",
                     tandem::cuda::heads_permute(nullptr, nullptr, -1, 2, 1, 1, 4, true, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
