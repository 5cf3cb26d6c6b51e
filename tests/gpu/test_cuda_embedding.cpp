// The token + position embedding on the GPU (kernels/cuda/embedding.cu) against
// kernels/cpu/embedding.cpp: forward, and backward's two gradients (dwte accumulated
// onto what it held, dwpe overwritten on its first seq rows and left alone beyond).
// Shapes: an empty batch, one token, dims not a multiple of 4 or 32, a vocabulary
// larger and smaller than the batch, a GPT's batch (64 x 256 tokens, 384 wide, 256
// byte tokens). Backward runs twice from the same start to show it is deterministic
// (bitwise). Bad tokens (vocab, -1, 2.5) make their row of y NaN and add nothing to
// dwte, as kernels/cuda/embedding.cuh promises.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/embedding.hpp"
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include "kernels/cuda/embedding.cuh"

namespace {

using namespace tandem::gpu_test;

std::vector<float> random_tokens(size_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> t(n);
  for (auto& v : t) v = static_cast<float>(rng() % static_cast<unsigned>(vocab));
  return t;
}

void check(int batch, int seq, int dim, int vocab, cudaStream_t stream) {
  const std::string shape = std::to_string(batch) + " x " + std::to_string(seq) + " x " + std::to_string(dim) +
                            ", vocab " + std::to_string(vocab);
  const int wpe_rows = seq + 3;  // more positions than this batch uses: the extra rows stay as they were
  const size_t positions = static_cast<size_t>(batch) * seq, n = positions * dim;
  const std::vector<float> tokens = random_tokens(positions, vocab, 90);
  const std::vector<float> wte = random_floats(static_cast<size_t>(vocab) * dim, 91),
                           wpe = random_floats(static_cast<size_t>(wpe_rows) * dim, 92),
                           dy = random_floats(n, 93), dwte0 = random_floats(wte.size(), 94),
                           dwpe0 = random_floats(wpe.size(), 95);
  std::vector<float> want_y(n), want_dwte = dwte0, want_dwpe = dwpe0;
  tandem::cpu::embedding_forward(tokens.data(), wte.data(), wpe.data(), batch, seq, dim, vocab, want_y.data());
  tandem::cpu::embedding_backward(tokens.data(), dy.data(), batch, seq, dim, vocab, want_dwte.data(),
                                  want_dwpe.data());

  DeviceBuffer<float> d_tokens = upload(tokens), d_wte = upload(wte), d_wpe = upload(wpe), d_dy = upload(dy),
                      d_y(n);
  poison(d_y);
  tandem::cuda::embedding_forward(at(d_tokens), at(d_wte), at(d_wpe), batch, seq, dim, vocab, at(d_y), stream);
  sync(stream);
  GPU_CHECK_CLOSE("embedding_forward", shape, "y", download(d_y), want_y, 1e-6);

  std::vector<float> first_dwte;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer<float> d_dwte = upload(dwte0), d_dwpe = upload(dwpe0);
    tandem::cuda::embedding_backward(at(d_tokens), at(d_dy), batch, seq, dim, vocab, at(d_dwte), at(d_dwpe), stream);
    sync(stream);
    const std::vector<float> dwte = download(d_dwte);
    if (run == 0) {
      GPU_CHECK_CLOSE("embedding_backward", shape, "dwte (accumulated)", dwte, want_dwte, 1e-5);
      GPU_CHECK_CLOSE("embedding_backward", shape, "dwpe (first seq rows overwritten)", download(d_dwpe), want_dwpe,
                      1e-5);
      first_dwte = dwte;
    } else {
      GPU_CHECK("embedding_backward", shape, "dwte bitwise the same on a second run", bitwise_equal(dwte, first_dwte));
    }
  }
}

// Tokens 1, 4 and 6 of 8 are bad: their rows of y are NaN, the others right; dwte
// gets nothing from them, dwpe still does.
void check_bad_tokens(cudaStream_t stream) {
  const int batch = 2, seq = 4, dim = 37, vocab = 5;
  const std::string shape = "2 x 4 x 37, vocab 5";
  std::vector<float> tokens = {0, 5, 1, 4, -1, 3, 2.5f, 2};
  const std::vector<size_t> bad = {1, 4, 6};
  const std::vector<float> wte = random_floats(static_cast<size_t>(vocab) * dim, 96),
                           wpe = random_floats(static_cast<size_t>(seq) * dim, 97),
                           dy = random_floats(static_cast<size_t>(batch) * seq * dim, 98);
  std::vector<float> clean = tokens, dy_clean = dy;
  for (size_t i : bad) {
    clean[i] = 0.0f;
    for (int c = 0; c < dim; ++c) dy_clean[i * dim + c] = 0.0f;
  }
  std::vector<float> want_y(dy.size()), want_dwte(wte.size(), 0.0f), want_dwpe(wpe.size()), unused(wte.size());
  tandem::cpu::embedding_forward(clean.data(), wte.data(), wpe.data(), batch, seq, dim, vocab, want_y.data());
  for (size_t i : bad)
    for (int c = 0; c < dim; ++c) want_y[i * dim + c] = NAN;
  tandem::cpu::embedding_backward(clean.data(), dy_clean.data(), batch, seq, dim, vocab, want_dwte.data(),
                                  unused.data());
  tandem::cpu::embedding_backward(clean.data(), dy.data(), batch, seq, dim, vocab, unused.data(), want_dwpe.data());

  DeviceBuffer<float> d_tokens = upload(tokens), d_wte = upload(wte), d_wpe = upload(wpe), d_dy = upload(dy),
                      d_y(dy.size()), d_dwte = upload(std::vector<float>(wte.size(), 0.0f)), d_dwpe(wpe.size());
  tandem::cuda::embedding_forward(at(d_tokens), at(d_wte), at(d_wpe), batch, seq, dim, vocab, at(d_y), stream);
  tandem::cuda::embedding_backward(at(d_tokens), at(d_dy), batch, seq, dim, vocab, at(d_dwte), at(d_dwpe), stream);
  sync(stream);
  GPU_CHECK_CLOSE("embedding_forward", shape, "bad tokens' rows NaN, the rest right", download(d_y), want_y, 1e-6);
  GPU_CHECK_CLOSE("embedding_backward", shape, "bad tokens add nothing to dwte", download(d_dwte), want_dwte, 1e-5);
  GPU_CHECK_CLOSE("embedding_backward", shape, "bad tokens still count in dwpe", download(d_dwpe), want_dwpe, 1e-5);
}

}  // namespace

int main() {
  return tandem::gpu_test::run("embedding", [](cudaStream_t stream) {
    check(0, 4, 8, 5, stream);
    check(1, 1, 1, 1, stream);
    check(2, 3, 5, 7, stream);
    check(3, 17, 33, 11, stream);
    check(4, 9, 300, 1000, stream);  // more tokens in the vocabulary than in the batch; dim past one block
    check(8, 64, 384, 256, stream);
    check(64, 256, 384, 256, stream);  // a GPT's batch: 16384 tokens
    check_bad_tokens(stream);
    GPU_CHECK_THROWS("embedding_forward", "2 x 3 x 4, vocab 0", "an empty vocabulary",
                     tandem::cuda::embedding_forward(nullptr, nullptr, nullptr, 2, 3, 4, 0, nullptr, stream));
    GPU_CHECK_THROWS("embedding_backward", "2 x 3 x 4, vocab 5", "a null dwpe",
                     tandem::cuda::embedding_backward(nullptr, nullptr, 2, 3, 4, 5, nullptr, nullptr, stream));
  });
}
#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
